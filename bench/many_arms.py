"""How the read commands grow with the number of arms in a suite, at a fixed record count.

Issue 12's stores have 3 arms; a sweep of prompts or models makes tens of them. The
records are as many, the groups and cells about as many, but a report compares arms in
pairs: compared every pair, 50 arms are 1,225 comparisons. This bench builds (once,
cached beside the `scale_store.py` stores) synthetic arms stores of N arms x `--tasks`
tasks holding the same `--records` records, and runs each command in its own process,
as `scale_growth.py` does: wall time, peak RSS and, for the HTML report, the page's size.

Baseline: the same command against the 3-arm store of the same records, in the same
run, so the ratio is how much more arms cost. `--before CHECKOUT` also runs every
command with an older checkout's code against the same stores, right before this code's,
and prints now against before.

    python bench/many_arms.py                           # 3 and 50 arms, 100k records
    python bench/many_arms.py --arms 3,20,100 --records 1M
    python bench/many_arms.py --before /tmp/base-main   # A/B in one run
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _figures import emit
from scale_growth import (
    COMMANDS,
    PAGE_BYTES_GOAL,
    READ_SECONDS_GOAL,
    add_point_options,
    measure_points,
    point_figures,
    read_goal_verdict,
)
from scale_store import ARMS, TASKS, ensure_store, parse_size, size_label

DEFAULT_COMMANDS = ("arms_report", "arms_compare", "report_html", "show_latest")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arms", default=f"{len(ARMS)},50",
                        help="comma-separated arm counts (3 or more); the first is the baseline")
    parser.add_argument("--records", default="100k", help="records in each store (10k, 1M...)")
    parser.add_argument("--tasks", type=int, default=len(TASKS), help="tasks in the suite")
    add_point_options(parser, DEFAULT_COMMANDS)
    options = parser.parse_args()
    try:
        counts = [int(part) for part in options.arms.split(",") if part.strip()]
        records = parse_size(options.records)
    except ValueError:
        parser.error(f"--arms takes whole numbers separated by commas and --records a size, "
                     f"not {options.arms!r} and {options.records!r}")
    chosen = [part for part in options.commands.split(",") if part]
    unknown = [name for name in chosen if name not in COMMANDS]
    if unknown or not counts or min(counts) < len(ARMS) or options.tasks < 1 or records < 1:
        parser.error(f"unknown command(s) {unknown}" if unknown
                     else f"give arm counts of {len(ARMS)} or more (`arms compare` compares "
                          "two of the first three), 1 task or more and 1 record or more")
    cache = Path(options.cache).expanduser().resolve() if options.cache else None

    results = measure_points(
        chosen, counts, lambda count: ensure_store(records, cache, task_count=options.tasks,
                                                   arm_count=count),
        options.before, "bw-arms-",
        lambda count: f"{count:>4} arms ({size_label(records)} records)")
    base = counts[0]
    figures = point_figures(
        f"\nagainst {base} arms (the baseline), this code; goals: < {READ_SECONDS_GOAL:.0f} s, "
        f"page < {PAGE_BYTES_GOAL / 1e6:.0f} MB", chosen, counts, results, options.before,
        lambda count: f"{count:>4} arms", lambda count: f"{count}_arms",
        lambda count: f"at {count} arms vs {base}", lambda count: f"at {count} arms",
        read_goal_verdict)
    emit("many_arms", figures, options.json_path)


if __name__ == "__main__":
    main()
