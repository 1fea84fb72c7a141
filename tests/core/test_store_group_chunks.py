"""A store hands a scope's group totals over as one chunk aggregated by the database
(`Store.fold_group_chunks` through `_whole_scope_chunk`, `group_totals.whole_scope_chunk`;
SQLite and PostgreSQL each their own way): the same values, bit for bit and in the same
order, as the stored rows decoded by chunks (`decoded_chunks` of `fold_group_rows`), and
where a row is not as the store writes it, the rows' own reading (the same values, or
the same refusal)."""

from __future__ import annotations

import array
import itertools
import json
import re
import sqlite3
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.core.group_totals import (
    AGGREGATED_INTEGERS,
    AGGREGATED_TEXTS,
    FLOAT_COLUMNS,
    GROUP_TOTALS_COLUMNS,
    NO_SEQUENCE,
    SnapshotsDiffer,
    _integer_array,
    _newest_of_joined_texts,
    decoded_chunks,
    float_columns_of_json,
    whole_scope_chunk,
)
from benchwarden.core.records import Record, TokenComponents
from benchwarden.core.store import CorruptStore, SQLiteStore, Store
from tests.conftest import fresh_postgres_database
from tests.core.test_store_backends import PostgresBackend

SCOPE = "chunks"


def _record(arm: str, task: str, trial: int, values: dict[str, Any]) -> Record:
    payload = {"tier": values["tier"], "failure": values["failure"], "turns": values["turns"],
               "denied_calls": trial % 3, "tokens_reported": values["priced"],
               "bench_version": values["version"]}
    if values["cost"] is not None:
        payload["imputed_cost_usd"] = values["cost"]
    return Record(suite="arms", scope=SCOPE, arm=arm, task=task, trial=trial, run_id="run-1",
                  outcome=values["outcome"], started_at=1_790_000_000.0,
                  ended_at=1_790_000_000.0 + values["duration"],
                  tokens=TokenComponents(*values["tokens"], values["reasoning"]),
                  payload=payload)


record_values = st.fixed_dictionaries({
    "tier": st.sampled_from(["read", "write", "a,b", 'quo"te']),
    "failure": st.sampled_from([None, "incorrect", "hung"]),
    "turns": st.one_of(st.integers(0, 40), st.floats(-1e6, 1e6, allow_nan=False)),
    "priced": st.booleans(),
    "version": st.sampled_from(["1", "2"]),
    "cost": st.one_of(st.none(), st.floats(0, 1e3, allow_nan=False, allow_subnormal=True)),
    "outcome": st.sampled_from(["pass", "fail", "error"]),
    "duration": st.floats(0, 1e5, allow_nan=False),
    "tokens": st.tuples(*(st.integers(0, 2**40) for _ in range(4))),
    "reasoning": st.one_of(st.none(), st.integers(0, 10**6)),
})
# names a JSON array or a comma-joined text would trip over
task_names = st.sampled_from(["t0", "t1", "a,b", "[x]", 'say "hi"', "line\nbreak", "ünï", ""])
arm_names = st.sampled_from(["cli", "http", "m,c,p"])


def _filled(records: list[Record], cuts: list[int], store: Store | None = None) -> Store:
    store = SQLiteStore(":memory:") if store is None else store
    from benchwarden.core.provenance import stamp_run

    store.begin_run(stamp_run(suite="arms", bench_version="1", config={"scope": SCOPE},
                              run_id="run-1"))
    start = 0
    for cut in [*cuts, len(records)]:
        if cut > start:
            store.append(records[start:cut])
            start = cut
    return store


