"""The store's behaviour, the same on both backends: SQLite and a real PostgreSQL.

Every behavioural test runs against each backend through one `backend` fixture; each
test gets a fresh store (a fresh file, or a fresh schema in a database this module
creates and drops). Tampering goes around the store the way an attacker would: as a
superuser who switches the append-only trigger off.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import secrets
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchwarden.core import store as store_module
from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import Record, RunEnd, TokenComponents
from benchwarden.core.store import (
    CorruptStore,
    DuplicateRecord,
    NoStore,
    RecordSummary,
    SQLiteStore,
    Store,
    StoreError,
    StoreUsageError,
    UnstorableValue,
    open_store,
)
from tests.conftest import require

POSTGRES_URL = os.environ.get("BENCHWARDEN_TEST_POSTGRES_URL", "")
HOW = "run `bash scripts/test-services.sh start` and source .test-services.env"


def make_record(run_id: str = "run-1", arm: str = "a", task: str = "t", trial: int = 1,
                scope: str | None = None, **payload: object) -> Record:
    return Record(suite="demo", scope=scope or run_id, arm=arm, task=task, trial=trial,
                  run_id=run_id, outcome="ok", started_at=1.0, ended_at=2.5,
                  tokens=TokenComponents(fresh_input=3, output=4), payload=payload)


def _url_with(base: str, database: str, schema: str | None = None) -> str:
    url = base.rsplit("/", 1)[0] + "/" + database
    if schema:
        url += "?options=" + quote(f"-csearch_path={schema}")
    return url


class SQLiteBackend:
    """A fresh SQLite file; raw access through the sqlite3 module."""

    name = "sqlite"

    def __init__(self, folder: Path) -> None:
        self.path = folder / "store.sqlite"
        self.location = str(self.path)
        self.refused = sqlite3.DatabaseError

    def open(self, create: bool = True) -> Store:
        return SQLiteStore(self.path, create=create)

    def is_untouched(self) -> bool:
        return not self.path.exists()

    def execute(self, sql: str) -> None:
        raw = sqlite3.connect(self.path)
        try:
            raw.execute(sql)
            raw.commit()
        finally:
            raw.close()

    def tamper(self, sql: str) -> None:
        raw = sqlite3.connect(self.path)
        raw.execute("DROP TRIGGER entries_refuse_update")
        raw.execute("DROP TRIGGER entries_refuse_delete")
        raw.execute(sql)
        raw.commit()
        raw.close()

    def replace_in_body(self, seq: int, old: str, new: str) -> str:
        return f"UPDATE entries SET body = replace(body, '{old}', '{new}') WHERE seq = {seq}"


class PostgresBackend:
    """A fresh schema in this module's database; raw access as the superuser."""

    name = "postgres"

    def __init__(self, database: str, schema: str) -> None:
        import psycopg

        self.psycopg = psycopg
        self.location = _url_with(POSTGRES_URL, database, schema)
        self.refused = psycopg.Error
        with psycopg.connect(_url_with(POSTGRES_URL, database), autocommit=True) as admin:
            admin.execute(f'CREATE SCHEMA "{schema}"')

    def open(self, create: bool = True) -> Store:
        return open_store(self.location, create=create)

    def is_untouched(self) -> bool:
        with self.psycopg.connect(self.location, autocommit=True) as raw:
            return raw.execute("SELECT to_regclass('entries') IS NULL AND "
                               "to_regclass('meta') IS NULL").fetchone()[0]

    def execute(self, sql: str) -> None:
        with self.psycopg.connect(self.location, autocommit=True) as raw:
            raw.execute(sql)

    def tamper(self, sql: str) -> None:
        with self.psycopg.connect(self.location, autocommit=True) as raw:
            raw.execute("ALTER TABLE entries DISABLE TRIGGER entries_refuse_change")
            raw.execute(sql)
            raw.execute("ALTER TABLE entries ENABLE TRIGGER entries_refuse_change")

    def replace_in_body(self, seq: int, old: str, new: str) -> str:
        return ("UPDATE entries SET body = convert_to(replace(convert_from(body, 'UTF8'), "
                f"'{old}', '{new}'), 'UTF8') WHERE seq = {seq}")


@pytest.fixture(scope="module")
def postgres_database() -> Iterator[str]:
    """One database for this module, dropped at the end (schemas isolate the tests)."""
    require(bool(POSTGRES_URL), "PostgreSQL (BENCHWARDEN_TEST_POSTGRES_URL)", HOW)
    import psycopg

    name = f"bw_test_store_{os.getpid()}_{secrets.token_hex(3)}"
    try:
        admin = psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as error:
        require(False, f"PostgreSQL at {POSTGRES_URL} ({error})", HOW)
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield name
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


_schema_numbers = itertools.count(1)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request, tmp_path):
    if request.param == "sqlite":
        return SQLiteBackend(tmp_path)
    database = request.getfixturevalue("postgres_database")
    return PostgresBackend(database, f"t{next(_schema_numbers)}")


