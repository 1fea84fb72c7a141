"""A long run end (a contamination soak's rung digests: megabytes) is decoded once per
store object and shared by every reader of it; short ones are decoded each time; the
kept ends are bounded; and every way of reading an end gives the same end. Its summary
is read back a value at a time (`RunSummary`), equal to what was written."""

from __future__ import annotations

import pickle
import time
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchwarden.core import store as store_module
from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import RunEnd, RunSummary, canonical_json
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
        held = []
        for run_id in run_ids:
            end = store.run_info(run_id).end
            assert end is not None and end.run_id == run_id
            held.append(end)
        assert len(store.__dict__["_decoded_ends"]) == store_module.SHARED_ENDS


def test_an_end_no_reader_holds_is_let_go_with_its_bytes(backend):  # noqa: F811
    """A report long done with its run's end (its digests read) must not keep the end's
    stored bytes to its last line: a soak of rungs of two has a 133 MB end."""
    import gc
    import weakref

    with backend.open() as store:
        run_id = _ended_run(store, 2 * store_module.SHARED_END_BYTES)
        end = store.run_info(run_id).end
        assert end is not None
        let_go = weakref.ref(end)
        assert store.run_info(run_id).end is end  # shared while held
        del end
        gc.collect()
        assert let_go() is None
        assert len(store.__dict__["_decoded_ends"]) == 0
        again = store.run_info(run_id).end  # read again, the same end
        assert again is not None and again.run_id == run_id and len(again.summary["rungs"]) > 1000


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


# -- a run end's summary read back a value at a time ------------------------------------------
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=4),
    max_leaves=12)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(summary=st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=5),
       wanted=st.text(max_size=8))
def test_a_summary_read_back_is_the_one_written_read_a_value_at_a_time(
        backend, summary, wanted):  # noqa: F811
    """Read back, a summary is a `RunSummary`: equal to the mapping written, each value
    decoded (as plain JSON values) only when read, `in` and `typed` decoding nothing
    kept; and it is stored again, encoded and pickled as that mapping."""
    with backend.open() as store:
        run = stamp_run(suite="demo", bench_version="1", config={"scope": "s"})
        store.begin_run(run)
        store.finish_run(RunEnd(run.run_id, 5.0, "completed", summary))
        end = store.run_info(run.run_id).end
        assert end is not None and isinstance(end.summary, RunSummary)
        read = end.summary
        assert (wanted in read) == (wanted in summary) and len(read) == len(summary)
        if wanted in summary:
            assert read.typed(wanted, Any) == summary[wanted]
        assert read._decoded == {}  # nothing decoded by `in`, `len` or `typed`
        assert read == summary and dict(read) == summary
        assert end.to_json_dict()["summary"] == summary
        assert canonical_json(end) == canonical_json(RunEnd(run.run_id, 5.0, "completed", summary))
        assert pickle.loads(pickle.dumps(read)) == summary
        again = stamp_run(suite="demo", bench_version="1", config={"scope": "t"})
        store.begin_run(again)
        store.finish_run(RunEnd(again.run_id, 6.0, "completed", read))  # stored again
        assert store.run_info(again.run_id).end.summary == summary


def test_a_summary_value_that_does_not_fit_the_type_asked_for_is_refused():
    read = RunSummary({"rungs": msgspec.Raw(b'{"not": "a list"}')})
    with pytest.raises(msgspec.ValidationError):
        read.typed("rungs", list[int])
    with pytest.raises(KeyError):
        read.typed("other", list[int])
    assert read["rungs"] == {"not": "a list"}
