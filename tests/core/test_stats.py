"""Statistics against known values, properties over wide inputs, and degenerate inputs."""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
import warnings
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from benchwarden.core import stats

scores = st.floats(min_value=-1000, max_value=1000, allow_nan=False, allow_infinity=False)
unit_scores = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


# ------------------------------------------------------------------ mean_se


def test_mean_se_known_values():
    estimate = stats.mean_se([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])
    assert estimate.mean == 5.0
    # sample stdev of this textbook set is sqrt(32/7)
    assert estimate.se == pytest.approx(math.sqrt(32 / 7) / math.sqrt(8))
    # t(0.975, 7) = 2.364624
    assert estimate.high - estimate.mean == pytest.approx(2.364624 * estimate.se, rel=1e-5)
    assert estimate.n == 8


def test_mean_se_degenerate():
    assert stats.mean_se([]) == stats.Estimate(None, None, None, None, 0, "t")
    one = stats.mean_se([3.5])
    assert (one.mean, one.se, one.low, one.high, one.n) == (3.5, None, None, None, 1)
    same = stats.mean_se([0.25] * 5)
    assert (same.mean, same.se, same.low, same.high) == (0.25, 0.0, 0.25, 0.25)


def test_mean_se_refuses_non_finite():
    with pytest.raises(ValueError, match="finite"):
        stats.mean_se([1.0, float("nan")])


@given(st.lists(scores, min_size=2, max_size=40))
@settings(deadline=None)  # never a wall-time assertion
def test_mean_se_interval_contains_mean(values):
    estimate = stats.mean_se(values)
    assert estimate.low <= estimate.mean <= estimate.high
    assert estimate.se >= 0


# ------------------------------------------------------------------ clustered


def test_clustered_known_value():
    # residual sums per cluster -2 and +2; CR1: sqrt(2/1 * 8) / 4 = 1
    estimate = stats.clustered_mean_se([1.0, 1.0, 3.0, 3.0], ["a", "a", "b", "b"])
    assert estimate.mean == 2.0
    assert estimate.se == pytest.approx(1.0)
    # one degree of freedom: t(0.975, 1) = 12.7062
    assert estimate.high == pytest.approx(2.0 + 12.706205, rel=1e-6)


