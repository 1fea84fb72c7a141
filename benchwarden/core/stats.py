"""Statistics every report uses to show a number with its uncertainty.

Pure functions: they read no file, clock or network and draw randomness only from an
explicit seed, so the same inputs always give the same outputs.

Invariants:
- Empty input never raises and never invents a number: an `Estimate` of nothing has
  `mean is None`; a quantity that needs two samples (a standard error, an interval, a
  minimum detectable effect) is `None` below two.
- Intervals are `(low, high)` with `low <= mean <= high` whenever all three exist.
- Paired comparisons are always `b - a` (challenger minus champion) over keys or seeds
  present in both, and say how many pairs they used.
- `paired_verdict` is the one decision rule the retrieval ladder uses:
  `band = max(floor, z * se)`, dethroned iff `mean_diff >= band`. It refuses (ValueError)
  inputs it cannot decide honestly: unequal lengths, no seeds, or a single seed (one
  difference has no spread, so no band could be justified; see the function).
"""

from __future__ import annotations

import base64
import functools
import inspect
import itertools
import math
import os
import statistics
import struct
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeVar

from benchwarden.core import t_quantiles
from benchwarden.core.lazy import lazy_module

# Imported on first use: scipy alone takes about a second, which commands that compute
# no statistics (and every worker process of an executor) must not pay at start-up.
np = lazy_module("numpy")
optimize = lazy_module("scipy.optimize")
scipy_stats = lazy_module("scipy.stats")
# The t quantile every report's interval needs is scipy.special.stdtrit (what
# scipy.stats.t.ppf itself calls); the common ones are looked up in `t_quantiles`, a
# table of exactly those numbers, so a report imports no scipy for them.
scipy_special = lazy_module("scipy.special")

Key = TypeVar("Key", bound=Hashable)

__all__ = [
    "ANALYTIC_INTERVAL_ABOVE",
    "Estimate",
    "PairedComparison",
    "PairedVerdict",
    "abc_mean_ci",
    "bootstrap_mean_ci",
    "bootstrap_mean_cis",
    "clustered_mean_se",
    "clustered_mean_se_of_columns",
    "clustered_mean_se_of_totals",
    "mde_proportions",
    "mean_se",
    "minimum_detectable_effect",
    "paired_difference",
    "paired_verdict",
    "skewed_mean_ci",
    "skewed_mean_cis",
    "t_quantile",
    "wilson_interval",
]


@dataclass(frozen=True)
class Estimate:
    """A mean (or rate) with its standard error and a two-sided interval."""

    mean: float | None
    """Point estimate; None when there was nothing to estimate from."""
    se: float | None
    """Standard error of `mean`; None when it cannot be estimated (fewer than two units)."""
    low: float | None
    """Lower end of the interval at the requested confidence; None with `se`."""
    high: float | None
    """Upper end of the interval; None with `se`."""
    n: int
    """Number of samples the estimate used (for clustered estimates: samples, not clusters)."""
    method: str
    """How `se` and the interval were obtained, e.g. `t`, `cluster-robust t`, `wilson`."""

    def to_json_dict(self) -> dict[str, float | int | str | None]:
        return {"mean": self.mean, "se": self.se, "low": self.low, "high": self.high,
                "n": self.n, "method": self.method}


@dataclass(frozen=True)
class PairedComparison:
    """Difference `b - a` over the keys both sides measured, as a paired t analysis."""

    n: int
    """Pairs used (keys present in both mappings)."""
    mean_diff: float | None
    """Mean of `b[key] - a[key]`; None when no key is shared."""
    sd: float | None
    """Sample standard deviation of the differences; None below two pairs."""
    se: float | None
    """`sd / sqrt(n)`; None below two pairs."""
    low: float | None
    """Lower end of the 95 % t interval of `mean_diff`."""
    high: float | None
    """Upper end of the 95 % t interval of `mean_diff`."""
    p_value: float | None
    """Two-sided paired t-test of `mean_diff == 0`; 0.0 when every pair differs by the
    same non-zero amount, 1.0 when every difference is zero."""
    mde: float | None
    """Smallest true mean difference this many pairs would detect (two-sided, alpha 0.05)
    with 80 % power, given the observed `sd`. A difference smaller than this that is not
    significant is "not measured", not "no difference"."""

    def to_json_dict(self) -> dict[str, float | int | None]:
        return {"n": self.n, "mean_diff": self.mean_diff, "sd": self.sd, "se": self.se,
                "low": self.low, "high": self.high, "p_value": self.p_value,
                "mde": self.mde}


@dataclass(frozen=True)
class PairedVerdict:
    """Whether a challenger beats a champion over the same seeds by more than the band."""

    mean_diff: float
    """Mean of per-seed `challenger - champion`."""
    se: float
    """Standard error of `mean_diff`: sample stdev of the differences / sqrt(n)."""
    band: float
    """`max(floor, z * se)`: the margin a challenger must reach."""
    dethroned: bool
    """True iff `mean_diff >= band`."""
    n: int
    """Number of seeds compared."""

    def to_json_dict(self) -> dict[str, float | int | bool]:
        return {"mean_diff": self.mean_diff, "se": self.se, "band": self.band,
                "dethroned": self.dethroned, "n": self.n}


# --------------------------------------------------------------------------- helpers