def _plain(chunks: list[Any]) -> tuple[list[list[str]], list[Any], list[Any]]:
    """The chunks concatenated, each value as its `repr` (-0.0 is not 0.0)."""
    columns: list[list[str]] = [[] for _ in GROUP_TOTALS_COLUMNS[:-2]]
    versions: list[Any] = []
    newest: list[Any] = []
    for chunk_columns, chunk_versions, chunk_newest in chunks:
        for held, column in zip(columns, chunk_columns[:len(columns)], strict=True):
            values = column.tolist() if isinstance(column, np.ndarray) else list(column)
            held.extend(repr(value) for value in values)
        versions.extend(chunk_versions)
        # a row of the aggregated chunk's matrix is the group's list, padded
        newest.extend([[seq for seq in row if seq != NO_SEQUENCE] for row in chunk_newest.tolist()]
                      if isinstance(chunk_newest, np.ndarray) else chunk_newest)
    return columns, versions, newest


def _by_rows(store: Store) -> list[Any]:
    return store.fold_group_rows("arms", SCOPE, lambda rows: list(decoded_chunks(rows, 3)))


@given(st.lists(st.tuples(arm_names, task_names, record_values), max_size=40),
       st.lists(st.integers(0, 40), max_size=3))
@settings(max_examples=80, deadline=None)
def test_the_aggregated_chunk_is_the_rows_decoded_bit_for_bit(drawn, cuts):
    records = [_record(arm, task, trial, values)
               for trial, (arm, task, values) in enumerate(drawn, start=1)]
    with _filled(records, sorted(cuts)) as store:
        chunks = store.fold_group_chunks("arms", SCOPE, list)
        assert store._whole_scope_chunk("arms", SCOPE) is not None  # the aggregated way
        assert len(chunks) == 1
        assert _plain(chunks) == _plain(_by_rows(store))


def test_an_empty_scope_is_an_empty_chunk():
    with _filled([], []) as store:
        chunks = store.fold_group_chunks("arms", SCOPE, list)
        assert store._whole_scope_chunk("arms", SCOPE) is not None
    assert _plain(chunks) == ([[] for _ in GROUP_TOTALS_COLUMNS[:-2]], [], [])


# a record's values as a sound store holds them (the tests below edit its rows)
SOUND_VALUES = {"tier": "read", "failure": None, "turns": 3, "priced": True, "version": "1",
                "cost": 0.25, "outcome": "pass", "duration": 2.5, "tokens": (1, 2, 3, 4),
                "reasoning": None}


def _sound_records() -> list[Record]:
    """Two arms by four tasks, a trial each, each its own duration."""
    return [_record(arm, f"t{task}", trial, {**SOUND_VALUES, "duration": 0.1 * trial})
            for trial, (arm, task) in enumerate(
                [(arm, task) for arm in ("cli", "http") for task in range(4)], start=1)]


def _read_both_ways(store: Store) -> tuple[Any, Any]:
    """The scope read the rows' way and as `fold_group_chunks` reads it: each its values,
    or the line of its refusal."""
    try:
        expected: Any = _plain(_by_rows(store))
    except CorruptStore as error:
        expected = str(error)
    try:
        found: Any = _plain(store.fold_group_chunks("arms", SCOPE, list))
    except CorruptStore as error:
        found = str(error)
    return expected, found


def _store_file(tmp_path: Any) -> Any:
    path = tmp_path / "s.sqlite"
    with _filled(_sound_records(), [3]) as memory:
        target = sqlite3.connect(path)
        memory._connection.backup(target)
        target.close()
    return path


