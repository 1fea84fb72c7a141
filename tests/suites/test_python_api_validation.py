"""Each suite's configuration is validated the same from Python as from the CLI: the
Python API entry points (`run_contamination`, `run_arms`, `run_strategy`) refuse an
invalid configuration with `ConfigurationError` (a `ValueError`), one line, before
anything is written to the store."""

from __future__ import annotations

import pytest

from benchwarden import ConfigurationError
from benchwarden.core.store import open_store


@pytest.fixture
def store(tmp_path):
    with open_store(tmp_path / "store.sqlite") as opened:
        yield opened


def assert_nothing_written(store) -> None:
    assert store.runs() == []


@pytest.mark.parametrize("change, words", [
    ({"probes": 1}, "--probes"),
    ({"concurrency": (1,)}, "--concurrency"),
    ({"concurrency": (2, 2)}, "twice"),
    ({"max_tokens": 16, "min_completion_tokens": 16}, "--min-completion-tokens"),
])
def test_run_contamination_refuses_an_invalid_config(store, change, words):
    from benchwarden.suites.contamination.driver import ContaminationConfig, run_contamination

    config = ContaminationConfig(url="http://127.0.0.1:9", **change)
    with pytest.raises(ConfigurationError, match=words) as raised:
        run_contamination(config, store, progress=False)
    assert "\n" not in str(raised.value)
    assert_nothing_written(store)


@pytest.mark.parametrize("change, words", [
    ({"trials": 0}, "--trials"),
    ({"limits": {"turn_cap": 0}}, "--turn-cap"),
    ({"limits": {"wall_clock": 0.0}}, "--wall-clock"),
    ({"isolation": "chroot"}, "isolation"),
])
def test_run_arms_refuses_an_invalid_config(store, change, words):
    from benchwarden.suites.arms.agents import CommandDriver, Limits
    from benchwarden.suites.arms.driver import run_arms
    from benchwarden.suites.arms.tasks import load_suite

    suite = load_suite("tracker")
    arguments = {"arms": [suite.arms[0].name], "tasks": [suite.tasks[0].id], "trials": 1,
                 "driver": CommandDriver("true"), "isolation": "none"}
    limits = change.pop("limits", {})
    arguments.update(change)
    with pytest.raises(ConfigurationError, match=words):
        run_arms(store, suite, "tracker", limits=Limits(**limits), **arguments)
    assert_nothing_written(store)


@pytest.mark.parametrize("seeds, settings, words", [
    ([1, 2], {"limit": -1}, "--limit"),
    ([1, 2], {"isolation": "chroot"}, "--isolation"),
    ([], {}, "no seeds"),
    ([1, 1], {}, "twice"),
    ([-3], {}, "non-negative"),
])
def test_run_strategy_refuses_an_invalid_config(store, seeds, settings, words):
    from benchwarden.suites.retrieval.driver import RunSettings, run_strategy
    from benchwarden.suites.retrieval.strategies import BUILTIN_STRATEGIES, parse_strategy

    spec = parse_strategy(sorted(BUILTIN_STRATEGIES)[0])
    with pytest.raises(ConfigurationError, match=words):
        run_strategy(store, spec, seeds, RunSettings(**settings))
    assert_nothing_written(store)


def test_the_cli_says_the_same_as_the_python_api(tmp_path):
    """The CLI maps the same ConfigurationError to exit 2 with the same words."""
    from click.testing import CliRunner

    from benchwarden.cli.main import cli

    result = CliRunner().invoke(cli, ["arms", "run", "--arm", "all", "--task", "all",
                                      "--trials", "0", "--driver", "command", "--command", "true",
                                      "--isolation", "none", "--store",
                                      str(tmp_path / "s.sqlite")])
    assert result.exit_code == 2
    assert "--trials and --turn-cap must be at least 1" in result.output
