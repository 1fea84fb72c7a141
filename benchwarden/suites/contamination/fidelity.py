"""Rung fidelity: did the rung run as planned, all its requests served and together?

A rung can only speak to contamination when every request it sent was answered and the
server really ran them at once. So every rung reports, from its recorded outcomes alone:

- `requests_sent`: every request the rung sent, scored and ballast (`max(c, probes)`,
  or twice the probes in the `cancel` scenario), which can exceed the label's `c`.
- `requests_failed` and `failures`: the requests that failed, counted by kind
  (`failure_kind`: "HTTP 500", "transport: Too many open files", "timeout", ...). Any
  failed request, scored or ballast, means the rung did not run as planned (a server
  that refuses the requests beyond its capacity would otherwise pass on the few it
  served), so every cell of the rung is unmeasured with `unmeasured_reason`. A ballast
  request the client cut on purpose at its cancel point (the `cancel` scenario) is the
  plan, not a failure; cut anywhere else, or failing otherwise, it is one.
- `peak_in_flight`: the largest number of replies whose streaming intervals
  (first content delta → last byte) overlap: what the server ran together, its
  observed parallelism. Intervals are half-open [start, end), so two replies that
  merely touch are not concurrent; a reply always counts itself, even when its interval
  has zero length. A peak of 1 makes the rung's cells unmeasured.
- `launch_skew_ms`: last send minus first send over all requests, in milliseconds (a
  send is when the request's body was written: `Timings.sent_at`).

`describe()` is the one plain sentence the terminal prints; `reading()` the shorter one
the page's fidelity table prints, and `state` the word both views colour by (red when
the rung's cells are unmeasured, yellow when the server ran fewer at once than the
label asked). The views compute none of these: they come with the report.

Pure functions over recorded outcomes: no clock, no I/O.
"""

from __future__ import annotations

import errno
import os
import re
from array import array
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from benchwarden.targets.replies import RequestOutcome, Timings


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
    return streamed_span(outcome.timings)


def streamed_span(timings: Timings) -> tuple[float, float] | None:
    """`streaming_interval` from an outcome's timings alone."""
    if timings.first_content_at is None or timings.last_byte_at is None:
        return None
    return timings.first_content_at, timings.last_byte_at


# -- failures ----------------------------------------------------------------------------
# The operating system's own messages ("Too many open files", "Connection reset by
# peer"): an error that carries one is a transport failure of that kind. Longest first,
# so that a message containing a shorter one is named by the longer.
_OS_MESSAGES = tuple(sorted({os.strerror(code) for code in errno.errorcode}
                            - {"Success", "Unknown error"}, key=len, reverse=True))
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)
_NUMBER = re.compile(r"\d[\d,.]*")
# (what the client's error line says, the kind it is counted as); the first match wins
_KNOWN_KINDS = (
    ("server error in stream", "in-band server error"),  # first: it quotes the server
    ("timed out", "timeout"),
    ("stalled", "stall"),
    ("stream ended without", "truncated stream"),
    ("connection refused", "connection refused"),
    ("closed the connection", "connection closed by the server"),
    ("no connection within", "connect timeout"),
    ("invalid json", "invalid JSON frame"),
    ("not a chat-completion chunk", "invalid frame"),
    ("instead of an event stream", "not an event stream"),
    ("(--max-reply-bytes)", "reply over the byte cap"),
    ("chunks for max_tokens", "too many chunks for max_tokens"),
    ("exceeded", "reply over a cap"),
)


def failure_kind(outcome: RequestOutcome) -> str:
    """A short, stable name for how a request failed, so failures can be counted by kind.

    An HTTP status other than 200 is `HTTP <status>`; an operating-system error is
    `transport: <its message>`; the client's known failures have fixed names; anything
    else is the first words of its error line with URLs and numbers blanked out.
    """
    if outcome.extra.get("cancelled"):
        return "cancelled off plan"
    if outcome.status is not None and outcome.status != 200:
        return f"HTTP {outcome.status}"
    error = outcome.error or ("no reply" if outcome.reply is None else "")
    for message in _OS_MESSAGES:  # as the client quotes it: "[Errno 24] ...", "(...)"
        if f"] {message}" in error or f"({message}" in error:
            return f"transport: {message}"
    lowered = error.lower()
    for needle, kind in _KNOWN_KINDS:
        if needle in lowered:
            return kind
    general = _NUMBER.sub("N", _URL.sub("URL", error))
    return " ".join(general.split()[:6]) or "unknown error"