def test_clustered_is_wider_than_plain_when_trials_of_a_task_agree():
    values = [0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    tasks = [index // 3 for index in range(len(values))]
    assert stats.clustered_mean_se(values, tasks).se > stats.mean_se(values).se


@given(st.lists(scores, min_size=2, max_size=40))
@settings(deadline=None)  # never a wall-time assertion
def test_clustered_equals_plain_with_one_sample_per_cluster(values):
    plain = stats.mean_se(values)
    clustered = stats.clustered_mean_se(values, list(range(len(values))))
    # float math (math.fsum / n) against statistics' exact mean: equal to 1e-12
    assert clustered.mean == pytest.approx(plain.mean, rel=1e-12, abs=1e-12)
    assert clustered.se == pytest.approx(plain.se, rel=1e-9, abs=1e-12)
    assert clustered.n == plain.n


def test_clustered_degenerate():
    assert stats.clustered_mean_se([], []).mean is None
    single_cluster = stats.clustered_mean_se([1.0, 2.0, 3.0], ["t", "t", "t"])
    assert single_cluster.mean == 2.0 and single_cluster.se is None and single_cluster.n == 3
    with pytest.raises(ValueError, match="cluster labels"):
        stats.clustered_mean_se([1.0, 2.0], ["a"])


# ------------------------------------------------------------------ wilson


@pytest.mark.parametrize("successes, trials, low, high", [
    (8, 10, 0.4902, 0.9433),     # the textbook example
    (0, 10, 0.0, 0.2775),
    (10, 10, 0.7225, 1.0),
    (1, 2, 0.0945, 0.9055),
    (81, 263, 0.2553, 0.3662),   # Wilson (1927)-style worked example, p = 0.308
])
def test_wilson_known_values(successes, trials, low, high):
    estimate = stats.wilson_interval(successes, trials)
    assert estimate.low == pytest.approx(low, abs=5e-5)
    assert estimate.high == pytest.approx(high, abs=5e-5)
    assert estimate.mean == successes / trials
    assert estimate.method == "wilson"


@settings(max_examples=800, deadline=None)
@given(st.integers(1, 10**9).flatmap(lambda trials: st.tuples(
           st.integers(0, trials) | st.sampled_from([0, trials, trials // 2, 1 % (trials + 1)]),
           st.just(trials))),
       st.sampled_from([0.95, 0.9, 0.99, 0.5]) | st.floats(1e-9, 1 - 1e-9))
def test_wilson_bounds_are_scipy_s_to_the_last_bit(counts, confidence):
    """Computed without scipy.stats, the interval is `binomtest`'s Wilson interval, bit
    for bit, at any counts and confidence."""
    successes, trials = counts
    successes = min(successes, trials)
    expected = scipy_stats.binomtest(successes, trials).proportion_ci(
        confidence_level=confidence, method="wilson")
    low, high = stats._wilson_bounds(successes, trials, confidence)
    assert (low.hex(), high.hex()) == (float(expected.low).hex(), float(expected.high).hex())


def test_wilson_matches_closed_form_at_other_confidence():
    successes, trials, confidence = 13, 40, 0.9
    z = 1.6448536269514722
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z / (1 + z * z / trials) * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials**2))
    estimate = stats.wilson_interval(successes, trials, confidence)
    assert estimate.low == pytest.approx(centre - half, rel=1e-9)
    assert estimate.high == pytest.approx(centre + half, rel=1e-9)


def test_wilson_no_trials_and_bad_counts():
    nothing = stats.wilson_interval(0, 0)
    assert (nothing.mean, nothing.se, nothing.low, nothing.high, nothing.n) == (None,) * 4 + (0,)
    for successes, trials in [(3, 2), (-1, 4), (0, -1)]:
        with pytest.raises(ValueError):
            stats.wilson_interval(successes, trials)


@given(st.integers(min_value=1, max_value=5000).flatmap(
    lambda trials: st.tuples(st.integers(min_value=0, max_value=trials), st.just(trials))))
@settings(deadline=None)  # never a wall-time assertion
def test_wilson_bounds_inside_unit_interval_and_contain_rate(counts):
    successes, trials = counts
    estimate = stats.wilson_interval(successes, trials)
    assert 0.0 <= estimate.low <= estimate.mean <= estimate.high <= 1.0


def test_wilson_narrows_with_more_trials():
    widths = [stats.wilson_interval(n // 2, n) for n in (10, 100, 1000)]
    assert widths[0].high - widths[0].low > widths[1].high - widths[1].low \
        > widths[2].high - widths[2].low


# ------------------------------------------------------------------ bootstrap


def test_bootstrap_is_deterministic_for_a_seed_and_varies_with_it():
    values = [1.0, 2.0, 2.5, 3.0, 40.0, 4.0, 5.0, 6.0, 2.0, 1.5]
    first = stats.bootstrap_mean_ci(values, seed=7)
    assert first == stats.bootstrap_mean_ci(values, seed=7)
    assert first != stats.bootstrap_mean_ci(values, seed=8)
    assert first.low <= first.mean <= first.high
    # a heavy right tail makes the interval asymmetric, the reason to bootstrap at all
    assert first.high - first.mean > first.mean - first.low


def test_bootstrap_agrees_with_t_on_well_behaved_data():
    values = list(np.random.default_rng(3).normal(10.0, 2.0, size=200))
    booted = stats.bootstrap_mean_ci(values, resamples=4000)
    plain = stats.mean_se(values)
    assert booted.low == pytest.approx(plain.low, abs=0.1)
    assert booted.high == pytest.approx(plain.high, abs=0.1)
    assert booted.se == pytest.approx(plain.se, rel=0.1)


def test_bootstrap_degenerate():
    assert stats.bootstrap_mean_ci([]).mean is None
    single = stats.bootstrap_mean_ci([4.0])
    assert single.mean == 4.0 and single.low is None
    same = stats.bootstrap_mean_ci([2.0] * 6)
    assert (same.mean, same.se, same.low, same.high) == (2.0, 0.0, 2.0, 2.0)


@given(st.lists(st.one_of(st.floats(-1e6, 1e6, allow_nan=False),
                          st.sampled_from([0.0, 1.0, 2.0])), min_size=2, max_size=120),
       st.integers(0, 2**32 - 1), st.sampled_from([0.8, 0.9, 0.95, 0.99]))
@settings(max_examples=60, deadline=None)
def test_the_closed_form_jackknife_gives_scipys_bca_interval(values, seed, confidence):
    """Above `CLOSED_FORM_JACKKNIFE_ABOVE` values the acceleration comes from the
    leave-one-out means in closed form, not from scipy's n x n recomputation: the same
    interval to rounding (and the same fallback where BCa cannot be computed), the same
    mean and standard error, for any data, seed and confidence."""
    threshold = stats.CLOSED_FORM_JACKKNIFE_ABOVE
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")  # scipy's note on a degenerate distribution
            stats.CLOSED_FORM_JACKKNIFE_ABOVE = 10**9
            scipys = stats.bootstrap_mean_ci(values, confidence, resamples=300, seed=seed)
            stats.CLOSED_FORM_JACKKNIFE_ABOVE = 1
            closed = stats.bootstrap_mean_ci(values, confidence, resamples=300, seed=seed)
    finally:
        stats.CLOSED_FORM_JACKKNIFE_ABOVE = threshold
    assert (closed.mean, closed.se, closed.n, closed.method) == \
        (scipys.mean, scipys.se, scipys.n, scipys.method)
    scale = max(1.0, abs(scipys.low or 0.0), abs(scipys.high or 0.0))
    assert closed.low == pytest.approx(scipys.low, rel=1e-9, abs=1e-9 * scale)
    assert closed.high == pytest.approx(scipys.high, rel=1e-9, abs=1e-9 * scale)


def test_a_wide_bootstrap_takes_the_closed_form_and_stays_a_bca_interval():
    size = 3 * stats.CLOSED_FORM_JACKKNIFE_ABOVE
    values = list(np.random.default_rng(5).lognormal(8.0, 1.0, size=size))
    estimate = stats.bootstrap_mean_ci(values)
    assert estimate.method == "bootstrap BCa"
    assert estimate.low < estimate.mean < estimate.high
    assert estimate.high - estimate.mean > estimate.mean - estimate.low  # the right tail


# ------------------------------------------------------------------ ABC, for very wide samples


def _skewed_costs(kind: str, n: int, seed: int) -> list[float]:
    """Draws shaped like real costs: lognormal with a heavy tail, mostly zeros with a
    lognormal rest, and Pareto with an infinite variance."""
    generator = np.random.default_rng(seed)
    if kind == "lognormal":
        return generator.lognormal(8.0, 2.0, n).tolist()  # type: ignore[no-any-return]
    if kind == "zeros":
        values = generator.lognormal(9.0, 1.5, n)
        values[generator.random(n) < 0.6] = 0.0
        return values.tolist()  # type: ignore[no-any-return]
    return ((generator.pareto(1.5, n) + 1.0) * 1000.0).tolist()  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", ["lognormal", "zeros", "pareto"])
def test_at_the_threshold_the_abc_interval_is_the_bootstraps_within_its_own_noise(kind):
    """Why `ANALYTIC_INTERVAL_ABOVE` may switch to the analytic interval: at that many
    values of skewed, heavy-tailed data, the ABC endpoints lie within two standard
    deviations of where the 2,000-resample BCa puts them over 20 seeds (its Monte-Carlo
    spread; measured within 0.6), while the plain t interval's are several deviations
    off (3 to 16 measured): the skewness matters and ABC accounts for it."""
    values = _skewed_costs(kind, stats.ANALYTIC_INTERVAL_ABOVE, seed=1)
    booted = [stats.bootstrap_mean_ci(values, seed=seed) for seed in range(20)]
    analytic = stats.abc_mean_ci(values)
    plain = stats.mean_se(values)
    assert analytic.method == "ABC" and analytic.mean == booted[0].mean
    assert analytic.se == pytest.approx(statistics.mean(e.se for e in booted), rel=0.05)
    t_off = []
    for end in ("low", "high"):
        ends = [getattr(estimate, end) for estimate in booted]
        centre, spread = statistics.mean(ends), statistics.stdev(ends)
        assert abs(getattr(analytic, end) - centre) <= 2 * spread, (end, centre, spread)
        t_off.append(abs(getattr(plain, end) - centre) / spread)
    assert max(t_off) > 3


@given(st.lists(st.one_of(st.floats(-1e300, 1e300, allow_nan=False),
                          st.sampled_from([0.0, 1.0, 5e-324, 1e15])), min_size=2, max_size=300),
       st.sampled_from([0.8, 0.9, 0.95, 0.99]))
@settings(max_examples=200, deadline=None)
def test_the_abc_interval_holds_the_mean_and_mirrors_with_the_data(values, confidence):
    """For any data: finite ends around the exact mean, `se` the plug-in standard error,
    a zero-width interval for equal values, and the data negated gives the interval
    negated (the skewness correction changes sides with the tail)."""
    estimate = stats.abc_mean_ci(values, confidence)
    assert estimate.mean == statistics.mean(values) and estimate.n == len(values)
    assert estimate.method == "ABC"
    assert estimate.low is not None and estimate.high is not None and estimate.se is not None
    assert math.isfinite(estimate.low) and math.isfinite(estimate.high)
    assert estimate.low <= estimate.mean <= estimate.high
    if min(values) == max(values):
        assert (estimate.se, estimate.low, estimate.high) == (0.0, estimate.mean, estimate.mean)
        return
    scale = max(abs(value) for value in values)
    assert estimate.se == pytest.approx(float(np.std(np.asarray(values) / scale)) * scale
                                        / math.sqrt(len(values)), rel=1e-6)
    mirrored = stats.abc_mean_ci([-value for value in values], confidence)
    width = estimate.high - estimate.low
    assert mirrored.low == pytest.approx(-estimate.high, rel=1e-9, abs=1e-9 * width)
    assert mirrored.high == pytest.approx(-estimate.low, rel=1e-9, abs=1e-9 * width)


def test_the_abc_interval_leans_with_the_tail_and_is_a_t_like_interval_on_normal_data():
    skewed = stats.abc_mean_ci(_skewed_costs("lognormal", 2000, seed=4))
    assert skewed.high - skewed.mean > skewed.mean - skewed.low
    normal = np.random.default_rng(3).normal(10.0, 2.0, size=20_000).tolist()
    analytic, plain = stats.abc_mean_ci(normal), stats.mean_se(normal)
    assert analytic.low == pytest.approx(plain.low, abs=0.1 * plain.se)
    assert analytic.high == pytest.approx(plain.high, abs=0.1 * plain.se)


def test_abc_degenerate():
    assert stats.abc_mean_ci([]) == stats.Estimate(None, None, None, None, 0, "ABC")
    assert stats.abc_mean_ci([4.0]) == stats.Estimate(4.0, None, None, None, 1, "ABC")
    assert stats.abc_mean_ci([2.5] * 7) == stats.Estimate(2.5, 0.0, 2.5, 2.5, 7, "ABC")
    with pytest.raises(ValueError, match="finite"):
        stats.abc_mean_ci([1.0, math.inf])


@given(st.lists(st.lists(st.floats(-1e6, 1e6, allow_nan=False), max_size=12), max_size=5),
       st.integers(0, 12), st.integers(0, 2**32 - 1))
@settings(max_examples=60, deadline=None)
def test_skewed_means_are_bootstrapped_up_to_the_threshold_and_abc_above(samples, threshold,
                                                                         seed):
    """`skewed_mean_ci` is `bootstrap_mean_ci` (the same estimate) at or below
    `ANALYTIC_INTERVAL_ABOVE` values and `abc_mean_ci` above; `skewed_mean_cis` is it of
    each sample, in order."""
    kept = stats.ANALYTIC_INTERVAL_ABOVE
    try:
        stats.ANALYTIC_INTERVAL_ABOVE = threshold
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            each = [stats.skewed_mean_ci(values, resamples=200, seed=seed) for values in samples]
            for values, estimate in zip(samples, each, strict=True):
                expected = (stats.abc_mean_ci(values) if len(values) > threshold
                            else stats.bootstrap_mean_ci(values, resamples=200, seed=seed))
                assert estimate == expected
            assert stats.skewed_mean_cis(samples, resamples=200, seed=seed) == each
    finally:
        stats.ANALYTIC_INTERVAL_ABOVE = kept


def test_the_threshold_leaves_ordinary_suites_on_the_bootstrap():
    assert stats.ANALYTIC_INTERVAL_ABOVE >= 1000
    values = _skewed_costs("zeros", stats.ANALYTIC_INTERVAL_ABOVE, seed=2)
    assert stats.skewed_mean_ci(values).method == "bootstrap BCa"
    assert stats.skewed_mean_ci([*values, 1.0]).method == "ABC"


# ------------------------------------------------------------------ power


def test_mde_known_values_for_paired_t():
    # Cohen's tables: a two-sided one-sample/paired t-test needs n = 34 to detect
    # d = 0.5 with 80 % power (n = 33 falls just short).
    assert stats.minimum_detectable_effect(1.0, 34) < 0.5 < stats.minimum_detectable_effect(1.0, 33)
    # Large n approaches the normal approximation (1.95996 + 0.84162) * sd / sqrt(n).
    assert stats.minimum_detectable_effect(2.0, 10_000) == pytest.approx(
        2.80158 * 2.0 / 100.0, rel=1e-3)


def test_mde_has_the_promised_power_by_simulation():
    n, sd = 8, 1.5
    effect = stats.minimum_detectable_effect(sd, n)
    rng = np.random.default_rng(11)
    samples = rng.normal(effect, sd, size=(40_000, n))
    t_statistics = samples.mean(axis=1) / (samples.std(axis=1, ddof=1) / math.sqrt(n))
    critical = 2.3646243  # t(0.975, 7)
    observed_power = float(np.mean(np.abs(t_statistics) > critical))
    assert observed_power == pytest.approx(0.8, abs=0.01)


@given(st.floats(min_value=0.01, max_value=100), st.integers(min_value=2, max_value=500))
@settings(max_examples=40, deadline=None)
def test_mde_shrinks_as_n_grows_and_scales_with_sd(sd, n):
    smaller = stats.minimum_detectable_effect(sd, n)
    larger = stats.minimum_detectable_effect(sd, n + 1)
    assert larger < smaller
    assert stats.minimum_detectable_effect(2 * sd, n) == pytest.approx(2 * smaller, rel=1e-6)


def _solved_mde(sd: float, n: int, alpha: float, power: float) -> float:
    """The minimum detectable effect solved from scratch, as the function did before it
    kept its roots: scipy's noncentral t, brentq to 1e-10."""
    from scipy import optimize

    df = n - 1
    critical = float(scipy_stats.t.ppf(1.0 - alpha / 2.0, df))

    def gap(noncentrality: float) -> float:
        lower = float(scipy_stats.nct.cdf(-critical, df, noncentrality))
        return float(scipy_stats.nct.sf(critical, df, noncentrality)) + \
            (0.0 if math.isnan(lower) else lower) - power

    upper = max(float(scipy_stats.norm.ppf(1.0 - alpha / 2.0) + scipy_stats.norm.ppf(power)),
                1.0) * 2.0
    while gap(upper) < 0.0:
        upper *= 2.0
    return float(optimize.brentq(gap, 0.0, upper, xtol=1e-10) * sd / math.sqrt(n))


@given(st.floats(min_value=1e-6, max_value=1e6), st.integers(min_value=2, max_value=400),
       st.sampled_from([0.01, 0.05, 0.1]), st.sampled_from([0.5, 0.8, 0.9]),
       st.integers(min_value=0, max_value=3))
@settings(max_examples=40, deadline=None)
def test_mde_kept_per_degrees_of_freedom_is_the_mde_solved_each_time(sd, n, alpha, power,
                                                                     asked_before):
    # the root depends on n and the levels alone: asked again with other spreads (as a
    # report of many arms asks it, pair after pair), the answer is the one solved afresh
    for other in range(asked_before):
        stats.minimum_detectable_effect(sd * (other + 2), n, alpha, power)
    assert stats.minimum_detectable_effect(sd, n, alpha, power) == _solved_mde(sd, n, alpha,
                                                                               power)
    # the binomial MDE's quantiles, kept per pair of levels, are scipy's sum too
    z = float(scipy_stats.norm.ppf(1.0 - alpha / 2.0) + scipy_stats.norm.ppf(power))
    h = z * math.sqrt(2 / n)
    angle = math.asin(math.sqrt(0.3))
    moves = [math.sin(angle + h / 2.0) ** 2 - 0.3] if angle + h / 2.0 <= math.pi / 2.0 else []
    moves += [0.3 - math.sin(angle - h / 2.0) ** 2] if angle - h / 2.0 >= 0.0 else []
    assert stats.mde_proportions(0.3, n, alpha, power) == (min(moves) if moves else None)


def test_mde_degenerate():
    assert stats.minimum_detectable_effect(1.0, 1) is None
    assert stats.minimum_detectable_effect(1.0, 0) is None
    assert stats.minimum_detectable_effect(None, 10) is None
    assert stats.minimum_detectable_effect(0.0, 10) == 0.0
    with pytest.raises(ValueError):
        stats.minimum_detectable_effect(1.0, 10, power=1.0)


def test_mde_proportions_known_value():
    # Cohen's h: 0.5 vs ~0.693 is h = 0.396 = 2.8016 * sqrt(2 / 100)
    assert stats.mde_proportions(0.5, 100) == pytest.approx(0.1930, abs=5e-4)
    one_sample = stats.mde_proportions(0.5, 100, two_sample=False)
    assert one_sample < stats.mde_proportions(0.5, 100)


@given(unit_scores, st.integers(min_value=20, max_value=2000))
@settings(deadline=None, max_examples=60)
def test_mde_proportions_shrinks_with_n_and_stays_feasible(p, n):
    here = stats.mde_proportions(p, n)
    more = stats.mde_proportions(p, 4 * n)
    assert here is not None and more is not None
    assert 0.0 < more < here <= 1.0


def test_mde_proportions_degenerate():
    assert stats.mde_proportions(None, 10) is None
    assert stats.mde_proportions(0.5, 0) is None
    # with one trial per arm no change inside [0, 1] is detectable
    assert stats.mde_proportions(0.5, 1) is None
    # at a rate of 1.0 only a drop is possible, and it is found
    assert stats.mde_proportions(1.0, 50) > 0
    with pytest.raises(ValueError):
        stats.mde_proportions(1.5, 10)


# ------------------------------------------------------------------ paired difference


def test_paired_difference_matches_paired_t_test():
    a = {"t1": 1.0, "t2": 2.0, "t3": 3.0, "t4": 2.5}
    b = {"t1": 2.0, "t2": 2.5, "t3": 5.0, "t4": 2.0, "only-b": 100.0}
    comparison = stats.paired_difference(a, b)
    assert comparison.n == 4
    assert comparison.mean_diff == pytest.approx(0.75)
    # t = 0.75 / (sd / 2) = 1.44115 on 3 df -> two-sided p = 0.24519
    assert comparison.p_value == pytest.approx(0.24519, abs=1e-5)
    reference = scipy_stats.ttest_rel([2.0, 2.5, 5.0, 2.0], [1.0, 2.0, 3.0, 2.5])
    assert comparison.p_value == pytest.approx(reference.pvalue, rel=1e-9)
    assert comparison.low < comparison.mean_diff < comparison.high
    assert comparison.mde == pytest.approx(
        stats.minimum_detectable_effect(comparison.sd, 4))


def test_paired_difference_uses_only_shared_keys_and_reports_n():
    comparison = stats.paired_difference({"x": 1.0}, {"y": 2.0})
    assert comparison.n == 0 and comparison.mean_diff is None and comparison.p_value is None
    one = stats.paired_difference({"x": 1.0, "y": 3.0}, {"x": 2.0})
    assert (one.n, one.mean_diff, one.se, one.mde) == (1, 1.0, None, None)


def test_paired_difference_constant_shift():
    shifted = stats.paired_difference({k: float(k) for k in range(5)},
                                      {k: k + 0.25 for k in range(5)})
    assert shifted.se == 0.0 and shifted.p_value == 0.0 and shifted.mde == 0.0
    unchanged = stats.paired_difference({k: 1.0 for k in range(5)}, {k: 1.0 for k in range(5)})
    assert unchanged.mean_diff == 0.0 and unchanged.p_value == 1.0


@given(st.dictionaries(st.integers(0, 50), st.tuples(scores, scores), min_size=2, max_size=30))
@settings(max_examples=50, deadline=None)  # each example solves two power equations
def test_paired_difference_is_antisymmetric(pairs):
    a = {key: first for key, (first, _) in pairs.items()}
    b = {key: second for key, (_, second) in pairs.items()}
    forward, backward = stats.paired_difference(a, b), stats.paired_difference(b, a)
    assert forward.n == backward.n == len(pairs)
    assert forward.mean_diff == pytest.approx(-backward.mean_diff, abs=1e-9)
    assert forward.se == pytest.approx(backward.se, rel=1e-9, abs=1e-12)
    if forward.p_value is not None and backward.p_value is not None:
        assert forward.p_value == pytest.approx(backward.p_value, abs=1e-9)


# ------------------------------------------------------------------ paired verdict


def test_paired_verdict_known_numbers():
    champion = [0.60, 0.62, 0.58, 0.61]
    challenger = [0.66, 0.65, 0.66, 0.64]
    differences = [0.06, 0.03, 0.08, 0.03]
    verdict = stats.paired_verdict(champion, challenger)
    assert verdict.n == 4
    assert verdict.mean_diff == pytest.approx(0.05)
    assert verdict.se == pytest.approx(statistics.stdev(differences) / 2)
    assert verdict.band == pytest.approx(1.96 * verdict.se)
    assert verdict.dethroned


def test_paired_verdict_noisy_gain_is_held_by_the_band():
    champion = [0.50, 0.50, 0.50, 0.50]
    challenger = [0.60, 0.45, 0.62, 0.43]   # mean gain 0.025, very noisy
    verdict = stats.paired_verdict(champion, challenger)
    assert verdict.mean_diff == pytest.approx(0.025)
    assert verdict.band > verdict.mean_diff and not verdict.dethroned


@pytest.mark.parametrize("gain, dethroned", [(0.006, False), (0.008, True)])
def test_paired_verdict_floor_decides_when_se_is_zero(gain, dethroned):
    champion = [0.5, 0.5, 0.5, 0.5, 0.5]
    verdict = stats.paired_verdict(champion, [score + gain for score in champion])
    assert verdict.se == 0.0
    assert verdict.band == 0.007
    assert verdict.dethroned is dethroned


def test_paired_verdict_refusals():
    with pytest.raises(ValueError, match="same seeds"):
        stats.paired_verdict([0.5, 0.6], [0.5])
    with pytest.raises(ValueError, match="at least one seed"):
        stats.paired_verdict([], [])
    with pytest.raises(ValueError, match="two seeds"):
        stats.paired_verdict([0.5], [0.9])


def test_paired_verdict_custom_floor_and_z():
    verdict = stats.paired_verdict([0.5, 0.5], [0.52, 0.52], floor=0.03)
    assert verdict.band == 0.03 and not verdict.dethroned
    wide = stats.paired_verdict([0.5, 0.5, 0.5], [0.55, 0.60, 0.65], z=10.0)
    assert wide.band == pytest.approx(10.0 * wide.se) and not wide.dethroned


@given(st.lists(st.tuples(unit_scores, unit_scores), min_size=2, max_size=20))
@settings(deadline=None)  # never a wall-time assertion
def test_paired_verdict_swap_is_symmetric(pairs):
    champion = [first for first, _ in pairs]
    challenger = [second for _, second in pairs]
    forward = stats.paired_verdict(champion, challenger)
    backward = stats.paired_verdict(challenger, champion)
    assert forward.mean_diff == pytest.approx(-backward.mean_diff, abs=1e-12)
    assert forward.se == pytest.approx(backward.se, abs=1e-12)
    assert forward.band == pytest.approx(backward.band, abs=1e-12)
    # the band is positive, so both sides can never win at once
    assert not (forward.dethroned and backward.dethroned)


@given(st.lists(unit_scores, min_size=2, max_size=20), st.floats(0.0, 0.2))
@settings(deadline=None)  # never a wall-time assertion
def test_paired_verdict_band_never_below_floor_and_identical_never_dethrones(champion, gain):
    assume(gain != 0.007)
    same = stats.paired_verdict(champion, champion)
    assert same.mean_diff == 0.0 and same.se == 0.0 and not same.dethroned
    verdict = stats.paired_verdict(champion, [score + gain for score in champion])
    assert verdict.band >= 0.007
    if verdict.se < 1e-9:
        assert verdict.dethroned is (verdict.mean_diff >= 0.007)


def test_results_serialise_to_plain_json():
    import json

    json.dumps(stats.mean_se([1, 2, 3]).to_json_dict())
    json.dumps(stats.paired_difference({1: 1.0, 2: 2.0}, {1: 1.5, 2: 2.0}).to_json_dict())
    json.dumps(stats.paired_verdict([0.1, 0.2], [0.2, 0.3]).to_json_dict())


def _clustered_of_totals_as_before(totals, confidence=0.95):
    """`clustered_mean_se_of_totals` as it was written before it kept two lists (a dict
    of pairs), the reference the faster one must equal to the bit."""
    kept = {label: (int(count), float(total)) for label, (count, total) in totals.items()
            if count}
    method = "cluster-robust t"
    n = sum(count for count, _ in kept.values())
    if n == 0:
        return stats.Estimate(None, None, None, None, 0, method)
    for _, total in kept.values():
        if not math.isfinite(total):
            raise ValueError(f"statistics need finite numbers, got a sum of {total!r}")
    mean = math.fsum(total for _, total in kept.values()) / n
    cluster_count = len(kept)
    if cluster_count < 2:
        return stats.Estimate(mean, None, None, None, n, method)
    squared = math.fsum((total - count * mean) ** 2 for count, total in kept.values())
    se = math.sqrt(cluster_count / (cluster_count - 1) * squared) / n
    low, high = stats._t_interval(mean, se, cluster_count - 1, confidence)
    return stats.Estimate(mean, se, min(low, mean), max(high, mean), n, method)


@given(st.dictionaries(st.text(max_size=3), st.tuples(
    st.integers(-3, 40), st.one_of(st.floats(-1e9, 1e9), st.sampled_from(
        [math.inf, -0.0, 0.0]))), max_size=40), st.sampled_from([0.9, 0.95]))
@settings(max_examples=300, deadline=None)
def test_clustered_of_totals_equals_its_former_self_to_the_bit(totals, confidence):
    try:
        expected = repr(_clustered_of_totals_as_before(totals, confidence))
    except ValueError as error:
        with pytest.raises(ValueError, match=re.escape(str(error))):
            stats.clustered_mean_se_of_totals(totals, confidence)
        return
    assert repr(stats.clustered_mean_se_of_totals(totals, confidence)) == expected


@given(st.dictionaries(st.integers(), st.tuples(
    st.integers(-10**6, 10**6), st.floats(allow_nan=False)), max_size=60))
@settings(max_examples=400, deadline=None)
def test_clustered_of_totals_equals_its_former_self_over_every_float(totals):
    """The residuals taken in numpy and squared by `pow` mapped over them: the same bits
    as the former generator for any finite or infinite sum (huge ones that overflow a
    square, subnormal ones), or the same error."""
    try:
        expected = repr(_clustered_of_totals_as_before(totals))
    except (ValueError, OverflowError) as error:
        with pytest.raises(type(error), match=re.escape(str(error))):
            stats.clustered_mean_se_of_totals(totals)
        return
    assert repr(stats.clustered_mean_se_of_totals(totals)) == expected


@given(st.lists(st.floats(-1e12, 1e12, allow_nan=False), min_size=2, max_size=300),
       st.integers(1, 400), st.integers(1, 700), st.integers(0, 2**32 - 1))
@settings(max_examples=60, deadline=None)
def test_the_bootstrap_distribution_of_a_mean_is_scipys_to_the_bit(values, resamples, batch,
                                                                    seed):
    """`bootstrap_mean_ci` draws its resamples of a wide sample (over
    `CLOSED_FORM_JACKKNIFE_ABOVE` values) itself, without scipy's machinery: the same
    distribution and standard error as `scipy.stats.bootstrap`'s,
    bit for bit, whatever the data, batch and seed."""
    data = np.asarray(values)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        scipys = scipy_stats.bootstrap(
            (data,), np.mean, n_resamples=resamples, vectorized=True, batch=batch,
            method="percentile", **stats._bootstrap_random_argument(seed))
        mine = stats._bootstrap_distribution_of_mean(data, resamples, batch, seed)
    assert np.array_equal(mine, scipys.bootstrap_distribution)
    assert float(np.std(mine, ddof=1)).hex() == float(scipys.standard_error).hex()


def test_bootstraps_side_by_side_are_the_bootstraps_one_by_one():
    generator = np.random.default_rng(3)
    samples = [generator.lognormal(8.0, 1.0, size=size).tolist()
               for size in (1500, 2, 40, 3000, 1)]
    assert stats.bootstrap_mean_cis(samples, resamples=300) == \
        [stats.bootstrap_mean_ci(values, resamples=300) for values in samples]
    assert stats.bootstrap_mean_cis([]) == []


@given(st.lists(st.tuples(st.integers(-3, 3), st.floats(-1e9, 1e9, allow_nan=False)),
                max_size=30))
def test_clustered_estimates_from_columns_are_the_ones_from_totals(clusters):
    counts = [count for count, _ in clusters]
    sums = [total for _, total in clusters]
    expected = stats.clustered_mean_se_of_totals(dict(enumerate(clusters)))
    assert stats.clustered_mean_se_of_columns(np.array(counts, dtype=np.int64),
                                              np.array(sums, dtype=np.float64)) == expected
    assert stats.clustered_mean_se_of_columns(counts, sums) == expected


@settings(max_examples=500, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e150,
                          max_value=1e150), min_size=1, max_size=60)
       | st.lists(st.sampled_from([0.0, 0.1, 1 / 3, 0.25, 1.0, 5e-324, 1e-300]),
                  min_size=1, max_size=200))
def test_the_exact_mean_and_deviation_are_the_statistics_module_s_bit_for_bit(values):
    mean, stdev = stats.exact_mean_stdev(values)
    assert mean == statistics.mean(values)
    if len(values) < 2:
        assert stdev is None
    else:
        assert stdev == statistics.stdev(values)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=80)
       | st.lists(st.sampled_from([0.0, -0.0, 0.1, -1 / 3, 5e-324, -5e-324, 1e-300, 2.0**-1022,
                                   1.7976931348623157e308, -1.7976931348623157e308, 2.0**52]),
                  min_size=1, max_size=300))
