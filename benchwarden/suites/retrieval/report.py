"""The retrieval report: one typed structure rebuilt from the store, rendered for a terminal.

`build_report(store, run_id)` regroups a run's records by seed and scores them with
`scoring` (pure), so a report can always be recomputed from what was recorded. A seed
whose last record holds its digest (`scoring.SeedDigest`, written by the driver) is read
from the digest unless its failed cases are listed; then it is recounted from its
records, and any difference makes the whole report read from the records. Records are
read slim (`CASE_FIELDS`) and a seed is scored as soon as the next one's records begin
(a store that holds a seed's records apart is read again a seed at a time, by address),
so memory holds one seed's cases and `FAILED_CASES_LISTED` failed cases, however many
seeds the run has.

Invariants:
- Digests change what is read, never what is reported: the same report, number for
  number, as `build_report(..., digests=False)`, which reads every record; what the
  reading found amiss (a digest that miscounts, one that disagrees) is in `warnings`.
- The report is a `RetrievalReport` (msgspec, frozen), built once; its JSON keeps the
  field names this suite wrote before: `bench_version` ("3" now), one block per seed
  (category means, composite, guards, guarded composite, the failed cases it lists and
  how many it leaves out) and a summary (mean, SE and Student t interval over seeds of
  every number shown over seeds). The same report whatever order the store holds the
  seeds in.
- `RetrievalReport.from_json` reads any report file this suite wrote (a version-1
  report gains neutral guards and says so with `legacy_guards`); a typed report is never
  normalised again.
- Views (this terminal table, `html.py`) only format the report through
  `benchwarden.core.formatting`; they compute no statistic. Each shows at most
  `CATEGORIES_SHOWN` categories and `TEMPLATES_SHOWN` templates (`names_shown`: the
  lowest means), says how many there are and where all are; the report keeps every one.
"""

from __future__ import annotations

import heapq
import shlex
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from benchwarden.core import formatting as fmt
from benchwarden.core.collector import paused_cycle_collector
from benchwarden.core.records import RunEnd
from benchwarden.core.reports import (
    REPORT_SCHEMA,
    EstimateBlock,
    PairedBlock,
    RunBlock,
    StoreHeadBlock,
    VerdictBlock,
    as_json,
    convert,
    envelope,
    store_head_block,
    verdict_text,
)
from benchwarden.core.run_config import config_as
from benchwarden.core.store import RecordSummary, Store
from benchwarden.core.verdicts import Verdict
from benchwarden.suites.retrieval.config import StoredConfig
from benchwarden.suites.retrieval.corpus import CATEGORIES
from benchwarden.suites.retrieval.driver import DIGEST_FIELD, FAILURE_TASK, GROUPS_FIELD, SUITE
from benchwarden.suites.retrieval.scoring import (
    BENCH_VERSION,
    CaseOutcome,
    PackMeasure,
    SeedDigest,
    SeedGroups,
    normalise_report,
    score_seed,
    summary_over_seeds,
)

# -- the typed report -------------------------------------------------------------

class SeedGuards(msgspec.Struct, frozen=True, kw_only=True):
    """The three guards of one seed (`guards.Guards`)."""

    efficiency: float = 1.0
    """0.5 + 0.5 × (1 − min(1, mean chars used / budget))."""
    consistency: float = 1.0
    """Share of paraphrased packs that grade as the original."""
    canary: float = 1.0
    """0.5 when any pack surfaced the planted canary, else 1."""
    canary_tripped: bool = False
    """Whether a pack surfaced the canary."""
    canary_leak_rate: float = 0.0
    """Share of packs that surfaced it."""
    consistency_per_template: dict[str, float | None] = msgspec.field(default_factory=dict)
    """Agreement per paraphrase template."""
    disagreements_per_template: dict[str, list[int]] = msgspec.field(default_factory=dict)
    """Per template: [cases whose paraphrase graded differently, cases asked]."""
    mean_used_chars: float | None = None
    """Mean characters per pack."""
    packs: int = 0
    """Packs the guards read."""


class FailedCase(msgspec.Struct, frozen=True, kw_only=True):
    """A case that scored below 1.0."""

    case: str
    """The case id."""
    category: str = ""
    """Its category."""
    question: str = ""
    """The question asked."""
    score: float | None = None
    """What it scored."""
    reason: str | None = None
    """The grader's reason."""


class SeedBlock(msgspec.Struct, frozen=True, kw_only=True):
    """The scores of one seed."""

    seed: int
    """The seed."""
    cases: int | None = None
    """Cases scored."""
    category_means: dict[str, float | None] = msgspec.field(default_factory=dict)
    """Mean score per category (None for an empty one)."""
    composite: float = 0.0
    """Mean of the non-empty category means."""
    guards: SeedGuards = msgspec.field(default_factory=SeedGuards)
    """The seed's guards."""
    composite_guarded: float = 0.0
    """composite × efficiency × consistency × canary."""
    failed_cases: list[FailedCase] = msgspec.field(default_factory=list)
    """Cases below 1.0, by case id: at most `FAILED_CASES_LISTED` in a report, the first
    seeds' first."""
    failed_cases_left_out: int = 0
    """This seed's cases below 1.0 not in `failed_cases` (each is in `benchwarden export`
    of the run, as a record)."""


class SummaryGuards(msgspec.Struct, frozen=True, kw_only=True):
    """Each guard over seeds."""

    efficiency: EstimateBlock = msgspec.field(default_factory=EstimateBlock)
    """Efficiency over seeds."""
    consistency: EstimateBlock = msgspec.field(default_factory=EstimateBlock)
    """Paraphrase consistency over seeds."""
    canary: EstimateBlock = msgspec.field(default_factory=EstimateBlock)
    """Canary multiplier over seeds."""
    canary_leak_rate: EstimateBlock = msgspec.field(default_factory=EstimateBlock)
    """Canary leak rate over seeds."""
    canary_tripped_seeds: int = 0
    """Seeds on which the canary tripped."""
    consistency_per_template: dict[str, EstimateBlock] = msgspec.field(default_factory=dict)
    """Each template's agreement over seeds."""
    disagreements_per_template: dict[str, list[int]] = msgspec.field(default_factory=dict)
    """Per template, summed over seeds: [cases it moved, cases asked] (empty before
    bench_version 3)."""


