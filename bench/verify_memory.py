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
    python bench/verify_memory.py --passes 50000 [--pass-bound 10000] [--rounds 3]
                                  [--postgres URL]

With `--passes N` it measures instead what `verify` pays when the backend refuses its
temporary table (a PostgreSQL role without TEMP, a read-only connection, SQLite with no
usable temporary folder) and it folds the group totals in passes: a store of N records,
each its own group, verified with the temporary table (the baseline) and with it
refused (SQLite's temporary database held to one page: its CREATE is refused as when
its folder is full) and the pass bound set to `--pass-bound` groups, so N / bound
passes; the arms alternate, `--rounds` times. With `--postgres URL` (a throw-away
database) the same records are also stored there and verified by the database's owner
and by a role without TEMP (revoked from PUBLIC on that database).

bench/scale_growth.py measures every read command's growth on cached stores; this
script isolates `verify` and shows what streaming saves against reading everything.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
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


# `verify` of the store at argv 1 in a child, the pass bound set to argv 2; argv 3
# "refused" holds a SQLite store's temporary database to one page (a PostgreSQL URL
# names a role without TEMP instead). A line on stdout; exit 0 when the store is sound.
PASSES_CHILD = """
import sys
import benchwarden.core.store as store_module
store_module._GROUPS_VERIFIED_PER_PASS = int(sys.argv[2])
with store_module.open_store(sys.argv[1], create=False) as store:
    if sys.argv[3] == "refused" and not sys.argv[1].startswith("postgres"):
        store._connection.execute("PRAGMA temp.max_page_count = 1")
    report = store.verify()
print(report.line())
sys.exit(0 if report.ok else 1)
"""


def build(path: Path | str, count: int) -> float:
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


def passes(options: argparse.Namespace) -> None:
    """The passes' cost: `verify` with its temporary table and with it refused, the arms
    alternating round after round, on SQLite (and PostgreSQL with `--postgres`)."""
    with tempfile.TemporaryDirectory(prefix="bw-verify-passes-") as folder:
        path = Path(folder) / "groups.sqlite"
        seconds = build(path, options.passes)
        print(f"built store: {options.passes:,} records (as many groups), {seconds:.0f} s")
        arms = {"sqlite table": (str(path), "table"), "sqlite passes": (str(path), "refused")}
        role = None
        if options.postgres:
            url, role = _postgres_store(options.postgres, options.passes)
            arms["postgres table"] = (url, "table")
            arms["postgres passes"] = (url.replace("://postgres@", f"://{role}@"), "refused")
        rounds: dict[str, list[tuple[float, float]]] = {arm: [] for arm in arms}
        try:
            for number in range(options.rounds):
                for arm, (store, how) in arms.items():
                    result = run_measured(
                        [sys.executable, "-c", PASSES_CHILD, store, str(options.pass_bound),
                         how], env=child_environment(str(REPO)), cwd=NEUTRAL_FOLDER,
                        stdout=subprocess.DEVNULL)
                    if result.returncode != 0:
                        raise SystemExit(f"verify_memory: {arm} failed: "
                                         f"{result.stderr[-300:]!r}")
                    said = result.stderr.decode().strip().rsplit(": ", 1)[-1]
                    rounds[arm].append((result.seconds, result.peak_mib))
                    print(f"round {number + 1} {arm:<16} {result.seconds:7.2f} s "
                          f"{result.peak_mib:7.1f} MiB  {said}", flush=True)
        finally:
            if role:
                _drop_postgres_role(options.postgres, role)
    figures = []
    for backend in ("sqlite", "postgres") if options.postgres else ("sqlite",):
        table, passed = rounds[f"{backend} table"], rounds[f"{backend} passes"]
        for index, (name, unit) in enumerate((("seconds", "s"), ("peak_rss", "MiB"))):
            figures.append(Figure(
                f"passes_{backend}_{name}", statistics.median(r[index] for r in passed),
                statistics.median(r[index] for r in table), unit,
                f"{options.passes:,} groups in passes of {options.pass_bound:,} vs the "
                f"temporary table, median of {options.rounds}"))
    emit("verify_memory", figures, options.json_path)


def _postgres_store(base: str, count: int) -> tuple[str, str]:
    """A store of `count` records in its own schema of the throw-away database `base`
    (built once, kept for later runs), and a role that may read it but may not make a
    temporary table (TEMP revoked from PUBLIC on that database)."""
    import psycopg

    schema = f"bench_passes_{count}"
    with psycopg.connect(base, autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s",
                               (schema,)).fetchone()
        if not exists:
            admin.execute(f"DROP SCHEMA IF EXISTS {schema}_building CASCADE; "
                          f"CREATE SCHEMA {schema}_building")
    if not exists:
        seconds = build(f"{base}?options=-csearch_path%3D{schema}_building", count)
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f"ALTER SCHEMA {schema}_building RENAME TO {schema}")
        print(f"built PostgreSQL store: {count:,} records, {seconds:.0f} s")
    role = f"bw_bench_auditor_{secrets.token_hex(3)}"
    with psycopg.connect(base, autocommit=True) as admin:
        database = admin.execute("SELECT current_database()").fetchone()[0]
        admin.execute(f'REVOKE TEMPORARY ON DATABASE "{database}" FROM PUBLIC')
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}; "
                      f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}")
    return f"{base}?options=-csearch_path%3D{schema}", role


def _drop_postgres_role(base: str, role: str) -> None:
    import psycopg

    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f"DROP OWNED BY {role}; DROP ROLE {role}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # issue 12's sizes: below about 100k records a store is smaller than SQLite's page
    # cache (64 MiB), so a tenfold store fills more of the cache and reads as growth
    parser.add_argument("--small", type=int, default=100_000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--passes", type=int, default=0, metavar="RECORDS",
                        help="measure verify in passes on a store of RECORDS groups instead")
    parser.add_argument("--pass-bound", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--postgres", metavar="URL",
                        help="with --passes: the same store in this throw-away database too")
    add_json_option(parser)
    options = parser.parse_args()
    if options.passes:
        passes(options)
        return
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