def test_the_exact_mean_in_numpy_is_the_statistics_module_s_bit_for_bit(values):
    """Each float cut into halves summed per power of two, then divided once: the same
    number as `statistics.mean`'s exact fraction, whatever the spread of magnitudes
    (subnormals beside the largest floats), signs and cancellations."""
    expected = float(statistics.mean(values))
    found = stats._exact_mean_of_floats(np.array(values, dtype=np.float64))
    assert found.hex() == expected.hex()


@settings(max_examples=500, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=80)
       | st.lists(st.sampled_from([0.0, -0.0, 0.1, -1 / 3, 5e-324, -5e-324, 1e-300, 2.0**-1022,
                                   1.7976931348623157e308, -1.7976931348623157e308, 2.0**52,
                                   2.0**53 + 2, -(2.0**53), 1.5]),
                  min_size=1, max_size=300))
def test_the_exact_sum_in_numpy_is_math_fsum_s_correct_rounding(values):
    """The exact sum as numerator / 2**shift, rounded once: `math.fsum`'s correctly
    rounded sum (halves to even) wherever `math.fsum` has one, whatever the spread of
    magnitudes, signs and cancellations."""
    numerator, shift = stats._exact_sum_of_floats(np.array(values, dtype=np.float64))
    assert Fraction(numerator, 2**shift) == sum(map(Fraction, values))
    try:
        expected = math.fsum(values)
    except OverflowError:
        return  # partial sums past the largest float: `exact_sum` asks `math.fsum` there
    if numerator:
        assert (numerator / 2**shift).hex() == expected.hex()


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2),
       st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=6),
       st.sampled_from(["floats", "cancelled", "a negative zero", "an infinity", "a nan",
                        "huge", "huge, then cancelled"]))
