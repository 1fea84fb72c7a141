"""How time and peak memory of the read commands grow with the store (issue 12).

Runs each command as its own process, as a user would (`python -m benchwarden ...`),
against cached synthetic arms stores (bench/scale_store.py: 3 arms x 200 tasks, about
1 KB per record) of each size, and reads the child's wall time and peak RSS (the
child's own rusage through `os.wait4` in a small launcher, `_child.run_measured`, so
nothing else on the machine, and not this script's own peak, is counted).

Figures: for every command, the time and the peak RSS at the largest size against the
next smaller size (the baseline) in the same run; their ratio is the growth. Streaming
commands (export, verify) should keep peak RSS flat (ratio near 1); a command that
reads everything into memory grows with the records (about 10x for 100k -> 1M).

Issue 12's goals are printed against the figures: reports (`arms report`, `arms
compare`, `report --html`) under 3 s and 1 GiB at the largest size, growing at most 3x
in time from the next size, the page under 20 MB; export and verify within 1.5x in
peak RSS. `runs` and `show --latest` (the run list, and the latest run's report in the
terminal) are measured against the reports' goals too, though the issue names only
the three. Also measured in this process: `plan_cells` (what `arms run` does before its
first trial) for 180 cells at the smallest and the largest size, with their ratio
(the goal: independent of the store's size).

    python bench/scale_growth.py                          # 10k and 100k: minutes
    python bench/scale_growth.py --sizes 100k,1M          # the README's growth table
    python bench/scale_growth.py --commands export_jsonl,verify --sizes 10k,100k,1M
    python bench/scale_growth.py --commands arms_report,arms_compare,report_html --sizes 10k,100k,1M
    python bench/scale_growth.py --before /tmp/base --sizes 100k,1M    # A/B in one run

`--cold` also times every command with the store's files dropped from the page cache
first (`drop_from_page_cache`: `os.posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)` on the
store, its -wal and -shm, which needs no root and leaves Python's own files cached), as
a user meets a store nobody read lately; each command then runs cold, then warm.

    python bench/scale_growth.py --cold --commands arms_report,arms_compare,report_html \
        --sizes 10k,100k,1M

`--before CHECKOUT` also runs every command with an older checkout's code
(`PYTHONPATH=CHECKOUT`) against the store that checkout's own `scale_store.py` builds
for its schema version (`--before-cache`, default the same cache folder), right before
the same command with this code, so both meet the same load; the figures then include
each command's time and peak RSS now against before (`<command>.seconds.<size>.now_vs_before`).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from _checkout import NEUTRAL_FOLDER, child_environment
from _child import run_measured
from _figures import Figure, add_json_option, emit, now_vs_before
from scale_store import ensure_store, parse_size, size_label

COMMANDS: dict[str, list[str]] = {
    "export_jsonl": ["export", "--store", "{store}", "--format", "jsonl", "--out", "{out}/x.jsonl"],
    "export_parquet": ["export", "--store", "{store}", "--format", "parquet",
                       "--out", "{out}/x.parquet"],
    "verify": ["verify", "--store", "{store}"],
    "arms_report": ["arms", "report", "--store", "{store}"],
    "arms_compare": ["arms", "compare", "cli", "http", "--store", "{store}"],
    "report_html": ["report", "--latest", "--store", "{store}", "--html", "{out}/x.html"],
    # the other commands a user of a large store runs first: the run list, and the
    # latest run's report re-rendered in the terminal with its JSON
    "runs": ["runs", "--store", "{store}"],
    "show_latest": ["show", "--latest", "--store", "{store}", "--json", "{out}/x.json"],
    # every derived table made again from the bodies: the path an older store's first
    # writer takes (not in the default sets: it writes, the same rows again)
    "repair": ["store", "repair", "{store}"],
}


def measure(arguments: list[str], code: str | None = None) -> tuple[float, float, int]:
    """Wall seconds, peak RSS in MiB and exit code of one command in its own process,
    with the package of the checkout at `code` (default: this one), started in a
    neutral folder (`_checkout`: run from a repository's root, the "before" side of
    `--before` used to import this checkout's package and compare it with itself)."""
    result = run_measured([sys.executable, "-m", "benchwarden", *arguments],
                          stdout=subprocess.DEVNULL, env=child_environment(code),
                          cwd=NEUTRAL_FOLDER)
    if result.returncode not in (0, 1):
        tail = result.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        print(f"  ! {' '.join(arguments[:2])} exited {result.returncode}: {tail[0]}",
              file=sys.stderr)
    return result.seconds, result.peak_mib, result.returncode


def drop_from_page_cache(store: Path) -> None:
    """Drop a store's files from the OS page cache, so the next read comes from the disk.
    DONTNEED drops clean pages only: the cached stores are closed cleanly (checkpointed),
    so every page of theirs is clean."""
    for path in (store, Path(f"{store}-wal"), Path(f"{store}-shm")):
        try:
            descriptor = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            os.fdatasync(descriptor)
            os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(descriptor)


def before_store(checkout: str, size: int, cache: Path | None) -> Path:
    """The store of `size` records for the older checkout's schema version, built (or
    found) by that checkout's own `scale_store.py`."""
    command = [sys.executable, str(Path(checkout) / "bench" / "scale_store.py"), str(size)]
    if cache is not None:
        command += ["--cache", str(cache)]
    done = subprocess.run(command, capture_output=True, text=True, check=True,
                          env=child_environment(checkout))
    return Path(done.stdout.strip().splitlines()[-1])


REPORTS = ("arms_report", "arms_compare", "report_html", "runs", "show_latest")
STREAMS = ("export_jsonl", "export_parquet", "verify")


def plan_seconds(store: Path, repeats: int = 3) -> float:
    """Best of `repeats` wall seconds of `plan_cells` for 3 arms x 60 tasks (180 cells)."""
    import dataclasses

    from scale_store import ARMS, SCOPE, TASKS

    from benchwarden.core.store import open_store
    from benchwarden.suites.arms.driver import plan_cells
    from benchwarden.suites.arms.tasks import load_suite

    suite = dataclasses.replace(load_suite("tracker"), name=SCOPE)
    best = float("inf")
    with open_store(store, create=False) as opened:
        for _ in range(repeats):
            started = time.perf_counter()
            plan_cells(opened, suite, ARMS, TASKS[:60], 3)
            best = min(best, time.perf_counter() - started)
    return best


def goal_lines(results: dict[tuple[str, int], tuple[float, float, int, int | None]],
               chosen: list[str], small: int, large: int) -> list[str]:
    """Issue 12's goals, each met or not, from the measured figures."""
    lines = []
    for name in chosen:
        seconds, rss, _, page = results[(name, large)]
        small_seconds, small_rss, _, _ = results[(name, small)]
        if name in REPORTS:
            checks = [(f"{seconds:.1f} s < 3 s", seconds < 3.0),
                      (f"{rss:.0f} MiB < 1024 MiB", rss < 1024.0),
                      (f"time x{seconds / small_seconds:.1f} <= 3", seconds <= 3 * small_seconds)]
            if page is not None:
                checks.append((f"page {page / 2**20:.1f} MiB < 20 MB", page < 20_000_000))
        elif name in STREAMS:
            checks = [(f"peak RSS x{rss / small_rss:.2f} <= 1.5", rss <= 1.5 * small_rss)]
        else:
            continue
        lines.append(f"{name:<15} " + "; ".join(
            f"{text} {'met' if ok else 'NOT met'}" for text, ok in checks))
    return lines


def add_size_and_command_options(parser: argparse.ArgumentParser,
                                 commands: Sequence[str]) -> None:
    """`--sizes` and `--commands` (a subset of `COMMANDS`, `commands` by default)."""
    parser.add_argument("--sizes", default="10k,100k",
                        help="comma-separated store sizes (10k, 100k, 1M or numbers); the "
                             "last two give the growth figures")
    parser.add_argument("--commands", default=",".join(commands),
                        help=f"comma-separated subset of {', '.join(COMMANDS)}")


def sizes_and_commands(parser: argparse.ArgumentParser,
                       options: argparse.Namespace) -> tuple[list[int], list[str]]:
    """The sizes (ascending) and command names asked for; a usage error for an unknown
    command or no size."""
    sizes = sorted(parse_size(text) for text in options.sizes.split(",") if text.strip())
    chosen = [name.strip() for name in options.commands.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in COMMANDS]
    if unknown or not sizes:
        parser.error(f"unknown command(s) {unknown}" if unknown else "give at least one size")
    return sizes, chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_size_and_command_options(parser, [name for name in COMMANDS if name != "repair"])
    parser.add_argument("--cache", default=None, help="store cache folder (see scale_store.py)")
    parser.add_argument("--before", default=None, metavar="CHECKOUT",
                        help="an older checkout: run each command with its code too (A/B)")
    parser.add_argument("--before-cache", default=None,
                        help="store cache folder of the older checkout (default: --cache)")
    parser.add_argument("--cold", action="store_true",
                        help="also time each command with the store dropped from the page "
                             "cache first (cold, then warm)")
    add_json_option(parser)
    options = parser.parse_args()

    sizes, chosen = sizes_and_commands(parser, options)
    cache = Path(options.cache).expanduser().resolve() if options.cache else None

    before_cache = (Path(options.before_cache).expanduser().resolve() if options.before_cache
                    else cache)
    results: dict[tuple[str, int], tuple[float, float, int, int | None]] = {}
    earlier: dict[tuple[str, int], tuple[float, float, int, int | None]] = {}
    cold: dict[tuple[str, str, int], float] = {}  # (side, command, size) -> seconds
    for size in sizes:
        store = ensure_store(size, cache)
        older = before_store(options.before, size, before_cache) if options.before else None
        for name in chosen:
            sides = [("before", older, options.before, earlier)] if older else []
            for side, path, code_path, into in [*sides, ("now", store, None, results)]:
                with tempfile.TemporaryDirectory(prefix="bw-scale-") as out:
                    arguments = [part.format(store=path, out=out) for part in COMMANDS[name]]
                    if options.cold:
                        drop_from_page_cache(path)
                        cold[(side, name, size)] = measure(arguments, code_path)[0]
                        print(f"  {size_label(size):>5} {name:<15} {side:<6} "
                              f"{cold[(side, name, size)]:8.2f} s cold", flush=True)
                    seconds, rss, code = measure(arguments, code_path)
                    page = Path(out, "x.html")
                    page_bytes = page.stat().st_size if page.exists() else None
                into[(name, size)] = (seconds, rss, code, page_bytes)
                print(f"  {size_label(size):>5} {name:<15} {side:<6} {seconds:8.2f} s "
                      f"{rss:9.0f} MiB" + (f"  exit {code}" if code else "")
                      + (f"  page {page_bytes / 2**20:.1f} MiB" if page_bytes else ""),
                      flush=True)

    print(f"\n{'command':<15}" + "".join(f"{size_label(s):>22}" for s in sizes))
    for name in chosen:
        cells = []
        for size in sizes:
            seconds, rss, _, _ = results[(name, size)]
            cells.append(f"{seconds:8.2f} s {rss:7.0f} MiB")
        print(f"{name:<15}" + "".join(f"{cell:>22}" for cell in cells))

    figures = []
    if cold:
        print("\ncold page cache (the store's files dropped first): seconds")
        for name in chosen:
            cells = []
            for size in sizes:
                now_cold = cold[("now", name, size)]
                then_cold = cold.get(("before", name, size))
                cells.append(f"{now_cold:6.2f} s" if then_cold is None else
                             f"{then_cold:6.2f} -> {now_cold:5.2f} s (x{now_cold / then_cold:.2f})")
                if then_cold is not None:
                    figures.append(Figure(f"{name}.cold_seconds.{size_label(size)}.now_vs_before",
                                          now_cold, then_cold, "s", f"wall time at "
                                          f"{size_label(size)}, cold cache, this code vs before"))
            print(f"{name:<15}" + "".join(f"{cell:>32}" for cell in cells))
            if len(sizes) >= 2:
                small, large = sizes[-2], sizes[-1]
                figures.append(Figure(
                    f"{name}.cold_seconds.{size_label(small)}_to_{size_label(large)}",
                    cold[("now", name, large)], cold[("now", name, small)], "s",
                    f"cold wall time at {size_label(large)} vs {size_label(small)}"))
    if earlier:
        print(f"\nnow against before ({options.before}): time and peak RSS ratios")
        for name in chosen:
            cells = []
            for size in sizes:
                now_seconds, now_rss, _, _ = results[(name, size)]
                then_seconds, then_rss, _, _ = earlier[(name, size)]
                cells.append(f"{then_seconds:6.2f} -> {now_seconds:5.2f} s "
                             f"(x{now_seconds / then_seconds:.2f})")
                figures += now_vs_before(name, size_label(size), f"at {size_label(size)}",
                                         (now_seconds, then_seconds), (now_rss, then_rss))
            print(f"{name:<15}" + "".join(f"{cell:>32}" for cell in cells))
    if "arms_report" in chosen or "arms_compare" in chosen:
        plans = [plan_seconds(ensure_store(size, cache)) for size in (sizes[0], sizes[-1])]
        print(f"\nplan_cells, 180 cells: {plans[0] * 1000:.1f} ms at {size_label(sizes[0])}, "
              f"{plans[1] * 1000:.1f} ms at {size_label(sizes[-1])} "
              f"(x{plans[1] / plans[0]:.2f})")
        figures.append(Figure(f"plan_cells.seconds.{size_label(sizes[0])}_to_"
                              f"{size_label(sizes[-1])}", plans[1], plans[0], "s",
                              "arms run start-up: plan_cells for 180 cells"))
    if len(sizes) >= 2:
        print(f"\ngoals at {size_label(sizes[-1])} (issue 12):")
        for line in goal_lines(results, chosen, sizes[-2], sizes[-1]):
            print("  " + line)
        small, large = sizes[-2], sizes[-1]
        growth = f"{size_label(small)}_to_{size_label(large)}"
        for name in chosen:
            small_seconds, small_rss, _, small_page = results[(name, small)]
            large_seconds, large_rss, _, large_page = results[(name, large)]
            figures += growth_figures(name, growth, (large_seconds, large_rss, large_page),
                                      (small_seconds, small_rss, small_page),
                                      f"at {size_label(large)} vs {size_label(small)}")
    emit("scale_growth", figures, options.json_path)


def measured_sides(name: str, store: Path | str, before: str | None, prefix: str
                   ) -> Iterator[tuple[str, tuple[float, float, int | None], int]]:
    """Command `name` on `store`, with an older checkout's code first when `before`
    names one (`--before`), then this code's: per side, "before" or "now", its
    `(seconds, MiB, bytes of the HTML page or None)` and its exit code."""
    sides = [("before", before)] if before else []
    for side, code in [*sides, ("now", None)]:
        with tempfile.TemporaryDirectory(prefix=prefix) as out:
            arguments = [part.format(store=store, out=out) for part in COMMANDS[name]]
            seconds, rss, returned = measure(arguments, code)
            page = Path(out, "x.html")
            page_bytes = page.stat().st_size if page.exists() else None
        yield side, (seconds, rss, page_bytes), returned


def against_baseline(commands: list[str], points: list[Any],
                     results: dict[tuple[str, Any, str], tuple[float, float, int | None]],
                     shown: Callable[[Any], str], label: Callable[[Any], str],
                     against: Callable[[Any], str],
                     verdict: Callable[[str, tuple[float, float, int | None],
                                        tuple[float, float, int | None]], str]
                     ) -> list[Figure]:
    """This code's figures at each point after the first (the baseline) against the
    baseline's, per command: printed with `verdict(command, measured, baseline)` (what
    the goals say of it), and as `growth_figures`. `results`, `shown` and `label` as
    `before_and_now`; `against` is the figures' note ("at 1M vs 100k")."""
    figures = []
    for name in commands:
        baseline = base_seconds, base_rss, _ = results[(name, points[0], "now")]
        for point in points[1:]:
            measured = seconds, rss, page = results[(name, point, "now")]
            print(f"  {name:<13} {shown(point)}: {seconds:6.2f} s "
                  f"(x{seconds / base_seconds:.2f}), {rss:5.0f} MiB (x{rss / base_rss:.2f})"
                  + (f", page {page / 2**20:.1f} MiB" if page else "")
                  + f"  {verdict(name, measured, baseline)}")
            figures += growth_figures(name, label(point), measured, baseline, against(point))
    return figures


def add_point_options(parser: argparse.ArgumentParser, commands: Sequence[str]) -> None:
    """The options of a bench that measures read commands at several points (a width, a
    run size, an arm count): `--commands` (default `commands`), `--cache`, `--before`
    and `--json`."""
    parser.add_argument("--commands", default=",".join(commands),
                        help=f"comma-separated subset of {', '.join(COMMANDS)}")
    parser.add_argument("--cache", default=None, help="store cache folder (see scale_store.py)")
    parser.add_argument("--before", default=None, metavar="CHECKOUT",
                        help="an older checkout: run each command with its code too (A/B)")
    add_json_option(parser)


# issue 12's goals for the reports, which the benches hold every shape of suite to
READ_SECONDS_GOAL, PAGE_BYTES_GOAL = 3.0, 20_000_000


def read_goal_verdict(_name: str, measured: tuple[float, float, int | None],
                      _baseline: tuple[float, float, int | None]) -> str:
    """Whether a read command met the reports' goals: under `READ_SECONDS_GOAL` and, for
    the HTML report, a page under `PAGE_BYTES_GOAL`."""
    seconds, _, page_bytes = measured
    return "met" if seconds < READ_SECONDS_GOAL and (
        page_bytes is None or page_bytes < PAGE_BYTES_GOAL) else "NOT met"


Measured = tuple[float, float, int | None]
"""One command's `(seconds, MiB, bytes of the HTML page or None)`."""


def measure_points(commands: list[str], points: list[Any], store_of: Callable[[Any], Any],
                   before: str | None, prefix: str, shown: Callable[[Any], str]
                   ) -> dict[tuple[str, Any, str], Measured]:
    """Each command on the store of each point (`store_of(point)`: a width, a run size,
    an arm count), with `--before`'s code first when given (`measured_sides`), each
    printed as measured (`shown(point)` names it): `(seconds, MiB, page)` by
    `(command, point, "now" or "before")`, what `point_figures` reads."""
    results: dict[tuple[str, Any, str], Measured] = {}
    for point in points:
        store = store_of(point)
        for name in commands:
            for side, measured, code_returned in measured_sides(name, store, before, prefix):
                results[(name, point, side)] = measured
                seconds, rss, page_bytes = measured
                print(f"  {shown(point)} {name:<13} {side:<6} {seconds:7.2f} s {rss:7.0f} MiB"
                      + (f"  exit {code_returned}" if code_returned else "")
                      + (f"  page {page_bytes / 2**20:.1f} MiB" if page_bytes else ""),
                      flush=True)
    return results


def point_figures(heading: str, commands: list[str], points: list[Any],
                  results: dict[tuple[str, Any, str], Measured], before: str | None,
                  shown: Callable[[Any], str], label: Callable[[Any], str],
                  against: Callable[[Any], str], at: Callable[[Any], str],
                  verdict: Callable[[str, Measured, Measured], str]) -> list[Figure]:
    """`measure_points`' results as figures: `heading` printed, each point after the first
    against the first (`against_baseline`), and with `before`, now against before
    (`before_and_now`)."""
    print(heading)
    figures = against_baseline(commands, points, results, shown, label, against, verdict)
    if before:
        figures += before_and_now(before, commands, points, results, shown, label, at)
    return figures


def before_and_now(before: str, commands: list[str], points: list[Any],
                   results: dict[tuple[str, Any, str], tuple[float, float, int | None]],
                   shown: Callable[[Any], str], label: Callable[[Any], str],
                   at: Callable[[Any], str]) -> list[Figure]:
    """`--before`'s comparison: each command at each point (a width, a run size), its
    older checkout's wall time and peak RSS against this code's, printed, and the
    time's figures (`now_vs_before`). `results` holds `(seconds, MiB, page)` by
    `(command, point, "now" or "before")`; `shown`, `label` and `at` name a point in
    the printed line, the figure's name and its note."""
    print(f"\nnow against before ({before})")
    figures = []
    for name in commands:
        for point in points:
            now_seconds, now_rss, _ = results[(name, point, "now")]
            then_seconds, then_rss, _ = results[(name, point, "before")]
            print(f"  {name:<13} {shown(point)}: {then_seconds:6.2f} -> {now_seconds:6.2f} s"
                  f" (x{now_seconds / then_seconds:.2f}), {then_rss:.0f} -> {now_rss:.0f} MiB")
            figures += now_vs_before(name, label(point), at(point), (now_seconds, then_seconds))
    return figures


def growth_figures(name: str, label: str, measured: tuple[float, float, int | None],
                   baseline: tuple[float, float, int | None], against: str) -> list[Figure]:
    """A command's wall time, peak RSS and (when both runs wrote one) HTML page size,
    each `(seconds, MiB, bytes)`, against its baseline: `<name>.<figure>.<label>`."""
    (seconds, rss, page), (base_seconds, base_rss, base_page) = measured, baseline
    figures = [Figure(f"{name}.seconds.{label}", seconds, base_seconds, "s",
                      f"wall time {against}"),
               Figure(f"{name}.peak_rss.{label}", rss, base_rss, "MiB", f"peak RSS {against}")]
    if page is not None and base_page is not None:
        figures.append(Figure(f"{name}.page_bytes.{label}", page, base_page, "bytes",
                              f"size of the HTML page {against}"))
    return figures


if __name__ == "__main__":
    main()
