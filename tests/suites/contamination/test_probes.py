"""Probes and canaries: drawn from the seed, never confusable with each other."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.suites.contamination.probes import (
    MAX_PROBES,
    SCENARIOS,
    canary_problem,
    make_probes,
)

CANARY_FORMAT = re.compile(r"^[A-Z]{2}-[A-Z]+-[A-Z]+-\d{2}$")


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**63), count=st.integers(2, MAX_PROBES),
       scenario=st.sampled_from(SCENARIOS))
def test_canary_guarantees_hold_for_any_seed(seed, count, scenario):
    probes = make_probes(seed, count, scenario)
    assert len(probes) == count
    for probe in probes:
        assert CANARY_FORMAT.match(probe.canary)
        assert probe.prompt.count(probe.canary) == 1
        assert probe.topic in probe.prompt
    for a in probes:
        for b in probes:
            if a is b:
                continue
            assert not set(a.canary.split("-")) & set(b.canary.split("-"))
            assert a.canary not in b.canary
            assert a.canary not in b.prompt
            assert a.topic != b.topic
    assert canary_problem(probes) is None


@settings(deadline=None)
@given(seed=st.integers(0, 2**32), count=st.integers(2, 8))
def test_probes_are_a_function_of_the_seed(seed, count):
    assert make_probes(seed, count) == make_probes(seed, count)


def test_different_seeds_draw_different_canaries():
    drawn = {tuple(p.canary for p in make_probes(seed, 4)) for seed in range(50)}
    assert len(drawn) == 50


def test_shared_prefix_prompts_are_identical_up_to_the_canary():
    probes = make_probes(7, 4, "shared-prefix")
    prefixes = {p.prompt.split(p.canary)[0] for p in probes}
    assert len(prefixes) == 1


def test_distinct_prefix_prompts_differ_from_the_first_word():
    probes = make_probes(7, 4, "distinct-prefix")
    assert len({p.prompt.split()[0] for p in probes}) == 4


def test_a_canary_problem_is_named():
    probes = list(make_probes(3, 2))
    clash = probes[1].__class__(1, probes[0].canary.split("-")[0] + "-ZZZ-YYY-00",
                                probes[1].topic, probes[1].prompt)
    assert "share" in canary_problem([probes[0], clash])


@pytest.mark.parametrize("count", [1, MAX_PROBES + 1])
def test_probe_count_out_of_range_is_refused(count):
    with pytest.raises(ValueError, match="--probes"):
        make_probes(1, count)


def test_unknown_scenario_is_refused():
    with pytest.raises(ValueError, match="unknown scenario"):
        make_probes(1, 2, "sideways")