def test_exact_sum_is_math_fsum_s_number_or_error_on_either_side_of_its_threshold(
        side, seeds, kind):
    """Below, at and above the size from which numpy sums: the same number as
    `math.fsum` to the last bit (the sign of a zero included), or the same error; a nan,
    an infinity or partial sums past the largest float go to `math.fsum` itself."""
    size = stats._EXACT_IN_NUMPY_FROM - 1 + side
    values = [seeds[index % len(seeds)] / (1 + index % 5) for index in range(size)]
    if kind == "cancelled":
        values = [value for original in values for value in (original, -original)]
    elif kind == "a negative zero":
        values = [-0.0] * size
    elif kind == "an infinity":
        values[size // 2] = float("inf")
    elif kind == "a nan":
        values[-1] = float("nan")
    elif kind == "huge":
        values = [1.7976931348623157e308 / (1 + index % 3) for index in range(size)]
    elif kind == "huge, then cancelled":  # the exact sum is small; the partial sums overflow
        values = [1e308] * (size // 2) + [-1e308] * (size - size // 2)
    array = np.array(values, dtype=np.float64)
    try:
        expected: float | type[Exception] = math.fsum(values)
    except (OverflowError, ValueError) as error:
        expected = type(error)
    try:
        found: float | type[Exception] = stats.exact_sum(array)
    except (OverflowError, ValueError) as error:
        found = type(error)
    if isinstance(expected, float) and isinstance(found, float):
        assert found.hex() == expected.hex() or (math.isnan(found) and math.isnan(expected))
    else:
        assert found == expected


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2),
       st.lists(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12,
                          max_value=1e12), min_size=1, max_size=5),
       st.sampled_from(["floats", "an integer among them", "an infinity among them"]))
