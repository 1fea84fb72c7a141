"""A suite run into a real PostgreSQL store through the CLI, then read back by the
store commands: the suites never know which backend they write to."""

from __future__ import annotations

import json

import pytest

from benchwarden.core.store import open_store
from tests.conftest import fresh_postgres_database
from tests.fakes import FakeOpenAIServer
from tests.suites.contamination.helpers import contamination_args, invoke


@pytest.fixture
def postgres_store():
    with fresh_postgres_database("bw_test_cli") as url:
        yield url


@pytest.mark.postgres
def test_contamination_run_into_postgres_is_listed_shown_and_verified(tmp_path, postgres_store):
    report_path = tmp_path / "report.json"
    with FakeOpenAIServer("clean") as server:
        result = invoke(contamination_args(server.url, postgres_store, report_path))
    assert result.exit_code == 0, result.output
    report = json.loads(report_path.read_text())
    run_id = report["run"]["id"]

    listed = invoke(["runs", "--store", postgres_store])
    assert listed.exit_code == 0 and run_id[:20] in listed.output

    shown_path = tmp_path / "shown.json"
    shown = invoke(["show", run_id, "--store", postgres_store, "--json", str(shown_path)])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown_path.read_text())["score"] == report["score"]

    verified = invoke(["verify", "--store", postgres_store])
    assert verified.exit_code == 0 and "chain intact" in verified.output
    with open_store(postgres_store) as store:
        assert len(store.records(run_id=run_id)) == len(report["requests"])
        assert store.run_info(run_id).end.status == "completed"
