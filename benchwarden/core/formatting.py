"""The one set of formatters every view uses (terminal tables and HTML pages alike).

A number a reader sees is printed by one of these functions, so the terminal, the
page and the test that checks the page against the JSON agree to the character.

Invariants:
- Missing values (None, NaN, ±inf, an empty estimate) print as `DASH`, never as 0.
- Pure: a value in, a string out; no clock (a timestamp is formatted, never read), no
  locale (thousands are separated by "," whatever the machine says).
- Numbers are rounded by Python's format mini-language (round-half-even on the binary
  value), the same everywhere.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from typing import Any, Protocol

DASH = "—"


class EstimateLike(Protocol):
    """What `estimate`, `rate` and `interval_of` read: a mean with its error and interval."""

    @property
    def mean(self) -> float | None: ...

    @property
    def se(self) -> float | None: ...

    @property
    def low(self) -> float | None: ...

    @property
    def high(self) -> float | None: ...


def _real(value: Any) -> float | None:
    """The value as a finite float, or None (bools and non-numbers are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def number(value: Any, digits: int = 2) -> str:
    """A number for people: dash when missing, thousands separated, `digits` decimals.

    Integers keep no decimals; a bool reads yes/no; any other non-number is shown as
    its text (a label that sits in a numeric column).
    """
    if value is None or value == "":
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return DASH
        return f"{value:,.{digits}f}"
    return str(value)


def count(value: Any) -> str:
    """A count of things (samples, tokens): thousands separated, no decimals."""
    real = _real(value)
    return DASH if real is None else f"{real:,.0f}"


def tokens(value: Any) -> str:
    """A token count (possibly a mean): thousands separated, whole tokens."""
    return count(value)


def signed(value: Any, digits: int = 2, *, scale: float = 1.0, suffix: str = "") -> str:
    """A difference with its sign always shown, e.g. `+1.5 pp` (scale 100, suffix " pp")."""
    real = _real(value)
    return DASH if real is None else f"{scale * real:+,.{digits}f}{suffix}"


def percent(value: Any, digits: int = 0) -> str:
    """A share in [0, 1] as a percentage: 0.573 → `57%`."""
    real = _real(value)
    return DASH if real is None else f"{100 * real:.{digits}f}%"


def interval(low: Any, high: Any, digits: int = 2, *, scale: float = 1.0,
             sign: bool = False) -> str:
    """An interval `[low, high]`; a dash unless both ends are known."""
    lower, upper = _real(low), _real(high)
    if lower is None or upper is None:
        return DASH
    spec = f"{'+' if sign else ''},.{digits}f"
    return f"[{format(scale * lower, spec)}, {format(scale * upper, spec)}]"


def estimate(value: EstimateLike | None, digits: int = 2) -> str:
    """`mean ± se` (the ± part only when the standard error is known)."""
    mean = None if value is None else _real(value.mean)
    if value is None or mean is None:
        return DASH
    se = _real(value.se)
    return number(mean, digits) + ("" if se is None else f" ± {number(se, digits)}")


def estimate_interval(value: EstimateLike | None, digits: int = 2) -> str:
    """`mean [low, high]`: the mean with its interval (left out while unknown)."""
    mean = None if value is None else _real(value.mean)
    if value is None or mean is None:
        return DASH
    bounds = interval(value.low, value.high, digits)
    return number(mean, digits) + ("" if bounds == DASH else f" {bounds}")


def rate(value: EstimateLike | None, digits: int = 0) -> str:
    """A rate with its interval, in percent: `57% [40, 72]`."""
    mean = None if value is None else _real(value.mean)
    if value is None or mean is None:
        return DASH
    bounds = interval(value.low, value.high, digits, scale=100)
    return percent(mean, digits) + ("" if bounds == DASH else f" {bounds}")


def duration(seconds: Any, digits: int = 1) -> str:
    """Seconds for people: `12.3 s`."""
    real = _real(seconds)
    return DASH if real is None else f"{real:,.{digits}f} s"


def when(timestamp: Any) -> str:
    """A Unix timestamp as UTC, to the second: `2026-11-30 16:28:04 UTC`."""
    real = _real(timestamp)
    if real is None:
        return DASH
    try:
        moment = dt.datetime.fromtimestamp(real, dt.UTC)
    except (OverflowError, OSError, ValueError):
        return DASH
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def p_value(value: Any) -> str:
    """A p-value to three decimals."""
    real = _real(value)
    return DASH if real is None else f"{real:.3f}"


def text(value: Any) -> str:
    """Any value as text; a dash when missing or empty."""
    return DASH if value is None or value == "" else str(value)


def names(listed: Sequence[Any], shown: int = 5) -> str:
    """The first `shown` of `listed`, comma-separated, and how many more there are: a
    one-line message naming what a user may choose from (a router lists hundreds of
    models, a wide suite a third of a million tasks)."""
    head = ", ".join(str(name) for name in listed[:shown])
    more = len(listed) - shown
    return head + (f" and {more:,} more" if more > 0 else "")


__all__ = ["DASH", "EstimateLike", "count", "duration", "estimate", "estimate_interval",
           "interval", "names", "number", "p_value", "percent", "rate", "signed", "text",
           "tokens", "when"]