def _floats(values: Iterable[float]) -> list[float]:
    """The values as floats; ValueError naming the first that is not finite. A finite
    `math.fsum` (one C pass) means every number is finite; only otherwise (or where the
    sum overflows) is each one looked at."""
    numbers = list(map(float, values))
    try:
        finite = math.isfinite(math.fsum(numbers))
    except (OverflowError, ValueError):  # past the largest float, or inf + -inf
        finite = False
    if not finite:
        for number in numbers:
            if not math.isfinite(number):
                raise ValueError(f"statistics need finite numbers, got {number!r}")
    return numbers


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")


def t_quantile(degrees_of_freedom: int, confidence: float = 0.95) -> float:
    """The two-sided Student t quantile, `scipy.special.stdtrit(df, 0.5 + confidence / 2)`:
    from the generated table (the same numbers, bit for bit) when it has them, else
    from scipy."""
    if degrees_of_freedom < 1:
        raise ValueError(f"a t quantile needs at least 1 degree of freedom, "
                         f"got {degrees_of_freedom!r}")
    table = t_quantiles.QUANTILES.get(confidence)
    if table is not None and isinstance(degrees_of_freedom, int):
        if degrees_of_freedom <= len(table):
            return table[degrees_of_freedom - 1]
        packed = _packed_quantiles(confidence)
        if degrees_of_freedom - len(table) <= len(packed):
            return packed[degrees_of_freedom - len(table) - 1]
    return float(scipy_special.stdtrit(degrees_of_freedom, 0.5 + confidence / 2.0))


@functools.cache
def _packed_quantiles(confidence: float) -> tuple[float, ...]:
    """The generated quantiles past the table (`t_quantiles.PACKED`), unpacked once."""
    packed = t_quantiles.PACKED.get(confidence)
    if packed is None:
        return ()
    raw = base64.b64decode(packed)
    return struct.unpack(f"<{len(raw) // 8}d", raw)


def _t_interval(mean: float, se: float, degrees_of_freedom: int,
                confidence: float) -> tuple[float, float]:
    if se == 0.0:
        return mean, mean
    half_width = t_quantile(degrees_of_freedom, confidence) * se
    return mean - half_width, mean + half_width


# --------------------------------------------------------------------------- estimates


def exact_mean(numbers: Sequence[float]) -> float:
    """`statistics.mean(numbers)` as a float, the same number bit for bit: the exact sum
    of the floats divided once. Of many finite floats, summed exactly in numpy
    (`_exact_mean_of_floats`: `statistics` made each of 333,334 per-task means an exact
    fraction, 0.17 s a call); of anything else, by `statistics` itself."""
    if _EXACT_IN_NUMPY_FROM <= len(numbers) <= _EXACT_IN_NUMPY_UP_TO and \
            set(map(type, numbers)) == {float}:
        values = np.asarray(numbers, dtype=np.float64)
        if bool(np.isfinite(values).all()):
            return _exact_mean_of_floats(values)
    return float(statistics.mean(numbers))


# below it `statistics` and `math.fsum` are as quick; above it a sum of halves could pass
# 2**53 (inexact)
_EXACT_IN_NUMPY_FROM, _EXACT_IN_NUMPY_UP_TO = 1_000, 2**25


def _exact_mean_of_floats(values: Any) -> float:
    """The mean of finite float64 `values` (at most 2**25 of them), correctly rounded
    from their exact sum (`_exact_sum_of_floats`) divided once, as a fraction, as
    `statistics.mean` does."""
    numerator, shift = _exact_sum_of_floats(values)
    return float(Fraction(numerator, len(values) << shift))


def exact_sum(values: Any) -> float:
    """`math.fsum` of a float64 array, the same number bit for bit: its exact sum
    correctly rounded (`_exact_sum_of_floats`, about 6x quicker than `math.fsum` of the
    array made a list at 333,334 values: a report over a million groups asks dozens).
    Where `math.fsum` could meet what numpy's sum would not show it to (a value not
    finite, partial sums past the largest float, an exact zero, whose sign depends on
    the Python), or at a size past the exact sums' reach, `math.fsum` itself."""
    count = len(values)
    if not _EXACT_IN_NUMPY_FROM <= count <= _EXACT_IN_NUMPY_UP_TO:
        return math.fsum(values.tolist())
    with np.errstate(over="ignore", invalid="ignore"):
        largest = float(np.abs(values).max())
    # every partial sum of `math.fsum` is at most the sum of the sizes: below this bound
    # none overflows (and a nan or inf makes `largest` fail the test)
    if not largest <= _NO_PARTIAL_OVERFLOWS / count:
        return math.fsum(values.tolist())
    numerator, shift = _exact_sum_of_floats(values)
    if numerator == 0:
        return math.fsum(values.tolist())
    return numerator / (1 << shift)  # an int's true division is correctly rounded


_NO_PARTIAL_OVERFLOWS = 2.0**1020
# frexp's exponents of float64, from the smallest subnormal's to the largest float's
_LOWEST_EXPONENT, _EXPONENTS = -1073, 2098
# values summed a block at a time: a block's arrays stay in the cache and are reused,
# where whole-array temporaries of a million values cost more in page faults than in sums
_VALUES_PER_BLOCK = 32_768