@pytest.fixture
def store(backend) -> Iterator[Store]:
    with backend.open() as opened:
        opened.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="run-1"))
        yield opened


# -- behaviour shared by both backends ------------------------------------------------

def test_records_round_trip_in_order(store):
    written = [make_record(task=str(i), value=i, text="é\u0001<script>\u2028",
                           nested={"a": [1, 2.5, None, {"b": "ü"}]}) for i in range(5)]
    store.append(written)
    assert store.records(run_id="run-1") == written
    assert store.records(task="3") == [written[3]]


def test_records_survive_reopening(backend, store):
    store.append([make_record(task="kept")])
    store.close()
    with backend.open() as reopened:
        assert [r.task for r in reopened.records()] == ["kept"]
        assert reopened.verify().ok


def test_duplicate_address_is_refused_and_named(store):
    store.append([make_record()])
    with pytest.raises(DuplicateRecord, match="demo/run-1/a/t/trial 1"):
        store.append([make_record(value="different payload")])
    assert len(store.records()) == 1


def test_duplicate_inside_one_batch_refuses_the_whole_batch(store):
    with pytest.raises(DuplicateRecord):
        store.append([make_record(task="x"), make_record(task="y"), make_record(task="x")])
    assert store.records() == []
    store.append([make_record(task="x")])  # the store is still usable after a refusal
    assert store.verify().ok


def test_schema_refuses_update_and_delete(backend, store):
    store.append([make_record()])
    with pytest.raises(backend.refused, match="append-only: UPDATE refused"):
        backend.execute("UPDATE entries SET arm = 'b'")
    with pytest.raises(backend.refused, match="append-only: DELETE refused"):
        backend.execute("DELETE FROM entries")
    assert len(store.records()) == 1 and store.verify().ok


def test_highest_trial_counts_gaps_and_never_reuses(store):
    store.append([make_record(trial=1), make_record(trial=4)])
    assert store.highest_trial("demo", "run-1", "a", "t") == 4
    assert store.highest_trial("demo", "run-1", "a", "other") == 0


def test_verify_passes_an_untouched_store(store):
    store.append([make_record(task=str(i)) for i in range(3)])
    store.finish_run(RunEnd("run-1", 9.0, "completed", {}))
    report = store.verify()
    assert report.ok and report.checked == 5


@pytest.mark.parametrize("tamper, expected", [
    (lambda b: b.replace_in_body(3, '"outcome":"ok"', '"outcome":"no"'),
     "entry 3, record demo/run-1/a/1/trial 1 (run run-1): its contents"),
    (lambda b: "DELETE FROM entries WHERE seq = 2",
     "entry 3, record demo/run-1/a/1/trial 1 (run run-1): its link"),
    (lambda b: "UPDATE entries SET arm = 'b' WHERE seq = 2", "entry 2, record demo/run-1/b/0"),
], ids=["edited-body", "deleted-entry", "edited-address"])
def test_verify_names_the_first_tampered_entry(backend, store, tamper, expected):
    store.append([make_record(task=str(i)) for i in range(3)])
    store.close()
    backend.tamper(tamper(backend))
    with backend.open() as reopened:
        report = reopened.verify()
    assert not report.ok
    assert expected in report.first_broken


def test_run_with_a_credential_is_refused(backend):
    with backend.open() as store:
        run = stamp_run(suite="demo", bench_version="1", config={"api_key": "abc"})
        with pytest.raises(StoreError, match="config.api_key"):
            store.begin_run(run)
        assert store.runs() == []


def test_runs_and_run_end_are_listed(store):
    store.append([make_record()])
    assert store.runs()[0].end is None
    store.finish_run(RunEnd("run-1", 3.0, "completed", {"note": 1}))
    info = store.run_info("run-")  # a unique prefix is enough
    assert info.end.status == "completed" and info.record_count == 1
    assert store.latest_run("demo").run.run_id == "run-1"
    with pytest.raises(DuplicateRecord):
        store.finish_run(RunEnd("run-1", 4.0, "completed", {}))
    with pytest.raises(StoreError, match="no such run"):
        store.run_info("absent")


@pytest.mark.parametrize("asked", ["%", "_", "run_1", "RUN-", "", "run-1%", "\\"])
def test_a_run_id_prefix_is_matched_as_the_characters_it_is(backend, asked):
    """`show`, `report` and `export --run` take a unique prefix of a run id: `%` and `_`
    are characters there, not patterns, case counts, and an empty id names no run (each
    of these picked the only run in the store, exit 0)."""
    with backend.open() as store:
        store.begin_run(stamp_run(suite="demo", bench_version="1", config={},
                                  run_id="run-1"))
        assert store.run_info("run").run.run_id == "run-1"
        with pytest.raises(StoreError, match="no such run"):
            store.run_info(asked)


