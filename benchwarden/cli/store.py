"""`benchwarden runs`, `benchwarden show RUN` (read a store, never a server),
`benchwarden store backup SRC DEST` (the way to copy a store) and `benchwarden store
repair STORE` (derived tables made complete again).

`runs` and `show` open the store read-only: a mistyped path is "no store at PATH"
(exit 2), never a new empty store.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

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
from benchwarden.core.store import Store, StoreError, is_url
from benchwarden.core.suite import SuiteUnavailable, build_report_from_records, get_suite
from benchwarden.core.witness import StoreHead

# What a run was measured against, most telling first: a server (url, model), a
# retrieval strategy, an agent command.
TARGET_KEYS = ("url", "model", "strategy", "command")


def target_label(target: Mapping[str, Any]) -> str:
    """A run's target in a few words: `url model`, the strategy, the agent's command."""
    words = [str(target[key]) for key in TARGET_KEYS if target.get(key)]
    return " ".join(words) or formatting.DASH


# Below this width the seven columns cannot all fit beside a whole run id: the runs are
# listed as two plain lines each instead of a table whose every other cell folds letter
# by letter.
TABLE_MIN_WIDTH = 120
# Past this many runs the listing is the plain lines on any terminal: rich measures every
# cell of a table before it draws one (50,000 runs took minutes), and a table that long is
# read by searching it, which the lines serve as well.
TABLE_MOST_RUNS = 2_000


def runs_table(infos: Sequence[Any], title: str) -> Table:
    """The `runs` table for a wide terminal: run ids whole on one line (they are what
    `show` and `report` take), the other columns fold."""
    table = Table(title=title, title_justify="left")
    widest_id = max((len(info.run.run_id) for info in infos), default=3)
    table.add_column("run", no_wrap=True, min_width=widest_id, overflow="ignore")
    for column in ("suite", "version", "target", "started", "status", "records"):
        table.add_column(column, overflow="fold")
    for info in infos:
        table.add_row(info.run.run_id, info.run.suite, info.run.bench_version,
                      target_label(info.run.target), formatting.when(info.run.started_at),
                      _status(info), str(info.record_count))
    return table


def _status(info: Any) -> str:
    return info.end.status if info.end else "incomplete"


def runs_lines(infos: Sequence[Any], title: str, width: int) -> list[str]:
    """The same facts for a narrow screen or a log: the whole run id first on its own
    line, then what it measured, indented and wrapped between words to `width`."""
    lines = [title]
    for info in infos:
        lines.append(f"{info.run.run_id}  {_status(info)}, {info.record_count} records")
        details = (f"{info.run.suite} v{info.run.bench_version} · "
                   f"{target_label(info.run.target)} · {formatting.when(info.run.started_at)}")
        lines.extend(wrapped_indented(details, max(20, width)))
    return lines


_WRAP_INDENT = "    "
_SPACES_TEXTWRAP_CHANGES = frozenset("\t\n\x0b\x0c\r")


def wrapped_indented(text: str, width: int) -> list[str]:
    """`text` indented and wrapped between words to `width`, as `textwrap.wrap` does.

    A line that already fits, with no whitespace `textwrap` would change (tabs, line
    breaks, whitespace of any kind at either end), is its own answer: `textwrap` would return it
    unchanged, and it is nearly every line of a listing of 50,000 runs, where wrapping
    each was most of the command's time. A test holds the two equal."""
    if (len(text) + len(_WRAP_INDENT) <= width and text and text.strip() == text
            and _SPACES_TEXTWRAP_CHANGES.isdisjoint(text)):
        return [_WRAP_INDENT + text]
    return textwrap.wrap(text, width=width, initial_indent=_WRAP_INDENT,
                         subsequent_indent=_WRAP_INDENT, break_long_words=False,
                         break_on_hyphens=False)


