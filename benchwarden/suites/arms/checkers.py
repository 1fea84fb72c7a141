"""Checkers: was the task done? Pure functions of the report and the captured states.

Read tasks are graded on the agent's final report: the text is normalised
(lower-case, markdown emphasis and code marks stripped, whitespace collapsed) and each
required fact must match one of its accepted phrasings, anchored on word boundaries
(so `#42` never matches inside `#420`), or its optional regex. No LLM judge.

Mutation tasks are graded by diffing states keyed by natural keys (the environment
leaves ids and timestamps out of its captured state). The expected state is the seeded
state plus the intended change; every difference is named: a *missing change* where
the task wanted something that did not happen, *collateral damage* where something the
task did not ask for changed. Either fails the trial.

Invariant: a failed check always carries at least one reason.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from benchwarden.suites.arms.tasks import CheckResult, State

_EMPHASIS = re.compile(r"(\*\*|__|\*|~~|`)")
_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Lower-case, markdown emphasis and backticks removed, whitespace collapsed."""
    text = _EMPHASIS.sub("", text.lower())
    text = re.sub(r"(?<!\w)_(?=\w)|(?<=\w)_(?!\w)", "", text)  # _emphasis_ but not snake_case
    return _SPACE.sub(" ", text).strip()


def phrase_pattern(phrase: str) -> re.Pattern[str]:
    """A normalised phrase anchored so it cannot match inside a longer word or number."""
    return re.compile(r"(?<![\w#])" + re.escape(normalise(phrase)) + r"(?!\w)")


@dataclass(frozen=True)
class Fact:
    """One thing a read answer must state."""

    name: str
    phrasings: tuple[str, ...] = ()
    regex: str | None = None
    """Matched against the normalised report (case-insensitive)."""

    def __post_init__(self) -> None:
        if not self.phrasings and not self.regex:
            raise ValueError(f"fact {self.name!r} needs at least one phrasing or a regex")

    def found_in(self, normalised_report: str) -> bool:
        if any(phrase_pattern(p).search(normalised_report) for p in self.phrasings):
            return True
        return bool(self.regex and re.search(self.regex, normalised_report, re.IGNORECASE))


@dataclass(frozen=True)
class Absent:
    """A phrase the answer must not contain (e.g. a wrong item listed as well)."""

    name: str
    phrasings: tuple[str, ...]

    def found_in(self, normalised_report: str) -> bool:
        return any(phrase_pattern(p).search(normalised_report) for p in self.phrasings)


def check_answer(report: str, facts: Sequence[Fact],
                 forbidden: Sequence[Absent] = ()) -> CheckResult:
    text = normalise(report or "")
    if not text:
        return CheckResult(False, ("the final report is empty",))
    reasons = [f"missing fact {fact.name!r} (accepted: "
               f"{', '.join(repr(p) for p in fact.phrasings) or fact.regex})"
               for fact in facts if not fact.found_in(text)]
    reasons += [f"states {absent.name!r}, which is wrong" for absent in forbidden
                if absent.found_in(text)]
    return CheckResult(not reasons, tuple(reasons))


@dataclass(frozen=True)
class ReadCheck:
    """Checker for read tasks: every fact present, no forbidden statement."""

    facts: tuple[Fact, ...]
    forbidden: tuple[Absent, ...] = ()

    def check(self, *, report: str, seeded: State, final: State) -> CheckResult:
        answer = check_answer(report, self.facts, self.forbidden)
        # A read task must not change anything either.
        damage = diff_states(seeded, final, seeded)
        return CheckResult(answer.passed and not damage,
                           answer.reasons + tuple(d.describe() for d in damage))


# -- state diff ---------------------------------------------------------------

@dataclass(frozen=True)
class Difference:
    kind: str  # "missing change" | "collateral damage"
    entity: str
    key: str
    field: str | None
    expected: Any
    actual: Any

    def describe(self) -> str:
        where = f"{self.entity} {self.key}" + (f" {self.field}" if self.field else "")
        return f"{self.kind}: {where}: expected {_show(self.expected)}, found {_show(self.actual)}"


