"""What every command shares: exit codes, one-line errors, the store option.

Exit codes: 0 pass/ok, 1 a gating verdict failed (or a run error), 2 a usage or
configuration error, an unreachable server or an unreadable store. Suites may add
their own (the ladder exits 3 when the champion holds).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

import click

from benchwarden.core.paths import default_store, is_home_store
from benchwarden.core.store import Store, StoreError, open_store

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_USAGE = 2

F = TypeVar("F", bound=Callable[..., Any])


class ConfigError(click.ClickException):
    """A problem the user fixes by changing what they typed or configured (exit 2)."""

    exit_code = EXIT_USAGE

    def format_message(self) -> str:
        return " ".join(self.message.split())

    def show(self, file: Any = None) -> None:
        click.echo(f"benchwarden: error: {self.format_message()}", err=True)


def store_option(function: F) -> F:
    return click.option(
        "--store", "store_location", default=default_store, show_default="~/.benchwarden/store.sqlite",
        help="SQLite file path or postgresql:// URL of the store (env BENCHWARDEN_STORE).",
    )(function)


class StoreFailure(click.ClickException):
    """A store error on its way out: one line, and the error's own exit code (4 when the
    OS or the database refused, 2 when there is no store or no such run)."""

    def __init__(self, error: StoreError) -> None:
        super().__init__(str(error))
        self.exit_code = error.exit_code

    def format_message(self) -> str:
        return " ".join(self.message.split())

    def show(self, file: Any = None) -> None:
        click.echo(f"benchwarden: error: {self.format_message()}", err=True)


def open_store_or_exit(location: str, *, create: bool, read_only: bool | None = None,
                       own_default: bool = False) -> Store:
    """Open the store for a command, or exit with one line.

    `create=False` for every command that only reads (runs, show, report, export, verify,
    compare): nothing is created, a missing store is "no store at PATH" (exit 2).
    `create=True` for commands that append: a new store file is made when its folder
    exists, and the folder itself only for a default location: the default store
    (~/.benchwarden), or a command's own default the user did not type (`own_default`,
    e.g. the store inside a ladder folder). `create=False, read_only=False` for resuming a
    run: the store must exist and is appended to."""
    try:
        return open_store(location, create=create, read_only=read_only,
                          create_parents=create and (own_default or is_home_store(location)))
    except StoreError as error:
        raise StoreFailure(error) from None
    except ImportError as error:
        raise ConfigError(f"this store needs an optional dependency: {error}") from None


def config_errors(function: F) -> F:
    """Turn ValueError/StoreError raised while configuring into exit-2 one-liners."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except StoreError as error:
            raise StoreFailure(error) from None

    return wrapper  # type: ignore[return-value]


def html_option(function: F) -> F:
    return click.option(
        "--html", "html_path", type=click.Path(dir_okay=False), default=None,
        help="Also write a self-contained HTML report here (no network needed to view it).",
    )(function)


def write_html_report(store_location: str, report: Any, html_path: str) -> None:
    """Write the run's page: the same renderer `benchwarden report --html` uses."""
    from benchwarden.cli.report import enrich_for_html, write_report_html

    with open_store_or_exit(store_location, create=False) as store:
        page_report = enrich_for_html(store, report)
    try:
        written = write_report_html(html_path, page_report)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    click.echo(f"HTML report written to {written}")


def executor_or_exit(spec: str | None) -> Any:
    """The executor a `--executor` spec names, or None for the in-process default
    (nothing or `local`); a bad spec is a one-line usage error."""
    if not spec or spec == "local":
        return None
    from benchwarden.core.executors import make_executor

    try:
        return make_executor(spec)
    except ValueError as error:
        raise ConfigError(str(error)) from None
