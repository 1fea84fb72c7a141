"""The t quantile behind every report's interval: the generated table gives exactly the
numbers scipy computes (bit for bit), so reports look them up without importing scipy,
and anything outside the table still comes from scipy."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy.special
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.core import t_quantiles
from benchwarden.core.stats import mean_se, paired_difference, t_quantile


def scipy_quantile(degrees_of_freedom: int, confidence: float) -> float:
    return float(scipy.special.stdtrit(degrees_of_freedom, 0.5 + confidence / 2.0))


def test_every_table_entry_is_what_scipy_computes_bit_for_bit():
    for confidence, table in t_quantiles.QUANTILES.items():
        assert len(table) == t_quantiles.LARGEST_DEGREES_OF_FREEDOM
        for degrees_of_freedom, value in enumerate(table, start=1):
            assert value == scipy_quantile(degrees_of_freedom, confidence), degrees_of_freedom
            assert value == float(scipy.stats.t.ppf(0.5 + confidence / 2.0, degrees_of_freedom))


def test_every_packed_entry_is_what_scipy_computes_bit_for_bit():
    """The quantiles packed past the table, from 1,001 to `LARGEST_PACKED` degrees of
    freedom, each what scipy computes (asked for all at once)."""
    assert set(t_quantiles.PACKED) == set(t_quantiles.QUANTILES)
    for confidence in t_quantiles.PACKED:
        degrees = np.arange(t_quantiles.LARGEST_DEGREES_OF_FREEDOM + 1,
                            t_quantiles.LARGEST_PACKED + 1)
        wanted = scipy.special.stdtrit(degrees, 0.5 + confidence / 2.0)
        looked_up = np.array([t_quantile(int(df), confidence) for df in degrees])
        assert looked_up.tobytes() == wanted.tobytes()


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=1, max_value=2 * t_quantiles.LARGEST_PACKED),
       st.sampled_from([0.95, 0.95, 0.9, 0.99, 0.5, 0.999]))
def test_t_quantile_equals_scipy_inside_and_outside_the_table(degrees_of_freedom, confidence):
    assert t_quantile(degrees_of_freedom, confidence) == scipy_quantile(degrees_of_freedom,
                                                                        confidence)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), min_size=2,
                max_size=40))
def test_intervals_are_those_scipy_gives(values):
    estimate = mean_se(values)
    assert estimate.se is not None and estimate.mean is not None
    half = scipy_quantile(len(values) - 1, 0.95) * estimate.se
    if estimate.se == 0.0:
        assert estimate.low == estimate.high == estimate.mean
    else:
        assert estimate.low == estimate.mean - half and estimate.high == estimate.mean + half


def test_a_paired_difference_uses_the_same_quantile():
    a = {seed: float(seed) for seed in range(12)}
    b = {seed: seed + (seed % 3) * 0.25 for seed in range(12)}
    comparison = paired_difference(a, b)
    half = scipy_quantile(11, 0.95) * comparison.se
    assert comparison.low == comparison.mean_diff - half
    assert comparison.high == comparison.mean_diff + half


def test_fewer_than_one_degree_of_freedom_is_refused():
    with pytest.raises(ValueError, match="degree of freedom"):
        t_quantile(0)


def test_a_report_interval_imports_no_scipy():
    """Within the table, an interval is computed with scipy never imported (the probe
    sees scipy once the table does not cover the request, so it can fail)."""
    probe = ("import sys; from benchwarden.core.stats import mean_se; mean_se({values}); "
             "print(sorted(m for m in sys.modules if m == 'scipy' or m.startswith('scipy.')))")
    for inside in ("[1.0, 2.0, 4.0]", "[float(i % 7) for i in range(15_000)]"):
        imported = subprocess.run([sys.executable, "-c", probe.format(values=inside)],
                                  capture_output=True, text=True, check=True).stdout.strip()
        assert imported == "[]"
    outside = subprocess.run(
        [sys.executable, "-c",
         probe.format(values="[float(i % 7) for i in range(25_000)]")],
        capture_output=True, text=True, check=True).stdout.strip()
    assert "scipy.special" in outside
