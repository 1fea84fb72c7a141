"""Schema 5's derived tables (`record_group_totals` and `record_runs`, kept by schema
6), and the stores of versions 1 to 4 before them: each append keeps the totals and run
counts in its own transaction and writes no per-record summary row; an older store is read as it is
read-only (a version 4 store's summary rows still checked by `verify`) and upgraded
when opened for writing (never writing summary rows); `verify` recomputes every derived
table from the chained bodies and names what differs. Both backends. The summed columns
of a summary row follow `summed_number`, checked here against an independent rule, and
an append's in-memory fold rows (`fold_row_of`) against the rows of the stored bytes."""

from __future__ import annotations

import json
import math
import sqlite3
import sys
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.core.group_totals import GROUP_TOTALS_COLUMNS, GroupTotals, fold_into, fold_row
from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import Record, TokenComponents, canonical_json
from benchwarden.core.store import (
    SUMMARY_COLUMNS,
    DuplicateRecord,
    Store,
    StoreError,
    fold_row_of,
    summary_row,
    summed_number,
)
from tests.core.test_store_backends import (  # noqa: F401 (fixtures)
    backend,
    postgres,
    postgres_database,
)


def record(task: str, trial: int = 1, **payload: Any) -> Record:
    return Record(suite="demo", scope="s", arm="a", task=task, trial=trial, run_id="run-1",
                  outcome="pass", started_at=10.0, ended_at=12.5,
                  tokens=TokenComponents(1, 2, 3, 4, None if trial % 2 else 5),
                  payload={"tier": "read", "turns": trial, "transcript": ["long"] * 3,
                           **payload})


def summaries(store: Store) -> list[tuple[Any, ...]]:
    """The summary rows a version 4 store holds."""
    return [tuple(row) for row in store._query(
        f"SELECT {', '.join(SUMMARY_COLUMNS)} FROM record_summaries ORDER BY seq")]


def expected_summaries(store: Store) -> list[tuple[Any, ...]]:
    return [summary_row(int(seq), bytes(body)) for seq, body in store._query(
        "SELECT seq, body FROM entries WHERE kind = 'record' ORDER BY seq")]


def run_counts(store: Store) -> list[tuple[Any, ...]]:
    """Every stored run count, in key order."""
    return sorted(tuple(row) for row in store._query(
        "SELECT run_id, suite, records FROM record_runs"))


def recounted_runs(store: Store) -> list[tuple[Any, ...]]:
    """The records of each run and suite counted from the chain's entries."""
    return sorted(tuple(row) for row in store._query(
        "SELECT run_id, suite, COUNT(*) FROM entries WHERE kind = 'record' "
        "GROUP BY run_id, suite"))


def raw(backend: Any, *statements: str) -> None:  # noqa: F811 (the fixture's name)
    """Statements as the database's owner, a version 4 summary table's guards dropped
    first."""
    if backend.name == "sqlite":
        connection = sqlite3.connect(backend.path)
        for trigger in ("record_summaries_refuse_update", "record_summaries_refuse_delete"):
            connection.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        for statement in statements:
            connection.execute(statement)
        connection.commit()
        connection.close()
        return
    with backend.psycopg.connect(backend.location, autocommit=True) as connection:
        if connection.execute("SELECT to_regclass('record_summaries') IS NOT NULL"
                              ).fetchone()[0]:
            connection.execute("DROP TRIGGER IF EXISTS record_summaries_refuse_change "
                               "ON record_summaries")
        for statement in statements:
            connection.execute(statement)


# what schema 6 added to a version 5 store: gone from a store of any older version
VERSION_6_TABLES_DROPPED = ("DROP TABLE run_headings", "DROP TABLE run_configs")


def mark_version(backend: Any, version: str) -> list[str]:  # noqa: F811
    statements = [f"UPDATE meta SET value = '{version}' WHERE name = 'schema_version'"]
    if backend.name == "sqlite":
        statements.append(f"PRAGMA user_version = {version}")
    return statements


# The summary table of versions 3 and 4 as they made it (SUMMARY_COLUMNS, in that order),
# its run index and its guards, per backend: how these tests make an older store out of
# a store of this version.
_SUMMARY_TABLE = """CREATE TABLE record_summaries (
    seq {bigint} PRIMARY KEY,
    suite TEXT NOT NULL, scope TEXT NOT NULL, arm TEXT NOT NULL, task TEXT NOT NULL,
    trial {bigint} NOT NULL, run_id TEXT NOT NULL, outcome TEXT NOT NULL,
    group_key TEXT NOT NULL, started_at {real} NOT NULL, ended_at {real} NOT NULL,
    duration_s {real} NOT NULL, fresh_input {bigint} NOT NULL, cache_creation {bigint} NOT NULL,
    cache_read {bigint} NOT NULL, output {bigint} NOT NULL, reasoning {bigint},
    priced {bigint} NOT NULL, turns_number {real}, denied_number {bigint}, cost_number {real},
    odd_values {bigint} NOT NULL,
    field_tier TEXT, field_failure TEXT, field_turns TEXT, field_tokens_reported TEXT,
    field_denied_calls TEXT, field_imputed_cost_usd TEXT, field_bench_version TEXT
)"""
_SUMMARY_GUARDS = {
    "sqlite": [
        "CREATE TRIGGER record_summaries_refuse_update BEFORE UPDATE ON record_summaries "
        "BEGIN SELECT RAISE(ABORT, 'benchwarden store is append-only: UPDATE refused'); END",
        "CREATE TRIGGER record_summaries_refuse_delete BEFORE DELETE ON record_summaries "
        "BEGIN SELECT RAISE(ABORT, 'benchwarden store is append-only: DELETE refused'); END"],
    "postgres": [
        "CREATE TRIGGER record_summaries_refuse_change BEFORE UPDATE OR DELETE OR TRUNCATE "
        "ON record_summaries FOR EACH STATEMENT EXECUTE FUNCTION benchwarden_refuse_change()"],
}


