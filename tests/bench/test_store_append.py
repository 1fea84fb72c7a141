"""The store_append bench's floor: "SQLite alone" must insert exactly the rows the store
itself inserts (same schema, same rows, same chain), or its figure is not the ceiling of
this store's layout that the README reads it as."""

from __future__ import annotations

import sqlite3

import pytest

from benchwarden.core.store import ENTRY_COLUMNS, open_store
from tests.bench.test_bench_contract import load

bench = load("store_append")


def _entries(path) -> list[tuple]:
    connection = sqlite3.connect(path)
    try:
        return connection.execute(
            f"SELECT {', '.join(ENTRY_COLUMNS)} FROM entries ORDER BY seq").fetchall()
    finally:
        connection.close()


def _schema(path) -> set[tuple]:
    connection = sqlite3.connect(path)
    try:
        return set(connection.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE name IN "
            "(SELECT name FROM sqlite_master WHERE tbl_name IN ('entries', 'record_cells'))"
        ).fetchall())
    finally:
        connection.close()


@pytest.mark.parametrize("batch", [1, 7, 1000])
def test_the_floor_inserts_the_rows_the_store_inserts(tmp_path, batch):
    records = bench.records_for(23, "floor-check")
    with open_store(tmp_path / "store.sqlite") as store:
        for first in range(0, len(records), batch):
            store.append(records[first:first + batch])
    bench.insert_store_rows(tmp_path / "floor.sqlite", bench.store_rows(records), batch)
    stored = _entries(tmp_path / "store.sqlite")
    assert len(stored) == 23
    assert _entries(tmp_path / "floor.sqlite") == stored


def test_the_floor_database_has_the_store_s_tables_indexes_and_triggers(tmp_path):
    with open_store(tmp_path / "store.sqlite") as store:
        store.append(bench.records_for(2, "schema-check"))
    bench.insert_store_rows(tmp_path / "floor.sqlite",
                            bench.store_rows(bench.records_for(2, "schema-check")), 1000)
    floor = _schema(tmp_path / "floor.sqlite")
    assert {name for kind, name, _ in floor if kind == "index" and name.startswith("entries")} \
        >= {"entries_record_address_by_trial", "entries_by_run"}
    assert floor == _schema(tmp_path / "store.sqlite")
