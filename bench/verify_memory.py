"""Peak memory of `verify --store` as a store grows tenfold, against a baseline measured
in the same run.

`verify` pages through the store by sequence number (500 entries per batch), so its
peak RSS should barely move between a store of N records and one of 10 N (issue 12:
within 1.5x). For contrast the script also measures the way `verify` read before
(one query fetching every entry's body at once), whose peak grows with the store.

Each measurement runs in a fresh child process (`python -m benchwarden verify --store`,
or the fetch-all reader), and its peak RSS is read from `wait4`; the baseline is the
streaming `verify` on the small store. Ratios are what to read.

    python bench/verify_memory.py [--small 20000] [--large 200000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.store_append import arm_record  # noqa: E402
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
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    child = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - start
    return usage.ru_maxrss / 1024, elapsed, os.waitstatus_to_exitcode(status)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=20_000)
    parser.add_argument("--large", type=int, default=200_000)
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
            figures[("fetch-all", label)] = peak_rss_mb([sys.executable, "-c", FETCH_ALL, str(path)])
        baseline = figures[("verify", "small")][0]
        print(f"\nbaseline: streaming verify of the small store, peak RSS {baseline:.0f} MB\n")
        print(f"{'reader':<28}{'store':>10}{'peak RSS MB':>14}{'vs baseline':>14}{'exit':>6}")
        for (reader, label), (rss, _seconds, code) in figures.items():
            count = options.small if label == "small" else options.large
            print(f"{reader:<28}{count:>10,}{rss:>14.0f}{rss / baseline:>13.2f}x{code:>6}")
        growth = figures[("verify", "large")][0] / baseline
        print(f"\nstreaming verify, {options.large // options.small}x the records: "
              f"peak RSS {growth:.2f}x (target: at most 1.5x)")


if __name__ == "__main__":
    main()