def make_version_4(backend: Any) -> None:  # noqa: F811
    """The store as the benchwarden of schema 4 left it: a summary row per record (made
    from the stored bodies, as version 4 wrote them), its run index and guards, the group
    totals kept, no run counts."""
    with backend.open(create=False) as store:
        rows = expected_summaries(store)
    types = ({"bigint": "INTEGER", "real": "REAL"} if backend.name == "sqlite"
             else {"bigint": "BIGINT", "real": "DOUBLE PRECISION"})
    mark = "?" if backend.name == "sqlite" else "%s"
    insert = (f"INSERT INTO record_summaries ({', '.join(SUMMARY_COLUMNS)}) VALUES "
              f"({', '.join([mark] * len(SUMMARY_COLUMNS))})")
    before = [_SUMMARY_TABLE.format(**types),
              "CREATE INDEX record_summaries_by_run ON record_summaries (run_id, suite)"]
    after = [*_SUMMARY_GUARDS[backend.name], "DROP TABLE record_runs",
             *VERSION_6_TABLES_DROPPED, *mark_version(backend, "4")]
    if backend.name == "sqlite":
        connection = sqlite3.connect(backend.path)
        for statement in before:
            connection.execute(statement)
        connection.executemany(insert, rows)
        for statement in after:
            connection.execute(statement)
        connection.commit()
        connection.close()
        return
    with backend.psycopg.connect(backend.location, autocommit=True) as connection:
        for statement in before:
            connection.execute(statement)
        with connection.cursor() as cursor:
            cursor.executemany(insert, rows)
        for statement in after:
            connection.execute(statement)


def make_version_1(backend: Any) -> None:  # noqa: F811
    """The store as a benchwarden from before the derived tables left it."""
    raw(backend, "DROP TABLE record_group_totals", "DROP TABLE record_runs",
        *VERSION_6_TABLES_DROPPED, *mark_version(backend, "1"))


# The version 2 layout: the summed fields as JSON text only, rows in sequence order.
_VERSION_2_COLUMNS = ("seq", "suite", "scope", "arm", "task", "trial", "run_id", "outcome",
                      "started_at", "ended_at", "fresh_input", "cache_creation", "cache_read",
                      "output", "reasoning", "field_tier", "field_failure", "field_turns",
                      "field_tokens_reported", "field_denied_calls", "field_imputed_cost_usd",
                      "field_bench_version")


def make_version_2(backend: Any) -> None:  # noqa: F811
    """The store as the benchwarden of schema 2 left it (its table's rows kept)."""
    make_version_4(backend)
    columns = ", ".join(_VERSION_2_COLUMNS)
    raw(backend, f"CREATE TABLE summaries_v2 AS SELECT {columns} FROM record_summaries",
        "DROP TABLE record_summaries", "ALTER TABLE summaries_v2 RENAME TO record_summaries",
        "DROP TABLE record_group_totals", *mark_version(backend, "2"))


def make_version_3(backend: Any) -> None:  # noqa: F811
    """The store as the benchwarden of schema 3 left it: no group totals, the wide group
    index (its columns as version 3 made it on SQLite)."""
    make_version_4(backend)
    summed = ("priced, fresh_input, cache_creation, cache_read, output, reasoning, "
              "duration_s, turns_number, denied_number, cost_number, odd_values, "
              "field_bench_version") if backend.name == "sqlite" else ""
    raw(backend, "DROP TABLE record_group_totals",
        "CREATE INDEX record_summaries_by_group ON record_summaries (suite, scope, "
        f"arm, task, outcome, group_key, seq{', ' + summed if summed else ''})",
        *mark_version(backend, "3"))


def make_version_5(backend: Any) -> None:  # noqa: F811
    """The store as the benchwarden of schema 5 left it: the group totals and run counts,
    no run headings or configurations."""
    raw(backend, *VERSION_6_TABLES_DROPPED, *mark_version(backend, "5"))


def make_version(backend: Any, version: str) -> None:  # noqa: F811
    {"1": make_version_1, "2": make_version_2, "3": make_version_3,
     "4": make_version_4, "5": make_version_5}[version](backend)


def group_totals(store: Store) -> list[tuple[Any, ...]]:
    """Every stored group totals row, in key order."""
    return sorted(tuple(GroupTotals.from_row(row).row()) for row in store._query(
        f"SELECT {', '.join(GROUP_TOTALS_COLUMNS)} FROM record_group_totals"))


def expected_group_totals(store: Store) -> list[tuple[Any, ...]]:
    """The group totals folded from the records' bodies, one record at a time."""
    totals: dict[tuple[Any, ...], GroupTotals] = {}
    for row in expected_summaries(store):
        fold_into(totals, [row])
    return sorted(group.row() for group in totals.values())


def assert_derived_tables_match_the_chain(store: Store) -> None:
    """This version's derived tables hold exactly what the records say, and no summary
    row is stored."""
    assert store.has_derived_tables
    assert not store._table_exists("record_summaries")
    assert group_totals(store) == expected_group_totals(store)
    assert run_counts(store) == recounted_runs(store)


def filled(backend: Any, count: int = 7) -> None:  # noqa: F811
    with backend.open() as store:
        store.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="run-1"))
        store.append([record(f"t{index}", index) for index in range(count - 1)])
        store.append([record("single", 1, imputed_cost_usd=0.25)])


def test_every_append_keeps_the_derived_tables_and_writes_no_summary_row(backend):  # noqa: F811
    filled(backend)
    with backend.open(create=False) as store:
        assert_derived_tables_match_the_chain(store)
        assert run_counts(store) == [("run-1", "demo", 7)]
        assert store.verify().ok
        rows = expected_summaries(store)
    assert rows[-1][3:8] == ("a", "single", 1, "run-1", "pass")
    fields = dict(zip(SUMMARY_COLUMNS, rows[-1], strict=True))
    assert fields["field_imputed_cost_usd"] == "0.25" and fields["field_tier"] == '"read"'
    assert fields["field_failure"] is None  # absent from the payload


def test_a_refused_batch_leaves_the_derived_tables_as_they_were(backend):  # noqa: F811
    filled(backend)
    with backend.open() as store:
        totals_before, runs_before = group_totals(store), run_counts(store)
        with pytest.raises(DuplicateRecord):
            store.append([record("new", 1), record("t1", 9), record("t1", 1)])
        assert group_totals(store) == totals_before and run_counts(store) == runs_before
        store.append([record("t1", 9)])
        assert_derived_tables_match_the_chain(store)


