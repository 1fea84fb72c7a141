"""The suites fan out over a real local Ray cluster without knowing it: the same
numbers as in-process, through the real CLI."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchwarden.cli.main import cli
from benchwarden.core.store import open_store
from tests.conftest import require

SCRIPTED_AGENT = Path(__file__).resolve().parents[1] / "suites" / "arms" / "scripted_agent.py"


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, env={"COLUMNS": "200"})


@pytest.fixture(autouse=True)
def ray_available():
    require(importlib.util.find_spec("ray") is not None, "Ray", "pip install -e '.[ray]'")


@pytest.mark.ray
def test_retrieval_seeds_on_ray_score_exactly_as_in_process(tmp_path):
    reports = {}
    for executor in ("local", "ray"):
        path = tmp_path / f"{executor}.json"
        result = invoke("retrieval", "run", "--strategy", "substring", "--seeds", "1-3",
                        "--executor", executor, "--store", str(tmp_path / f"{executor}.sqlite"),
                        "--json", str(path))
        assert result.exit_code == 0, result.output
        reports[executor] = json.loads(path.read_text())
    assert reports["ray"]["seeds"] == reports["local"]["seeds"]
    assert reports["ray"]["summary"] == reports["local"]["summary"]


@pytest.mark.ray
def test_arms_trials_on_ray_are_recorded_like_local_ones(tmp_path):
    store = tmp_path / "arms.sqlite"
    result = invoke("arms", "run", "--suite", "tracker", "--arm", "cli",
                    "--task", "close-issue,open-issue-count", "--trials", "2",
                    "--driver", "command", "--command", f"{sys.executable} {SCRIPTED_AGENT} solve",
                    "--executor", "ray", "--store", str(store))
    assert result.exit_code == 0, result.output
    with open_store(store) as opened:
        records = opened.records(suite="arms")
        assert opened.verify().ok
    assert sorted((r.task, r.trial) for r in records) == [
        ("close-issue", 1), ("close-issue", 2), ("open-issue-count", 1), ("open-issue-count", 2)]
    assert {r.outcome for r in records} == {"pass"}
