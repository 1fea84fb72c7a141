"""How the read commands grow with the number of tasks in a suite, at a fixed depth.

Issue 12's stores have 200 tasks; a suite of thousands of tasks (a large generated
suite) makes a report hold tens of thousands of groups and cells instead of a few
thousand, whatever the number of records. This bench builds (once, cached beside the
`scale_store.py` stores) synthetic arms stores of 3 arms x N tasks x `--trials` trials
and runs each command in its own process, as `scale_growth.py` does: wall time, peak
RSS and, for the HTML report, the page's size.

Baseline: the same command against the 200-task store, in the same run, so the ratio
is how much a wider suite costs. `--before CHECKOUT` also runs every command with an
older checkout's code against the same stores (the schema must be the same), right
before this code's, and prints now against before.

    python bench/wide_suite.py                              # 200, 2,000 and 10,000 tasks
    python bench/wide_suite.py --tasks 200,20000 --trials 3
    python bench/wide_suite.py --before /tmp/base-main      # A/B in one run
    python bench/wide_suite.py --postgres URL --tasks 200,333334 --trials 1

`--postgres URL` runs the same commands against
PostgreSQL stores of the same records instead, one schema per width in that throw-away
database (`bench_wide_<tasks>`, `_x<trials>` past one trial; built once through the
store API and kept), its figures named `wide_suite_postgres`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

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
from scale_store import ARMS, build, ensure_store

DEFAULT_COMMANDS = ("arms_report", "arms_compare", "report_html", "show_latest")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="200,2000,10000",
                        help="comma-separated suite widths; the first is the baseline")
    parser.add_argument("--trials", type=int, default=3, help="trials per cell")
    add_point_options(parser, DEFAULT_COMMANDS)
    parser.add_argument("--postgres", default=None, metavar="URL",
                        help="PostgreSQL stores in schemas of this throw-away database "
                        "instead of SQLite files (built once, kept)")
    options = parser.parse_args()
    try:
        widths = [int(part) for part in options.tasks.split(",") if part.strip()]
    except ValueError:
        parser.error(f"--tasks takes whole numbers separated by commas, not {options.tasks!r}")
    chosen = [part for part in options.commands.split(",") if part]
    unknown = [name for name in chosen if name not in COMMANDS]
    if unknown or not widths or min(widths) < 1 or options.trials < 1:
        parser.error(f"unknown command(s) {unknown}" if unknown
                     else "give at least one width of 1 task or more, and 1 trial or more")
    cache = Path(options.cache).expanduser().resolve() if options.cache else None

    def store_of(width: int) -> Any:
        return (postgres_store(options.postgres, width, options.trials) if options.postgres
                else ensure_store(len(ARMS) * width * options.trials, cache, task_count=width))

    results = measure_points(
        chosen, widths, store_of, options.before, "bw-wide-",
        lambda width: f"{width:>6,} tasks ({len(ARMS) * width * options.trials:,} records)")
    base = widths[0]
    figures = point_figures(
        f"\nagainst {base:,} tasks (the baseline), this code; goals: < "
        f"{READ_SECONDS_GOAL:.0f} s, page < {PAGE_BYTES_GOAL / 1e6:.0f} MB", chosen, widths,
        results, options.before, lambda width: f"{width:>6,} tasks",
        lambda width: f"{width}_tasks", lambda width: f"at {width} tasks vs {base}",
        lambda width: f"at {width} tasks", read_goal_verdict)
    emit("wide_suite_postgres" if options.postgres else "wide_suite", figures,
         options.json_path)


def postgres_store(url: str, width: int, trials: int) -> str:
    """The URL of the PostgreSQL store of a suite of `width` tasks and `trials` trials a
    cell in the database at `url`, the same records as `ensure_store`'s file."""
    from postgres_growth import ensure_postgres_schema

    records = len(ARMS) * width * trials
    schema = f"bench_wide_{width}" + (f"_x{trials}" if trials != 1 else "")
    return ensure_postgres_schema(
        url, schema, lambda location: build(location, records, task_count=width),
        f"{records:,} records, {width:,} tasks")


if __name__ == "__main__":
    main()