# edits leaving rows of another kind or shape than the store writes: each is read the
# rows' way (the aggregated chunk is not made) and gives what the rows give
EDITS = {
    "a float column holding text": "UPDATE record_group_totals SET turns = 'x' WHERE task = 't1'",
    "a float column holding a blob":
        "UPDATE record_group_totals SET turns = CAST(2 AS BLOB) WHERE task = 't1'",
    "a whole-number column holding a fraction":
        "UPDATE record_group_totals SET records = 3.5 WHERE task = 't1'",
    "a whole-number column holding text":
        "UPDATE record_group_totals SET output = 'many' WHERE task = 't2'",
    "a text column holding a blob": "UPDATE record_group_totals SET task = X'00ff' "
                                    "WHERE task = 't2'",
    "newest not ascending": "UPDATE record_group_totals SET newest = '[3,1]' WHERE task = 't1'",
    "newest not between brackets":
        "UPDATE record_group_totals SET newest = '[1,2]\n' WHERE task = 't1'",
    "newest in other brackets":
        "UPDATE record_group_totals SET newest = '(1,2)' WHERE task = 't1'",
    "newest too long": "UPDATE record_group_totals SET newest = '[1,2,3,4]' WHERE task = 't1'",
    "newest holding a fraction":
        "UPDATE record_group_totals SET newest = '[1.0]' WHERE task = 't1'",
    "newest reaching into the next row":
        "UPDATE record_group_totals SET newest = '[1],[2' WHERE task = 't1'",
    "newest with an empty item": "UPDATE record_group_totals SET newest = '[1,,2]' "
                                 "WHERE task = 't1'",
    "newest not a list": "UPDATE record_group_totals SET newest = '5' WHERE task = 't1'",
    "newest with spaces": "UPDATE record_group_totals SET newest = '[ 5 , 6 ]' "
                          "WHERE task = 't1'",
    "newest a blob of a list's bytes":
        "UPDATE record_group_totals SET newest = CAST('[5]' AS BLOB) WHERE task = 't1'",
    "bench versions not JSON": "UPDATE record_group_totals SET bench_versions = 'x' "
                               "WHERE task = 't3'",
    "two groups sharing a first_seq":
        "UPDATE record_group_totals SET first_seq = (SELECT min(first_seq) FROM "
        "record_group_totals) WHERE task = 't3' AND arm = 'http'",
}


# edits JSON reads as the store's own values: either way, the same values
EDITS_OF_THE_SAME_VALUES = {
    "a float column holding a whole number (affinity makes it a float)":
        "UPDATE record_group_totals SET turns = 2 WHERE task = 't1'",
}


@pytest.mark.parametrize("edit", [*EDITS, *EDITS_OF_THE_SAME_VALUES])
def test_a_row_not_as_the_store_writes_it_is_read_the_rows_way(tmp_path, edit):
    path = _store_file(tmp_path)
    connection = sqlite3.connect(path)
    with connection:
        connection.execute({**EDITS, **EDITS_OF_THE_SAME_VALUES}[edit])
    connection.close()
    with SQLiteStore(path, create=False) as store:
        assert (store._whole_scope_chunk("arms", SCOPE) is None) == (edit in EDITS)
        expected, found = _read_both_ways(store)
    assert found == expected


def test_a_sound_store_file_is_read_the_aggregated_way(tmp_path, monkeypatch):
    """The control for the edits above: the same file unedited is aggregated, side by
    side (the aggregate on a second connection while this one reads the rows)."""
    beside: list[Any] = []
    original = SQLiteStore._aggregated_beside_rows

    def spied(self: SQLiteStore, *arguments: Any) -> Any:
        beside.append(original(self, *arguments))
        return beside[-1]

    monkeypatch.setattr(SQLiteStore, "_aggregated_beside_rows", spied)
    with SQLiteStore(_store_file(tmp_path), create=False) as store:
        assert store._whole_scope_chunk("arms", SCOPE) is not None
        assert _plain(store.fold_group_chunks("arms", SCOPE, list)) == _plain(_by_rows(store))
    assert len(beside) == 2 and all(read is not None for read in beside)


def _appended_between(path: Any, new_group: bool) -> None:
    """One more record in the store file: a new group, or a second trial of a group."""
    with SQLiteStore(path, create=False, read_only=False) as writer:
        writer.append([_record("cli", "t9" if new_group else "t1", 99,
                               {**SOUND_VALUES, "duration": 7.25})])


