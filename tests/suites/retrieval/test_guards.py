"""Guard arithmetic, including degenerate inputs, and the composite's fixed meaning."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.suites.retrieval import guards


def test_efficiency_follows_the_formula():
    assert guards.efficiency([1000, 1000], 2000) == pytest.approx(0.75)
    assert guards.efficiency([0, 0], 2000) == 1.0
    assert guards.efficiency([2000], 2000) == 0.5
    assert guards.efficiency([500, 1500], 2000) == pytest.approx(0.75)


def test_efficiency_is_floored_at_one_half_when_over_budget():
    assert guards.efficiency([9000], 2000) == 0.5


def test_efficiency_degenerate_inputs():
    assert guards.efficiency([], 2000) == 1.0          # no packs use nothing
    assert guards.efficiency([0, 0], 0) == 1.0          # zero budget, nothing used
    assert guards.efficiency([5], 0) == 0.5             # zero budget, anything used is all


@settings(deadline=None)  # never a wall-time assertion
@given(st.lists(st.integers(min_value=0, max_value=10_000), max_size=50),
       st.integers(min_value=0, max_value=5000))
def test_efficiency_stays_between_floor_and_one(used, budget):
    value = guards.efficiency(used, budget)
    assert 0.5 <= value <= 1.0


@settings(deadline=None)  # never a wall-time assertion
@given(st.integers(min_value=1, max_value=5000), st.integers(min_value=0, max_value=5000),
       st.integers(min_value=0, max_value=5000))
def test_efficiency_never_rewards_using_more(budget, a, b):
    low, high = sorted((a, b))
    assert guards.efficiency([high], budget) <= guards.efficiency([low], budget)


def test_consistency_pools_pairs_and_reports_each_template():
    overall, per_template = guards.consistency(
        {"t1": [True, True, True, True], "t2": [True, False, True, False], "t3": []})
    assert overall == pytest.approx(6 / 8)
    assert per_template == {"t1": 1.0, "t2": 0.5, "t3": None}


def test_consistency_without_paraphrases_is_one():
    assert guards.consistency({}) == (1.0, {})


def test_canary_multiplier_and_leak_rate():
    clean = guards.canary(0, 56)
    assert (clean.multiplier, clean.tripped, clean.leak_rate) == (1.0, False, 0.0)
    one = guards.canary(1, 56)
    assert (one.multiplier, one.tripped) == (0.5, True)
    assert one.leak_rate == pytest.approx(1 / 56)
    assert guards.canary(28, 56).multiplier == 0.5  # binary: a rate, not a scale
    assert guards.canary(0, 0).leak_rate == 0.0
    with pytest.raises(ValueError):
        guards.canary(3, 2)


def test_composite_is_the_plain_mean_of_non_empty_category_means():
    means = {"a": 1.0, "b": 0.0, "c": 0.5, "d": None, "e": float("nan")}
    assert guards.composite(means) == pytest.approx(0.5)
    assert guards.composite({}) == 0.0


@settings(deadline=None)  # never a wall-time assertion
@given(st.dictionaries(st.text(min_size=1, max_size=5),
                       st.one_of(st.none(), st.floats(min_value=0, max_value=1)), max_size=14))
def test_composite_never_changes_meaning(means):
    present = [v for v in means.values() if v is not None]
    expected = sum(present) / len(present) if present else 0.0
    assert math.isclose(guards.composite(means), expected, abs_tol=1e-12)


def test_guarded_composite_is_the_product():
    block = guards.Guards(efficiency=0.8, consistency=0.9, canary=0.5)
    assert guards.composite_guarded(0.6, block) == pytest.approx(0.6 * 0.8 * 0.9 * 0.5)


def test_missing_guard_block_reads_as_neutral():
    neutral = guards.Guards.from_json_dict(None)
    assert (neutral.efficiency, neutral.consistency, neutral.canary) == (1.0, 1.0, 1.0)
    assert guards.composite_guarded(0.7, neutral) == 0.7
