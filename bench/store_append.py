"""How fast the store appends records, against a named baseline measured in the same run.

Baseline: JSON Lines with `fsync` after every record (a writer that loses nothing on a
crash, the naive way). Measured: the SQLite store (WAL, hash chain, unique addresses)
appending about 550-byte arm-like records in batches of 1,000 and of 1, and in batches of
1,000 with a credential remembered by the scrubber (as in a run given `--api-key-env`);
optionally a PostgreSQL store (`--postgres URL`, which must point at a database or
schema that can be filled with throw-away data).

Growth: batches of 1,000 appended to stores that already hold 100k and 1M records
(copies, in a temporary folder, of the cached synthetic arms stores of `scale_store.py`;
the cached files are never opened for writing), against the same appends into an empty
store. Two kinds of batch: a new run's records (new cells, as above) and the campaign
going on (the next trials of the store's own 600 cells, which land all over the address
index: the hard case for a growing store).

Prints records per second for each writer (median of `--repeat` rounds) and its ratio
to the baseline. The clock stops after the store is closed (its WAL checkpointed). The
records are built before the clock starts, and frozen out of the garbage collector's
reach (`gc.freeze`) so that collections walking the bench's own pre-built input are
not charged to the store. Ratios are what to read: the machine is shared and noisy.

    python bench/store_append.py [--records 20000] [--repeat 3] [--growth 100k,1M]
                                 [--postgres URL] [--entries-only] [--phases]

`--entries-only` is a diagnostic: appends skip the derived group totals and run counts
(the stores are thrown away after), to split what the chain's table costs from what the
derived tables cost; its figures are not those of a store anyone would use.
`--phases` is another: where an append's CPU goes, step by step and part by part of the
database (`_append_phases.py`); it prints a breakdown instead of the figures.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from _figures import Figure, add_json_option, emit
from scale_store import SCOPE as SYNTHETIC_SCOPE
from scale_store import ensure_store, parse_size, synthetic_record

from benchwarden.core import secrets
from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import Record, TokenComponents, canonical_json
from benchwarden.core.store import Store, open_store

ARMS = ("cli", "mcp", "rest")
# a credential-shaped value the scrubber remembers for the "scrubbed" rounds; it never
# occurs in the records, so it measures the check every batch pays
REMEMBERED_SECRET = "sk-bench-" + "q7" * 16
# set by --entries-only (a diagnostic: appends keep no group totals or run counts)
ENTRIES_ONLY = False


def arm_record(index: int, scope: str) -> Record:
    """An arm trial as the arms suite writes it: tokens, outcome, a five-call transcript."""
    return Record(
        suite="arms", scope=scope, arm=ARMS[index % 3], task=f"task-{index // 3:06d}",
        trial=1, run_id=scope, outcome="pass" if index % 4 else "fail",
        started_at=1_790_000_000.0 + index, ended_at=1_790_000_007.25 + index,
        tokens=TokenComponents(fresh_input=1834, cache_creation=512, cache_read=10240,
                               output=377, reasoning=None),
        payload={
            "turns": 6, "tier": "find-then-act", "failure": None if index % 4 else "incorrect",
            "calls": [{"tool": name, "ok": True} for name in
                      ("list_issues", "get_issue", "search", "add_label", "report")],
            "checker": ["label bug added to issue 12"],
        })


def records_for(count: int, scope: str) -> list[Record]:
    return [arm_record(index, scope) for index in range(count)]


def campaign_records(store: Store, count: int, run_id: str) -> list[Record]:
    """The next `count` records of the synthetic arms campaign in `store` (its cells'
    next trials), continuing where the store's records end."""
    existing = int(store._query(
        "SELECT COUNT(*) FROM entries WHERE kind = 'record' AND suite = 'arms' AND scope = "
        f"{store.placeholder}", (SYNTHETIC_SCOPE,))[0][0])
    draw = random.Random(existing)
    return [synthetic_record(existing + index, run_id, draw) for index in range(count)]


class _Untracked:
    """Pre-built input kept out of the garbage collector's generations while timed."""

    def __enter__(self) -> None:
        gc.collect()
        gc.freeze()

    def __exit__(self, *exc: object) -> None:
        gc.unfreeze()