@pytest.mark.parametrize("new_group", [True, False], ids=["a new group", "a group's trial"])
def test_an_append_between_the_two_snapshots_is_read_in_one(tmp_path, monkeypatch,
                                                            new_group):
    """The aggregate of the store before an append, the rows' columns after it (as two
    connections can see it): the difference is found and the scope read again in one
    snapshot, which gives the rows' values after the append."""
    path = _store_file(tmp_path)
    original = SQLiteStore._aggregated_beside_rows

    def racing(self: SQLiteStore, aggregate: str, row_wise: str, params: Any) -> Any:
        aggregated = list(self._connection.execute(aggregate, params).fetchone())
        _appended_between(path, new_group)
        floats, read_with_floats = self._row_wise_columns(row_wise, params)
        return aggregated, floats, read_with_floats

    monkeypatch.setattr(SQLiteStore, "_aggregated_beside_rows", racing)
    with SQLiteStore(path, create=False) as store:
        chunk = store._whole_scope_chunk("arms", SCOPE)
        assert chunk is not None
        assert _plain([chunk]) == _plain(_by_rows(store))
        durations = _plain([chunk])[0][GROUP_TOTALS_COLUMNS.index("duration_s")]
    assert ("7.25" in durations) == new_group  # the appended record is in the chunk
    monkeypatch.setattr(SQLiteStore, "_aggregated_beside_rows", original)


def test_a_store_file_replaced_after_opening_is_read_from_the_file_opened(tmp_path):
    """The path names another file than the one the store opened (a copy with other
    token counts put in its place): the second connection would read that one, so the
    scope is read in one snapshot of the file opened."""
    import os

    path = _store_file(tmp_path)
    other = tmp_path / "other.sqlite"
    connection = sqlite3.connect(path)
    connection.backup(target := sqlite3.connect(other))
    connection.close()
    with target:
        target.execute("UPDATE record_group_totals SET output = output + 1000")
    target.close()
    with SQLiteStore(path, create=False) as store:
        expected = _plain(_by_rows(store))
        os.replace(other, path)
        assert store._aggregated_beside_rows(
            "SELECT 1", "SELECT 1, 1" + ", 1.0" * len(FLOAT_COLUMNS), ()) is None
        assert _plain(store.fold_group_chunks("arms", SCOPE, list)) == expected


def test_an_interrupt_stops_the_rows_read_beside(tmp_path, monkeypatch):
    """Ctrl-C while this connection aggregates: the other connection's statement (here
    made to count to ten billion: minutes, were it not interrupted) is interrupted, its
    thread joined, its connection closed, and the interrupt goes on."""
    import threading

    def counting(self: SQLiteStore, row_wise: str, params: Any,
                 connection: Any = None) -> Any:
        assert connection is not None  # the thread's own connection
        return connection.execute("WITH RECURSIVE counted(n) AS (SELECT 1 UNION ALL "
                                  "SELECT n + 1 FROM counted WHERE n < 1e10) "
                                  "SELECT max(n) FROM counted").fetchone()

    class Interrupted:
        """This store's connection, but Ctrl-C comes during the aggregate."""

        def __init__(self, connection: Any) -> None:
            self.connection = connection

        def __getattr__(self, name: str) -> Any:
            return getattr(self.connection, name)

        def execute(self, sql: str, *arguments: Any) -> Any:
            if "json_group_array" in sql:
                raise KeyboardInterrupt
            return self.connection.execute(sql, *arguments)

    monkeypatch.setattr(SQLiteStore, "_row_wise_columns", counting)
    with SQLiteStore(_store_file(tmp_path), create=False) as store:
        store._connection = Interrupted(store._connection)  # type: ignore[assignment]
        with pytest.raises(KeyboardInterrupt):
            store._whole_scope_chunk("arms", SCOPE)
        store._connection = store._connection.connection
    assert not [thread for thread in threading.enumerate()
                if thread.name == "benchwarden-rows"]


# ---------------------------------------------------------------------- whole_scope_chunk

