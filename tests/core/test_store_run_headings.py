"""Schema 6's run headings and configurations (`run_headings`, `run_configs`): each run
start's fields but its configuration, its end, and each distinct configuration once,
written by the transaction that appends the start (the end by the end's), so listings
and reports never read a run start's body. Both backends. What they answer equals what
the run starts' bodies answer (the path a store without them still takes); a version 5
store is read as it is and upgraded by a writer; `verify` names a row missing, extra or
altered in one line; two writers interleaving keep them exact. The stored rows are
checked here against the chain by plain JSON decoding, not by the store's own split."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import Record, Run, RunEnd, TokenComponents, canonical_json
from benchwarden.core.store import (
    CorruptStore,
    Store,
    StoreError,
    config_hash,
    run_start_parts,
)
from tests.core.test_store_backends import (  # noqa: F401 (fixtures)
    backend,
    postgres,
    postgres_database,
)
from tests.core.test_store_summaries import make_version, raw


def record(run_id: str, suite: str, task: str, trial: int = 1) -> Record:
    return Record(suite=suite, scope="s", arm="a", task=task, trial=trial, run_id=run_id,
                  outcome="pass", started_at=1.0, ended_at=2.0,
                  tokens=TokenComponents(1, 2, 3, 4), payload={"tier": "read"})


def a_run(run_id: str, suite: str = "demo", config: dict[str, Any] | None = None) -> Run:
    return stamp_run(suite=suite, bench_version=f"v-{run_id}",
                     config={"scope": "s", "tasks": ["t1", "t2"]} if config is None else config,
                     target={"url": f"http://{run_id}"}, seeds=(1, 2), run_id=run_id)


@contextmanager
def reading_run_starts(store: Store) -> Iterator[Store]:
    """`store` answering from its run starts' bodies, as a store without run headings
    does (the path the headings replace)."""
    kind = type(store)
    saved = kind.__dict__.get("_reads_run_headings")
    kind._reads_run_headings = property(lambda self: False)  # type: ignore[method-assign,assignment]
    try:
        yield store
    finally:
        if saved is None:
            delattr(kind, "_reads_run_headings")
        else:
            kind._reads_run_headings = saved  # type: ignore[method-assign]


def stored_headings(store: Store) -> dict[str, tuple[Any, ...]]:
    """Each stored heading row by run id: (suite, seq, config hash, heading as JSON, end
    as JSON or None)."""
    return {str(run_id): (str(suite), int(seq), str(key), json.loads(bytes(heading)),
                           None if end is None else json.loads(bytes(end)))
            for run_id, suite, seq, key, heading, end in store._query(
                "SELECT run_id, suite, seq, config_hash, heading, run_end FROM run_headings")}


def stored_configs(store: Store) -> dict[str, bytes]:
    return {str(key): bytes(config) for key, config in store._query(
        "SELECT config_hash, config FROM run_configs")}


def expected_from_chain(store: Store) -> tuple[dict[str, tuple[Any, ...]], dict[str, bytes]]:
    """The rows the chain's run starts and ends say, by plain JSON decoding: a start's
    configuration re-encoded canonically is the stored one, keyed by its SHA-256."""
    headings: dict[str, tuple[Any, ...]] = {}
    configs: dict[str, bytes] = {}
    for seq, kind, suite, run_id, body in store._query(
            "SELECT seq, kind, suite, run_id, body FROM entries WHERE kind IN "
            "('run', 'run_end') ORDER BY seq"):
        decoded = json.loads(bytes(body))
        if kind == "run_end":
            headings[run_id] = (*headings[run_id][:4], decoded)
            continue
        config = canonical_json(decoded.pop("config"))
        key = hashlib.sha256(config).hexdigest()
        configs[key] = config
        headings[run_id] = (suite, int(seq), key, decoded, None)
    return headings, configs


def assert_run_tables_match_the_chain(store: Store) -> None:
    headings, configs = expected_from_chain(store)
    assert stored_headings(store) == headings
    assert stored_configs(store) == configs


def listing(store: Store, suite: str | None) -> list[tuple[Any, ...]]:
    return [(info.run, info.end, info.record_count) for info in store.run_listing(suite)]


def with_config(store: Store, suite: str, keys: tuple[str, ...]) -> list[tuple[Any, ...]]:
    return [(info.run, info.end, info.record_count)
            for info in store.runs_with_config(suite, keys)]


# -- pure: the split of a stored run start ------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                  max_size=3),
    max_leaves=12)
configs = st.dictionaries(st.text(max_size=6), json_values, max_size=5)


@given(configs, configs)
@settings(max_examples=200, deadline=None)
def test_a_start_splits_into_its_heading_and_its_canonical_configuration(first, second):
    """The configuration's bytes in a stored start are its canonical JSON, so equal
    configurations share a hash and different ones never do; the heading is the start's
    other members unchanged."""
    run = a_run("run-1", config=first)
    body = canonical_json(run)
    heading, config = run_start_parts(body)
    assert config == canonical_json(first)
    assert msgspec.json.decode(heading) == {
        name: value for name, value in msgspec.json.decode(body).items() if name != "config"}
    other = canonical_json(a_run("run-2", config=second))
    same = msgspec.json.decode(config) == msgspec.json.decode(canonical_json(second)) and \
        canonical_json(first) == canonical_json(second)
    assert (config_hash(config) == config_hash(run_start_parts(other)[1])) == same


# -- the new reads equal the old ones ------------------------------------------------

_examples = itertools.count()


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs=st.lists(st.tuples(st.sampled_from(["demo", "other"]), st.integers(0, 2),
                               st.integers(0, 3), st.sampled_from([None, "completed",
                                                                   "failed"])),
                     min_size=0, max_size=9),
       data=st.data())
def test_the_run_tables_answer_what_the_run_starts_answer(backend, runs, data):  # noqa: F811
    """Runs of two suites, some sharing a configuration and some not, run ids not in the
    order the runs started, some with records and ends: `run_listing`, `runs_with_config`
    and `latest_run` read from the tables equal what they read from the bodies, for each
    suite and for all, and the tables hold exactly what the chain says. The store
    outlives an example: each example's runs carry its own prefix and are the ones
    compared."""
    prefix = f"e{next(_examples)}-"
    ids = [prefix + drawn for drawn in data.draw(st.lists(
        st.text("abcxyz-", min_size=1, max_size=6), min_size=len(runs), max_size=len(runs),
        unique=True))]
    pool = [{"scope": "s", "tasks": ["t1", "t2"], "arms": ["a"]},
            {"scope": "s", "tasks": ["t1"], "arms": ["a", "b"], "wide": list(range(30))},
            {"scope": "s2", "tiers": {"t1": "read"}}, {}]
    with backend.open() as store:
        for run_id, (suite, config, records, status) in zip(ids, runs, strict=True):
            store.begin_run(a_run(run_id, suite, pool[config]))
            if records:
                store.append([record(run_id, suite, f"{run_id}-{trial}", trial)
                              for trial in range(1, records + 1)])
            if status is not None:
                store.finish_run(RunEnd(run_id, 9.0, status, {"n": records}))
        assert store.has_derived_tables
        assert_run_tables_match_the_chain(store)
        mine = lambda rows: [row for row in rows if row[0].run_id.startswith(prefix)]  # noqa: E731
        from_tables = ([mine(listing(store, which)) for which in ("demo", "other", None)],
                       [mine(with_config(store, suite, keys)) for suite in ("demo", "other")
                        for keys in (("scope", "tasks", "arms", "tiers"), ("scope",), ())],
                       [store.latest_run(which) if runs else None
                        for which in ("demo", "other", None) if which in
                        {suite for suite, *_ in runs} | {None}])
        with reading_run_starts(store):
            from_bodies = ([mine(listing(store, which)) for which in ("demo", "other", None)],
                           [mine(with_config(store, suite, keys))
                            for suite in ("demo", "other")
                            for keys in (("scope", "tasks", "arms", "tiers"), ("scope",), ())],
                           [store.latest_run(which) if runs else None
                            for which in ("demo", "other", None) if which in
                            {suite for suite, *_ in runs} | {None}])
        assert from_tables == from_bodies
        assert [row[0].run_id for row in from_tables[0][2]] == ids  # in the order started
        assert store.verify().ok


def test_a_fresh_configuration_mapping_per_run(backend):  # noqa: F811
    """Runs of one configuration share its row, yet each run read holds its own mapping
    (as each run read from its own start did): changing one changes no other."""
    with backend.open() as store:
        for run_id in ("r1", "r2"):
            store.begin_run(a_run(run_id))
        assert len(stored_configs(store)) == 1 and len(stored_headings(store)) == 2
        first, second = store.runs_with_config("demo", ("scope", "tasks"))
        assert first.run.config == second.run.config == {"scope": "s", "tasks": ["t1", "t2"]}
        assert first.run.config is not second.run.config


# -- schema versions -----------------------------------------------------------------

def filled(backend: Any) -> None:  # noqa: F811
    with backend.open() as store:
        store.begin_run(a_run("run-b"))
        store.append([record("run-b", "demo", "t1"), record("run-b", "demo", "t2")])
        store.finish_run(RunEnd("run-b", 5.0, "completed", {}))
        store.begin_run(a_run("run-a", "other", {"scope": "s", "tasks": ["t9"]}))
        store.begin_run(a_run("run-c"))


def test_a_version_5_store_is_read_as_it_is_and_upgraded_by_a_writer(backend, capfd):  # noqa: F811
    """Read-only, a version 5 store reports from its totals and counts `runs` from its
    run counts, the run starts read from their bodies; a writer lists the starts and
    ends into the new tables once (a line on stderr), keeping the totals and counts."""
    filled(backend)
    with backend.open(create=False) as current:
        wanted = [listing(current, which) for which in ("demo", "other", None)]
        wanted_config = with_config(current, "demo", ("scope", "tasks"))
    make_version(backend, "5")
    with backend.open(create=False) as reader:  # read-only: nothing made or written
        assert not reader.has_derived_tables and reader.has_group_totals
        assert reader._reads_run_counts and not reader._reads_run_headings
        assert [listing(reader, which) for which in ("demo", "other", None)] == wanted
        assert with_config(reader, "demo", ("scope", "tasks")) == wanted_config
        assert reader.latest_run().run.run_id == "run-c"
        assert reader.verify().ok
        assert not reader._table_exists("run_headings")
        assert reader._stored_schema_version() == "5"
    capfd.readouterr()
    with backend.open() as writer:
        assert writer.has_derived_tables and writer._stored_schema_version() == "6"
        assert_run_tables_match_the_chain(writer)
        writer.begin_run(a_run("run-d"))
        assert_run_tables_match_the_chain(writer)
        assert writer.verify().ok
    progress = capfd.readouterr().err
    assert "listing every run's heading and configuration from the run starts" in progress
    assert "upgrading to schema 6: done in" in progress
    assert "totalling" not in progress  # the totals and run counts are kept as they are
    assert progress.count("\n") == 2, progress
    with backend.open(create=False) as reader:
        assert listing(reader, "demo")[:-1] == wanted[0]  # run-d after them
        assert listing(reader, "other") == wanted[1]


@pytest.mark.parametrize("page_bytes, per_read", [(1, 500), (10**9, 1), (10**9, 2)])
def test_the_run_starts_are_listed_a_bounded_page_at_a_time(backend, monkeypatch,  # noqa: F811
                                                            page_bytes, per_read):
    """`store repair` (and an upgrade) lists the run starts and ends in pages of at most
    `_RUN_STARTS_PER_READ` rows and `PAGE_BYTES` of bodies (PostgreSQL: one server-side
    cursor, its rows taken the same way): whatever the page, every run once, the tables
    the chain's."""
    import benchwarden.core.store as store_module

    filled(backend)
    with backend.open() as store:
        for number in range(5):
            store.begin_run(a_run(f"run-{number}", config={"tasks": [f"t{number}"] * 300}))
            store.finish_run(RunEnd(f"run-{number}", 6.0, "completed", {}))
    monkeypatch.setattr(store_module, "PAGE_BYTES", page_bytes)
    monkeypatch.setattr(store_module, "_RUN_STARTS_PER_READ", per_read)
    pages: list[int] = []
    keep = store_module.Store._keep_run_headings

    def counting(self, cursor, entries):
        pages.append(len(entries))
        return keep(self, cursor, entries)

    monkeypatch.setattr(store_module.Store, "_keep_run_headings", counting)
    with backend.open() as store:
        store.rebuild_derived()
        assert_run_tables_match_the_chain(store)
        assert store.verify().ok
    assert sum(pages) == 8 + 6  # every start, then every end, once
    assert max(pages) == (1 if page_bytes == 1 else per_read)