def test_runs_count_what_a_recount_of_the_entries_counts(backend):  # noqa: F811
    """Records of several runs and suites, in batches mixing them and one at a time:
    `runs` and `run_info` read `record_runs`, and it holds exactly the recount."""
    with backend.open() as store:
        for run_id, suite in (("run-1", "demo"), ("run-2", "demo"), ("run-3", "other")):
            store.begin_run(stamp_run(suite=suite, bench_version="1", config={},
                                      run_id=run_id))
        made = [Record(suite=suite, scope="s", arm="a", task=f"t{index}", trial=1,
                       run_id=run_id, outcome="pass", started_at=1.0, ended_at=2.0)
                for index, (run_id, suite) in enumerate(
                    [("run-1", "demo")] * 5 + [("run-2", "demo")] * 3 + [("run-3", "other")] * 2
                    + [("run-3", "demo")])]  # a record whose suite is not its run's
        store.append(made[:4])
        store.append(made[4:9])
        for one in made[9:]:
            store.append([one])
        assert run_counts(store) == recounted_runs(store)
        counted = {info.run.run_id: info.record_count for info in store.runs()}
        assert counted == {"run-1": 5, "run-2": 3, "run-3": 3}
        assert {info.run.run_id: info.record_count for info in store.runs("demo")} == \
            {"run-1": 5, "run-2": 3}
        assert {info.run.run_id: info.record_count for info in store.runs("other")} == \
            {"run-3": 2}
        assert store.run_info("run-3").record_count == 3
        assert store.run_info("run-2").record_count == 3
        assert store.verify().ok


@pytest.mark.parametrize("change, named", [
    ("UPDATE record_runs SET records = records + 1 WHERE run_id = 'run-1'",
     "run run-1 (suite demo) counts 8 records, the store holds 7"),
    ("DELETE FROM record_runs WHERE run_id = 'run-1'", "run run-1 (suite demo) is missing"),
    ("INSERT INTO record_runs VALUES ('ghost', 'demo', 2)",
     "run ghost (suite demo) counts records the store does not hold"),
    ("UPDATE record_runs SET suite = 'other' WHERE run_id = 'run-1'",
     "run run-1 (suite demo) is missing"),
])
def test_verify_names_a_damaged_run_count(backend, change, named):  # noqa: F811
    filled(backend)
    raw(backend, change)
    with backend.open(create=False) as store:
        report = store.verify(batch=3)
    assert not report.ok and report.first_broken is None
    line = report.line()
    assert "\n" not in line and "its per-run counts (record_runs) disagree" in line, line
    assert named in line and "(derived data edited)" in line, line
    with backend.open() as writer:  # `store repair` counts them again
        writer.rebuild_derived()
        assert run_counts(writer) == recounted_runs(writer) and writer.verify().ok


@pytest.mark.parametrize("version", ["1", "2"])
def test_a_version_1_or_2_store_is_read_as_it_is_and_upgraded_by_a_writer(  # noqa: F811
        backend, capfd, version):  # noqa: F811
    filled(backend)
    make_version(backend, version)
    with backend.open(create=False) as reader:
        assert not reader.has_derived_tables and not reader.has_group_totals
        assert len(reader.records()) == 7 and reader.verify().ok
        assert [info.record_count for info in reader.runs()] == [7]
    with backend.open(create=False) as reader:  # read-only: nothing made or written
        assert not reader._table_exists("record_runs")
        assert reader._stored_schema_version() == version
    capfd.readouterr()
    with backend.open() as writer:  # opened for writing: totalled from the bodies, once
        assert_derived_tables_match_the_chain(writer)
        writer.append([record("after", 1, turns="three")])
        assert_derived_tables_match_the_chain(writer)
        assert writer.verify().ok and writer._stored_schema_version() == "6"
    progress = capfd.readouterr().err
    assert "totalling every group of records: 7 of 7" in progress
    assert "totalling every group of records: 7 groups, done in" in progress
    assert "summarising" not in progress  # no summary row is written any more
    # (version 2: its table dropped), the totals before, the one page, after, the run
    # starts listed, done
    assert progress.count("\n") == (6 if version == "2" else 5), progress
    with backend.open(create=False) as reader:
        assert reader.has_derived_tables and [info.record_count for info in reader.runs()] == [8]


def test_an_upgrade_totals_large_bodies_a_bounded_page_at_a_time(backend, capfd,  # noqa: F811
                                                                   monkeypatch):
    """The totals an upgrade computes from the bodies are read in pages of at most
    `BACKFILL_BATCH` rows and `PAGE_BYTES` of bodies (here one body a page): the same
    totals, every record read once."""
    import benchwarden.core.store as store_module

    filled(backend)
    make_version(backend, "2")
    monkeypatch.setattr(store_module, "PAGE_BYTES", 1)
    capfd.readouterr()
    with backend.open() as writer:
        assert_derived_tables_match_the_chain(writer)
        assert writer.verify().ok
    progress = capfd.readouterr().err
    assert [f"{done} of 7" in progress for done in range(1, 8)] == [True] * 7, progress


@pytest.mark.parametrize("change, named", [
    ("UPDATE record_summaries SET output = output + 1 WHERE seq = 4",
     "entry 4, record demo/s/a/t2/trial 2 (run run-1): its row in the summary table disagrees"),
    ("UPDATE record_summaries SET field_tier = NULL WHERE seq = 3", "entry 3, record"),
    ("DELETE FROM record_summaries WHERE seq = 5", "entry 5, record demo/s/a/t3/trial 3 "
     "(run run-1): its row in the summary table is missing"),
    (f"INSERT INTO record_summaries SELECT 1, {', '.join(SUMMARY_COLUMNS[1:])} "
     "FROM record_summaries WHERE seq = 2",
     "entry 1, run of run run-1: the summary table holds a record row for it"),
])
def test_verify_names_a_version_4_summary_row_that_disagrees_with_the_chain(  # noqa: F811
        backend, change, named):  # noqa: F811
    """A version 4 store read as it is: `runs` counts its summary rows, so `verify` still
    checks every one against the body."""
    filled(backend)
    make_version_4(backend)
    with backend.open(create=False) as store:
        assert store.verify(batch=3).ok
    raw(backend, change)
    with backend.open(create=False) as store:
        report = store.verify(batch=3)  # pages: the check is bounded by one page
    assert not report.ok and report.first_broken is not None
    assert named in report.first_broken, report.line()


