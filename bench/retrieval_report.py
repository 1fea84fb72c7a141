"""How the retrieval report grows with the seeds a run scored.

A retrieval run records one record a graded case (56 a seed with the default suite), so
a million records is about 17,857 seeds. This bench records one real run once (the CLI,
`retrieval run --strategy fts5 --seeds 1-SEEDS`, the driver's own records) and caches
it, then copies its records through the store API into runs of about each `--sizes`
records (as many seeds as come nearest, the source's taken in turn and renumbered so
every address is unique, each appended by the driver's `seed_records`, which puts the
seed's digest on its last record, and ended with the groups the driver keeps in a run
end), cached beside the other scale stores. It runs `show
--latest --json` and `report --latest --html` against each in their own process: wall
time, peak RSS and the page's size
(issue 12: reports in bounded memory, a page under 20 MB at any store size).

Baseline: the same command against the smallest store, in the same run, so a ratio is
the growth. `--before CHECKOUT` runs every command with an older checkout's code too,
alternating before / now, and prints now against before. `--rounds N` measures every
point N times, a round over every size and side in turn, and reports medians (one
round of a command that takes a second moves by a third on this machine).

    python bench/retrieval_report.py                          # 10k,100k
    python bench/retrieval_report.py --sizes 100k,1M --before /tmp/base-main --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from _building import built_in_place, child_output
from _figures import Figure, add_json_option, emit, now_vs_before
from scale_growth import growth_figures, measure
from scale_store import cache_folder, parse_size

COMMANDS: dict[str, list[str]] = {
    "show_latest": ["show", "--latest", "--store", "{store}", "--json", "{out}/x.json"],
    "report_html": ["report", "--latest", "--store", "{store}", "--html", "{out}/x.html"],
}
SOURCE_SEEDS = 300
PAGE_GOAL = 20_000_000

# Run in a child of this checkout: argv source store, target store, records wanted.
_BUILD = """
import dataclasses, sys, time
from benchwarden.core.records import RunEnd
from benchwarden.core.store import SQLiteStore
import msgspec
from benchwarden.suites.retrieval.driver import (
    DIGEST_FIELD, GROUPS_FIELD, groups_at_end, seed_records)
source, target, wanted = sys.argv[1], sys.argv[2], int(sys.argv[3])
with SQLiteStore(source, create=False, read_only=True) as opened:
    info = opened.latest_run("retrieval")
    records = list(opened.iter_records(run_id=info.run.run_id))
seeds = max(record.trial for record in records)
# as many seeds as come nearest to the records wanted (the source's seeds taken in turn,
# renumbered): whole copies of the source fell short by up to a copy (84,000 for 100k)
wanted_seeds = max(1, round(wanted * seeds / len(records)))
run_id = f"retrieval-synthetic-{wanted}"
run = dataclasses.replace(info.run, run_id=run_id, seeds=tuple(range(1, wanted_seeds + 1)))
budget = int(info.run.config["settings"]["budget_chars"])
by_seed = {}
for record in records:
    payload = {k: v for k, v in record.payload.items() if k != DIGEST_FIELD}
    by_seed.setdefault(record.trial, []).append(
        (record.arm, (record.task, payload, record.started_at, record.ended_at)))
source_seeds = sorted(by_seed)
written = 0
with SQLiteStore(target) as store:
    store.begin_run(run)
    for number in range(wanted_seeds):  # one append a seed, as the driver's
        cases = by_seed[source_seeds[number % len(source_seeds)]]
        store.append(seed_records(run_id, cases[0][0], number + 1,
                                  [case for _, case in cases], budget))
        written += len(cases)
    summary = dict(info.end.summary) if info.end else {}
    summary[GROUPS_FIELD] = msgspec.to_builtins(groups_at_end(store, run_id))  # as the driver
    store.finish_run(RunEnd(run_id, time.time(), "completed", summary))