def _aggregated(first_seqs: list[int]) -> tuple[list[str], list[array.array[Any]]]:
    """A scope's JSON arrays as a database aggregates them (a record a group), and its
    float columns."""
    count = len(first_seqs)
    integers = [str(first_seqs).replace(" ", "")] + ["[" + ",".join(["1"] * count) + "]"
                                                      for _ in AGGREGATED_INTEGERS[1:]]
    texts = {"arm": '"cli"', "task": '"t"', "outcome": '"pass"', "group_key": '"[null,null]"',
             "bench_versions": '"[\\"1\\"]"'}
    arrays = ["[" + ",".join([texts[name]] * count) + "]" for name in AGGREGATED_TEXTS[:-1]]
    # newest: each row's text's length, then the texts joined (here each row [seq, seq + 1])
    newest = [f"[{seq},{seq + 1}]" for seq in first_seqs]
    arrays += [str([len(text) for text in newest]).replace(" ", ""), "".join(newest)]
    floats = [array.array("d", [0.5] * count) for _ in FLOAT_COLUMNS]
    return integers + arrays, floats


def _read_with(first_seqs: list[int], records: list[int]) -> dict[str, array.array[Any]]:
    """Whole-number columns as read with the floats by another statement."""
    return {"first_seq": array.array("q", first_seqs), "records": array.array("q", records)}


def test_whole_scope_chunk_orders_by_first_seq():
    aggregated, floats = _aggregated([5, 2, 9])
    floats[0] = array.array("d", [5.0, 2.0, 9.0])
    chunk = whole_scope_chunk("arms", SCOPE, aggregated, floats,
                              _read_with([5, 2, 9], [1, 1, 1]))
    assert chunk is not None
    columns, versions, newest = chunk
    assert columns[GROUP_TOTALS_COLUMNS.index("first_seq")].tolist() == [2, 5, 9]
    assert columns[GROUP_TOTALS_COLUMNS.index(FLOAT_COLUMNS[0])].tolist() == [2.0, 5.0, 9.0]
    assert columns[0] == ["arms"] * 3 and columns[1] == [SCOPE] * 3
    assert versions == [("1",)] * 3
    assert newest.tolist() == [[2, 3, NO_SEQUENCE], [5, 6, NO_SEQUENCE], [9, 10, NO_SEQUENCE]]
    assert aggregated == []  # each text let go once decoded


# each spoiled `newest`: the three rows' texts, and their lengths where not their own
NEWEST_SPOILS = {
    "newest lengths not adding up": (["[1,2]", "[2,3]", "[3,4]"], [5, 5, 4]),
    "newest text running into the next row": (["[1,2", "][2,3]", "[3,4]"], None),
    "newest lengths cutting a text": (["[1,2]", "[2,3]", "[3,4]"], [4, 6, 5]),
    "newest too long": (["[1,2,3,4]", "[2]", "[3]"], None),
    "newest not ascending": (["[2,1]", "[2,3]", "[3,4]"], None),
    "newest negative": (["[-5]", "[2]", "[3]"], None),
    "newest with an empty item": (["[1,,2]", "[2]", "[3]"], None),
    "newest with a trailing comma": (["[1,]", "[2]", "[3]"], None),
    "newest with a leading zero": (["[01]", "[2]", "[3]"], None),
    "newest with a space": (["[1, 2]", "[2]", "[3]"], None),
    "newest past int64": (["[99999999999999999999]", "[2]", "[3]"], None),
    "newest not text": (["[1]", "[2]", "[3]"], [3, -1, 3]),
    "newest not a list": (["1", "[2]", "[3]"], None),
    "newest of other characters": (["[1]", "[2]", "[\u0663]"], None),
}


@pytest.mark.parametrize("spoil", ["a column one short",
                                   "a shared first_seq", "integers of another kind",
                                   *NEWEST_SPOILS])
