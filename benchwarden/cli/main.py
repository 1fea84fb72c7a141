"""The `benchwarden` command: the generic commands plus whatever the suite registry
holds, and the ONE place where errors, signals and credentials meet the terminal.

The root group knows no suite: `GENERIC_COMMANDS` are the store-and-tooling commands,
and every other command comes from a suite registered under the entry-point group
`benchwarden.suites` (`core.suite`), the built-in ones exactly like a third-party one.

Invariants (every command, through `LazyGroup.main`):
- Exit codes are `core.errors.EXIT_CODES`: 0 ok/pass, 1 fail, 2 usage/configuration/
  unreachable, 3 held (ladder), 4 OS or store refused, 130 interrupted.
- An error is one line, `benchwarden: error: ...`; an unexpected exception is one line
  plus a hint to rerun with --traceback (or BENCHWARDEN_TRACEBACK=1), exit 1.
- A registered suite that cannot be imported is still listed in `--help`; invoking it
  prints one line naming the import error, exit 1. Nothing silently vanishes.
- SIGINT, SIGTERM and SIGHUP are handled by the program's own handlers (never the
  inherited dispositions) and end with one line and exit 130. One that lands once the
  command has decided its exit code, or while the interrupted line is printed, changes
  nothing: never a traceback, never a death by signal.
- Everything printed passes the process's credential scrubber (`core.secrets`).
"""

from __future__ import annotations

import gc
import importlib
import os
import sqlite3
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

import click

from benchwarden.core import secrets
from benchwarden.core.errors import (
    EXIT_CODES,
    EXIT_ENVIRONMENT,
    EXIT_FAIL,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    BenchwardenError,
    RunInterrupted,
)
from benchwarden.core.interrupts import (
    exit_code_decided,
    installed_handlers,
    last_signal_name,
)
from benchwarden.core.suite import (
    ENTRY_POINT_GROUP,
    Suite,
    SuiteUnavailable,
    get_suite,
    suite_entry_points,
)
from benchwarden.core.version import __version__

# Commands that belong to no suite: command name -> "module:attribute", imported on use.
GENERIC_COMMANDS: dict[str, str] = {
    "demo": "benchwarden.cli.demo:demo",
    "engine": "benchwarden.cli.engine:engine",
    "export": "benchwarden.cli.export:export",
    "report": "benchwarden.cli.report:report",
    "runs": "benchwarden.cli.store:runs",
    "show": "benchwarden.cli.store:show",
    "sign": "benchwarden.cli.sign:sign",
    "store": "benchwarden.cli.store:store_group",
    "verify": "benchwarden.cli.verify:verify",
}
TRACEBACK_ENV = "BENCHWARDEN_TRACEBACK"
# click >= 8.2 raises this (a UsageError whose message is the help) for a group invoked
# without a subcommand; older clicks print the help themselves
NO_ARGS_IS_HELP: tuple[type[click.ClickException], ...] = tuple(
    kind for kind in (getattr(click.exceptions, "NoArgsIsHelpError", None),) if kind is not None)
NO_SUITES_REGISTERED = (f"no suite is registered under the entry-point group "
                        f"{ENTRY_POINT_GROUP!r}: install benchwarden (`pip install -e .` in a "
                        "checkout) so its built-in suites are registered")


def _load(target: str) -> click.Command:
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute)  # type: ignore[no-any-return]


def unavailable_command(name: str, problem: str) -> click.Command:
    """A stand-in for a suite command that cannot be imported: listed in `--help` with
    the problem, and invoking it (with any arguments, `--help` included) raises
    `SuiteUnavailable`, which `run_command` prints as one line, exit 1."""

    def refuse(arguments: tuple[str, ...]) -> None:
        raise SuiteUnavailable(problem)

    return click.Command(
        name, callback=refuse, add_help_option=False,
        params=[click.Argument(["arguments"], nargs=-1, type=click.UNPROCESSED)],
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        help=f"(unavailable) {problem}", short_help=f"(unavailable) {problem}")


def registered_suites() -> Iterator[tuple[str, Suite | SuiteUnavailable]]:
    """Each registered suite's name with the suite, or why it cannot be imported. The
    registry is read once for the walk: reading it again for each suite read every
    installed distribution's metadata four times per command."""
    registered = suite_entry_points()
    for suite_name in registered:
        try:
            yield suite_name, get_suite(suite_name, registered=registered)
        except SuiteUnavailable as error:
            yield suite_name, error


