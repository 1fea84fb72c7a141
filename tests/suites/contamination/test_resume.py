"""A killed run keeps what it measured; `--resume` sends only what is missing."""

from __future__ import annotations

import json

import pytest

from benchwarden.core.errors import RunInterrupted
from benchwarden.core.store import SQLiteStore
from benchwarden.suites.contamination.driver import ContaminationConfig, run_contamination
from benchwarden.suites.contamination.report import build_report
from tests.fakes import FakeOpenAIServer
from tests.suites.contamination.helpers import invoke


class KilledStore(SQLiteStore):
    """A store whose process "dies" (KeyboardInterrupt) instead of its Nth append."""

    def __init__(self, path, die_at_append: int) -> None:
        super().__init__(path)
        self.appends = 0
        self.die_at_append = die_at_append

    def append(self, records):
        self.appends += 1
        if self.appends == self.die_at_append:
            raise KeyboardInterrupt
        super().append(records)


def config(url: str) -> ContaminationConfig:
    return ContaminationConfig(url=url, probes=2, concurrency=(2, 4), max_tokens=64, seed=3)


# appends: prime ×2, ref_a ×2, ref_b ×2 (six solo records), rung c2 (one batch), rung c4 ...
KILL_AT_C4 = 8


def test_killed_run_keeps_its_records_and_resume_sends_only_the_missing(tmp_path):
    path = tmp_path / "store.sqlite"
    with FakeOpenAIServer("clean") as server:
        killed = KilledStore(path, KILL_AT_C4)
        with pytest.raises(RunInterrupted, match="--resume"):
            run_contamination(config(server.url), killed, progress=False)
        run_id = killed.runs()[0].run.run_id
        info = killed.run_info(run_id)
        assert info.end is not None and info.end.status == "interrupted"
        assert info.record_count == 6 + 2  # the c4 batch was never half-written
        partial = build_report(killed, run_id).to_json()
        killed.close()
        assert partial["verdict"]["kind"] == "fail"
        assert any("--resume" in warning for warning in partial["warnings"])
        assert {c["class"] for c in partial["cells"]
                if c["leg"] in ("c4", "post")} == {"unmeasured"}

        sent_before = server.chat_requests
        result = invoke(["contamination", "--resume", run_id[:30], "--store", str(path),
                         "--json", str(tmp_path / "resumed.json"), "--no-progress"])
        assert result.exit_code == 0, result.output
        assert server.chat_requests - sent_before == 4 + 2  # rung c4 and the post-check

    resumed = json.loads((tmp_path / "resumed.json").read_text())
    assert resumed["run"]["resumed_from"] == run_id
    assert resumed["verdict"]["kind"] == "pass" and resumed["score"]["compared"] == 6
    with SQLiteStore(path) as store:
        assert store.verify().ok
        records = store.records(scope=run_id)
        assert len(records) == 14
        assert {r.run_id for r in records if r.arm in ("c4", "post")} == {resumed["run"]["id"]}
        assert {r.run_id for r in records if r.arm == "c2"} == {run_id}
    shown = invoke(["show", resumed["run"]["id"], "--store", str(path),
                    "--json", str(tmp_path / "shown.json")])
    assert shown.exit_code == 0
    again = json.loads((tmp_path / "shown.json").read_text())
    assert again["score"] == resumed["score"] and again["cells"] == resumed["cells"]


def test_resuming_a_complete_run_is_refused_and_adds_no_run(tmp_path):
    path = tmp_path / "store.sqlite"
    with FakeOpenAIServer("clean") as server:
        with SQLiteStore(path) as store:
            first = run_contamination(config(server.url), store, progress=False).to_json()
        sent = server.chat_requests
        result = invoke(["contamination", "--resume", first["run"]["id"], "--store", str(path),
                         "--no-progress"])
        assert server.chat_requests == sent
    assert result.exit_code == 2, result.output
    assert "already complete" in result.output and len(result.output.strip().splitlines()) == 1
    with SQLiteStore(path) as store:
        assert len(store.runs()) == 1


def test_resume_of_an_unknown_run_is_a_config_error(tmp_path):
    missing = invoke(["contamination", "--resume", "nope", "--store", str(tmp_path / "s.sqlite")])
    assert missing.exit_code == 2 and "no store at" in missing.output
    assert not (tmp_path / "s.sqlite").exists()  # resuming never creates a store
    SQLiteStore(tmp_path / "s.sqlite").close()
    result = invoke(["contamination", "--resume", "nope", "--store", str(tmp_path / "s.sqlite")])
    assert result.exit_code == 2 and "not found" in result.output