class Summary(msgspec.Struct, frozen=True, kw_only=True):
    """Mean, SE and Student t 95 % interval over seeds (`stats.mean_se`)."""

    seeds: list[int] = msgspec.field(default_factory=list)
    """The seeds summarised."""
    composite: EstimateBlock = msgspec.field(default_factory=EstimateBlock)
    """The composite over seeds."""
    composite_guarded: EstimateBlock = msgspec.field(default_factory=EstimateBlock)
    """The guarded composite over seeds."""
    guards: SummaryGuards = msgspec.field(default_factory=SummaryGuards)
    """Each guard over seeds."""
    category_means: dict[str, EstimateBlock] = msgspec.field(default_factory=dict)
    """Each category's mean over the seeds that measured it."""


class PairedVerdictBlock(msgspec.Struct, frozen=True, kw_only=True):
    """The band verdict of a comparison (`stats.PairedVerdict`)."""

    mean_diff: float | None = None
    """Mean of per-seed challenger − champion."""
    se: float | None = None
    """Standard error of `mean_diff`."""
    band: float | None = None
    """The margin a challenger must reach."""
    dethroned: bool | None = None
    """Whether it reached it."""
    n: int | None = None
    """Seeds compared."""


class DecisionBlock(msgspec.Struct, frozen=True, kw_only=True):
    """A champion/challenger decision (`scoring.Decision`, or a ledger entry's part of it)."""

    dethroned: bool | None = None
    """Whether the challenger won."""
    reason: str | None = None
    """One line saying why."""
    verdict: PairedVerdictBlock | None = None
    """The band verdict (None when the challenger failed)."""
    seeds: list[int] = msgspec.field(default_factory=list)
    """Seeds compared."""
    champion_scores: list[float] = msgspec.field(default_factory=list)
    """The champion's per-seed scores."""
    challenger_scores: list[float] = msgspec.field(default_factory=list)
    """The challenger's per-seed scores."""
    decide_on: str = "composite"
    """composite or composite_guarded."""
    paired: PairedBlock | None = None
    """The same differences as a paired t analysis."""


class SeedPair(msgspec.Struct, frozen=True, kw_only=True):
    """One seed of a comparison: both scores and their difference."""

    seed: int
    """The seed."""
    champion: float
    """The champion's score on it."""
    challenger: float
    """The challenger's score on it."""
    difference: float
    """challenger − champion."""


class Comparison(msgspec.Struct, frozen=True, kw_only=True):
    """Both sides of a decision and the decision."""

    champion: RetrievalReport
    """The champion's report."""
    challenger: RetrievalReport
    """The challenger's report."""
    decision: DecisionBlock = msgspec.field(default_factory=DecisionBlock)
    """The decision taken."""
    pairs: list[SeedPair] = msgspec.field(default_factory=list)
    """Per seed on `decision.decide_on`: both scores and challenger − champion."""