def suite_command(name: str) -> click.Command | None:
    """The command `name` of the first registered suite that adds it; for a suite that
    cannot be imported (listed under its own name), a stand-in that says why."""
    for suite_name, suite in registered_suites():
        if isinstance(suite, SuiteUnavailable):
            if suite_name == name:
                return unavailable_command(name, str(suite))
            continue
        if name not in suite.command_names:
            continue
        try:
            return suite.command(name)
        except Exception as error:  # noqa: BLE001 - reported on use, never hidden
            return unavailable_command(name, f"suite {suite_name}: command {name} cannot be "
                                             f"imported: {type(error).__name__}: "
                                             f"{' '.join(str(error).split())}")
    return None


def _suite_command_names() -> list[str]:
    """The command names the suites add; an unimportable suite is listed under its name."""
    names: list[str] = []
    for suite_name, suite in registered_suites():
        if isinstance(suite, SuiteUnavailable):
            names.append(suite_name)
            continue
        names.extend(suite.command_names)
    return [name for name in dict.fromkeys(names) if name not in GENERIC_COMMANDS]


class ScrubbingStream:
    """A text stream that scrubs remembered credentials from everything written to it."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        written = len(text)
        if isinstance(text, str):
            text = secrets.mask_url_passwords(secrets.scrub(text))
        self._stream.write(text)
        return written  # what the caller handed over, whatever the scrubber cut

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        if name == "buffer":
            # no way round the scrubber: click writes to a text stream's binary buffer
            # when it finds one (a misconfigured locale, say)
            raise AttributeError(name)
        return getattr(self._stream, name)


@contextmanager
def _scrubbed_output() -> Iterator[None]:
    saved = sys.stdout, sys.stderr
    sys.stdout = ScrubbingStream(sys.stdout)  # type: ignore[assignment]
    sys.stderr = ScrubbingStream(sys.stderr)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def _say(message: str) -> None:
    click.echo(secrets.scrub(" ".join(str(message).split())), err=True)


def _wants_traceback(args: list[str]) -> bool:
    return "--traceback" in args or os.environ.get(TRACEBACK_ENV, "") not in ("", "0")


def click_error_line(error: click.ClickException, prog_name: str = "benchwarden") -> str:
    """A click error as the one line every benchwarden error is: click's own usage
    errors (unknown option, bad value, missing argument) name the command's --help
    instead of printing the usage block."""
    message = error.format_message()
    context = getattr(error, "ctx", None)
    if isinstance(error, click.UsageError):
        where = context.command_path if context is not None else prog_name
        message = f"{message.rstrip('.')} (see `{where} --help`)"
    return message


def click_exit_code(error: click.ClickException) -> int:
    """The table's code for a click error: a usage error is 2, our own errors carry
    theirs (a store refusal 4); a code outside the table is an error (1)."""
    if isinstance(error, click.UsageError):
        return EXIT_USAGE
    code = int(error.exit_code)
    return code if code in EXIT_CODES else EXIT_FAIL


def run_command(group: click.Group, args: list[str], prog_name: str) -> int:
    """Invoke `group` with `args`; return the exit code of the documented table."""
    try:
        result = group.main(args=args, prog_name=prog_name, standalone_mode=False)
    except click.exceptions.Exit as done:
        return int(done.exit_code)
    except NO_ARGS_IS_HELP as shown:  # a group without its subcommand: its help, exit 2
        click.echo(shown.format_message(), err=True)
        return EXIT_USAGE
    except click.ClickException as error:  # click's usage errors and our ConfigError
        _say(f"benchwarden: error: {click_error_line(error, prog_name)}")
        return click_exit_code(error)
    except RunInterrupted as error:  # a run recorded its end and says how to resume it
        _say(f"benchwarden: interrupted by {last_signal_name()}: {error}")
        return EXIT_INTERRUPTED
    except (click.Abort, KeyboardInterrupt):
        _say(f"benchwarden: interrupted by {last_signal_name()}; nothing was left half-written")
        return EXIT_INTERRUPTED
    except BenchwardenError as error:
        if _wants_traceback(args):
            traceback.print_exc()
        _say(f"benchwarden: error: {error}")
        return int(error.exit_code)
    except SystemExit as leaving:
        code = leaving.code
        if code is None or isinstance(code, int):
            return int(code or 0)
        _say(f"benchwarden: error: {code}")
        return EXIT_FAIL
    except BrokenPipeError:  # the reader went away (`benchwarden runs | head`): say nothing
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            if sys.__stdout__ is not None:
                os.dup2(devnull, sys.__stdout__.fileno())
        except (OSError, AttributeError, ValueError):
            pass
        return EXIT_FAIL
    except (OSError, sqlite3.Error) as error:
        if _wants_traceback(args):
            traceback.print_exc()
        _say(f"benchwarden: error: {type(error).__name__}: {error}")
        return EXIT_ENVIRONMENT
    except Exception as error:  # noqa: BLE001 - the one place unexpected errors surface
        if _wants_traceback(args):
            traceback.print_exc()
        _say(f"benchwarden: error: unexpected {type(error).__name__}: {error} (rerun with "
             f"--traceback or {TRACEBACK_ENV}=1 for the details)")
        return EXIT_FAIL
    return int(result) if isinstance(result, int) else 0


def suite_command_summary(name: str) -> str | None:
    """The `--help` line of suite command `name`, without importing the command when the
    suite offers `command_summary` (so `--help` imports no suite's driver or scoring)."""
    for suite_name, suite in registered_suites():
        if isinstance(suite, SuiteUnavailable):
            if suite_name == name:
                return f"(unavailable) {suite}"
            continue
        if name in suite.command_names:
            summary = getattr(suite, "command_summary", None)
            if summary is not None:
                return str(summary(name))
            command = suite_command(name)
            return command.get_short_help_str(10_000) if command is not None else None
    return None


class LazyGroup(click.Group):
    """The root group: generic commands plus the registry's, each imported on use."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Like click's, but a suite's line comes from its summary, not its command."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            if name in GENERIC_COMMANDS:
                command = self.get_command(ctx, name)
                if command is None or command.hidden:
                    continue
                rows.append((name, command.get_short_help_str(limit)))
            else:
                summary = suite_command_summary(name) or ""
                rows.append((name, click.utils.make_default_short_help(summary, limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*GENERIC_COMMANDS, *_suite_command_names()})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in GENERIC_COMMANDS:
            return _load(GENERIC_COMMANDS[name])
        command = suite_command(name)
        if command is None and not suite_entry_points():
            # a source tree used without installing it has no entry points at all: say
            # so, rather than "no such command" for every suite
            return unavailable_command(name, NO_SUITES_REGISTERED)
        return command

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        if not standalone_mode:  # a caller (run_command) handles the errors itself
            return super().main(args=args, prog_name=prog_name, complete_var=complete_var,
                                standalone_mode=False, **extra)
        argv = list(sys.argv[1:] if args is None else args)
        # The process itself (args None, not an in-process caller such as a test): once
        # everything is recorded and said, a late signal must not turn the exit code into
        # a death by signal, so the way out ignores them instead of restoring defaults.
        code: int | None = None
        try:
            with installed_handlers(restore=args is not None), _scrubbed_output():
                try:
                    code = run_command(self, argv, prog_name or "benchwarden")
                finally:
                    exit_code_decided()  # from here on a signal is noted, never raised
                    secrets.forget_all()  # credentials belong to one invocation
        except KeyboardInterrupt:
            # one of the few instructions where a signal can still raise: before the
            # command began, or after it returned and before `exit_code_decided`
            secrets.forget_all()
            if code is None:
                _say(f"benchwarden: interrupted by {last_signal_name()}; nothing was left "
                     "half-written")
                code = EXIT_INTERRUPTED
        if args is None:
            # Everything is recorded, closed and said; what is left is the interpreter's
            # last collection pass over every object (about 0.1 s once numpy and scipy
            # are loaded). Frozen objects are skipped; the process frees them by ending.
            gc.freeze()
        sys.exit(code)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="benchwarden")
@click.option("--traceback", "show_traceback", is_flag=True,
              help=f"On an error, also print the Python traceback (or set {TRACEBACK_ENV}=1).")
def cli(show_traceback: bool) -> None:
    """Benchmarks of LLM systems whose numbers can be trusted.

    Exit codes: 0 pass/ok, 1 fail, 2 usage/configuration error or unreachable server,
    3 held (ladder), 4 the OS or the store refused, 130 interrupted (resumable).
    """


def main(argv: list[str] | None = None) -> Any:
    return cli.main(args=argv, prog_name="benchwarden")


if __name__ == "__main__":
    main()
