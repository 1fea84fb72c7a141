"""SQLite keeps record addresses trial first, and per-cell counts in `record_cells`.

The unique address index is (suite, scope, trial, arm, task), so a batch's records land
together however large the store; `highest_trial` and `cell_depth` read `record_cells`,
counted in the append's transaction. These tests hold that:
- the counts an append adds are those of its records (pure, property-tested), and the
  table agrees with the records after appends, including a refused batch (adds nothing);
- a store made with the cell-first index is read as it is (read-only: nothing changes)
  and upgraded when opened for writing (a line per step on stderr), then verifies;
- an address is still unique (one-line refusal naming it), and `verify` reports any
  edit of the derived counts.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchwarden.core.provenance import stamp_run
from benchwarden.core.store import DuplicateRecord, SQLiteStore, cell_counts, open_store
from tests.core.test_store_backends import make_record

addresses = st.lists(st.tuples(
    st.sampled_from(("record", "run", "run_end")), st.sampled_from(("s1", "s2")),
    st.sampled_from(("x", "y")), st.sampled_from(("a", "b")), st.sampled_from(("t", "u")),
    st.integers(0, 50), st.just("run")), max_size=40)


@given(addresses)
def test_cell_counts_are_the_records_per_cell_and_their_highest_trial(batch):
    records = [address for address in batch if address[0] == "record"]
    expected_counts = Counter(address[1:5] for address in records)
    counted = cell_counts(batch)
    assert {row[:4]: row[4] for row in counted} == dict(expected_counts)
    for suite, scope, arm, task, _, highest in counted:
        assert highest == max(address[5] for address in records
                              if address[1:5] == (suite, scope, arm, task))
    assert len(counted) == len(expected_counts)  # one row per cell


def _cells(path: Path) -> dict[tuple[str, ...], tuple[int, int]]:
    raw = sqlite3.connect(path)
    try:
        return {tuple(row[:4]): (row[4], row[5])
                for row in raw.execute("SELECT * FROM record_cells")}
    finally:
        raw.close()


def _index_names(path: Path) -> set[str]:
    raw = sqlite3.connect(path)
    try:
        return {row[0] for row in raw.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'entries'")}
    finally:
        raw.close()


def _fill(store: SQLiteStore) -> None:
    store.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="run-1"))
    store.append([make_record(arm=arm, task=task, trial=trial, scope="s")
                  for trial in (1, 2) for arm in ("a", "b") for task in ("t", "u")])
    store.append([make_record(arm="a", task="t", trial=5, scope="s")])


def test_cells_follow_appends_and_a_refused_batch_adds_nothing(tmp_path):
    path = tmp_path / "store.sqlite"
    with open_store(path) as store:
        _fill(store)
        before = _cells(path)
        assert before[("demo", "s", "a", "t")] == (3, 5)
        assert before[("demo", "s", "b", "u")] == (2, 2)
        assert store.cell_depth("demo", "s", "a", "t") == (3, 5)
        assert store.highest_trial("demo", "s", "b", "u") == 2
        with pytest.raises(DuplicateRecord) as refused:
            store.append([make_record(arm="c", task="t", trial=1, scope="s"),
                          make_record(arm="a", task="t", trial=2, scope="s")])
        message = str(refused.value)
        assert "\n" not in message and "demo/s/a/t/trial 2" in message
        assert _cells(path) == before and store.cell_depth("demo", "s", "c", "t") == (0, 0)
        assert store.verify().ok


def _to_cell_first_layout(path: Path) -> None:
    """The entries layout of a store made before the trial-first index."""
    raw = sqlite3.connect(path, isolation_level=None)
    try:
        raw.execute("DROP INDEX entries_record_address_by_trial")
        raw.execute("DROP TABLE record_cells")
        raw.execute("CREATE UNIQUE INDEX entries_record_address ON entries "
                    "(suite, scope, arm, task, trial) WHERE kind = 'record'")
    finally:
        raw.close()


def test_a_cell_first_store_is_read_as_it_is_and_upgraded_when_written(tmp_path, capfd):
    path = tmp_path / "old.sqlite"
    with open_store(path) as store:
        _fill(store)
    _to_cell_first_layout(path)
    capfd.readouterr()
    with open_store(path, create=False) as reader:  # read-only: answered from entries
        assert reader.cell_depth("demo", "s", "a", "t") == (3, 5)
        assert reader.highest_trial("demo", "s", "b", "u") == 2
        assert reader.verify().ok
    assert "entries_record_address" in _index_names(path)
    with open_store(path, create=False, read_only=False) as writer:
        steps = capfd.readouterr().err
        assert "counting the records of every cell" in steps
        assert "indexing record addresses trial first" in steps
        assert "dropping the cell-first address index" in steps
        names = _index_names(path)
        assert "entries_record_address_by_trial" in names
        assert "entries_record_address" not in names
        assert _cells(path)[("demo", "s", "a", "t")] == (3, 5)
        writer.append([make_record(arm="a", task="t", trial=6, scope="s")])
        assert writer.cell_depth("demo", "s", "a", "t") == (4, 6)
        with pytest.raises(DuplicateRecord, match="already holds record demo/s/b/u/trial 1"):
            writer.append([make_record(arm="b", task="u", trial=1, scope="s")])
        assert writer.verify().ok
    with open_store(path, create=False, read_only=False):  # once only
        assert capfd.readouterr().err == ""


@pytest.mark.parametrize("edit, wrong", [
    ("UPDATE record_cells SET records = records + 1 WHERE arm = 'a' AND task = 't'",
     "cell demo/s/a/t is missing or miscounted"),
    ("UPDATE record_cells SET highest_trial = 1 WHERE arm = 'a' AND task = 't'",
     "cell demo/s/a/t is missing or miscounted"),
    ("DELETE FROM record_cells WHERE arm = 'b' AND task = 'u'",
     "cell demo/s/b/u is missing or miscounted"),
    ("INSERT INTO record_cells VALUES ('demo', 's', 'z', 't', 1, 1)",
     "cell demo/s/z/t counts records the store does not hold"),
])
def test_verify_reports_edited_cell_counts(tmp_path, edit, wrong):
    path = tmp_path / "store.sqlite"
    with open_store(path) as store:
        _fill(store)
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute(edit)
    raw.close()
    with open_store(path, create=False) as reader:
        report = reader.verify()
    assert not report.ok and report.first_broken is None
    assert wrong in report.line() and "derived data edited" in report.line()