def jsonl_fsync(folder: Path, count: int) -> float:
    records = records_for(count, "baseline")
    path = folder / f"baseline-{uuid.uuid4().hex}.jsonl"
    with _Untracked():
        start = time.perf_counter()
        with open(path, "a", encoding="utf-8") as out:
            for record in records:
                out.write(json.dumps(record.to_json_dict()) + "\n")
                out.flush()
                os.fsync(out.fileno())
        elapsed = time.perf_counter() - start
    path.unlink()
    return count / elapsed


def store_rows(records: list[Record]) -> list[tuple]:
    """The `entries` rows a store holding nothing yet inserts for `records` (appended in
    one or many batches: the chain does not depend on batching): the record's address,
    its canonical JSON, the previous link and its own."""
    from benchwarden.core.chain import GENESIS_HASH, chain_links
    from benchwarden.core.records import canonical_json_many

    addresses = [("record", record.suite, record.scope, record.arm, record.task, record.trial,
                  record.run_id) for record in records]
    bodies = canonical_json_many(records)
    links = chain_links(GENESIS_HASH, zip(canonical_json_many(addresses), bodies,
                                          strict=True))
    return [(*address, body, previous, link) for address, body, previous, link
            in zip(addresses, bodies, [GENESIS_HASH, *links[:-1]], links, strict=True)]


def insert_store_rows(path: Path, rows: list[tuple], batch: int) -> None:
    """`rows` inserted into a new database at `path` made with the store's own schema
    (its `entries` table, unique-address and run indexes, triggers and `record_cells`;
    nothing derived is filled), the writer's pragmas and its multi-row INSERT, `batch`
    rows per transaction, then closed (its WAL checkpointed): SQLite's part of an
    append and nothing else."""
    import itertools
    import sqlite3

    from benchwarden.core import store as store_module

    connection = sqlite3.connect(path, isolation_level=None)
    for statement in store_module._SQLITE_SCHEMA:
        connection.execute(statement)
    connection.execute("PRAGMA journal_mode=WAL")
    for pragma in store_module.WRITER_PRAGMAS:
        connection.execute(pragma)
    per_insert = store_module._ROWS_PER_INSERT
    for first in range(0, len(rows), batch):
        connection.execute("BEGIN IMMEDIATE")
        chunk = rows[first:first + batch]
        for part in range(0, len(chunk), per_insert):
            piece = chunk[part:part + per_insert]
            connection.execute(store_module._multi_row_insert(len(piece)),
                               list(itertools.chain.from_iterable(piece)))
        connection.execute("COMMIT")
    connection.close()


def sqlite_rows_alone(folder: Path, count: int, batch: int) -> float:
    """The ceiling of any store that keeps a row per record in the store's layout:
    records/s of `insert_store_rows` for the rows the store would insert for
    `records_for(count)`, all computed before the clock starts. What the store adds on
    top (encoding, the chain, derived data, its checks) can only lower it."""
    rows = store_rows(records_for(count, f"floor-{uuid.uuid4().hex[:12]}"))
    path = folder / f"floor-{uuid.uuid4().hex}.sqlite"
    with _Untracked():
        start = time.perf_counter()
        insert_store_rows(path, rows, batch)
        elapsed = time.perf_counter() - start
    _remove_store_files(path)
    return count / elapsed


def store_append(open_one: Callable[[], Store], count: int, batch: int,
                 kind: str = "new-run") -> float:
    """Records per second appending `count` records in batches of `batch`, timed from the
    first append to the store's close."""
    return store_append_timed(open_one, count, batch, kind)[0]


def store_append_timed(open_one: Callable[[], Store], count: int, batch: int,
                       kind: str = "new-run") -> tuple[float, float]:
    """`store_append`'s records per second of wall time, and per second of this
    process's CPU time (less swayed by other jobs on a shared machine)."""
    scope = f"bench-{uuid.uuid4().hex[:12]}"
    store = open_one()
    if ENTRIES_ONLY:
        store.has_derived_tables = False
    try:
        store.begin_run(stamp_run(suite="arms", bench_version="bench", config={},
                                  run_id=scope))
        records = records_for(count, scope) if kind == "new-run" else \
            campaign_records(store, count, scope)
        with _Untracked():
            start, cpu_start = time.perf_counter(), time.process_time()
            for offset in range(0, count, batch):
                store.append(records[offset:offset + batch])
            store.close()
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    finally:
        store.close()
    with open_one() as check:
        assert check.run_info(scope).record_count == count
    return count / elapsed, count / max(cpu, 1e-9)