@pytest.mark.parametrize("page_bytes, per_read", [(1, 500), (10**9, 1), (10**9, 2)])
def test_a_version_5_store_lists_its_runs_a_bounded_page_at_a_time(
        backend, monkeypatch, page_bytes, per_read):  # noqa: F811
    """Read-only, a version 5 store's run listing comes from the run starts' bodies, in
    pages of at most `_RUN_STARTS_PER_READ` starts and `PAGE_BYTES` of bodies: the same
    listing whatever the page."""
    import benchwarden.core.store as store_module

    filled(backend)
    with backend.open() as store:
        for number in range(4):
            store.begin_run(a_run(f"run-{number}", config={"tasks": [f"t{number}"] * 300}))
    with backend.open(create=False) as current:
        wanted = [listing(current, which) for which in ("demo", "other", None)]
    make_version(backend, "5")
    monkeypatch.setattr(store_module, "PAGE_BYTES", page_bytes)
    monkeypatch.setattr(store_module, "_RUN_STARTS_PER_READ", per_read)
    with backend.open(create=False) as reader:
        assert not reader._reads_run_headings
        assert [listing(reader, which) for which in ("demo", "other", None)] == wanted


# -- verify ---------------------------------------------------------------------------

def blob(backend: Any, text: str) -> str:  # noqa: F811
    """An SQL expression of `text`'s UTF-8 bytes as the backend stores a body."""
    quoted = text.replace("'", "''")
    return (f"CAST('{quoted}' AS BLOB)" if backend.name == "sqlite"
            else f"convert_to('{quoted}', 'UTF8')")