def test_exact_mean_is_the_statistics_module_s_on_either_side_of_its_numpy_threshold(
        side, seeds, mixed):
    """Below, at and above the size from which numpy sums the floats; with a whole
    number among them (which numpy would make a float) or an infinity, `statistics`
    reads them, as before."""
    size = stats._EXACT_IN_NUMPY_FROM - 1 + side
    values: list[Any] = [seeds[index % len(seeds)] * (1 + index / 7) for index in range(size)]
    if mixed == "an integer among them":  # (as a float, 2**60: the 1 would be lost)
        values[size // 2], values[size // 2 + 1] = 2**60 + 1, -float(2**60)
    elif mixed == "an infinity among them":
        values[-1] = float("inf")
    expected = float(statistics.mean(values))
    found = stats.exact_mean(values)
    assert found.hex() == expected.hex()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True)
                | st.sampled_from([1e308, -1e308, float("inf"), float("-inf"), float("nan")]),
                min_size=1, max_size=30))
def test_any_number_that_is_not_finite_is_refused_by_name_and_only_then(values):
    """The first value that is not finite is the one named, wherever it is, whatever
    sums around it overflow; a list of finite numbers whose sum overflows is taken."""
    first = next((value for value in values if not math.isfinite(value)), None)
    if first is None:
        assert stats.mean_se(values).n == len(values)
    else:
        with pytest.raises(ValueError, match="finite") as refused:
            stats.mean_se(values)
        assert str(refused.value).endswith(repr(first))


