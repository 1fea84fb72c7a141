"""`benchwarden runs`, `show RUN` and `verify --store` through the CLI, on contamination runs.

`show` must work from the store alone: the server is stopped before it is called.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.fakes import FakeOpenAIServer
from tests.suites.contamination.helpers import contamination_args, invoke


@pytest.fixture
def finished_runs(tmp_path):
    """A store holding two finished contamination runs (pass, then fail), server gone."""
    store = tmp_path / "store.sqlite"
    reports = []
    for behaviour in ("clean", "drift"):
        path = tmp_path / f"{behaviour}.json"
        with FakeOpenAIServer(behaviour) as server:
            result = invoke(contamination_args(server.url, store, path))
        assert result.exit_code in (0, 1), result.output
        reports.append(json.loads(path.read_text()))
    return store, reports


def test_runs_lists_every_run_with_its_status(finished_runs):
    store, reports = finished_runs
    result = invoke(["runs", "--store", str(store)])
    assert result.exit_code == 0
    for report in reports:
        assert report["run"]["id"] in result.output
    assert result.output.count("completed") == 2 and "contamination" in result.output


def test_show_rerenders_a_run_from_the_store_alone(finished_runs, tmp_path):
    store, (clean, drift) = finished_runs
    for report, word in ((clean, "PASS"), (drift, "FAIL")):
        out = tmp_path / f"shown-{word}.json"
        result = invoke(["show", report["run"]["id"], "--store", str(store), "--json", str(out)])
        assert result.exit_code == 0, result.output
        assert word in result.output and "probe × leg" in result.output
        shown = json.loads(out.read_text())
        assert shown["score"] == report["score"]
        assert shown["cells"] == report["cells"] and shown["verdict"] == report["verdict"]
    latest = invoke(["show", "--latest", "--store", str(store)])
    assert "DIVERGED @ char" in latest.output


def test_show_of_an_unknown_run_exits_2(finished_runs):
    store, _ = finished_runs
    result = invoke(["show", "contamination-nope", "--store", str(store)])
    assert result.exit_code == 2 and "not found" in result.output


def test_verify_store_passes_then_names_the_tampered_record(finished_runs):
    store, _ = finished_runs
    result = invoke(["verify", "--store", str(store)])
    assert result.exit_code == 0 and "intact" in result.output

    raw = sqlite3.connect(store)
    seq = raw.execute("SELECT seq FROM entries WHERE kind = 'record' AND arm = 'c4' "
                      "ORDER BY seq LIMIT 1").fetchone()[0]
    raw.execute("DROP TRIGGER entries_refuse_update")
    changed = raw.execute(
        "UPDATE entries SET body = CAST(replace(CAST(body AS TEXT), '\"ok\"', '\"error\"') "
        "AS BLOB) WHERE seq = ?", (seq,)).rowcount
    raw.commit()
    raw.close()
    assert changed == 1
    result = invoke(["verify", "--store", str(store)])
    assert result.exit_code == 1
    assert f"entry {seq}" in result.output and "/c4/" in result.output