def _exact_sum_of_floats(values: Any) -> tuple[int, int]:
    """The exact sum of finite float64 `values` (at most 2**25 of them) as
    `numerator / 2**shift`: each value is a 53-bit whole number times a power of two
    (`frexp`); the whole numbers are cut into halves of 27 and 26 bits and each half
    summed per power of two (`bincount`: float sums of whole numbers under 2**53, so
    exact); the few sums are put together as one Python integer."""
    high_sums = np.zeros(_EXPONENTS)
    low_sums = np.zeros(_EXPONENTS)
    for start in range(0, len(values), _VALUES_PER_BLOCK):
        mantissas, exponents = np.frexp(values[start:start + _VALUES_PER_BLOCK])
        # value = whole * 2**(exponent - 53); a power of two's product is exact
        whole = (mantissas * 2.0**53).astype(np.int64)
        high = whole >> 26  # (floor: `low` is never negative)
        low = whole - (high << 26)
        position = exponents - _LOWEST_EXPONENT
        high_sums += np.bincount(position, weights=high, minlength=_EXPONENTS)
        low_sums += np.bincount(position, weights=low, minlength=_EXPONENTS)
    numerator = 0
    used = np.flatnonzero((high_sums != 0) | (low_sums != 0))
    for position, high_sum, low_sum in zip(used.tolist(), high_sums[used].tolist(),
                                           low_sums[used].tolist(), strict=True):
        numerator += ((int(high_sum) << 26) + int(low_sum)) << position
    return numerator, 53 - _LOWEST_EXPONENT


def exact_mean_stdev(numbers: Sequence[float]) -> tuple[float, float | None]:
    """`(statistics.mean(numbers), statistics.stdev(numbers))` of finite floats, the
    same numbers bit for bit (None for the deviation below two numbers), in one pass
    that keeps the exact sums per denominator as `statistics` does, without its
    per-number calls: a report over 17,700 seeds takes two dozen of these."""
    if not numbers:
        raise ValueError("a mean needs at least one number")
    sums: defaultdict[int, int] = defaultdict(int)
    squares: defaultdict[int, int] = defaultdict(int)
    # each distinct value once, times its count (counted in C): scores and category
    # means over seeds repeat a few values thousands of times; exact sums do not care
    # about order or grouping
    for value, times in Counter(numbers).items():
        numerator, denominator = value.as_integer_ratio()
        sums[denominator] += numerator * times
        squares[denominator] += numerator * numerator * times
    count = len(numbers)
    total = sum((Fraction(numerator, denominator) for denominator, numerator in sums.items()),
                Fraction(0))
    mean = float(total / count)
    if count < 2:
        return mean, None
    if _sqrt_of_fraction is None:  # a Python whose statistics lacks it: ask statistics
        return mean, statistics.stdev(numbers)
    total_squares = sum((Fraction(numerator, denominator * denominator)
                         for denominator, numerator in squares.items()), Fraction(0))
    variance: Fraction = (count * total_squares - total * total) / count / (count - 1)
    return mean, _sqrt_of_fraction(variance.numerator, variance.denominator)


# statistics.stdev's own correctly rounded square root of a fraction (CPython 3.11 on)
_sqrt_of_fraction = getattr(statistics, "_float_sqrt_of_frac", None)


def mean_se(values: Iterable[float], confidence: float = 0.95) -> Estimate:
    """Mean with `se = sample stdev / sqrt(n)` and a Student t interval (n - 1 df)."""
    _check_confidence(confidence)
    numbers = _floats(values)
    n = len(numbers)
    if n == 0:
        return Estimate(None, None, None, None, 0, "t")
    # exact rationals, as statistics.mean/stdev work: identical values give se == 0
    # exactly, which keeps floor-decided comparisons free of rounding noise
    mean, stdev = exact_mean_stdev(numbers)
    if stdev is None:
        return Estimate(mean, None, None, None, n, "t")
    se = stdev / math.sqrt(n)
    low, high = _t_interval(mean, se, n - 1, confidence)
    return Estimate(mean, se, low, high, n, "t")


def clustered_mean_se(values: Sequence[float], clusters: Sequence[Hashable],
                      confidence: float = 0.95) -> Estimate:
    """Mean of samples that share units (trials of one task), with a cluster-robust SE.

    Trials of the same task are not independent, so the plain SE is too small. This is
    the CR1 sandwich estimator for an intercept-only model: with residuals
    `e_i = y_i - mean` summed per cluster into `S_g`, over `G` clusters and `N` samples,
    `se^2 = G / (G - 1) * sum(S_g^2) / N^2`, and the interval uses t with `G - 1` degrees
    of freedom. With one sample per cluster it equals the plain `mean_se` (to rounding).
    The values are folded into per-cluster totals and handed to `clustered_mean_se_of_totals`,
    so a report that aggregates in the database gets the same numbers.
    """
    _check_confidence(confidence)
    numbers = _floats(values)
    labels = list(clusters)
    if len(labels) != len(numbers):
        raise ValueError(f"{len(numbers)} values but {len(labels)} cluster labels")
    members: dict[Hashable, list[float]] = defaultdict(list)
    for number, label in zip(numbers, labels, strict=True):
        members[label].append(number)
    return clustered_mean_se_of_totals(
        {label: (len(group), math.fsum(group)) for label, group in members.items()}, confidence)