def test_the_latest_run_is_the_last_run_started_of_each_suite(backend):
    """`latest_run` reads only the newest run start: the same run as the last of `runs`,
    for every suite and for all, with runs of two suites interleaved and records and
    ends between them."""
    with backend.open() as store:
        with pytest.raises(StoreUsageError, match="no demo runs"):
            store.latest_run("demo")
        for number, suite in enumerate(["demo", "other", "other", "demo", "other"]):
            run_id = f"run-{suite}-{number}"
            store.begin_run(stamp_run(suite=suite, bench_version="1", config={},
                                      run_id=run_id))
            if suite == "demo":
                store.append([make_record(run_id=run_id, trial=number + 1)])
            store.finish_run(RunEnd(run_id, 3.0, "completed", {}))
            for which in ("demo", "other", None):
                listed = store.runs(which)
                if listed:
                    latest = store.latest_run(which)
                    assert latest == listed[-1]
        assert store.latest_run().run.run_id == "run-other-4"
        assert store.latest_run("demo").run.run_id == "run-demo-3"
        assert store.latest_run("demo").record_count == 1


_listing_examples = itertools.count()


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs=st.lists(st.tuples(st.sampled_from(["demo", "other"]), st.integers(0, 3),
                               st.sampled_from([None, "completed", "failed"])),
                     min_size=0, max_size=9),
       page=st.integers(1, 4), data=st.data())
def test_the_run_listing_is_every_run_in_start_order_without_its_configuration(
        backend, monkeypatch, runs, page, data):
    """`run_listing` (what `runs` and `export` read) is `runs` less each configuration:
    the same runs in the order they started, with their ends and record counts, for
    every suite and for all, whatever the page size of its keyset read. Run ids are
    drawn so their order is not the order the runs started (the pages go by id). The
    store outlives an example: each example's runs carry its own prefix and are the
    ones compared."""
    monkeypatch.setattr(store_module, "_RUN_STARTS_PER_READ", page)
    prefix = f"e{next(_listing_examples)}-"
    ids = [prefix + drawn for drawn in data.draw(st.lists(
        st.text("abcxyz-", min_size=1, max_size=6), min_size=len(runs), max_size=len(runs),
        unique=True))]
    with backend.open() as store:
        for run_id, (suite, records, status) in zip(ids, runs, strict=True):
            store.begin_run(stamp_run(suite=suite, bench_version=f"v-{run_id}",
                                      config={"tasks": [run_id] * 50},
                                      target={"url": f"http://{run_id}"}, run_id=run_id))
            if records:
                store.append([make_record(run_id=run_id, trial=trial, scope=run_id)
                              for trial in range(1, records + 1)])
            if status is not None:
                store.finish_run(RunEnd(run_id, 9.0, status, {}))
        for which in ("demo", "other", None):
            whole = [info for info in store.runs(which) if info.run.run_id.startswith(prefix)]
            listed = [info for info in store.run_listing(which)
                      if info.run.run_id.startswith(prefix)]
            assert [(info.run.run_id, info.run.suite, info.run.bench_version,
                     info.run.target, info.run.started_at, info.end, info.record_count)
                    for info in listed] == [
                (info.run.run_id, info.run.suite, info.run.bench_version, dict(info.run.target),
                 info.run.started_at, info.end, info.record_count) for info in whole]
            assert all(not hasattr(info.run, "config") for info in listed)


_scopes = itertools.count()


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=st.lists(st.tuples(st.sampled_from("abc"), st.integers(1, 4)), max_size=10))
def test_any_append_sequence_keeps_addresses_unique_and_chain_intact(store, cells):
    scope = f"scope-{next(_scopes)}"  # one store per test; a fresh scope per example
    seen = set()
    for task, trial in cells:
        record = make_record(task=task, trial=trial, scope=scope)
        if (task, trial) in seen:
            with pytest.raises(DuplicateRecord):
                store.append([record])
        else:
            store.append([record])
            seen.add((task, trial))
    assert {(r.task, r.trial) for r in store.records(scope=scope)} == seen
    assert store.verify().ok


