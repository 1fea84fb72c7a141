"""Rung fidelity arithmetic: peak in flight and launch skew from client timings."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

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
    for length, gap in zip(lengths, gaps, strict=False):
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


# -- what a rung says about itself ---------------------------------------------------------
def streamed(start: float, end: float) -> RequestOutcome:
    return RequestOutcome(Timings(start, start, start, end), error=None,
                          reply=_reply())


def _reply():
    from benchwarden.targets.replies import Reply
    return Reply("", "text", (), "stop", 20, True)


def test_a_rung_sending_more_than_its_label_says_so():
    fit = rung_fidelity("c2", 2, 1, [streamed(0, 1)] * 4)
    assert fit.requests_sent == 4 and fit.exceeds_label
    assert fit.describe().startswith(
        "rung c2: 4 requests sent in the rung (more than the 2 its label names")
    assert "peak in flight 4: all ran together" in fit.describe()


def test_a_peak_below_the_label_is_the_servers_observed_parallelism():
    waves = [streamed(i // 6, i // 6 + 1) for i in range(32)]  # six at a time
    fit = rung_fidelity("c32", 32, 1, waves)
    assert fit.peak_in_flight == 6 and not fit.exceeds_label
    assert "peak in flight 6: the server's observed parallelism" in fit.describe()
    assert "below the label's 32" in fit.describe()
    assert fit.unmeasured_reason is None


def test_failures_are_stated_in_the_rung_sentence_and_its_json():
    outcomes = [streamed(0, 1)] * 6 + [RequestOutcome(Timings(0.0), error="HTTP 500 ...",
                                                      status=500)] * 26
    fit = rung_fidelity("c32", 32, 1, outcomes)
    assert fit.failure_reason == "rung c32: 26 of 32 requests failed: HTTP 500 ×26"
    assert fit.describe().endswith(
        "26 of 32 requests failed (HTTP 500 ×26): its cells are unmeasured")
    data = fit.to_json_dict()
    assert data["requests_sent"] == 32 and data["requests_failed"] == 26
    assert data["failures"] == {"HTTP 500": 26} and "slots" not in data
    assert data["unmeasured_reason"] == fit.failure_reason
    assert data["description"] == fit.describe()


def test_a_serialised_rung_says_one_at_a_time():
    fit = rung_fidelity("c4", 4, 2, [streamed(0, 1), streamed(1, 2)])
    assert "peak in flight 1: the server ran them one at a time" in fit.describe()
    assert fit.unmeasured_reason == "rung c4 #2 not concurrent: peak in flight 1"