CHANGES = {
    "heading missing": ("DELETE FROM run_headings WHERE run_id = 'run-b'",
                        "run_headings) disagree with its run starts: run run-b is missing"),
    "heading extra": ("INSERT INTO run_headings SELECT 'ghost', suite, seq, config_hash, "
                      "heading, run_end FROM run_headings WHERE run_id = 'run-b'",
                      "run ghost is listed but the store holds no start of it"),
    "heading altered": ("UPDATE run_headings SET heading = {started_later} "
                        "WHERE run_id = 'run-b'", "run run-b differs from its start (heading)"),
    "suite altered": ("UPDATE run_headings SET suite = 'other' WHERE run_id = 'run-b'",
                      "run run-b differs from its start (suite)"),
    "order altered": ("UPDATE run_headings SET seq = seq + 100 WHERE run_id = 'run-b'",
                      "run run-b differs from its start (seq)"),
    "configuration swapped": ("UPDATE run_headings SET config_hash = (SELECT config_hash "
                              "FROM run_headings WHERE run_id = 'run-a') "
                              "WHERE run_id = 'run-b'",
                              "run run-b differs from its start (config_hash)"),
    "end removed": ("UPDATE run_headings SET run_end = NULL WHERE run_id = 'run-b'",
                    "run run-b differs from its start (run_end)"),
    "end added": ("UPDATE run_headings SET run_end = {end} WHERE run_id = 'run-c'",
                  "run run-c differs from its start (run_end)"),
    "configuration missing": ("DELETE FROM run_configs WHERE config_hash = (SELECT "
                              "config_hash FROM run_headings WHERE run_id = 'run-a')",
                              "run_configs) disagree with its run starts: configuration "),
    "configuration extra": ("INSERT INTO run_configs VALUES ('{ghost}', {empty})",
                            "is kept but no run start holds it"),
    "configuration altered": ("UPDATE run_configs SET config = {empty}",
                              "is not the configuration of that hash"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_verify_names_run_tables_that_disagree_with_the_chain(backend, change):  # noqa: F811
    """Each kind of damage to the derived run tables fails `verify` in one line naming
    the run or configuration and saying the derived data was edited; `rebuild_derived`
    (what `store repair` runs) makes them right again from the chain."""
    filled(backend)
    statement, named = CHANGES[change]
    raw(backend, statement.format(
        started_later=blob(backend, '{"bench_version":"v-run-b","started_at":1e12}'),
        end=blob(backend, '{"ended_at":1.0,"run_id":"run-c","status":"failed","summary":{}}'),
        ghost=hashlib.sha256(b"{}").hexdigest(), empty=blob(backend, "{}")))
    with backend.open(create=False) as reader:
        report = reader.verify()
    line = report.line()
    assert not report.ok and named in line, line
    assert "\n" not in line and line.endswith("(derived data edited)"), line
    with backend.open() as writer:
        writer.rebuild_derived()
        assert_run_tables_match_the_chain(writer)
        assert writer.verify().ok


@pytest.mark.parametrize("table", ["run_headings", "run_configs"])
def test_a_removed_run_table_fails_verify_and_a_writer_rebuilds_it(backend, capfd, table):  # noqa: F811
    """Dropped outside benchwarden: readers read the run starts (the listing unchanged),
    `verify` names the table, the next writer lists the run starts again."""
    filled(backend)
    with backend.open(create=False) as before:
        wanted = listing(before, None)
    raw(backend, f"DROP TABLE {table}")
    with backend.open(create=False) as reader:
        assert not reader._reads_run_headings and reader.has_group_totals
        assert listing(reader, None) == wanted
        report = reader.verify()
        assert not report.ok and f"{table} is missing (removed outside" in report.line()
    capfd.readouterr()
    with backend.open() as writer:
        assert_run_tables_match_the_chain(writer)
        assert listing(writer, None) == wanted and writer.verify().ok
    said = capfd.readouterr().err
    assert f"its table {table} is missing (removed outside benchwarden): rebuilding" in said


def test_an_unreadable_heading_is_one_line_with_the_way_out(backend):  # noqa: F811
    filled(backend)
    raw(backend, f"UPDATE run_headings SET heading = {blob(backend, 'not json')} "
        "WHERE run_id = 'run-b'")
    with backend.open(create=False) as reader:
        for read in (lambda: reader.run_listing(),
                     lambda: reader.runs_with_config("demo", ("scope",))):
            with pytest.raises(CorruptStore, match="derived data edited.*store repair") as raised:
                read()
            assert "\n" not in str(raised.value) and raised.value.exit_code == 4
    with backend.open(create=False) as reader, pytest.raises(StoreError, match="read-only"):
        reader.rebuild_derived()


# -- two writers ----------------------------------------------------------------------

@pytest.mark.parametrize("order", ["alternating", "one then the other"])
def test_two_writers_interleaving_keep_the_run_tables_exact(backend, order):  # noqa: F811
    """Two writers of one store begin, fill and end runs in turn (one writer ending a run
    the other began, both starting runs of one configuration): every start and end is in
    the tables, each configuration once."""
    with backend.open() as first, backend.open() as second:
        writers = [first, second]
        pick = (lambda step: writers[step % 2]) if order == "alternating" else (
            lambda step: writers[step // 6])
        steps = []
        for number in range(4):
            run_id = f"run-{number}"
            steps += [lambda w, r=run_id, n=number: w.begin_run(
                          a_run(r, config={"scope": "s", "n": n % 2})),
                      lambda w, r=run_id: w.append([record(r, "demo", f"{r}-t")]),
                      lambda w, r=run_id: w.finish_run(RunEnd(r, 3.0, "completed", {}))]
        for step, act in enumerate(steps):
            act(pick(step))
        assert_run_tables_match_the_chain(first)
        assert len(stored_configs(first)) == 2
        assert [info.end is not None for info in second.run_listing()] == [True] * 4
        assert first.verify().ok