def test_two_concurrent_writers_keep_one_chain(backend, store):
    """Two connections append interleaved batches at once; the chain never forks."""
    batches, batch_size = 12, 5
    start = threading.Barrier(2)
    problems: list[BaseException] = []

    def writer(arm: str) -> None:
        try:
            with backend.open() as own:
                start.wait()
                for batch in range(batches):
                    own.append([make_record(arm=arm, task=f"{batch}-{i}")
                                for i in range(batch_size)])
        except BaseException as error:  # reported below, not lost in the thread
            problems.append(error)

    threads = [threading.Thread(target=writer, args=(arm,)) for arm in ("left", "right")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert problems == []
    records = store.records()
    assert len(records) == 2 * batches * batch_size
    assert {r.arm for r in records} == {"left", "right"}
    report = store.verify()
    assert report.ok and report.checked == 1 + len(records)


def test_reading_a_store_that_is_not_there_creates_nothing(backend):
    with pytest.raises(NoStore, match="no (benchwarden )?store"):
        backend.open(create=False)
    assert backend.is_untouched()


def test_a_read_only_store_reads_and_refuses_appends(backend, store):
    store.append([make_record(task=str(i)) for i in range(3)])
    with backend.open(create=False) as reader:
        assert [r.task for r in reader.records()] == ["0", "1", "2"]
        assert reader.verify().ok
        with pytest.raises(StoreError, match="read-only"):
            reader.append([make_record(task="late")])
    assert len(store.records()) == 3


def test_iter_records_pages_by_sequence(store):
    written = [make_record(task=str(i), arm="ab"[i % 2]) for i in range(9)]
    for offset in range(0, 9, 4):
        store.append(written[offset:offset + 4])
    for batch in (1, 2, 4, 50):
        assert list(store.iter_records(batch=batch)) == written
        assert list(store.iter_records(arm="b", batch=batch)) == written[1::2]
        report = store.verify(batch=batch)
        assert report.ok and report.checked == 10 and report.last_seq == store.head().seq


def test_the_head_witness_follows_appends_and_catches_a_removed_tail(backend, store):
    store.append([make_record(task=str(i)) for i in range(4)])
    store.append([make_record(task="last")])
    head = store.head()
    report = store.verify()
    assert report.ok and any("agrees" in line for line in report.lines())
    store.close()
    backend.tamper("DELETE FROM entries WHERE seq = (SELECT MAX(seq) FROM entries)")
    with backend.open(create=False) as reopened:
        report = reopened.verify()
    assert not report.ok and report.first_broken is None
    assert "removed from its tail" in report.line()
    assert f"reached entry {head.seq}" in report.line()


def _entry_count(backend) -> int:
    with backend.open(create=False) as reader:
        return reader.verify().checked


def _cut_the_tail(backend, entries: int) -> None:
    backend.tamper(f"DELETE FROM entries WHERE seq > (SELECT MAX(seq) - {entries} FROM entries)")


@pytest.mark.parametrize("damage", ["tail cut", "tail cut and grown again", "unreadable",
                                    "another store's", "torn"])
def test_a_writer_never_writes_over_a_witness_the_chain_contradicts(backend, store, damage):
    """The next append refuses, before writing anything, a witness that says entries
    are missing (or that it cannot read): rewriting it would hide the loss from
    `verify`. Moving the witness aside is the way on, and then the store is usable."""
    store.append([make_record(task=str(i)) for i in range(4)])
    witness = store.witness_path
    assert witness is not None
    store.close()
    if damage == "tail cut":
        _cut_the_tail(backend, 2)
    elif damage == "tail cut and grown again":
        _cut_the_tail(backend, 2)
        kept = witness.read_bytes()
        witness.unlink()  # a writer without the witness grows the chain past its entry
        with backend.open() as other:
            other.append([make_record(task=f"new {i}") for i in range(3)])
        witness.write_bytes(kept)
    elif damage == "unreadable":
        witness.write_text("not a witness")
    elif damage == "another store's":
        recorded = json.loads(witness.read_text())
        witness.write_text(json.dumps({**recorded, "first": "e" * 64}))
    else:
        witness.write_bytes(witness.read_bytes()[:40])
    before, held = _entry_count(backend), witness.read_bytes()
    with backend.open() as writer:
        with pytest.raises(CorruptStore) as caught:
            writer.append([make_record(task="after the damage")])
        with pytest.raises(CorruptStore):
            writer.begin_run(stamp_run(suite="demo", bench_version="1", config={},
                                       run_id="run-2"))
    message = str(caught.value)
    assert "\n" not in message and "nothing was appended" in message
    assert "verify --store" in message and f"move {witness} aside" in message
    assert caught.value.exit_code == 4
    assert _entry_count(backend) == before and witness.read_bytes() == held
    with backend.open(create=False) as reader:
        assert not reader.verify().ok  # the evidence is still there for verify
    witness.rename(witness.with_name(witness.name + ".aside"))
    with backend.open() as writer:
        writer.rebuild_derived()  # a cut tail leaves counts of what it removed
        writer.append([make_record(task="after the damage")])
    with backend.open(create=False) as reader:
        assert reader.verify().ok and _entry_count(backend) == before + 1


def test_a_witness_that_agrees_lets_every_writer_append(backend, store):
    """The check is no obstacle to a healthy store: witnesses behind the head (a slower
    writer's), at the head, of an empty store, or missing (a copy without its sidecar)."""
    store.append([make_record(task="0")])
    witness = store.witness_path
    assert witness is not None
    early = witness.read_bytes()
    store.append([make_record(task="1")])
    witness.write_bytes(early)  # a lower bound: the store grew since
    with backend.open() as writer:
        writer.append([make_record(task="2")])
    witness.unlink()
    with backend.open() as writer:
        writer.append([make_record(task="3")])
    assert witness.exists()
    with backend.open(create=False) as reader:
        assert [r.task for r in reader.records()] == ["0", "1", "2", "3"]
        assert reader.verify().ok


def test_a_held_append_lock_is_waited_for_then_refused(backend, store, monkeypatch):
    monkeypatch.setenv("BENCHWARDEN_STORE_TIMEOUT", "0.3")
    with backend.open() as other:
        with store._transaction() as cursor:
            cursor.execute("SELECT hash FROM entries ORDER BY seq DESC LIMIT 1")
            with pytest.raises(StoreError, match="locked by another") as caught:
                other.append([make_record(task="blocked")])
    assert caught.value.exit_code == 4 and "\n" not in str(caught.value)
    assert [r.task for r in store.records()] == []
    other_store_is_usable = backend.open()
    with other_store_is_usable:
        other_store_is_usable.append([make_record(task="later")])
    assert [r.task for r in store.records()] == ["later"]


# -- PostgreSQL only -------------------------------------------------------------------

@pytest.fixture
def postgres(postgres_database) -> PostgresBackend:
    return PostgresBackend(postgres_database, f"t{next(_schema_numbers)}")


@pytest.fixture
def pg_store(postgres) -> Iterator[Store]:
    with postgres.open() as opened:
        opened.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="run-1"))
        yield opened