def test_verify_finds_derived_rows_past_the_end_of_the_chain(backend):  # noqa: F811
    """Totals naming a record past the chain's last entry (its tail cut, the witness
    aside), and so do a version 4 store's summary rows."""
    filled(backend)
    raw(backend, "UPDATE record_group_totals SET newest = '[2,102]' WHERE task = 't0'")
    with backend.open(create=False) as store:
        report = store.verify(own_witness=False)
    assert not report.ok
    assert "the store ends at entry 8 but its group totals count records up to entry 102" \
        in report.line()
    raw(backend, "UPDATE record_group_totals SET newest = '[2]' WHERE task = 't0'")
    make_version_4(backend)
    raw(backend, f"INSERT INTO record_summaries SELECT seq + 100, "
        f"{', '.join(SUMMARY_COLUMNS[1:])} FROM record_summaries WHERE seq = 2")
    with backend.open(create=False) as store:
        report = store.verify(own_witness=False)
    assert not report.ok
    assert "summary table holds records up to entry 102" in report.line()


def test_group_keys_keep_their_json_text_the_same_on_both_backends(backend):  # noqa: F811
    """A group's key is the JSON text of [tier, failure], whatever JSON the failure is."""
    values: list[Any] = [None, True, False, 3, 2.5, "x", [1, "a"], {"k": 1}]
    with backend.open() as store:
        store.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="run-1"))
        store.append([record(f"t{index}", 1, failure=value)
                      for index, value in enumerate(values)])
        store.append([record("absent", 1)])
        keys = dict(store._query("SELECT task, group_key FROM record_group_totals"))
        assert group_totals(store) == expected_group_totals(store)
    assert [json.loads(keys[f"t{index}"]) for index in range(len(values))] == \
        [["read", value] for value in values]
    assert json.loads(keys["absent"]) == ["read", None]


def test_the_summed_columns_of_a_row(backend):  # noqa: F811
    with backend.open() as store:
        store.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="run-1"))
        store.append([record("plain", 1, denied_calls=2, imputed_cost_usd=0.5, failure="hung"),
                      record("odd", 1, turns="4", denied_calls=1.5, imputed_cost_usd=[1],
                             tokens_reported=None),
                      record("bare", 2, turns=None, tokens_reported="yes", tier=None)])
        rows = [dict(zip(SUMMARY_COLUMNS, row, strict=True))
                for row in expected_summaries(store)]
        totals = {group.task: group for group in store.group_totals("demo", "s")}
        assert store.verify().ok
    plain, odd, bare = rows
    assert (plain["group_key"], plain["priced"], plain["turns_number"], plain["denied_number"],
            plain["cost_number"], plain["odd_values"]) == ('["read","hung"]', 1, 1.0, 2, 0.5, 0)
    assert plain["duration_s"] == 2.5
    assert (odd["priced"], odd["turns_number"], odd["denied_number"], odd["cost_number"],
            odd["odd_values"]) == (0, None, None, None, 3)
    assert (bare["group_key"], bare["priced"], bare["turns_number"], bare["odd_values"]) == \
        ("[null,null]", 1, None, 0)
    assert (totals["plain"].denied_calls, totals["plain"].imputed_samples,
            totals["odd"].odd_values, totals["odd"].priced, totals["bare"].turns) == \
        (2, 1, 3, 0, 0.0)


def _containers_of(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner,
                                                         max_size=2)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=3), _containers_of, max_leaves=4)


@given(json_values, st.booleans())
@settings(max_examples=300, deadline=None)
def test_summed_number_takes_numbers_and_counts_everything_else(value, count):
    """An independent statement of the rule: a JSON number that is not a boolean and is a
    finite float, or where a count is wanted a whole number up to 2**53, is its value;
    null is nothing; anything else is odd. The row written holds exactly that."""
    number, odd = summed_number(value, count=count)
    if type(value) is int:
        is_number = abs(value) <= (2**53 if count else sys.float_info.max)
    elif type(value) is float:
        is_number = math.isfinite(value) and (
            not count or (value.is_integer() and abs(value) <= 2**53))
    else:
        is_number = False
    if value is None:
        assert (number, odd) == (None, False)
    elif is_number:
        assert not odd and number == value and type(number) is (int if count else type(value))
    else:
        assert (number, odd) == (None, True)
    body = msgspec.json.encode(record("t", 1, turns=value, denied_calls=value,
                                      imputed_cost_usd=value))
    row = dict(zip(SUMMARY_COLUMNS, summary_row(1, body), strict=True))
    # JSON has no infinity or NaN: the body carries null there, so the row reads what
    # the stored bytes say, as every later reader of the record will
    stored = msgspec.json.decode(body)["payload"]["turns"]
    turns, odd_turns = summed_number(stored)
    denied, odd_denied = summed_number(stored, count=True)
    assert row["turns_number"] == (None if turns is None else float(turns))
    assert row["denied_number"] == denied and row["cost_number"] == row["turns_number"]
    assert row["odd_values"] == 2 * odd_turns + odd_denied


# every kind of JSON value and a few values JSON reads back as another: subclasses of
# its types, tuples, huge and negative integers, floats equal to integers, unicode
class _Text(str):
    pass


class _Number(int):
    pass


wide_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(-2**70, 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([1.0, -0.0, 0.0, 1e16])
    | st.text(max_size=4) | st.text(max_size=4).map(_Text) | st.integers(-3, 3).map(_Number),
    lambda inner: st.lists(inner, max_size=2) | st.lists(inner, max_size=2).map(tuple)
    | st.dictionaries(st.text(max_size=2), inner, max_size=2), max_leaves=4)
summary_field_names = st.sampled_from(["tier", "failure", "turns", "tokens_reported",
                                       "denied_calls", "imputed_cost_usd", "bench_version",
                                       "transcript", "other"])
