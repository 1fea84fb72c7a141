"""Rung fidelity: did the server really run a rung's requests together?

A server that serialises requests passes a contamination test trivially, so every rung
reports what the server ran at once, judged from client timings alone:

- `peak_in_flight`: the largest number of replies whose streaming intervals
  (first content delta → last byte) overlap. Intervals are half-open [start, end), so
  two replies that merely touch (one ends as the next begins) are not concurrent; a reply
  always counts itself, even when its interval has zero length.
- `launch_skew_ms`: last send minus first send over all slots, in milliseconds.

Pure functions over recorded timings: no clock, no I/O.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Iterable, Sequence

from benchwarden.targets.replies import RequestOutcome


def peak_overlap(intervals: Iterable[tuple[float, float]]) -> int:
    """Largest number of half-open intervals covering one instant (0 for none)."""
    spans = [(start, max(start, end)) for start, end in intervals]
    if not spans:
        return 0
    starts = sorted(start for start, _ in spans)
    ends = sorted(end for _, end in spans)
    peak = 0
    for start, end in spans:
        # intervals begun by `start` minus those already over; a zero-length interval
        # is "over" at its own start, so it is added back for itself.
        active = bisect_right(starts, start) - bisect_right(ends, start)
        if end <= start:
            active += 1
        peak = max(peak, active)
    return peak


def streaming_interval(outcome: RequestOutcome) -> tuple[float, float] | None:
    """(first content delta, last byte) of a reply that streamed content, else None."""
    timings = outcome.timings
    if timings.first_content_at is None or timings.last_byte_at is None:
        return None
    return timings.first_content_at, timings.last_byte_at


@dataclass(frozen=True)
class RungFidelity:
    label: str
    concurrency: int
    repeat: int
    slots: int
    peak_in_flight: int
    launch_skew_ms: float | None

    @property
    def concurrent(self) -> bool:
        return self.peak_in_flight >= 2

    @property
    def not_concurrent_reason(self) -> str | None:
        # peak 0: nothing streamed at all, so every cell already says why it failed
        if self.peak_in_flight != 1:
            return None
        return f"rung {self.label} not concurrent: peak in flight {self.peak_in_flight}"

    def to_json_dict(self) -> dict[str, object]:
        return {"label": self.label, "concurrency": self.concurrency, "repeat": self.repeat,
                "slots": self.slots, "peak_in_flight": self.peak_in_flight,
                "launch_skew_ms": self.launch_skew_ms,
                "observed_parallelism": self.peak_in_flight}


def launch_skew_ms(outcomes: Sequence[RequestOutcome]) -> float | None:
    sends = [outcome.timings.sent_at for outcome in outcomes]
    if not sends:
        return None
    return (max(sends) - min(sends)) * 1000.0


def rung_fidelity(label: str, concurrency: int, repeat: int,
                  outcomes: Sequence[RequestOutcome]) -> RungFidelity:
    """Fidelity of one rung from ALL its slots (ballast included)."""
    intervals = [span for span in map(streaming_interval, outcomes) if span is not None]
    return RungFidelity(label, concurrency, repeat, len(outcomes), peak_overlap(intervals),
                        launch_skew_ms(outcomes))