def _outcome(compute: Any) -> Any:
    """An estimate's fields as their `repr` (-0.0 is not 0.0), or the error it raised."""
    try:
        estimate = compute()
    except (ValueError, OverflowError) as error:
        return type(error).__name__
    return [repr(value) for value in dataclasses.astuple(estimate)]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.integers(-3, 40), st.integers(-2**62, 2**62)),
                          st.one_of(st.floats(allow_nan=False), st.floats(-1e9, 1e9),
                                    st.integers(-2**60, 2**60))),
                max_size=40))
def test_clustered_estimates_from_int64_columns_are_the_totals_ones_bit_for_bit(clusters):
    """The columns' residuals are made side by side in numpy: the same bits as Python's
    `(total - count * mean) ** 2` one cluster at a time, whatever the counts and sums
    (wide, huge, infinite: the same error where Python's arithmetic raises one)."""
    counts = np.array([count for count, _ in clusters], dtype=np.int64)
    sums = [float(total) for _, total in clusters]
    expected = _outcome(lambda: stats.clustered_mean_se_of_totals(dict(enumerate(
        zip(counts.tolist(), sums, strict=True)))))
    assert _outcome(lambda: stats.clustered_mean_se_of_columns(
        counts, np.array(sums, dtype=np.float64))) == expected
    integer_sums = [total for _, total in clusters if isinstance(total, int)]
    if len(integer_sums) == len(clusters):  # sums of whole numbers: made floats as there
        assert _outcome(lambda: stats.clustered_mean_se_of_columns(
            counts, np.array(integer_sums, dtype=np.int64))) == expected