moments = st.floats(-1e12, 1e12, allow_nan=False) | st.integers(-2**60, 2**60)
texts = st.text(max_size=3) | st.text(max_size=3).map(_Text)


@given(st.dictionaries(summary_field_names, wide_values, max_size=6), texts, texts,
       st.integers(0, 2**40) | st.booleans(), moments, moments,
       st.tuples(*[st.integers(0, 2**62)] * 4, st.none() | st.integers(0, 2**62)),
       st.integers(1, 2**62))
@settings(max_examples=600, deadline=None)
def test_an_appends_in_memory_row_is_the_row_of_its_stored_bytes(
        payload, arm, outcome, trial, started, ended, tokens, seq):
    """Wherever `fold_row_of` answers, its row is the fold row of `summary_row` of the
    record's canonical JSON (what the append stores and `verify` reads), value and
    type for value and type; it declines only records whose values may not read back as
    themselves, and answers for every record of plain scalar values."""
    made = Record(suite="demo", scope="s", arm=arm, task="t", trial=trial, run_id="r",
                  outcome=outcome, started_at=started, ended_at=ended,
                  tokens=TokenComponents(*tokens), payload=payload)
    try:
        body = canonical_json(made)
    except (TypeError, ValueError, OverflowError):
        return  # refused by the append before any row is made
    if made.storage_problem() is not None:
        return
    in_memory = fold_row_of(seq, made)
    try:
        stored = fold_row(summary_row(seq, body))
    except msgspec.DecodeError:  # an address that is not text: the append fails anyway
        assert in_memory is None
        return
    plain = all(type(value) in (str, bool, int, float, type(None))
                for name, value in payload.items() if name not in ("transcript", "other")) \
        and type(arm) is str and type(outcome) is str and type(trial) is int
    if plain:
        assert in_memory is not None
    if in_memory is not None:
        assert [(type(value), value) for value in in_memory] == \
            [(type(value), value) for value in stored]
        assert repr(in_memory) == repr(stored)  # -0.0 and 0.0 told apart


def test_a_record_scrubbed_of_a_secret_is_totalled_from_its_stored_bytes(backend):  # noqa: F811
    """A record the scrubber re-encodes is stored without the secret: its group key and
    totals are those of the stored bytes, not of the record the append was given."""
    from benchwarden.core import secrets

    secret = "sk-test-0123456789abcdef0123"
    secrets.remember(secret)
    try:
        with backend.open() as store:
            store.begin_run(stamp_run(suite="demo", bench_version="1", config={},
                                      run_id="run-1"))
            store.append([record("t1", 1, failure=f"auth {secret}"), record("t2", 1)])
            keys = [key for key, in store._query("SELECT group_key FROM record_group_totals")]
            assert group_totals(store) == expected_group_totals(store)
            assert store.verify().ok
    finally:
        secrets.forget_all()
    assert not any(secret in key for key in keys)
    assert any("auth" in key for key in keys)


@pytest.mark.postgres
@pytest.mark.parametrize("version", ["2", "3", "4"])
def test_an_append_only_role_is_refused_an_older_store_it_cannot_upgrade(postgres, version):  # noqa: F811
    """Appending without rows to a version 2, 3 or 4 store would leave its tables
    incomplete for the benchwardens that read them, and the role may not make this
    version's: the role is refused in one line, a reader still reads."""
    import secrets

    from benchwarden.core.store import StoreError, open_store

    filled(postgres)
    make_version(postgres, version)
    role = f"bw_writer_{secrets.token_hex(3)}"
    schema = postgres.location.rsplit("%3D", 1)[1]
    with postgres.psycopg.connect(postgres.location, autocommit=True) as connection:
        connection.execute(f"CREATE ROLE {role} LOGIN")
        connection.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}; "
                           f"GRANT SELECT, INSERT ON entries, meta, record_summaries TO {role}; "
                           f"GRANT USAGE ON SEQUENCE entries_seq_seq TO {role}")
    try:
        url = postgres.location.replace("://postgres@", f"://{role}@")
        with pytest.raises(StoreError,
                           match=f"schema version {version}; .* may not upgrade it") as raised:
            open_store(url)
        assert "\n" not in str(raised.value)
        with open_store(url, create=False) as reader:
            assert not reader.has_derived_tables and len(reader.records()) == 7
            assert [info.record_count for info in reader.runs()] == [7]
    finally:
        with postgres.psycopg.connect(postgres.location, autocommit=True) as connection:
            connection.execute(f"DROP OWNED BY {role}; DROP ROLE {role}")
    with postgres.open(create=False) as reader:
        assert reader._stored_schema_version() == version


@pytest.mark.postgres
def test_an_append_only_role_is_refused_a_store_missing_a_derived_table(postgres):  # noqa: F811
    """A role that may not create tables cannot make a removed derived table again: one
    line saying who can; a reader still reads (the records, not the table)."""
    import secrets

    from benchwarden.core.store import open_store

    filled(postgres)
    raw(postgres, "DROP TABLE record_runs")
    role = f"bw_writer_{secrets.token_hex(3)}"
    schema = postgres.location.rsplit("%3D", 1)[1]
    with postgres.psycopg.connect(postgres.location, autocommit=True) as connection:
        connection.execute(f"CREATE ROLE {role} LOGIN")
        connection.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}; "
                           f"GRANT SELECT, INSERT ON entries, meta TO {role}; "
                           f"GRANT SELECT, INSERT, UPDATE ON record_group_totals TO {role}; "
                           f"GRANT USAGE ON SEQUENCE entries_seq_seq TO {role}")
    try:
        url = postgres.location.replace("://postgres@", f"://{role}@")
        with pytest.raises(StoreError, match="record_runs is missing and this role may not "
                           "make them again") as raised:
            open_store(url)
        assert "\n" not in str(raised.value)
        with open_store(url, create=False) as reader:
            assert not reader.has_derived_tables
            assert [info.record_count for info in reader.runs()] == [7]
    finally:
        with postgres.psycopg.connect(postgres.location, autocommit=True) as connection:
            connection.execute(f"DROP OWNED BY {role}; DROP ROLE {role}")


