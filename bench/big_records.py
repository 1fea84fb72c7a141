"""Memory of the read commands when the records are large, not many.

A store's memory goals (issue 12) were measured in records: a million small ones. An
agent's transcript can hold megabytes of tool output, and a reader that pages by rows
(500 or 5,000 bodies a query) holds that many of them at once. This bench builds (once,
cached beside the `scale_store.py` stores) two arms stores of the same `--records`
records written through the store API, `scale_store.py`'s synthetic ones: **small**
(as they are, about 1 KB each) and **large** (each with one more transcript entry of
`--record-kib` KiB of tool output), runs each command in its own process against both
and prints wall time and peak RSS of the large-record store against the small-record
one (the baseline, same run): the ratio is what a record's size costs in memory.

    python bench/big_records.py                                  # 3,000 records, 512 KiB
    python bench/big_records.py --records 1000 --record-kib 2048
    python bench/big_records.py --before /tmp/base-main           # older code too (A/B)
    python bench/big_records.py --postgres URL                    # PostgreSQL stores too

With `--postgres URL` (a throw-away database) the same two stores are also built in
schemas of it (`bench_big_records_<records>_<KiB>`, kept for later runs) and measured
the same way: PostgreSQL hands a whole query result to libpq unless it is streamed.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
import tempfile
import time
from pathlib import Path

from _figures import Figure, add_json_option, emit
from postgres_growth import ensure_postgres_schema
from scale_growth import COMMANDS, measure
from scale_store import TASKS, cache_folder, synthetic_config, synthetic_record

from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import RunEnd
from benchwarden.core.store import SCHEMA_VERSION, open_store

DEFAULT_COMMANDS = ("export_jsonl", "export_parquet", "verify", "arms_report", "report_html",
                    "show_latest")
BATCH = 50


def build(path: Path | str, records: int, record_kib: int) -> None:
    """`records` synthetic arms records at `path`, each with a tool output of
    `record_kib` KiB added to its transcript (none when 0)."""
    draw = random.Random(records)
    output = "".join(random.Random(record_kib).choice("abcdefghij \n")
                     for _ in range(record_kib * 1024))
    config = synthetic_config(TASKS, records)
    run_id = "arms-big-records"
    with open_store(path) as store:
        store.begin_run(stamp_run(suite="arms", bench_version="1", config=config,
                                  target={"driver": "synthetic"}, run_id=run_id))
        for first in range(0, records, BATCH):
            batch = []
            for index in range(first, min(records, first + BATCH)):
                record = synthetic_record(index, run_id, draw)
                if record_kib:
                    payload = dict(record.payload)
                    payload["transcript"] = [*payload["transcript"], {
                        "kind": "shell", "command": "cat build.log", "output": output}]
                    record = dataclasses.replace(record, payload=payload)
                batch.append(record)
            store.append(batch)
        store.finish_run(RunEnd(run_id, time.time(), "completed", {}))


def ensure(records: int, record_kib: int) -> Path:
    """The cached store (built first when missing)."""
    folder = cache_folder()
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"arms-big-records-{records}-{record_kib}kib.v{SCHEMA_VERSION}.sqlite"
    if not final.exists():
        partial = folder / f".{final.stem}.building.sqlite"
        for leftover in folder.glob(partial.name + "*"):
            leftover.unlink()
        print(f"building {final.name}", file=sys.stderr, flush=True)
        build(partial, records, record_kib)
        for suffix in ("-wal", "-shm"):
            Path(f"{partial}{suffix}").unlink(missing_ok=True)
        head = Path(f"{partial}.head")
        if head.exists():
            head.rename(Path(f"{final}.head"))
        partial.rename(final)
    return final


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=3_000)
    parser.add_argument("--record-kib", type=int, default=512,
                        help="KiB of tool output added to each large record")
    parser.add_argument("--commands", default=",".join(DEFAULT_COMMANDS),
                        help=f"comma-separated subset of {', '.join(COMMANDS)}")
    parser.add_argument("--before", default=None, metavar="CHECKOUT",
                        help="an older checkout: run each command with its code too")
    parser.add_argument("--postgres", default=None, metavar="URL",
                        help="a throw-away PostgreSQL database: its stores measured too")
    add_json_option(parser)
    options = parser.parse_args()
    chosen = [name for name in options.commands.split(",") if name]
    unknown = [name for name in chosen if name not in COMMANDS]
    if unknown or options.records < 1 or options.record_kib < 1:
        parser.error(f"unknown command(s) {unknown}" if unknown
                     else "--records and --record-kib are at least 1")
    stores: dict[str, Path | str] = {"small": ensure(options.records, 0),
                                     "large": ensure(options.records, options.record_kib)}
    if options.postgres:
        for kind, kib in (("small", 0), ("large", options.record_kib)):
            stores[f"{kind}_postgres"] = ensure_postgres_schema(
                options.postgres, f"bench_big_records_{options.records}_{kib}",
                lambda url, kib=kib: build(url, options.records, kib),
                f"{options.records:,} records of +{kib} KiB")
    sides = [("now", None)] + ([("before", options.before)] if options.before else [])
    measured: dict[tuple[str, str, str], tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as out:
        for name in chosen:
            for kind, store in stores.items():
                for side, code in sides:
                    arguments = [part.format(store=store, out=out) for part in COMMANDS[name]]
                    seconds, peak, _ = measure(arguments, code)
                    measured[(name, kind, side)] = (seconds, peak)
                    print(f"  {name:15s} {kind:14s} {side:6s} {seconds:7.2f} s "
                          f"{peak:8.0f} MiB", file=sys.stderr, flush=True)
    sizes = {kind: Path(stores[kind]).stat().st_size / 2**20 for kind in ("small", "large")}
    figures = [Figure("store_mib", sizes["large"], sizes["small"], "MiB",
                      f"the store of {options.records:,} records of "
                      f"+{options.record_kib} KiB vs of small ones")]
    backends = [""] + (["_postgres"] if options.postgres else [])
    for name in chosen:
        for backend in backends:
            for side, _ in sides:
                suffix = ("" if not backend else ".postgres") + ("" if side == "now"
                                                                  else ".before")
                (large_s, large_m), (small_s, small_m) = (
                    measured[(name, f"large{backend}", side)],
                    measured[(name, f"small{backend}", side)])
                where = f"{side}{', PostgreSQL' if backend else ''}"
                figures.append(Figure(f"{name}.peak_rss{suffix}", large_m, small_m, "MiB",
                                      f"peak RSS, large records vs small ({where})"))
                figures.append(Figure(f"{name}.seconds{suffix}", large_s, small_s, "s",
                                      f"wall time, large records vs small ({where})"))
    emit("big_records", figures, options.json_path)


if __name__ == "__main__":
    main()