def _show(value: Any) -> str:
    if value is _ABSENT:
        return "nothing"
    text = repr(value)
    return text if len(text) <= 120 else text[:119] + "…"


class _AbsentType:
    def __repr__(self) -> str:
        return "nothing"


_ABSENT: Any = _AbsentType()


def _multiset_delta(expected: Any, actual: Any) -> tuple[list[Any], list[Any]] | None:
    """For two lists: (wanted but absent, present but unwanted), as multisets."""
    if not (isinstance(expected, list) and isinstance(actual, list)):
        return None
    def freeze(item: Any) -> Any:
        return repr(item)
    want = Counter(freeze(i) for i in expected)
    have = Counter(freeze(i) for i in actual)
    lookup = {freeze(i): i for i in [*expected, *actual]}
    missing = [lookup[k] for k, n in (want - have).items() for _ in range(n)]
    extra = [lookup[k] for k, n in (have - want).items() for _ in range(n)]
    return missing, extra


def diff_states(expected: State, actual: State, seeded: State) -> list[Difference]:
    """Every place `actual` departs from `expected`, classified against `seeded`:
    where the task meant to change something (expected differs from seeded) the
    difference is a missing change, elsewhere it is collateral damage."""
    differences: list[Difference] = []
    for entity in sorted(set(expected) | set(actual)):
        want_all = expected.get(entity, {})
        have_all = actual.get(entity, {})
        seed_all = seeded.get(entity, {})
        for key in sorted(set(want_all) | set(have_all), key=str):
            want = want_all.get(key, _ABSENT)
            have = have_all.get(key, _ABSENT)
            before = seed_all.get(key, _ABSENT)
            if want is _ABSENT or have is _ABSENT:
                if want != have:
                    kind = "missing change" if want != before else "collateral damage"
                    differences.append(Difference(kind, entity, str(key), None, want, have))
                continue
            for name in sorted(set(want) | set(have)):
                w = want.get(name, _ABSENT)
                h = have.get(name, _ABSENT)
                if w == h:
                    continue
                b = before.get(name, _ABSENT) if before is not _ABSENT else _ABSENT
                delta = _multiset_delta(w, h)
                if delta is not None and isinstance(b, list):
                    missing, extra = delta
                    added, removed = (_multiset_delta(b, w) or ([], []))[::-1]
                    for items, intended, is_missing in ((missing, added, True),
                                                        (extra, removed, False)):
                        groups: dict[str, list[Any]] = {}
                        for item in items:
                            kind = "missing change" if item in intended else "collateral damage"
                            groups.setdefault(kind, []).append(item)
                        for kind, group in groups.items():
                            differences.append(Difference(
                                kind, entity, str(key), name,
                                group if is_missing else "absent",
                                "absent" if is_missing else group))
                    continue
                kind = "missing change" if w != b else "collateral damage"
                differences.append(Difference(kind, entity, str(key), name, w, h))
    return differences


Mutation = Callable[[dict[str, dict[str, dict[str, Any]]]], None]
"""Applies the intended change to a deep copy of the seeded state, in place."""


def expected_state(seeded: State, mutation: Mutation) -> dict[str, dict[str, dict[str, Any]]]:
    state = copy.deepcopy({e: {k: dict(v) for k, v in keys.items()} for e, keys in seeded.items()})
    mutation(state)
    return state


@dataclass(frozen=True)
class StateCheck:
    """Checker for mutation tasks: final state == seeded state + intended change.

    Tasks that ask for new text (a comment, a title) name that text exactly in their
    intent, so the expected state is fully known; the environment normalises
    free-text fields (trimmed) when it captures state.
    """

    mutation: Mutation

    def check(self, *, report: str, seeded: State, final: State) -> CheckResult:
        want = expected_state(seeded, self.mutation)
        reasons = tuple(d.describe() for d in diff_states(want, final, seeded))
        return CheckResult(not reasons, reasons)
