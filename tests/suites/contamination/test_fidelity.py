"""Rung fidelity arithmetic: peak in flight and launch skew from client timings."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from benchwarden.suites.contamination.fidelity import launch_skew_ms, peak_overlap, rung_fidelity
from benchwarden.targets.replies import RequestOutcome, Timings

times = st.floats(0, 1000, allow_nan=False)
intervals = st.lists(st.tuples(times, st.floats(0, 50, allow_nan=False))
                     .map(lambda t: (t[0], t[0] + t[1])), max_size=40)


def brute_force_peak(spans):
    """Count at every start point (half-open intervals; a span counts itself)."""
    best = 0
    for i, (start, _) in enumerate(spans):
        count = sum(1 for j, (s, e) in enumerate(spans) if j == i or (s <= start < e))
        best = max(best, count)
    return best


@settings(deadline=None)  # a loaded CI machine must not turn slowness into failure
@given(intervals)
def test_peak_matches_brute_force_and_is_bounded_by_the_slots(spans):
    peak = peak_overlap(spans)
    assert peak == brute_force_peak(spans)
    assert peak <= len(spans)
    assert (peak == 0) == (not spans)


@settings(deadline=None)  # a loaded CI machine must not turn slowness into failure
@given(st.lists(st.floats(0.001, 10), min_size=1, max_size=30),
       st.lists(st.floats(0, 10), min_size=30, max_size=30))
def test_disjoint_intervals_peak_at_one(lengths, gaps):
    spans, cursor = [], 0.0
    for length, gap in zip(lengths, gaps):
        spans.append((cursor, cursor + length))
        cursor += length + gap  # touching (gap 0) is not overlapping
    assert peak_overlap(spans) == 1


@settings(deadline=None)  # a loaded CI machine must not turn slowness into failure
@given(st.integers(1, 60), times, st.floats(0.001, 5))
def test_a_common_instant_counts_every_interval(count, start, length):
    spans = [(start + i * length / (2 * count), start + length + i) for i in range(count)]
    assert peak_overlap(spans) == count


@settings(deadline=None)  # a loaded CI machine must not turn slowness into failure
@given(st.lists(times, min_size=1, max_size=30))
def test_launch_skew_is_last_minus_first_send(sends):
    outcomes = [RequestOutcome(Timings(sent_at=t)) for t in sends]
    assert launch_skew_ms(outcomes) == (max(sends) - min(sends)) * 1000.0
    fidelity = rung_fidelity("c4", 4, 1, outcomes)
    assert fidelity.peak_in_flight == 0 and not fidelity.concurrent  # nothing streamed


def test_failed_requests_do_not_count_as_in_flight():
    streamed = RequestOutcome(Timings(0.0, 0.1, 0.1, 2.0))
    never = RequestOutcome(Timings(0.0), error="connection refused")
    fidelity = rung_fidelity("c2", 2, 1, [streamed, never])
    assert fidelity.peak_in_flight == 1
    assert fidelity.not_concurrent_reason == "rung c2 not concurrent: peak in flight 1"
