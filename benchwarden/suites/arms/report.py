"""The arms report: one typed structure built once from the store, rendered for a terminal.

A report covers a suite's scope (every record of every run of that suite, because
cells deepen across runs), not only one run; the run it is built for contributes its
tally (recorded, invalid, harness errors, samples before → after per cell).

Invariants:
- `build_report` / `build_scope_report` read the store once and return an `ArmsReport`
  (msgspec, frozen). Its JSON (`to_json`, `msgspec.json.encode`) keeps the field names of
  the dict reports this suite wrote before; `ArmsReport.from_json` reads those files.
- Every statistic is computed here (through `views`) or by `Record`; the terminal table
  and the HTML page only format the typed report with `benchwarden.core.formatting`.
- Empty groups are None and print as a dash, never as 0.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import msgspec
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from benchwarden.core import formatting as fmt
from benchwarden.core import stats
from benchwarden.core.collector import paused_cycle_collector
from benchwarden.core.html import NAME_LIMIT, clip_long_names
from benchwarden.core.lazy import import_in_background
from benchwarden.core.records import DEFAULT_WEIGHTS, Record, TokenWeights
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
from benchwarden.core.store import Store, StoreUsageError, summed_number
from benchwarden.core.verdicts import Verdict
from benchwarden.suites.arms.tasks import FLOOR, SUITE_NAME

DASH = fmt.DASH
COMPONENTS = ("fresh_input", "cache_creation", "cache_read", "output")
# What a report shows of single trials is bounded whatever the store's size (the HTML
# page stays under 20 MB): trials in all, tool calls and text per trial.
TRIAL_LIMIT = 400
TRANSCRIPT_SHOWN = 12
TEXT_SHOWN = 600
REASONS_SHOWN = 5
TERMINAL_TRIALS = 20


# -- the typed report -------------------------------------------------------------

class CoverageCount(msgspec.Struct, frozen=True, kw_only=True):
    """How many of an arm's planned cells are covered, partial and missing."""

    covered: int = 0
    """Cells with at least `floor` samples."""
    partial: int = 0
    """Cells with some samples, fewer than `floor`."""
    missing: int = 0
    """Cells with no sample."""
    cells: int = 0
    """Planned cells (tasks) of the arm."""


class ArmCoverage(CoverageCount, frozen=True, kw_only=True):
    """An arm's coverage with its samples per task."""

    samples: dict[str, int] = msgspec.field(default_factory=dict)
    """Samples recorded per task."""


class HeadlineRow(msgspec.Struct, frozen=True, kw_only=True):
    """One arm's headline: correctness first, then cost."""

    arm: str
    """The arm."""
    samples: int = 0
    """Samples recorded for the arm."""
    success: EstimateBlock | None = None
    """Pass rate with its Wilson 95 % interval."""
    cost_equivalent: EstimateBlock | None = None
    """Cost-equivalent tokens per trial, mean ± SE clustered by task, with its t interval."""
    cost_equivalent_per_task: EstimateBlock | None = None
    """Mean over tasks of each task's mean cost, with a BCa bootstrap interval (over more
    than `stats.ANALYTIC_INTERVAL_ABOVE` tasks its analytic approximation, ABC: `method`
    says which)."""
    raw_tokens: EstimateBlock | None = None
    """Unweighted tokens per trial."""
    turns: EstimateBlock | None = None
    """Turns per trial."""
    duration_s: EstimateBlock | None = None
    """Wall-clock seconds per trial."""
    coverage: CoverageCount = msgspec.field(default_factory=CoverageCount)
    """The arm's cell coverage."""
    imputed_cost_usd: EstimateBlock | None = None
    """Imputed dollars per trial, where the driver priced it."""


class TierRow(msgspec.Struct, frozen=True, kw_only=True):
    """One arm on one task tier."""

    arm: str
    """The arm."""
    tier: str
    """The task tier."""
    samples: int = 0
    """Samples of the arm on tasks of this tier."""
    success: EstimateBlock | None = None
    """Pass rate with its Wilson interval."""
    cost_equivalent: EstimateBlock | None = None
    """Cost-equivalent tokens per trial."""


class ComponentRow(msgspec.Struct, frozen=True, kw_only=True):
    """Mean of each unweighted token component per trial, and its weighted mean."""

    arm: str
    """The arm."""
    samples: int = 0
    """Samples whose driver reported tokens."""
    fresh_input: EstimateBlock | None = None
    """Fresh input tokens per trial."""
    fresh_input_weighted: float | None = None
    """Mean fresh input tokens times their weight."""
    cache_creation: EstimateBlock | None = None
    """Cache-creation tokens per trial."""
    cache_creation_weighted: float | None = None
    """Mean cache-creation tokens times their weight."""
    cache_read: EstimateBlock | None = None
    """Cache-read tokens per trial."""
    cache_read_weighted: float | None = None
    """Mean cache-read tokens times their weight."""
    output: EstimateBlock | None = None
    """Output tokens per trial."""
    output_weighted: float | None = None
    """Mean output tokens times their weight."""
    reasoning: EstimateBlock | None = None
    """Reasoning tokens per trial, where reported."""

    def component(self, name: str) -> EstimateBlock | None:
        """The estimate of one of `COMPONENTS`."""
        return getattr(self, name)  # type: ignore[no-any-return]

    def weighted(self, name: str) -> float | None:
        """The weighted mean of one of `COMPONENTS`."""
        return getattr(self, f"{name}_weighted")  # type: ignore[no-any-return]


class FailureRow(msgspec.Struct, frozen=True, kw_only=True):
    """Outcome counts of one arm (None for an arm with no sample)."""

    arm: str
    """The arm."""
    samples: int = 0
    """Samples of the arm."""
    passed: int | None = msgspec.field(default=None, name="pass")
    """Trials that passed."""
    incorrect: int | None = None
    """Finished, but the checker says wrong."""
    confused: int | None = None
    """Hit the turn cap."""
    hung: int | None = None
    """Hit the wall clock."""
    denied_calls: int | None = None
    """Tool calls the arm's gate refused."""


class SuccessDifference(PairedBlock, frozen=True, kw_only=True):
    """The paired success difference, with the binomial MDE for when it has no spread."""

    mde_binomial: float | None = None
    """Binomial MDE at the pooled pass rate and `samples_per_arm`."""
    samples_per_arm: int = 0
    """Samples per arm over the shared tasks (the smaller arm)."""


