"""Checkers: normalised read answers anchored on word boundaries; state diffs by
natural keys with missing changes and collateral damage named."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchwarden.suites.arms.checkers import (
    Absent,
    Fact,
    ReadCheck,
    StateCheck,
    check_answer,
    diff_states,
    normalise,
)

SEEDED = {
    "labels": {"bug": {"color": "d73a4a", "description": ""}},
    "issues": {
        "1": {"title": "Crash", "state": "open", "labels": ["bug"],
              "comments": [["alice", "same"]]},
        "2": {"title": "Dark mode", "state": "open", "labels": [], "comments": []},
    },
}


def test_normalise_strips_emphasis_case_and_space():
    assert normalise("  **Five**   open\n_issues_ `#42`  ") == "five open issues #42"
    assert normalise("snake_case_name") == "snake_case_name"


@pytest.mark.parametrize("report, passes", [
    ("There are **5** open issues.", True),
    ("five", True),
    ("Open issues: 5.", True),
    ("There are 15 open issues.", False),
    ("There are 50 open issues.", False),
    ("5th", False),
    ("", False),
])
def test_phrasings_are_anchored_on_word_boundaries(report, passes):
    assert check_answer(report, [Fact("count", ("5", "five"))]).passed is passes


def test_hash_numbers_do_not_match_inside_longer_numbers():
    fact = Fact("pull request", ("#42",))
    assert check_answer("It is #42.", [fact]).passed
    assert not check_answer("It is #420.", [fact]).passed
    assert not check_answer("It is ##42", [fact]).passed


def test_regex_is_an_alternative_and_every_missing_fact_is_named():
    facts = [Fact("review", ("please add a test",), regex=r"add\W+(a\W+)?tests?"),
             Fact("author", ("alice",))]
    assert check_answer("Alice asked to add tests.", facts).passed
    result = check_answer("Someone asked to add tests.", facts)
    assert not result.passed
    assert len(result.reasons) == 1 and "'author'" in result.reasons[0]


def test_forbidden_statements_fail_a_read_answer():
    result = check_answer("Crash and Dark mode", [Fact("one", ("crash",))],
                          [Absent("a non-bug issue", ("dark mode",))])
    assert not result.passed and "non-bug" in result.reasons[0]


def test_a_read_task_that_changes_state_fails():
    check = ReadCheck((Fact("count", ("2",)),))
    changed = copy.deepcopy(SEEDED)
    changed["issues"]["2"]["state"] = "closed"
    assert check.check(report="2", seeded=SEEDED, final=SEEDED).passed
    result = check.check(report="2", seeded=SEEDED, final=changed)
    assert not result.passed
    assert any("collateral damage: issues 2 state" in r for r in result.reasons)


def close(number: str):
    def change(state):
        state["issues"][number]["state"] = "closed"
    return change


def test_state_check_passes_only_the_intended_change():
    done = copy.deepcopy(SEEDED)
    done["issues"]["2"]["state"] = "closed"
    assert StateCheck(close("2")).check(report="", seeded=SEEDED, final=done).passed


def test_missing_and_collateral_changes_are_listed_separately():
    wrong = copy.deepcopy(SEEDED)
    wrong["issues"]["1"]["state"] = "closed"
    result = StateCheck(close("2")).check(report="", seeded=SEEDED, final=wrong)
    assert not result.passed
    assert sorted(r.split(":")[0] for r in result.reasons) == ["collateral damage",
                                                                "missing change"]
    assert any("missing change: issues 2 state: expected 'closed', found 'open'" == r
               for r in result.reasons)


def test_list_fields_diff_as_multisets_item_by_item():
    def add_label(state):
        state["issues"]["2"]["labels"] = ["bug"]
    final = copy.deepcopy(SEEDED)
    final["issues"]["2"]["labels"] = ["enhancement"]
    differences = diff_states(
        {**SEEDED, "issues": {**SEEDED["issues"],
                              "2": {**SEEDED["issues"]["2"], "labels": ["bug"]}}},
        final, SEEDED)
    kinds = sorted((d.kind, str(d.expected), str(d.actual)) for d in differences)
    assert kinds == [("collateral damage", "absent", "['enhancement']"),
                     ("missing change", "['bug']", "absent")]
    # a duplicated comment is an extra change even though the text matches
    twice = copy.deepcopy(SEEDED)
    twice["issues"]["1"]["comments"] = [["alice", "same"], ["alice", "same"]]
    result = StateCheck(lambda s: None).check(report="", seeded=SEEDED, final=twice)
    assert not result.passed and "collateral damage: issues 1 comments" in result.reasons[0]
    assert StateCheck(add_label).check(report="", seeded=SEEDED, final=final).passed is False


def test_new_and_deleted_entities_are_differences():
    extra = copy.deepcopy(SEEDED)
    extra["issues"]["3"] = {"title": "Spam", "state": "open", "labels": [], "comments": []}
    del extra["labels"]["bug"]
    reasons = StateCheck(lambda s: None).check(report="", seeded=SEEDED, final=extra).reasons
    assert any(r.startswith("collateral damage: issues 3: expected nothing") for r in reasons)
    assert any(r.startswith("collateral damage: labels bug: expected {") for r in reasons)


_values = st.one_of(st.integers(), st.text(max_size=5), st.lists(st.text(max_size=3), max_size=3))
_entity = st.dictionaries(st.sampled_from(["a", "b", "c"]), _values, max_size=3)
_state = st.dictionaries(st.sampled_from(["issues", "labels"]),
                         st.dictionaries(st.sampled_from(["1", "2", "3"]), _entity, max_size=3),
                         max_size=2)


@given(_state, _state)
def test_diff_is_empty_exactly_when_states_are_equal(expected, actual):
    differences = diff_states(expected, actual, expected)
    normalised_equal = ({k: v for k, v in expected.items() if v} ==
                        {k: v for k, v in actual.items() if v})
    assert (not differences) == normalised_equal
    # every difference against an unchanged seed is collateral damage
    assert all(d.kind == "collateral damage" for d in differences)