@pytest.mark.parametrize("setting", ["client_encoding=LATIN1", "extra_float_digits=-15",
                                     "standard_conforming_strings=off"])
def test_postgres_reads_what_it_stored_whatever_the_url_s_settings(postgres, setting):
    """A URL (or a role, or a database) may set the session's text encoding, float
    digits or string escapes; the store still writes and reads every name, body and
    number as given, and the chain verifies."""
    postgres.location += quote(f" -c{setting}")
    with postgres.open() as store:
        store.begin_run(stamp_run(suite="demo", bench_version="1", config={},
                                  run_id="run-1"))
        store.append([make_record(task="日本語", arm="ärm", note="back\\slash \x00")])
    with postgres.open(create=False) as store:
        (record,) = store.records()
        totals = store.group_totals("demo", "run-1")
        assert store.verify().ok
    assert (record.task, record.arm) == ("日本語", "ärm")
    assert record.payload == {"note": "back\\slash \x00"}
    assert [(group.key[2:4], group.duration_s) for group in totals] == \
        [(("ärm", "日本語"), record.ended_at - record.started_at)]


def test_postgres_refuses_truncate(postgres, pg_store):
    pg_store.append([make_record()])
    with pytest.raises(postgres.refused, match="append-only: TRUNCATE refused"):
        postgres.execute("TRUNCATE entries")
    assert len(pg_store.records()) == 1


def test_postgres_append_waits_for_the_chain_lock(postgres, pg_store):
    """While one writer holds the append lock, another cannot read the head and append."""
    pg_store.append([make_record(task="first")])
    finished = threading.Event()

    def second_writer() -> None:
        with postgres.open() as other:
            other.append([make_record(task="second")])
        finished.set()

    with pg_store._transaction() as cursor:
        cursor.execute("SELECT hash FROM entries ORDER BY seq DESC LIMIT 1")
        thread = threading.Thread(target=second_writer)
        thread.start()
        # the lock is held, so the other writer cannot have finished, however long we wait
        assert not finished.wait(0.5)
    thread.join()
    assert finished.is_set()
    assert [r.task for r in pg_store.records()] == ["first", "second"]
    assert pg_store.verify().ok


def test_postgres_append_only_role_can_write(postgres, pg_store):
    """The lock needs no table privilege: a role with INSERT and SELECT only appends
    (and UPDATE on the derived group totals, run counts and run headings, whose rows
    an append changes)."""
    role = f"bw_writer_{secrets.token_hex(3)}"
    schema = postgres.location.rsplit("%3D", 1)[1]
    postgres.execute(f"CREATE ROLE {role} LOGIN")
    try:
        postgres.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}; "
                         f"GRANT SELECT, INSERT ON entries, meta, run_configs TO {role}; "
                         f"GRANT SELECT, INSERT, UPDATE ON record_group_totals, record_runs, "
                         f"run_headings TO {role}; "
                         f"GRANT USAGE ON SEQUENCE entries_seq_seq TO {role}")
        url = postgres.location.replace("://postgres@", f"://{role}@")
        with open_store(url) as writer:
            writer.append([make_record(task="by-writer")])
            writer.begin_run(stamp_run(suite="demo", bench_version="1", config={},
                                       run_id="run-2"))
            writer.finish_run(RunEnd("run-2", 2.0, "completed", {}))
            assert writer.verify().ok
        assert [r.task for r in pg_store.records()] == ["by-writer"]
    finally:
        postgres.execute(f"DROP OWNED BY {role}; DROP ROLE {role}")


def test_postgres_schema_version_mismatch_is_one_clear_line(postgres, pg_store):
    postgres.execute("UPDATE meta SET value = '99' WHERE name = 'schema_version'")
    with pytest.raises(CorruptStore, match="schema version 99, this benchwarden reads 1 and 2"):
        postgres.open()