class _Remembered:
    """The process scrubber holds a credential for the duration (then forgets all)."""

    def __enter__(self) -> None:
        secrets.remember(REMEMBERED_SECRET, source="the bench's credential")

    def __exit__(self, *exc: object) -> None:
        secrets.forget_all()


def copied_store(source: Path, folder: Path) -> Path:
    """A private copy of a cached store (the cache is never opened for writing)."""
    target = folder / f"copy-{source.name}"
    shutil.copyfile(source, target)
    return target


def median_of(rounds: int, measure: Callable[[], float]) -> tuple[float, float, float]:
    values = [measure() for _ in range(rounds)]
    return statistics.median(values), min(values), max(values)


def measure_growth(folder: Path, sizes: list[int], count: int, repeat: int
                   ) -> list[tuple[str, str, tuple[float, float, float], float]]:
    """(kind, size label, (median, min, max) records/s, median records per CPU second) of
    batches of 1,000 into an empty store and into copies of the cached stores of `sizes`.
    Each round measures every size in turn, so a change in the machine's load sways all
    sizes alike rather than one."""
    if not sizes:
        return []
    stores: list[tuple[str, Path | None]] = [("0", None)]
    for existing in sizes:
        source = ensure_store(existing)
        stores.append((source.stem.removeprefix("arms-"), copied_store(source, folder)))
    kinds = ("new-run", "campaign")
    walls: dict[tuple[str, str], list[float]] = {}
    cpus: dict[tuple[str, str], list[float]] = {}
    for _ in range(repeat):
        for kind in kinds:
            for label, copy in stores:
                path = copy or folder / f"empty-{uuid.uuid4().hex[:8]}.sqlite"
                wall, cpu = store_append_timed(lambda path=path: open_store(path), count, 1000,
                                               kind)
                walls.setdefault((kind, label), []).append(wall)
                cpus.setdefault((kind, label), []).append(cpu)
                if copy is None:
                    _remove_store_files(path)
    for _, copy in stores:
        if copy is not None:
            _remove_store_files(copy)
    return [(kind, label, (statistics.median(walls[kind, label]), min(walls[kind, label]),
                           max(walls[kind, label])), statistics.median(cpus[kind, label]))
            for kind in kinds for label, _ in stores]