def clustered_mean_se_of_totals(totals: Mapping[Any, tuple[int, float]],
                                confidence: float = 0.95) -> Estimate:
    """`clustered_mean_se` from per-cluster `(count, sum)` totals alone (float math).

    The cluster sums of residuals are `S_g = sum_g - n_g * mean`, so the totals are all
    the estimator needs: a store can sum per task in SQL or in one streaming pass, and
    no sample has to be held in memory. Clusters with a count of 0 are ignored."""
    _check_confidence(confidence)
    # the kept clusters as two lists (not a dict of pairs): a report of a suite of
    # thousands of tasks asks this dozens of times over tens of thousands of clusters
    counts: list[int] = []
    sums: list[float] = []
    for count, total in totals.values():
        if count:
            counts.append(int(count))
            sums.append(float(total))
    return _clustered_of_lists(counts, sums, confidence)


def clustered_mean_se_of_columns(counts: Any, sums: Any,
                                 confidence: float = 0.95) -> Estimate:
    """`clustered_mean_se_of_totals` of clusters given as two arrays (numpy or any
    sequence), position by position: `counts[i]` samples summing to `sums[i]`. The same
    estimate to the last bit (the same Python arithmetic, over the same kept clusters in
    the same order); a report of a suite of 333,000 tasks asks this dozens of times, and
    a mapping of a pair per task was most of the cost."""
    _check_confidence(confidence)
    count_array = np.asarray(counts)
    kept = count_array != 0
    sum_array = np.asarray(sums)
    kept_sums = (sum_array[kept].astype(np.float64) if sum_array.dtype != np.float64
                 else sum_array[kept])
    if count_array.dtype.kind in "iu" and count_array.dtype.itemsize <= 8 and (
            count_array.dtype.kind == "i" or count_array.dtype.itemsize < 8):
        return _clustered_of_arrays(count_array[kept].astype(np.int64, copy=False),
                                    kept_sums, confidence)
    # whole numbers as Python integers (`tolist` of a wide unsigned array, or the integers
    # an object array holds); a count of another kind made one, as `int(count)` there
    kept_counts = count_array[kept].tolist() if count_array.dtype.kind in "iu" else \
        [int(count) for count in count_array[kept].tolist()]
    return _clustered_of_lists(kept_counts, kept_sums.tolist(), confidence)


def _clustered_of_lists(counts: list[int], sums: list[float], confidence: float) -> Estimate:
    method = "cluster-robust t"
    n = sum(counts)
    if n == 0:
        return Estimate(None, None, None, None, 0, method)
    if not all(map(math.isfinite, sums)):
        total = next(total for total in sums if not math.isfinite(total))
        raise ValueError(f"statistics need finite numbers, got a sum of {total!r}")
    mean = math.fsum(sums) / n
    cluster_count = len(counts)
    if cluster_count < 2:
        return Estimate(mean, None, None, None, n, method)
    # `** 2` (the C library's pow), not `x * x`: the two differ in the last bit for
    # about one value in a thousand, and the estimate must not move
    squared = math.fsum((total - count * mean) ** 2
                        for count, total in zip(counts, sums, strict=True))
    return _clustered_estimate(mean, squared, n, cluster_count, confidence)


def _clustered_of_arrays(counts: Any, sums: Any, confidence: float) -> Estimate:
    """`_clustered_of_lists` of int64 counts and float64 sums, to the last bit: the
    residuals `total - count * mean` made side by side (numpy makes an int64 a float and
    multiplies and subtracts as Python does, each step rounded once), squared by the C
    library's pow as there (`float_power` calls it; `power` and `x * x` differ in the last
    bit for about one value in a thousand), and summed as `math.fsum` sums them
    (`exact_sum`); where a square overflows, Python's pow squares them one by one and
    raises as there."""
    method = "cluster-robust t"
    low_count, high_count = (int(counts.min()), int(counts.max())) if len(counts) else (0, 0)
    n = (int(counts.sum()) if max(-low_count, high_count) <= _INT64_MAX // max(len(counts), 1)
         else sum(counts.tolist()))
    if n == 0:
        return Estimate(None, None, None, None, 0, method)
    finite = np.isfinite(sums)
    if not finite.all():
        total = float(sums[np.flatnonzero(~finite)[0]])
        raise ValueError(f"statistics need finite numbers, got a sum of {total!r}")
    mean = exact_sum(sums) / n
    cluster_count = len(counts)
    if cluster_count < 2:
        return Estimate(mean, None, None, None, n, method)
    with np.errstate(over="ignore", invalid="ignore"):
        residuals = sums - counts * mean
        squares = np.float_power(residuals, 2.0)  # the C library's pow, as Python's `**`
    if not np.isfinite(squares).all():  # where Python's pow raises, or gives inf or nan
        squares = list(map(pow, residuals.tolist(), itertools.repeat(2)))
    squared = exact_sum(squares) if isinstance(squares, np.ndarray) else math.fsum(squares)
    return _clustered_estimate(mean, squared, n, cluster_count, confidence)


_INT64_MAX = 2**63 - 1


def _clustered_estimate(mean: float, squared: float, n: int, cluster_count: int,
                        confidence: float) -> Estimate:
    se = math.sqrt(cluster_count / (cluster_count - 1) * squared) / n
    low, high = _t_interval(mean, se, cluster_count - 1, confidence)
    return Estimate(mean, se, min(low, mean), max(high, mean), n, "cluster-robust t")


