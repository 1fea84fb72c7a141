"""The contamination report: one typed structure built once from the store.

`build_report(store, run_id)` reads the run's records (its whole scope, so a resumed run
reports the union of the original and the resumed requests) in one streaming pass
(`ScopeReading`: the solo legs whole, each rung's scored outcomes and fidelity counts,
and a few numbers per other request), rebuilds the legs, scores them with the pure
`scoring` module and returns a `ContaminationReport` (msgspec, frozen). The store decodes
each stored outcome for that pass into `StoredOutcome`, its reply left as raw JSON bytes:
parsed only for the requests whose reply is read (the scored ones and the solo legs),
never for ballast, the bulk of a big run. A rung digested in its run's end (`digest`:
its fidelity and its requests by status, written by the driver) is counted from its
digest and its scored requests alone, and of those only the ones whose reply the digest
does not fingerprint as their probe's reference's are read (docs/decisions/0006: a
reply with its reference's stored bytes is that reply); its other requests are read only
if it is listed, and then recounted against the digest. A scored reply is read once:
classified as it is read, once its probe's reference is settled, and kept as its class
alone (`scoring.Judged`: its token logprobs and text let go, its cell counted, not held);
the listed rungs' cells are made again from their records (`_listed_cells`). A reply
that cannot be classified as read (no reference yet) is kept without its token
logprobs, its divergence taken from the evidence read with it or from its record read
again (`ScopeReading.restored_divergences`).
Nothing here talks to a server, so `benchwarden show RUN` works with the server gone.
The terminal view (`terminal.render_terminal`) and the page (`html.render_html`) only
format this object.

Invariants:
- Memory is bounded by the rungs and the probes, not by the records nor the scored
  replies: a few values per scored request (its class, held once per distinct class,
  in its rung's list), none of its reply; a digested rung is its digest, held compactly,
  and a list (a soak of rungs of two, the most rungs a million records hold: under
  700 MB). Read from every record (`show --from-records`), each digest is recounted
  one rung at a time, before the report's own reading.
- Bounded by what it lists, not by the records (`shown`): at most `shown.RUNG_LIMIT`
  rungs (those needing attention first) with their cells, and `shown.LANE_LIMIT`
  requests of each; the score, every listed rung's fidelity and the verdict are
  computed from all records. What is left out is counted in fields that are absent
  when nothing is (`requests_total`, `rungs_total`, `cells_total`, `rungs_left_out`,
  `export_command`, a rung's `requests_listed`), so within the caps the report, its
  JSON and its views are what they were before the caps.
- Digests change what is read, never what is reported: a digest whose request count is
  not the store's is not used, and a listed rung whose records recount to another digest
  makes the whole report read from the records (each with a warning). A fingerprint is
  compared with the one of the reference the scoring uses, computed here from its
  stored bytes: one made against another reference (a resumed run's) is not taken.
- The report is a function of stored data only. Every number a view prints is a field
  of it (counters, peak in flight, launch skew, requests failed, per-request times
  relative to their rung's first send): no view computes one.
- Its JSON (`to_json`, `msgspec.json.encode`) keeps the field names of the dict reports
  this suite wrote before (bench version 2: `requests_sent`, `requests_failed`,
  `failures`, `unmeasured_reason`, `description`); `ContaminationReport.from_json` reads
  those files, bench version 1 (`slots`) included.
- A rung's level travels as an int (`RungBlock.concurrency`, `CellBlock.level`); its label
  (`c4`) is derived for display and never parsed back.
- Every string in the report is valid UTF-8: model text and server messages are shown
  through `scoring.display_text` (an invalid byte as `\\xNN`), and per-request outcomes
  keep the client's stored form (`RequestOutcome.to_json_dict`), which round-trips exactly.
"""

from __future__ import annotations

import shlex
import sys
from array import array
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import Any, Protocol

import msgspec
from msgspec import UNSET, UnsetType

from benchwarden.core import html as page_html
from benchwarden.core.collector import paused_cycle_collector
from benchwarden.core.records import Record, Run, RunEnd, canonical_json
from benchwarden.core.reports import (
    REPORT_SCHEMA,
    RunBlock,
    StoreHeadBlock,
    VerdictBlock,
    as_json,
    convert,
    envelope,
    run_block,
    store_head_block,
)
from benchwarden.core.run_config import config_as
from benchwarden.core.store import CorruptStore, RecordSummary, Store
from benchwarden.core.verdicts import one_line
from benchwarden.suites.contamination import scoring, shown
from benchwarden.suites.contamination.digest import (
    AnyDigest,
    RungDigest,
    StoredRungDigest,
    digest_from,
    fingerprint,
    stored_digests_in,
)
from benchwarden.suites.contamination.fidelity import (
    RungFidelity,
    RungTally,
    failed_as_recorded,
    failure_kind,
)
from benchwarden.suites.contamination.scoring import (
    BENCH_VERSION,
    Legs,
    RungOutcome,
    RungOutcomes,
    rung_label,
)
from benchwarden.targets.replies import (
    Candidate,
    Reply,
    RequestOutcome,
    Timings,
    ToolCall,
    restored_strings,
)

SUITE = "contamination"
STATE_ORDER = ("unmeasured", "below_label", "as_labelled")
"""The rung states (`RungFidelity.state`), in the order a count of them is written."""


# -- the typed report -----------------------------------------------------------------------

class ScoreBlock(msgspec.Struct, frozen=True, kw_only=True):
    """The counters of `scoring.Score` (None in a partial file that lacks one)."""

    prompts: int | None = None
    """Probes of the run."""
    rungs: int | None = None
    """Rungs run (levels × repeats)."""
    compared: int | None = None
    """Cells compared with a stable solo reference."""
    identical: int | None = None
    """Cells whose reply is byte-identical to the solo reference."""
    diverged: int | None = None
    """Cells that differ from the solo reference under concurrency."""
    contaminated: int | None = None
    """Cells carrying another probe's canary."""
    persistent: int | None = None
    """Post-check cells that differ from the solo reference."""
    alone_unstable: int | None = None
    """Probes whose two solo references disagree."""
    unmeasured: int | None = None
    """Cells that could not be compared (failed, short, or their rung did not run as planned)."""
    foreign_canaries: int | None = None
    """Foreign canaries found in contaminated cells."""
    tokens_compared: int | None = None
    """Completion tokens of the references of identical cells."""
    earliest_divergence: int | None = None
    """Smallest character position at which a diverged or persistent cell parted."""
    near_tie: int | None = None
    """Divergences whose reference margin is under the near-tie threshold."""
    substantive: int | None = None
    """Divergences at or above the threshold, and every foreign-canary leak."""
    unclassified: int | None = None
    """Divergences the token logprobs cannot classify (none sent, or too few candidates)."""


class CandidateBlock(msgspec.Struct, frozen=True, kw_only=True):
    """One top candidate the reference reported at the diverging token."""

    token: str
    """The token's text (an invalid UTF-8 byte as `\\xNN`)."""
    logprob: float
    """Its log-probability, in nats."""