# ---------------------------------------------------------------------------- group totals

def test_every_append_keeps_the_group_totals_of_its_records(backend):  # noqa: F811
    filled(backend)
    with backend.open() as store:
        store.append([record("t1", 7, turns=2.5, bench_version="2"),
                      record("single", 2, failure="hung")])
        assert group_totals(store) == expected_group_totals(store)
        assert store.verify().ok
        groups = {(group.task, group.group_key): group
                  for group in store.group_totals("demo", "s")}
    assert groups[("t1", '["read",null]')].records == 2
    assert groups[("t1", '["read",null]')].newest == (3, 9)
    assert groups[("t1", '["read",null]')].bench_versions == ['"2"']
    assert groups[("single", '["read","hung"]')].records == 1


@given(st.lists(st.integers(1, 4), min_size=1, max_size=6))
@settings(max_examples=15, deadline=None)
def test_group_totals_do_not_depend_on_how_appends_were_batched(cuts):
    """The same records appended in different batches: the same rows, floats bit for bit
    (durations and costs that plain addition would round differently)."""
    from benchwarden.core.store import SQLiteStore

    made = [record(f"t{index % 3}", index, imputed_cost_usd=[0.1, 1e16, 0.3, -1e16][index % 4],
                   turns=0.1 * index) for index in range(1, 13)]
    stored = []
    for batches in ([made], [[one] for one in made], _cut(made, cuts)):
        with SQLiteStore(":memory:") as store:
            store.begin_run(stamp_run(suite="demo", bench_version="1", config={},
                                      run_id="run-1"))
            for batch in batches:
                store.append(batch)
            stored.append(group_totals(store))
            assert stored[-1] == expected_group_totals(store)
    assert stored[0] == stored[1] == stored[2]


def _cut(items: list[Any], cuts: list[int]) -> list[list[Any]]:
    batches, start, index = [], 0, 0
    while start < len(items):
        batches.append(items[start:start + cuts[index % len(cuts)]])
        start, index = start + cuts[index % len(cuts)], index + 1
    return batches


@pytest.mark.parametrize("change, named", [
    ("UPDATE record_group_totals SET output = output + 1 WHERE task = 't2'",
     "group demo/s/a/t2 (pass, [\"read\",null]) has a wrong output"),
    ("UPDATE record_group_totals SET duration_s = duration_s + 1e-9 WHERE task = 't3'",
     "group demo/s/a/t3 (pass, [\"read\",null]) has a wrong duration_s"),
    ("UPDATE record_group_totals SET newest = '[1]' WHERE task = 'single'",
     "group demo/s/a/single (pass, [\"read\",null]) has a wrong newest"),
    ("DELETE FROM record_group_totals WHERE task = 't0'",
     "group demo/s/a/t0 (pass, [\"read\",null]) is missing"),
    ("INSERT INTO record_group_totals SELECT suite, scope, arm, 'ghost', "
     f"{', '.join(GROUP_TOTALS_COLUMNS[4:])} FROM record_group_totals WHERE task = 't1'",
     "group demo/s/a/ghost (pass, [\"read\",null]) totals records the store does not hold"),
])
@pytest.mark.parametrize("spilled", [False, True], ids=["in memory", "in a temporary table"])
def test_verify_names_the_first_group_whose_totals_were_edited(backend, change, named,  # noqa: F811
                                                               spilled, monkeypatch):
    """Whether `verify` holds the recomputed totals in memory or, past its limit of
    groups, folds them in a temporary table: the same group is named."""
    import benchwarden.core.store as store_module

    if spilled:
        monkeypatch.setattr(store_module, "_GROUPS_VERIFIED_IN_MEMORY", 2)
    filled(backend)
    raw(backend, change)
    with backend.open(create=False) as store:
        report = store.verify(batch=3)
        assert not store._table_exists("verify_group_totals")  # dropped after
    assert not report.ok and report.first_broken is None
    line = report.line()
    assert "\n" not in line and "record_group_totals" in line and named in line, line
    assert "(derived data edited)" in line


@pytest.mark.parametrize("version", ["3", "4"])
def test_a_version_3_or_4_store_is_reported_as_it_is_and_upgraded_by_a_writer(
        backend, capfd, version):  # noqa: F811
    """Read-only: a version 3 store sums its summary rows, a version 4 store reads its
    totals; both count `runs` over their summary rows. Opened for writing: the summary
    table dropped (with version 3's wide group index), a version 4 store's totals kept,
    a version 3 store's totalled from the bodies, the runs counted."""
    filled(backend)
    with backend.open(create=False) as current:
        wanted_totals = group_totals(current)
    make_version(backend, version)
    with backend.open(create=False) as reader:  # read-only: nothing made or written
        assert not reader.has_derived_tables and reader.has_group_totals
        assert reader._table_exists("record_group_totals") == (version == "4")
        assert len(reader.records()) == 7 and reader.verify().ok
        assert [info.record_count for info in reader.runs()] == [7]
        assert reader.run_info("run-1").record_count == 7
        assert sorted(group.row() for group in reader.group_totals("demo", "s")) == \
            wanted_totals or version == "3"  # version 3: the database's float sums
    capfd.readouterr()
    with backend.open() as writer:
        assert_derived_tables_match_the_chain(writer)
        assert group_totals(writer) == wanted_totals
        writer.append([record("after", 1)])
        assert_derived_tables_match_the_chain(writer)
        assert writer.verify().ok
        assert writer._stored_schema_version() == "6"
        index = ("SELECT 1 FROM sqlite_master WHERE name LIKE 'record_summaries%'"
                 if backend.name == "sqlite" else
                 "SELECT 1 WHERE to_regclass('record_summaries_by_group') IS NOT NULL "
                 "OR to_regclass('record_summaries_by_run') IS NOT NULL")
        assert writer._query(index) == []  # the summary table's indexes are gone with it
    progress = capfd.readouterr().err
    assert "summarising existing records" not in progress
    if version == "3":
        assert "totalling every group of records: 7 groups, done in" in progress
    else:  # its totals are this version's: kept as they are
        assert "totalling" not in progress
    assert "upgrading to schema 6: dropping the per-record summary table" in progress
    assert "upgrading to schema 6: done in" in progress