def test_whole_scope_chunk_declines_what_it_cannot_vouch_for(spoil):
    aggregated, floats = _aggregated([1, 2, 3])
    if spoil == "a column one short":
        floats[1] = array.array("d", [0.5, 0.5])
    elif spoil == "a shared first_seq":
        aggregated[0] = "[1,1,3]"
    elif spoil == "integers of another kind":
        aggregated[1] = "[1,2.5,3]"
    else:
        texts, lengths = NEWEST_SPOILS[spoil]
        lengths = lengths or [len(text) for text in texts]
        aggregated[-2], aggregated[-1] = str(lengths).replace(" ", ""), "".join(texts)
    assert whole_scope_chunk("arms", SCOPE, aggregated, floats) is None


def test_whole_scope_chunk_reads_newest_of_every_length_and_none():
    """The control for the spoils above: empty lists beside lists of one to
    `NEWEST_KEPT` numbers, numbers of many digits."""
    aggregated, floats = _aggregated([1, 2, 3])
    texts = ["[]", "[7,10,9223372036854775806]", "[0]"]
    aggregated[-2], aggregated[-1] = str([len(text) for text in texts]), "".join(texts)
    chunk = whole_scope_chunk("arms", SCOPE, aggregated, floats)
    assert chunk is not None
    assert chunk[2].tolist() == [[NO_SEQUENCE] * 3, [7, 10, 9223372036854775806],
                                 [0, NO_SEQUENCE, NO_SEQUENCE]]


@pytest.mark.parametrize("differ", ["rows in another order", "a row more", "a row less",
                                    "records of another count"])
def test_whole_scope_chunk_says_when_the_rows_read_are_not_the_rows_aggregated(differ):
    aggregated, floats = _aggregated([1, 2, 3])
    read_with_floats = {"rows in another order": _read_with([2, 1, 3], [1, 1, 1]),
                        "a row more": _read_with([1, 2, 3, 4], [1, 1, 1, 1]),
                        "a row less": _read_with([1, 2], [1, 1]),
                        "records of another count": _read_with([1, 2, 3], [1, 2, 1])}[differ]
    with pytest.raises(SnapshotsDiffer):
        whole_scope_chunk("arms", SCOPE, aggregated, floats, read_with_floats)


def test_whole_scope_chunk_needs_every_column():
    aggregated, floats = _aggregated([1])
    with pytest.raises(ValueError, match="one JSON array is needed"):
        whole_scope_chunk("arms", SCOPE, aggregated[:-1], floats)


def test_float_columns_of_json_read_each_float_as_written():
    columns = float_columns_of_json(["[0.1, 4]", "[1e+300, 5e-324]", "[-0.5, -0.0]"])
    assert columns is not None
    assert [column.tolist() for column in columns] == [[0.1, 4.0], [1e300, 5e-324],
                                                       [-0.5, -0.0]]
    assert repr(columns[2][1]) == "-0.0"


@pytest.mark.parametrize("floats", [['[1, "Infinity"]'], ["[-0, 1]"], ["[1, -0]"],
                                    ["[1, 2"], ['["1"]']])
def test_float_columns_of_json_declines_what_would_not_read_back(floats):
    """A negative zero written `-0` (JSON would read it as 0.0), a string (PostgreSQL's
    infinity), or no array of numbers."""
    assert float_columns_of_json(floats) is None


# ----------------------------------------------------------------------------- PostgreSQL

@pytest.fixture(scope="module")
def postgres_database() -> Iterator[str]:
    with fresh_postgres_database("bw_test_chunks") as url:
        yield url.rsplit("/", 1)[1]


_schemas = itertools.count(1)


def _postgres(database: str) -> PostgresBackend:
    return PostgresBackend(database, f"chunks{next(_schemas)}")


@pytest.mark.postgres
@given(st.lists(st.tuples(arm_names, task_names, record_values), max_size=25),
       st.lists(st.integers(0, 25), max_size=2))
@settings(max_examples=25, deadline=None)
def test_postgres_aggregated_chunk_is_the_rows_decoded_bit_for_bit(postgres_database, drawn,
                                                                   cuts):
    records = [_record(arm, task, trial, values)
               for trial, (arm, task, values) in enumerate(drawn, start=1)]
    with _filled(records, sorted(cuts), _postgres(postgres_database).open()) as store:
        chunks = store.fold_group_chunks("arms", SCOPE, list)
        assert store._whole_scope_chunk("arms", SCOPE) is not None  # the aggregated way
        assert len(chunks) == 1
        assert _plain(chunks) == _plain(_by_rows(store))