class PageCut(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What the copy of a report embedded in its HTML page (`html.page_copy`) clipped or
    left out beyond its seeds and failed cases, and the command that writes the whole
    report. A report itself never carries one."""

    command: str
    """The command that writes the whole report as JSON (names whole)."""
    names: int | None = None
    """Names and texts (strategy names, run ids, case ids, categories, templates,
    sources, stamps, questions, reasons) longer than `core.html.NAME_LIMIT`, each
    clipped wherever the copy holds it."""
    ledger_entries: int | None = None
    """Entries of the whole ledger, when `ledger` holds only the newest of them."""
    ledger_lists: int | None = None
    """Per-seed lists of the kept ledger entries cut to their first values (an entry of
    a ladder of thousands of seeds holds seven such lists)."""
    ledger_command: str | None = None
    """The command that lists every ledger entry."""
    categories: int | None = None
    """Categories of the strategy that has the most, when the copy keeps only the
    `CATEGORIES_SHOWN` of each strategy that `names_shown` picks (in its summary and in
    each seed's `category_means`)."""
    templates: int | None = None
    """Paraphrase templates of the strategy that has the most, when the copy keeps only
    the `TEMPLATES_SHOWN` of each strategy that `names_shown` picks (in its summary's and
    each seed's per-template guards)."""


class RetrievalReport(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One strategy's retrieval report (and, for a ladder run, its comparison and ledger).

    Fields without a default are always in the JSON; the others are left out when they
    hold their default, so a fresh report's JSON is the dict report's of before."""

    schema: str
    """The envelope's version."""
    suite: str
    """Always `retrieval`."""
    bench_version: str
    """What the numbers mean: "3" four graded cases per category, "2" one case each,
    "1" no guards."""
    run: RunBlock | None = None
    """The run (absent for a bare comparison)."""
    verdict: VerdictBlock | None = None
    """INFO with the composites, FAIL when the strategy failed or nothing was scored."""
    store_head: StoreHeadBlock | None = None
    """The store's last entry when the report was built (a head witness for `verify`)."""
    strategy: dict[str, Any]
    """The strategy's name, version and source."""
    settings: dict[str, Any]
    """limit, budget_chars and how it ran."""
    seeds: list[SeedBlock]
    """One block per seed."""
    summary: Summary | None
    """Over seeds (None when no seed was scored)."""
    failure: dict[str, Any] | None
    """Why the strategy failed (seed, reason), or None."""
    warnings: list[str] = msgspec.field(default_factory=list)
    """What the reading of the store found amiss, without changing a number: a seed's
    digest that does not count its records, or one that disagrees with them."""
    seeds_left_out: int = 0
    """Seeds a page's embedded copy leaves out of `seeds` (the first `SEEDS_DRAWN` are
    kept; `summary` is over every seed). 0 in a report, which holds every seed."""
    legacy_guards: bool = False
    """A version-1 report read with neutral guards."""
    comparison: Comparison | None = None
    """For a ladder-scored run's page: both sides and the decision."""
    ledger: list[dict[str, Any]] | None = None
    """For a ladder-scored run's page: every decision of the ladder, oldest first."""
    ledger_problem: str | None = None
    """Why the ladder history could not be read."""
    page_cut: PageCut | None = None
    """In a page's embedded copy only: what it clipped and cut (`html.page_copy`)."""

    @property
    def name(self) -> str:
        """The strategy's name."""
        return str(self.strategy.get("name") or "")

    def to_json(self) -> dict[str, Any]:
        """The JSON-able report."""
        return as_json(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, scored: bool = False) -> RetrievalReport:
        """Read a retrieval report file's JSON, whatever version this suite wrote.

        `scored` demands a strategy's scores (bench_version and per-seed blocks), as a
        comparison does; without it a page-only report (a bare comparison, an empty run)
        reads too. Raises ValueError (one line) when it is not such a report."""
        if not isinstance(data, Mapping):
            raise ValueError("a retrieval report is a JSON object")
        plain = dict(data)
        if plain.get("suite", SUITE) != SUITE:
            raise ValueError(f"not a retrieval report (suite {plain.get('suite')!r})")
        for key in ("comparison", "ledger", "ledger_problem"):
            plain.pop(key, None)
        if scored or plain.get("seeds") is not None:
            plain = normalise_report(plain)  # a one-line ValueError when it cannot be read
        plain = {"schema": REPORT_SCHEMA, "suite": SUITE, "bench_version": "", "strategy": {},
                 "settings": {}, "seeds": [], "summary": None, "failure": None, **plain}
        report: RetrievalReport = convert(plain, cls, "retrieval report")
        extra: dict[str, Any] = {}
        nested = data.get("comparison")
        holder: Mapping[str, Any] = nested if isinstance(nested, Mapping) else data
        champion, challenger = holder.get("champion"), holder.get("challenger")
        if isinstance(champion, Mapping) and isinstance(challenger, Mapping):
            extra["comparison"] = comparison(cls.from_json(champion, scored=True),
                                             cls.from_json(challenger, scored=True),
                                             holder.get("decision") or {})
        entries = data.get("ledger") or data.get("history")
        if isinstance(entries, list):
            extra["ledger"] = [dict(e) for e in entries if isinstance(e, Mapping)]
        if data.get("ledger_problem"):
            extra["ledger_problem"] = str(data["ledger_problem"])
        return msgspec.structs.replace(report, **extra) if extra else report


def as_report(report: RetrievalReport | Mapping[str, Any]) -> RetrievalReport:
    """The typed report, reading a JSON mapping when given one."""
    return report if isinstance(report, RetrievalReport) else RetrievalReport.from_json(report)


def comparison(champion: RetrievalReport, challenger: RetrievalReport,
               decision: Mapping[str, Any] | DecisionBlock) -> Comparison:
    """Both sides and the decision, with the per-seed pairs the page draws.

    The pairs come from the decision's scores when it has them, else from the seeds
    both sides scored (a ledger entry carries no per-seed scores)."""
    typed: DecisionBlock = (decision if isinstance(decision, DecisionBlock)
                            else convert(dict(decision), DecisionBlock, "decision"))
    decide_on = typed.decide_on
    if typed.seeds and typed.challenger_scores:
        triples = list(zip(typed.seeds, typed.champion_scores, typed.challenger_scores,
                           strict=False))
    else:
        mine = {b.seed: getattr(b, decide_on) for b in champion.seeds}
        theirs = {b.seed: getattr(b, decide_on) for b in challenger.seeds}
        triples = [(seed, mine[seed], theirs[seed]) for seed in mine if seed in theirs]
    pairs = [SeedPair(seed=int(seed), champion=float(a), challenger=float(b),
                      difference=float(b) - float(a)) for seed, a, b in triples]
    return Comparison(champion=champion, challenger=challenger, decision=typed, pairs=pairs)


# -- building ---------------------------------------------------------------------

# Failed cases a report lists, in all (the first seeds' first): about twenty a seed fail
# for a typical strategy, so a run of a million records (17,700 seeds) listed 350,000 of
# them, a 100 MB report; every case is a record, in `benchwarden export`.
FAILED_CASES_LISTED = 1_000
# What a case's record is read for (`scoring.CaseOutcome`): its packs' texts and items,
# most of its bytes, are skipped while decoding.
CASE_FIELDS = ("category", "question", "score", "used_chars", "canary_hit", "reason",
               "paraphrases")
CASE_TYPES: dict[str, Any] = {"category": str, "question": str, "score": float,
                              "used_chars": int, "canary_hit": bool, "reason": str | None,
                              "paraphrases": list[PackMeasure]}


class _SeedsInterleaved(Exception):
    """A seed's records are not one run of the store's order (the driver appends each
    seed's in one batch; a store written otherwise is read again, holding every seed)."""


def _case_outcome(seed: int, case_id: str, payload: Mapping[str, Any]) -> CaseOutcome:
    """A case's outcome from its slim record: typed as `CASE_TYPES` (decoded straight into
    its packs), or as plain JSON where the record did not fit them, read as ever."""
    paraphrases = payload.get("paraphrases", ())
    if isinstance(payload.get("score"), float) and isinstance(payload.get("used_chars"), int) \
            and all(isinstance(pack, PackMeasure) and pack.template is not None
                    for pack in paraphrases) \
            and isinstance(payload.get("canary_hit"), bool) and "category" in payload:
        return CaseOutcome(seed=seed, case_id=case_id, category=payload["category"],
                           question=payload.get("question", ""),
                           original=PackMeasure(score=payload["score"],
                                                used_chars=payload["used_chars"],
                                                canary_hit=payload["canary_hit"],
                                                reason=payload.get("reason")),
                           paraphrases=tuple(paraphrases))
    return CaseOutcome.from_payload(seed, case_id, payload)


def first_items(lists: Iterable[list[Any]], limit: int) -> list[list[Any]]:
    """Each list cut so that, taken in order, together they keep their first `limit`
    items (the first lists' first) and no more."""
    budget = limit
    kept = []
    for items in lists:
        kept.append(items[:max(budget, 0)])
        budget -= len(kept[-1])
    return kept


class _ListedFailures:
    """The failed cases of the lowest seeds, up to `limit` in all, whatever order the seeds
    come in: a seed's list is dropped as soon as lower seeds already fill the listing, so
    memory holds about `limit` cases, not every seed's."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.lists: dict[int, list[Any]] = {}
        self.highest: list[int] = []  # a heap of the held seeds, negated
        self.held = 0

    def offer(self, seed: int, failed: list[Any]) -> None:
        self.lists[seed] = failed
        self.held += len(failed)
        heapq.heappush(self.highest, -seed)
        while self.highest:
            top = -self.highest[0]
            if self.held - len(self.lists[top]) < self.limit:
                return
            heapq.heappop(self.highest)
            self.held -= len(self.lists.pop(top))

    def listed(self, seeds: Iterable[int]) -> dict[int, list[Any]]:
        """Each seed's listed cases, in seed order up to the limit."""
        ordered = sorted(seeds)
        return dict(zip(ordered, first_items((self.lists.get(seed, []) for seed in ordered),
                                             self.limit), strict=True))


@dataclass
class _Scored:
    """Seeds scored so far: each seed's block (without its failed cases) or the digest
    it was read from, how many cases of it failed, the failed cases the report may list,
    and the first failure record."""

    listing: _ListedFailures
    """The failed cases the report may list (shared by a recount)."""
    blocks: dict[int, dict[str, Any] | SeedDigest] = field(default_factory=dict)
    """Each seed's block, by seed, without its failed cases; or its digest (its block
    made only when the report is: `seed_blocks`)."""
    failed: dict[int, int] = field(default_factory=dict)
    """Each seed's failed cases counted, by seed."""
    failure_seq: int | None = None
    """The lowest sequence number of a failure record read (the run's first), if any."""
    records: int = 0
    """Records accounted for: those read and scored (failure records included) and
    those the digests taken count."""

    def take(self, block: dict[str, Any]) -> None:
        """A block `score_seed` made: its failed cases offered to the listing."""
        failed = block.pop("failed_cases")
        self.failed[block["seed"]] = len(failed)
        self.listing.offer(block["seed"], failed)
        self.blocks[block["seed"]] = block

    def take_digest(self, digest: SeedDigest) -> None:
        """A seed read from its digest: counted, its failed cases not listed."""
        self.failed[digest.seed] = digest.failed_cases
        self.blocks[digest.seed] = digest
        self.records += digest.cases

    def seed_blocks(self) -> list[SeedBlock]:
        """The typed seed blocks in seed order, each with the failed cases listed of it.
        A seed read from its digest, none of its cases listed, is made its typed block
        straight (`_digest_block`): at 17,700 seeds, its block made a mapping and read
        back into its type was a tenth of the report's time."""
        listed = self.listing.listed(self.blocks)
        ordered = []
        for seed in sorted(self.blocks):
            block = self.blocks[seed]
            cases = listed[seed]
            left_out = self.failed[seed] - len(cases)
            if isinstance(block, SeedDigest) and not cases:
                ordered.append(_digest_block(block, left_out))
                continue
            plain = block.block() if isinstance(block, SeedDigest) else block
            plain["failed_cases"] = cases
            plain["failed_cases_left_out"] = left_out
            ordered.append(convert(plain, SeedBlock, f"retrieval seed {seed}'s block"))
        return ordered


def _digest_block(digest: SeedDigest, left_out: int) -> SeedBlock:
    """The typed block of a seed read from its digest, none of its failed cases listed
    (`left_out` of them): what `digest.block()` read as a `SeedBlock` gives."""
    return SeedBlock(
        seed=digest.seed, cases=digest.cases, category_means=dict(digest.category_means),
        composite=digest.composite, composite_guarded=digest.composite_guarded,
        guards=SeedGuards(
            efficiency=digest.efficiency, consistency=digest.consistency,
            canary=digest.canary, canary_tripped=digest.canary_tripped,
            canary_leak_rate=digest.canary_leak_rate,
            consistency_per_template=dict(digest.consistency_per_template),
            disagreements_per_template={template: [moved, asked] for template, moved, asked
                                        in digest.disagreements_per_template},
            mean_used_chars=digest.mean_used_chars, packs=digest.packs),
        failed_cases_left_out=left_out)


def _over_seeds(blocks: Sequence[SeedBlock]) -> dict[str, Any]:
    """The summary over these typed seed blocks (`scoring.summary_over_seeds`), in their
    order."""
    guards = [block.guards for block in blocks]
    return summary_over_seeds(
        [block.seed for block in blocks], [block.composite for block in blocks],
        [block.composite_guarded for block in blocks],
        efficiency=[guard.efficiency for guard in guards],
        consistency=[guard.consistency for guard in guards],
        canary=[guard.canary for guard in guards],
        canary_leak_rate=[guard.canary_leak_rate for guard in guards],
        canary_tripped=[guard.canary_tripped for guard in guards],
        category_means=(block.category_means.items() for block in blocks),
        consistency_per_template=(guard.consistency_per_template.items() for guard in guards),
        disagreements_per_template=(guard.disagreements_per_template.items()
                                    for guard in guards))


def _score_summaries(summaries: Iterable[RecordSummary], budget_chars: int, scored: _Scored,
                     *, hold_every_seed: bool) -> None:
    """Score each seed of `summaries` (`scoring.score_seed` over its cases in the order
    read) into `scored`. A seed is scored as soon as the next seed's records begin, so
    memory holds one seed's cases; `_SeedsInterleaved` when a seed's records come back
    after another's (then `hold_every_seed`)."""
    held: dict[int, list[CaseOutcome]] = defaultdict(list)
    current: int | None = None
    for summary in summaries:
        scored.records += 1
        if summary.task == FAILURE_TASK:
            scored.failure_seq = min(summary.seq, scored.failure_seq or summary.seq)
            continue
        seed = summary.trial
        if seed != current and not hold_every_seed:
            if seed in scored.blocks:
                raise _SeedsInterleaved(seed)
            if current is not None:
                scored.take(score_seed(current, held.pop(current), budget_chars))
            current = seed
        held[seed].append(_case_outcome(seed, summary.task, summary.payload))
    for seed in sorted(held):
        scored.take(score_seed(seed, held.pop(seed), budget_chars))


def _read_seeds(summaries: Callable[[], Iterable[RecordSummary]], budget_chars: int,
                each_seed: Callable[[], Iterable[Iterable[RecordSummary]]]) -> _Scored:
    """Every seed of `summaries` scored from its records (failed cases listed up to
    `FAILED_CASES_LISTED`), one seed held at a time. When a seed's records are not
    together, they are read again as `each_seed` gives them (each piece held whole: one
    seed's records, or all of them where they cannot be read a seed at a time)."""
    scored = _Scored(_ListedFailures(FAILED_CASES_LISTED))
    try:
        _score_summaries(summaries(), budget_chars, scored, hold_every_seed=False)
        return scored
    except _SeedsInterleaved:
        scored = _Scored(_ListedFailures(FAILED_CASES_LISTED))
    for pieces in each_seed():
        _score_summaries(pieces, budget_chars, scored, hold_every_seed=True)
    return scored


def _each_seed(store: Store, run_id: str, groups: Iterable[tuple[str, int]]
               ) -> Iterator[Iterator[RecordSummary]]:
    """The slim records of these groups of the run's scope, one seed's a piece, by seed."""
    by_seed: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for arm, seed in groups:
        by_seed[seed].append((arm, seed))
    for seed in sorted(by_seed):
        yield _summaries_of(store, run_id, by_seed[seed])


def _read_whole(store: Store, run_id: str, records: int, budget_chars: int) -> _Scored:
    """Every seed of the run scored from its records: in one pass, or, when the store
    holds a seed's records apart, a seed at a time by address (when the run's records
    are its scope's: else holding every seed). The address index is walked for the
    groups only then, not for the one pass."""
    def every() -> Iterator[RecordSummary]:
        return store.iter_record_summaries(suite=SUITE, run_id=run_id,
                                           payload_fields=CASE_FIELDS,
                                           payload_types=CASE_TYPES)

    def each_seed() -> Iterable[Iterable[RecordSummary]]:
        groups = store.record_groups(SUITE, run_id)
        if sum(count for count, _ in groups.values()) != records:
            return [every()]
        return _each_seed(store, run_id, groups)

    return _read_seeds(every, budget_chars, each_seed)


class _DigestDisagrees(Exception):
    """A seed recounted from its records differs from its digest."""


def _stored_digests(store: Store, run_id: str, groups: Mapping[tuple[str, int], tuple[int, int]]
                    ) -> dict[tuple[str, int], SeedDigest]:
    """The digest on each group's last record, by group (a group whose last record holds
    none, or one of another seed or run, is absent): the digest field alone read of each
    (`Store.iter_payload_field_at`)."""
    last = sorted(seq for _, seq in groups.values())
    found: dict[tuple[str, int], SeedDigest] = {}
    for place in store.iter_payload_field_at(last, suite=SUITE, scope=run_id,
                                             field=DIGEST_FIELD, kind=SeedDigest):
        digest = place.value
        if isinstance(digest, SeedDigest) and digest.seed == place.trial \
                and place.run_id == run_id:
            found[(place.arm, place.trial)] = digest
    return found


def _groups_at_end(end: RunEnd | None, records: int
                   ) -> dict[tuple[str, int], tuple[int, int]] | None:
    """The run's groups as its end kept them (`driver.GROUPS_FIELD`), when they still
    count the run's records: records are only ever added, so the same count means the
    same records, the groups unchanged since. None for a run ended without them, groups
    that do not read as `SeedGroups` or make none, or a count that has moved."""
    kept = end.summary.get(GROUPS_FIELD) if end is not None else None
    if not isinstance(kept, dict):
        return None
    try:
        parsed = msgspec.convert(kept, SeedGroups)
    except msgspec.ValidationError:
        return None
    groups = parsed.groups()  # (None unless its counts total `parsed.records`)
    return groups if groups and parsed.records == records else None


def _read_with_digests(store: Store, run_id: str, records: int, budget_chars: int,
                       warnings: list[str], end: RunEnd | None = None) -> _Scored | None:
    """The run's seeds scored as `_read_whole` scores them, each seed with a digest that
    fits the store (`_usable_digests`) read from its digest alone, unless its failed
    cases are listed: then it is recounted from its records (`_DigestDisagrees` when the
    recount differs). The groups are those its `end` kept while they still count the
    run's records (`_groups_at_end`), else walked over the address index; kept groups
    whose reading does not account for every record of the run (a run end that hides a
    seed) are walked again, and `warnings` says so. None when the run has no usable
    digest (a store written before digests) or its records are not all of its scope
    (read whole, then)."""
    kept = _groups_at_end(end, records)
    if kept is not None:
        found: list[str] = []
        scored = _read_with_groups(store, run_id, records, budget_chars, found, kept,
                                   accounted=True)
        if scored is None or scored.records == records:
            warnings += found
            return scored
        warnings.append(f"the run's end keeps seed groups that account for {scored.records} "
                        f"of its {records} records: the address index was walked for them")
    return _read_with_groups(store, run_id, records, budget_chars, warnings,
                             store.record_groups(SUITE, run_id))


def _read_with_groups(store: Store, run_id: str, records: int, budget_chars: int,
                      warnings: list[str], groups: Mapping[tuple[str, int], tuple[int, int]],
                      *, accounted: bool = False) -> _Scored | None:
    """`_read_with_digests` over these groups (`{(arm, seed): (records, last seq)}`);
    `accounted` as `_usable_digests` takes it."""
    if not groups or sum(count for count, _ in groups.values()) != records:
        return None
    digests = _usable_digests(store, run_id, groups, warnings, accounted=accounted)
    if not digests:
        return None
    unread = [group for group in groups if group[1] not in digests]
    scored = _read_seeds(lambda: _summaries_of(store, run_id, unread), budget_chars,
                         lambda: _each_seed(store, run_id, unread))
    for digest in digests.values():
        scored.take_digest(digest)
    # the seeds whose failed cases the listing reaches, recounted from their records
    arm_of = {seed: arm for arm, seed in groups}  # a digested seed has one arm
    before = 0
    for seed in sorted(scored.failed):
        if before >= FAILED_CASES_LISTED:
            break
        listed = digests.get(seed)
        if listed is not None and listed.failed_cases:
            recount = _Scored(scored.listing)
            _score_summaries(_summaries_of(store, run_id, [(arm_of[seed], seed)]),
                             budget_chars, recount, hold_every_seed=True)
            if recount.failed.get(seed) != listed.failed_cases \
                    or recount.blocks.get(seed) != listed.block():
                raise _DigestDisagrees(f"seed {seed}")
        before += scored.failed[seed]
    return scored


def _usable_digests(store: Store, run_id: str,
                    groups: Mapping[tuple[str, int], tuple[int, int]],
                    warnings: list[str], *, accounted: bool = False) -> dict[int, SeedDigest]:
    """The digests the report reads in place of their seeds' records, by seed: a seed
    of one group, holding no failure record, whose digest counts the group's records
    (a digest that counts others is not used: `warnings` says so). `accounted`: the
    reading will be held to account for every record of the run (groups a run end
    kept), so the groups' failure records are not looked up over the index: the driver
    writes a seed's failure record last, where no digest is found, and one anywhere
    else leaves the digest miscounting its group, or the reading a record short."""
    stored = _stored_digests(store, run_id, groups)
    if not stored:
        return {}
    arms_of_seed = Counter(seed for _, seed in groups)
    failing = set() if accounted else {seed for _, seed in _failure_groups(store, run_id, groups)}
    usable: dict[int, SeedDigest] = {}
    for group, digest in stored.items():
        seed = group[1]
        # (a group's last record of another address: groups a run end kept that lie)
        if group not in groups or arms_of_seed[seed] != 1 or seed in failing:
            continue
        count = groups[group][0]
        if digest.cases != count:
            warnings.append(f"seed {seed}'s digest counts {digest.cases} cases but the store "
                            f"holds {count} records of it: the seed is read from its records")
            continue
        usable[seed] = digest
    return usable


def _recounted_digests(store: Store, run_id: str, scored: _Scored) -> list[str]:
    """The digests of a run read whole (`scored`: every seed from its records) checked
    against its records: one line per digest that miscounts its seed or disagrees with
    it (none for a run without digests)."""
    groups = store.record_groups(SUITE, run_id)
    lines: list[str] = []
    for seed, digest in sorted(_usable_digests(store, run_id, groups, lines).items()):
        if scored.failed.get(seed) != digest.failed_cases \
                or scored.blocks.get(seed) != digest.block():
            lines.append(f"seed {seed} read from its records differs from its digest")
    return lines


def _failure_groups(store: Store, run_id: str,
                    groups: Mapping[tuple[str, int], tuple[int, int]]) -> set[tuple[str, int]]:
    """The groups holding a failure record (found over the address index)."""
    seqs = store.record_seqs(SUITE, run_id, groups, tasks=[FAILURE_TASK])
    if not seqs:
        return set()
    return {(summary.arm, summary.trial)
            for summary in store.iter_record_summaries(suite=SUITE, scope=run_id, seqs=seqs)}


def _summaries_of(store: Store, run_id: str, groups: Iterable[tuple[str, int]]
                  ) -> Iterator[RecordSummary]:
    """The slim records of the run in these groups of its scope, in the order written
    (a record another run wrote into the scope is left out, as the whole read, which
    reads the run's records, leaves it out)."""
    wanted = list(groups)
    if not wanted:
        return iter(())
    return (summary for summary in store.iter_record_summaries(
        suite=SUITE, scope=run_id, seqs=store.record_seqs(SUITE, run_id, wanted),
        payload_fields=CASE_FIELDS, payload_types=CASE_TYPES) if summary.run_id == run_id)


def build_report(store: Store, run_id: str, *, digests: bool = True) -> RetrievalReport:
    """The run's report, scored from its stored records alone. A seed whose last record
    holds its digest (`driver.DIGEST_FIELD`) is read from the digest, unless the report
    lists its failed cases; `digests=False` reads every record and recounts every
    digest. Either way the report is the same: a digest that disagrees with its seed's
    records when recounted makes the whole report read from the records, and says so in
    `warnings` (with `digests=False`, one line per such digest)."""
    # the collector paused (`core.collector`): a run of thousands of seeds builds tens of
    # thousands of small dicts, which set off full collections that walk them all
    with paused_cycle_collector():
        return _built(store, run_id, digests)


def _built(store: Store, run_id: str, digests: bool) -> RetrievalReport:
    info = store.run_info(run_id)
    run = info.run
    if run.suite != SUITE:
        raise ValueError(f"run {run_id} is a {run.suite} run, not retrieval")
    stored = config_as(store.location, run, StoredConfig, "retrieval run")
    settings = dict(run.config.get("settings") or {})
    budget_chars = stored.settings.budget_chars
    warnings: list[str] = []
    scored = None
    if digests:
        try:
            scored = _read_with_digests(store, run.run_id, info.record_count, budget_chars,
                                        warnings, info.end)
        except _DigestDisagrees as disagreement:
            warnings = [f"{disagreement} read from its records differs from its digest: "
                        "the report is read from the records alone"]
    if scored is None:
        scored = _read_whole(store, run.run_id, info.record_count, budget_chars)
        if not digests:  # every seed read: each digest recounted, whatever it would list
            warnings += _recounted_digests(store, run.run_id, scored)
    blocks = scored.seed_blocks()
    failure: dict[str, Any] | None = None
    if scored.failure_seq is not None:
        failure = dict(next(store.iter_records_at([scored.failure_seq]))[1].payload)
    if failure is None and info.end is not None and info.end.summary.get("failure"):
        failure = dict(info.end.summary["failure"])
    summary = _over_seeds(blocks) if blocks else None
    if failure:
        verdict = Verdict.failed(f"strategy {stored.strategy.name} "
                                 f"failed on seed {failure.get('seed')}: {failure.get('reason')}")
    elif not blocks:
        verdict = Verdict.nothing_measured("no seed was scored")
    else:
        composite = summary["composite"]["mean"]  # type: ignore[index]
        guarded = summary["composite_guarded"]["mean"]  # type: ignore[index]
        verdict = Verdict.info(f"composite {composite:.4f}, guarded {guarded:.4f} "
                               f"over {len(blocks)} seed(s)")
    plain = envelope(suite=SUITE, bench_version=run.bench_version, run=run, end=info.end,
                     verdict=verdict, store_head=store_head_block(store), body={
                         "strategy": dict(run.config.get("strategy") or {}),
                         "settings": settings,
                         "seeds": blocks,
                         "summary": summary,
                         "failure": failure,
                         **({"warnings": warnings} if warnings else {}),
                     })
    return convert(plain, RetrievalReport, "retrieval report")  # type: ignore[no-any-return]


# -- terminal ------------------------------------------------------------------

# Failed cases a terminal shows: about twenty per seed fail for a typical strategy, so
# listing every one made the output grow with the seeds (2,600 lines at 100 seeds); the
# JSON report and the HTML page keep them all.
FAILED_CASES_SHOWN = 40
# Seeds whose own row the terminal shows (the table over seeds covers every one): a run of
# 17,700 seeds printed 17,700 rows.
SEEDS_SHOWN = 50


# Categories and paraphrase templates the terminal and the page show of a report: a store
# written by another tool can give each question its own, and 100,000 of them took 25 s
# and 100,000 terminal lines to show (templates: 105 s at 840 MiB) and made a 42 MB page
# (templates: 76 MB). The corpus of this suite has 8 categories and a few templates.
CATEGORIES_SHOWN = 30
TEMPLATES_SHOWN = 30


def names_shown(estimates: Mapping[str, EstimateBlock], limit: int) -> list[str]:
    """The names of `estimates` a view shows, in their order: all of them when there are
    at most `limit`, else the `limit` with the lowest mean over seeds (the ones a reader
    must see first; names without a mean after every other, ties in order)."""
    if len(estimates) <= limit:
        return list(estimates)
    lowest = heapq.nsmallest(limit, enumerate(estimates.values()), key=lambda item: (
        item[1].mean is None, item[1].mean or 0.0, item[0]))
    kept = {index for index, _ in lowest}
    return [name for index, name in enumerate(estimates) if index in kept]


def _cut_caption(kind: str, shown: int, total: int, run_id: str | None) -> str | None:
    """The caption of a table of `total` categories or templates that shows `shown`."""
    if shown >= total:
        return None
    where = f"benchwarden show {shlex.quote(run_id)} --json FILE" if run_id else "--json FILE"
    return (f"{total - shown:,} more {kind} not shown (the {shown} with the lowest mean are): "
            f"the JSON report ({where}) holds every one")


def seeds_not_shown(total: int, counted_by: str, held_by: str) -> str | None:
    """The caption of a per-seed table of `total` seeds cut to its first `SEEDS_SHOWN`:
    how many more there are, that `counted_by` counts them all, and where their scores
    are (`held_by`); None when every seed is shown."""
    more = total - SEEDS_SHOWN
    if more <= 0:
        return None
    return f"{more} more seeds not shown: {counted_by} counts every one, and {held_by}"


def _failed_cases_table(failed: list[tuple[Any, FailedCase]], total: int,
                        run_id: str | None) -> Table:
    """The first `FAILED_CASES_SHOWN` of the `total` failed cases (`failed`: those the
    report lists), in seed order; a caption says how many more there are and where."""
    shown = failed[:FAILED_CASES_SHOWN]
    more = total - len(shown)
    title = (f"failed cases ({total})" if not more
             else f"failed cases ({total}; the first {len(shown)})")
    where = f"benchwarden report {run_id} --html FILE" if run_id else "--html FILE"
    caption = (f"{more} more not shown: every failed case is in the JSON report (--json FILE) "
               f"and the HTML report ({where})") if more else None
    if total > len(failed):
        run = f" --run {run_id}" if run_id else ""
        caption = (f"{more} more not shown: the JSON report (--json FILE) and the HTML report "
                   f"({where}) list the first {len(failed)}; every case, as a record: "
                   f"benchwarden export --suite retrieval{run} --out cases.jsonl")
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    for column in ("seed", "case", "score", "reason"):
        table.add_column(column)
    for seed, case in shown:
        table.add_row(str(seed), escape(case.case), fmt.number(case.score, 2),
                      escape(case.reason or ""))
    return table


def render_terminal(report: RetrievalReport | Mapping[str, Any], console: Console) -> None:
    report = as_report(report)
    settings = report.settings
    console.print(f"[bold]retrieval[/bold] · strategy [bold]{escape(report.name or '?')}[/bold] · "
                  f"bench_version {report.bench_version} · "
                  f"limit {settings.get('limit', fmt.DASH)} · "
                  f"budget {settings.get('budget_chars', fmt.DASH)} chars")
    blocks = report.seeds
    summary = report.summary
    run_id = escape(report.run.id) if report.run is not None and report.run.id else None
    for warning in report.warnings:
        console.print(f"[yellow]{escape(warning)}[/yellow]")
    if report.legacy_guards:
        console.print("[yellow]version-1 report: no guard block; guards read as 1.0 and the "
                      "guarded composite falls back to the composite[/yellow]")
    if blocks and summary is not None:
        kept = set(names_shown(summary.category_means, CATEGORIES_SHOWN))
        names = [n for n in CATEGORIES if n in kept]
        names += [n for n in summary.category_means if n in kept and n not in names]
        caption = _cut_caption("categories", len(names), len(summary.category_means), run_id)
        categories = Table(title="per-category means" + (
            f" (the {len(names)} lowest of {len(summary.category_means):,})" if caption else ""),
            title_justify="left", caption=caption, caption_justify="left")
        categories.add_column("category")
        shown = blocks if len(blocks) <= 6 else []
        for index, block in enumerate(shown):
            categories.add_column(f"s{block.seed}" if len(str(block.seed)) < 6
                                  else f"#{index + 1}", justify="right")
        categories.add_column("mean", justify="right")
        for name in names:
            categories.add_row(name, *(fmt.number(b.category_means.get(name), 2) for b in shown),
                               fmt.number(summary.category_means[name].mean, 2))
        console.print(categories)

        caption = seeds_not_shown(len(blocks), "the table over seeds below",
                                  "the JSON report (--json FILE) holds each seed's scores")
        scores = Table(title="composite and guards" + (
            f" (the first {SEEDS_SHOWN} of {len(blocks)} seeds)" if caption else ""),
            title_justify="left", caption=caption, caption_justify="left")
        for column in ("seed", "composite", "effic.", "consist.", "canary", "trip",
                       "leak", "guarded"):
            scores.add_column(column, justify="right")
        for block in blocks[:SEEDS_SHOWN]:
            guards = block.guards
            scores.add_row(str(block.seed), fmt.number(block.composite, 4),
                           fmt.number(guards.efficiency, 4), fmt.number(guards.consistency, 4),
                           fmt.number(guards.canary, 1), fmt.number(guards.canary_tripped),
                           fmt.number(guards.canary_leak_rate, 4),
                           fmt.number(block.composite_guarded, 4))
        console.print(scores)
        if len(blocks) > 1:
            overall = Table(title=f"over {len(blocks)} seeds", title_justify="left")
            for column in ("measure", "mean", "SE", "95% interval"):
                overall.add_column(column, justify="right" if column != "measure" else "left")
            guards_over = summary.guards
            for label, estimate in (("composite", summary.composite),
                                    ("composite_guarded", summary.composite_guarded),
                                    ("efficiency", guards_over.efficiency),
                                    ("consistency", guards_over.consistency),
                                    ("canary", guards_over.canary),
                                    ("canary_leak_rate", guards_over.canary_leak_rate)):
                overall.add_row(label, fmt.number(estimate.mean, 4), fmt.number(estimate.se, 4),
                                fmt.interval(estimate.low, estimate.high, 4),
                                style="bold" if label.startswith("composite") else None)
            overall.add_row("canary tripped",
                            f"{guards_over.canary_tripped_seeds} of {len(blocks)} seeds", "", "")
            console.print(overall)

        if summary.guards.consistency_per_template:
            per_template = summary.guards.consistency_per_template
            templates = names_shown(per_template, TEMPLATES_SHOWN)
            caption = _cut_caption("templates", len(templates), len(per_template), run_id)
            agreement = Table(title="paraphrase agreement per template" + (
                f" (the {len(templates)} lowest of {len(per_template):,})" if caption else ""),
                title_justify="left", caption=caption, caption_justify="left")
            agreement.add_column("template")
            agreement.add_column("agreement", justify="right")
            agreement.add_column("cases it moved", justify="right")
            moved = summary.guards.disagreements_per_template
            for template in templates:
                estimate, counts = per_template[template], moved.get(template)
                agreement.add_row(escape(template), fmt.number(estimate.mean, 4),
                                  f"{counts[0]} of {counts[1]}" if counts else fmt.DASH)
            console.print(agreement)

        failed = [(b.seed, case) for b in blocks for case in b.failed_cases]
        total = len(failed) + sum(b.failed_cases_left_out for b in blocks)
        if total:
            console.print(_failed_cases_table(failed, total,
                                              report.run.id if report.run else None))
    if report.failure:
        console.print(f"[bold red]run failed[/bold red] on seed {report.failure.get('seed')}: "
                      f"{escape(str(report.failure.get('reason')))}")
    if report.verdict:
        console.print(verdict_text(Verdict(report.verdict.kind, report.verdict.reason)))  # type: ignore[arg-type]


__all__ = ["BENCH_VERSION", "CATEGORIES_SHOWN", "FAILED_CASES_LISTED", "TEMPLATES_SHOWN",
           "Comparison", "DecisionBlock", "PageCut", "RetrievalReport", "SeedBlock", "Summary",
           "as_report", "build_report", "comparison", "names_shown", "render_terminal"]