def _wilson_bounds(successes: int, trials: int, confidence: float) -> tuple[float, float]:
    """Wilson's two-sided score interval (Newcombe 1998, method 3) of `successes` in
    `trials`: the same operations on the same types as `scipy.stats.binomtest(successes,
    trials).proportion_ci(confidence, method="wilson")`, so the same bounds to the last
    bit (a property test holds them equal), without importing scipy.stats (about a
    second, which a report of a very wide suite needs for nothing else) or computing
    the test's p-value."""
    rate = successes / trials
    z = scipy_special.ndtri(0.5 + 0.5 * confidence)
    denominator = 2 * (trials + z**2)
    centre = (2 * trials * rate + z**2) / denominator
    half_width = z / denominator * math.sqrt(4 * trials * rate * (1 - rate) + z**2)
    low = 0.0 if successes == 0 else centre - half_width
    high = 1.0 if successes == trials else centre + half_width
    return float(low), float(high)


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> Estimate:
    """Pass rate `successes / trials` with its Wilson score interval.

    `se` is the binomial `sqrt(p (1 - p) / n)` at the observed rate; the interval is
    Wilson's, which stays inside [0, 1] and is honest at 0/n and n/n where the normal
    interval collapses. No trials: everything None.
    """
    _check_confidence(confidence)
    if isinstance(successes, bool) or isinstance(trials, bool):
        raise ValueError("successes and trials must be counts, not booleans")
    successes, trials = int(successes), int(trials)
    if trials < 0 or successes < 0 or successes > trials:
        raise ValueError(f"need 0 <= successes <= trials, got {successes}/{trials}")
    if trials == 0:
        return Estimate(None, None, None, None, 0, "wilson")
    rate = successes / trials
    low, high = _wilson_bounds(successes, trials, confidence)
    # Clamp float dust so the interval always contains the observed rate.
    low = min(low, rate)
    high = max(high, rate)
    se = math.sqrt(rate * (1.0 - rate) / trials)
    return Estimate(rate, se, max(0.0, low), min(1.0, high), trials, "wilson")


def _bootstrap_random_argument(seed: int) -> dict[str, object]:
    # scipy renamed `random_state` to `rng` in 1.15; pass whichever this scipy knows.
    generator = np.random.default_rng(seed)
    if "rng" in inspect.signature(scipy_stats.bootstrap).parameters:
        return {"rng": generator}
    return {"random_state": generator}


CLOSED_FORM_JACKKNIFE_ABOVE = 1_000
"""Above this many values `bootstrap_mean_ci` computes BCa's acceleration from the
jackknife means in closed form. scipy's BCa recomputes the mean of each of the n
leave-one-out samples: n x n work, 4.6 s for 40,000 values (a report of a suite of tens
of thousands of tasks asks for it once per arm); the closed form is linear. At or below
it, scipy's own BCa, as before (the two agree to rounding: tests/core/test_stats.py)."""


def _bca_of_mean(data: Any, distribution: Any, confidence: float) -> tuple[float, float]:
    """The BCa interval of the mean of `data` from its bootstrap `distribution`, by the
    steps of scipy's BCa (Efron and Tibshirani, 14.3 and 15.4; `scipy.stats.bootstrap`)
    with the leave-one-out means taken in closed form, `(sum - x_i) / (n - 1)`.
    Non-finite bounds (a degenerate distribution) are returned as they are, for the
    caller's fallback."""
    n = data.shape[-1]
    alpha = (1.0 - confidence) / 2.0
    theta_hat = np.mean(data)
    below = np.count_nonzero(distribution < theta_hat)
    at_or_below = np.count_nonzero(distribution <= theta_hat)
    z0 = scipy_special.ndtri((below + at_or_below) / (2 * distribution.shape[-1]))
    leave_one_out = (np.sum(data) - data) / (n - 1)
    spread = (n - 1) * (np.mean(leave_one_out) - leave_one_out)
    a_hat = (np.sum(spread**3) / n**3) / 6.0 / (np.sum(spread**2) / n**2) ** 1.5
    z_alpha = float(scipy_special.ndtri(alpha))
    levels = []
    for z in (z_alpha, -z_alpha):
        shifted = z0 + z
        levels.append(float(scipy_special.ndtr(z0 + shifted / (1 - a_hat * shifted))))
    if not all(math.isfinite(level) for level in levels):
        return math.nan, math.nan
    quantile = getattr(scipy_stats, "quantile", None)  # scipy >= 1.15, what bootstrap uses
    if quantile is not None:
        bounds = quantile(distribution, np.asarray(levels))
    else:
        bounds = np.percentile(distribution, np.asarray(levels) * 100)
    return float(bounds[0]), float(bounds[1])


def _mean_unless_degenerate(numbers: list[float], method: str) -> tuple[float, Estimate | None]:
    """The mean of `numbers`, and the whole estimate where no interval can be drawn (the
    same for every interval method): none (no mean), one value (a mean, no interval),
    all equal (a zero-width interval at the mean); None otherwise."""
    n = len(numbers)
    if n == 0:
        return 0.0, Estimate(None, None, None, None, 0, method)
    mean = exact_mean(numbers)
    if n < 2:
        return mean, Estimate(mean, None, None, None, n, method)
    if min(numbers) == max(numbers):
        return mean, Estimate(mean, 0.0, mean, mean, n, method)
    return mean, None


