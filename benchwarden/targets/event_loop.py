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
- uvloop is only ever a speed-up: anything the client does runs the same on asyncio's
  loop, which is used when uvloop is not installed or `BENCHWARDEN_EVENT_LOOP=asyncio`
  asks for it (to compare, or to rule the loop out when chasing a problem).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from benchwarden.core.errors import ConfigurationError

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
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coroutine)