class DivergenceBlock(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What kind of divergence a cell is (`scoring.DivergencePoint`)."""

    kind: str = msgspec.field(name="class")
    """near-tie, substantive or unclassified."""
    reason: str = ""
    """Why, in one sentence."""
    threshold_nats: float | None = None
    """The near-tie threshold the cell was classified with."""
    step: int | None = None
    """Index of the first differing token (logprob entry)."""
    reference_token: str | None = None
    """The token the reference chose there."""
    reply_token: str | None = None
    """The token the diverged reply chose there."""
    margin: float | None = None
    """As the reference saw that step: logprob of its token minus logprob of the reply's."""
    margin_is_bound: bool = False
    """The reply's token was not among the reference's top candidates: `margin` is a
    lower bound (reference token minus the lowest candidate)."""
    reply_margin: float | None = None
    """As the diverged reply saw that step: logprob of its token minus the reference's."""
    reference_top: list[CandidateBlock] = msgspec.field(default_factory=list)
    """The reference's top candidates at the diverging token."""
    foreign: str | None = None
    """The foreign canary that makes the cell substantive."""


class BisectStepBlock(msgspec.Struct, frozen=True, kw_only=True):
    """One rung a bisect ran."""

    level: int
    """Its concurrency."""
    diverged: bool | None = None
    """Whether a probe diverged (None: the rung was unmeasured)."""


class BisectBlock(msgspec.Struct, frozen=True, kw_only=True):
    """The result of `--bisect LO-HI`."""

    low: int
    """The range's low end."""
    high: int
    """The range's high end."""
    tried: list[BisectStepBlock] = msgspec.field(default_factory=list)
    """The rungs run, in order."""
    smallest: int | None = None
    """The smallest concurrency in the range at which a probe diverged (None: none
    found, or the search stopped)."""
    finished: bool = False
    """Whether the search ran to its end (False: the run stopped or a rung was unmeasured)."""
    reading: str = ""
    """The result in one sentence."""


class CellBlock(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One probe in one leg, with its class and the evidence behind it."""

    probe: int
    """The probe's index."""
    leg: str
    """`ref` (the references were unusable), a rung's label such as `c4`, or `post`."""
    repeat: int
    """Which repetition of the rungs (1 for `ref` and `post`)."""
    kind: str = msgspec.field(name="class")
    """identical, diverged, contaminated, persistent, alone_unstable or unmeasured."""
    at: int | None = None
    """First differing character against the solo reference (diverged, persistent)."""
    detail: str | None = None
    """The differing excerpts, as text."""
    foreign: str | None = None
    """The foreign canary found in the reply."""
    why: str | None = None
    """Why the cell is unmeasured."""
    level: int | None = None
    """The rung's concurrency level (absent for `ref` and `post`)."""
    divergence: DivergenceBlock | None = None
    """The divergence class of a diverged, persistent, contaminated or alone-unstable cell."""


class RungBlock(msgspec.Struct, frozen=True, kw_only=True):
    """One rung's fidelity (`fidelity.RungFidelity`): what it sent and what ran together."""

    label: str
    """The rung's display label (`c4`), derived from `concurrency`."""
    concurrency: int
    """The rung's level: the concurrency its label names."""
    repeat: int = 1
    """Which repetition of the rungs."""
    requests_sent: int = 0
    """Every request of the rung, scored and ballast (`slots` before bench version 2)."""
    requests_failed: int | None = None
    """Requests that failed (None in a bench version 1 report, which did not count them)."""
    failures: dict[str, int] = msgspec.field(default_factory=dict)
    """Failed requests counted by kind ("HTTP 500", "timeout", ...)."""
    peak_in_flight: int = 0
    """The most replies that streamed at one instant: the server's observed parallelism."""
    observed_parallelism: int = 0
    """The same as `peak_in_flight` (kept for readers of older reports)."""
    launch_skew_ms: float | None = None
    """Last send minus first send, in milliseconds."""
    unmeasured_reason: str | None = None
    """Why none of the rung's cells can be compared, or None."""
    description: str = ""
    """The rung's one plain sentence (the terminal prints it)."""
    state: str = ""
    """unmeasured, below_label or as_labelled: what the views colour by."""
    reading: str = ""
    """The short reading the page's fidelity table prints."""
    requests_listed: int | UnsetType = UNSET
    """How many of its requests the report lists, when fewer than `requests_sent` (a rung
    wider than `shown.LANE_LIMIT`); absent when every one is listed."""


class ProbeBlock(msgspec.Struct, frozen=True, kw_only=True):
    """One probe of the run's probe set."""

    index: int
    """The probe's index."""
    canary: str = ""
    """The probe's own canary."""
    topic: str = ""
    """What the probe asks about."""


class RequestSettings(msgspec.Struct, frozen=True, kw_only=True):
    """What every request was sent with."""

    preset: str | None = None
    """The engine preset."""
    extra_body: dict[str, Any] | None = None
    """Extra request fields the user added."""
    bodies: list[Any] = msgspec.field(default_factory=list)
    """The exact request body of each probe."""


class RequestEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One request as recorded, with its times relative to its leg's first send."""

    leg: str
    """prime, ref_a, ref_b, a rung's label, or post."""
    task: str = ""
    """The record's task: the probe index, or `ballast-<slot>`."""
    probe: int = -1
    """The probe whose body was sent."""
    repeat: int = 1
    """Which repetition of the rungs."""
    slot: int = 0
    """The request's slot in its rung (the probe index in a solo leg)."""
    scored: bool = True
    """Whether a cell is classified from this request (ballast and prime are not)."""
    status: str = ""
    """ok, error or cancelled."""
    run_id: str = ""
    """The run that sent it (a resumed run's requests carry the resuming run's id)."""
    cancel_after_deltas: int | None = None
    """The client was to cut this request after that many content deltas."""
    outcome: dict[str, Any] = msgspec.field(default_factory=dict)
    """The client's stored outcome (`RequestOutcome.to_json_dict`), exact bytes included."""
    level: int | None = None
    """The rung's concurrency level (absent for solo legs)."""
    sent_ms: float | None = None
    """Send time, ms after the first send of its leg (and repeat)."""
    first_content_ms: float | None = None
    """First content delta, ms after the first send of its leg."""
    last_byte_ms: float | None = None
    """Last byte, ms after the first send of its leg."""
    wait_ms: float | None = None
    """Send → first content delta, in ms."""
    last_byte_after_ms: float | None = None
    """Send → last byte, in ms."""


class ContaminationReport(msgspec.Struct, frozen=True, kw_only=True):
    """A contamination run's report, built once from the store."""

    schema: str = REPORT_SCHEMA
    """The envelope's version."""
    suite: str = SUITE
    """Always `contamination`."""
    bench_version: str = BENCH_VERSION
    """The suite's bench version the report was scored under."""
    run: RunBlock | None = None
    """The run the report was built for."""
    verdict: VerdictBlock | None = None
    """pass, or fail with every problem named."""
    store_head: StoreHeadBlock | None = None
    """The store's last entry when the report was built (a head witness for `verify`)."""
    score: ScoreBlock | None = None
    """The counters."""
    cells: list[CellBlock] = msgspec.field(default_factory=list)
    """Every probe × leg cell, classified."""
    rungs: list[RungBlock] = msgspec.field(default_factory=list)
    """Every rung's fidelity, in the order run."""
    probes: list[ProbeBlock] = msgspec.field(default_factory=list)
    """The probe set."""
    request: RequestSettings | None = None
    """The preset, extra body and exact request bodies."""
    legs: dict[str, dict[str, int]] = msgspec.field(default_factory=dict)
    """Per leg: its requests counted by status."""
    warnings: list[str] = msgspec.field(default_factory=list)
    """What a reader should know (a failed prime, an incomplete run)."""
    requests: list[RequestEntry] = msgspec.field(default_factory=list)
    """Every request recorded, in the store's order."""
    references_part_at: dict[int, int] = msgspec.field(default_factory=dict)
    """Per alone-unstable probe: the first character at which its two solo references
    differ (the page marks it)."""
    bisect: BisectBlock | None = None
    """The bisect result, for a `--bisect` run."""
    # What a run too large to list whole leaves out (`shown`): these fields are absent
    # (msgspec's UNSET, never written) when everything is listed, so the report of a run
    # within the caps is the one written before they existed.
    requests_total: int | UnsetType = UNSET
    """Every request recorded in the run's scope, when `requests` lists fewer."""
    rungs_total: int | UnsetType = UNSET
    """Every rung run, when `rungs` lists fewer (at most `shown.RUNG_LIMIT`, those that
    need attention first)."""
    cells_total: int | UnsetType = UNSET
    """Every cell classified, when `cells` lists fewer (those of the listed rungs, the
    reference and the post-check); the score counts them all."""
    rungs_left_out: dict[str, int] | UnsetType = UNSET
    """The rungs not listed, counted by state (as_labelled, below_label, unmeasured)."""
    probes_total: int | UnsetType = UNSET
    """Set only in what a view shows (`probes_shown`): every probe of the report, when
    `probes` and `cells` hold only the `PROBES_SHOWN` shown."""
    export_command: str | UnsetType = UNSET
    """The command that writes every request of the store's contamination runs as data,
    when something is left out."""

    @property
    def repeated(self) -> bool:
        """Whether the rungs ran more than once (columns then name their repetition)."""
        return any(rung.repeat > 1 for rung in self.rungs) \
            or any(cell.repeat > 1 for cell in self.cells if cell.level is not None) \
            or (isinstance(self.rungs_total, int) and self.run is not None
                and int(self.run.config.get("repeat") or 1) > 1)

    def to_json(self) -> dict[str, Any]:
        """The JSON-able report (the same field names as the dict reports before it)."""
        return as_json(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ContaminationReport:
        """Read a report file's JSON (any contamination report this package wrote)."""
        if data.get("suite", SUITE) != SUITE:
            raise ValueError(f"not a contamination report (suite {data.get('suite')!r})")
        return convert(_upgraded(dict(data)), cls, "contamination report")  # type: ignore[no-any-return]

    def ended(self, run: Run, end: RunEnd,
              store_head: Mapping[str, Any] | None) -> ContaminationReport:
        """The same report once its run's end is stored: the run block says how and when
        the run ended, and `store_head` is the store's head after that end entry."""
        block = convert(run_block(run, end), RunBlock, "run block")
        head = None if store_head is None else convert(dict(store_head), StoreHeadBlock,
                                                        "store head")
        return msgspec.structs.replace(self, run=block, store_head=head)


def _rung_choice(rungs: Iterable[tuple[Collection[str], int | None, str]],
                 ) -> tuple[list[int], dict[str, Any]]:
    """The one rule a new report and a cut-down old one list rungs by: `rungs` as
    `(kinds of its cells, requests failed, state)` in the order run. Returns the indexes
    of the rungs to list (`shown`) and, when some are left out, `rungs_total` and
    `rungs_left_out` (counted by state). Holds a rank and a state a rung (a soak of
    rungs of two has half a million)."""
    ranks: list[int] = []
    states: list[str] = []
    for kinds, failed, state in rungs:
        ranks.append(shown.rung_rank(kinds, failed, state))
        states.append(state)
    chosen = shown.chosen_rungs(ranks)
    if len(chosen) == len(ranks):
        return chosen, {}
    listed = set(chosen)
    left = Counter(state for index, state in enumerate(states) if index not in listed)
    return chosen, {"rungs_total": len(ranks),
                    "rungs_left_out": {state: left[state] for state in STATE_ORDER
                                       if left[state]}}


def within_caps(report: ContaminationReport) -> ContaminationReport:
    """The report listing what a new one would (`shown`): a report file written before
    the caps, listing every rung and request of a huge run, is cut down the same way and
    its totals set; a report within the caps is returned as it is. (A request's failure
    is read from its status here, which only orders the requests of a rung.)"""
    per_rung = Counter((entry.leg, entry.repeat) for entry in report.requests
                       if entry.level is not None)
    if len(report.rungs) <= shown.RUNG_LIMIT \
            and all(count <= shown.LANE_LIMIT for count in per_rung.values()):
        return report
    kinds: dict[tuple[str, int], set[str]] = defaultdict(set)
    for cell in report.cells:
        if cell.level is not None:
            kinds[(cell.leg, cell.repeat)].add(cell.kind)
    chosen, left_out = _rung_choice(
        (kinds.get((rung.label, rung.repeat), ()), rung.requests_failed, rung.state)
        for rung in report.rungs)
    listed = {(report.rungs[index].label, report.rungs[index].repeat) for index in chosen}
    chosen_set = set(chosen)
    lanes: dict[tuple[str, int], list[shown.Lane]] = defaultdict(list)
    for index, entry in enumerate(report.requests):
        if entry.level is not None:
            lanes[(entry.leg, entry.repeat)].append(shown.Lane(
                index, entry.slot, entry.scored, entry.status not in ("ok", "cancelled")))
    kept = {lane.key for key, members in lanes.items() if key in listed
            for lane in shown.chosen_lanes(members)}
    requests = [entry for index, entry in enumerate(report.requests)
                if entry.level is None or index in kept]
    drawn = Counter((entry.leg, entry.repeat) for entry in requests if entry.level is not None)
    rungs = [msgspec.structs.replace(rung, requests_listed=drawn[(rung.label, rung.repeat)])
             if drawn[(rung.label, rung.repeat)] < per_rung[(rung.label, rung.repeat)]
             else rung for index, rung in enumerate(report.rungs) if index in chosen_set]
    cells = [cell for cell in report.cells
             if cell.level is None or (cell.leg, cell.repeat) in listed]
    changes: dict[str, Any] = {"rungs": rungs, "cells": cells, "requests": requests,
                               **left_out}
    if len(cells) < len(report.cells):
        changes["cells_total"] = len(report.cells)
    if len(requests) < len(report.requests):
        changes["requests_total"] = len(report.requests)
    return msgspec.structs.replace(report, **changes)


def as_report(report: ContaminationReport | Mapping[str, Any]) -> ContaminationReport:
    """The typed report, reading a JSON mapping when given one."""
    if isinstance(report, ContaminationReport):
        return report
    return ContaminationReport.from_json(report)


PER_PROBE_CONFIG = ("probe_set", "request_bodies")
"""Keys of a run's configuration holding a value per probe (cut with the probes a view
shows, `probes_shown`)."""

PROBES_SHOWN = 64
"""Probes the terminal's grid and the page show at most, with their cells: those with a
cell that is not identical first, then the rest in index order. A run has at most 32
(`--probes`), but a store written by another tool can hold any number: 10,000 probes made
a 122 MB page and a grid of 10,000 rows; the score and the verdict count them all."""


def probes_shown(report: ContaminationReport) -> ContaminationReport:
    """`report` as a view shows it: itself when it has at most `PROBES_SHOWN` probes,
    else with `probes`, `cells` and scored `requests` those of the probes shown, the
    first `PROBES_SHOWN` request bodies, and `probes_total` counting every probe."""
    indices = list(dict.fromkeys([*(probe.index for probe in report.probes),
                                  *(cell.probe for cell in report.cells)]))
    if len(indices) <= PROBES_SHOWN:
        return report
    attention = {cell.probe for cell in report.cells if cell.kind != "identical"}
    shown = set(sorted(indices, key=lambda index: (index not in attention, index))
                [:PROBES_SHOWN])
    request, run = report.request, report.run
    if request is not None:  # a body per probe, the first shown
        request = msgspec.structs.replace(request, bodies=request.bodies[:PROBES_SHOWN])
    if run is not None:  # the configuration's lists of a value per probe, likewise
        run = msgspec.structs.replace(run, config={
            key: value[:PROBES_SHOWN] if key in PER_PROBE_CONFIG and isinstance(value, list)
            else value for key, value in run.config.items()})
    return msgspec.structs.replace(
        report, probes=[probe for probe in report.probes if probe.index in shown],
        cells=[cell for cell in report.cells if cell.probe in shown],
        # the solo legs' requests, one per probe each, of the probes shown; ballast is
        # bounded by its rungs already
        requests=[entry for entry in report.requests
                  if not entry.scored or entry.probe in shown],
        request=request, run=run, probes_total=len(indices))


SHOWN_WHOLE = frozenset({"text", "reasoning", "arguments", "token_logprobs", "bodies",
                         "request_bodies", "messages", "export_command"})
"""Keys whose values the page leaves exactly as the report has them when it clips names
(`names_clipped`): reply texts, whose character positions the cells refer to and which
the page's copy and drawn windows bound themselves, the request bodies and prompts
shown once, and the export command, which must run."""

SHOWN_AS_SENTENCES = frozenset({"verdict", "warnings", "reading", "description", "reason",
                                "unmeasured_reason", "why", "detail", "error", "problems"})
"""Keys whose values are sentences: names inside them are clipped, and each is cut at
`core.html.SENTENCE_LIMIT` characters. Every other string of the report is a name (a run
id, model, leg, status, topic, canary, finish reason, tool name or id, a setting),
clipped past `core.html.NAME_LIMIT` characters."""


def names_clipped(report: ContaminationReport) -> tuple[ContaminationReport, int, int]:
    """`report` as the page and the terminal show it: every name longer than
    `core.html.NAME_LIMIT` clipped wherever it stands (the same clipped name everywhere,
    distinct from every other), every sentence cut at `core.html.SENTENCE_LIMIT`; and how
    many names and sentences were cut. A report with neither is returned as it is. A
    store written by another tool can hold names of any length, and a hostile server
    can stream a finish reason or a tool name of any length: 3,072 listed requests
    repeating one of 20,000 characters made a page of over 60 MB."""
    plain = as_json(report)
    clipped = page_html.clip_long_names(
        plain, page_html.names_in(plain, texts=SHOWN_WHOLE, sentences=SHOWN_AS_SENTENCES),
        texts=SHOWN_WHOLE, sentences=SHOWN_AS_SENTENCES)
    if clipped.tree is plain:
        return report, 0, 0
    return as_report(clipped.tree), clipped.names, clipped.sentences


def column_name(leg: str, repeat: int, repeated: bool, level: int | None) -> str:
    """A leg's column heading: its label, with the repetition when rungs were repeated."""
    return f"{leg} #{repeat}" if repeated and level is not None else leg


# -- reading older reports ------------------------------------------------------------------

def _upgraded_rung(rung: Mapping[str, Any]) -> dict[str, Any]:
    """A rung of any bench version with every field of the current one."""
    data = dict(rung)
    sent = data.pop("slots", None)  # `slots` before bench version 2
    data.setdefault("requests_sent", sent if isinstance(sent, int) else 0)
    if not data.get("description") or "state" not in data:
        fit = RungFidelity(str(data.get("label", "")), int(data.get("concurrency") or 0),
                           int(data.get("repeat") or 1), int(data["requests_sent"] or 0),
                           int(data.get("peak_in_flight") or 0), data.get("launch_skew_ms"),
                           int(data.get("requests_failed") or 0),
                           tuple((data.get("failures") or {}).items()))
        derived = fit.to_json_dict()
        for key in ("description", "state", "reading", "unmeasured_reason"):
            if not data.get(key):
                data[key] = derived[key]
        data.setdefault("observed_parallelism", fit.peak_in_flight)
    return data


def _upgraded(data: dict[str, Any]) -> dict[str, Any]:
    """Any report this suite wrote, with the fields of the current one filled in."""
    data.setdefault("schema", REPORT_SCHEMA)
    data.setdefault("suite", SUITE)
    data.setdefault("bench_version", "")
    rungs = [_upgraded_rung(r) for r in data.get("rungs") or [] if isinstance(r, Mapping)]
    data["rungs"] = rungs
    levels = {str(r.get("label")): int(r["concurrency"]) for r in rungs
              if isinstance(r.get("concurrency"), int)}
    data["cells"] = [{**cell, "level": levels.get(str(cell.get("leg")))}
                     if "level" not in cell and str(cell.get("leg")) in levels else cell
                     for cell in data.get("cells") or [] if isinstance(cell, Mapping)]
    requests = [dict(entry) for entry in data.get("requests") or [] if isinstance(entry, Mapping)]
    for entry in requests:
        if "level" not in entry and str(entry.get("leg")) in levels:
            entry["level"] = levels[str(entry.get("leg"))]
    if any("sent_ms" not in entry for entry in requests):
        _add_times(requests)
    data["requests"] = requests
    return data


# -- building -------------------------------------------------------------------------------

SOLO_LEGS = frozenset({"prime", "ref_a", "ref_b", "post"})
"""Legs that send each probe alone, once: their records are few (at most four per probe)
and kept whole. Every other leg is a rung."""


class StoredRequest(Protocol):
    """What the report reads of a stored request: a `Record`, or the store's slim
    `RecordSummary` of one read with the payload fields in `PAYLOAD_FIELDS` (its outcome
    a `StoredOutcome` when read with `PAYLOAD_TYPES` and it fits, else plain JSON)."""

    @property
    def arm(self) -> str: ...
    @property
    def task(self) -> str: ...
    @property
    def trial(self) -> int: ...
    @property
    def run_id(self) -> str: ...
    @property
    def outcome(self) -> str: ...
    @property
    def payload(self) -> Mapping[str, Any]: ...


PAYLOAD_FIELDS = ("probe", "slot", "cancel_after_deltas", "outcome", "level")
"""Every payload field the suite's driver writes (`driver.make_record`)."""

_NULL = msgspec.Raw(b"null")
_reply_decoder = msgspec.json.Decoder(Reply)


class StoredOutcome(msgspec.Struct, frozen=True):
    """A request's stored outcome (`RequestOutcome.to_json_dict`) as the streaming pass
    decodes it (`PAYLOAD_TYPES`): timings, error, status and extra typed, and the reply
    (its text and token logprobs: the bulk of a record) kept as its raw JSON bytes, so a
    ballast request's reply, which nothing reads, is never parsed. A stored outcome that
    does not fit (an error that was not valid UTF-8 is stored as an object, see
    `targets.replies`; an older or hostile body) fails this type, and the store then
    hands the record over as plain JSON values, read the way they always were."""

    timings: Timings
    """When the request was sent, its first token and its end."""
    reply: msgspec.Raw = _NULL
    """The stored reply's raw JSON bytes (`null` when no reply came), parsed only on
    demand (`whole`)."""
    error: str | None = None
    """Why the request failed, as stored."""
    status: int | None = None
    """The HTTP status, when a response came."""
    extra: dict[str, Any] = msgspec.field(default_factory=dict)
    """What the client noted beside the reply (a planned cancel, ...), as stored."""

    @property
    def replied(self) -> bool:
        """Whether a reply came (the stored reply is not JSON null)."""
        return self.reply != _NULL

    def whole(self) -> RequestOutcome:
        """The outcome `RequestOutcome.from_json_dict` reads from the same stored form."""
        return RequestOutcome(self.timings, _reply(self.reply), self.error, self.status,
                              _restored_extra(self.extra))

    def fidelity_view(self) -> RequestOutcome:
        """As `_fidelity_view` of the same stored form: the reply not restored."""
        return RequestOutcome(self.timings, _SOME_REPLY if self.replied else None,
                              self.error, self.status, _restored_extra(self.extra))

    def count_in(self, tally: RungTally, cancel_planned: bool) -> bool:
        """`tally.add(self.fidelity_view(), cancel_planned)`, building that view only
        for a request that failed (to name its failure): whether it failed."""
        extra = self.extra
        if extra:
            extra = _restored_extra(extra)
        failed = failed_as_recorded(self.error is None and self.reply != _NULL,
                                    extra.get("cancelled"), cancel_planned)
        tally.count(self.timings, failure_kind(self.fidelity_view()) if failed else None)
        return failed


PAYLOAD_TYPES: Mapping[str, Any] = {"outcome": StoredOutcome}
"""How the streaming pass asks the store to decode `PAYLOAD_FIELDS`
(`Store.iter_record_summaries`); the fields not named stay plain JSON values."""


def _stored_requests(store: Store, scope: str,
                     seqs: Sequence[int] | None = None) -> Iterator[RecordSummary]:
    """The scope's requests as the streaming pass reads them (`PAYLOAD_FIELDS`, typed
    as `PAYLOAD_TYPES`), in the store's order; with `seqs`, only those."""
    return store.iter_record_summaries(suite=SUITE, scope=scope, payload_fields=PAYLOAD_FIELDS,
                                       payload_types=PAYLOAD_TYPES, seqs=seqs)


def _reply(raw: msgspec.Raw) -> Reply | None:
    """A stored reply read straight into `Reply`; one holding a string in its stored
    form (text that was not valid UTF-8) is restored first, as `from_json_dict` does."""
    if raw == _NULL:
        return None
    try:
        return _reply_decoder.decode(raw)  # type: ignore[no-any-return]
    except msgspec.ValidationError:
        return RequestOutcome.from_json_dict({"timings": {"sent_at": 0.0},
                                              "reply": msgspec.json.decode(raw)}).reply


_NO_CANDIDATES = msgspec.Raw(b"[]")
_candidates_decoder = msgspec.json.Decoder(tuple[Candidate, ...])


class _StepCandidatesUnread(msgspec.Struct, frozen=True):
    """One step of a stored reply's token logprobs as its divergence class reads it
    (`scoring.LoggedToken`): the top candidates kept as raw JSON bytes, parsed only when
    asked for. The class reads them at one step of a reply, its first differing one:
    a real engine's 64 steps with 5 to 20 candidates each are most of a reply's decode
    and, held as objects, 186 KB a reply."""

    token: str
    """As `TokenLogprob.token`."""
    logprob: float
    """As `TokenLogprob.logprob`."""
    unread_top: msgspec.Raw = msgspec.field(name="top", default=_NO_CANDIDATES)
    """The stored candidates' raw JSON bytes (`top` parses them)."""

    @property
    def top(self) -> tuple[Candidate, ...]:
        """As `TokenLogprob.top`."""
        try:
            return _candidates_decoder.decode(self.unread_top)  # type: ignore[no-any-return]
        except msgspec.ValidationError:  # a candidate's token in its stored form
            return msgspec.convert(  # type: ignore[no-any-return]
                restored_strings(msgspec.json.decode(self.unread_top)), tuple[Candidate, ...])


class _LoggedReply(msgspec.Struct, frozen=True):
    """What a divergence class reads of a stored reply (`scoring.LoggedReply`): its
    reasoning, its text and its token logprobs, the candidates unread."""

    reasoning: str
    """As `Reply.reasoning`."""
    text: str
    """As `Reply.text`."""
    token_logprobs: tuple[_StepCandidatesUnread, ...] | None = None
    """As `Reply.token_logprobs`, the candidates unread (None: none were stored)."""


_logged_reply_decoder = msgspec.json.Decoder(_LoggedReply)


def _logged_reply(stored: Any) -> scoring.LoggedReply | None:
    """A stored outcome's reply as its divergence class reads it (None: no reply).
    A reply holding a string in its stored form where this reads a string (text that
    was not valid UTF-8, in its text or a token) is read whole, as
    `RequestOutcome.from_json_dict` reads it."""
    if not isinstance(stored, StoredOutcome):
        return RequestOutcome.from_json_dict(stored).reply
    raw = stored.reply
    if raw == _NULL:
        return None
    try:
        return _logged_reply_decoder.decode(raw)  # type: ignore[no-any-return]
    except msgspec.ValidationError:
        return _reply(raw)


_Steps = tuple[_StepCandidatesUnread, ...]
_Evidence = tuple[Reply, scoring.DivergenceEvidence]
"""A scored reply's divergence evidence with the reference it was taken against."""


def _evidence_of(reply: Reply | None, steps: _Steps | None,
                 reference: Reply | None) -> _Evidence | None:
    """The divergence evidence (`scoring.divergence_evidence`) of a scored reply read
    without its token logprobs (`steps`) against its probe's reference, from the steps
    decoded in the same pass: a soak that diverges everywhere is read once, not a second
    time for its logprobs, and no reply's logprobs are kept. None when there is nothing
    to classify: nothing left out, no reference read yet, or a reply that is its
    reference's."""
    if steps is None or reference is None or reply is None or reply is reference:
        return None
    return reference, scoring.divergence_evidence(
        reference, _LoggedReply(reply.reasoning, reply.text, steps))


class _ReplyWithoutLogprobs(msgspec.Struct):
    """A stored reply as a scored request's first reading decodes it: every field of
    `Reply`, its token logprobs with their candidates kept as raw JSON bytes (a real
    engine's 64 tokens with 5 to 20 candidates each, decoded whole: 384 objects or more
    and most of the decode). The scoring reads the logprobs only to classify a
    divergence, from a few values taken in the same pass (`_evidence_of`); the reply it
    keeps has none (`_reply_of`)."""

    reasoning: str
    """As `Reply.reasoning`."""
    text: str
    """As `Reply.text`."""
    tool_calls: tuple[ToolCall, ...]
    """As `Reply.tool_calls`."""
    finish_reason: str | None
    """As `Reply.finish_reason`."""
    completion_tokens: int
    """As `Reply.completion_tokens`."""
    usage_reported: bool
    """As `Reply.usage_reported`."""
    prompt_tokens: int | None = None
    """As `Reply.prompt_tokens`."""
    cached_prompt_tokens: int | None = None
    """As `Reply.cached_prompt_tokens`."""
    saw_done: bool = False
    """As `Reply.saw_done`."""
    reasoning_tokens: int | None = None
    """As `Reply.reasoning_tokens`."""
    token_logprobs: _Steps | None = None
    """The stored token logprobs, their candidates unread, taken for the evidence of a
    divergence (`_evidence_of`) and then let go (None: none were stored)."""


_reply_without_logprobs = msgspec.json.Decoder(_ReplyWithoutLogprobs)


def _scored_outcome(record: StoredRequest) -> tuple[RequestOutcome, _Steps | None]:
    """A scored request's outcome for the scoring's first reading, and the token
    logprobs left out of its reply (None: nothing was left out; else the reply has none,
    and its divergence class is taken from these, `ScopeReading.restored_divergences`)."""
    stored = record.payload["outcome"]
    if not isinstance(stored, StoredOutcome) or stored.reply == _NULL:
        return _outcome(record), None
    try:
        light = _reply_without_logprobs.decode(stored.reply)
    except msgspec.ValidationError:  # a string in its stored form: read whole
        return stored.whole(), None
    return (RequestOutcome(stored.timings, _reply_of(light), stored.error, stored.status,
                           _restored_extra(stored.extra)), light.token_logprobs)


def _reply_of(light: _ReplyWithoutLogprobs) -> Reply:
    """The reply `Reply` decodes from the same stored bytes, but without its token
    logprobs (none stored: then it is that reply, nothing left out)."""
    return Reply(reasoning=light.reasoning, text=light.text, tool_calls=light.tool_calls,
                 finish_reason=light.finish_reason, completion_tokens=light.completion_tokens,
                 usage_reported=light.usage_reported, prompt_tokens=light.prompt_tokens,
                 cached_prompt_tokens=light.cached_prompt_tokens, saw_done=light.saw_done,
                 reasoning_tokens=light.reasoning_tokens, token_logprobs=None)


class _ScoredStoredOutcome(msgspec.Struct, frozen=True):
    """A scored request's stored outcome as a digested rung's reading decodes it
    (`ScopeReading._read_scored_fields`): as `StoredOutcome`, but its reply decoded in
    the same pass, without its token logprobs (`_ReplyWithoutLogprobs`). A stored outcome
    that does not fit (a string in its stored form, an older or hostile body) comes as
    plain JSON, read whole as `from_json_dict` reads it."""

    timings: Timings
    """As `StoredOutcome.timings`."""
    reply: _ReplyWithoutLogprobs | None = None
    """The stored reply without its token logprobs; None when no reply came."""
    error: str | None = None
    """As `StoredOutcome.error`."""
    status: int | None = None
    """As `StoredOutcome.status`."""
    extra: dict[str, Any] = msgspec.field(default_factory=dict)
    """As `StoredOutcome.extra`."""


def _scored_fields_outcome(stored: Any) -> tuple[RequestOutcome, _Steps | None]:
    """`_scored_outcome` of a request whose stored outcome `Store.iter_payload_field_at`
    read as `_ScoredStoredOutcome` (else plain JSON, or UNSET when it has none): the
    same outcome and logprobs left out, from the same bytes."""
    if isinstance(stored, _ScoredStoredOutcome):
        light = stored.reply
        reply = None if light is None else _reply_of(light)
        return (RequestOutcome(stored.timings, reply, stored.error, stored.status,
                               _restored_extra(stored.extra)),
                None if light is None else light.token_logprobs)
    return RequestOutcome.from_json_dict(stored), None


def _restored_extra(extra: dict[str, Any]) -> dict[str, Any]:
    """`extra` as `from_json_dict` reads it: a flat one (the common case) as it is, one
    with nested values (where a string's stored form could hide) restored."""
    if not extra:  # what nearly every reply holds: no generator for nothing
        return extra
    if any(isinstance(value, (dict, list)) for value in extra.values()):
        restored: dict[str, Any] = RequestOutcome.from_json_dict(
            {"timings": {"sent_at": 0.0}, "extra": extra}).extra
        return restored
    return extra


class UnreadableOutcome(ValueError):
    """A record's stored outcome is not of the shape this version's driver writes (a
    token logprob that is not a number, a reply that is not an object...): raised where
    the record is read, naming it; `build_report` names its store too."""

    def __init__(self, seq: int | None, arm: str, task: str, trial: int,
                 error: Exception) -> None:
        super().__init__(f"record {seq if seq is not None else '?'} ({arm}, task {task}, "
                         f"repeat {trial}) holds an outcome this version cannot read "
                         f"({one_line(str(error), 200)}): it was not written by the "
                         "contamination driver")


def _unreadable(record: Any, error: Exception, seq: int | None = None) -> UnreadableOutcome:
    """`UnreadableOutcome` of a record or a payload field read alone."""
    return UnreadableOutcome(seq if seq is not None else getattr(record, "seq", None),
                             str(record.arm), str(record.task), int(record.trial), error)


def _outcome(record: StoredRequest) -> RequestOutcome:
    stored = record.payload["outcome"]
    if isinstance(stored, StoredOutcome):
        return stored.whole()
    return RequestOutcome.from_json_dict(stored)


class _ComparedToolCall(msgspec.Struct):
    """What the scoring compares of a stored tool call, as raw JSON bytes (not its id)."""

    name: msgspec.Raw = _NULL
    """The call's stored name."""
    arguments: msgspec.Raw = _NULL
    """The call's stored argument string."""


class _ComparedReply(msgspec.Struct):
    """The part of a stored reply the scoring reads (`_scoring_form`), each field as its
    raw JSON bytes; the rest (prompt and cached-prompt token counts, usage flags, tool
    call ids: diagnostics no cell is judged by) is skipped while decoding."""

    completion_tokens: msgspec.Raw = _NULL
    """As stored."""
    finish_reason: msgspec.Raw = _NULL
    """As stored."""
    reasoning: msgspec.Raw = _NULL
    """As stored."""
    text: msgspec.Raw = _NULL
    """As stored."""
    token_logprobs: msgspec.Raw = _NULL
    """As stored (JSON `null` when none were stored)."""
    tool_calls: list[_ComparedToolCall] = msgspec.field(default_factory=list)
    """As stored, each call's name and arguments."""


_compared_decoder = msgspec.json.Decoder(_ComparedReply)
_COMPARED_FIELDS = ("completion_tokens", "finish_reason", "reasoning", "text", "token_logprobs")


def scored_form(reply: Any) -> bytes | None:
    """The bytes of the part of a stored reply the scoring compares (`_scoring_form`):
    each of its fields' canonical JSON, the tool calls' names and arguments after them,
    one a line (compact JSON holds no raw newline, so the lines split back exactly).
    `reply` is the stored reply's raw bytes (`StoredOutcome.reply`) or its JSON value
    (a record held in memory or read plain): the store keeps canonical JSON, so both
    give the same bytes. None for a stored reply not of a reply's shape."""
    if isinstance(reply, (bytes, msgspec.Raw)):
        try:
            found = _compared_decoder.decode(reply)
        except msgspec.DecodeError:  # (ValidationError is one)
            return None
        parts = [bytes(getattr(found, name)) for name in _COMPARED_FIELDS]
        for call in found.tool_calls:
            parts += (bytes(call.name), bytes(call.arguments))
        return b"\n".join(parts)
    calls = reply.get("tool_calls", []) if isinstance(reply, Mapping) else None
    if not isinstance(calls, list) or not all(isinstance(call, Mapping) for call in calls):
        return None
    parts = [canonical_json(reply.get(name)) for name in _COMPARED_FIELDS]
    for call in calls:
        parts += (canonical_json(call.get("name")), canonical_json(call.get("arguments")))
    return b"\n".join(parts)


def reply_fingerprint(record: StoredRequest) -> str | None:
    """The fingerprint (`digest.fingerprint`) of the compared part of a request's stored
    reply (`scored_form`) when the request was `ok` (no error, a reply), else None.
    `ok` and that part are all the scoring reads of an outcome (`scoring.classify`,
    `scoring.classify_divergence`), so two requests with one fingerprint classify
    alike."""
    stored = record.payload["outcome"]
    if isinstance(stored, StoredOutcome):
        if stored.error is not None or stored.reply == _NULL:
            return None
        form = scored_form(stored.reply)
    elif not isinstance(stored, Mapping) or stored.get("error") is not None \
            or stored.get("reply") is None:
        return None
    else:
        form = scored_form(stored["reply"])
    return None if form is None else fingerprint(form)


def rung_levels(config: Mapping[str, Any],
                records: Iterable[Record] | None = None) -> dict[str, int]:
    """Each rung's stored label → its concurrency level: from the run's configuration,
    or for a `--bisect` run (whose rungs are chosen as it goes) from its records'
    `level`, in the order the rungs ran."""
    if config.get("bisect"):
        found: dict[str, int] = {}
        for record in records or []:
            level = record.payload.get("level")
            if isinstance(level, int) and record.arm not in found:
                found[record.arm] = level
        return found
    return {rung_label(int(level)): int(level) for level in config["concurrency"]}


@dataclass(slots=True)
class _RungRequests:
    """What the reading keeps of one rung's requests (one leg and repeat): its fidelity
    counts, and per request only its sequence number, slot and two flags, enough to
    choose which to list (`shown.chosen_lanes`) and read those back whole."""

    tally: RungTally = field(default_factory=RungTally)
    """The rung's fidelity counts, over every one of its requests."""
    requests: array[int] = field(default_factory=lambda: array("q"))
    """Each request as read, three numbers: its sequence number in the store, its slot in
    its rung, and its flags (`_SCORED`: a cell is classified from it, a probe's own;
    `_FAILED`: it failed, as the rung's fidelity counts it). One array, not one a
    number: a report read from every record of a soak of rungs of two holds half a
    million of these."""
    scored_replies: list[tuple[str, str | None]] = field(default_factory=list)
    """`(task, reply_fingerprint)` of each scored request, in the order read: kept only
    by a reading that digests its rungs (`ScopeReading.fingerprints`)."""
    outcomes: list[RungOutcome] = field(default_factory=list)
    """Each probe's scored outcome or class, by probe (`_ScoredOutcomes`)."""

    def fidelity(self, label: str, concurrency: int, repeat: int) -> RungFidelity:
        """The rung's fidelity, from its tally."""
        return self.tally.fidelity(label, concurrency, repeat)

    def add_request(self, seq: int, slot: int, scored: bool, failed: bool) -> None:
        self.requests.extend((seq, slot, _SCORED * scored | _FAILED * failed))

    @property
    def seqs(self) -> array[int]:
        """Each request's sequence number in the store, in the order read."""
        return self.requests[0::3]

    def lanes(self) -> list[shown.Lane]:
        requests = self.requests
        return [shown.Lane(seq, slot, bool(flags & _SCORED), bool(flags & _FAILED))
                for seq, slot, flags in zip(requests[0::3], requests[1::3], requests[2::3],
                                            strict=True)]


_SCORED, _FAILED = 1, 2
"""A kept request's flags (`_RungRequests.requests`)."""


@dataclass(frozen=True, slots=True)
class _DigestedRung:
    """A rung taken from its digest (`ScopeReading.take_digest`): the digest counts its
    requests, so nothing of them is kept (they are read back if the rung is listed). Its
    own small object, not a `_RungRequests` with empty counts: a soak of rungs of two
    has half a million rungs, and those empty counts were 700 bytes each."""

    digest: AnyDigest
    """The rung's digest, as the run's end keeps it."""
    outcomes: list[RungOutcome] = field(default_factory=list)
    """Each probe's scored outcome or class, by probe (`_ScoredOutcomes`)."""

    def fidelity(self, label: str, concurrency: int, repeat: int) -> RungFidelity:
        """The rung's fidelity as its digest counts it."""
        return self.digest.fidelity(label, concurrency, repeat)


class _ScoredOutcomes:
    """The scored outcome (or class, `scoring.Judged`) of each probe's own request of a
    rung, by `(leg, probe, repeat)`: held in its rung's list (`outcomes`, by probe), not
    in a dict of a key a request. A soak of rungs of two keeps a million of them, and a
    key and its entry were 140 bytes each. A task that is not a probe of the run as
    written (`"00"`, a probe past the last) or a rung not read yet is kept aside."""

    def __init__(self, rungs: Mapping[tuple[str, int], _RungRequests | _DigestedRung],
                 probes: int) -> None:
        self._rungs = rungs
        self._probes = probes
        self._aside: dict[tuple[str, str, int], RungOutcome] = {}
        self._probe_of = {str(probe): probe for probe in range(probes)}

    def _slot(self, key: tuple[str, str, int]) -> tuple[list[RungOutcome], int] | None:
        leg, task, repeat = key
        probe = self._probe_of.get(task)  # ("00", "٣", a probe past the last: none)
        rung = self._rungs.get((leg, repeat)) if probe is not None else None
        if rung is None or probe is None:
            return None
        outcomes = rung.outcomes
        if not outcomes:
            outcomes.extend([None] * self._probes)
        return outcomes, probe

    def __setitem__(self, key: tuple[str, str, int], value: RungOutcome) -> None:
        slot = self._slot(key)
        if slot is None:
            self._aside[key] = value
        else:
            slot[0][slot[1]] = value
            if self._aside:  # kept aside before its rung was read: this one replaces it
                self._aside.pop(key, None)

    def get(self, key: tuple[str, str, int]) -> RungOutcome:
        slot = self._slot(key)
        if slot is None:
            return self._aside.get(key)
        found = slot[0][slot[1]]
        return self._aside.get(key) if found is None else found

    def __getitem__(self, key: tuple[str, str, int]) -> RequestOutcome | scoring.Judged:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def of_rung(self, leg: str, repeat: int) -> list[RungOutcome]:
        """The rung's outcomes by probe (None where none was read), as `legs` gives them
        to the scoring: its own list when nothing of it is aside."""
        rung = self._rungs.get((leg, repeat))
        if rung is not None and len(rung.outcomes) == self._probes and not self._aside:
            return rung.outcomes
        return [self.get((leg, str(probe), repeat)) for probe in range(self._probes)]

    def __len__(self) -> int:
        return (sum(found is not None for rung in self._rungs.values()
                    for found in rung.outcomes) + len(self._aside))


_SOME_REPLY = Reply(reasoning="", text="", tool_calls=(), finish_reason=None,
                    completion_tokens=0, usage_reported=False)


def _fidelity_view(stored: Mapping[str, Any]) -> RequestOutcome:
    """A stored outcome as rung fidelity reads it (`fidelity.RungTally`): its timings,
    error, status and extra, and whether a reply came, which `_SOME_REPLY` stands for.
    The reply itself (text, logprobs: the bulk of a record) is not restored, since
    nothing reads it for a ballast request. Only a value kept in its stored form (text
    that was not valid UTF-8 becomes an object, see `targets.replies`) needs restoring:
    a plain string error and flat extra values are taken as they are."""
    reply = None if stored.get("reply") is None else _SOME_REPLY
    error, extra = stored.get("error"), stored.get("extra") or {}
    if (error is None or isinstance(error, str)) and isinstance(extra, dict) \
            and not any(isinstance(value, (dict, list)) for value in extra.values()):
        return RequestOutcome(msgspec.convert(stored["timings"], Timings), reply, error,
                              stored.get("status"), dict(extra))
    outcome = RequestOutcome.from_json_dict({key: value for key, value in stored.items()
                                             if key != "reply"})
    return RequestOutcome(outcome.timings, reply, outcome.error, outcome.status,
                          outcome.extra)


def _scoring_form(reply: Reply) -> tuple[Any, ...]:
    """Everything of a reply the scoring reads (`scoring.classify`,
    `scoring.classify_divergence`): its streams, tool calls, finish reason, completion
    tokens and token logprobs."""
    return (reply.reasoning, reply.text, [(call.name, call.arguments) for call in reply.tool_calls],
            reply.finish_reason, reply.completion_tokens, reply.token_logprobs)


def _sharing_reply(outcome: RequestOutcome, reference: Reply | None) -> RequestOutcome:
    """`outcome` holding its probe's solo reference reply in place of its own when the two
    are the same for the scoring (`_scoring_form`): it classifies exactly as its own
    would, and a rung cell identical to its reference (the common case) then keeps no
    text of its own while the store streams past."""
    reply = outcome.reply
    # the texts first: a diverged reply (every read one, in a digested rung) differs there
    if reference is None or reply is None or reply is reference or reply.text != reference.text \
            or _scoring_form(reply) != _scoring_form(reference):
        return outcome
    return RequestOutcome(outcome.timings, reference, outcome.error, outcome.status,
                          outcome.extra)


def _scored(record: StoredRequest) -> bool:
    """Whether a cell is classified from this request (ballast and prime are not)."""
    return not record.task.startswith("ballast") and record.arm != "prime"


_NOT_READ = Timings(sent_at=0.0)
"""The timings of a scored outcome taken from its digest's fingerprint rather than read
(`ScopeReading.take_fingerprinted`): the scoring reads only whether it was ok and its
reply, and its rung's fidelity comes from the digest, so nothing reads these."""


def _taken_unread(reply: Reply | None) -> RequestOutcome:
    """An ok scored outcome whose record was not read: its digest fingerprints it as
    `reply`, a reply the report read from another record (see `_NOT_READ`)."""
    return RequestOutcome(_NOT_READ, reply, None, None, {})


@dataclass(frozen=True)
class _LastReply:
    """A scored request's stored reply and the reply read from it (shared with its
    reference where the scoring cannot tell them apart), for the next request of the
    same probe whose stored reply is the same bytes (`ScopeReading._scored`)."""

    stored: msgspec.Raw
    """The stored reply's raw JSON bytes."""
    reply: Reply
    """The reply read from them, the reference's own where the scoring cannot tell the
    two apart (`_sharing_reply`)."""
    light: bool
    """Whether it was read without its token logprobs (`_scored_outcome`)."""
    evidence: _Evidence | None
    """Their divergence evidence (`_evidence_of`), if taken."""
    reference: Reply | None
    """The probe's reference reply when it was read (None: not read yet)."""
    judgment: scoring.Judged | None
    """The reply classified as it was read (`ScopeReading._judgment`), if it was."""


@dataclass
class ScopeReading:
    """A run's scope read in one streaming pass (`add` each record in the store's order):
    the solo legs' records whole, each rung's scored outcomes and fidelity counts, the
    requests counted by leg and status, and nothing else of a record. Memory is bounded
    by the probes and the rungs, plus a few numbers per rung request; never by the
    bodies of the requests."""

    config: Mapping[str, Any]
    """The run's stored configuration (probes, rungs, repeat, bisect)."""
    solo: list[tuple[int, StoredRequest]] = field(default_factory=list)
    """The solo legs' records whole, with their sequence numbers."""
    rungs: dict[tuple[str, int], _RungRequests | _DigestedRung] = field(default_factory=dict)
    """Each rung's requests as kept, or its digest, by (leg, repeat)."""
    scored_outcomes: _ScoredOutcomes = field(init=False)
    """The outcome of each probe's own request in a rung, by (leg, probe, repeat), or,
    when `judging`, its reply classified as it was read (`scoring.Judged`)."""
    statuses: Counter[tuple[str, str]] = field(default_factory=Counter)
    """Requests counted by (leg, status)."""
    legs_seen: dict[str, None] = field(default_factory=dict)
    """The legs in the order first read (a dict for its order)."""
    bisect_levels: dict[str, int] = field(default_factory=dict)
    """A bisect run's rung labels and their levels, in the order the rungs ran."""
    total: int = 0
    """Every request read."""
    references: dict[str, Reply | None] = field(default_factory=dict)
    """Each probe's first solo reference reply (`ref_a`), by task, once read."""
    without_logprobs: dict[tuple[str, str, int], tuple[int, _Evidence | None]] = field(
        default_factory=dict)
    """The scored outcomes read without their token logprobs (`_scored_outcome`): the
    sequence number of each and the divergence evidence taken as it was read
    (`_evidence_of`), if any; read again where the scoring needs them and no evidence
    was taken (`restored_divergences`)."""
    last_replies: dict[str, _LastReply] = field(default_factory=dict)
    """The last scored reply read of each probe, by task (`_scored`)."""
    fingerprints: bool = False
    """Whether each rung's scored replies are fingerprinted (`rung_digest`): a reading
    that digests rungs (the driver's, a recount) does; the report's does not need to.
    Such a reading counts a scored request as it counts any other (its fidelity) and
    keeps no outcome of it: a recount of every rung held every scored reply (1.8 GB for
    a real engine's soak of 100,000 records)."""
    solo_outcomes: dict[int, RequestOutcome] = field(default_factory=dict)
    """The outcomes of the solo records decoded so far, by their index in `solo`: the
    same objects each time, so a scored outcome sharing its reference's reply holds the
    very reply the scoring compares against (`scoring.classify` then compares by
    identity)."""
    judging: bool = False
    """Whether a scored reply is classified as it is read, once its probe's reference
    is settled (`_judgment`), and kept as its class alone: a soak that diverges
    everywhere then holds no reply (a reading for digests only counts, and does not)."""
    solo_last: dict[tuple[str, str], int] = field(default_factory=dict)
    """The index in `solo` of each probe's last solo reference read, by (leg, task):
    the ones `legs` gives the scoring."""
    settled: dict[str, tuple[Reply | scoring.CellClass, str | None]] = field(
        default_factory=dict)
    """Each probe's reference as the scoring takes it (`scoring.reference_of`) with its
    compared form, by task, once asked for; dropped when a solo reference is read."""
    judged_tasks: set[str] = field(default_factory=set)
    """The probes with a reply classified as it was read."""
    stale: bool = False
    """Whether a solo reference was read after a reply of its probe was classified
    against the one before: the classes are then not the scoring's (`_built` reads the
    scope again without judging)."""
    judged_once: dict[tuple[str, int | None, str | None, int, int], scoring.Judged] = field(
        default_factory=dict)
    """Each distinct class a reply was judged to (`_judgment`), keyed by its values and
    its reference's identity (the class holds the reference, so the identity stays its)."""
    judging_terms: tuple[list[str], int, float] | None = None
    """The canaries, the completion-token floor and the near-tie threshold, from the
    configuration, once a reply is classified."""

    def __post_init__(self) -> None:
        self.scored_outcomes = _ScoredOutcomes(self.rungs, len(self.config.get("probe_set", ())))

    def add(self, record: StoredRequest, seq: int = 0) -> None:
        """Count one record; `seq` is its sequence number in the store (to read it back
        whole if it is listed). Run once per record of a run: a ballast request read
        typed (`StoredOutcome`) is counted without building an outcome. A stored outcome
        this version cannot read is `UnreadableOutcome`, naming the record."""
        try:
            self._add(record, seq)
        except msgspec.ValidationError as error:
            raise _unreadable(record, error, seq) from None

    def _add(self, record: StoredRequest, seq: int) -> None:
        self.total += 1
        arm, task, payload = record.arm, record.task, record.payload
        self.statuses[(arm, record.outcome)] += 1
        if arm not in self.legs_seen:
            self.legs_seen[arm] = None
        level = payload.get("level")
        if isinstance(level, int) and arm not in self.bisect_levels:
            self.bisect_levels[arm] = level
        if arm in SOLO_LEGS:
            self.solo.append((seq, record))
            if arm in ("ref_a", "ref_b") and record.trial == 1:
                self.solo_last[(arm, task)] = len(self.solo) - 1
                if arm == "ref_a":
                    self.references[task] = self._solo_outcome(len(self.solo) - 1).reply
                self.settled.pop(task, None)
                self.stale = self.stale or task in self.judged_tasks
            return
        key = (arm, record.trial)
        group = self.rungs.get(key)
        if group is None:
            group = self.rungs[key] = _RungRequests()
        # a rung taken from its digest has its scored requests read (`add_scored`), never
        # counted again here
        assert isinstance(group, _RungRequests), f"rung {arm} #{record.trial} is digested"
        cancel_planned = payload.get("cancel_after_deltas") is not None
        stored = payload["outcome"]
        scored = task.isdigit()  # a probe's own request: a cell is classified from it
        if scored and not self.fingerprints:
            outcome = self._scored(record, seq)
            failed = group.tally.add(outcome, cancel_planned)
        elif isinstance(stored, StoredOutcome):
            failed = stored.count_in(group.tally, cancel_planned)
        else:
            failed = group.tally.add(_fidelity_view(stored), cancel_planned)
        if scored and self.fingerprints:  # a reading that digests: counted, not kept
            group.scored_replies.append((task, reply_fingerprint(record)))
        group.add_request(seq, int(payload.get("slot", 0)), _scored(record), failed)

    def take_digest(self, digest: AnyDigest) -> None:
        """Count a rung from its digest, at the place of its first record in the store's
        order (so legs and statuses come in the order `add` would have met them); its
        scored requests then go to `add_scored`, its others are not read."""
        self.total += digest.sent
        if digest.leg not in self.legs_seen:
            self.legs_seen[digest.leg] = None
        if digest.level is not None and digest.leg not in self.bisect_levels:
            self.bisect_levels[digest.leg] = digest.level
        for status, count in digest.statuses:
            self.statuses[(digest.leg, status)] += count
        self.rungs[digest.key] = _DigestedRung(digest)

    def rung_digest(self, key: tuple[str, int]) -> RungDigest:
        """The digest of rung `key` as read by `add` (one rung's records read alone: its
        requests by status are the reading's), the driver's and the recount's one rule."""
        group = self.rungs.get(key) or _RungRequests()
        if isinstance(group, _DigestedRung):  # taken from its digest: what it counts
            digest = group.digest
            return digest.whole() if isinstance(digest, StoredRungDigest) else digest
        return digest_from(key[0], key[1], group.tally,
                           [(status, count) for (_, status), count in self.statuses.items()],
                           level=self.bisect_levels.get(key[0]),
                           scored_replies=group.scored_replies)

    def add_scored(self, record: StoredRequest) -> None:
        """What `add` keeps of a request of a digested rung beyond the digest's counts:
        its rung's level (a bisect's) and, for a probe's own request, its outcome."""
        level = record.payload.get("level")
        if isinstance(level, int) and record.arm not in self.bisect_levels:
            self.bisect_levels[record.arm] = level
        if record.task.isdigit():
            try:
                self._scored(record, getattr(record, "seq", 0))
            except msgspec.ValidationError as error:
                raise _unreadable(record, error) from None

    def take_fingerprinted(self, store: Store, digests: Mapping[tuple[str, int], AnyDigest],
                           tasks: Sequence[str]) -> None:
        """The scored requests (`tasks`: the probes') of rungs taken from digests that
        fingerprint their replies, once every solo record is read. One whose fingerprint
        is its probe's reference's (the `ref_a` reply the scoring compares against) is
        that reply, taken without reading the record (it holds the same bytes, so the
        scoring classifies it as it would the read one). Of the others, a request whose
        probe and fingerprint another request claims too is read whole the first time
        (`add_scored`); when the report's own fingerprint of what it read is the claimed
        one, every later request claiming it shares what was kept of it unread, and
        otherwise each is read. The rest (a request no digest fingerprints, or the only
        one claiming its fingerprint) are read by their outcome alone. The rungs are taken
        a batch at a time in the digests' order, so what is held while they are read is
        bounded by a batch and by the fingerprints claimed more than once, not by the
        scored requests (a soak of tiny rungs has three quarters of a million)."""
        references = self._reference_fingerprints()
        known = {(task, printed): _taken_unread(reply)
                 for task, (printed, reply) in references.items()}
        repeated = _claimed_more_than_once(digests.values(), tasks, known)
        scope = str(self.config["scope"])
        shared: dict[tuple[str, str], _Shared | None] = {}
        batch: list[tuple[str, int, str, str | None]] = []  # (leg, repeat, task, claim)
        for (leg, repeat), digest in digests.items():
            claims = digest.claims()
            for task in tasks:
                claimed = claims.get(task)
                taken = known.get((task, claimed)) if claimed is not None else None
                if taken is not None:
                    self.scored_outcomes[(leg, task, repeat)] = taken
                else:
                    batch.append((leg, repeat, task, claimed))
            if len(batch) >= _CLAIMS_PER_BATCH:
                self._take_claimed(store, scope, batch, repeated, shared)
                batch = []
        self._take_claimed(store, scope, batch, repeated, shared)

    def _take_claimed(self, store: Store, scope: str,
                      places: Sequence[tuple[str, int, str, str | None]], repeated: set[int],
                      shared: dict[tuple[str, str], _Shared | None]) -> None:
        """`take_fingerprinted` of a batch of scored requests (`(leg, repeat, task,
        claim or None)`), `repeated` the hashes of the claims made more than once and
        `shared` what each such claim's first reading kept (None: not its claim)."""
        claimed_at: dict[tuple[str, int, str], str] = {}  # first readings, their claims
        for leg, repeat, task, claimed in places:
            if claimed is not None and (task, claimed) not in shared \
                    and hash((task, claimed)) in repeated:
                shared[(task, claimed)] = None  # unless read and confirmed below
                claimed_at[(leg, repeat, task)] = claimed
        # a first reading later requests would share is fingerprinted from its stored
        # bytes: those are read as the full pass reads them, the rest by their outcome alone
        for summary in self._read_scored(store, scope, list(claimed_at)):
            claimed = claimed_at[(summary.arm, summary.trial, summary.task)]
            if reply_fingerprint(summary) == claimed:
                key = (summary.arm, summary.task, summary.trial)
                kept = self.scored_outcomes[key]
                shared[(summary.task, claimed)] = (
                    kept if isinstance(kept, scoring.Judged) else _taken_unread(kept.reply),
                    self.without_logprobs.get(key))
        doubted = []
        for leg, repeat, task, claimed in places:
            if (leg, repeat, task) in claimed_at:
                continue  # read whole above
            found = shared.get((task, claimed)) if claimed is not None else None
            if found is None:  # no claim, an only one, or one the bytes did not bear out
                doubted.append((leg, repeat, task))
                continue
            # the same bytes: the same class, or the same reply taken unread, classified
            # as the first is (read again for its logprobs if it is)
            self.scored_outcomes[(leg, task, repeat)] = found[0]
            if found[1] is not None:
                self.without_logprobs[(leg, task, repeat)] = found[1]
        self._read_scored_outcomes(store, scope, doubted)

    def _scored_seqs(self, store: Store, scope: str,
                     places: Sequence[tuple[str, int, str]]) -> list[int]:
        """The sequence numbers of the scored requests at `places` (leg, repeat, task),
        looked up over the address index."""
        return [seq for seq, _, _, _ in scored_addresses(store, scope, places)]

    def _read_scored(self, store: Store, scope: str,
                     places: Sequence[tuple[str, int, str]]) -> Iterator[StoredRequest]:
        """Look up and read the scored requests at `places` (leg, repeat, task), each
        kept by `add_scored`; yields each as read."""
        if not places:
            return
        for summary in _stored_requests(store, scope, self._scored_seqs(store, scope, places)):
            self.add_scored(summary)
            yield summary

    def _read_scored_outcomes(self, store: Store, scope: str,
                              places: Sequence[tuple[str, int, str]]) -> None:
        """Look up and keep the scored requests at `places` (of fingerprinted rungs,
        whose digests hold their levels) as `_read_scored` keeps them, from their stored
        outcome alone, its reply decoded in the same pass (`_ScoredStoredOutcome`)."""
        if not places:
            return
        for place in store.iter_payload_field_at(self._scored_seqs(store, scope, places),
                                                 suite=SUITE, scope=scope, field="outcome",
                                                 kind=_ScoredStoredOutcome):
            try:
                read, left_out = _scored_fields_outcome(place.value)
                reference = self.references.get(place.task)
                outcome = _sharing_reply(read, reference)
                evidence = _evidence_of(outcome.reply, left_out, reference)
                judgment = self._judgment(place.task, outcome, left_out is not None, evidence)
            except msgspec.ValidationError as error:  # (a candidate is read for its evidence)
                raise _unreadable(place, error) from None
            self._keep_scored((place.arm, place.task, place.trial), place.seq, outcome,
                              left_out is not None, evidence, judgment)

    def _reference_fingerprints(self) -> dict[str, tuple[str, Reply]]:
        """Each probe's reference reply (the last `ref_a` record of it, the one `legs`
        gives the scoring) with its fingerprint, by task; a probe whose reference was not
        ok has none."""
        found: dict[str, tuple[str, Reply]] = {}
        for (leg, task), index in self.solo_last.items():
            if leg != "ref_a":
                continue
            record = self.solo[index][1]
            reply = self._solo_outcome(index).reply
            printed = reply_fingerprint(record)
            if printed is not None and reply is not None:
                found[task] = (printed, reply)
        return found

    def _solo_outcome(self, index: int) -> RequestOutcome:
        """The outcome of `solo[index]`, decoded once."""
        outcome = self.solo_outcomes.get(index)
        if outcome is None:
            seq, record = self.solo[index]
            try:
                outcome = self.solo_outcomes[index] = _outcome(record)
            except msgspec.ValidationError as error:
                raise _unreadable(record, error, seq) from None
        return outcome

    def _scored(self, record: StoredRequest, seq: int) -> RequestOutcome:
        """Keep a probe's own request of a rung (without its logprobs, see
        `_scored_outcome`), sharing its reference's reply where the scoring cannot tell
        them apart; the outcome as read. A stored reply byte for byte the last one read
        for the same probe (and the same reference) is that reply again: it is not
        decoded and compared a second time."""
        key = (record.arm, record.task, record.trial)
        reference = self.references.get(record.task)
        stored = record.payload["outcome"]
        last = self.last_replies.get(record.task)
        if (last is not None and isinstance(stored, StoredOutcome) and last.reference is reference
                and stored.reply == last.stored):
            outcome = RequestOutcome(stored.timings, last.reply, stored.error, stored.status,
                                     _restored_extra(stored.extra))
            light, evidence = last.light, last.evidence
            # the same reply classifies alike (a failed request's is its own outcome's)
            judgment = (last.judgment if outcome.ok and last.judgment is not None
                        else self._judgment(record.task, outcome, light, evidence))
        else:
            read, left_out = _scored_outcome(record)
            outcome = _sharing_reply(read, reference)
            light = left_out is not None
            evidence = _evidence_of(outcome.reply, left_out, reference)
            judgment = self._judgment(record.task, outcome, light, evidence)
            if isinstance(stored, StoredOutcome) and outcome.reply is not None:
                self.last_replies[record.task] = _LastReply(stored.reply, outcome.reply, light,
                                                            evidence, reference, judgment)
        self._keep_scored(key, seq, outcome, light, evidence, judgment)
        return outcome

    def _judgment(self, task: str, outcome: RequestOutcome, light: bool,
                  evidence: _Evidence | None) -> scoring.Judged | None:
        """A scored reply classified as the scoring would classify it (`scoring.judged`),
        when this reading judges and its probe's reference is settled; None when it is
        kept as its outcome: a failed request or a reply below the floor (its class needs
        its rung's reason), no usable reference yet, or a reply read without its token
        logprobs whose evidence was not taken against that reference."""
        if not self.judging or not task.isdigit():
            return None
        reference, form = self._settled_reference(task)
        if not isinstance(reference, Reply):
            return None
        if light and outcome.reply is not reference \
                and (evidence is None or evidence[0] is not reference):
            return None
        if self.judging_terms is None:
            self.judging_terms = (
                [str(probe["canary"]) for probe in self.config["probe_set"]],
                int(self.config["min_completion_tokens"]),
                float(self.config.get("near_tie_nats", scoring.DEFAULT_NEAR_TIE_NATS)))
        canaries, floor, near_tie = self.judging_terms
        probe = int(task)
        found = scoring.judged(reference, outcome, canaries[probe] if probe < len(canaries)
                               else "", canaries, floor, near_tie, reference_form=form,
                               evidence=None if evidence is None else evidence[1])
        if found is None:
            return None
        self.judged_tasks.add(task)
        # one object per distinct class: a soak that diverges everywhere has a million
        # judged replies but a few hundred classes (kind, place, divergence, canaries)
        return self.judged_once.setdefault(
            (found.kind, found.at, found.divergence, found.foreign, id(found.reference)), found)

    def _settled_reference(self, task: str) -> tuple[Reply | scoring.CellClass, str | None]:
        """Probe `task`'s reference as the scoring will take it from the solo references
        read so far (`legs`), and its compared form."""
        found = self.settled.get(task)
        if found is None:
            a, b = (self.solo_last.get((leg, task)) for leg in ("ref_a", "ref_b"))
            reference = scoring.reference_of(
                None if a is None else self._solo_outcome(a),
                None if b is None else self._solo_outcome(b),
                int(self.config["min_completion_tokens"]))
            form = scoring.canonical(reference) if isinstance(reference, Reply) else None
            found = self.settled[task] = (reference, form)
        return found

    def _keep_scored(self, key: tuple[str, str, int], seq: int, outcome: RequestOutcome,
                     light: bool, evidence: _Evidence | None,
                     judgment: scoring.Judged | None = None) -> None:
        """Keep a scored outcome as read (its class alone, when judged), noting the
        sequence number of one read without its token logprobs and the divergence
        evidence taken from them, if any."""
        if judgment is not None:  # classified whole: nothing to read again
            # each leg and task held once, not once a request (a soak of tiny rungs
            # keeps three quarters of a million of these keys)
            key = (sys.intern(key[0]), sys.intern(key[1]), key[2])
            self.scored_outcomes[key] = judgment
            self.without_logprobs.pop(key, None)
            return
        self.scored_outcomes[key] = outcome
        if light:
            self.without_logprobs[key] = (seq, evidence)
        else:
            self.without_logprobs.pop(key, None)

    def restored_divergences(self, store: Store, result: scoring.Score,
                             legs: Legs) -> scoring.Score:
        """`result` with the divergence point of every cell whose reply was read without
        its token logprobs classified from them (`scoring.with_divergences`): from the
        evidence taken as it was read, when taken against the reference the scoring
        compared with, else from the record read again, one at a time, each only as far
        as its class needs (`_logged_reply`) and let go. Either way no whole reply is
        held: a soak that diverges everywhere would hold every one (75,000 replies of a
        real engine: 14 GiB). A request that shares another's reply unread
        (`take_fingerprinted`) is classified from that record."""
        if not self.without_logprobs:  # a run without logprobs: every point as scored
            return result
        references: dict[int, Reply | scoring.CellClass] = {}

        def reference_of(probe: int) -> Reply | scoring.CellClass:
            if probe not in references:
                references[probe] = scoring.probe_reference(legs, probe)
            return references[probe]

        points: dict[int, scoring.DivergencePoint] = {}
        wanted: dict[int, list[tuple[int, scoring.Cell]]] = {}
        for index, cell in enumerate(result.cells):
            if cell.divergence is None:
                continue
            left_out = self.without_logprobs.get((cell.leg, str(cell.probe), cell.repeat))
            reference = reference_of(cell.probe)
            if left_out is None or not isinstance(reference, Reply):
                continue  # read whole already, or nothing to compare with
            seq, kept = left_out
            if kept is not None and kept[0] is reference:
                point = scoring.cell_divergence(reference, cell.result, kept[1],
                                                legs.near_tie_nats)
                if point is not None:
                    points[index] = point
            else:
                wanted.setdefault(seq, []).append((index, cell))
        if wanted:
            for summary in _stored_requests(store, str(self.config["scope"]), sorted(wanted)):
                try:
                    reply = _logged_reply(summary.payload["outcome"])
                except msgspec.ValidationError as error:
                    raise _unreadable(summary, error) from None
                if reply is None:
                    continue  # the cell keeps the point it was scored with
                taken: dict[int, scoring.DivergenceEvidence] = {}  # by probe
                for index, cell in wanted[summary.seq]:
                    reference = reference_of(cell.probe)
                    assert isinstance(reference, Reply)  # as checked above
                    if cell.probe not in taken:
                        taken[cell.probe] = scoring.divergence_evidence(reference, reply)
                    point = scoring.cell_divergence(reference, cell.result, taken[cell.probe],
                                                    legs.near_tie_nats)
                    if point is not None:
                        points[index] = point
        return scoring.with_divergences(result, points)

    @property
    def levels(self) -> dict[str, int]:
        if self.config.get("bisect"):
            return dict(self.bisect_levels)
        return rung_levels(self.config)

    def legs(self) -> Legs:
        """The scoring input (rungs carry their fidelity, counted as they streamed)."""
        config = self.config
        probes = len(config["probe_set"])
        by_address = {(r.arm, r.task, r.trial): index for index, (_, r) in enumerate(self.solo)}

        def solo(leg: str) -> list[RequestOutcome | None]:
            found = [by_address.get((leg, str(i), 1)) for i in range(probes)]
            return [self._solo_outcome(index) if index is not None else None
                    for index in found]

        rungs = []
        outcomes = self.scored_outcomes
        levels = self.levels  # (made anew each time: its labels too)
        for repetition in range(1, int(config["repeat"]) + 1):
            for label, level in levels.items():
                group = self.rungs.get((label, repetition)) or _RungRequests()
                scored = outcomes.of_rung(label, repetition)
                rungs.append(RungOutcomes(label, level, repetition, scored,
                                          fidelity=group.fidelity(label, level, repetition)))
        return Legs(ref_a=solo("ref_a"), ref_b=solo("ref_b"), rungs=rungs, post=solo("post"),
                    canaries=[p["canary"] for p in config["probe_set"]],
                    min_completion_tokens=int(config["min_completion_tokens"]),
                    near_tie_nats=float(config.get("near_tie_nats",
                                                   scoring.DEFAULT_NEAR_TIE_NATS)))


def read_scope(records: Iterable[StoredRequest], config: Mapping[str, Any], *,
               judging: bool = True) -> ScopeReading:
    """Every record of a scope, in the store's order, read into a `ScopeReading`."""
    reading = ScopeReading(config, judging=judging)
    for record in records:
        reading.add(record, getattr(record, "seq", 0))
    return reading


def digest_of(records: Iterable[StoredRequest]) -> list[RungDigest]:
    """The digest of each rung among `records` (the driver's: a rung's records as it
    appends them), counted by `ScopeReading.add`, the full pass's own counting; the solo
    legs have none."""
    return list(_digests_as_read(records))


def _digests_as_read(records: Iterable[StoredRequest],
                     counts: Mapping[tuple[str, int], int] | None = None,
                     ) -> Iterator[RungDigest]:
    """`digest_of`, each rung's digest given as soon as its last record is read when
    `counts` (the store's records of each rung) says which that is, so only the rungs
    being read are held, not every rung's reading at once (half a million, in a soak of
    rungs of two); the rest at the end, in the order first read."""
    readings: dict[tuple[str, int], ScopeReading] = {}
    for record in records:
        if record.arm in SOLO_LEGS:
            continue
        key = (record.arm, record.trial)
        reading = readings.get(key)
        if reading is None:
            reading = readings[key] = ScopeReading({}, fingerprints=True)
        reading.add(record)
        if counts is not None and reading.total == counts.get(key):
            yield readings.pop(key).rung_digest(key)
    for key, reading in readings.items():  # (with counts: one whose count moved)
        yield reading.rung_digest(key)


def scored_addresses(store: Store, scope: str, places: Collection[tuple[str, int, str]],
                     ) -> list[tuple[int, str, int, str]]:
    """`(seq, leg, repeat, task)` of every record of the scope at one of `places`
    (leg, repeat, task), looked up over the address index, in the store's order."""
    wanted = set(places)
    return [(seq, leg, repeat, task) for seq, leg, repeat, task in store.record_addresses(
                SUITE, scope, {(leg, repeat) for leg, repeat, _ in wanted},
                tasks={task for _, _, task in wanted})
            if (leg, repeat, task) in wanted]


_CLAIMS_PER_BATCH = 4096
"""Scored requests of fingerprinted rungs looked up and read at a time
(`ScopeReading.take_fingerprinted`)."""
_Shared = tuple[RequestOutcome | scoring.Judged, tuple[int, _Evidence | None] | None]
"""What a claim's first reading kept, for the later requests claiming it: their kept
outcome or class, and its entry among the replies read without their logprobs."""


def _claimed_more_than_once(digests: Iterable[AnyDigest], tasks: Sequence[str],
                            known: Collection[tuple[str, str]]) -> set[int]:
    """The hashes of the `(task, fingerprint)` claims that more than one scored request
    of these digests makes, leaving out the references' (`known`). Found over a sorted
    list of hashes, not a dict of claims: a soak whose replies are each their own
    claims three quarters of a million, none twice. Two claims sharing a hash make both
    count as repeated, which reads one more request whole and changes nothing else."""
    wanted = set(tasks)
    hashes = sorted(hash((task, claimed)) for digest in digests
                    for task, claimed in digest.claims().items()
                    if task in wanted and (task, claimed) not in known)
    return {first for first, second in pairwise(hashes) if first == second}


class _DigestDisagrees(Exception):
    """A listed rung recounted from its records differs from its digest."""


def _stored_digests(store: Store, scope: str) -> dict[tuple[str, int], AnyDigest]:
    """The rung digests in the ends of the runs of a scope (the run and the runs
    resuming it), by (leg, repeat); a rung digested twice (which no driver writes) is
    read from its records."""
    found: dict[tuple[str, int], AnyDigest] = {}
    twice: set[tuple[str, int]] = set()
    for info in store.runs_with_config(SUITE, ("scope",)):
        if info.end is None or str(info.run.config.get("scope", info.run.run_id)) != scope:
            continue
        for digest in stored_digests_in(info.end.summary):
            if digest.key in found:
                twice.add(digest.key)
            found[digest.key] = digest
    for key in twice:
        del found[key]
    return found


def _recounted_digests(store: Store, scope: str) -> list[str]:
    """Every rung digest in the ends of a scope's runs checked against its rung's records,
    read again and counted as the driver counts them (`digest_of`): one line per digest
    that differs (`benchwarden show --from-records`)."""
    stored = _stored_digests(store, scope)
    if not stored:
        return []
    # each rung compared once its last record is read (the store's count of it)
    counts = store.record_counts(SUITE, scope)
    differs = [key for key in stored if key not in counts or key[0] in SOLO_LEGS]
    for recounted in _digests_as_read(_stored_requests(store, scope), counts):
        digest = stored.get(recounted.key)
        if digest is not None and not digest.agrees_with(recounted):
            differs.append(recounted.key)
    return [f"rung {leg} #{repeat} read from its records differs from its digest in the "
            "run's end" for leg, repeat in sorted(differs)]


def _digest_warning(scope: str, digest: AnyDigest, records: int | None) -> str:
    stored = "no record" if records is None else f"{records} records"
    return (f"a run end of scope {scope} summarises rung {digest.leg} #{digest.repeat} as "
            f"{digest.sent} requests but the store holds {stored} of it: the rung is "
            "reported from its records")


def _read_with_digests(store: Store, config: Mapping[str, Any],
                       digests: Mapping[tuple[str, int], AnyDigest],
                       warnings: list[str], *, judging: bool = True) -> ScopeReading:
    """The scope read as `ScopeReading` reads it in one pass, but each rung with a digest
    whose request count is the store's from its digest and its scored requests only
    (what the digest does not hold), and of those only the ones whose reply is not
    fingerprinted as its reference's (`take_fingerprinted`); every other record read as
    the full pass reads it. A digest whose count differs is not used: `warnings` says so.
    Each digest is taken where its rung's first request is in the store's order, read
    or not, so legs, levels and statuses keep the order the full pass gives them."""
    scope = str(config["scope"])
    counts = store.record_counts(SUITE, scope)
    used: dict[tuple[str, int], AnyDigest] = {}
    for key, digest in digests.items():
        found = counts.get(key)
        if found != digest.sent or key[0] in SOLO_LEGS:
            warnings.append(_digest_warning(scope, digest, found))
        else:
            used[key] = digest
    tasks = [str(index) for index in range(len(config["probe_set"]))]
    wanted = store.record_seqs(SUITE, scope, [key for key in counts if key not in used])
    del counts  # (a count a rung: half a million rungs of two)
    # where each rung begins: its first request (slot 0, probe 0's own, which the driver
    # writes first), one index lookup a rung; a rung without one, and a rung whose
    # digest predates fingerprints (its scored requests are read in place, as they always
    # were), are looked up by every scored request. Each place is (seq, digest), the
    # earliest of a rung taken (`_take_in_order`): a key a rung made of the rows' own
    # strings and numbers was 200 bytes a rung
    places = [(seq, used[(leg, repeat)]) for seq, leg, repeat, _ in store.record_addresses(
        SUITE, scope, used, tasks=tasks[:1])]
    placed = {id(digest) for _, digest in places}
    looked_up = {key for key, digest in used.items()
                 if id(digest) not in placed or not digest.fingerprinted}
    for seq, leg, repeat, _ in (store.record_addresses(SUITE, scope, looked_up, tasks=tasks)
                                if looked_up else ()):
        digest = used[(leg, repeat)]
        if id(digest) not in placed:
            places.append((seq, digest))
        if not digest.fingerprinted:
            wanted.append(seq)
    places.sort(key=lambda place: place[0])
    unplaced = [digest for digest in used.values() if id(digest) not in placed]
    del placed
    reading = ScopeReading(config, judging=judging)
    taken = 0
    for summary in _stored_requests(store, scope, sorted(wanted)):
        while taken < len(places) and places[taken][0] <= summary.seq:
            _take_in_order(reading, places[taken][1])
            taken += 1
        if (summary.arm, summary.trial) in used:
            reading.add_scored(summary)
        else:
            reading.add(summary, summary.seq)
    for _, digest in places[taken:]:
        _take_in_order(reading, digest)
    del places
    for digest in unplaced:  # a rung with no scored request (none is written)
        reading.take_digest(digest)
    reading.take_fingerprinted(store, {key: digest for key, digest in used.items()
                                       if digest.fingerprinted}, tasks)
    return reading


def _take_in_order(reading: ScopeReading, digest: AnyDigest) -> None:
    """Take a rung's digest at its first place in the store's order (a rung holding more
    than one first request is taken at the earliest)."""
    if digest.key not in reading.rungs:
        reading.take_digest(digest)


def _rung_read_whole(store: Store, reading: ScopeReading,
                     key: tuple[str, int]) -> _RungRequests:
    """A digested rung's requests read from the store (it is listed), checked against its
    digest: `_DigestDisagrees` when they differ."""
    group = reading.rungs[key]
    if not isinstance(group, _DigestedRung):
        return group
    scope = str(reading.config["scope"])
    recount = ScopeReading(reading.config, fingerprints=True)
    for summary in _stored_requests(store, scope, store.record_seqs(SUITE, scope, [key])):
        recount.add(summary, summary.seq)
    if not group.digest.agrees_with(recount.rung_digest(key)):
        raise _DigestDisagrees(f"rung {key[0]} #{key[1]}")
    found = recount.rungs.get(key) or _RungRequests()
    assert isinstance(found, _RungRequests)  # a recount reads records, never digests
    return found


def legs_from_records(records: Iterable[StoredRequest], config: Mapping[str, Any]) -> Legs:
    """Rebuild the scoring input from stored records and the run's configuration (a
    scored reply classified as it was read comes as `scoring.Judged`: see
    `ScopeReading.judging`)."""
    return read_scope(records, config).legs()


def bisect_progress(result: scoring.Score) -> dict[int, bool | None]:
    """Per rung level run: whether a probe diverged in it (None: unmeasured)."""
    levels = {fit.label: fit.concurrency for fit in result.fidelity}
    kinds_of: dict[int, set[str]] = defaultdict(set)
    for fit, kinds in zip(result.fidelity, result.rung_kinds, strict=True):
        kinds_of[levels[fit.label]] |= kinds
    return {level: scoring.kinds_diverge(kinds_of[level]) for level in levels.values()}


def _bisect_block(config: Mapping[str, Any], result: scoring.Score) -> dict[str, Any] | None:
    if not config.get("bisect"):
        return None
    low, high = (int(value) for value in config["bisect"])
    shown = bisect_progress(result)
    upcoming, smallest = scoring.bisect_step(low, high, shown)
    stopped = [level for level, diverged in shown.items() if diverged is None]
    if smallest is not None:
        reading = (f"smallest diverging concurrency in {low}-{high}: {smallest} "
                   f"(rungs tried: {', '.join(map(str, shown))})")
    elif stopped:
        reading = (f"bisect stopped: rung c{stopped[0]} was unmeasured, so it cannot say "
                   "whether the probes diverge there")
    elif upcoming is not None:
        reading = f"bisect incomplete: the run stopped before rung c{upcoming}"
    else:
        reading = f"no probe diverged at concurrency {high}, the top of {low}-{high}"
    return {"low": low, "high": high, "smallest": smallest,
            "finished": upcoming is None and not stopped, "reading": reading,
            "tried": [{"level": level, "diverged": diverged} for level, diverged in shown.items()]}


def _milliseconds(later: Any, earlier: Any) -> float | None:
    if isinstance(later, (int, float)) and isinstance(earlier, (int, float)):
        return (later - earlier) * 1000.0
    return None


def _add_times(entries: list[dict[str, Any]],
               zeros: Mapping[tuple[str, Any], float | None] | None = None) -> None:
    """Each entry's times in ms: after its leg's (and repeat's) first send, and after its
    own send. Computed here once, so the page draws the timeline and prints the waits
    without doing arithmetic of its own. `zeros`: the first send of a leg and repeat
    whose requests are not all among `entries` (a rung listed in part), counted over
    all of them."""
    def timings(entry: Mapping[str, Any]) -> Mapping[str, Any]:
        outcome = entry.get("outcome")
        found = outcome.get("timings") if isinstance(outcome, Mapping) else None
        return found if isinstance(found, Mapping) else {}

    groups: dict[tuple[str, Any], list[dict[str, Any]]] = defaultdict(list)
    for entry in entries:
        groups[(str(entry.get("leg")), entry.get("repeat"))].append(entry)
    for key, members in groups.items():
        if zeros is not None and key in zeros:
            zero = zeros[key]
        else:
            sends = [t["sent_at"] for t in map(timings, members)
                     if isinstance(t.get("sent_at"), (int, float))]
            zero = min(sends) if sends else None
        for entry in members:
            times = timings(entry)
            sent = times.get("sent_at")
            entry.update(sent_ms=_milliseconds(sent, zero),
                         first_content_ms=_milliseconds(times.get("first_content_at"), zero),
                         last_byte_ms=_milliseconds(times.get("last_byte_at"), zero),
                         wait_ms=_milliseconds(times.get("first_content_at"), sent),
                         last_byte_after_ms=_milliseconds(times.get("last_byte_at"), sent))


def _request_entries(records: Iterable[StoredRequest], levels: Mapping[str, int],
                     zeros: Mapping[tuple[str, Any], float | None] | None = None,
                     ) -> list[dict[str, Any]]:
    entries = [{
        "leg": record.arm, "task": record.task, "probe": record.payload.get("probe"),
        "repeat": record.trial, "slot": record.payload.get("slot"),
        "scored": _scored(record),
        "status": record.outcome, "run_id": record.run_id,
        "cancel_after_deltas": record.payload.get("cancel_after_deltas"),
        "outcome": dict(record.payload["outcome"]), "level": levels.get(record.arm),
    } for record in records]
    _add_times(entries, zeros)
    return entries


def _cell_entries(cells: Iterable[scoring.Cell],
                  levels: Mapping[str, int]) -> list[dict[str, Any]]:
    """The scored cells, each rung cell with its rung's level."""
    return [{**cell.to_json_dict(), "level": levels[cell.leg]} if cell.leg in levels
            else cell.to_json_dict() for cell in cells]


def _references_part_at(result: scoring.Score, legs: Legs) -> dict[int, int]:
    """Where the two solo references of each alone-unstable probe part, in characters."""
    found = {}
    for cell in result.cells:
        if isinstance(cell.result, scoring.AloneUnstable):
            a, b = legs.ref_a[cell.probe], legs.ref_b[cell.probe]
            if a is not None and b is not None and a.reply and b.reply:
                found[cell.probe] = scoring.common_prefix(scoring.canonical(a.reply),
                                                          scoring.canonical(b.reply))
    return found


def _listed_cells(store: Store, reading: ScopeReading, result: scoring.Score, legs: Legs,
                  chosen: Sequence[int]) -> list[scoring.Cell]:
    """The cells of the listed rungs (`chosen`, indexes in `legs.rungs`) and every cell
    of no rung, in the score's order (by probe, then leg as run, the post-check last).
    A cell the score only counted (`scoring.Judged`: its reply classified as it was
    read) is made again from its record read whole (`scoring.rung_cell`): at most the
    listed rungs' scored requests are read."""
    listed = {(legs.rungs[index].label, legs.rungs[index].repeat) for index in chosen}
    cells = [cell for cell in result.cells
             if cell.leg in (scoring.REFERENCE_LEG, scoring.POST_LEG)
             or (cell.leg, cell.repeat) in listed]
    counted = {(legs.rungs[index].label, legs.rungs[index].repeat, str(probe)): (index, probe)
               for index in chosen for probe, got in enumerate(legs.rungs[index].scored)
               if isinstance(got, scoring.Judged)}
    if not counted:
        return cells
    scope = str(reading.config["scope"])
    latest: dict[tuple[str, int, str], int] = {}  # the record the reading kept: the last
    for seq, leg, repeat, task in scored_addresses(store, scope, counted):
        latest[(leg, repeat, task)] = max(seq, latest.get((leg, repeat, task), seq))
    for summary in _stored_requests(store, scope, sorted(latest.values())):
        index, probe = counted[(summary.arm, summary.trial, summary.task)]
        try:
            outcome = _outcome(summary)
        except msgspec.ValidationError as error:
            raise _unreadable(summary, error) from None
        cells.append(scoring.rung_cell(legs, index, probe, outcome))
    position = {(rung.label, rung.repeat): index for index, rung in enumerate(legs.rungs)}
    after = len(legs.rungs)
    return sorted(cells, key=lambda cell: (cell.probe, -1 if cell.leg == scoring.REFERENCE_LEG
                                           else position.get((cell.leg, cell.repeat), after)))


def export_command(store: Store) -> str:
    """The command that writes every contamination request of this store as data (a
    resumed run's scope spans two runs, so it is chosen by suite; the `scope` column
    names the run each request belongs to)."""
    return (f"benchwarden export --store {shlex.quote(store.location)} --suite {SUITE} "
            "--format jsonl --out contamination-requests.jsonl")


def _listing(store: Store, reading: ScopeReading, result: scoring.Score, legs: Legs,
             levels: Mapping[str, int]) -> dict[str, Any]:
    """What the report lists (`shown`): the cells, rungs and requests of the rungs that
    need attention first, within the caps, and what was left out counted. The listed
    requests of a rung, and the solo legs' requests read with their reply unparsed, are
    read back whole from the store by sequence number, so each is listed in its stored
    form; the scoring never needed them whole."""
    fits = result.fidelity
    chosen, left_out = _rung_choice(
        (kinds, fit.requests_failed, fit.state)
        for fit, kinds in zip(fits, result.rung_kinds, strict=True))
    rungs: list[dict[str, Any]] = []
    zeros: dict[tuple[str, Any], float | None] = {}
    wanted: list[int] = []
    for index in chosen:
        fit = fits[index]
        key = (fit.label, fit.repeat)
        data = fit.to_json_dict()
        group = reading.rungs.get(key)
        if group is not None:
            group = _rung_read_whole(store, reading, key)
            lanes = shown.chosen_lanes(group.lanes())
            wanted.extend(lane.key for lane in lanes)
            if len(lanes) < len(group.requests) // 3:
                data["requests_listed"] = len(lanes)
                zeros[key] = group.tally.first_send
        rungs.append(data)
    repeats = int(reading.config["repeat"])
    for key in [key for key in reading.rungs if key[0] not in levels or not
                1 <= key[1] <= repeats]:  # a rung the plan does not name (none is written)
        wanted.extend(_rung_read_whole(store, reading, key).seqs)
    # a solo request read with its reply unparsed (`StoredOutcome`) is listed in its
    # stored form, read back whole like the rest (they are at most four per probe)
    wanted.extend(seq for seq, record in reading.solo
                  if isinstance(record.payload["outcome"], StoredOutcome))
    read_back = store.records_at(wanted) if wanted else {}
    stored = sorted([*((seq, record) for seq, record in reading.solo if seq not in read_back),
                     *read_back.items()], key=lambda item: item[0])
    requests = _request_entries((record for _, record in stored), levels, zeros)
    cells = _listed_cells(store, reading, result, legs, chosen)
    listing: dict[str, Any] = {
        "cells": _cell_entries(cells, levels), "rungs": rungs, "requests": requests}
    listing.update(left_out)
    if len(cells) < result.cells_total:
        listing["cells_total"] = result.cells_total
    if len(requests) < reading.total:
        listing["requests_total"] = reading.total
    if len(listing) > 3:
        listing["export_command"] = export_command(store)
    return listing


class StoredProbe(msgspec.Struct):
    """A probe as the run start lists it (`probe_set`): what a report reads of it."""

    canary: str
    """The probe's canary: a reply holding another probe's canary leaked between them."""


class StoredConfig(msgspec.Struct):
    """What a report reads of a contamination run's configuration, in the shape
    `run_contamination` writes it (`core.run_config.config_as` refuses one of another
    shape in one line, naming the run); other keys are not read here."""

    scope: str
    """The records of the run and of the runs resuming it."""
    probe_set: list[StoredProbe]
    """The probes, in the order of their request bodies."""
    concurrency: list[int]
    """The rungs' concurrency levels (none stored for a `--bisect` run's)."""
    repeat: int
    """How many times each rung ran."""
    min_completion_tokens: int
    """Below this many tokens a solo reference is too short to compare."""
    request_bodies: list[dict[str, Any]]
    """The exact request body of each probe."""
    near_tie_nats: float = scoring.DEFAULT_NEAR_TIE_NATS
    """A divergence whose reference margin is below this is a near-tie flip."""
    bisect: tuple[int, int] | None = None
    """`--bisect LO-HI`: the range searched for the smallest diverging level."""
    logprobs_unavailable: str | None = None
    """Why the server refused token logprobs, when it did."""


def build_report(store: Store, run_id: str, *, digests: bool = True,
                 kept: Iterable[RungDigest] = ()) -> ContaminationReport:
    """The run's report, scored from its stored records alone, read in one streaming
    pass (`ScopeReading`); what it lists is capped (`shown`), what it counts is not.
    A rung digested in its run's end (`digest`) is read from its digest and its scored
    requests (`digests=False`: every record read, as before digests, and every digest
    recounted: one that differs from its rung's records is named in `warnings`); `kept`:
    digests of rungs whose run has no end yet (the driver's, building the run's own
    report)."""
    # the collector paused (`core.collector`): a big run's tens of thousands of scored
    # outcomes and cells set off full collections that walk them all, for nothing
    with paused_cycle_collector():
        try:
            try:
                return _built(store, run_id, digests, kept, [], recount=not digests)
            except _DigestDisagrees as disagreement:
                return _built(store, run_id, False, (), [
                    f"{disagreement} read from its records differs from its digest in the "
                    "run's end: the report is read from the records alone"])
        except UnreadableOutcome as unreadable:
            raise CorruptStore(f"store {store.location}: {unreadable}") from None


def _built(store: Store, run_id: str, digests: bool, kept: Iterable[RungDigest],
           notes: list[str], *, recount: bool = False) -> ContaminationReport:
    info = store.run_info(run_id)
    run = info.run
    if run.suite != SUITE:
        raise ValueError(f"run {run.run_id} is a {run.suite} run, not a contamination run")
    config = run.config
    absent = [key for key in ("scope", "probe_set", "concurrency", "repeat",
                               "min_completion_tokens", "request_bodies") if key not in config]
    if absent:
        raise ValueError(f"run {run.run_id} was not stored by this version of the "
                         f"contamination suite (its config lacks {', '.join(absent)})")
    config_as(store.location, run, StoredConfig, "contamination")
    stored = ({**_stored_digests(store, str(config["scope"])),
               **{digest.key: digest for digest in kept}} if digests else {})
    # the end's status and time only, its digests read (while it was held: one decoding):
    # its summary would hold its stored bytes, 133 MB at a million records, to the end
    end = None if info.end is None else replace(info.end, summary={})
    del info
    # read from every record when asked: every digest recounted, first, so the recount
    # and the report's own reading are not held at once
    recounted = _recounted_digests(store, str(config["scope"])) if recount else []
    reading = _scope_reading(store, config, stored, notes, judging=True)
    if reading.stale:  # a solo reference read after replies were classified against
        # another (no driver writes one so): classified by the scoring, from the replies
        reading = _scope_reading(store, config, stored, [], judging=False)
    levels = reading.levels
    legs = reading.legs()
    # a cell whose divergence is classified reads its reply's token logprobs, which the
    # first reading left out
    result = reading.restored_divergences(store, scoring.score(legs), legs)
    verdict = scoring.verdict(result)
    prime_failures = [r for _, r in reading.solo if r.arm == "prime" and r.outcome != "ok"]
    warnings = [f"prime of probe {r.task} failed "
                f"({_outcome(r).error or 'no reply'}); "
                "later legs may have started cache-cold"
                for r in prime_failures]
    missing = any(scoring.NOT_RECORDED in getattr(cell.result, "why", "")
                  for cell in result.cells)
    if missing:
        warnings.append(f"run {run.run_id} did not complete "
                        f"({end.status if end else 'no end recorded'}); "
                        f"`benchwarden contamination --resume {run.run_id}` runs what is missing")
    if config.get("logprobs_unavailable"):
        warnings.append(f"token logprobs were asked for but the server refused them "
                        f"({config['logprobs_unavailable']}); the run went on without them, "
                        "so divergences are unclassified")
    statuses = reading.statuses
    listing = _listing(store, reading, result, legs, levels)
    warnings.extend(notes)
    warnings.extend(recounted)
    body = {
        "score": result.counters(),
        "cells": listing.pop("cells"),
        "rungs": listing.pop("rungs"),
        "probes": list(config["probe_set"]),
        "request": {"preset": config.get("preset"), "extra_body": config.get("extra_body"),
                    "bodies": list(config["request_bodies"])},
        "legs": {leg: {status: count for (arm, status), count in statuses.items() if arm == leg}
                 for leg in reading.legs_seen},
        "warnings": warnings,
        "requests": listing.pop("requests"),
        "references_part_at": _references_part_at(result, legs),
        "bisect": _bisect_block(config, result),
        **listing,
    }
    plain = envelope(suite=SUITE, bench_version=BENCH_VERSION, run=run, end=end,
                     verdict=verdict, body=body, store_head=store_head_block(store))
    try:  # one pass in C: encodes unless a string holds a lone surrogate (almost never)
        msgspec.json.encode(plain)
    except (UnicodeEncodeError, TypeError):  # walked in Python (the listed requests of a
        plain = json_safe(plain)  # real engine: millions of values, seconds)
    return convert(plain, ContaminationReport, "contamination report")  # type: ignore[no-any-return]


def _scope_reading(store: Store, config: Mapping[str, Any],
                   digests: Mapping[tuple[str, int], AnyDigest], notes: list[str], *,
                   judging: bool) -> ScopeReading:
    """The run's scope read in one pass, through its rungs' `digests` when there are
    any (`_read_with_digests`, which adds its warnings to `notes`)."""
    if digests:
        return _read_with_digests(store, config, digests, notes, judging=judging)
    reading = ScopeReading(config, judging=judging)
    for summary in _stored_requests(store, str(config["scope"])):
        reading.add(summary, summary.seq)
    return reading


def json_safe(value: Any) -> Any:
    """`value` with any lone surrogate left in a string shown as `\\xNN`/`\\uNNNN`, so
    the report always encodes as UTF-8 (strings without one are returned as they are)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return "".join(scoring.display_text(c) if 0xD800 <= ord(c) <= 0xDFFF else c
                           for c in value)
    if isinstance(value, dict):
        return {json_safe(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


def render_terminal(report: ContaminationReport | Mapping[str, Any], console: Any) -> None:
    """The terminal view (`terminal.render_terminal`), where the suite registry looks for it."""
    from benchwarden.suites.contamination.terminal import render_terminal as render

    render(report, console)


__all__ = ["BisectBlock", "CandidateBlock", "CellBlock", "ContaminationReport", "DivergenceBlock",
           "ProbeBlock", "RequestEntry", "RequestSettings",
           "RungBlock", "SUITE", "ScoreBlock", "as_report", "build_report", "column_name",
           "json_safe", "legs_from_records", "render_terminal", "rung_levels", "within_caps"]