def request_failed(outcome: RequestOutcome, cancel_planned: bool) -> bool:
    """Did this request of a rung fail? A planned cut at the cancel point did not."""
    return failed_as_recorded(outcome.ok, outcome.extra.get("cancelled"), cancel_planned)


def failed_as_recorded(ok: bool, cancelled: object, cancel_planned: bool) -> bool:
    """`request_failed` from the parts of an outcome it reads (`RequestOutcome.ok`, its
    extra's `cancelled`), for a reader that holds those and not the outcome."""
    if cancel_planned and cancelled:
        return False
    return not ok or bool(cancelled)


# -- one rung ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RungFidelity:
    label: str
    concurrency: int  # the label's c
    repeat: int
    requests_sent: int  # every request of the rung, scored and ballast
    peak_in_flight: int  # the server's observed parallelism
    launch_skew_ms: float | None
    requests_failed: int = 0
    failures: tuple[tuple[str, int], ...] = ()  # (kind, count), most frequent first

    @property
    def name(self) -> str:
        return self.label if self.repeat == 1 else f"{self.label} #{self.repeat}"

    @property
    def concurrent(self) -> bool:
        return self.peak_in_flight >= 2

    @property
    def failure_reason(self) -> str | None:
        """'rung c32: 28 of 32 requests failed: HTTP 500 ×28', or None."""
        if not self.requests_failed:
            return None
        kinds = ", ".join(f"{kind} ×{count}" for kind, count in self.failures)
        return (f"rung {self.name}: {self.requests_failed} of {self.requests_sent} "
                f"requests failed: {kinds}")

    @property
    def not_concurrent_reason(self) -> str | None:
        # peak 0: nothing streamed at all, so every cell already says why it failed
        if self.peak_in_flight != 1:
            return None
        return f"rung {self.name} not concurrent: peak in flight {self.peak_in_flight}"

    @property
    def unmeasured_reason(self) -> str | None:
        """Why none of this rung's cells can be compared (failures first), or None."""
        return self.failure_reason or self.not_concurrent_reason

    @property
    def exceeds_label(self) -> bool:
        return self.requests_sent > self.concurrency

    def describe(self) -> str:
        """One plain sentence: what the rung sent, what the server ran at once, why not."""
        sent = f"{self.requests_sent} requests sent in the rung"
        if self.exceeds_label:
            sent += (f" (more than the {self.concurrency} its label names: every probe "
                     "runs in every rung)")
        peak = self.peak_in_flight
        if self.requests_sent == 0:
            ran = "nothing recorded"
        elif peak == 0:
            ran = "no reply streamed"
        elif peak == 1:
            ran = "peak in flight 1: the server ran them one at a time"
        elif peak < self.concurrency:
            ran = (f"peak in flight {peak}: the server's observed parallelism (the most "
                   f"it streamed at once), below the label's {self.concurrency}")
        elif peak < self.requests_sent:
            ran = (f"peak in flight {peak} of {self.requests_sent}: the most the server "
                   "streamed at once")
        else:
            ran = f"peak in flight {peak}: all ran together"
        skew = ("" if self.launch_skew_ms is None
                else f"; launch skew {self.launch_skew_ms:.1f} ms")
        verdict = ""
        if self.failure_reason:
            kinds = ", ".join(f"{kind} ×{count}" for kind, count in self.failures)
            verdict = (f"; {self.requests_failed} of {self.requests_sent} requests failed "
                       f"({kinds}): its cells are unmeasured")
        elif self.not_concurrent_reason:
            verdict = "; not concurrent: its cells are unmeasured"
        return f"rung {self.name}: {sent}; {ran}{skew}{verdict}"

    @property
    def state(self) -> str:
        """`unmeasured` (failed requests, or not concurrent), `below_label` (the server's
        observed parallelism is under the label's c) or `as_labelled`."""
        if self.unmeasured_reason or (self.requests_sent and self.peak_in_flight < 2):
            return "unmeasured"
        if self.peak_in_flight < self.concurrency:
            return "below_label"
        return "as_labelled"

    def reading(self) -> str:
        """What the page's fidelity table says of the rung, in a few words."""
        peak, requested, sent = self.peak_in_flight, self.concurrency, self.requests_sent
        if self.requests_failed:
            text = f"{self.unmeasured_reason or 'requests failed'}: cells unmeasured"
        elif peak <= 1:
            text = "not concurrent: cells unmeasured"
        elif peak < requested:
            text = (f"the server ran at most {peak} at once: its observed parallelism, "
                    f"below the label's {requested}")
        elif peak < sent:
            text = f"ran {peak} of {sent} at once"
        else:
            text = "all ran together"
        if self.exceeds_label:
            text += (f" · sent {sent} requests, more than the {requested} its label names "
                     "(every probe runs in every rung)")
        return text

    def to_json_dict(self) -> dict[str, object]:
        return {"label": self.label, "concurrency": self.concurrency, "repeat": self.repeat,
                "requests_sent": self.requests_sent, "requests_failed": self.requests_failed,
                "failures": dict(self.failures), "peak_in_flight": self.peak_in_flight,
                "observed_parallelism": self.peak_in_flight,
                "launch_skew_ms": self.launch_skew_ms,
                "unmeasured_reason": self.unmeasured_reason, "description": self.describe(),
                "state": self.state, "reading": self.reading()}


