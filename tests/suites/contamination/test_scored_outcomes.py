"""The scored outcomes a reading keeps in its rungs' lists (`_ScoredOutcomes`) behave as
the dict by `(leg, probe, repeat)` they replace: whatever the tasks (a probe past the
last, `"00"`, digits that are not ASCII) and whenever the rung is read (before or after
its scored requests)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.suites.contamination import report as report_module

PROBES = 3
LEGS = ("c2", "c4")
TASKS = ("0", "1", "2", "3", "00", "01", "²", "٣", "1234567890123", "x")

operations = st.lists(st.one_of(
    st.tuples(st.just("set"), st.sampled_from(LEGS), st.sampled_from(TASKS),
              st.integers(1, 3), st.integers(0, 1000)),
    st.tuples(st.just("rung"), st.sampled_from(LEGS), st.integers(1, 3),
              st.booleans())), max_size=40)


def _digested() -> report_module._DigestedRung:
    return report_module._DigestedRung(digest=None)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(operations)
def test_the_outcomes_kept_in_the_rungs_read_as_a_dict_of_them(steps):
    rungs: dict = {}
    kept = report_module._ScoredOutcomes(rungs, PROBES)
    expected: dict = {}
    for step in steps:
        if step[0] == "set":
            _, leg, task, repeat, value = step
            kept[(leg, task, repeat)] = value
            expected[(leg, task, repeat)] = value
        else:
            _, leg, repeat, digested = step
            if (leg, repeat) not in rungs:  # a rung is made once, as a reading makes it
                rungs[(leg, repeat)] = (_digested() if digested
                                        else report_module._RungRequests())
    for leg in LEGS:
        for repeat in range(1, 4):
            for task in TASKS:
                key = (leg, task, repeat)
                assert kept.get(key) == expected.get(key)
                if key in expected:
                    assert kept[key] == expected[key]
                else:
                    with pytest.raises(KeyError):
                        kept[key]
            assert list(kept.of_rung(leg, repeat)) == [
                expected.get((leg, str(probe), repeat)) for probe in range(PROBES)]
    assert len(kept) == len(expected)


def test_a_rung_gives_the_scoring_its_own_list_when_nothing_is_aside():
    """What keeps a soak of rungs of two small: `legs` hands each rung's list to the
    scoring, not a copy of it made a rung at a time."""
    rungs: dict = {("c2", 1): _digested()}
    kept = report_module._ScoredOutcomes(rungs, PROBES)
    kept[("c2", "1", 1)] = "judged"
    assert kept.of_rung("c2", 1) is rungs[("c2", 1)].outcomes
    kept[("c2", "00", 1)] = "aside"  # not a probe of the run as written: kept aside
    assert kept.of_rung("c2", 1) == [None, "judged", None]
    assert kept.of_rung("c2", 1) is not rungs[("c2", 1)].outcomes
