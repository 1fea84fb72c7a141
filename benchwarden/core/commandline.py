"""The click options and helpers every command shares, suite commands included.

It lives in core (not cli/) so a suite's `command.py` needs nothing from `cli/`: the
layering is core <- targets <- suites <- cli, and a third-party suite gets the same
options, words and metavars as the built-in ones.

Exit codes are the one table in `core.errors` (0 pass/ok, 1 fail, 2 usage/config/
unreachable, 3 held, 4 OS or store refused, 130 interrupted), applied to every command
by `cli.main`; `ConfigError` here is the click-side spelling of exit 2.

Invariants:
- No option value that carries a credential (a URL with user:key@, a store URL's
  password) is stored or printed: URLs with credentials are refused, and a PostgreSQL
  store password is handed to the process scrubber (`core.secrets`).
- The same option has the same name, metavar and help words in every command: define a
  shared option here once rather than spelling it again in a suite.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

import click

from benchwarden.core import secrets
from benchwarden.core.errors import EXIT_USAGE, BenchwardenError, IsolationUnavailable
from benchwarden.core.paths import default_store, is_home_store
from benchwarden.core.reports import console
from benchwarden.core.sandbox import ISOLATION_MODES, check_isolation_mode
from benchwarden.core.store import Store, StoreError, is_url, open_store
from benchwarden.core.suite import SuiteUnavailable, enrich_for_html, write_report_html

F = TypeVar("F", bound=Callable[..., Any])


class ConfigError(click.ClickException):
    """A problem the user fixes by changing what they typed or configured (exit 2)."""

    exit_code = EXIT_USAGE

    def format_message(self) -> str:
        return " ".join(self.message.split())

    def show(self, file: Any = None) -> None:
        click.echo(f"benchwarden: error: {self.format_message()}", err=True)


def _remember_store_password(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> str | None:
    """A postgresql://user:password@host/db store URL is normal; its password must still
    never be printed (nor stored), so the scrubber learns it."""
    if value and "://" in value:
        try:
            password = urlsplit(value).password
        except ValueError:
            password = None
        if password:
            for form in {password, unquote(password)}:
                try:
                    secrets.remember(form, source="the password in --store")
                except ValueError:
                    pass  # too short to scrub safely: PostgreSQL refuses nothing for it
    return value


STORE_HELP = "SQLite file path or postgresql:// URL of the store (env BENCHWARDEN_STORE)."
STORE_METAVAR = "PATH|URL"


def store_option(function: F) -> F:
    return click.option(
        "--store",
        "store_location",
        default=default_store,
        show_default="~/.benchwarden/store.sqlite",
        callback=_remember_store_password,
        metavar=STORE_METAVAR,
        help=STORE_HELP,
    )(function)


def refuse_url_with_credentials(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> str | None:
    """Option callback: a URL carrying a user name, password or key is a usage error."""
    if value is not None:
        option = param.opts[0] if param.opts else "--url"
        problem = secrets.url_credential_problem(value, option)
        if problem:
            raise ConfigError(problem)
    return value


class StoreFailure(ConfigError):
    """A store error on its way out: one line like any other, with the error's own exit
    code (4 when the OS or the database refused, 2 when there is no store or no such run)."""

    def __init__(self, error: StoreError) -> None:
        super().__init__(str(error))
        self.exit_code = error.exit_code


def open_store_or_exit(
    location: str, *, create: bool, read_only: bool | None = None, own_default: bool = False
) -> Store:
    """Open the store for a command, or exit with one line.

    `create=False` for every command that only reads (runs, show, report, export, verify,
    compare): nothing is created, a missing store is "no store at PATH" (exit 2).
    `create=True` for commands that append: a new store file is made when its folder
    exists, and the folder itself only for a default location: the default store
    (~/.benchwarden), or a command's own default the user did not type (`own_default`,
    e.g. the store inside a ladder folder). `create=False, read_only=False` for resuming a
    run: the store must exist and is appended to."""
    refuse_unknown_url(location)
    try:
        return open_store(
            location,
            create=create,
            read_only=read_only,
            create_parents=create and (own_default or is_home_store(location)),
        )
    except StoreError as error:
        raise StoreFailure(error) from None
    except ImportError as error:
        raise ConfigError(f"this store needs an optional dependency: {error}") from None


# `scheme://...`: a store location that is a URL, not a file path
_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def refuse_unknown_url(location: str) -> None:
    """A URL of a kind no store backend opens (`mysql://`, `sqlite:///x`, `http://`) is a
    usage error naming the kinds that are, with any password masked: read as a file path
    it became "no store at mysql:/user:password@host" (the `//` folded, so the mask in
    front of the terminal no longer recognised a URL) or a file of that name."""
    if _URL_SCHEME.match(location) and not is_url(location):
        raise ConfigError(f"store {secrets.mask_url_passwords(location)} is a URL of a kind "
                          "benchwarden cannot open: give a SQLite file path or a "
                          "postgresql:// URL")


def config_errors(function: F) -> F:
    """Turn a StoreError raised while configuring into an exit-2 one-liner, unless it
    already carries its own exit code (a `BenchwardenError`: `cli.main` prints it)."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except StoreError as error:
            if isinstance(error, BenchwardenError):
                raise
            raise ConfigError(str(error)) from None

    return wrapper  # type: ignore[return-value]


