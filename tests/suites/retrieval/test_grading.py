"""Grading per category: for each, a pack that passes and one that fails, built from
the seed's own corpus so the spans are real."""

from __future__ import annotations

import pytest

from benchwarden.suites.retrieval.api import Item
from benchwarden.suites.retrieval.corpus import CATEGORIES, generate
from benchwarden.suites.retrieval.grading import contains_value, grade_pack, receipt_verified

CORPUS = generate(3)
CASES = {case.category: case for case in CORPUS.cases}


def quote(value: str) -> Item:
    """The exact corpus line holding `value`, with its true span."""
    for session in CORPUS.sessions:
        for start, end, line in session.lines():
            if contains_value(line, value):
                return Item(text=line, source=(session.index, start, end))
    raise AssertionError(f"{value} is not in the corpus")


def unsourced(text: str) -> Item:
    return Item(text=text)


def grade(category: str, items: list[Item]) -> float:
    return grade_pack(CASES[category], items, CORPUS.session_text).score


def _values(case):
    return [*case.required, *([case.expected] if case.expected else [])]


PASSING = {
    "single_session": lambda c: [quote(c.expected)],
    "multi_session": lambda c: [quote(v) for v in c.required],
    "knowledge_update": lambda c: [quote(c.expected)],
    "point_in_time": lambda c: [quote(c.expected)],
    "decoy_discrimination": lambda c: [quote(c.expected)],
    "injection_resistance": lambda c: [quote(c.expected), quote(c.payload)],
    "abstention": lambda c: [],
    "citation_correctness": lambda c: [quote(c.expected)],
    "receipt_coverage": lambda c: [quote(c.expected)],
    "supersede_hygiene": lambda c: [
        Item(quote(c.stale[0]).text, quote(c.stale[0]).source, "superseded"),
        Item(quote(c.expected).text, quote(c.expected).source, "current")],
    "consolidation": lambda c: [quote(v) for v in c.required],
    "multi_hop": lambda c: [quote(c.expected)],
    "temporal_depth": lambda c: [quote(c.expected)],
    "aggregation": lambda c: [quote(v) for v in c.required],
}

FAILING = {
    "single_session": lambda c: [unsourced("nothing useful here")],
    "multi_session": lambda c: [quote(c.required[0])],
    "knowledge_update": lambda c: [quote(c.expected), quote(c.forbidden[0])],
    "point_in_time": lambda c: [unsourced("no value")],
    "decoy_discrimination": lambda c: [quote(c.expected), quote(c.forbidden[0])],
    "injection_resistance": lambda c: [quote(c.payload)],
    "abstention": lambda c: [quote(c.forbidden[0])],
    "citation_correctness": lambda c: [unsourced(quote(c.expected).text)],
    "receipt_coverage": lambda c: [quote(c.expected), unsourced("made up line")],
    "supersede_hygiene": lambda c: [quote(c.stale[0]), quote(c.expected)],
    "consolidation": lambda c: [quote(v) for v in c.required[:2]],
    "multi_hop": lambda c: [unsourced("a project somewhere")],
    "temporal_depth": lambda c: [unsourced("no versions")],
    "aggregation": lambda c: [*(quote(v) for v in c.required), quote(c.forbidden[0])],
}


def test_every_category_has_a_passing_and_a_failing_pack():
    assert set(PASSING) == set(FAILING) == set(CATEGORIES)


@pytest.mark.parametrize("category", CATEGORIES)
def test_passing_pack_scores_one(category):
    case = CASES[category]
    result = grade_pack(case, PASSING[category](case), CORPUS.session_text)
    assert result.score == 1.0 and result.reason is None


@pytest.mark.parametrize("category", CATEGORIES)
def test_failing_pack_scores_below_one_with_a_reason(category):
    case = CASES[category]
    result = grade_pack(case, FAILING[category](case), CORPUS.session_text)
    assert result.score < 1.0
    assert result.reason


def test_receipt_coverage_is_the_verified_fraction_once_the_answer_is_there():
    case = CASES["receipt_coverage"]
    half = [quote(case.expected), unsourced("invented")]
    assert grade_pack(case, half, CORPUS.session_text).score == 0.5
    # version 3: a pack without the answer covers nothing, an empty one included
    empty = grade_pack(case, [], CORPUS.session_text)
    assert empty.score == 0.0 and "not in pack" in (empty.reason or "")
    assert grade_pack(case, [unsourced("invented")], CORPUS.session_text).score == 0.0


def test_a_receipt_pointing_at_the_wrong_span_does_not_verify():
    item = quote(CASES["single_session"].expected)
    session, start, end = item.source
    assert receipt_verified(item, CORPUS.session_text)
    assert not receipt_verified(Item(item.text, (session, start + 1, end)), CORPUS.session_text)
    assert not receipt_verified(Item(item.text, (99, start, end)), CORPUS.session_text)
    assert not receipt_verified(Item(item.text, (session, end, start)), CORPUS.session_text)


def test_citation_needs_the_receipt_on_the_item_that_quotes_the_value():
    case = CASES["citation_correctness"]
    other = quote(CASES["single_session"].expected)
    pack = [other, unsourced(quote(case.expected).text)]
    assert grade_pack(case, pack, CORPUS.session_text).score == 0.0


def test_injection_passes_with_the_real_value_even_beside_the_payload():
    case = CASES["injection_resistance"]
    assert grade("injection_resistance", [quote(case.payload), quote(case.expected)]) == 1.0


def test_forbidden_value_wins_over_the_expected_one():
    case = CASES["decoy_discrimination"]
    assert grade("decoy_discrimination", [quote(case.expected), quote(case.forbidden[0])]) == 0.0


def test_values_match_whole_tokens_only():
    assert contains_value("code KV-4172 here", "KV-4172")
    assert contains_value("code kv-4172.", "KV-4172")
    assert not contains_value("code KV-41720", "KV-4172")
    assert not contains_value("xkovate", "kovate")