def test_postgres_foreign_entries_table_is_refused(postgres):
    postgres.execute("CREATE TABLE entries (id int)")
    with pytest.raises(CorruptStore, match="not a benchwarden store"):
        postgres.open()


@pytest.mark.parametrize("url, expected", [
    ("postgresql://postgres:hunter2@127.0.0.1:1/postgres", "cannot reach PostgreSQL store"),
    (None, "does not exist (create it first)"),
])
def test_postgres_connection_problems_are_one_line_without_the_password(postgres, url, expected):
    url = url or POSTGRES_URL.rsplit("/", 1)[0] + "/bw_no_such_database"
    with pytest.raises(StoreError) as caught:
        open_store(url)
    message = str(caught.value)
    assert expected in message
    assert "\n" not in message and "hunter2" not in message


def test_postgres_refused_credentials_are_named(postgres):
    role = f"bw_nologin_{secrets.token_hex(3)}"
    postgres.execute(f"CREATE ROLE {role} NOLOGIN")
    try:
        url = POSTGRES_URL.replace("://postgres@", f"://{role}:secret@")
        with pytest.raises(StoreError, match="refused the credentials") as caught:
            open_store(url)
        assert "secret" not in str(caught.value).replace("***", "")
    finally:
        postgres.execute(f"DROP ROLE {role}")


def test_redact_hides_only_the_password():
    from benchwarden.core.store_postgres import redact

    assert redact("postgresql://u:pw@h:5432/db?x=1") == "postgresql://u:***@h:5432/db?x=1"
    assert redact("postgresql://u@h/db") == "postgresql://u@h/db"


# -- reading for reports at scale: slim rows, chosen records, cell depth ---------------

def test_record_summaries_are_the_records_without_their_bulk(store):
    written = [make_record(arm=arm, task=task, trial=trial, scope="s", tier="read",
                           failure=None, turns=trial, transcript=[{"kind": "shell"}] * 50,
                           final_report="x" * 5000)
               for arm in ("a", "b") for task in ("t1", "t2") for trial in (1, 2, 3)]
    written.append(make_record(arm="a", task="t9", trial=1, scope="other", tier="read"))
    store.append(written)
    summaries = list(store.iter_record_summaries(suite="demo", scope="s",
                                                 payload_fields=("tier", "failure", "turns",
                                                                 "absent"), batch=4))
    mine = [record for record in written if record.scope == "s"]
    assert [(s.arm, s.task, s.trial) for s in summaries] == [(r.arm, r.task, r.trial) for r in mine]
    for summary, record in zip(summaries, mine, strict=True):
        assert summary == RecordSummary.of(record, ("tier", "failure", "turns", "absent"),
                                           seq=summary.seq)
        assert "absent" not in summary.payload and summary.payload["failure"] is None
    seqs = [summary.seq for summary in summaries]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    chosen = store.records_at([seqs[4], seqs[0], 10**9])
    assert list(chosen) == [seqs[0], seqs[4]] and chosen[seqs[4]] == mine[4]


addresses = st.lists(st.tuples(st.sampled_from(("s", "other")), st.sampled_from(("a", "b", "c")),
                               st.sampled_from(("0", "1", "x", "ballast-9")),
                               st.integers(min_value=1, max_value=4)),
                     unique=True, max_size=40)
# cells holding trials 1 to n each (a contamination run's rungs): SQLite counts them from
# `record_cells`
dense = st.dictionaries(st.tuples(st.sampled_from(("a", "b", "c")),
                                  st.sampled_from(("0", "1", "x", "ballast-9"))),
                        st.integers(min_value=1, max_value=4), max_size=8).map(
    lambda cells: [("s", arm, task, trial) for (arm, task), top in cells.items()
                   for trial in range(1, top + 1)])

# as `dense`, but each cell's trial 1 written as trial 0 or below: as many records as its
# highest trial, yet not trials 1 to it (the store does not refuse such a trial)
holed = st.dictionaries(st.tuples(st.sampled_from(("a", "b", "c")),
                                  st.sampled_from(("0", "1", "x", "ballast-9"))),
                        st.tuples(st.integers(min_value=2, max_value=4),
                                  st.integers(min_value=-2, max_value=0)),
                        min_size=1, max_size=8).map(
    lambda cells: [("s", arm, task, low if trial == 1 else trial)
                   for (arm, task), (top, low) in cells.items()
                   for trial in range(1, top + 1)])


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(addresses | dense | holed, st.sets(st.sampled_from(("0", "1", "x", "nothing"))),
       st.sets(st.tuples(st.sampled_from(("a", "b", "z")), st.integers(min_value=1, max_value=5))))