class Comparison(msgspec.Struct, frozen=True, kw_only=True):
    """Paired comparison `b - a` over the tasks both arms covered."""

    a: str
    """The baseline arm."""
    b: str
    """The arm compared against it."""
    floor: int = FLOOR
    """Samples each arm needs in a task for it to be paired."""
    tasks: list[str] = msgspec.field(default_factory=list)
    """Tasks both arms covered."""
    only_a: list[str] = msgspec.field(default_factory=list)
    """Tasks only `a` covered."""
    only_b: list[str] = msgspec.field(default_factory=list)
    """Tasks only `b` covered."""
    success_difference: SuccessDifference = msgspec.field(default_factory=SuccessDifference)
    """Paired difference of per-task pass rates."""
    cost_equivalent_difference: PairedBlock = msgspec.field(default_factory=PairedBlock)
    """Paired difference of per-task mean cost-equivalent tokens."""
    success_a: float | None = None
    """Mean per-task pass rate of `a` over the shared tasks."""
    success_b: float | None = None
    """Mean per-task pass rate of `b` over the shared tasks."""
    cost_a: float | None = None
    """Mean per-task cost of `a` over the shared priced tasks."""
    cost_b: float | None = None
    """Mean per-task cost of `b` over the shared priced tasks."""
    conclusion: str = ""
    """In words: which arm is better on success and on cost, or that the data cannot tell."""

    @property
    def success_mde(self) -> float | None:
        """The success MDE shown: the paired one, or the binomial one when the per-task
        differences have no spread (`views.shown_mde`; chosen, not computed)."""
        from benchwarden.suites.arms.views import shown_mde

        return shown_mde(msgspec.structs.asdict(self.success_difference))


class TallyCell(msgspec.Struct, frozen=True, kw_only=True):
    """One cell of a run's tally."""

    arm: str
    """The arm."""
    task: str
    """The task."""
    before: int = 0
    """Samples the cell had before the run."""
    after: int = 0
    """Samples after it."""
    passed: int = 0
    """Trials of this run that passed."""
    failed: int = 0
    """Trials of this run that failed."""
    invalid: int = 0
    """Trials discarded as isolation leaks."""
    harness_errors: int = 0
    """Trials the harness could not run."""
    covered: bool = False
    """Whether the cell reached the floor."""


class Tally(msgspec.Struct, frozen=True, kw_only=True):
    """What one run did: its counts and its cells."""

    recorded: int = 0
    """Samples recorded."""
    invalid: int = 0
    """Trials discarded as isolation leaks."""
    harness_errors: int = 0
    """Trials the harness could not run."""
    attempted: int = 0
    """Trials attempted."""
    floor: int = FLOOR
    """Samples that make a cell covered."""
    floor_reached: bool = False
    """Whether every cell reached the floor."""
    cells: list[TallyCell] = msgspec.field(default_factory=list)
    """Per cell: samples before → after and this run's outcomes."""
    problems: list[str] = msgspec.field(default_factory=list)
    """One line per invalid trial or harness error (capped)."""


