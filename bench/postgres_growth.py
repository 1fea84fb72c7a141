"""How the read commands do on a PostgreSQL store as it grows, against the SQLite store
of the same records (issue 12's scale goals, on the other backend).

For each size, a PostgreSQL store is built once, in its own schema of the database at
`--postgres URL` (`bench_scale_<size>`), through the store API from the same synthetic
records `scale_store.py` writes; it is built under another name and renamed when
complete, so an interrupted build is never reused, and kept for later runs (drop the
schema to rebuild it). Each command then runs as its own process against it and, as the
baseline, against the cached SQLite store of that size (`scale_growth.measure`: the
child's wall time and peak RSS).

Figures: each command's time and peak RSS on PostgreSQL against SQLite at every size
(`<command>.seconds.<size>`), and its PostgreSQL growth from the next smaller size to
the largest (`<command>.seconds.<small>_to_<large>`); issue 12's goals are printed
against the PostgreSQL figures as `scale_growth.py` prints them for SQLite.

    python bench/postgres_growth.py --postgres URL                      # 10k and 100k
    python bench/postgres_growth.py --postgres URL --sizes 100k,1M      # minutes

The URL must name a database this benchmark may create schemas in (a throw-away one).
Without `--postgres` (or `BENCHWARDEN_BENCH_POSTGRES`) it says so and exits 0 with no
figures, so `run.py` can run it on a machine without PostgreSQL.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from _figures import Figure, add_json_option, emit
from scale_growth import (
    COMMANDS,
    add_size_and_command_options,
    goal_lines,
    measure,
    sizes_and_commands,
)
from scale_store import build, ensure_store, size_label

from benchwarden.core.store import SCHEMA_VERSION

DEFAULT_COMMANDS = ("arms_report", "arms_compare", "report_html", "verify", "export_jsonl")


def with_schema(url: str, schema: str) -> str:
    """`url` with every connection's search path set to `schema`."""
    separator = "&" if "?" in url else "?"
    return f"{url}{separator}options=" + quote(f"-csearch_path={schema}")


def ensure_postgres_store(url: str, size: int) -> str:
    """The URL of the PostgreSQL store of `size` records, built first when missing."""
    return ensure_postgres_schema(url, f"bench_scale_{size_label(size).lower()}",
                                  lambda location: build(location, size),
                                  f"{size:,} records")


def ensure_postgres_schema(url: str, schema: str, build_into: Callable[[str], None],
                           what: str) -> str:
    """The URL of the PostgreSQL store in `schema` of the database at `url`, built by
    `build_into(URL)` under another name first when missing (or of another schema
    version), and renamed when complete; `what` names it in the line that says so."""
    import psycopg

    building = f"{schema}_building"
    with psycopg.connect(url, autocommit=True) as connection:
        found = connection.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = %s "
            "AND table_name = 'meta'", (schema,)).fetchone()
        if found:
            version = connection.execute(
                f"SELECT value FROM {schema}.meta WHERE name = 'schema_version'").fetchone()
            if version is not None and str(version[0]) == str(SCHEMA_VERSION):
                return with_schema(url, schema)
            connection.execute(f"DROP SCHEMA {schema} CASCADE")  # another version's
        connection.execute(f"DROP SCHEMA IF EXISTS {building} CASCADE")
        connection.execute(f"CREATE SCHEMA {building}")
    print(f"building PostgreSQL schema {schema} ({what}, kept for later runs)",
          file=sys.stderr, flush=True)
    build_into(with_schema(url, building))
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f"ALTER SCHEMA {building} RENAME TO {schema}")
    return with_schema(url, schema)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", default=os.environ.get("BENCHWARDEN_BENCH_POSTGRES"),
                        metavar="URL", help="a throw-away PostgreSQL database "
                        "(default: $BENCHWARDEN_BENCH_POSTGRES)")
    add_size_and_command_options(parser, DEFAULT_COMMANDS)
    add_json_option(parser)
    options = parser.parse_args()
    sizes, chosen = sizes_and_commands(parser, options)
    if not options.postgres:
        print("postgres_growth: no PostgreSQL database given (--postgres URL or "
              "BENCHWARDEN_BENCH_POSTGRES); nothing measured")
        emit("postgres_growth", [], options.json_path)  # run.py then merges no figure
        return

    # (backend, command, size) -> (seconds, peak RSS MiB, exit code, page bytes)
    results: dict[tuple[str, str, int], tuple[float, float, int, int | None]] = {}
    for size in sizes:
        stores = {"postgres": ensure_postgres_store(options.postgres, size),
                  "sqlite": str(ensure_store(size))}
        for name in chosen:
            for backend, location in stores.items():
                with tempfile.TemporaryDirectory(prefix="bw-pg-scale-") as out:
                    arguments = [part.format(store=location, out=out)
                                 for part in COMMANDS[name]]
                    started = time.perf_counter()
                    seconds, rss, code = measure(arguments)
                    page = Path(out, "x.html")
                    page_bytes = page.stat().st_size if page.exists() else None
                results[(backend, name, size)] = (seconds, rss, code, page_bytes)
                print(f"  {size_label(size):>5} {name:<15} {backend:<8} {seconds:8.2f} s "
                      f"{rss:7.0f} MiB" + (f"  exit {code}" if code else "")
                      + f"  ({time.perf_counter() - started:.0f} s)", flush=True)

    figures = []
    for name in chosen:
        for size in sizes:
            postgres, sqlite = results[("postgres", name, size)], results[("sqlite", name, size)]
            label = size_label(size)
            figures.append(Figure(f"{name}.seconds.{label}", postgres[0], sqlite[0], "s",
                                  f"wall time on PostgreSQL vs SQLite, {label} records"))
            figures.append(Figure(f"{name}.peak_rss.{label}", postgres[1], sqlite[1], "MiB",
                                  f"peak RSS on PostgreSQL vs SQLite, {label} records"))
        if len(sizes) > 1:
            small, large = sizes[-2], sizes[-1]
            span = f"{size_label(small)}_to_{size_label(large)}"
            figures.append(Figure(
                f"{name}.seconds.{span}", results[("postgres", name, large)][0],
                results[("postgres", name, small)][0], "s",
                f"PostgreSQL wall time at {size_label(large)} vs {size_label(small)}"))
    if len(sizes) > 1:
        on_postgres = {(name, size): results[("postgres", name, size)]
                       for name in chosen for size in sizes}
        print(f"\ngoals at {size_label(sizes[-1])} on PostgreSQL (issue 12):")
        for line in goal_lines(on_postgres, chosen, sizes[-2], sizes[-1]):
            print(f"  {line}")
    print()
    emit("postgres_growth", figures, options.json_path)


if __name__ == "__main__":
    main()
