"""`benchwarden runs`, `benchwarden show RUN` (read a store, never a server) and
`benchwarden store backup SRC DEST` (the way to copy a store).

`runs` and `show` open the store read-only: a mistyped path is "no store at PATH"
(exit 2), never a new empty store.
"""

from __future__ import annotations

import click
from rich.table import Table

from benchwarden.cli.common import (
    ConfigError,
    StoreFailure,
    config_errors,
    json_report_option,
    open_store_or_exit,
    store_option,
)
from benchwarden.core import formatting
from benchwarden.core.reports import console, write_json
from benchwarden.core.store import StoreError, is_url
from benchwarden.core.suite import SuiteUnavailable, get_suite


@click.command()
@store_option
@click.option("--suite", default=None, help="Only runs of this suite.")
@config_errors
def runs(store_location: str, suite: str | None) -> None:
    """List the runs in a store."""
    with open_store_or_exit(store_location, create=False) as store:
        infos = store.runs(suite)
    table = Table(title=f"runs in {store_location}")
    for column in ("run", "suite", "version", "target", "started", "status", "records"):
        table.add_column(column)
    for info in infos:
        target = info.run.target
        label = " ".join(str(target[k]) for k in ("url", "model") if target.get(k)) or "—"
        table.add_row(info.run.run_id, info.run.suite, info.run.bench_version, label,
                      formatting.when(info.run.started_at), info.end.status if info.end else "incomplete",
                      str(info.record_count))
    console().print(table)


@click.command()
@click.argument("run_id", required=False)
@click.option("--latest", is_flag=True, help="The most recent run in the store.")
@store_option
@json_report_option
@config_errors
def show(run_id: str | None, latest: bool, store_location: str, json_path: str | None) -> None:
    """Re-render a past run's report from the store alone (no server)."""
    if not run_id and not latest:
        raise ConfigError("give a RUN id (see `benchwarden runs`) or --latest")
    with open_store_or_exit(store_location, create=False) as store:
        info = store.latest_run() if latest else store.run_info(run_id or "")
        try:
            suite = get_suite(info.run.suite)
            report = suite.build_report(store, info.run.run_id)
        except (StoreError, SuiteUnavailable):
            raise
        except ValueError as error:
            raise ConfigError(str(error)) from None
    suite.render_terminal(report, console())
    if json_path:
        click.echo(f"report written to {write_json(json_path, report)}")


@click.group(name="store")
def store_group() -> None:
    """Look after a store file: copy it safely."""


@store_group.command()
@click.argument("source")
@click.argument("destination", type=click.Path(dir_okay=False))
def backup(source: str, destination: str) -> None:
    """Copy the SQLite store SOURCE to the new file DESTINATION, with its head witness.

    Uses SQLite's online backup, so the copy is complete and consistent even while a
    run appends; a plain `cp` of a store can miss the entries still in its -wal file.
    DESTINATION must not exist. For a PostgreSQL store use `pg_dump`.
    """
    if is_url(source):
        raise ConfigError("`store backup` copies SQLite stores; back up a PostgreSQL store "
                          "with pg_dump (see docs/verify.md)")
    with open_store_or_exit(source, create=False) as store:
        try:
            written = store.backup_to(destination)  # type: ignore[attr-defined]
        except StoreError as error:
            raise StoreFailure(error) from None
        head = store.head()
    ending = f", ending at entry {head.seq}" if head else " (empty)"
    click.echo(f"backed up {source} to {written}{ending}; "
               f"`benchwarden verify --store {written}` checks the copy")