print(written, wanted_seeds)
"""


def ensure_source(cache: Path) -> Path:
    """The cached real run of `SOURCE_SEEDS` fts5 seeds, recorded first when missing."""
    store = cache / f"retrieval-fts5-{SOURCE_SEEDS}-seeds.sqlite"
    if not store.exists():
        started = time.perf_counter()
        built_in_place(store, lambda partial: child_output(
            ["-m", "benchwarden", "retrieval", "run", "--strategy", "fts5",
             "--seeds", f"1-{SOURCE_SEEDS}", "--store", str(partial)],
            "recording the source run"))
        print(f"  recorded {SOURCE_SEEDS} fts5 seeds in {time.perf_counter() - started:.0f} s",
              flush=True)
    return store


def ensure_store(size: int, cache: Path) -> tuple[Path, int, int]:
    """The cached run of about `size` records: its path, records and seeds."""
    source = ensure_source(cache)
    # (`-nearest`: the seeds nearest to the size; the stores without it held whole copies
    # of the source run, 84,000 records for 100k and 991,200 for 1M)
    store = cache / f"retrieval-digested-{size}-nearest.sqlite"
    counts = store.with_suffix(".counts")
    if not store.exists():
        def build(partial: Path) -> None:
            counts.write_text(child_output(["-c", _BUILD, str(source), str(partial), str(size)],
                                           f"building the store of {size:,} records"))
        built_in_place(store, build)
    records, seeds = (int(part) for part in counts.read_text().split())
    return store, records, seeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10k,100k",
                        help="comma-separated record counts (10k, 100k, 1M); the first is "
                             "the baseline")
    parser.add_argument("--cache", default=None,
                        help="store cache folder (default: the scale benches' cache)")
    parser.add_argument("--before", default=None, metavar="CHECKOUT",
                        help="an older checkout: run each command with its code too")
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure every point this many times, each round over every "
                             "size and side in turn; medians are reported")
    add_json_option(parser)
    options = parser.parse_args()
    try:
        sizes = [parse_size(part) for part in options.sizes.split(",") if part.strip()]
    except ValueError:
        parser.error(f"--sizes takes sizes such as 10k,1M, not {options.sizes!r}")
    if not sizes:
        parser.error("give at least one size")
    cache = (Path(options.cache).expanduser().resolve() if options.cache
             else cache_folder() / "retrieval")
    points = [(size, *ensure_store(size, cache)) for size in sizes]
    sides = [("before", options.before), ("now", None)] if options.before else [("now", None)]
    if options.rounds < 1:
        parser.error("--rounds takes 1 or more")
    rounds: dict[tuple[str, int, str], list[tuple[float, float, int | None]]] = {}
    for number in range(1, options.rounds + 1):
        for size, store, records, seeds in points:
            for name, command in COMMANDS.items():
                for side, code in sides:
                    with tempfile.TemporaryDirectory(prefix="bw-retrieval-out-") as out:
                        seconds, rss, returned = measure(
                            [part.format(store=store, out=out) for part in command], code)
                        page = Path(out, "x.html")
                        page_bytes = page.stat().st_size if page.exists() else None
                    rounds.setdefault((name, size, side), []).append((seconds, rss, page_bytes))
                    print(f"  {records:>9,} records ({seeds:,} seeds) {name:<12} {side:<6} "
                          + (f"round {number}: " if options.rounds > 1 else "")
                          + f"{seconds:6.2f} s {rss:6.0f} MiB"
                          + (f"  page {page_bytes / 2**20:.1f} MiB" if page_bytes else "")
                          + (f"  exit {returned}" if returned else "")
                          + ("  page goal NOT met" if page_bytes and page_bytes >= PAGE_GOAL
                             else ""), flush=True)
    measured = {point: (statistics.median(seconds for seconds, _, _ in taken),
                        statistics.median(rss for _, rss, _ in taken), taken[-1][2])
                for point, taken in rounds.items()}
    figures: list[Figure] = []
    base = sizes[0]
    for name in COMMANDS:
        for size in sizes[1:]:
            figures += growth_figures(name, f"size_{size}", measured[(name, size, "now")],
                                      measured[(name, base, "now")],
                                      f"at {size:,} records vs {base:,}")
        if options.before:
            for size in sizes:
                now, before = measured[(name, size, "now")], measured[(name, size, "before")]
                figures += now_vs_before(name, f"size_{size}", f"at {size:,} records",
                                         (now[0], before[0]), (now[1], before[1]))
    emit("retrieval_report", figures, options.json_path)


if __name__ == "__main__":
    main()