@pytest.mark.postgres
def test_postgres_floats_are_read_exactly_whatever_the_url_s_setting(postgres_database):
    """A URL (or a role, or a database) setting `extra_float_digits` below 1 makes the
    server's text of a float drop digits; the store reads every float as stored, the
    aggregated way and the rows' way."""
    backend = _postgres(postgres_database)
    values = {**SOUND_VALUES, "turns": 1 / 3, "cost": 0.1, "duration": 11.0}
    _filled([_record("cli", "t", 1, values)], [], backend.open()).close()
    backend.location += quote(" -cextra_float_digits=-15")
    with backend.open(create=False) as store:
        assert store._connection.execute("SELECT 11.0::float8").fetchone()[0] == 11.0
        chunk = store._whole_scope_chunk("arms", SCOPE)
        assert chunk is not None
        rows = _plain(_by_rows(store))
        assert _plain([chunk]) == rows
    turns = GROUP_TOTALS_COLUMNS.index("turns")
    duration = GROUP_TOTALS_COLUMNS.index("duration_s")
    assert rows[0][turns] == [repr(1 / 3)] and rows[0][duration] == ["11.0"]


@pytest.mark.postgres
def test_postgres_empty_scope_is_an_empty_chunk(postgres_database):
    with _filled([], [], _postgres(postgres_database).open()) as store:
        assert store._whole_scope_chunk("arms", SCOPE) is not None
        chunks = store.fold_group_chunks("arms", SCOPE, list)
    assert _plain(chunks) == ([[] for _ in GROUP_TOTALS_COLUMNS[:-2]], [], [])


# what can be edited in PostgreSQL's typed columns
POSTGRES_EDITS = {
    **{name: edit for name, edit in EDITS.items()
       if name.startswith(("newest", "bench versions", "two groups")) and "blob" not in name},
    "a float column infinite":
        "UPDATE record_group_totals SET turns = 'Infinity' WHERE task = 't1'",
    "a float column not a number":
        "UPDATE record_group_totals SET duration_s = 'NaN' WHERE task = 't2'",
    "a float column a negative zero":
        "UPDATE record_group_totals SET turns_error = '-0' WHERE task = 't1'",
}


@pytest.mark.postgres
@pytest.mark.parametrize("edit", [*POSTGRES_EDITS])
def test_postgres_row_not_as_the_store_writes_it_is_read_the_rows_way(postgres_database,
                                                                       edit):
    backend = _postgres(postgres_database)
    _filled(_sound_records(), [3], backend.open()).close()
    backend.execute({**POSTGRES_EDITS, **EDITS_OF_THE_SAME_VALUES}[edit])
    with backend.open(create=False) as store:
        assert (store._whole_scope_chunk("arms", SCOPE) is None) == (edit in POSTGRES_EDITS)
        expected, found = _read_both_ways(store)
    assert found == expected


@pytest.mark.postgres
@pytest.mark.parametrize("code", ["program_limit_exceeded", "out_of_memory", "internal_error"])
def test_postgres_aggregate_the_server_cannot_build_is_read_the_rows_way(
        postgres_database, monkeypatch, code):
    """Fault injection: a scope whose JSON arrays would pass the server's 1 GB (not
    made here: the server's refusal is raised by a function in the statement instead)
    is read the rows' way, with the same values."""
    from benchwarden.core import store_postgres

    backend = _postgres(postgres_database)
    _filled(_sound_records(), [], backend.open()).close()
    backend.execute(f"""CREATE FUNCTION too_big() RETURNS text LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'too big' USING ERRCODE = '{code}'; END $$""")
    monkeypatch.setattr(store_postgres, "_AGGREGATED",
                        store_postgres._AGGREGATED + ", too_big()")
    with backend.open(create=False) as store:
        assert store._whole_scope_chunk("arms", SCOPE) is None
        assert _plain(store.fold_group_chunks("arms", SCOPE, list)) == _plain(_by_rows(store))