def test_a_newer_store_is_refused_in_one_line(backend):  # noqa: F811
    from benchwarden.core.store import CorruptStore

    filled(backend)
    raw(backend, "UPDATE meta SET value = '7' WHERE name = 'schema_version'")
    with pytest.raises(CorruptStore, match="schema version 7, this benchwarden reads "
                       "1 and 2 and 3 and 4 and 5 and 6") as raised:
        backend.open(create=False)
    assert "\n" not in str(raised.value)
    with pytest.raises(CorruptStore, match="schema version 7"):
        backend.open()


def test_a_writer_keeps_its_groups_in_memory_only_while_nobody_else_appends(backend):  # noqa: F811
    """Two writers take turns on one store, and one append fails after its totals were
    folded (rolled back): each writer's kept groups are used only when the chain's head
    is the one its own last append left, so the table stays exact."""
    filled(backend)
    with backend.open() as first, backend.open() as second:
        first.append([record("t1", 10)])
        second.append([record("t1", 11), record("t2", 11)])  # first's memory now stale
        first.append([record("t1", 12)])
        assert group_totals(first) == expected_group_totals(first)

        original = first._write_group_totals

        def fail_after_the_fold(cursor: Any, groups: Any) -> None:
            original(cursor, groups)  # the totals are written, then the append fails
            raise RuntimeError("the disk went away")

        first._write_group_totals = fail_after_the_fold  # type: ignore[method-assign]
        with pytest.raises(RuntimeError):
            first.append([record("t1", 13)])
        first._write_group_totals = original  # type: ignore[method-assign]
        first.append([record("t1", 14)])  # after a rollback: read again, not remembered
        second.append([record("t1", 15)])
        first.append([record("t1", 16)])
        assert group_totals(first) == expected_group_totals(first)
        assert first.verify().ok


def test_unreadable_group_totals_are_one_line_for_verify_and_appends(backend):  # noqa: F811
    from benchwarden.core.store import CorruptStore

    filled(backend)
    raw(backend, "UPDATE record_group_totals SET newest = 'not json' WHERE task = 't1'")
    with backend.open(create=False) as store:
        report = store.verify()
    assert not report.ok and "unreadable bench_versions or newest" in report.line()
    with backend.open() as writer, pytest.raises(CorruptStore, match="derived data edited") \
            as raised:
        writer.append([record("t1", 9)])
    assert "\n" not in str(raised.value)


@given(st.lists(st.integers(1, 5), min_size=1, max_size=5), st.integers(0, 4))
@settings(max_examples=10, deadline=None)
def test_verify_past_its_memory_limit_agrees_with_verify_in_memory(cuts, limit):
    """Records in any batches, a limit of groups anywhere from none to more than the
    store holds: `verify` passes a sound store and fails the same edited one either way,
    naming the same group."""
    import benchwarden.core.store as store_module
    from benchwarden.core.store import SQLiteStore

    made = [record(f"t{index % 4}", index, imputed_cost_usd=[0.1, 1e16, 0.3, -1e16][index % 4],
                   turns=0.1 * index, failure=["x", None][index % 2]) for index in range(1, 13)]
    kept = store_module._GROUPS_VERIFIED_IN_MEMORY
    try:
        with SQLiteStore(":memory:") as store:
            store.begin_run(stamp_run(suite="demo", bench_version="1", config={},
                                      run_id="run-1"))
            for batch in _cut(made, cuts):
                store.append(batch)
            lines = []
            for edited in (False, True):
                if edited:
                    store._connection.execute(
                        "UPDATE record_group_totals SET turns = turns + 1e-9 WHERE task = 't2'")
                for bound in (kept, limit):
                    store_module._GROUPS_VERIFIED_IN_MEMORY = bound
                    report = store.verify(batch=5)
                    assert report.ok is not edited, report.line()
                    lines.append(report.line())
    finally:
        store_module._GROUPS_VERIFIED_IN_MEMORY = kept
    assert lines[0] == lines[1] and lines[2] == lines[3]
    assert "group demo/s/a/t2" in lines[2] and "has a wrong turns" in lines[2]


def test_a_writer_past_its_memory_limit_keeps_no_groups_and_stays_exact(backend, monkeypatch):  # noqa: F811
    """A writer keeps the groups it wrote only while they are few (`_GROUPS_KEPT_IN_MEMORY`):
    past that it keeps none, reads what it touches again, and the totals stay exact."""
    import benchwarden.core.store as store_module

    monkeypatch.setattr(store_module, "_GROUPS_KEPT_IN_MEMORY", 2)
    filled(backend, count=0)
    with backend.open() as writer:
        writer.append([record("t1", 1), record("t2", 1)])
        assert writer._groups_written is not None  # two groups: kept
        writer.append([record("t1", 2), record("t3", 1)])  # a third group: past the limit
        assert writer._groups_written is None
        writer.append([record("t2", 2), record("t3", 2), record("t4", 1)])
        assert writer._groups_written is None
        assert group_totals(writer) == expected_group_totals(writer)
        assert writer.verify().ok


@pytest.mark.parametrize("dropped", [("record_group_totals",), ("record_runs",),
                                     ("record_group_totals", "record_runs")])
def test_removed_derived_tables_fail_verify_and_a_writer_rebuilds_them(
        backend, capfd, dropped):  # noqa: F811
    """The derived tables are outside the chain, so anyone can drop them. Readers then
    read the records (the report and the run counts are still right), `verify` fails
    naming what is gone, and the next writer (or `store repair`) rebuilds them from the
    records."""
    filled(backend)
    with backend.open(create=False) as before:
        wanted_totals, wanted_runs = group_totals(before), run_counts(before)
    raw(backend, *(f"DROP TABLE {table}" for table in dropped))
    with backend.open(create=False) as reader:
        assert not reader.has_derived_tables and not reader.has_group_totals
        assert len(reader.records()) == 7
        assert [info.record_count for info in reader.runs()] == [7]
        assert reader.run_info("run-1").record_count == 7
        report = reader.verify()
        assert not report.ok and " and ".join(dropped) in report.line()
        assert "removed outside benchwarden" in report.line() and "\n" not in report.line()
    capfd.readouterr()
    with backend.open() as writer:
        assert_derived_tables_match_the_chain(writer)
        assert group_totals(writer) == wanted_totals and run_counts(writer) == wanted_runs
        writer.append([record("after", 1)])
        assert_derived_tables_match_the_chain(writer)
        assert writer.verify().ok
    said = capfd.readouterr().err
    for table in dropped:
        assert f"its table {table} is missing (removed outside benchwarden): rebuilding" in said
    assert ("totalling every group" in said) == ("record_group_totals" in dropped)