HTML_HELP = "Also write a self-contained HTML report here (no network needed to view it)."
JSON_REPORT_HELP = "Also write the JSON report here."


def _file_named(context: click.Context, parameter: click.Parameter,
                value: str | None) -> str | None:
    """An output file given as empty text (`--json "$UNSET"`) is a usage error: it was
    read as "no file" and nothing was written, exit 0, with nothing said."""
    if value is not None and not value.strip():
        raise click.BadParameter("is empty; give a file name", context, parameter)
    return value


def html_option(function: F) -> F:
    return click.option(
        "--html",
        "html_path",
        type=click.Path(dir_okay=False),
        default=None,
        metavar="FILE",
        callback=_file_named,
        help=HTML_HELP,
    )(function)


def json_report_option(function: F) -> F:
    """`--json FILE`: the run's JSON report, written after the terminal summary."""
    return click.option(
        "--json",
        "json_path",
        type=click.Path(dir_okay=False),
        default=None,
        metavar="FILE",
        callback=_file_named,
        help=JSON_REPORT_HELP,
    )(function)


def model_option(function: F) -> F:
    return click.option(
        "--model",
        default=None,
        help="Model name [default: the first id the server lists at GET /v1/models].",
    )(function)


ANY_MODEL_HELP = ("Send --model even when the server does not list it at GET /v1/models "
                  "(by default an unlisted model is refused before anything is written).")


def any_model_option(function: F) -> F:
    """`--any-model`: skip the check that the server lists `--model`."""
    return click.option("--any-model", is_flag=True, help=ANY_MODEL_HELP)(function)


def api_key_env_option(function: F) -> F:
    """`--api-key-env VAR`: the key itself never appears on a command line or in a store."""
    return click.option(
        "--api-key-env",
        default=None,
        metavar="VAR",
        help="Name of the environment variable holding the API key (the key is never stored).",
    )(function)


# -- the options of a contamination run, shared by `contamination` and `demo` ----------
# Checked here, as the suite's configuration checks them and in its words, so `demo`
# refuses them before it builds or starts an engine.
CONCURRENCY_RANGE = (2, 512)  # a rung of one request has no company to be contaminated by
PROBES_RANGE = (2, 32)


def parse_levels(ctx: click.Context | None, param: click.Parameter | None,
                 value: str) -> tuple[int, ...]:
    """`--concurrency 2,4,8` -> (2, 4, 8); each a whole number in `CONCURRENCY_RANGE`."""
    try:
        levels = tuple(int(part) for part in value.split(",") if part.strip())
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers like 2,4,8, "
                                 f"got {value!r}") from None
    if not levels:
        raise click.BadParameter("expected comma-separated integers like 2,4,8")
    low, high = CONCURRENCY_RANGE
    for level in levels:
        if not low <= level <= high:
            raise click.BadParameter(f"--concurrency levels must be between {low} and {high}, "
                                     f"not {level} (a rung needs company)")
    return levels


class BoundedInt(click.types.IntParamType):
    """A whole number within [low, high], refused in the words of the suite's
    configuration (`--probes must be between 2 and 32, not 1`)."""

    def __init__(self, option: str, low: int, high: int) -> None:
        self.option, self.low, self.high = option, low, high

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        try:
            number = int(value)
        except (TypeError, ValueError):
            self.fail(f"{self.option} expects a whole number, not {value!r}", param, ctx)
        if not self.low <= number <= self.high:
            self.fail(f"{self.option} must be between {self.low} and {self.high}, not {number}",
                      param, ctx)
        return number


def concurrency_option(default: str = "2,4,8") -> Callable[[F], F]:
    return click.option("--concurrency", default=default, show_default=True,
                        callback=parse_levels, metavar="N,N,...",
                        help="Concurrency rungs, comma-separated, each 2..512.")


def probes_option(default: int = 4) -> Callable[[F], F]:
    return click.option("--probes", default=default, show_default=True,
                        type=BoundedInt("--probes", *PROBES_RANGE),
                        help="Probe prompts per leg (2..32).")


