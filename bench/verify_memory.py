"""Peak memory of `verify --store` as a store grows tenfold, against a baseline measured
in the same run.

`verify` pages through the store by sequence number (500 entries per batch), so its
peak RSS should barely move between a store of N records and one of 10 N (issue 12:
within 1.5x). For contrast the script also measures the way `verify` read before
(one query fetching every entry's body at once), whose peak grows with the store.

Each measurement runs in a fresh child process (`python -m benchwarden verify --store`,
or the fetch-all reader), and its own peak RSS is read (`_child`: the stores are built
in this process, whose peak a child started directly would inherit); the baseline is the
streaming `verify` on the small store. Ratios are what to read.

    python bench/verify_memory.py [--small 100000] [--large 1000000] [--json FILE]

bench/scale_growth.py measures every read command's growth on cached stores; this
script isolates `verify` and shows what streaming saves against reading everything.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _checkout import NEUTRAL_FOLDER, child_environment  # noqa: E402
from _child import run_measured  # noqa: E402
from _figures import Figure, add_json_option, emit  # noqa: E402
from store_append import arm_record  # noqa: E402

from benchwarden.core.provenance import stamp_run  # noqa: E402
from benchwarden.core.store import open_store  # noqa: E402

FETCH_ALL = """
import sys
from benchwarden.core.store import open_store
with open_store(sys.argv[1], create=False) as store:
    rows = store._query("SELECT seq, kind, suite, scope, arm, task, trial, run_id, body, "
                        "prev_hash, hash FROM entries ORDER BY seq")
    print(len(rows))
"""


def build(path: Path, count: int) -> float:
    start = time.perf_counter()
    with open_store(path) as store:
        store.begin_run(stamp_run(suite="arms", bench_version="bench", config={}, run_id="bench"))
        for offset in range(0, count, 5000):
            store.append([arm_record(index, "bench")
                          for index in range(offset, min(count, offset + 5000))])
    return time.perf_counter() - start


def peak_rss_mb(args: list[str]) -> tuple[float, float, int]:
    """(peak RSS in MB, wall seconds, exit code) of a child process."""
    result = run_measured(args, env=child_environment(str(REPO)), cwd=NEUTRAL_FOLDER,
                          stdout=subprocess.DEVNULL)
    return result.peak_mib, result.seconds, result.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # issue 12's sizes: below about 100k records a store is smaller than SQLite's page
    # cache (64 MiB), so a tenfold store fills more of the cache and reads as growth
    parser.add_argument("--small", type=int, default=100_000)
    parser.add_argument("--large", type=int, default=1_000_000)
    add_json_option(parser)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bw-verify-bench-") as folder:
        stores = {}
        for label, count in (("small", options.small), ("large", options.large)):
            path = Path(folder) / f"{label}.sqlite"
            seconds = build(path, count)
            stores[label] = path
            print(f"built {label} store: {count:,} records, "
                  f"{path.stat().st_size / 2**20:.0f} MB, {seconds:.0f} s")
        figures = {}
        for label, path in stores.items():
            figures[("verify", label)] = peak_rss_mb(
                [sys.executable, "-m", "benchwarden", "verify", "--store", str(path)])
            figures[("fetch-all", label)] = peak_rss_mb(
                [sys.executable, "-c", FETCH_ALL, str(path)])
        baseline = figures[("verify", "small")][0]
        failed = [reader for reader, (_rss, _seconds, code) in figures.items() if code != 0]
        if failed:
            raise SystemExit(f"verify_memory: a reader failed: {failed}")
        growth = options.large // options.small
        emit("verify_memory", [
            Figure("verify_peak_rss_large", figures[("verify", "large")][0], baseline, "MB",
                   f"streaming verify, {options.large:,} vs {options.small:,} records "
                   f"({growth}x); target at most 1.5x"),
            Figure("fetch_all_peak_rss_small", figures[("fetch-all", "small")][0], baseline,
                   "MB", f"reading every entry at once, {options.small:,} records"),
            Figure("fetch_all_peak_rss_large", figures[("fetch-all", "large")][0], baseline,
                   "MB", f"reading every entry at once, {options.large:,} records"),
        ], options.json_path)

if __name__ == "__main__":
    main()
