"""The event loop the clients run on: uvloop when it is installed, asyncio's own otherwise.

Why: with one network read per streamed token, a good part of the client's CPU per
token is the event loop's read path (the selector, the transport's `_read_ready`, the
`recv` call and the callback into the protocol), which asyncio runs in Python and
uvloop runs in C (bench/client_overhead.py, docs/decisions/0002-http-client.md).

Invariants:
- `run(coroutine)` behaves as `asyncio.run`: a new loop for each call, closed after it,
  the coroutine's result or exception passed through, and Ctrl-C (or any signal routed
  through the SIGINT handler, see core/interrupts.py) cancels the main task so that
  open connections are closed on the way out.
- A second interrupt (Ctrl-C again, or SIGTERM/SIGHUP while stopping) is never lost: it
  raises `KeyboardInterrupt` from a loop callback, not from inside the signal handler.
  Raised inside the handler, it lands wherever Python happens to run, and uvloop runs
  some Python in C callbacks (its getaddrinfo result) that can only print an exception
  ("Exception ignored in ...") and drop it: the user saw a traceback and the signal did
  nothing.
- uvloop is only ever a speed-up: anything the client does runs the same on asyncio's
  loop, which is used when uvloop is not installed or `BENCHWARDEN_EVENT_LOOP=asyncio`
  asks for it (to compare, or to rule the loop out when chasing a problem).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Callable, Coroutine
from types import FrameType
from typing import Any, TypeVar

from benchwarden.core.errors import ConfigurationError
from benchwarden.core.interrupts import asyncio_handles_sigint

__all__ = ["EVENT_LOOP_VARIABLE", "event_loop_name", "run"]

EVENT_LOOP_VARIABLE = "BENCHWARDEN_EVENT_LOOP"
"""`uvloop` (the default when installed) or `asyncio` (the standard library's loop)."""

_Result = TypeVar("_Result")
_CHOICES = ("uvloop", "asyncio")


def event_loop_name() -> str:
    """Which loop `run` starts: "uvloop" or "asyncio"."""
    asked = os.environ.get(EVENT_LOOP_VARIABLE, "").strip().lower()
    if asked and asked not in _CHOICES:
        raise ConfigurationError(
            f"{EVENT_LOOP_VARIABLE}={asked!r} is not one of {', '.join(_CHOICES)}")
    if asked == "asyncio":
        return "asyncio"
    try:
        import uvloop  # noqa: F401  (only asks whether it is installed)
    except ImportError:
        if asked == "uvloop":
            raise ConfigurationError(
                f"{EVENT_LOOP_VARIABLE}=uvloop but uvloop is not installed "
                "(pip install uvloop, or unset the variable)") from None
        return "asyncio"
    return "uvloop"


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    if event_loop_name() == "asyncio":
        return None  # asyncio.Runner's default: the standard library's loop
    import uvloop

    return uvloop.new_event_loop


def run(coroutine: Coroutine[Any, Any, _Result]) -> _Result:
    """`asyncio.run(coroutine)` on the loop `event_loop_name()` names."""
    try:
        factory = _loop_factory()
    except ConfigurationError:
        coroutine.close()  # never awaited: say so quietly, not with a RuntimeWarning
        raise
    with asyncio_handles_sigint():
        interrupt = _LaterInterrupts()
        try:
            with asyncio.Runner(loop_factory=factory) as runner:
                result = runner.run(interrupt.guarding(coroutine))
        finally:
            # only once the runner has closed its loop: an interrupt while it closes
            # (cancelling what is left, shutting down the executor) is held, not raised
            # inside the loop's own shutdown
            interrupt.uninstall()
        interrupt.raise_held()
        return result


class _LaterInterrupts:
    """Wraps the SIGINT handler `asyncio.Runner` installs for its run: the first
    interrupt goes to it (it cancels the main task, so connections close and the run
    records its end); every later one is raised by a callback of the loop, where both
    loops pass `KeyboardInterrupt` out of `run_until_complete`, while the guarded
    coroutine still runs. Once it has returned (the run is over; the runner is
    cancelling what is left and closing the loop) a later interrupt is held instead:
    raised inside the loop's shutdown it left the loop marked running ("Cannot close a
    running event loop") or printed a traceback. `raise_held` raises it after the loop
    is closed, so it is not lost either."""

    def __init__(self) -> None:
        self._handler: Any = None
        self._interrupts = 0
        self._finished = False  # the guarded coroutine returned or raised
        self._held = False  # an interrupt arrived after that

    async def guarding(self, coroutine: Coroutine[Any, Any, _Result]) -> _Result:
        runner_handler = signal.getsignal(signal.SIGINT)
        if (threading.current_thread() is threading.main_thread() and callable(runner_handler)
                and runner_handler is not signal.default_int_handler):
            loop = asyncio.get_running_loop()

            def handler(signum: int, frame: FrameType | None) -> None:
                self._interrupts += 1
                if self._finished:
                    self._held = True
                elif self._interrupts == 1:
                    runner_handler(signum, frame)
                else:
                    loop.call_soon_threadsafe(self._raise_while_guarded)

            self._handler = handler
            signal.signal(signal.SIGINT, handler)
        try:
            return await coroutine
        finally:
            self._finished = True

    def _raise_while_guarded(self) -> None:
        """A loop callback: the later interrupt, raised if the coroutine still runs."""
        if self._finished:
            self._held = True
            return
        raise KeyboardInterrupt

    def raise_held(self) -> None:
        """After the loop is closed: an interrupt held while it closed, raised now."""
        if self._held:
            raise KeyboardInterrupt

    def uninstall(self) -> None:
        """Put Python's own handler back, as the runner does for its own handler (it
        leaves ours alone, not knowing it)."""
        if self._handler is not None and signal.getsignal(signal.SIGINT) is self._handler:
            signal.signal(signal.SIGINT, signal.default_int_handler)
