"""The store's fast append path keeps every guarantee of the plain one.

Batch appends encode a batch in one call, compute the chain's links in one pass, insert
with one statement (SQLite) or one COPY (PostgreSQL), skip the scrubber's walk for
records whose bytes cannot hold a remembered secret, and write the head witness once.
These tests hold that:
- the stored bytes and hashes are those the per-record encoder and `link_hash` give
  (golden values computed by the encoder before the fast path, and property tests);
- the scrubber's shortcut never lets a remembered secret through;
- a batch lands whole or not at all, on SQLite and a real PostgreSQL;
- a chain written entry by entry continues under batches, and `benchwarden verify
  --store` passes a batch-written store and catches tampering.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from benchwarden.core import secrets
from benchwarden.core.chain import GENESIS_HASH, chain_links, link_hash
from benchwarden.core.group_totals import GROUP_TOTALS_COLUMNS, fold_into
from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import Record, TokenComponents, canonical_json, canonical_json_many
from benchwarden.core.store import (
    DuplicateRecord,
    SQLiteStore,
    Store,
    UnstorableValue,
    open_store,
    summary_row,
)
from benchwarden.core.witness import read_witness, sidecar_for
from tests.conftest import fresh_postgres_database
from tests.core.test_store_backends import PostgresBackend, SQLiteBackend, make_record

# A record with every awkward character class, and what the encoder before the batch
# path produced for it (bytes, address bytes and the entry's hash after GENESIS_HASH).
GOLDEN_RECORD = Record(
    suite="arms", scope="golden", arm="cli", task="task-é\"\\\n\u2028", trial=3,
    run_id="run-1", outcome="pass", started_at=1790000000.5, ended_at=1790000007.25,
    tokens=TokenComponents(fresh_input=1834, cache_creation=512, cache_read=10240,
                           output=377, reasoning=None),
    payload={"z": [1, 2.5, None, True], "a": {"b": "ü 😀 \t", "A": -0.0},
             "calls": [{"tool": "x", "ok": False}]})
GOLDEN_BODY = (
    b'{"arm":"cli","ended_at":1790000007.25,"outcome":"pass","payload":{"a":{"A":-0.0,'
    b'"b":"\xc3\xbc \xf0\x9f\x98\x80 \\t"},"calls":[{"ok":false,"tool":"x"}],'
    b'"z":[1,2.5,null,true]},"run_id":"run-1","scope":"golden","started_at":1790000000.5,'
    b'"suite":"arms","task":"task-\xc3\xa9\\"\\\\\\n\xe2\x80\xa8","tokens":'
    b'{"cache_creation":512,"cache_read":10240,"fresh_input":1834,"output":377,'
    b'"reasoning":null},"trial":3}')
GOLDEN_ADDRESS = b'["record","arms","golden","cli","task-\xc3\xa9\\"\\\\\\n\xe2\x80\xa8",3,"run-1"]'
GOLDEN_HASH = "7f1dc69d0422101927e74ac5e12e2b8fbcd8052b1de10a58fabc554f832757d5"

json_scalars = st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | \
    st.floats(allow_nan=False, allow_infinity=False) | st.text()
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children,
                                                                       max_size=4),
    max_leaves=12)
records = st.builds(
    Record, suite=st.text(min_size=1), scope=st.text(), arm=st.text(), task=st.text(),
    trial=st.integers(0, 10**9), run_id=st.text(), outcome=st.text(),
    started_at=st.floats(allow_nan=False, allow_infinity=False),
    ended_at=st.floats(allow_nan=False, allow_infinity=False),
    tokens=st.builds(TokenComponents, fresh_input=st.integers(0, 10**9),
                     output=st.integers(0, 10**9),
                     reasoning=st.none() | st.integers(0, 10**6)),
    payload=st.dictionaries(st.text(), json_values, max_size=5))


@pytest.fixture(autouse=True)
def _no_remembered_secrets() -> Iterator[None]:
    secrets.forget_all()
    yield
    secrets.forget_all()


# -- bytes and hashes: identical to the per-record path ------------------------------

def test_golden_record_encodes_and_hashes_as_before():
    assert canonical_json(GOLDEN_RECORD) == GOLDEN_BODY
    assert canonical_json_many([GOLDEN_RECORD, GOLDEN_RECORD]) == [GOLDEN_BODY, GOLDEN_BODY]
    address = ("record", "arms", "golden", "cli", "task-é\"\\\n\u2028", 3, "run-1")
    assert canonical_json_many([address]) == [GOLDEN_ADDRESS]
    assert link_hash(GENESIS_HASH, GOLDEN_ADDRESS, GOLDEN_BODY) == GOLDEN_HASH
    assert chain_links(GENESIS_HASH, [(GOLDEN_ADDRESS, GOLDEN_BODY)]) == [GOLDEN_HASH]


def test_golden_record_is_stored_with_the_old_bytes_and_hash(tmp_path):
    with open_store(tmp_path / "s.sqlite") as store:
        store.append([GOLDEN_RECORD])
        (body, previous, stored), = store._query("SELECT body, prev_hash, hash FROM entries")
        assert (bytes(body), previous, stored) == (GOLDEN_BODY, GENESIS_HASH, GOLDEN_HASH)
        assert store.records() == [GOLDEN_RECORD]


@settings(max_examples=200, deadline=None)
@given(st.lists(json_values | records, max_size=8))
def test_batch_encoding_equals_encoding_each_value(values):
    assert canonical_json_many(values) == [canonical_json(value) for value in values]


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
       st.lists(st.tuples(st.binary(max_size=64), st.binary(max_size=256)), max_size=8))
def test_chain_links_equal_link_hash_chained(previous, entries):
    expected, current = [], previous
    for address, body in entries:
        current = link_hash(current, address, body)
        expected.append(current)
    assert chain_links(previous, entries) == expected


# -- the scrubber's shortcut ---------------------------------------------------------

SECRETS = st.text(min_size=secrets.MIN_SECRET_LENGTH, max_size=24).filter(
    lambda text: text.strip() == text and "\x00" not in text)


def _strings_with(secret: str) -> st.SearchStrategy[str]:
    forms = sorted(secrets.encodings_of(secret))
    return st.builds(lambda before, form, after: before + form + after,
                     st.text(max_size=6), st.sampled_from(forms), st.text(max_size=6))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_shortcut_never_skips_a_value_the_scrubber_would_change(data):
    secret = data.draw(SECRETS, label="secret")
    scrubber = secrets.Scrubber([secret])
    leaves = json_scalars | _strings_with(secret)
    value = data.draw(st.recursive(
        leaves, lambda children: st.lists(children, max_size=3) | st.dictionaries(
            leaves.filter(lambda leaf: isinstance(leaf, str)) | st.text(), children,
            max_size=3), max_leaves=8), label="value")
    if scrubber.scrub_value(value) != value:
        assert scrubber.may_alter_json(canonical_json(value))


def test_the_shortcut_is_off_with_nothing_remembered_and_on_for_encoded_forms():
    scrubber = secrets.Scrubber()
    assert not scrubber.may_alter_json(b'{"a":"sk-anything-at-all"}')
    scrubber.add('pa"ss\\word\u2028é')
    assert scrubber.may_alter_json(canonical_json({"x": 'see pa"ss\\word\u2028é here'}))
    assert scrubber.may_alter_json(canonical_json({"x": "pa&quot;ss\\word\u2028é"}))
    assert not scrubber.may_alter_json(canonical_json({"x": "nothing secret"}))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.data())
def test_appended_bodies_are_those_of_the_scrubbed_records(tmp_path_factory, data):
    secret = data.draw(SECRETS, label="secret")
    # a secret that is part of the record's own field names (`started_` of `started_at`)
    # is in every body whatever is scrubbed: the scrubber reads values, not the schema
    assume(secret.encode("utf-8", "surrogatepass")
           not in canonical_json(make_record(task="t0", note="", nested={})))
    secrets.forget_all()
    secrets.remember(secret)
    texts = data.draw(st.lists(_strings_with(secret) | st.text(max_size=12), min_size=1,
                               max_size=6), label="texts")
    batch = [make_record(task=f"t{index}", note=text, nested={text: [text]})
             for index, text in enumerate(texts)]
    with open_store(tmp_path_factory.mktemp("scrub") / "s.sqlite") as store:
        store.append(batch)
        bodies = [bytes(row[0]) for row in store._query("SELECT body FROM entries ORDER BY seq")]
    assert bodies == [canonical_json(secrets.scrub_entry(record)) for record in batch]
    assert not any(secret.encode("utf-8", "surrogatepass") in body for body in bodies)


# -- one transaction per batch, on both backends -------------------------------------

@pytest.fixture(scope="module")
def postgres_database() -> Iterator[str]:
    with fresh_postgres_database("bw_test_append") as url:
        yield url.rsplit("/", 1)[1]


_schemas = itertools.count(1)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request, tmp_path):
    if request.param == "sqlite":
        return SQLiteBackend(tmp_path)
    return PostgresBackend(request.getfixturevalue("postgres_database"),
                           f"fast{next(_schemas)}")


@pytest.fixture
def store(backend) -> Iterator[Store]:
    with backend.open() as opened:
        opened.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="run-1"))
        yield opened


def _state(store: Store) -> tuple[Any, ...]:
    return (store._query("SELECT COUNT(*), MAX(seq) FROM entries")[0],
            read_witness(store.witness_path) if store.witness_path else None)


def test_large_batches_verify_and_read_back_in_order(store):
    written = [make_record(arm=f"a{index % 3}", task=f"t{index // 3}", value=index)
               for index in range(2500)]
    for offset in range(0, len(written), 1000):
        store.append(written[offset:offset + 1000])
    assert store.records(run_id="run-1") == written
    report = store.verify()
    assert report.ok and report.checked == 2501, report.lines()
    assert store.head().seq == report.last_seq
    assert read_witness(store.witness_path).seq == report.last_seq


@pytest.mark.parametrize("where", ["inside the batch", "against the store"])
def test_a_batch_with_a_duplicate_leaves_nothing(store, where):
    store.append([make_record(task="kept")])
    before = _state(store)
    batch = [make_record(task=f"new-{index}") for index in range(1500)]
    batch.insert(700, make_record(task="new-3" if where == "inside the batch" else "kept"))
    with pytest.raises(DuplicateRecord, match="already holds record demo/run-1/a/"):
        store.append(batch)
    assert _state(store) == before
    store.append(batch[:700])  # the store still takes the good part, chained on
    assert store.verify().ok


def test_a_batch_that_cannot_be_encoded_leaves_nothing(store):
    store.append([make_record(task="kept")])
    before = _state(store)
    with pytest.raises(UnstorableValue, match="demo/run-1/a/bad/trial 1"):
        store.append([make_record(task="fine"), make_record(task="bad", value=object())])
    assert _state(store) == before
    assert store.verify().ok


def test_tampering_inside_a_batch_is_named(backend, store):
    store.append([make_record(task=f"t{index}") for index in range(1000)])
    backend.tamper(backend.replace_in_body(500, '"task":"t498"', '"task":"t999"'))
    report = store.verify()
    assert not report.ok and "entry 500" in report.first_broken


# -- chains written entry by entry continue under the batch path ---------------------

def test_a_chain_written_entry_by_entry_continues_and_verifies(tmp_path):
    """Entries inserted as the store wrote them before the batch path (one `link_hash`
    and one INSERT each), then batches appended by this version: one intact chain."""
    path = tmp_path / "old.sqlite"
    with open_store(path) as store:
        store.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="run-1"))
    raw = sqlite3.connect(path, isolation_level=None)
    (previous,), = raw.execute("SELECT hash FROM entries ORDER BY seq DESC LIMIT 1")
    summary_rows = []
    for index in range(5):
        record = make_record(task=f"old-{index}")
        address = ("record", record.suite, record.scope, record.arm, record.task,
                   record.trial, record.run_id)
        body = canonical_json(record)
        current = link_hash(previous, canonical_json(list(address)), body)
        raw.execute("INSERT INTO entries (kind, suite, scope, arm, task, trial, run_id, body, "
                    "prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (*address, body, previous, current))
        seq = raw.execute("SELECT MAX(seq) FROM entries").fetchone()[0]
        # as that writer also counted the record in its cell (verify recounts them)
        raw.execute("INSERT INTO record_cells VALUES (?, ?, ?, ?, 1, ?)",
                    (*address[1:5], record.trial))
        summary_rows.append(summary_row(seq, body))
        previous = current
    # and kept its groups' totals and its run's count (verify recomputes them)
    for group in fold_into({}, summary_rows):
        raw.execute(f"INSERT INTO record_group_totals VALUES "
                    f"({', '.join(['?'] * len(group.row()))})", group.row())
    raw.execute("INSERT INTO record_runs VALUES ('run-1', 'demo', 5)")
    raw.close()
    with open_store(path, create=False, read_only=False) as store:
        store.append([make_record(task=f"new-{index}") for index in range(120)])
        report = store.verify()
        assert report.ok and report.checked == 126, report.lines()
        seqs = [row[0] for row in store._query("SELECT seq FROM entries ORDER BY seq")]
        assert seqs == list(range(1, 127))


def test_the_writer_connection_keeps_a_larger_page_cache(tmp_path):
    with open_store(tmp_path / "new.sqlite") as store:
        assert store._query("PRAGMA cache_size")[0][0] < -2000  # the default is 2 MiB
        assert store._query("PRAGMA journal_mode")[0][0] == "wal"


@pytest.mark.parametrize("size", [1, 49, 50, 51, 137])
def test_batches_of_any_size_insert_every_row_once(tmp_path, size):
    with open_store(tmp_path / "s.sqlite") as store:
        written = [make_record(task=f"t{index}") for index in range(size)]
        store.append(written)
        assert store.records() == written and store.verify().ok


# -- the command a user runs ---------------------------------------------------------

def test_verify_command_passes_a_batch_written_store_and_fails_a_tampered_one(tmp_path):
    backend = SQLiteBackend(tmp_path)
    path = backend.path
    with open_store(path) as store:
        store.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="run-1"))
        for offset in range(0, 3000, 1000):
            store.append([make_record(task=f"t{index}")
                          for index in range(offset, offset + 1000)])
    assert sidecar_for(path).exists()
    environment = dict(os.environ)
    command = [sys.executable, "-m", "benchwarden", "verify", "--store", str(path)]
    done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3001 entries verified" in done.stdout
    backend.tamper(
        "UPDATE entries SET body = replace(body, '\"t1500\"', '\"t9999\"') WHERE seq = 1502")
    done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "entry 1502" in done.stdout + done.stderr


# -- sequence numbers and the head taken from the insert, not read back --------------

def _group_totals_follow_the_entries(store: Store) -> None:
    """The group totals name each record by its own sequence number (first and newest):
    they are those folded from the entries' bodies at their numbers."""
    rows = [summary_row(int(seq), bytes(body)) for seq, body in store._query(
        "SELECT seq, body FROM entries WHERE kind = 'record' ORDER BY seq")]
    expected = sorted(group.row() for group in fold_into({}, rows))
    stored = sorted(tuple(row) for row in store._query(
        f"SELECT {', '.join(GROUP_TOTALS_COLUMNS)} FROM record_group_totals"))
    assert stored == expected