def _integers_by_json(text: str) -> list[int] | None:
    """What JSON's decoder makes of a text meant as an array of whole numbers, as int64."""
    try:
        values = msgspec.json.decode(text, type=list[int])
    except msgspec.DecodeError:
        return None
    return values if all(-(2**63) <= value < 2**63 for value in values) else None


json_integer_texts = st.one_of(
    st.lists(st.integers(-(2**64), 2**64)).map(
        lambda values: json.dumps(values, separators=(",", ":"))),
    st.lists(st.integers(-(2**63), 2**63 - 1)).map(json.dumps),  # `[1, 2]`, as PostgreSQL
    st.text(alphabet="0123456789-,[] .e+\u0663", max_size=24),
    st.lists(st.sampled_from(["0", "-0", "00", "01", "-", "7", "-12", "", " ", "1 2",
                              "9223372036854775807", "-9223372036854775808"]),
             max_size=5).map(lambda items: "[" + ",".join(items) + "]"),
)


@settings(max_examples=600, deadline=None)
@given(json_integer_texts)
def test_integer_columns_read_by_numpy_are_json_s_whole_numbers(text):
    """A JSON array of whole numbers read by numpy where it is in a database's plain form,
    else by JSON's decoder: the same numbers as JSON's decoder alone gives, or JSON's own
    refusal (a DecodeError), or None past int64."""
    expected = _integers_by_json(text)
    try:
        found = _integer_array(np, text, None)
    except msgspec.DecodeError:
        assert expected is None
        return
    assert (None if found is None else found.tolist()) == expected


_STORE_NEWEST = re.compile(r"\[\]|\[(0|[1-9][0-9]*)(,(0|[1-9][0-9]*))*\]")


def _newest_by_rows(texts: list[str], lengths: list[int]) -> tuple[list[int], list[int]] | None:
    """The rows' own reading of `newest` texts: each in the store's form (or None)."""
    if lengths != [len(text) for text in texts]:
        return None
    counts: list[int] = []
    numbers: list[int] = []
    for text in texts:
        if not _STORE_NEWEST.fullmatch(text):
            return None
        row = msgspec.json.decode(text, type=list[int])
        if any(value >= 2**63 - 1 for value in row):
            return None
        counts.append(len(row))
        numbers.extend(row)
    return counts, numbers


newest_texts = st.one_of(
    st.lists(st.integers(0, 2**64), max_size=4).map(
        lambda values: json.dumps(values, separators=(",", ":"))),
    st.text(alphabet="0123456789,[] -\u0663", max_size=10),
    st.lists(st.sampled_from(["0", "01", "12", "", " ", "-3", "1 2", "99999999999999999999",
                              "9223372036854775807", "[4]"]),
             max_size=3).map(lambda items: "[" + ",".join(items) + "]"),
)


@settings(max_examples=600, deadline=None)
@given(st.lists(newest_texts, max_size=6), st.data())
def test_newest_cut_from_the_joined_texts_is_each_row_s_own_reading(texts, data):
    """Each row's `newest` text, cut from all of them joined by their lengths: the same
    counts and numbers as reading each row's text alone, or None where any row is not
    in the store's form or a length is not its text's."""
    lengths = [len(text) for text in texts]
    if texts and data.draw(st.booleans()):  # a length not its text's
        lengths[data.draw(st.integers(0, len(texts) - 1))] += data.draw(
            st.sampled_from([-2, -1, 1, 3]))
    expected = _newest_by_rows(texts, lengths)
    found = _newest_of_joined_texts(np, np.array(lengths, dtype=np.int64), "".join(texts))
    assert (None if found is None else (found[0].tolist(), found[1].tolist())) == expected
