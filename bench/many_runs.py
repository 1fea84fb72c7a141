"""How the read commands grow with the number of runs in a store, at a fixed size.

Issue 12's stores hold their records in runs of 100,000 (ten runs at a million). A
store written by many short runs (a campaign resumed run after run, a nightly job
adding twenty trials a night) holds the same records in tens of thousands of runs,
each with its start (its configuration: the suite's task lists), its end and its
record count. This bench builds (once, cached beside the `scale_store.py` stores) the
synthetic arms store of `--records` records in runs of each `--run-sizes` length and
runs each command in its own process, as `scale_growth.py` does: wall time, peak RSS.

Baseline: the same command against the store of the same records in runs of 100,000
(the first run size), in the same run, so the ratio is what many runs cost.

    python bench/many_runs.py                                  # 200k records, runs of 20
    python bench/many_runs.py --records 1M --run-sizes 100000,20
    python bench/many_runs.py --before /tmp/base-main          # A/B in one run
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _figures import emit
from scale_growth import COMMANDS, add_point_options, measure_points, point_figures
from scale_store import RUN_SIZE, ensure_store, parse_size

DEFAULT_COMMANDS = ("runs", "show_latest", "arms_report", "report_html", "export_jsonl",
                    "verify")
# the goals of issue 12's reports, which this bench holds a store of many runs to as well
SECONDS_GOAL, MEMORY_GOAL_MIB = 3.0, 1024.0
# export and verify read every record, so their time follows the records; their goal is
# memory that does not grow with the store (here: with its runs)
READS_EVERY_RECORD = {"export_jsonl", "export_parquet", "verify"}
MEMORY_GROWTH_GOAL = 1.5


def verdict(name: str, measured: tuple[float, float, int | None],
            baseline: tuple[float, float, int | None]) -> str:
    """What the goals say of a command's figures in many runs: a report's time and
    memory, or (export and verify, linear in records by design) its memory's growth."""
    seconds, rss, _ = measured
    if name in READS_EVERY_RECORD:
        met = rss <= MEMORY_GROWTH_GOAL * baseline[1]
        goal = f"memory within {MEMORY_GROWTH_GOAL}x of the baseline's"
    else:
        met = seconds < SECONDS_GOAL and rss < MEMORY_GOAL_MIB
        goal = f"{SECONDS_GOAL:.0f} s and {MEMORY_GOAL_MIB:.0f} MiB"
    return f"{'within' if met else 'NOT within'} {goal}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", default="200k", help="records in each store (10k, 1M, ...)")
    parser.add_argument("--run-sizes", default=f"{RUN_SIZE},20",
                        help="comma-separated records per run; the first is the baseline")
    add_point_options(parser, DEFAULT_COMMANDS)
    options = parser.parse_args()
    try:
        records = parse_size(options.records)
        run_sizes = [int(part) for part in options.run_sizes.split(",") if part.strip()]
    except ValueError as error:
        parser.error(str(error) if "size" in str(error) else
                     f"--run-sizes takes whole numbers separated by commas, not "
                     f"{options.run_sizes!r}")
    chosen = [part for part in options.commands.split(",") if part]
    unknown = [name for name in chosen if name not in COMMANDS]
    if unknown or not run_sizes or min(run_sizes) < 1:
        parser.error(f"unknown command(s) {unknown}" if unknown
                     else "give at least one run size of 1 record or more")
    cache = Path(options.cache).expanduser().resolve() if options.cache else None

    results = measure_points(
        chosen, run_sizes, lambda run_size: ensure_store(records, cache, run_size=run_size),
        options.before, "bw-runs-",
        lambda run_size: f"{-(-records // run_size):>7,} runs ({records:,} records)")
    base = run_sizes[0]
    figures = point_figures(
        f"\nagainst runs of {base:,} records (the baseline), this code", chosen, run_sizes,
        results, options.before, lambda size: f"runs of {size:>7,}",
        lambda size: f"runs_of_{size}", lambda size: f"in runs of {size} vs {base}",
        lambda size: f"in runs of {size}", verdict)
    emit("many_runs", figures, options.json_path)


if __name__ == "__main__":
    main()
