"""Per-rung summaries kept in a contamination run's end, so a report need not read every request.

Of a rung's ballast requests (a c512 rung: 508 of them against 4 scored ones, the bulk
of a big run) a report reads only its fidelity (requests sent, peak in flight, first and
last send, failures by kind) and its requests counted by status. The driver counts
these from the records it has just appended, with the report's own counting
(`report.digest_of`), and writes them into the run end's summary under `rungs` (the end
is in the chain, so the digests are as tamper-evident as the records). A report then
reads a digested rung's scored requests only (and of those only the ones whose reply is
not its reference's, by fingerprint), and its other requests only if it lists the rung
(`report.build_report`).

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
- Reply fingerprints (`scored_replies`, docs/decisions/0006): the BLAKE2b of the part of
  each scored reply the scoring compares (`report.scored_form`: streams, tool calls'
  names and arguments, finish reason, completion tokens, token logprobs; not the cache
  counters or usage flags, which vary from rung to rung), as the store keeps it, for
  the scored requests that were `ok`. They state facts about the records, never a
  judgement: the report compares them with its own reference's fingerprint, and reads
  the record whenever the two differ. A digest written before them (`scored_replies`
  None) leaves every scored request to be read, and its recount ignores what it does
  not hold.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from benchwarden.core.records import RunSummary
from benchwarden.suites.contamination.fidelity import RungFidelity, RungTally

SUMMARY_KEY = "rungs"
"""The run end's summary key holding the run's rung digests."""

FORMAT = 3
"""The digests' format: 3 since they fingerprint the compared part of scored replies
(`scored_replies`; 2, never released, fingerprinted whole replies under `replies`, which
this version does not read). Raised when a digest gains a field a report reads, so a
cache of stores built with older digests (the benches') is not taken for one built
with these."""


class _RungCounts(msgspec.Struct, frozen=True, kw_only=True):
    """A digest's counts: what `RungDigest` and `StoredRungDigest` both hold."""

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
    level: int | None = None
    """The rung's concurrency level as its first request with one stored it (a
    `--bisect` run's levels are read from its rungs); None in a digest written before
    reply fingerprints."""

    @property
    def key(self) -> tuple[str, int]:
        return (self.leg, self.repeat)

    def fidelity(self, label: str, concurrency: int, repeat: int) -> RungFidelity:
        """The rung's fidelity as the report's full pass counts it (`RungTally.fidelity`
        over the same requests), from the digest's numbers."""
        failures = tuple(sorted(self.failures, key=lambda item: (-item[1], item[0])))
        skew = (None if self.first_send is None or self.last_send is None
                else (self.last_send - self.first_send) * 1000.0)
        return RungFidelity(label, concurrency, repeat, self.sent, self.peak_in_flight, skew,
                            sum(count for _, count in failures), failures)


class RungDigest(_RungCounts, frozen=True, kw_only=True):
    """What a report reads of one rung's requests beyond its scored ones."""

    scored_replies: list[tuple[str, str]] | None = None
    """`(task, fingerprint of the compared part of its reply)` of each scored request (a
    probe's own) that was `ok`, in the rung's order; a task the rung holds more than
    once is left out. None in a digest written before fingerprints (every scored
    request is then read)."""

    @property
    def fingerprinted(self) -> bool:
        """Whether it fingerprints its scored replies (a digest written before them
        does not)."""
        return self.scored_replies is not None

    def claims(self) -> dict[str, str]:
        """Each fingerprinted scored request's task → its reply's fingerprint."""
        return dict(self.scored_replies or ())

    def agrees_with(self, recounted: RungDigest) -> bool:
        """Whether `recounted` (the rung's records counted again, `report.digest_of`)
        says what this digest says; a digest written before fingerprints is held to the
        fields it has."""
        if self.scored_replies is None:
            recounted = msgspec.structs.replace(recounted, level=None, scored_replies=None)
        return recounted == self



_NO_CLAIMS = msgspec.Raw(b"null")
_claims_decoder = msgspec.json.Decoder(list[tuple[str, str]] | None)


class StoredRungDigest(_RungCounts, frozen=True, kw_only=True):
    """A rung digest as a report reads it back from a run end (`stored_digests_in`):
    `RungDigest`'s counts, its fingerprints (`scored_replies`) kept as their stored JSON
    until asked for (`claims`), each read once. A soak of tiny rungs stores 187,000
    digests at a million records; their fingerprints decoded were 140 MB a report held
    from the first rung to the last."""

    stored_claims: msgspec.Raw = msgspec.field(name="scored_replies", default=_NO_CLAIMS)
    """`RungDigest.scored_replies` as stored (`null`: none, a digest written before
    fingerprints), checked to decode when read back (`stored_digests_in`)."""

    @property
    def fingerprinted(self) -> bool:
        """As `RungDigest.fingerprinted`."""
        return self.stored_claims != _NO_CLAIMS

    def claims(self) -> dict[str, str]:
        """As `RungDigest.claims`."""
        return dict(_claims_decoder.decode(self.stored_claims) or ())

    def whole(self) -> RungDigest:
        """The digest with its fingerprints decoded."""
        return RungDigest(leg=self.leg, repeat=self.repeat, sent=self.sent,
                          peak_in_flight=self.peak_in_flight, first_send=self.first_send,
                          last_send=self.last_send, failures=list(self.failures),
                          statuses=list(self.statuses), level=self.level,
                          scored_replies=_claims_decoder.decode(self.stored_claims))

    def agrees_with(self, recounted: RungDigest) -> bool:
        """As `RungDigest.agrees_with`."""
        return self.whole().agrees_with(recounted)


_stored_digest_decoder = msgspec.json.Decoder(StoredRungDigest)

AnyDigest = RungDigest | StoredRungDigest
"""A digest a driver counted, or one read back from a run end."""


def fingerprint(compared: bytes) -> str:
    """The fingerprint of a reply from the stored bytes of its compared part
    (`report.scored_form`): 128 bits of BLAKE2b, so two replies share one only when
    those bytes are the same."""
    return hashlib.blake2b(compared, digest_size=16).hexdigest()


def digest_from(leg: str, repeat: int, tally: RungTally,
                statuses: Iterable[tuple[str, int]], *, level: int | None = None,
                scored_replies: Iterable[tuple[str, str | None]] = ()) -> RungDigest:
    """The digest of a rung counted into `tally`, with its requests by status, its level,
    and `(task, fingerprint or None when not ok)` of each scored request read."""
    fidelity = tally.fidelity(leg, 0, repeat)
    scored = list(scored_replies)
    seen = Counter(task for task, _ in scored)
    return RungDigest(leg=leg, repeat=repeat, sent=tally.sent,
                      peak_in_flight=fidelity.peak_in_flight, first_send=tally.first_send,
                      last_send=tally.last_send, failures=list(fidelity.failures),
                      statuses=list(statuses), level=level,
                      scored_replies=[(task, found) for task, found in scored
                                      if found is not None and seen[task] == 1])


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


def stored_digests_in(summary: Mapping[str, Any]) -> list[AnyDigest]:
    """`digests_in`, but a summary read back from a store gives `StoredRungDigest`s, their
    fingerprints left as stored; each is checked to decode (one rung's at a time), and
    [] when one does not, as `digests_in` gives."""
    if not isinstance(summary, RunSummary):
        return list(digests_in(summary))
    if SUMMARY_KEY not in summary:
        return []
    held: dict[Any, Any] = {}

    def once(value: Any, key: Any) -> Any:
        return held.setdefault(key, value)

    # one digest decoded at a time and kept compactly: equal labels, failures and
    # statuses one object each (a digest is frozen, and nothing changes its lists), its
    # fingerprints checked to decode and copied out of the end's stored bytes, which
    # they would otherwise keep whole. A soak of rungs of two has half a million
    # digests, 550 bytes each as decoded, in a 133 MB end.
    found: list[AnyDigest] = []
    try:
        for raw in summary.typed(SUMMARY_KEY, list[msgspec.Raw]):
            digest = _stored_digest_decoder.decode(raw)
            _claims_decoder.decode(digest.stored_claims)
            found.append(msgspec.structs.replace(
                digest, leg=once(digest.leg, digest.leg),
                failures=once(digest.failures, ("failures", *digest.failures)),
                statuses=once(digest.statuses, ("statuses", *digest.statuses)),
                stored_claims=msgspec.Raw(bytes(digest.stored_claims))))
    except msgspec.ValidationError:  # (not a list, or not of digests)
        return []
    return found


def as_summary(digests: Iterable[RungDigest]) -> list[dict[str, Any]]:
    """The digests as the run end's summary holds them (plain JSON values)."""
    return [msgspec.to_builtins(digest) for digest in digests]


__all__ = ["FORMAT", "SUMMARY_KEY", "AnyDigest", "RungDigest", "StoredRungDigest", "as_summary",
           "digest_from", "digests_in", "fingerprint", "stored_digests_in"]
