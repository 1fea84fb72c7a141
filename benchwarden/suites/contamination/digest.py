"""Per-rung summaries kept in a contamination run's end, so a report need not read every request.

Of a rung's ballast requests (a c512 rung: 508 of them against 4 scored ones, the bulk
of a big run) a report reads only its fidelity (requests sent, peak in flight, first and
last send, failures by kind) and its requests counted by status. The driver counts
these from the records it has just appended, with the report's own counting
(`report.digest_of`), and writes them into the run end's summary under `rungs` (the end
is in the chain, so the digests are as tamper-evident as the records). A report then
reads a digested rung's scored requests only, and its other requests only if it lists
the rung (`report.build_report`).

Invariants:
- A digest says nothing its records do not: it is counted from those records by the
  code the full pass runs. The report checks each digest's request count against the
  store's count of the rung's records (a rung whose count differs is read from its
  records, and a warning names it) and recounts every rung it lists from its records
  (any difference: the whole report is read from the records, with a warning).
- A missing digest (a store written before them, a run killed before its end) means
  the rung's records are read as before: the report is the same either way.
- Plain JSON: pairs in lists where order matters (statuses in the order first read),
  since the store encodes an end with its keys sorted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from benchwarden.suites.contamination.fidelity import RungTally

SUMMARY_KEY = "rungs"
"""The run end's summary key holding the run's rung digests."""


class RungDigest(msgspec.Struct, frozen=True, kw_only=True):
    """What a report reads of one rung's requests beyond its scored ones."""

    leg: str
    """The rung's label (`c64`)."""
    repeat: int
    """Its repetition."""
    sent: int
    """Requests recorded in the rung, scored and ballast."""
    peak_in_flight: int
    """The most replies streaming at once (`fidelity.peak_overlap`)."""
    first_send: float | None
    """The earliest send of its requests."""
    last_send: float | None
    """The latest send of its requests."""
    failures: list[tuple[str, int]]
    """Failed requests by kind, most frequent first (`RungFidelity.failures`)."""
    statuses: list[tuple[str, int]]
    """Requests by stored status (`ok`, `error`, `cancelled`), in the order first read."""

    @property
    def key(self) -> tuple[str, int]:
        return (self.leg, self.repeat)

    def tally(self) -> RungTally:
        """The rung's tally as the report's full pass would have counted it (its
        intervals not kept: the peak is)."""
        return RungTally(first_send=self.first_send, last_send=self.last_send, sent=self.sent,
                         failures=Counter(dict(self.failures)),
                         peak_in_flight=self.peak_in_flight)


def digest_from(leg: str, repeat: int, tally: RungTally,
                statuses: Iterable[tuple[str, int]]) -> RungDigest:
    """The digest of a rung counted into `tally`, with its requests by status."""
    fidelity = tally.fidelity(leg, 0, repeat)
    return RungDigest(leg=leg, repeat=repeat, sent=tally.sent,
                      peak_in_flight=fidelity.peak_in_flight, first_send=tally.first_send,
                      last_send=tally.last_send, failures=list(fidelity.failures),
                      statuses=list(statuses))


def digests_in(summary: Mapping[str, Any]) -> list[RungDigest]:
    """The rung digests of a run end's summary ([] when it holds none, or holds them in
    a shape this version does not read: the records are read instead)."""
    stored = summary.get(SUMMARY_KEY)
    if not isinstance(stored, list):
        return []
    try:
        return msgspec.convert(stored, list[RungDigest])
    except msgspec.ValidationError:
        return []


def as_summary(digests: Iterable[RungDigest]) -> list[dict[str, Any]]:
    """The digests as the run end's summary holds them (plain JSON values)."""
    return [msgspec.to_builtins(digest) for digest in digests]


__all__ = ["SUMMARY_KEY", "RungDigest", "as_summary", "digest_from", "digests_in"]