def bootstrap_mean_ci(values: Iterable[float], confidence: float = 0.95,
                      resamples: int = 2000, seed: int = 0) -> Estimate:
    """Mean with a bias-corrected and accelerated (BCa) bootstrap interval.

    For skewed quantities (tokens, durations) where a t interval would be misleading.
    Deterministic for a given seed. `se` is the standard deviation of the bootstrap
    distribution. All-equal values give a zero-width interval at the mean.
    """
    _check_confidence(confidence)
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    numbers = _floats(values)
    n = len(numbers)
    method = "bootstrap BCa"
    mean, settled = _mean_unless_degenerate(numbers, method)
    if settled is not None:
        return settled
    # Batches of about a million resampled values keep memory flat and run several
    # times faster than one huge array; the batch depends only on n, so a seed still
    # fixes the answer.
    batch = max(1, min(resamples, 1_000_000 // n))
    data = np.asarray(numbers)
    if n > CLOSED_FORM_JACKKNIFE_ABOVE:
        distribution = _bootstrap_distribution_of_mean(data, resamples, batch, seed)
        low, high = _bca_of_mean(data, distribution, confidence)
        se = float(np.std(distribution, ddof=1))
    else:
        result = scipy_stats.bootstrap(
            (data,), np.mean, n_resamples=resamples, vectorized=True, batch=batch,
            confidence_level=confidence, method="BCa", **_bootstrap_random_argument(seed))
        distribution = np.asarray(result.bootstrap_distribution)
        low, high = (float(result.confidence_interval.low),
                     float(result.confidence_interval.high))
        se = float(result.standard_error)
    if not (math.isfinite(low) and math.isfinite(high)):
        # BCa needs variety among the jackknife means; when it cannot, fall back to the
        # plain percentile interval over the same resamples and say so.
        method = "bootstrap percentile"
        tail = (1.0 - confidence) / 2.0
        low = float(np.quantile(distribution, tail))
        high = float(np.quantile(distribution, 1.0 - tail))
    return Estimate(mean, se, min(low, mean), max(high, mean), n, method)


def bootstrap_mean_cis(samples: Sequence[Iterable[float]], confidence: float = 0.95,
                       resamples: int = 2000, seed: int = 0) -> list[Estimate]:
    """`bootstrap_mean_ci` of each of `samples`, the same estimates, computed side by side
    on the machine's cores: each has its own generator from `seed`, and numpy's
    resampling lets go of the interpreter lock, so threads run them at once (a report
    of a suite of 333,000 tasks bootstraps each arm's task means: 2,000 x 333,000
    values each, seconds apiece)."""
    listed = [list(values) for values in samples]
    workers = min(len(listed), os.cpu_count() or 1)
    if workers < 2:
        return [bootstrap_mean_ci(values, confidence, resamples, seed) for values in listed]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(
            lambda values: bootstrap_mean_ci(values, confidence, resamples, seed), listed))


ANALYTIC_INTERVAL_ABOVE = 5_000
"""Above this many values `skewed_mean_ci` gives the ABC interval (`abc_mean_ci`, BCa's
analytic approximation) instead of the 2,000-resample BCa bootstrap. A report asks it for
the mean over tasks of each arm, and the bootstrap costs n x 2,000 draws: 9.4 s for the
three arms of a suite of 333,334 tasks. For the mean the two intervals estimate the same
endpoints (DiCiccio and Efron 1992, 1996: both second-order accurate, their endpoints
agreeing to O(n^-3/2); the bootstrap's also move by its Monte-Carlo noise, O(B^-1/2));
`tests/core/test_stats.py` holds them together at this n on skewed, heavy-tailed and
zero-heavy data (lognormal sigma 2, 60 % zeros, Pareto 1.5): the ABC endpoints lie within
two standard deviations of the BCa endpoints' spread over 20 seeds (measured within 0.6
already at 1,000 values; a plain t interval is not: the skewness moves the endpoints).
5,000 leaves every ordinary suite (and issue 12's 200 tasks) on the bootstrap, where its
cost is a fraction of a second."""


def abc_mean_ci(values: Iterable[float], confidence: float = 0.95) -> Estimate:
    """Mean with the ABC interval ("approximate bootstrap confidence", DiCiccio and Efron
    1992; Efron and Tibshirani 1993, 14.4 and 22.6): the BCa interval computed
    analytically, with no resampling, for a sample too wide to bootstrap cheaply.

    For the mean every ABC quantity has a closed form: the empirical influence of value i
    is `u_i = x_i - mean`; the standard error `sigma = sqrt(sum u^2) / n` (the plug-in
    one, which the bootstrap's standard deviation estimates); the acceleration
    `a = sum u^3 / (6 (sum u^2)^1.5)`; the bias correction `z0 = a` (the mean is linear:
    no bias and no curvature term); each endpoint `mean + sigma * w / (1 - a w)^2` with
    `w = z0 + z_alpha`. `se` is that `sigma`. Degenerate inputs as `bootstrap_mean_ci`."""
    _check_confidence(confidence)
    numbers = _floats(values)
    n = len(numbers)
    method = "ABC"
    mean, settled = _mean_unless_degenerate(numbers, method)
    if settled is not None:
        return settled
    data = np.asarray(numbers, dtype=np.float64)
    # the influence values' moments taken of the values scaled to at most 1 in size
    # (values near the float range would overflow a difference, let alone a cube);
    # `a` does not depend on the scale, `sigma` is scaled back last
    scale = max(abs(float(data.min())), abs(float(data.max())))
    scaled = data / scale - mean / scale
    squares = scaled * scaled
    second = exact_sum(squares)
    third = exact_sum(squares * scaled)
    sigma = scale * (math.sqrt(second) / n)
    acceleration = third / (6.0 * second ** 1.5)
    z_alpha = float(scipy_special.ndtri((1.0 - confidence) / 2.0))
    ends = []
    for z in (z_alpha, -z_alpha):
        w = acceleration + z
        ends.append(mean + sigma * w / (1.0 - acceleration * w) ** 2)
    low, high = min(ends), max(ends)
    return Estimate(mean, sigma, min(low, mean), max(high, mean), n, method)


def skewed_mean_ci(values: Iterable[float], confidence: float = 0.95, resamples: int = 2000,
                   seed: int = 0) -> Estimate:
    """Mean of a skewed quantity with a second-order accurate interval: the BCa bootstrap
    (`bootstrap_mean_ci`, the same estimate) up to `ANALYTIC_INTERVAL_ABOVE` values, its
    analytic approximation (`abc_mean_ci`, method "ABC") above. `Estimate.method` says
    which."""
    numbers = list(values)
    if len(numbers) > ANALYTIC_INTERVAL_ABOVE:
        return abc_mean_ci(numbers, confidence)
    return bootstrap_mean_ci(numbers, confidence, resamples, seed)


def skewed_mean_cis(samples: Sequence[Iterable[float]], confidence: float = 0.95,
                    resamples: int = 2000, seed: int = 0) -> list[Estimate]:
    """`skewed_mean_ci` of each of `samples`, the bootstrapped ones side by side
    (`bootstrap_mean_cis`), the wide ones analytic."""
    listed = [list(values) for values in samples]
    narrow = [values for values in listed if len(values) <= ANALYTIC_INTERVAL_ABOVE]
    booted = iter(bootstrap_mean_cis(narrow, confidence, resamples, seed))
    return [abc_mean_ci(values, confidence) if len(values) > ANALYTIC_INTERVAL_ABOVE
            else next(booted) for values in listed]


def _bootstrap_distribution_of_mean(data: Any, resamples: int, batch: int, seed: int) -> Any:
    """The bootstrap distribution `scipy.stats.bootstrap` makes of `np.mean` (vectorized,
    `batch` resamples at a time, from `np.random.default_rng(seed)`), the same numbers
    to the last bit (tests/core/test_stats.py holds it to scipy's): the same draws
    (`integers(0, n, (batch, n))` per batch, as scipy's `rng_integers`), the same
    gather and the same mean along the last axis. Without scipy's general machinery
    around it: a third less time, in the loop a report of a wide suite spends seconds in."""
    n = data.shape[-1]
    generator = np.random.default_rng(seed)
    means = []
    for start in range(0, resamples, batch):
        drawn = generator.integers(0, n, (min(batch, resamples - start), n))
        means.append(np.mean(data[drawn], axis=-1))
    return np.concatenate(means)


# --------------------------------------------------------------------------- power


def minimum_detectable_effect(sd: float | None, n: int, alpha: float = 0.05,
                              power: float = 0.8) -> float | None:
    """Smallest true mean difference a two-sided one-sample (paired) t-test on `n`
    differences with standard deviation `sd` detects with probability `power`.

    Solved exactly with the noncentral t distribution (not the normal approximation
    `2.8 * sd / sqrt(n)`, which is too optimistic for a handful of tasks or seeds).
    None below two samples or without an `sd`; 0.0 when `sd` is 0.
    """
    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise ValueError(f"alpha and power must be between 0 and 1, got {alpha}, {power}")
    if sd is None or n < 2:
        return None
    if not math.isfinite(sd) or sd < 0:
        raise ValueError(f"sd must be a finite non-negative number, got {sd!r}")
    if sd == 0.0:
        return 0.0
    return float(_noncentrality_at_power(n - 1, alpha, power) * sd / math.sqrt(n))


@functools.lru_cache(maxsize=1024)
def _noncentrality_at_power(degrees_of_freedom: int, alpha: float, power: float) -> float:
    """The noncentrality at which the two-sided t-test at `alpha` reaches `power`: all
    `minimum_detectable_effect` solves for, whatever the spread. Kept per degrees of
    freedom and levels: a report of many arms asks it for every pair over the same
    tasks, each root a few milliseconds of scipy's noncentral t."""
    critical = float(scipy_stats.t.ppf(1.0 - alpha / 2.0, degrees_of_freedom))

    def power_minus_target(noncentrality: float) -> float:
        upper_tail = float(scipy_stats.nct.sf(critical, degrees_of_freedom, noncentrality))
        # The wrong-sign tail is negligible for a positive effect, and scipy's nct can
        # return NaN for it at one degree of freedom; NaN there means "about zero".
        lower_tail = float(scipy_stats.nct.cdf(-critical, degrees_of_freedom, noncentrality))
        if math.isnan(lower_tail):
            lower_tail = 0.0
        return upper_tail + lower_tail - power

    # Power rises with the noncentrality; the normal approximation is a lower bound.
    guess = _normal_quantiles_summed(alpha, power)
    upper = max(guess, 1.0) * 2.0
    while power_minus_target(upper) < 0.0:
        upper *= 2.0
    return float(optimize.brentq(power_minus_target, 0.0, upper, xtol=1e-10))


def mde_proportions(p: float | None, n: int, alpha: float = 0.05, power: float = 0.8,
                    two_sample: bool = True) -> float | None:
    """Smallest change in a pass rate, from `p`, detectable with `n` trials per group.

    Uses Cohen's arcsine effect size `h = 2 asin(sqrt p2) - 2 asin(sqrt p1)`: a two-sided
    test at `alpha` detects `|h| >= (z_{1-alpha/2} + z_power) * sqrt(k / n)` with `k = 2`
    when comparing two arms of `n` trials each (`two_sample`), `k = 1` against a fixed
    rate. The answer is the smaller of the upward and downward moves that stay inside
    [0, 1], as an absolute difference in rate. None when `p` is None, `n < 1`, or no
    change inside [0, 1] is detectable at this `n`.
    """
    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise ValueError(f"alpha and power must be between 0 and 1, got {alpha}, {power}")
    if p is None or n < 1:
        return None
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be a rate in [0, 1], got {p!r}")
    groups = 2 if two_sample else 1
    h = _normal_quantiles_summed(alpha, power) * math.sqrt(groups / n)
    angle = math.asin(math.sqrt(p))
    moves = []
    if angle + h / 2.0 <= math.pi / 2.0:
        moves.append(math.sin(angle + h / 2.0) ** 2 - p)
    if angle - h / 2.0 >= 0.0:
        moves.append(p - math.sin(angle - h / 2.0) ** 2)
    return min(moves) if moves else None


@functools.lru_cache(maxsize=64)
def _normal_quantiles_summed(alpha: float, power: float) -> float:
    """`z_{1-alpha/2} + z_power` (two scipy calls), once per pair of levels."""
    return float(scipy_stats.norm.ppf(1.0 - alpha / 2.0) + scipy_stats.norm.ppf(power))


# --------------------------------------------------------------------------- comparisons


def paired_difference(a: Mapping[Key, float], b: Mapping[Key, float],
                      confidence: float = 0.95) -> PairedComparison:
    """Paired analysis of `b[key] - a[key]` over the keys present in both.

    Keys measured on one side only are left out (never imputed); `n` says how many pairs
    remained, so a caller can show how much of either side the comparison covers.
    """
    _check_confidence(confidence)
    shared = [key for key in a if key in b]
    differences = _floats(float(b[key]) - float(a[key]) for key in shared)
    n = len(differences)
    if n == 0:
        return PairedComparison(0, None, None, None, None, None, None, None)
    mean_diff = exact_mean(differences)
    if n < 2:
        return PairedComparison(n, mean_diff, None, None, None, None, None, None)
    sd = statistics.stdev(differences)
    se = sd / math.sqrt(n)
    low, high = _t_interval(mean_diff, se, n - 1, confidence)
    if se == 0.0:
        # Every pair moved by exactly the same amount: no noise to test against.
        p_value = 1.0 if mean_diff == 0.0 else 0.0
    else:
        p_value = float(2.0 * scipy_stats.t.sf(abs(mean_diff / se), n - 1))
    return PairedComparison(n, mean_diff, sd, se, low, high, p_value,
                            minimum_detectable_effect(sd, n))


def paired_verdict(champion: Sequence[float], challenger: Sequence[float],
                   floor: float = 0.007, z: float = 1.96) -> PairedVerdict:
    """Does the challenger beat the champion over the same seeds, beyond noise?

    Per-seed differences `challenger[i] - champion[i]`; `se = stdev / sqrt(n)` (sample
    stdev); `band = max(floor, z * se)`; dethroned iff `mean_diff >= band`. The floor
    decides when the differences do not vary (se == 0).

    Refuses (ValueError): unequal lengths (the seeds are not the same), no seeds, and a
    single seed. With one seed there is no spread to estimate, so any band would be made
    up; treating se as 0 would let one lucky seed dethrone a champion by the floor alone.
    """
    champion_scores = _floats(champion)
    challenger_scores = _floats(challenger)
    if len(champion_scores) != len(challenger_scores):
        raise ValueError(f"paired verdict needs the same seeds for both: champion has "
                         f"{len(champion_scores)} scores, challenger {len(challenger_scores)}")
    n = len(champion_scores)
    if n == 0:
        raise ValueError("paired verdict needs at least one seed; none were scored")
    if n == 1:
        raise ValueError("paired verdict needs at least two seeds: one seed gives no "
                         "standard error, so no band can be set")
    if floor < 0 or z < 0:
        raise ValueError(f"floor and z must be non-negative, got {floor}, {z}")
    differences = [new - old for old, new in zip(champion_scores, challenger_scores, strict=True)]
    mean_diff = exact_mean(differences)
    se = statistics.stdev(differences) / math.sqrt(n)
    band = max(floor, z * se)
    return PairedVerdict(mean_diff=mean_diff, se=se, band=band,
                         dethroned=mean_diff >= band, n=n)
