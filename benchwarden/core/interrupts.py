"""Signals: SIGINT, SIGTERM and SIGHUP all stop a run the same way Ctrl-C does.

The program installs its own handlers when it starts (`installed_handlers`), so it never
depends on the dispositions it inherited: a shell that starts a job in the background
hands it SIGINT *ignored*, and Python keeps that. Each signal becomes a
`KeyboardInterrupt` raised where the program is (or, inside `asyncio.run`, a cancelled
main task, so open connections are closed on the way out); the suite that was running
records its run end as "interrupted" and the CLI exits 130 with one line naming the signal.

Invariants:
- SIGTERM and SIGHUP go through whatever SIGINT handler is current, so asyncio's
  graceful Ctrl-C path serves all three.
- `signals_deferred()` holds the three signals back while a run end is written, so a
  second Ctrl-C cannot leave a run with neither records nor an end. Any of the three
  that lands while an interrupt is already being handled (before the signals can be
  held back) is noted, not raised again; so is one that lands while an exception
  raised in handling an interrupt is handled (click's `Abort`, `RunInterrupted`), and
  one that lands after the program has decided its exit code (`exit_code_decided`).
  That needs this module's own SIGINT handler to be the one in place whenever asyncio
  is not running: asyncio only takes over a SIGINT handler that is Python's own, and
  puts Python's own back when it is done, so every `asyncio.Runner` of the main thread
  runs inside `asyncio_handles_sigint()`.
- The handlers a caller had are restored when `installed_handlers` exits (tests run the
  CLI in-process many times); the process itself ignores the signals on its way out
  instead, so a late signal cannot turn a decided exit code into a death by signal.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["HANDLED_SIGNALS", "asyncio_handles_sigint", "exit_code_decided",
           "installed_handlers", "last_signal_name", "signals_deferred"]

HANDLED_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                        if hasattr(signal, name))

_last_signal: list[str] = []
_decided: list[bool] = []  # non-empty once `exit_code_decided` was called
# exceptions of a chain looked through for an interrupt (a chain is short; a cycle,
# which Python does not make but a program could, ends the walk)
_CHAIN_LOOKED_AT = 32


def last_signal_name() -> str:
    """The name of the last signal that interrupted this process ("SIGINT" if unknown)."""
    return _last_signal[-1] if _last_signal else "SIGINT"


def _note(signum: int) -> None:
    _last_signal.append(signal.Signals(signum).name)




def _stopping() -> bool:
    """An interrupt is already being handled in the main thread, or the program has
    decided its exit code (`exit_code_decided`). The handler runs on top of the
    interrupted frames, and `sys.exc_info` finds the exception an `except` or `finally`
    of theirs is handling: the `KeyboardInterrupt` itself (a driver recording its run
    end), or one raised while handling it (click's `Abort`, a suite's `RunInterrupted`,
    an error of the clean-up), which holds it as its cause or context."""
    if _decided:
        return True
    waiting = [sys.exc_info()[1]]
    for _ in range(_CHAIN_LOOKED_AT):
        if not waiting:
            return False
        error = waiting.pop()
        if isinstance(error, KeyboardInterrupt):
            return True
        if error is not None:  # both links: `raise X from Y` inside an `except` has both
            waiting.extend((error.__context__, error.__cause__))
    return False


def exit_code_decided() -> None:
    """The program has decided how it ends (its command returned its exit code): until
    `installed_handlers` exits, a signal is noted and never raised, so one that lands
    while the program puts its output streams back or forgets its credentials cannot
    turn that code into a traceback or a death by signal."""
    if threading.current_thread() is threading.main_thread():
        _decided.append(True)


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    _note(signum)
    if _stopping():
        # as for SIGTERM below: the first interrupt has decided how the run ends
        return
    raise KeyboardInterrupt


def _on_other(signum: int, frame: FrameType | None) -> None:
    _note(signum)
    if _stopping():
        # the run is already stopping: a second interrupt raised now would land before
        # `signals_deferred` can hold it back and skip the run end being recorded
        return
    current = signal.getsignal(signal.SIGINT)
    if callable(current) and current not in (_on_sigint, signal.default_int_handler):
        # asyncio.run's own Ctrl-C handler: cancels the main task, then raises
        # KeyboardInterrupt once the task has unwound
        current(signal.SIGINT, frame)
        return
    raise KeyboardInterrupt


@contextmanager
def installed_handlers(*, restore: bool = True) -> Iterator[None]:
    """Handle SIGINT, SIGTERM and SIGHUP as interrupts for the duration (main thread only).

    Afterwards the previous handlers come back (`restore`), or, for a process that is
    about to exit with a code it has already decided, the signals are ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.getsignal(number) for number in HANDLED_SIGNALS}
    _last_signal.clear()
    _decided.clear()
    for number in HANDLED_SIGNALS:
        signal.signal(number, _on_sigint if number == signal.SIGINT else _on_other)
    try:
        yield
    finally:
        for number, handler in previous.items():
            if not restore:
                handler = signal.SIG_IGN
            try:
                signal.signal(number, handler if handler is not None else signal.SIG_DFL)
            except (TypeError, ValueError):
                pass
        _decided.clear()


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP back for the duration; they are delivered after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


@contextmanager
def asyncio_handles_sigint() -> Iterator[None]:
    """Around an `asyncio.run` (or `asyncio.Runner`) of the main thread: Python's own SIGINT
    handler for the duration, the one asyncio recognises and replaces with its graceful
    one (Ctrl-C cancels the main task, so open connections close on the way out), and
    this module's handler back afterwards, which asyncio would otherwise leave as
    Python's own: a second Ctrl-C would then be raised inside a driver's `except`,
    before the run end it is recording. Does nothing when this module's handlers are
    not installed (a worker process, a test)."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not _on_sigint):
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _on_sigint)
