"""A long run end (a contamination soak's rung digests: megabytes) is decoded once per
store object and shared by every reader of it; short ones are decoded each time; the
kept ends are bounded; and every way of reading an end gives the same end."""

from __future__ import annotations

import time

import pytest

from benchwarden.core import store as store_module
from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import RunEnd
from tests.core.test_store_backends import (  # noqa: F401 (fixtures)
    backend,
    postgres_database,
)


def _ended_run(store, summary_bytes: int, suite: str = "demo") -> str:
    run = stamp_run(suite=suite, bench_version="1", config={"scope": "s"})
    store.begin_run(run)
    store.finish_run(RunEnd(run.run_id, time.time(), "completed",
                            {"rungs": ["x" * 60] * max(1, summary_bytes // 64)}))
    return run.run_id


def _ends_read(store, run_id: str) -> list[RunEnd]:
    """The run's end as each reader gets it: by id, as the latest run, among the runs."""
    found = [store.run_info(run_id).end, store.latest_run("demo").end]
    found += [info.end for info in store.runs_with_config("demo", ("scope",))
              if info.run.run_id == run_id]
    found += [info.end for info in store.runs("demo") if info.run.run_id == run_id]
    return found


def test_a_long_end_is_decoded_once_and_shared(backend):  # noqa: F811
    with backend.open() as store:
        run_id = _ended_run(store, 2 * store_module.SHARED_END_BYTES)
        ends = _ends_read(store, run_id)
        assert len(ends) == 4 and all(end is ends[0] for end in ends)
        assert ends[0] is not None and len(ends[0].summary["rungs"]) > 1000


def test_a_short_end_is_decoded_for_each_reader_and_reads_the_same(backend):  # noqa: F811
    with backend.open() as store:
        run_id = _ended_run(store, 1024)
        ends = _ends_read(store, run_id)
        assert ends[0] is not ends[1]
        assert all(end == ends[0] for end in ends)


def test_the_kept_ends_are_bounded_and_each_read_is_its_own_run(backend):  # noqa: F811
    with backend.open() as store:
        run_ids = [_ended_run(store, 2 * store_module.SHARED_END_BYTES + 64 * index)
                   for index in range(store_module.SHARED_ENDS + 3)]
        for run_id in run_ids:
            end = store.run_info(run_id).end
            assert end is not None and end.run_id == run_id
        assert len(store.__dict__["_decoded_ends"]) == store_module.SHARED_ENDS


def test_a_long_end_that_does_not_decode_names_its_entry(tmp_path):
    """Edited outside benchwarden (triggers dropped): still a `CorruptStore` naming the
    entry, kept or not."""
    from benchwarden.core.store import CorruptStore, SQLiteStore

    path = tmp_path / "s.sqlite"
    with SQLiteStore(path) as store:
        run_id = _ended_run(store, 2 * store_module.SHARED_END_BYTES)
    import sqlite3

    with sqlite3.connect(path) as raw:
        raw.execute("DROP TRIGGER entries_refuse_update")
        raw.execute("UPDATE entries SET body = CAST(? AS BLOB) WHERE kind = 'run_end'",
                    (b"{" + b" " * (2 * store_module.SHARED_END_BYTES),))
    with SQLiteStore(path, create=False) as store, \
            pytest.raises(CorruptStore, match=r"entry \d+ is not a readable run end"):
        store.run_info(run_id)