def test_rebuilding_derived_tables_undoes_edited_rows(backend):  # noqa: F811
    """`rebuild_derived` (what `store repair` runs) makes every derived table again from
    the chain: edited totals and run counts are gone, appends go on exactly."""
    filled(backend)
    with backend.open(create=False) as before:
        wanted_totals, wanted_runs = group_totals(before), run_counts(before)
    raw(backend, "UPDATE record_group_totals SET records = 42",
        "UPDATE record_runs SET records = 42")
    with backend.open() as writer:
        assert not writer.verify().ok
        writer.rebuild_derived()
        assert group_totals(writer) == wanted_totals and run_counts(writer) == wanted_runs
        writer.append([record("after", 1)])
        assert_derived_tables_match_the_chain(writer)
        assert writer.verify().ok
    with backend.open(create=False) as reader, pytest.raises(StoreError, match="read-only"):
        reader.rebuild_derived()


def test_derived_values_of_the_wrong_kind_are_one_line_with_the_way_out(tmp_path):
    """SQLite keeps text written into a number column; a reader meeting it says the
    derived data was edited and how to mend it (exit 4), and `rebuild_derived` does."""
    from benchwarden.core.store import CorruptStore, open_store

    path = tmp_path / "store.sqlite"
    with open_store(path) as store:
        store.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="run-1"))
        store.append([record("t1", 1), record("t2", 1)])
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE record_group_totals SET records = 'many' WHERE task = 't1'")
        connection.execute("UPDATE record_cells SET highest_trial = 'x' WHERE task = 't2'")
        connection.execute("UPDATE record_runs SET records = 'two'")
    with open_store(path, create=False) as reader:
        with pytest.raises(CorruptStore, match="demo/s/a/t1: column records is not a whole "
                           "number .derived data edited.; `benchwarden store repair`") as raised:
            reader.group_totals("demo", "s")
        assert "\n" not in str(raised.value) and raised.value.exit_code == 4
        with pytest.raises(CorruptStore, match="cell counts of demo/s/a/t2 are not whole"):
            reader.cell_depth("demo", "s", "a", "t2")
        with pytest.raises(CorruptStore, match="record count of run run-1 is not a whole"):
            reader.run_info("run-1")
        report = reader.verify()
        assert not report.ok and "(derived data edited)" in report.line()
    with open_store(path, create=False, read_only=False) as writer:
        writer.rebuild_derived()
        assert writer.cell_depth("demo", "s", "a", "t2") == (1, 1)
        assert writer.run_info("run-1").record_count == 2
        assert [group.records for group in writer.group_totals("demo", "s")] == [1, 1]
        assert writer.verify().ok


def _interleaved_writers(first: Store, second: Store, batches: list[list[Record]]) -> None:
    """Batches appended by two writers of one store in turn: each finds groups the other
    wrote that it does not hold in memory (its cache's head no longer matches)."""
    for index, batch in enumerate(batches):
        (first if index % 2 == 0 else second).append(batch)


@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["x", None]),
                          st.floats(-1e16, 1e16, allow_nan=False)), min_size=1, max_size=24),
       st.lists(st.integers(1, 6), min_size=1, max_size=4), st.integers(1, 3))
@settings(max_examples=40, deadline=None)
def test_groups_inserted_without_reading_are_exact_whoever_wrote_them_first(
        picks, cuts, per_statement):
    """An append inserts the groups it does not hold in memory as new without reading
    them first; a group another writer (or an earlier session) made is found by its
    insert being left out, then read and folded again. With two writers interleaving
    batches of new and existing groups (one batch's inserts mixing keys that are there
    and keys that are not), and UPSERTs of 1 to 3 groups a statement, the stored totals
    are those folded from the bodies one by one, and `verify` passes."""
    import benchwarden.core.store as store_module
    from benchwarden.core.store import SQLiteStore

    made = [record(f"t{task}", trial, failure=failure, imputed_cost_usd=cost)
            for trial, (task, failure, cost) in enumerate(picks, start=1)]
    kept = store_module._GROUPS_PER_UPSERT
    store_module._GROUPS_PER_UPSERT = per_statement
    try:
        import tempfile
        from pathlib import Path

        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "s.sqlite"
            with SQLiteStore(path) as first, SQLiteStore(path) as second:
                first.begin_run(stamp_run(suite="demo", bench_version="1", config={},
                                          run_id="run-1"))
                _interleaved_writers(first, second, _cut(made, cuts))
                assert group_totals(first) == expected_group_totals(first)
                assert first.verify().ok
    finally:
        store_module._GROUPS_PER_UPSERT = kept


def test_groups_inserted_without_reading_are_exact_on_both_backends(backend):  # noqa: F811
    """As above on both backends: a second writer's batch mixes groups the first made,
    groups it made itself and new ones, UPSERTs of two groups a statement."""
    import benchwarden.core.store as store_module

    kept = store_module._GROUPS_PER_UPSERT
    store_module._GROUPS_PER_UPSERT = 2
    try:
        filled(backend, count=0)
        with backend.open() as first, backend.open() as second:
            _interleaved_writers(first, second, [
                [record("t1", 1), record("t2", 1, failure="x")],
                [record("t3", 1), record("t1", 2), record("t4", 1), record("t2", 2)],
                [record("t4", 2), record("t5", 1), record("t3", 2, failure="x")],
                [record("t2", 3, failure="x"), record("t6", 1), record("t1", 3)]])
            assert group_totals(first) == expected_group_totals(first)
            assert run_counts(first) == recounted_runs(first)
            assert first.verify().ok
    finally:
        store_module._GROUPS_PER_UPSERT = kept