def test_a_scope_is_counted_and_read_in_part_by_address(backend, written, tasks, groups):
    """`record_counts` counts each arm and trial of a scope as its records do,
    `record_groups` with the sequence number of each one's last record, `record_seqs`
    finds the records of the groups (and tasks) asked for, `record_addresses` the same
    with their addresses, and
    `iter_record_summaries(seqs=...)` reads those, as the whole scope's reading has them."""
    with backend.open() as store:
        store.begin_run(stamp_run(suite="demo", bench_version="1", config={}))
        scope = f"s-{secrets.token_hex(4)}"  # a fresh scope per example (one store)
        records = [make_record(scope=scope if where == "s" else f"{scope}-other", arm=arm,
                               task=task, trial=trial, slot=index)
                   for index, (where, arm, task, trial) in enumerate(written)]
        for start in range(0, len(records), 7):
            store.append(records[start:start + 7])
        every = list(store.iter_record_summaries(suite="demo", scope=scope,
                                                 payload_fields=("slot",)))
        expected: dict[tuple[str, int], int] = {}
        last: dict[tuple[str, int], int] = {}
        for summary in every:
            expected[(summary.arm, summary.trial)] = expected.get(
                (summary.arm, summary.trial), 0) + 1
            last[(summary.arm, summary.trial)] = summary.seq  # in the order written
        assert store.record_counts("demo", scope) == expected
        assert store.record_groups("demo", scope) == {
            group: (count, last[group]) for group, count in expected.items()}
        assert Store.record_counts(store, "demo", scope) == expected  # over the index
        chosen = store.record_seqs("demo", scope, groups)
        assert chosen == [s.seq for s in every if (s.arm, s.trial) in groups]
        assert store.record_seqs("demo", scope, groups, tasks=tasks) == [
            s.seq for s in every if (s.arm, s.trial) in groups and s.task in tasks]
        assert store.record_addresses("demo", scope, groups, tasks=tasks) == [
            (s.seq, s.arm, s.trial, s.task) for s in every
            if (s.arm, s.trial) in groups and s.task in tasks]
        assert list(store.iter_record_summaries(suite="demo", scope=scope,
                                                payload_fields=("slot",), seqs=chosen,
                                                batch=3)) == \
            [s for s in every if s.seq in set(chosen)]
        assert store.record_counts("demo", "no such scope") == {}


def test_cell_depth_counts_records_and_the_highest_trial(store):
    store.append([make_record(arm="a", task="t", trial=trial, scope="s") for trial in (1, 2, 7)])
    store.append([make_record(arm="b", task="t", trial=1, scope="s")])
    assert store.cell_depth("demo", "s", "a", "t") == (3, 7)
    assert store.cell_depth("demo", "s", "b", "t") == (1, 1)
    assert store.cell_depth("demo", "s", "c", "t") == (0, 0)
    assert store.cell_depth("demo", "s", "a", "t")[0] == len(
        store.records(suite="demo", scope="s", arm="a", task="t"))
    assert store.cell_depth("demo", "s", "a", "t")[1] == store.highest_trial("demo", "s", "a", "t")


@pytest.mark.parametrize(("change", "named"), [
    ({"payload": {"turns": float("nan")}}, r"payload\.turns is NaN"),
    ({"payload": {"scores": [0.5, {"recall": float("inf")}]}},
     r"payload\.scores\[1\]\.recall is infinity"),
    ({"payload": {"cost": -float("inf")}}, r"payload\.cost is minus infinity"),
    ({"started_at": float("nan")}, r"started_at is NaN"),
    ({"ended_at": float("inf")}, r"ended_at is infinity"),
    ({"tokens": TokenComponents(output=4.0)}, r"tokens\.output is 4\.0, not a whole"),  # type: ignore[arg-type]
])
def test_a_record_json_would_alter_is_refused_and_the_store_keeps_the_rest(store, change, named):
    """JSON writes null for a NaN or an infinity, silently: such a record would read back
    as another one. The whole batch is refused in one line naming the value; the batches
    before it stay, and the store stays usable."""
    store.append([make_record(task="before")])
    bad = dataclasses.replace(make_record(task="bad"), **change)
    with pytest.raises(UnstorableValue, match=named) as refused:
        store.append([make_record(task="fine"), bad])
    assert "\n" not in str(refused.value) and "demo/run-1/a/bad/trial 1" in str(refused.value)
    assert [record.task for record in store.records()] == ["before"]
    store.append([make_record(task="after")])
    assert [record.task for record in store.records()] == ["before", "after"]
    assert store.verify().ok


def test_a_run_or_run_end_json_would_alter_is_refused(store):
    runs_before = [info.run.run_id for info in store.runs()]
    run = stamp_run(suite="demo", bench_version="1", config={"temperature": float("nan")},
                    run_id="run-2")
    with pytest.raises(UnstorableValue, match=r"config\.temperature is NaN"):
        store.begin_run(run)
    assert [info.run.run_id for info in store.runs()] == runs_before
    store.append([make_record()])
    with pytest.raises(UnstorableValue, match=r"summary\.score\[0\] is infinity"):
        store.finish_run(RunEnd("run-1", 3.0, "completed", {"score": [float("inf")]}))
    assert store.run_info("run-1").end is None  # resumable: no end was written
    store.finish_run(RunEnd("run-1", 3.0, "completed", {"score": [1.0]}))
    assert store.run_info("run-1").end is not None


