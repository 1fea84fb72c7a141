"""What a contamination report lists when a run is too large to list whole.

A `--repeat 1000` run over ten concurrency levels is ten thousand rungs and about a
million requests. Its report (and so its terminal view, its JSON and its page) lists at
most `RUNG_LIMIT` rungs, with their cells, fidelity rows and timelines, and at most
`LANE_LIMIT` requests of each listed rung; the rest is summarised by counts and reachable
through `benchwarden export`. Every counter, every rung's fidelity and the verdict are
computed from all records before anything is chosen: only what is listed is capped.

Pure functions over plain values (ranks, slots, flags), so the choice is the same
whoever asks (the report builder, a test recounting it) and needs no store.

Invariants:
- A run within the caps lists everything, in the order run: its report is exactly what
  it was before the caps existed.
- The listed rungs are the `RUNG_LIMIT` that need attention most (`rung_rank`: a leak,
  then a divergence, then failed requests, then otherwise unmeasured, then a server
  that ran fewer at once than the label asked, then the rest),
  earlier rungs first within a rank; they are listed in the order run.
- Every scored request of a listed rung is listed (its cells' evidence needs it, and
  there are at most `MAX_PROBES` of them); the rest of the rung's `LANE_LIMIT` goes to
  failed requests first, then to the others, each group by slot.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

RUNG_LIMIT = 24
"""Rungs listed at most: a page of 24 timelines is already long, and 24 covers an
ordinary ladder whole (2,4,...,512 twice is 18 rungs; 64,128 repeated 12 times, 24)."""
LANE_LIMIT = 128
"""Requests listed per listed rung at most (a c512 rung draws its first 128 slots, its
scored and failed ones first)."""

LEAKED, DIVERGED, FAILED, UNMEASURED, BELOW_LABEL, QUIET = range(6)
"""Attention ranks of a rung, most urgent first."""


def rung_rank(cell_kinds: Iterable[str], requests_failed: int | None, state: str) -> int:
    """How urgently a rung needs a reader's attention (lower first): a foreign canary in
    one of its cells, a diverged cell, a failed request, any other reason its cells are
    unmeasured, a peak in flight below its label, or nothing wrong."""
    kinds = set(cell_kinds)
    if "contaminated" in kinds:
        return LEAKED
    if "diverged" in kinds:
        return DIVERGED
    if requests_failed:
        return FAILED
    if state == "unmeasured" or "unmeasured" in kinds:
        return UNMEASURED
    if state == "below_label":
        return BELOW_LABEL
    return QUIET


def chosen_rungs(ranks: Sequence[int], limit: int | None = None) -> list[int]:
    """Indexes (into `ranks`, the rungs in the order run) of the rungs to list, in the
    order run: the `limit` (`RUNG_LIMIT`) most urgent, earlier rungs first within a rank."""
    limit = RUNG_LIMIT if limit is None else limit
    if len(ranks) <= limit:
        return list(range(len(ranks)))
    # the `limit` smallest held, not every rung sorted (half a million rungs of two)
    urgent = heapq.nsmallest(limit, range(len(ranks)), key=lambda index: (ranks[index], index))
    return sorted(urgent)


@dataclass(frozen=True)
class Lane:
    """One request of a rung, as far as choosing it goes."""

    key: int
    """What identifies the request to the caller (the store's sequence number)."""
    slot: int
    """Its slot in the rung."""
    scored: bool
    """Whether a cell is classified from it."""
    failed: bool
    """Whether it failed (a planned cut at the cancel point did not)."""


def chosen_lanes(lanes: Iterable[Lane], limit: int | None = None) -> list[Lane]:
    """The requests of one rung to list: every scored one, then failed ones, then the
    others, each by slot, up to `limit` (`LANE_LIMIT`) in all (more only if the scored
    ones alone are more). Returned by slot."""
    limit = LANE_LIMIT if limit is None else limit
    every = list(lanes)
    if len(every) <= limit:
        return sorted(every, key=lambda lane: (lane.slot, lane.key))
    scored = [lane for lane in every if lane.scored]
    others = sorted((lane for lane in every if not lane.scored),
                    key=lambda lane: (not lane.failed, lane.slot, lane.key))
    chosen = scored + others[:max(0, limit - len(scored))]
    return sorted(chosen, key=lambda lane: (lane.slot, lane.key))


__all__ = ["BELOW_LABEL", "DIVERGED", "FAILED", "LANE_LIMIT", "LEAKED", "QUIET", "RUNG_LIMIT",
           "UNMEASURED", "Lane", "chosen_lanes", "chosen_rungs", "rung_rank"]
