"""Hostile input to the arms commands, each refused in one line, exit 2, before anything
is written. `arms run --suite package.module:attribute` names the user's code, which runs
when it is imported: a module that fails to import (a syntax error, an exception,
`sys.exit`) or a factory that raises names the suite and the failure, never "unexpected
..." exit 1 nor the exit code the module asked for. Options no run or view can use
(a URL of another scheme, an infinite limit, billions of trials, a floor of 0) are
refused the same way."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from benchwarden.cli.main import cli, run_command
from benchwarden.core.errors import EXIT_USAGE
from benchwarden.suites.arms.checkers import Fact, ReadCheck
from benchwarden.suites.arms.tasks import NAME_LIMIT, Arm, Suite, Task

_names = itertools.count()

HOSTILE_MODULES = {
    "raises at import": ("raise RuntimeError('suite boom')\n", "S", "RuntimeError: suite boom"),
    "syntax error": ("def (\n", "S", "SyntaxError"),
    "sys.exit at import": ("import sys\nsys.exit(3)\n", "S", "SystemExit: 3"),
    "factory raises": ("def make():\n    raise RuntimeError('factory boom')\n", "make",
                       "RuntimeError: factory boom"),
    "factory needs arguments": ("def make(x):\n    return x\n", "make", "TypeError"),
    "factory exits": ("import sys\ndef make():\n    sys.exit(3)\n", "make", "SystemExit: 3"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_MODULES))
def test_a_suite_module_that_fails_is_one_line_exit_2(case, tmp_path, monkeypatch, capsys):
    source, attribute, words = HOSTILE_MODULES[case]
    module = f"hostile_arms_suite_{next(_names)}"
    (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    store = tmp_path / "s.sqlite"
    code = run_command(cli, ["arms", "run", "--suite", f"{module}:{attribute}", "--arm", "all",
                             "--task", "all", "--driver", "command", "--command", "true",
                             "--isolation", "none", "--store", str(store)], "benchwarden")
    line = capsys.readouterr().err.strip()
    assert code == EXIT_USAGE, line
    assert line.startswith("benchwarden: error: suite "), line
    assert "\n" not in line and "unexpected" not in line, line
    assert f"{module}:{attribute}" in line and words in line, line
    assert not store.exists()


def test_a_library_function_that_needs_arguments_is_not_a_suite(tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    code = run_command(cli, ["arms", "run", "--suite", "json:loads", "--arm", "all", "--task",
                             "all", "--driver", "command", "--command", "true",
                             "--isolation", "none", "--store", str(store)], "benchwarden")
    line = capsys.readouterr().err.strip()
    assert code == EXIT_USAGE and "json.loads()" in line and "unexpected" not in line, line


@pytest.mark.parametrize("command", [["arms", "report"], ["arms", "compare", "a", "b"]])
@pytest.mark.parametrize("floor", ["0", "-1"])
def test_a_floor_below_one_sample_is_a_usage_error(command, floor, tmp_path, capsys):
    # a floor of 0 called a cell with no samples covered; it was accepted, exit 0
    code = run_command(cli, [*command, "--floor", floor, "--store", str(tmp_path / "s.sqlite")],
                       "benchwarden")
    line = capsys.readouterr().err.strip()
    assert code == EXIT_USAGE and "--floor" in line, line


RUN = ["arms", "run", "--arm", "cli", "--task", "open-issue-count", "--isolation", "none"]


@pytest.mark.parametrize("options, words", [
    # each trial failed on the URL as a harness error, and the run was recorded
    (["--driver", "openai", "--url", "ftp://x", "--model", "m", "--any-model"], "--url"),
    # refused only when the run's start was stored (JSON holds no infinity), exit 4
    (["--driver", "command", "--command", "true", "--wall-clock", "inf"], "--wall-clock"),
    (["--driver", "command", "--command", "true", "--command-timeout", "inf"],
     "--command-timeout"),
    # built its plan in memory until "unexpected MemoryError"
    (["--driver", "command", "--command", "true", "--trials", "99999999999"], "--trials"),
])
def test_a_run_no_trial_can_make_is_refused_before_anything_is_written(options, words,
                                                                       tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    code = run_command(cli, [*RUN, *options, "--store", str(store)], "benchwarden")
    line = capsys.readouterr().err.strip()
    assert code == EXIT_USAGE, line
    assert line.startswith("benchwarden: error: ") and words in line, line
    assert not store.exists()


def _suite(name: str = "named", arms: tuple[str, ...] = ("plain",),
           tasks: tuple[str, ...] = ("answer",), tiers: tuple[str, ...] = ("read",)) -> Suite:
    return Suite(name=name, bench_version="1", base_prompt="base",
                 arms=tuple(Arm(arm, "shell", "use the shell") for arm in arms),
                 tasks=tuple(Task(task, tiers[0], "say yes", ReadCheck((Fact("yes", ("yes",)),)))
                             for task in tasks),
                 environment=lambda arm, path: None, tiers=tiers)  # type: ignore[arg-type,return-value]


@pytest.mark.parametrize("kind", ["suite", "arm", "task", "tier"])
def test_a_name_past_the_limit_is_refused_in_one_line(kind):
    at_limit, past = "n" * NAME_LIMIT, "n" * (NAME_LIMIT + 1)

    def of(name: str) -> dict[str, Any]:
        return {"suite": {"name": name}, "arm": {"arms": (name,)}, "task": {"tasks": (name,)},
                "tier": {"tiers": (name,)}}[kind]

    assert _suite(**of(at_limit))  # a name of the limit's length is a name
    with pytest.raises(ValueError) as refused:
        _suite(**of(past))
    message = str(refused.value)
    assert f"a {kind} name of {NAME_LIMIT + 1:,} characters (at most {NAME_LIMIT})" in message
    assert "\n" not in message and len(message) < 2 * NAME_LIMIT


def test_duplicates_are_found_in_a_suite_of_many_tasks():
    # counted once per name: a name counted against the whole list each time is
    # quadratic, minutes at this size
    names = tuple(f"task-{number:06d}" for number in range(60_000))
    assert len(_suite(tasks=names).tasks) == 60_000
    with pytest.raises(ValueError, match=r"duplicate task names \['task-000007', 'task-059998'\]"):
        _suite(tasks=(*names, "task-059998", "task-000007"))
    with pytest.raises(ValueError, match=r"duplicate arm names \['plain'\]"):
        _suite(arms=("plain", "other", "plain"))


def test_a_wide_suite_looks_its_names_up_and_refuses_an_unknown_one_in_one_short_line():
    from benchwarden.core.errors import ConfigurationError
    from benchwarden.suites.arms.config import select

    names = tuple(f"task-{number:06d}" for number in range(60_000))
    suite = _suite(tasks=names, arms=("plain", "other"))
    assert suite.task("task-059999").id == "task-059999" and suite.arm("other").name == "other"
    for refused, words in ((lambda: suite.task("task-999999"),
                            "has no task 'task-999999'; tasks: task-000000, task-000001"),
                           (lambda: suite.arm("nope"), "has no arm 'nope'; arms: plain, other")):
        with pytest.raises(ValueError) as error:
            refused()
        assert words in str(error.value) and len(str(error.value)) < 600
    assert "and 59,980 more" in str(pytest.raises(ValueError, suite.task, "x").value)
    chosen = ",".join(names[::7])  # a long --tasks list, each name found by its set
    assert select(chosen, names, "tasks") == list(names[::7])
    with pytest.raises(ConfigurationError) as error:
        select(chosen + ",task-x,task-y", names, "tasks")
    message = str(error.value)
    assert message.startswith("unknown tasks task-x, task-y; known: task-000000, task-000001")
    assert "and 59,980 more (or all)" in message and "\n" not in message
    assert len(message) < 600