def growth_sizes(text: str) -> list[int]:
    return [parse_size(part) for part in text.split(",") if part.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000,
                        help="records per round for batches of 1,000")
    parser.add_argument("--single-records", type=int, default=2_000,
                        help="records per round for batches of 1 and for the baseline")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--growth", default="100k,1M",
                        help="sizes of the existing stores for the growth figure (cached "
                             "synthetic stores, built once when missing; '' to skip)")
    parser.add_argument("--dir", default=None, help="folder for the files (default: a temp dir)")
    parser.add_argument("--postgres", default=None, help="also measure a PostgreSQL store")
    parser.add_argument("--entries-only", action="store_true",
                        help="diagnostic: appends keep no derived tables (the chain's table "
                             "alone)")
    parser.add_argument("--phases", action="store_true",
                        help="diagnostic: print where an append's CPU goes (Python steps, "
                             "then the database's parts by difference) and exit")
    add_json_option(parser)
    options = parser.parse_args()
    global ENTRIES_ONLY
    ENTRIES_ONLY = options.entries_only
    if options.phases:
        print_phases(options.records, options.repeat, options.dir)
        return

    size = len(canonical_json(arm_record(1, "bench-0123456789ab")))
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(dir=options.dir) as temporary:
        folder = Path(temporary)
        baseline, low, high = median_of(
            options.repeat, lambda: jsonl_fsync(folder, options.single_records))
        rows = [("JSON Lines, fsync per record (baseline)", baseline, low, high)]
        figures.append(Figure("jsonl_fsync", baseline, baseline, "records/s", rows[0][0]))

        def measure(key: str, name: str, fn: Callable[[], float]) -> float:
            median, low, high = median_of(options.repeat, fn)
            rows.append((name, median, low, high))
            figures.append(Figure(key, median, baseline, "records/s", name))
            return median

        def sqlite() -> Store:
            return open_store(folder / "store.sqlite")

        measure("sqlite_batch_1000", "SQLite store, batches of 1,000",
                lambda: store_append(sqlite, options.records, 1000))
        measure("sqlite_rows_alone_batch_1000",
                "SQLite alone, the store's rows precomputed, batches of 1,000",
                lambda: sqlite_rows_alone(folder, options.records, 1000))
        measure("sqlite_batch_1", "SQLite store, batches of 1",
                lambda: store_append(sqlite, options.single_records, 1))

        def scrubbed() -> float:
            with _Remembered():
                return store_append(sqlite, options.records, 1000)
        measure("sqlite_batch_1000_scrubbed",
                "SQLite store, batches of 1,000, a credential remembered", scrubbed)
        if options.postgres:
            def postgres() -> Store:
                return open_store(options.postgres)
            measure("postgres_batch_1000", "PostgreSQL store, batches of 1,000",
                    lambda: store_append(postgres, options.records, 1000))
            measure("postgres_batch_1", "PostgreSQL store, batches of 1",
                    lambda: store_append(postgres, options.single_records, 1))

        growth = measure_growth(folder, growth_sizes(options.growth), options.records,
                                options.repeat)
        for kind, label, (wall, _, _), _ in growth:
            empty_wall = next(rates[0] for k, at, rates, _ in growth if k == kind and at == "0")
            key = f"sqlite_{kind.replace('-', '_')}_into_{'empty' if label == '0' else label}"
            figures.append(Figure(
                key, wall, baseline if label == "0" else empty_wall, "records/s",
                f"{kind} batches of 1,000 into an empty store" if label == "0" else
                f"{kind} batches of 1,000 into {label} existing records, baseline: the same "
                "into an empty store"))

    print(f"store append, records of {size} bytes (canonical JSON), "
          f"median of {options.repeat} rounds")
    print(f"{'writer':<56} {'records/s':>11} {'range':>19} {'vs baseline':>12}")
    for name, median, low, high in rows:
        print(f"{name:<56} {median:>11,.0f} {f'{low:,.0f}–{high:,.0f}':>19} "
              f"{median / baseline:>11.1f}x")
    if growth:
        print("\ngrowth: SQLite batches of 1,000 into a store already holding N records "
              "(sizes measured in turn, each round)")
        print(f"{'batch':<10} {'N':>6} {'records/s':>11} {'range':>19} {'vs empty':>9} "
              f"{'vs baseline':>12} {'per CPU s':>10} {'vs empty':>9}")
        for kind, label, (wall, low, high), cpu in growth:
            empty_wall, empty_cpu = next((rates[0], cpu_rate) for k, at, rates, cpu_rate
                                         in growth if k == kind and at == "0")
            print(f"{kind:<10} {label:>6} {wall:>11,.0f} {f'{low:,.0f}–{high:,.0f}':>19} "
                  f"{wall / empty_wall:>8.2f}x {wall / baseline:>11.1f}x {cpu:>10,.0f} "
                  f"{cpu / empty_cpu:>8.2f}x")
    emit("store_append", figures, options.json_path)


def print_phases(count: int, rounds: int, folder: str | None) -> None:
    """The `--phases` breakdown: CPU µs per record, least of `rounds` rounds."""
    import _append_phases

    print(f"where an append's CPU goes: µs of CPU per record, {count:,} arm records in "
          f"batches of 1,000, least of {rounds} rounds (load average "
          f"{os.getloadavg()[0]:.1f})")
    print("\nPython steps of Store.append, each alone in memory:")
    steps = _append_phases.python_steps(records_for(count, "bench-phases"), rounds)
    for name, cost in steps:
        print(f"  {name:<64} {cost:6.2f}")
    print(f"  {'sum':<64} {sum(cost for _, cost in steps):6.2f}")
    print("\nthe store's parts, by difference (the database's share, with the Python above):")
    with tempfile.TemporaryDirectory(dir=folder) as temporary:
        for name, cost in _append_phases.database_parts(
                Path(temporary), lambda scope: records_for(count, scope), rounds):
            print(f"  {name:<70} {cost:6.2f}")


def _remove_store_files(path: Path) -> None:
    for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}.head")):
        leftover.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
