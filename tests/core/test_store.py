"""The store: append-only, unique addresses, tamper-evident chain, no secrets."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings, strategies as st

from benchwarden.core.records import Record, RunEnd, TokenComponents
from benchwarden.core.provenance import stamp_run
from benchwarden.core.store import (CorruptStore, DuplicateRecord, SQLiteStore, StoreError,
                                    find_secrets, open_store)


def make_record(run_id: str = "run-1", arm: str = "a", task: str = "t", trial: int = 1,
                **payload: object) -> Record:
    return Record(suite="demo", scope=run_id, arm=arm, task=task, trial=trial, run_id=run_id,
                  outcome="ok", started_at=1.0, ended_at=2.5,
                  tokens=TokenComponents(fresh_input=3, output=4), payload=payload)


@pytest.fixture
def store(tmp_path):
    with SQLiteStore(tmp_path / "store.sqlite") as opened:
        opened.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="run-1"))
        yield opened


def test_records_round_trip_in_order(store):
    written = [make_record(task=str(i), value=i, text="é\u0001<script>") for i in range(5)]
    store.append(written)
    assert store.records(run_id="run-1") == written
    assert store.records(task="3") == [written[3]]


def test_duplicate_address_is_refused_and_named(store):
    store.append([make_record()])
    with pytest.raises(DuplicateRecord, match="demo/run-1/a/t/trial 1"):
        store.append([make_record(value="different payload")])
    assert len(store.records()) == 1


def test_duplicate_inside_one_batch_refuses_the_whole_batch(store):
    with pytest.raises(DuplicateRecord):
        store.append([make_record(task="x"), make_record(task="y"), make_record(task="x")])
    assert store.records() == []


def test_schema_refuses_update_and_delete(tmp_path, store):
    store.append([make_record()])
    raw = sqlite3.connect(tmp_path / "store.sqlite")
    with pytest.raises(sqlite3.DatabaseError, match="append-only: UPDATE refused"):
        raw.execute("UPDATE entries SET arm = 'b'")
    with pytest.raises(sqlite3.DatabaseError, match="append-only: DELETE refused"):
        raw.execute("DELETE FROM entries")
    raw.close()


def test_highest_trial_counts_gaps_and_never_reuses(store):
    store.append([make_record(trial=1), make_record(trial=4)])
    assert store.highest_trial("demo", "run-1", "a", "t") == 4
    assert store.highest_trial("demo", "run-1", "a", "other") == 0


def _tamper(path, sql):
    raw = sqlite3.connect(path)
    raw.execute("DROP TRIGGER entries_refuse_update")
    raw.execute("DROP TRIGGER entries_refuse_delete")
    raw.execute(sql)
    raw.commit()
    raw.close()


def test_verify_passes_an_untouched_store(store):
    store.append([make_record(task=str(i)) for i in range(3)])
    store.finish_run(RunEnd("run-1", 9.0, "completed", {}))
    report = store.verify()
    assert report.ok and report.checked == 5


@pytest.mark.parametrize("sql, expected", [
    ("UPDATE entries SET body = replace(body, '\"outcome\":\"ok\"', '\"outcome\":\"no\"') "
     "WHERE seq = 3", "entry 3, record demo/run-1/a/1/trial 1 (run run-1): its contents"),
    ("DELETE FROM entries WHERE seq = 2", "entry 3, record demo/run-1/a/1/trial 1 (run run-1): its link"),
    ("UPDATE entries SET arm = 'b' WHERE seq = 2", "entry 2, record demo/run-1/b/0"),
])
def test_verify_names_the_first_tampered_entry(tmp_path, store, sql, expected):
    store.append([make_record(task=str(i)) for i in range(3)])
    store.close()
    _tamper(tmp_path / "store.sqlite", sql)
    with SQLiteStore(tmp_path / "store.sqlite") as reopened:
        report = reopened.verify()
    assert not report.ok
    assert expected in report.first_broken


def test_run_with_a_credential_is_refused(tmp_path):
    with SQLiteStore(tmp_path / "s.sqlite") as store:
        run = stamp_run(suite="demo", bench_version="1", config={"api_key": "abc"})
        with pytest.raises(StoreError, match="config.api_key"):
            store.begin_run(run)
        assert store.runs() == []


def test_find_secrets_spares_env_var_names_and_token_counts():
    assert find_secrets({"api_key_env": "OPENAI_API_KEY", "max_tokens": 256}) == []
    assert find_secrets({"headers": {"Authorization": "Bearer x"}}) == ["headers.Authorization"]
    assert find_secrets({"extra": ["sk-abcdefghijkl"]}) == ["extra[0]"]


def test_a_file_that_is_not_a_store_gives_one_clear_line(tmp_path):
    bogus = tmp_path / "bogus.sqlite"
    bogus.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(CorruptStore, match="cannot be opened as a benchwarden store"):
        open_store(bogus)


def test_runs_and_run_end_are_listed(store):
    store.append([make_record()])
    assert store.runs()[0].end is None
    store.finish_run(RunEnd("run-1", 3.0, "completed", {"note": 1}))
    info = store.run_info("run-")  # a unique prefix is enough
    assert info.end.status == "completed" and info.record_count == 1
    with pytest.raises(DuplicateRecord):
        store.finish_run(RunEnd("run-1", 4.0, "completed", {}))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(1, 4)), max_size=12))
def test_any_append_sequence_keeps_addresses_unique_and_chain_intact(tmp_path_factory, cells):
    path = tmp_path_factory.mktemp("prop") / "s.sqlite"
    seen = set()
    with SQLiteStore(path) as store:
        for task, trial in cells:
            record = make_record(task=task, trial=trial)
            if (task, trial) in seen:
                with pytest.raises(DuplicateRecord):
                    store.append([record])
            else:
                store.append([record])
                seen.add((task, trial))
        assert {(r.task, r.trial) for r in store.records()} == seen
        assert store.verify().ok