@pytest.mark.parametrize(("payload", "named"), [
    ({"per_seed": {1: 0.5}}, "Only dicts with str keys"),
    ({"text": "half a pair \udc80"}, "surrogates not allowed"),
    ({"object": object()}, "Encoding objects of type object is unsupported"),
])
def test_a_record_the_encoder_refuses_is_named_in_one_line(store, payload, named):
    """What canonical JSON cannot encode at all is refused as the store's own error (exit
    4, one line naming the record), not the encoder's exception, and nothing of the batch
    is written."""
    with pytest.raises(UnstorableValue, match=named) as refused:
        store.append([make_record(task="fine"), make_record(task="odd", **payload)])
    assert "demo/run-1/a/odd/trial 1" in str(refused.value) and "\n" not in str(refused.value)
    assert store.records() == []
    with pytest.raises(UnstorableValue, match="refusing to store run run-2: Only dicts"):
        store.begin_run(stamp_run(suite="demo", bench_version="1", config={"seeds": {1: 2}},
                                  run_id="run-2"))
    with pytest.raises(UnstorableValue, match="the end of run run-1: Only dicts"):
        store.finish_run(RunEnd("run-1", 3.0, "completed", {"by_seed": {7: "ok"}}))


# -- pages of bodies bounded by bytes as well as rows ------------------------------------------

@pytest.mark.parametrize("page_bytes", [1, 700, 5_000, 10**9])
def test_reads_of_bodies_are_cut_by_bytes_and_give_every_record_once(store, monkeypatch,
                                                                    page_bytes):
    """Records of very different sizes (an agent's transcript of megabytes beside a
    short one): every reader of bodies gives each record once, in order, whatever the
    byte bound, and no page it asked for held more than `PAGE_BYTES` besides the body
    that crossed it."""
    import random

    draw = random.Random(page_bytes)
    written = [make_record(task=f"t{i:02d}", blob="x" * draw.choice((0, 10, 300, 2_000, 9_000)))
               for i in range(40)]
    store.append(written[:25])
    store.append(written[25:])
    pages: list[list[int]] = []
    backend_class = type(store)  # PostgreSQL streams its pages: its own `_bounded_page`
    bounded = backend_class._bounded_page

    def spied(self, sql, params, body):
        rows, cut = bounded(self, sql, params, body)
        pages.append([len(row[body]) for row in rows])
        return rows, cut

    monkeypatch.setattr(store_module, "PAGE_BYTES", page_bytes)
    monkeypatch.setattr(backend_class, "_bounded_page", spied)
    tasks = [record.task for record in written]
    for batch in (1, 7, 500):
        assert list(store.iter_records(batch=batch)) == written
        assert [s.task for s in store.iter_record_summaries(suite="demo", batch=batch)] == tasks
    summaries = list(store.iter_record_summaries(suite="demo", payload_fields=("blob",)))
    chosen = [summary.seq for summary in summaries[::3]]
    assert [s.task for s in store.iter_record_summaries(suite="demo", seqs=chosen)] \
        == tasks[::3]
    assert store.records_at(chosen) == dict(zip(chosen, written[::3], strict=True))
    assert [seq for seq, _ in store.iter_records_at(reversed(chosen))] == chosen
    checked = store.verify(batch=7)
    assert checked.ok and checked.checked == len(written) + 1  # and the run start
    assert pages and all(sum(page[:-1]) < page_bytes for page in pages)
    if page_bytes < 10**9:  # some page was cut short by bytes, not rows
        assert any(sum(page) >= page_bytes for page in pages)


@pytest.mark.parametrize("body", ["42", "4.5", "NULL"])
def test_a_body_that_is_no_body_is_named_not_an_unexpected_error(tmp_path, body):
    """SQLite keeps any value in any column: a hand-edited store whose entry holds a
    number (or, with its constraint gone, NULL) where a body belongs. Paging by bytes
    must not trip on it: `verify` names the entry, the readers refuse in one line."""
    backend = SQLiteBackend(tmp_path)
    with backend.open() as store:
        store.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="run-1"))
        store.append([make_record(task=f"t{i}") for i in range(4)])
    if body == "NULL":  # a table rebuilt without its NOT NULL, as an editor might
        raw = sqlite3.connect(backend.path)
        raw.execute("PRAGMA writable_schema = ON")
        raw.execute("UPDATE sqlite_master SET sql = replace(sql, 'body BLOB NOT NULL', "
                    "'body BLOB') WHERE name = 'entries'")
        raw.commit()
        raw.close()
    backend.tamper(f"UPDATE entries SET body = {body} WHERE seq = 3")
    with backend.open(create=False) as reader:
        checked = reader.verify()
        assert not checked.ok and "entry 3" in (checked.first_broken or "")
        with pytest.raises(CorruptStore, match="entry 3"):
            list(reader.iter_records())
        with pytest.raises(CorruptStore, match="entry 3"):
            list(reader.iter_record_summaries(suite="demo"))