def launch_skew_ms(outcomes: Sequence[RequestOutcome]) -> float | None:
    sends = [outcome.timings.sent_at for outcome in outcomes]
    if not sends:
        return None
    return (max(sends) - min(sends)) * 1000.0


def rung_fidelity(label: str, concurrency: int, repeat: int,
                  outcomes: Sequence[RequestOutcome],
                  cancel_planned: Sequence[bool] = ()) -> RungFidelity:
    """Fidelity of one rung from ALL its requests (ballast included); `cancel_planned[i]`
    says request i was to be cut by the client (missing entries: not planned)."""
    intervals = [span for span in map(streaming_interval, outcomes) if span is not None]
    planned = list(cancel_planned) + [False] * (len(outcomes) - len(cancel_planned))
    kinds = Counter(failure_kind(outcome) for outcome, cut in zip(outcomes, planned, strict=False)
                    if request_failed(outcome, cut))
    failures = tuple(sorted(kinds.items(), key=lambda item: (-item[1], item[0])))
    return RungFidelity(label, concurrency, repeat, len(outcomes), peak_overlap(intervals),
                        launch_skew_ms(outcomes), sum(kinds.values()), failures)


@dataclass(slots=True)
class RungTally:
    """One rung's fidelity counted a request at a time, keeping only numbers: its
    streaming intervals (two floats a request, for the peak in flight), its first and
    last send, and its failures by kind. `fidelity()` equals `rung_fidelity` over the
    same requests, so a report can stream a huge store without holding any outcome."""

    spans: array[float] = field(default_factory=lambda: array("d"))
    """Each streamed request's start and end, two numbers a request (one array: a
    report read from every record of a soak of rungs of two holds half a million)."""
    first_send: float | None = None
    last_send: float | None = None
    sent: int = 0
    failures: Counter[str] | None = None
    """Failed requests by kind (None: none failed yet)."""
    peak_in_flight: int | None = None
    """The peak in flight when it was counted already (a tally restored from the run
    end's per-rung summary, `digest.RungDigest`, keeps no intervals); None: computed
    from `starts` and `ends`."""

    def add(self, outcome: RequestOutcome, cancel_planned: bool) -> bool:
        """Count one request of the rung; whether it failed."""
        failed = request_failed(outcome, cancel_planned)
        self.count(outcome.timings, failure_kind(outcome) if failed else None)
        return failed

    def count(self, timings: Timings, failure: str | None) -> None:
        """Count one request of the rung from its timings and, when it failed, its
        `failure_kind` (what `add` reads of an outcome, for a reader that holds no
        outcome)."""
        self.sent += 1
        span = streamed_span(timings)
        if span is not None:
            self.spans.extend(span)
        sent_at, first_send, last_send = timings.sent_at, self.first_send, self.last_send
        # as min() and max() choose: the earlier value unless the new one is beyond it
        if first_send is None or sent_at < first_send:
            self.first_send = sent_at
        if last_send is None or sent_at > last_send:
            self.last_send = sent_at
        if failure is not None:
            if self.failures is None:
                self.failures = Counter()
            self.failures[failure] += 1

    def fidelity(self, label: str, concurrency: int, repeat: int) -> RungFidelity:
        failures = tuple(sorted((self.failures or {}).items(),
                                key=lambda item: (-item[1], item[0])))
        skew = (None if self.first_send is None or self.last_send is None
                else (self.last_send - self.first_send) * 1000.0)
        spans = self.spans
        peak = (peak_overlap(zip(spans[0::2], spans[1::2], strict=True))
                if self.peak_in_flight is None else self.peak_in_flight)
        return RungFidelity(label, concurrency, repeat, self.sent, peak, skew,
                            sum(count for _, count in failures), failures)