@click.command()
@store_option
@click.option("--suite", default=None, help="Only runs of this suite.")
@config_errors
def runs(store_location: str, suite: str | None) -> None:
    """List the runs in a store (run ids in full: `show` and `report` take them)."""
    with open_store_or_exit(store_location, create=False) as store:
        infos = store.run_listing(suite)
    out = console()
    title = f"runs in {store_location}"
    if out.width >= TABLE_MIN_WIDTH and len(infos) <= TABLE_MOST_RUNS:
        out.print(runs_table(infos, title))
    else:
        # plain text, written at once: rich's print per line cost 0.3 ms a line
        out.file.write("\n".join(runs_lines(infos, title, out.width)) + "\n")
        out.file.flush()


@click.command()
@click.argument("run_id", required=False)
@click.option("--latest", is_flag=True, help="The most recent run in the store.")
@click.option("--from-records", is_flag=True,
              help="Read every record, none of the digests a run keeps (contamination "
                   "rungs, retrieval seeds): the same report, recounted in full; each digest "
                   "that disagrees with its records is named in the report's warnings.")
@store_option
@json_report_option
@config_errors
def show(run_id: str | None, latest: bool, from_records: bool, store_location: str,
         json_path: str | None) -> None:
    """Re-render a past run's report from the store alone (no server)."""
    if not run_id and not latest:
        raise ConfigError("give a RUN id (see `benchwarden runs`) or --latest")
    with open_store_or_exit(store_location, create=False) as store:
        info = store.latest_run() if latest else store.run_info(run_id or "")
        # its id and suite only: the report reads the run again, and a wide suite's run
        # holds its task list three times (kept here, twice at once)
        run_id, suite_name = info.run.run_id, info.run.suite
        del info
        try:
            suite = get_suite(suite_name)
            if from_records:
                report, recounted = build_report_from_records(suite, store, run_id)
                if not recounted:
                    click.echo(f"note: suite {suite_name} cannot be told to read every "
                               "record (its build_report takes no from_records): its "
                               "report is built as it always is", err=True)
            else:
                report = suite.build_report(store, run_id)
        except (StoreError, SuiteUnavailable):
            raise
        except ValueError as error:
            raise ConfigError(str(error)) from None
    suite.render_terminal(report, console())
    if json_path:
        click.echo(f"report written to {write_json(json_path, report)}")


@click.group(name="store")
def store_group() -> None:
    """Look after a store: copy it safely, repair its derived tables."""


T = TypeVar("T")


def _on_store(location: str, step: Callable[[Store], T], *,
              read_only: bool | None = None) -> tuple[T, StoreHead | None]:
    """`step` on the existing store at `location`, and its head after it; the store's
    refusal is one line (exit 4)."""
    with open_store_or_exit(location, create=False, read_only=read_only) as store:
        try:
            result = step(store)
        except StoreError as error:
            raise StoreFailure(error) from None
        return result, store.head()


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
    written, head = _on_store(
        source, lambda store: store.backup_to(destination))  # type: ignore[attr-defined]
    ending = f", ending at entry {head.seq}" if head else " (empty)"
    click.echo(f"backed up {source} to {written}{ending}; "
               f"`benchwarden verify --store {written}` checks the copy")


@store_group.command()
@click.argument("location", metavar="STORE")
@config_errors
def repair(location: str) -> None:
    """Rebuild STORE's derived tables from its records: group totals, run and cell counts.

    They sit beside the hash chain so that a large store reads fast, and are made from
    the records alone, so they can always be made again: when `verify` says derived
    data was edited or removed, this rebuilds all of it (progress on stderr; 40 s for a
    million records on a busy 2-core machine). The chain itself is not touched:
    `benchwarden verify --store STORE` afterwards still checks every entry.
    """
    _, head = _on_store(location, Store.rebuild_derived, read_only=False)
    ending = f"{head.seq:,} entries" if head else "no entries"
    click.echo(f"store {location}: derived tables rebuilt from the records ({ending}); "
               f"`benchwarden verify --store {location}` checks the chain and them")
