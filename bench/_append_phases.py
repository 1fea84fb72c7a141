"""Where an append's CPU goes: `python bench/store_append.py --phases`.

A diagnostic, not a goal figure. Two parts, both in microseconds of this process's CPU
per record (the least of `rounds` rounds, which other jobs on the machine sway least):
- the Python steps of `Store.append` for batches of 1,000, each timed alone in memory
  (no database): the steps the store runs, called the way it calls them;
- the database's share, by difference: the same batches appended to throw-away SQLite
  stores with parts switched off (the derived group totals and run counts, schema 5;
  `record_cells`; each index of `entries` dropped in turn). A part's cost is the full append's time
  minus the time without it. Index names are read from the store, so the breakdown
  follows the schema as it changes.
Stores made here have indexes dropped: they are thrown away and never opened again.
"""

from __future__ import annotations

import gc
import sqlite3
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchwarden.core import store as store_module
from benchwarden.core.chain import GENESIS_HASH, chain_links
from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import Record, canonical_json_many
from benchwarden.core.store import (
    SQLiteStore,
    cell_counts,
    fold_row_of,
    open_store,
    run_counts,
    summary_row,
)

BATCH = 1000


def _least_cpu(rounds: int, count: int, work: Callable[[], None]) -> float:
    """Least CPU microseconds per record of `work` over `rounds` runs."""
    best = float("inf")
    for _ in range(rounds):
        gc.collect()
        started = time.process_time()
        work()
        best = min(best, time.process_time() - started)
    return best / count * 1e6


def python_steps(records: Sequence[Record], rounds: int) -> list[tuple[str, float]]:
    batches = [records[start:start + BATCH] for start in range(0, len(records), BATCH)]
    addresses = [[("record", r.suite, r.scope, r.arm, r.task, r.trial, r.run_id) for r in batch]
                 for batch in batches]
    bodies = [canonical_json_many(batch) for batch in batches]
    count = len(records)

    def addresses_step() -> None:
        for batch in batches:
            [("record", r.suite, r.scope, r.arm, r.task, r.trial, r.run_id) for r in batch]

    def bodies_step() -> None:
        for batch in batches:
            canonical_json_many(batch)

    def scrubber_step() -> None:
        for batch, encoded in zip(batches, bodies, strict=True):
            store_module._scrubbed_bodies(batch, encoded)

    def chain_step() -> None:
        for batch_addresses, batch_bodies in zip(addresses, bodies, strict=True):
            links = chain_links(GENESIS_HASH, zip(canonical_json_many(batch_addresses),
                                                  batch_bodies, strict=True))
            previous = [GENESIS_HASH, *links[:-1]]
            [(*address, body, before, link) for address, body, before, link
             in zip(batch_addresses, batch_bodies, previous, links, strict=True)]

    def cells_step() -> None:
        for batch_addresses in addresses:
            cell_counts(batch_addresses)

    def runs_step() -> None:
        for batch_addresses in addresses:
            run_counts(batch_addresses)

    def summary_step() -> None:
        for batch in batches:
            [fold_row_of(seq, record) for seq, record in enumerate(batch, 1)]

    def decoded_summary_step() -> None:
        for batch_bodies in bodies:
            [summary_row(seq, body) for seq, body in enumerate(batch_bodies, 1)]

    return [(name, _least_cpu(rounds, count, step)) for name, step in (
        ("record addresses (tuples)", addresses_step),
        ("canonical JSON of the bodies (one msgspec call a batch)", bodies_step),
        ("secret scrubber's check (nothing remembered)", scrubber_step),
        ("addresses encoded, chain links (SHA-256), entry rows built", chain_step),
        ("record_cells counted (cell_counts)", cells_step),
        ("record_runs counted (run_counts)", runs_step),
        ("fold rows from the records in memory (fold_row_of, what appends use)",
         summary_step),
        ("(not run by appends) summary rows decoding the bodies (summary_row)",
         decoded_summary_step))]


def _indexes(path: Path, table: str) -> list[str]:
    connection = sqlite3.connect(path)
    try:
        return [name for (name,) in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? "
            "AND sql IS NOT NULL ORDER BY name", (table,))]
    finally:
        connection.close()


def _append_cpu(folder: Path, records: Sequence[Record], *, derived: bool = True,
                cells: bool = True, drop: Sequence[str] = ()) -> float:
    """CPU microseconds per record appending `records` (made for a run named by their
    `run_id`) in batches of 1,000 to a new store, from the first append to its close."""
    path = folder / f"phases-{uuid.uuid4().hex[:12]}.sqlite"
    store = open_store(path)
    assert isinstance(store, SQLiteStore)
    store.begin_run(stamp_run(suite="arms", bench_version="bench", config={},
                              run_id=records[0].run_id))
    if drop:
        store._connection.executescript("".join(f"DROP INDEX {name};" for name in drop))
    store.has_derived_tables = derived
    store._has_cells = cells
    gc.collect()
    started = time.process_time()
    for start in range(0, len(records), BATCH):
        store.append(records[start:start + BATCH])
    store.close()
    spent = time.process_time() - started
    for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}.head")):
        leftover.unlink(missing_ok=True)
    return spent / len(records) * 1e6


def database_parts(folder: Path, make_records: Callable[[str], list[Record]],
                   rounds: int) -> list[tuple[str, float]]:
    """(what, CPU µs per record), the database's parts by difference; the first row is
    the whole append."""
    probe = folder / "probe.sqlite"
    open_store(probe).close()
    entry_indexes = _indexes(probe, "entries")
    summary_indexes = _indexes(probe, "record_summaries")
    for leftover in (probe, Path(f"{probe}-wal"), Path(f"{probe}-shm"), Path(f"{probe}.head")):
        leftover.unlink(missing_ok=True)
    variants: list[tuple[str, dict[str, Any]]] = [
        ("whole append", {}),
        ("without derived tables", {"derived": False}),
        ("without derived tables and record_cells", {"derived": False, "cells": False}),
        ("entries alone, no index", {"derived": False, "cells": False,
                                     "drop": entry_indexes})]
    variants += [(f"without index {name}", {"derived": False, "cells": False,
                                            "drop": [name]}) for name in entry_indexes]
    variants += [(f"without index {name}", {"drop": [name]}) for name in summary_indexes]
    best: dict[str, float] = {}
    for _ in range(rounds):  # each round measures every variant in turn
        for name, options in variants:
            spent = _append_cpu(folder, make_records(f"phases-{uuid.uuid4().hex[:12]}"),
                                **options)
            best[name] = min(best.get(name, float("inf")), spent)
    whole = best["whole append"]
    no_derived = best["without derived tables"]
    bare = best["without derived tables and record_cells"]
    rows = [("whole append (batches of 1,000, empty store, to close)", whole),
            ("  group totals and run counts (fold rows in memory, folds, inserts, upserts)",
             whole - no_derived),
            ("  record_cells (counting + upserts)", no_derived - bare),
            ("  entries with every index (Python before the insert included)", bare),
            ("    entries table alone, no index", best["entries alone, no index"])]
    rows += [(f"    index {name}", bare - best[f"without index {name}"])
             for name in entry_indexes]
    rows += [(f"  index {name}", whole - best[f"without index {name}"])
             for name in summary_indexes]
    return rows