@pytest.mark.parametrize("reported", [True, False], ids=["from the insert", "read back"])
def test_group_totals_and_witness_land_at_the_inserted_numbers(tmp_path, monkeypatch, reported):
    given: list[Any] = []
    insert_rows = SQLiteStore._insert_rows

    def spy(self: SQLiteStore, cursor: Any, rows: list[tuple[Any, ...]]) -> Any:
        numbers = insert_rows(self, cursor, rows)
        given.append(numbers)
        return numbers if reported else None

    monkeypatch.setattr(SQLiteStore, "_insert_rows", spy)
    with open_store(tmp_path / "s.sqlite") as store:
        store.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="run-1"))
        for start, size in ((0, 137), (137, 1), (138, 60)):
            store.append([make_record(task=f"t{index}") for index in range(start, start + size)])
            assert read_witness(store.witness_path) == store.head()
        _group_totals_follow_the_entries(store)
        assert store.verify().ok
    # what the insert reported is exactly what the table holds, batch by batch
    assert [list(numbers) for numbers in given] == [[1], list(range(2, 139)), [139],
                                                    list(range(140, 200))]


def test_a_gap_before_a_batch_is_followed(tmp_path):
    """AUTOINCREMENT numbers from the largest number ever given: a store whose counter is
    ahead of its last entry (as one edited by hand) gets a batch after a gap, and the
    group totals and the witness follow the numbers the rows really got."""
    path = tmp_path / "s.sqlite"
    with open_store(path) as store:
        store.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="run-1"))
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("UPDATE sqlite_sequence SET seq = seq + 10 WHERE name = 'entries'")
    raw.close()
    with open_store(path) as store:
        store.append([make_record(task=f"t{index}") for index in range(75)])
        assert [row[0] for row in store._query(
            "SELECT seq FROM entries WHERE kind = 'record' ORDER BY seq")] == list(range(12, 87))
        _group_totals_follow_the_entries(store)
        assert read_witness(store.witness_path) == store.head()
        assert store.head().seq == 86