class TranscriptEntry(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One tool call of a trial."""

    kind: str = "call"
    """shell, function or mcp (or another driver's word)."""
    command: str | None = None
    """The shell command."""
    name: str | None = None
    """The function called."""
    server: str | None = None
    """The MCP server an mcp call went to."""
    tool: str | None = None
    """The MCP tool called."""
    arguments: Any = None
    """The function's arguments as the model wrote them."""
    denied: bool = False
    """The gate refused it (it did not run)."""
    reason: str | None = None
    """Why it was refused."""


class Trial(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded trial, for the page's drill-down."""

    arm: str
    """The arm."""
    task: str
    """The task."""
    trial: int
    """The trial number within its cell."""
    run_id: str = ""
    """The run that recorded it."""
    outcome: str = ""
    """pass or fail."""
    failure: str | None = None
    """The failure tag (incorrect, confused, hung)."""
    tier: str | None = None
    """The task's tier."""
    reasons: list[str] = msgspec.field(default_factory=list)
    """The checker's reasons."""
    turns: int | float | None = None
    """Turns the agent took, read by the rule the totals sum it by (`summed_number`): a
    fractional count a driver reports is shown as it is, as the mean counts it."""
    stopped: str | None = None
    """Why it stopped."""
    final_report: str | None = None
    """The agent's final report."""
    transcript: list[TranscriptEntry] = msgspec.field(default_factory=list)
    """Its tool calls (the first `TRANSCRIPT_SHOWN`; `tool_calls` says how many in all)."""
    tool_calls: int | None = None
    """Tool calls the trial made in all (None in reports written before it)."""
    denied_calls: int | None = None
    """Calls the gate refused."""
    tokens: dict[str, int] = msgspec.field(default_factory=dict)
    """Its token components."""
    tokens_reported: bool = True
    """Whether the driver reported tokens."""
    cost_equivalent: float | None = None
    """Its cost-equivalent tokens (`TokenComponents.cost_equivalent` at the report's weights)."""
    duration_s: float | None = None
    """Its wall-clock seconds (`Record.duration_s`)."""
    model: str | None = None
    """The model, when the driver names one."""
    driver: str | None = None
    """The agent driver."""


class PageCut(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What the copy of a report embedded in its HTML page leaves out (`html.page_copy`):
    the lists that grow with the suite's tasks and the store's runs (a suite of 333,000
    tasks made a 42 MB page) are cut to what the page draws; this block holds the counts
    the page shows of them and the command that writes the whole report. A report
    itself never carries one."""

    command: str
    """The command that writes the whole report as JSON."""
    tasks: int | None = None
    """Tasks of the whole report (its `tasks` and any only its coverage names), when
    `tasks` and each arm's coverage samples hold only those the page's grid draws."""
    runs: int | None = None
    """Runs of the scope, when `runs` holds only the newest of them."""
    tally_cells: int | None = None
    """Cells of the run's `tally`, when its `cells` hold only the rows the page shows."""
    runs_tally_cells: int | None = None
    """Cells of the `runs_tally` (every run's), when its `cells` hold only the rows the
    page shows."""
    comparison_tasks: list[tuple[int, int, int]] | None = None
    """Per comparison, in order: how many tasks both arms covered, only `a` covered and
    only `b` covered, when those lists hold only their first tasks."""
    run_config_keys: list[str] | None = None
    """Keys of the run's configuration left out for their size (each value's JSON over
    the page's bound: a task list of a wide suite)."""
    tiers: int | None = None
    """Tiers of the whole report, when `tiers` and `per_tier` hold only the tiers the
    page shows (`TIERS_SHOWN`)."""
    names: int | None = None
    """Names (of arms, tasks, tiers, runs, models) longer than the page's limit
    (`core.html.NAME_LIMIT`), each clipped wherever the copy holds it (a store written by
    another tool can hold names of any length)."""


class ArmsReport(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The arms report of one scope: headline, breakdowns, comparisons and a run's tally.

    Fields without a default are always in the JSON; `run`, `verdict` and `trials` are
    left out when absent, as the dict reports before this type did."""

    schema: str
    """The envelope's version."""
    suite: str
    """Always `arms`."""
    bench_version: str
    """The suite's bench version."""
    run: RunBlock | None = None
    """The run the report was built for (absent for a scope without runs)."""
    verdict: VerdictBlock | None = None
    """INFO with the sample count, or nothing measured."""
    store_head: StoreHeadBlock | None = None
    """The store's last entry when the report was built (a head witness for `verify`)."""
    scope: str
    """The suite definition (e.g. `tracker`) whose records are pooled."""
    floor: int
    """Samples that make a cell covered."""
    weights: dict[str, float]
    """Cost-equivalent weight per token component."""
    arms: list[str]
    """Arms shown, planned or recorded, in first-seen order."""
    tasks: list[str]
    """Tasks shown."""
    tiers: list[str]
    """Task tiers shown."""
    samples: int
    """Samples in the scope."""
    headline: list[HeadlineRow]
    """One row per arm."""
    coverage: dict[str, ArmCoverage]
    """Per arm: covered / partial / missing cells and samples per task."""
    per_tier: list[TierRow]
    """One row per arm and tier."""
    per_component: list[ComponentRow]
    """One row per arm."""
    failure_tags: list[FailureRow]
    """One row per arm."""
    comparisons: list[Comparison]
    """Every pair of arms, in order; past `views.ALL_PAIRS_UP_TO_ARMS` arms each arm
    against the first (`pairs_left_out` counts the pairs not compared)."""
    tiers_left_out: int = 0
    """Tiers past the first `tiers_reported` ones, whose per-tier rows the report does
    not compute (a store of thousands of tiers); absent when none is left out."""
    pairs_left_out: int = 0
    """Pairs of arms the report does not compare (many arms: each is compared with the
    baseline only; `arms compare A B` compares any pair)."""
    baseline: str | None = None
    """The arm the comparisons were made against when one was asked for
    (`arms report --baseline`); absent, the first arm listed is the baseline."""
    tally: Tally | None
    """The run's tally (None when the run has not ended)."""
    runs: list[str]
    """Ids of the scope's runs."""
    trials: list[Trial] | None = None
    """The trials shown in full: per cell the newest failures first, then passes, at most
    `TRIALS_PER_CELL` per cell and `TRIAL_LIMIT` in all (every trial: `export_command`)."""
    trials_total: int | None = None
    """Trials in the scope (None in reports written before the shown trials were capped)."""
    export_command: str | None = None
    """The command that writes every trial of the scope as data."""
    runs_tally: Tally | None = None
    """The tallies of every ended run of the scope, summed per cell."""
    skipped_values: int = 0
    """Turn counts, denied-call counts and imputed costs left out of the means because
    they are not numbers (a string, a boolean, a list; `core.store.summed_number`)."""
    page_cut: PageCut | None = None
    """Only in the copy embedded in an HTML page: what it leaves out (`PageCut`)."""

    def to_json(self) -> dict[str, Any]:
        """The JSON-able report (the same field names as the dict reports before it)."""
        return as_json(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ArmsReport:
        """Read a report file's JSON (any arms report this package wrote)."""
        if data.get("suite", SUITE_NAME) != SUITE_NAME:
            raise ValueError(f"not an arms report (suite {data.get('suite')!r})")
        return convert({**_empty_report(), **data}, cls, "arms report")  # type: ignore[no-any-return]


def _empty_report() -> dict[str, Any]:
    """What a report that measured nothing holds: fills the gaps of a partial file."""
    return {"schema": REPORT_SCHEMA, "suite": SUITE_NAME, "bench_version": "", "scope": "",
            "floor": FLOOR, "weights": {}, "arms": [], "tasks": [], "tiers": [], "samples": 0,
            "headline": [], "coverage": {}, "per_tier": [], "per_component": [],
            "failure_tags": [], "comparisons": [], "tally": None, "runs": []}


def as_report(report: ArmsReport | Mapping[str, Any]) -> ArmsReport:
    """The typed report, reading a JSON mapping when given one."""
    return report if isinstance(report, ArmsReport) else ArmsReport.from_json(report)


# -- building ---------------------------------------------------------------------

def build_report(store: Store, run_id: str, weights: TokenWeights = DEFAULT_WEIGHTS,
                 floor: int = FLOOR) -> ArmsReport:
    """The report of the scope a run belongs to, with that run's tally."""
    info = store.run_info(run_id)
    if info.run.suite != SUITE_NAME:
        raise ValueError(f"run {run_id} is a {info.run.suite} run, not an arms run")
    return _report(store, str(info.run.config.get("scope", "")), info, weights, floor)


def build_scope_report(store: Store, scope: str | None = None,
                       weights: TokenWeights = DEFAULT_WEIGHTS,
                       floor: int = FLOOR, baseline: str | None = None) -> ArmsReport:
    """The report of a suite's scope (default: the scope of the latest arms run), its
    comparisons made against `baseline` when one is given (`views.pairs_compared`)."""
    scope, mine = _resolve_scope(store, scope)
    # the runs read for the report hold only `REPORT_CONFIG`: the latest is read whole
    latest = store.run_info(mine[-1].run.run_id) if mine else None
    return _report(store, scope, latest, weights, floor, mine, baseline)


REPORT_CONFIG = ("scope", "arms", "tasks", "tiers")
"""What a report reads of every run's configuration (`views.arms_and_tasks`): runs are
read with only these keys (`Store.runs_with_config`; a wide suite's configs list every
task three times, and a scope's runs were most of a report's memory)."""


class ReportConfig(msgspec.Struct):
    """The keys of an arms run's configuration a report reads (`REPORT_CONFIG`), in the
    shape `arms run` writes them."""

    scope: str = ""
    """The suite's name: the records of every run of one scope are reported together."""
    arms: list[str] = msgspec.field(default_factory=list)
    """The arms the run planned (a planned cell with no sample shows as missing)."""
    tasks: list[str] = msgspec.field(default_factory=list)
    """The tasks the run planned."""
    tiers: list[str] = msgspec.field(default_factory=list)
    """The suite's tiers, in its order."""


def _runs_for_report(store: Store) -> list[Any]:
    """Every arms run, its config cut to `REPORT_CONFIG` and checked to be of the shape
    `arms run` writes (`ReportConfig`): a config of another shape (edited, its chain then
    broken, or written by another tool) is a `CorruptStore` naming the run, not a crash
    of the views that read it."""
    runs = store.runs_with_config(SUITE_NAME, REPORT_CONFIG)
    # equal values are one object (`runs_with_config`): each combination checked once,
    # not 50,000 times in a store of 50,000 runs of one suite
    checked: set[tuple[tuple[str, int], ...]] = set()
    for info in runs:
        held = tuple((key, id(value)) for key, value in info.run.config.items())
        if held not in checked:
            config_as(store.location, info.run, ReportConfig, "arms run")
            checked.add(held)
    return runs


def _resolve_scope(store: Store, scope: str | None) -> tuple[str, list[Any]]:
    """The scope asked for (default: the latest arms run's) and its runs, their configs
    cut to `REPORT_CONFIG`; a scope with neither runs nor records is refused in one
    line."""
    runs = _runs_for_report(store)
    if scope is None:
        if not runs:
            raise StoreUsageError(f"no arms runs in {store.location}")
        scope = str(runs[-1].run.config.get("scope", ""))
    mine = [info for info in runs if info.run.config.get("scope") == scope]
    if not mine and next(store.iter_records(suite=SUITE_NAME, scope=scope, batch=1), None) is None:
        known = sorted({str(i.run.config.get("scope")) for i in runs})
        raise StoreUsageError(f"no arms records for suite {scope!r} in {store.location}"
                              + (f" (suites: {', '.join(known)})" if known else ""))
    return scope, mine


def summarize_scope(store: Store, scope: str) -> Any:
    """`views.Columns` of a scope. Read from the store's group totals when it has them
    (`summary_in_database`; a version 3 store opened read-only sums them from its group
    index); otherwise (a store of version 1 or 2 opened read-only) one streaming pass
    over slim rows (no transcript or final report is decoded). All give the same
    totals, by the same rules (`summed_number`); memory is bounded by the scope's cells
    either way."""
    from benchwarden.suites.arms import views

    if store.has_group_totals:
        # The intervals need scipy.special; the database sums without holding the GIL,
        # so the import runs beside the query instead of after. Not scipy.stats (about a
        # second): a suite of more than `stats.ANALYTIC_INTERVAL_ABOVE` tasks (the only
        # kind whose read is long enough to hide it) never needs it, and imported here it
        # took the GIL from the read's own Python.
        import_in_background(stats.scipy_special)
        return summary_in_database(store, scope)
    return views.columns_of(views.summarize(store.iter_record_summaries(
        suite=SUITE_NAME, scope=scope, payload_fields=views.PAYLOAD_FIELDS)))


def summary_in_database(store: Store, scope: str) -> Any:
    """`views.Columns` of a scope from the store's group totals (`Store.fold_group_chunks`:
    a few rows per cell, kept summed as the records were appended, each group's newest
    trials included, checked and decoded by chunks into arrays): no record and no
    per-record row is read."""
    from benchwarden.suites.arms import views

    return store.fold_group_chunks(SUITE_NAME, scope, views.columns_from_chunks)


def _clip(text: Any) -> Any:
    if isinstance(text, str) and len(text) > TEXT_SHOWN:
        return text[:TEXT_SHOWN] + f"… ({len(text) - TEXT_SHOWN:,} more characters)"
    return text


def _text(value: Any) -> str | None:
    """A payload value shown as text: a string as it is, anything else (a driver's odd
    value: a number, a list) as its JSON, so an odd record is shown, never refused."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


# the tool-call fields the page shows as text (`TranscriptEntry`)
_ENTRY_TEXT = ("kind", "command", "name", "server", "tool", "reason")


def _clip_entry(entry: Any) -> Any:
    if not isinstance(entry, Mapping):
        return {"kind": "call", "command": _clip(_text(entry))}
    clipped = {key: _clip(_text(value) if key in _ENTRY_TEXT else value)
               for key, value in entry.items()}
    if clipped.get("kind") is None:
        clipped.pop("kind", None)
    if "denied" in clipped:
        clipped["denied"] = bool(clipped["denied"])
    arguments = clipped.get("arguments")
    if arguments is not None and not isinstance(arguments, str):
        text = json.dumps(arguments, ensure_ascii=False)
        if len(text) > TEXT_SHOWN:
            clipped["arguments"] = _clip(text)
    return clipped


def trial_entry(record: Record, weights: TokenWeights) -> dict[str, Any]:
    """One trial for the report, its cost and duration from `Record` itself; its text
    (tool calls, final report, reasons) clipped so a page stays bounded."""
    payload = record.payload
    tokens = record.tokens
    transcript = _as_list(payload.get("transcript"))
    reasons = _as_list(payload.get("reasons"))
    return {
        "arm": record.arm, "task": record.task, "trial": record.trial, "run_id": record.run_id,
        "outcome": record.outcome, "failure": _clip(_text(payload.get("failure"))),
        "tier": _clip(_text(payload.get("tier"))),
        "reasons": [_clip(_text(reason)) for reason in reasons[:REASONS_SHOWN]]
        + ([f"… {len(reasons) - REASONS_SHOWN} more"] if len(reasons) > REASONS_SHOWN else []),
        "turns": summed_number(payload.get("turns"))[0],
        "stopped": _clip(_text(payload.get("stopped"))),
        "final_report": _clip(_text(payload.get("final_report"))),
        "transcript": [_clip_entry(entry) for entry in transcript[:TRANSCRIPT_SHOWN]],
        "tool_calls": len(transcript),
        "denied_calls": summed_number(payload.get("denied_calls"), count=True)[0],
        "tokens": {name: getattr(tokens, name) for name in COMPONENTS},
        "tokens_reported": bool(payload.get("tokens_reported", True)),
        "cost_equivalent": tokens.cost_equivalent(weights),
        "duration_s": record.duration_s,
        # (the model is what the agent reported: a hostile one's is clipped like its text)
        "model": _clip(_text(payload.get("model"))),
        "driver": _clip(_text(payload.get("driver"))),
    }


def _as_list(value: Any) -> list[Any]:
    """A payload list (reasons, transcript); a single odd value as a list of itself."""
    if value is None or value == "":
        return []
    return list(value) if isinstance(value, list) else [value]


def _shown_trials(store: Store, summary: Any, weights: TokenWeights) -> list[Trial]:
    from benchwarden.suites.arms import views

    chosen = views.shown_trials(summary, TRIAL_LIMIT)
    # each record clipped as it is read (`trial_entry`), so what is held is the clipped
    # trials and one page of records, however long their transcripts
    entries = {seq: trial_entry(record, weights) for seq, record in store.iter_records_at(chosen)}
    return convert([entries[seq] for seq in chosen if seq in entries],
                   list[Trial], "trials")  # type: ignore[no-any-return]


def export_command(store: Store) -> str:
    """The command that writes every arms trial of this store as data."""
    return (f"benchwarden export --store {shlex.quote(store.location)} --suite {SUITE_NAME} "
            "--format jsonl --out arms-trials.jsonl")


def with_trials(store: Store, report: ArmsReport | Mapping[str, Any]) -> ArmsReport:
    """The report with its shown trials (read from the store), for the page.

    A report that already carries trials is returned as it is; an older one gets the
    same bounded selection a new report holds."""
    typed = as_report(report)
    if typed.trials is not None:
        return typed
    weights = TokenWeights(**typed.weights) if typed.weights else DEFAULT_WEIGHTS
    summary = summarize_scope(store, typed.scope)
    return msgspec.structs.replace(typed, trials=_shown_trials(store, summary, weights),
                                   trials_total=summary.samples,
                                   export_command=export_command(store))


def runs_tally(ends: Sequence[Mapping[str, Any]], floor: int) -> dict[str, Any] | None:
    """Every run's tally summed per cell: outcomes, invalid trials and harness errors of
    all the runs that deepened the cell, samples from before the first to after the last."""
    if not ends:
        return None
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    totals = {"recorded": 0, "invalid": 0, "harness_errors": 0, "attempted": 0}
    problems: list[str] = []
    for summary in ends:
        for name in totals:
            totals[name] += int(summary.get(name) or 0)
        problems.extend(str(line) for line in summary.get("problems") or [])
        for cell in summary.get("cells") or []:
            key = (str(cell.get("arm")), str(cell.get("task")))
            row = cells.setdefault(key, {"arm": key[0], "task": key[1],
                                         "before": int(cell.get("before") or 0), "after": 0,
                                         "passed": 0, "failed": 0, "invalid": 0,
                                         "harness_errors": 0})
            row["after"] = int(cell.get("after") or 0)
            for name in ("passed", "failed", "invalid", "harness_errors"):
                row[name] += int(cell.get(name) or 0)
    rows = [{**row, "covered": row["after"] >= floor} for row in cells.values()]
    return {**totals, "floor": floor, "floor_reached": all(row["covered"] for row in rows),
            "cells": rows, "problems": problems[:50]}


VERSIONS_NAMED = 5
"""Bench versions the verdict names at most: a store written by another tool, each record
of its own version, made a verdict line of 12 MB."""


def _versions_named(versions: list[str]) -> str:
    """The sorted `versions` as the verdict names them: all, up to `VERSIONS_NAMED`, else
    the first of them and how many more."""
    if len(versions) <= VERSIONS_NAMED:
        return str(versions)
    return f"{versions[:VERSIONS_NAMED]} and {len(versions) - VERSIONS_NAMED:,} more"


def _report(store: Store, scope: str, info: Any, weights: TokenWeights,
            floor: int, scope_runs: list[Any] | None = None,
            baseline: str | None = None) -> ArmsReport:
    """The report of `scope`; `scope_runs` are its runs when the caller read them already
    (reading them counts every run's records). Built with the cycle collector paused
    (`core.collector`: a suite of thousands of tasks makes hundreds of thousands of
    objects that every full collection would walk)."""
    with paused_cycle_collector():
        return _report_of(store, scope, info, weights, floor, scope_runs, baseline)


def _report_of(store: Store, scope: str, info: Any, weights: TokenWeights,
               floor: int, scope_runs: list[Any] | None, baseline: str | None) -> ArmsReport:
    from benchwarden.suites.arms import views  # scipy: only when a report is built

    summary = summarize_scope(store, scope)
    if scope_runs is None:
        scope_runs = [i for i in _runs_for_report(store) if i.run.config.get("scope") == scope]
    configs = [i.run.config for i in scope_runs]
    arms, tasks, tiers = views.arms_and_tasks(summary, configs)
    if baseline is not None and baseline not in arms:
        raise StoreUsageError(f"baseline arm {baseline!r} is not an arm of suite {scope!r}; "
                              f"arms: {fmt.names(arms, 20)}")
    pairs = views.pairs_compared(arms, baseline)
    reported_tiers = tiers_reported(tiers, arms)
    counts = views.coverage(summary, arms, tasks, floor)
    covered = sum(row["covered"] for row in counts.values())
    cells = sum(row["cells"] for row in counts.values())
    versions = sorted(summary.versions)
    samples = summary.samples
    skipped = int(summary.values["odd_values"].sum())
    if not samples:
        verdict = Verdict.nothing_measured(f"no samples recorded for suite {scope!r}")
    else:
        verdict = Verdict.info(
            f"{samples} samples over {len(arms)} arms × {len(tasks)} tasks; "
            f"{covered} of {cells} cells covered (≥ {floor} samples)"
            + (f"; mixed bench versions {_versions_named(versions)}: compare with care"
               if len(versions) > 1 else "")
            + (f"; {skipped} turns, denied_calls or imputed_cost_usd values skipped: not "
               "numbers" if skipped else ""))
    bench_version = info.run.bench_version if info is not None else \
        (versions[-1] if versions else "")
    body = {
        "scope": scope,
        "floor": floor,
        "weights": {"fresh_input": weights.fresh_input, "cache_creation": weights.cache_creation,
                    "cache_read": weights.cache_read, "output": weights.output},
        "arms": arms,
        "tasks": tasks,
        "tiers": tiers,
        "samples": samples,
        "headline": views.headline(summary, arms, tasks, weights, floor),
        "coverage": counts,
        "per_tier": views.per_tier(summary, arms, reported_tiers, weights),
        "tiers_left_out": len(tiers) - len(reported_tiers),
        "per_component": views.per_component(summary, arms, weights),
        "failure_tags": views.failure_tags(summary, arms),
        "comparisons": views.compare_pairs(summary, pairs, weights, floor),
        "pairs_left_out": views.pairs_in_all(arms) - len(pairs),
        "baseline": baseline,
        "tally": dict(info.end.summary) if info is not None and info.end is not None else None,
        "runs": [i.run.run_id for i in scope_runs],
        "trials": _shown_trials(store, summary, weights),
        "trials_total": samples,
        "export_command": export_command(store),
        "runs_tally": runs_tally([dict(i.end.summary) for i in scope_runs
                                  if i.end is not None and i.end.summary], floor),
        "skipped_values": skipped,
    }
    # the columns are let go before the typed report copies the body (a suite of 333,000
    # tasks: a quarter of a gigabyte held through the copy otherwise)
    del summary
    plain = envelope(suite=SUITE_NAME, bench_version=bench_version,
                     run=info.run if info is not None else None,
                     end=info.end if info is not None else None, verdict=verdict, body=body,
                     store_head=store_head_block(store))
    return convert(plain, ArmsReport, "arms report")  # type: ignore[no-any-return]


def compare_in_scope(store: Store, scope: str | None, arm_a: str, arm_b: str,
                     weights: TokenWeights = DEFAULT_WEIGHTS,
                     floor: int = FLOOR) -> tuple[str, list[str], Comparison]:
    """`(scope, arms, b - a)`: one comparison from one streaming pass, without the rest
    of the report (no headline, no trials)."""
    from benchwarden.suites.arms import views

    scope, mine = _resolve_scope(store, scope)
    with paused_cycle_collector():  # as `_report`
        summary = summarize_scope(store, scope)
        arms, _, _ = views.arms_and_tasks(summary, [info.run.config for info in mine])
        return scope, arms, comparison_of(views.compare(summary, arm_a, arm_b, weights,
                                                        floor))


def comparison_of(plain: Mapping[str, Any]) -> Comparison:
    """A comparison computed by `views.compare`, typed."""
    return convert(dict(plain), Comparison, "arms comparison")  # type: ignore[no-any-return]


# -- terminal ------------------------------------------------------------------

# how the per-task column's heading names each interval method (`stats`): the bootstrap's
# as it always did ("BCa", also for its percentile fallback, which the JSON names)
_METHOD_SHOWN = {"bootstrap BCa": "BCa", "bootstrap percentile": "BCa"}


def _per_task_methods(headline: Sequence[HeadlineRow]) -> str:
    """The interval methods of the arms' per-task means, as the column's heading names
    them: "BCa" for the bootstrap, "ABC" for its analytic approximation over a very wide
    suite (`stats.ANALYTIC_INTERVAL_ABOVE`), several joined by "/" in the arms' order."""
    shown = dict.fromkeys(_METHOD_SHOWN.get(row.cost_equivalent_per_task.method,
                                            row.cost_equivalent_per_task.method)
                          for row in headline if row.cost_equivalent_per_task is not None
                          and row.cost_equivalent_per_task.method)
    return "/".join(shown) or "BCa"


def names_in(report: ArmsReport) -> Iterator[str]:
    """Every name the report holds: its suite's, arms', tasks', tiers', runs' and models'."""
    yield report.scope
    yield from report.arms
    yield from report.tasks
    yield from report.tiers
    yield from report.runs
    for arm, coverage in report.coverage.items():
        yield arm
        yield from coverage.samples
    for rows in (report.headline, report.per_component, report.failure_tags):
        yield from (row.arm for row in rows)
    for tier_row in report.per_tier:
        yield from (tier_row.arm, tier_row.tier)
    for tally in (report.tally, report.runs_tally):
        for cell in tally.cells if tally is not None else ():
            yield from (cell.arm, cell.task)
    for comparison in report.comparisons:
        yield from (comparison.a, comparison.b)
        yield from comparison.tasks
        yield from comparison.only_a
        yield from comparison.only_b
    for trial in report.trials or ():
        yield from (trial.arm, trial.task, trial.run_id)
        yield from (name for name in (trial.tier, trial.model, trial.driver) if name)
    if report.run is not None:
        yield report.run.id


def names_clipped(report: ArmsReport, command: str) -> ArmsReport:
    """`report` as the page and the terminal show it: every name longer than
    `core.html.NAME_LIMIT` clipped wherever it holds it, counted in `page_cut.names`
    (`command` the one that writes it whole); the commands it names stay whole (they
    must run)."""
    names = list(names_in(report))
    if max(map(len, names), default=0) <= NAME_LIMIT:  # in C: a wide suite has millions
        return report
    tree, clipped, _ = clip_long_names(report.to_json(), names)
    cut = report.page_cut if report.page_cut is not None else PageCut(command=command)
    return msgspec.structs.replace(
        ArmsReport.from_json(tree), export_command=report.export_command,
        page_cut=msgspec.structs.replace(cut, command=cut.command, names=clipped))


def render_terminal(report: ArmsReport | Mapping[str, Any], console: Console) -> None:
    report = as_report(report)
    report = names_clipped(report, whole_report_command(report))
    console.print(f"[bold]arms[/bold] suite [bold]{report.scope}[/bold] "
                  f"({report.bench_version}), floor {report.floor} samples per cell")
    if report.verdict:
        console.print(verdict_text(Verdict(report.verdict.kind, report.verdict.reason)))  # type: ignore[arg-type]
    console.print("cost-equivalent weights: "
                  + ", ".join(f"{k}={v:g}" for k, v in report.weights.items()))
    if report.page_cut is not None and report.page_cut.names:
        console.print(escape(
            f"{fmt.count(report.page_cut.names)} names longer than {NAME_LIMIT} characters "
            "are shown clipped (their start, an ellipsis and the start of their SHA-256); "
            f"{report.page_cut.command} writes them whole"), style="yellow")

    table = Table(title="headline per arm (mean ± SE clustered by task; "
                        "success with Wilson 95 % CI)")
    for column in ("arm", "samples", "success", "cost-eq tokens",
                   f"per task [{_per_task_methods(report.headline)} 95 %]", "raw tokens", "turns",
                   "duration s", "covered/partial/missing", "imputed $"):
        table.add_column(column, justify="left" if column == "arm" else "right")
    for row in report.headline:
        cov = row.coverage
        table.add_row(row.arm, fmt.count(row.samples), fmt.rate(row.success),
                      fmt.estimate(row.cost_equivalent, 0),
                      fmt.estimate_interval(row.cost_equivalent_per_task, 0),
                      fmt.estimate(row.raw_tokens, 0),
                      fmt.estimate(row.turns, 1), fmt.estimate(row.duration_s, 1),
                      f"{cov.covered}/{cov.partial}/{cov.missing} of {cov.cells}",
                      fmt.estimate(row.imputed_cost_usd, 4))
    console.print(table)

    tiers = Table(title="per tier")
    for column in ("arm", "tier", "samples", "success", "cost-eq tokens"):
        tiers.add_column(column, justify="left" if column in ("arm", "tier") else "right")
    shown, tier_count = tiers_shown(report)
    kept = set(shown)
    for tier in report.per_tier:
        if tier.tier in kept:
            tiers.add_row(tier.arm, tier.tier,
                          fmt.count(tier.samples) if tier.samples else DASH,
                          fmt.rate(tier.success), fmt.estimate(tier.cost_equivalent, 0))
    console.print(tiers)
    if len(shown) < tier_count and report.tiers_left_out:
        console.print(f"  showing the first {len(shown):,} of {tier_count:,} tiers; the "
                      f"rows of the first {tier_count - report.tiers_left_out:,}: "
                      f"{escape(whole_report_command(report))}")
    elif len(shown) < tier_count:
        console.print(f"  showing the first {len(shown):,} of {tier_count:,} tiers; every "
                      f"tier: {escape(whole_report_command(report))}")

    components = Table(title="per token component (mean per sample ± SE; weighted mean)")
    components.add_column("arm")
    for name in COMPONENTS:
        components.add_column(name.replace("_", " "), justify="right")
    for component in report.per_component:
        cells = []
        for name in COMPONENTS:
            weighted = component.weighted(name)
            cells.append(fmt.estimate(component.component(name), 0)
                         + ("" if weighted is None else f" ({fmt.tokens(weighted)})"))
        components.add_row(component.arm, *cells)
    console.print(components)

    tags = Table(title="outcomes and failure tags")
    for column in ("arm", "samples", "pass", "incorrect", "confused", "hung", "denied calls"):
        tags.add_column(column, justify="left" if column == "arm" else "right")
    for tag in report.failure_tags:
        tags.add_row(tag.arm, fmt.count(tag.samples) if tag.samples else DASH,
                     *(fmt.count(value) for value in (tag.passed, tag.incorrect, tag.confused,
                                                      tag.hung, tag.denied_calls)))
    console.print(tags)

    if report.pairs_left_out:
        render_comparisons_with_first(report, console)
    else:
        for comparison in report.comparisons:
            render_comparison(comparison, console)
    for note in comparisons_notes(report):
        console.print(escape(note))

    render_trials(report, console)
    if report.runs_tally is not None:
        runs = len(report.runs)
        render_tally(report.runs_tally, console,
                     title="run tally" + (f" of all {runs} runs" if runs > 1 else ""),
                     where=whole_report_command(report))
    elif report.tally:
        render_tally(report.tally, console, where=whole_report_command(report))


def render_trials(report: ArmsReport, console: Console) -> None:
    """The first shown trials (worst first), and where every trial is as data."""
    trials = report.trials or []
    if trials:
        table = Table(title="trials (per cell: newest failures first, then passes)")
        for column in ("arm", "task", "trial", "outcome", "turns", "tool calls",
                       "cost-eq tokens", "reason"):
            table.add_column(column, justify="right" if column in (
                "trial", "turns", "tool calls", "cost-eq tokens") else "left")
        for trial in trials[:TERMINAL_TRIALS]:
            table.add_row(trial.arm, trial.task, fmt.count(trial.trial),
                          trial.failure or trial.outcome if trial.outcome != "pass" else "pass",
                          fmt.number(trial.turns, 1),
                          fmt.count(trial.tool_calls if trial.tool_calls is not None
                                    else len(trial.transcript)),
                          fmt.tokens(trial.cost_equivalent),
                          escape(trial.reasons[0]) if trial.reasons else DASH)
        console.print(table)
    total = report.trials_total if report.trials_total is not None else report.samples
    shown = min(len(trials), TERMINAL_TRIALS)
    if report.export_command:
        console.print(f"{shown} of {fmt.count(total)} trials shown; every trial as data: "
                      f"{escape(report.export_command)}")


CHANCE_LEVEL = 0.05
"""How often a comparison's measure looks significant (p below it, the 95 % interval
clear of zero) where the arms do not differ: `stats.paired_difference`'s default."""
MEASURES_COMPARED = 2
"""Measures each comparison tests: success and cost-equivalent tokens."""


def comparisons_notes(report: ArmsReport) -> list[str]:
    """What to keep in mind reading the report's comparisons, in words: which pairs it
    left out (many arms), and, where the tests are many, how many of them chance alone
    would make look significant."""
    notes = []
    if report.pairs_left_out:
        if report.baseline is not None:
            against = f"{report.baseline}, the baseline asked for"
        elif report.comparisons:
            against = f"{report.comparisons[0].a}, the first listed"
        else:
            against = "the first arm listed"
        notes.append(f"{len(report.arms)} arms: each compared with {against}; "
                     f"{report.pairs_left_out:,} other pairs are not compared here "
                     "(`benchwarden arms compare A B` compares any two; `benchwarden arms "
                     "report --baseline ARM` compares each with ARM)")
    tests = len(report.comparisons) * MEASURES_COMPARED
    expected = tests * CHANCE_LEVEL
    if expected >= 1:
        notes.append(f"{tests:,} differences tested ({len(report.comparisons):,} pairs × "
                     f"{MEASURES_COMPARED} measures): even where no arm differs, about "
                     f"{expected:.0f} would look significant (p < {CHANCE_LEVEL:g}) by chance "
                     "alone; read a lone small p-value among them with care")
    return notes


def comparison_cells(comparison: Comparison) -> tuple[tuple[str, str, str, str],
                                                     tuple[str, str, str, str]]:
    """A comparison's success and cost-equivalent differences as every view prints them:
    each its difference, 95 % interval, p-value and MDE."""
    success = comparison.success_difference
    cost = comparison.cost_equivalent_difference
    mde = comparison.success_mde
    return ((fmt.signed(success.mean_diff, 1, scale=100, suffix=" pp"),
             fmt.interval(success.low, success.high, 1, scale=100, sign=True),
             fmt.p_value(success.p_value),
             fmt.DASH if mde is None else fmt.number(100 * mde, 1) + " pp"),
            (fmt.signed(cost.mean_diff, 0), fmt.interval(cost.low, cost.high, 0, sign=True),
             fmt.p_value(cost.p_value), fmt.tokens(cost.mde)))


def render_comparison(given: Comparison | Mapping[str, Any], console: Console) -> None:
    comparison = given if isinstance(given, Comparison) else comparison_of(given)
    success_cells, cost_cells = comparison_cells(comparison)
    table = Table(title=f"paired: {comparison.b} − {comparison.a} over "
                        f"{len(comparison.tasks)} tasks both covered "
                        f"(≥ {comparison.floor} samples each)")
    for column in ("measure", comparison.a, comparison.b, "difference", "95 % CI",
                   "p", "MDE"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    table.add_row("success", fmt.percent(comparison.success_a), fmt.percent(comparison.success_b),
                  *success_cells)
    table.add_row("cost-eq tokens", fmt.tokens(comparison.cost_a), fmt.tokens(comparison.cost_b),
                  *cost_cells)
    console.print(table)
    if comparison.conclusion:
        console.print(f"  {escape(comparison.conclusion)}")
    if not comparison.tasks:
        console.print(f"  no task is covered by both arms yet; run more trials "
                      f"(--trials {comparison.floor})")


def whole_report_command(report: ArmsReport, view: str = "report") -> str:
    """The command that writes the whole report as JSON (names quoted for a shell), for
    a `view` of it that shows part of it. A copy a view cut or clipped names the one it
    was made with (`page_cut.command`): its own run id may be clipped."""
    if report.page_cut is not None:
        return report.page_cut.command
    if report.run is not None and report.run.id:
        return (f"benchwarden show {shlex.quote(report.run.id)} --json FILE "
                f"(with this {view}'s --store)")
    return (f"benchwarden arms report --suite {shlex.quote(report.scope)} --json FILE "
            f"(with this {view}'s --store)")


TIERS_SHOWN = 30
"""Tiers whose rows a terminal's and a page's per-tier breakdown show at most, in the
report's order (`tiers_shown`; the JSON holds the rows of every tier reported): a suite
whose every task is its own tier made a table of thousands of rows (2,000 tiers: 6,000
rows, 3.7 s for rich to lay out)."""


PER_TIER_ROWS = 6_000
"""Per-tier rows (an arm and a tier each) a report computes at most: those of its first
tiers (`tiers_reported`), at least `TIERS_SHOWN` of them, the rest counted in
`tiers_left_out`. A store written by another tool may give each record its own tier:
at 100,000 records a report made 300,000 rows (39 s, a 72 MB report file), each row's
estimates about 100 µs; at most 0.6 s of them now."""


def tiers_reported(tiers: Sequence[str], arms: Sequence[str]) -> Sequence[str]:
    """The first tiers whose rows a report computes: `PER_TIER_ROWS` rows over the
    arms, never fewer than the `TIERS_SHOWN` a view shows."""
    return tiers[:max(TIERS_SHOWN, PER_TIER_ROWS // max(1, len(arms)))]


def tiers_shown(report: ArmsReport) -> tuple[list[str], int]:
    """The first `TIERS_SHOWN` tiers of the report (its `tiers`, then any only its
    per-tier rows name), and how many it has (a page's copy counts those of the whole
    report: `page_cut.tiers`)."""
    tiers = list(dict.fromkeys([*report.tiers, *(row.tier for row in report.per_tier)]))
    cut = report.page_cut
    total = cut.tiers if cut is not None and cut.tiers is not None else len(tiers)
    return tiers[:TIERS_SHOWN], total


TERMINAL_TALLY_ROWS = 100
"""Tally rows a terminal shows at most, those needing attention first (`tally_rows_shown`):
a run of 20,000 cells took rich 13 s to lay out, and a wide suite's run has a million."""


def tally_rows_shown(tally: Tally, limit: int) -> list[TallyCell]:
    """Every cell of `tally` up to `limit`, else the first `limit` of the cells needing
    attention (invalid trials, harness errors, below the floor) then the others, each
    kind in the tally's order."""
    cells = tally.cells
    if len(cells) <= limit:
        return list(cells)
    return sorted(cells, key=lambda c: not (c.invalid or c.harness_errors
                                            or not c.covered))[:limit]


def render_comparisons_with_first(report: ArmsReport, console: Console) -> None:
    """The comparisons of a report of many arms, each with the first arm, as one table (a
    row a pair, as the page draws them; a table each took rich a second at 100 arms),
    then each one's sentence."""
    first = report.comparisons[0].a if report.comparisons else ""
    table = Table(title=f"paired: each arm − {first} over the tasks both covered")
    for column in ("arm", "tasks", "success", "success diff", "95 % CI", "p", "MDE",
                   "cost-eq tokens", "cost-eq diff", "95 % CI", "p", "MDE"):
        table.add_column(column, justify="left" if column == "arm" else "right")
    for comparison in report.comparisons:
        success_cells, cost_cells = comparison_cells(comparison)
        table.add_row(comparison.b if comparison.a == first else f"{comparison.b} − {comparison.a}",
                      fmt.count(len(comparison.tasks)), fmt.percent(comparison.success_b),
                      *success_cells, fmt.tokens(comparison.cost_b), *cost_cells)
    console.print(table)
    for comparison in report.comparisons:
        if comparison.conclusion:
            console.print(f"  {escape(comparison.b)} − {escape(comparison.a)}: "
                          f"{escape(comparison.conclusion)}")
        if not comparison.tasks:
            console.print(f"  {escape(comparison.b)} − {escape(comparison.a)}: no task is "
                          f"covered by both arms yet; run more trials (--trials "
                          f"{comparison.floor})")


def render_tally(given: Tally | Mapping[str, Any], console: Console,
                 title: str = "run tally", where: str = "") -> None:
    """A run's tally: its counts, its cells up to `TERMINAL_TALLY_ROWS` (those needing
    attention first; `where` names the command that lists every cell), its problems and
    whether every cell reached the floor."""
    tally: Tally = given if isinstance(given, Tally) else convert(dict(given), Tally, "run tally")
    shown = tally_rows_shown(tally, TERMINAL_TALLY_ROWS)
    table = Table(title=f"{title}: {tally.recorded} recorded, {tally.invalid} invalid "
                        f"(isolation leaks), {tally.harness_errors} harness errors")
    for column in ("arm", "task", "samples before → after", "pass", "fail", "invalid",
                   "harness errors", "floor"):
        table.add_column(column, justify="left" if column in ("arm", "task") else "right")
    for cell in shown:
        table.add_row(cell.arm, cell.task, f"{cell.before} → {cell.after}",
                      fmt.count(cell.passed), fmt.count(cell.failed), fmt.count(cell.invalid),
                      fmt.count(cell.harness_errors), "reached" if cell.covered else "below")
    console.print(table)
    if len(shown) < len(tally.cells):
        console.print(f"  showing {len(shown):,} of {len(tally.cells):,} cells, those needing "
                      "attention first" + (f"; every cell: {escape(where)}" if where else ""))
    for problem in tally.problems:
        console.print(f"  [yellow]{escape(problem)}[/yellow]")
    if tally.floor_reached:
        console.print(f"every cell reached the floor of {tally.floor} samples")
    else:
        below = sum(1 for cell in tally.cells if not cell.covered)
        console.print(f"[bold]{below} cells are below the floor of {tally.floor} samples[/bold]: "
                      "run again with --trials to deepen them")
