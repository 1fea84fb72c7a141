"""How fast the store appends records, against a named baseline measured in the same run.

Baseline: JSON Lines with `fsync` after every record (a writer that loses nothing on a
crash, the naive way). Measured: the SQLite store (WAL, hash chain, unique addresses)
appending about 500-byte arm-like records in batches of 1,000 and of 1; optionally a
PostgreSQL store (`--postgres URL`, which must point at a database or schema that can
be filled with throw-away data).

Prints records per second for each writer (median of `--repeat` rounds) and its ratio
to the baseline. Ratios are what to read: the machine is shared and noisy.

    python bench/store_append.py [--records 20000] [--repeat 3] [--postgres URL]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable

from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import Record, TokenComponents, canonical_json
from benchwarden.core.store import Store, open_store

from _figures import Figure, add_json_option, emit

ARMS = ("cli", "mcp", "rest")


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


def jsonl_fsync(folder: Path, count: int) -> float:
    records = records_for(count, "baseline")
    path = folder / f"baseline-{uuid.uuid4().hex}.jsonl"
    start = time.perf_counter()
    with open(path, "a", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record.to_json_dict()) + "\n")
            out.flush()
            os.fsync(out.fileno())
    return count / (time.perf_counter() - start)


def store_append(open_one: Callable[[], Store], count: int, batch: int) -> float:
    scope = f"bench-{uuid.uuid4().hex[:12]}"
    records = records_for(count, scope)
    with open_one() as store:
        store.begin_run(stamp_run(suite="arms", bench_version="bench", config={}, run_id=scope))
        start = time.perf_counter()
        for offset in range(0, count, batch):
            store.append(records[offset:offset + batch])
        elapsed = time.perf_counter() - start
        assert len(store.records(run_id=scope)) == count
    return count / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000,
                        help="records per round for batches of 1,000")
    parser.add_argument("--single-records", type=int, default=2_000,
                        help="records per round for batches of 1 and for the baseline")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=None, help="folder for the files (default: a temp dir)")
    parser.add_argument("--postgres", default=None, help="also measure a PostgreSQL store")
    add_json_option(parser)
    options = parser.parse_args()

    size = len(canonical_json(arm_record(1, "bench-0123456789ab")))
    with tempfile.TemporaryDirectory(dir=options.dir) as temporary:
        folder = Path(temporary)

        def sqlite() -> Store:
            return open_store(folder / "store.sqlite")

        writers: list[tuple[str, Callable[[], float]]] = [
            ("JSON Lines, fsync per record (baseline)",
             lambda: jsonl_fsync(folder, options.single_records)),
            ("SQLite store, batches of 1,000",
             lambda: store_append(sqlite, options.records, 1000)),
            ("SQLite store, batches of 1",
             lambda: store_append(sqlite, options.single_records, 1)),
        ]
        if options.postgres:
            def postgres() -> Store:
                return open_store(options.postgres)
            writers += [
                ("PostgreSQL store, batches of 1,000",
                 lambda: store_append(postgres, options.records, 1000)),
                ("PostgreSQL store, batches of 1",
                 lambda: store_append(postgres, options.single_records, 1)),
            ]
        results = []
        for name, measure in writers:
            rounds = [measure() for _ in range(options.repeat)]
            results.append((name, statistics.median(rounds), min(rounds), max(rounds)))

    baseline = results[0][1]
    print(f"store append, records of {size} bytes (canonical JSON), "
          f"median of {options.repeat} rounds")
    print(f"{'writer':<42} {'records/s':>11} {'range':>19} {'vs baseline':>12}")
    for name, median, low, high in results:
        print(f"{name:<42} {median:>11,.0f} {f'{low:,.0f}–{high:,.0f}':>19} "
              f"{median / baseline:>11.1f}x")
    figure_names = ["jsonl_fsync", "sqlite_batch_1000", "sqlite_batch_1",
                    "postgres_batch_1000", "postgres_batch_1"]
    emit("store_append", [Figure(key, median, baseline, "records/s", name)
                          for key, (name, median, _, _) in zip(figure_names, results)],
         options.json_path)


if __name__ == "__main__":
    main()
