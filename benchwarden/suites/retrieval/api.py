"""The strategy API: what a retrieval strategy is given and what it hands back.

A strategy is any object with

    index(sessions: Sequence[Session]) -> None
    pack(question: str, limit: int, budget_chars: int) -> list[Item]

`index` is called once per corpus (one seed); `pack` once per question. The harness
never trusts a pack: it keeps at most `limit` items and cuts the text at
`budget_chars` (see `enforce_limits`).

This module is deliberately pure Python with no third-party imports: the sandbox child
imports it before it locks itself down, so a challenger's file can use `Item` too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

STATUSES = (None, "current", "superseded")


@dataclass(frozen=True)
class Session:
    """One conversation of the generated knowledge base."""

    index: int
    """Position of the session in the corpus (0-based); item sources name it."""
    title: str
    """Human-readable title, e.g. `session 3`."""
    text: str
    """The session's lines joined with newlines; source spans index into this string."""

    def lines(self) -> list[tuple[int, int, str]]:
        """Every line with its `(start, end)` character span in `text`."""
        spans: list[tuple[int, int, str]] = []
        start = 0
        for line in self.text.split("\n"):
            spans.append((start, start + len(line), line))
            start += len(line) + 1
        return spans


@dataclass(frozen=True)
class Item:
    """One entry of a context pack.

    `source` is `(session index, start, end)`: the characters of that session's text the
    item quotes. A receipt verifies when that span of the corpus equals `text` exactly.
    `status` lets a strategy that tracks updates mark an item `current` or `superseded`;
    `None` means the strategy does not say.
    """

    text: str
    source: tuple[int, int, int] | None = None
    status: str | None = None


@runtime_checkable
class Strategy(Protocol):
    def index(self, sessions: Sequence[Session]) -> None: ...

    def pack(self, question: str, limit: int, budget_chars: int) -> list[Item]: ...


class PackError(ValueError):
    """A pack the harness cannot read at all (not a list of items)."""


def coerce_item(value: Any) -> Item:
    """Accept an `Item`, a mapping with the same fields, or an object exposing them."""
    text: object  # checked below, whatever the caller handed over
    source: Any
    status: object
    if isinstance(value, Item):
        text, source, status = value.text, value.source, value.status
    elif isinstance(value, dict):
        text, source, status = value.get("text"), value.get("source"), value.get("status")
    elif isinstance(value, str):
        text, source, status = value, None, None
    else:
        text = getattr(value, "text", None)
        source = getattr(value, "source", None)
        status = getattr(value, "status", None)
    if not isinstance(text, str):
        raise PackError(f"pack item has no text string: {type(value).__name__}")
    if source is not None:
        try:
            session, start, end = (int(part) for part in source)
        except (TypeError, ValueError):
            raise PackError(f"pack item source {source!r} is not (session, start, end)") from None
        source = (session, start, end)
    if status not in STATUSES:
        raise PackError(f"pack item status {status!r} is not current, superseded or None")
    return Item(text=text, source=source, status=status)


def coerce_pack(values: Any) -> list[Item]:
    if values is None:
        return []
    if isinstance(values, (str, bytes, dict)) or not isinstance(values, Iterable):
        raise PackError(f"pack must be a list of items, got {type(values).__name__}")
    return [coerce_item(value) for value in values]


def enforce_limits(items: Sequence[Item], limit: int, budget_chars: int) -> tuple[list[Item], bool]:
    """Keep the first `limit` items and cut text at `budget_chars` in total.

    Returns the kept items and whether anything was cut. An item cut short keeps a
    source span only if its original span quoted it exactly (the span shrinks with it),
    so truncation never turns a true receipt into a false one.
    """
    kept: list[Item] = []
    remaining = max(0, budget_chars)
    cut = len(items) > max(0, limit)
    for item in list(items)[: max(0, limit)]:
        if remaining <= 0:
            if item.text:  # an empty item loses nothing when the budget is spent
                cut = True
                break
            continue
        if len(item.text) <= remaining:
            kept.append(item)
            remaining -= len(item.text)
            continue
        cut = True
        text = item.text[:remaining]
        source = item.source
        if source is not None and source[2] - source[1] == len(item.text):
            source = (source[0], source[1], source[1] + len(text))
        kept.append(Item(text=text, source=source, status=item.status))
        remaining = 0
    return [item for item in kept if item.text], cut