def max_tokens_option(default: int = 256) -> Callable[[F], F]:
    return click.option("--max-tokens", default=default, show_default=True,
                        type=click.IntRange(min=1),
                        help="Completion-token limit of every request.")


def min_completion_tokens_option(default: int = 16) -> Callable[[F], F]:
    return click.option("--min-completion-tokens", default=default, show_default=True,
                        type=click.IntRange(min=1),
                        help="Replies shorter than this are unmeasured (must be below "
                             "--max-tokens).")


def canary_seed_option(function: F) -> F:
    return click.option("--seed", default=None, type=int,
                        help="Seed for canaries and topics [default: drawn and recorded].")(
        function)


def write_html_report(store_location: str, report: Any, html_path: str) -> None:
    """Write the run's page: the same renderer `benchwarden report --html` uses."""
    with open_store_or_exit(store_location, create=False) as store:
        try:
            page_report = enrich_for_html(store, report)
        except SuiteUnavailable:
            raise
        except ValueError as error:
            raise ConfigError(str(error)) from None
    try:
        written = write_report_html(html_path, page_report)
    except SuiteUnavailable:
        raise
    except ValueError as error:
        raise ConfigError(str(error)) from None
    click.echo(f"HTML report written to {written}")


EXECUTOR_HELP = (
    "Fan the work out: local (in this process, the default), local:N (N processes) or ray."
)


def executor_option(function: F) -> F:
    return click.option(
        "--executor",
        "executor_spec",
        default="local",
        show_default=True,
        metavar="SPEC",
        help=EXECUTOR_HELP,
    )(function)


def release_executor(executor: Any, *, interrupted: bool) -> None:
    """Close an executor; after a signal, without waiting for the tasks it runs."""
    if executor is None:
        return
    if interrupted and hasattr(executor, "abandon"):
        executor.abandon()
    else:
        executor.close()


def executor_or_exit(spec: str | None, *, preload: Sequence[str] = ()) -> Any:
    """The executor a `--executor` spec names, or None for the in-process default
    (nothing or `local`); a bad spec is a one-line usage error. `preload`: modules a
    local pool imports before forking its workers."""
    if not spec or spec == "local":
        return None
    # imported here for cost, not for a cycle: executors pulls in multiprocessing
    # machinery that commands without --executor never need
    from benchwarden.core.executors import make_executor

    try:
        return make_executor(spec, preload=preload)
    except ValueError as error:
        raise ConfigError(str(error)) from None


ISOLATION_HELP = (
    "Boundary of the code under test: bwrap (default; bubblewrap must be "
    "installed) or none (NO boundary: it can read and write anything you can; "
    "unsafe)."
)


def isolation_option(function: F) -> F:
    """`--isolation bwrap|none`; None when not given, so a command can tell the default
    from an explicit choice (`require_isolation(isolation or "bwrap")`)."""
    return click.option(
        "--isolation",
        type=click.Choice(ISOLATION_MODES),
        default=None,
        help=ISOLATION_HELP,
    )(function)


def require_isolation(mode: str) -> str:
    """The isolation mode, checked to work here; a one-line exit-2 error otherwise."""
    try:
        return check_isolation_mode(mode)
    except IsolationUnavailable as error:
        raise ConfigError(str(error)) from None


def traceback_option(function: F) -> F:
    return click.option(
        "--traceback",
        "show_traceback",
        is_flag=True,
        help="When the code under test fails, also print its traceback (file, line, the case).",
    )(function)


def print_traceback(failure: dict[str, Any]) -> None:
    """A sandboxed failure's recorded traceback, on stderr."""
    text = str(failure.get("traceback") or "").rstrip()
    err = console(stderr=True)
    if failure.get("case"):
        err.print(f"failed on case {failure['case']} of seed {failure.get('seed')}", markup=False)
    err.print(
        text
        or f"(no traceback: the code under test was stopped from outside, {failure.get('reason')})",
        markup=False,
        highlight=False,
    )


__all__ = [
    "ConfigError",
    "StoreFailure",
    "any_model_option",
    "api_key_env_option",
    "canary_seed_option",
    "concurrency_option",
    "config_errors",
    "executor_option",
    "executor_or_exit",
    "html_option",
    "isolation_option",
    "json_report_option",
    "max_tokens_option",
    "min_completion_tokens_option",
    "model_option",
    "open_store_or_exit",
    "parse_levels",
    "print_traceback",
    "probes_option",
    "refuse_url_with_credentials",
    "release_executor",
    "require_isolation",
    "store_option",
    "traceback_option",
    "write_html_report",
]
