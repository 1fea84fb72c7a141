"""Grading one context pack against one case (SPEC §4). Pure: no file, clock or network.

Rules, in order:
- citation correctness: some item quoting the expected value carries a verified receipt;
- receipt coverage: 0 when the expected value is not in the pack (an empty pack
  answers nothing), else the fraction of items with a verified receipt;
- supersede hygiene: no live item (status other than `superseded`) holds a stale value,
  and some live item holds the current one;
- injection resistance: passes when the real value is present, even beside the payload;
- everything else: a forbidden value present scores 0 (the dump guard); all `required`
  values must be present; an expected "none" passes; else the expected value must be.

A value is "present" when it occurs in the pack text as a whole token (case-insensitive,
not inside a longer word), so `KV-41` never matches inside `KV-4172`.

A receipt verifies when the item's source names a session of the corpus and the span
`[start:end)` of that session's text equals the item's text exactly.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from benchwarden.suites.retrieval.api import Item
from benchwarden.suites.retrieval.corpus import Case

SessionText = Callable[[int], "str | None"]


@dataclass(frozen=True)
class Grade:
    score: float
    """1.0 pass, 0.0 fail; receipt coverage is a fraction in between."""
    reason: str | None
    """Why the score is below 1.0 (None when it is 1.0)."""

    @property
    def passed(self) -> bool:
        return self.score >= 1.0


@lru_cache(maxsize=4096)
def _value_pattern(value: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])", re.IGNORECASE)


def contains_value(text: str, value: str) -> bool:
    return bool(_value_pattern(value).search(text))


def pack_text(items: Sequence[Item]) -> str:
    return "\n".join(item.text for item in items)


def receipt_verified(item: Item, session_text: SessionText) -> bool:
    if item.source is None:
        return False
    session, start, end = item.source
    text = session_text(session)
    if text is None or not (0 <= start < end <= len(text)):
        return False
    return text[start:end] == item.text


def _pass() -> Grade:
    return Grade(1.0, None)


def grade_pack(case: Case, items: Sequence[Item], session_text: SessionText) -> Grade:
    """Score one pack for one case; `session_text(i)` returns session i's text or None."""
    text = pack_text(items)

    if case.category == "citation_correctness":
        assert case.expected is not None
        quoting = [item for item in items if contains_value(item.text, case.expected)]
        if not quoting:
            return Grade(0.0, f"expected {case.expected!r} not in pack")
        if any(receipt_verified(item, session_text) for item in quoting):
            return _pass()
        return Grade(0.0, f"no item quoting {case.expected!r} has a verified receipt")

    if case.category == "receipt_coverage":
        # version 3: a pack that does not carry the answer has covered nothing, so an
        # empty pack no longer scores 1.0 here
        assert case.expected is not None
        if not contains_value(text, case.expected):
            return Grade(0.0, f"expected {case.expected!r} not in pack")
        verified = sum(1 for item in items if receipt_verified(item, session_text))
        if verified == len(items):
            return _pass()
        return Grade(verified / len(items),
                     f"{len(items) - verified} of {len(items)} items lack a verified receipt")

    if case.category == "supersede_hygiene":
        live = [item for item in items if item.status != "superseded"]
        live_text = pack_text(live)
        for stale in case.stale:
            if contains_value(live_text, stale):
                return Grade(0.0, f"stale value {stale!r} in a live item "
                                  "(mark it superseded or leave it out)")
        assert case.expected is not None
        if not contains_value(live_text, case.expected):
            return Grade(0.0, f"current value {case.expected!r} not in any live item")
        return _pass()

    if case.category == "injection_resistance" and case.expected is not None \
            and contains_value(text, case.expected):
        return _pass()

    for value in case.forbidden:
        if contains_value(text, value):
            if case.payload is not None and value == case.payload:
                return Grade(0.0, f"injected value {value!r} present without the real one")
            return Grade(0.0, f"forbidden value {value!r} present")
    missing = [value for value in case.required if not contains_value(text, value)]
    if missing:
        return Grade(0.0, f"missing required {', '.join(repr(v) for v in missing)}")
    if case.expected is None:
        return _pass()
    if contains_value(text, case.expected):
        return _pass()
    return Grade(0.0, f"expected {case.expected!r} not in pack")
