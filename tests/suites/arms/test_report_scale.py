"""The arms report at scale: built from one streaming pass over slim rows, it equals a
per-record computation; what it shows of single trials is bounded; planning counts in
the database; compare says which arm is better.

The per-record reference here is written independently of `views` (exact fractions for
means and cluster residuals), so a wrong total, a lost group or a mis-keyed cell in the
streaming aggregation shows as a difference. Both backends: SQLite and a real PostgreSQL.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from collections import defaultdict
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.core.group_totals import decoded_chunks
from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import Record, RunEnd, TokenComponents, TokenWeights
from benchwarden.core.store import CorruptStore, SQLiteStore, Store, StoreUsageError
from benchwarden.suites.arms import html as arms_html
from benchwarden.suites.arms import report as arms_report
from benchwarden.suites.arms import views
from benchwarden.suites.arms.driver import plan_cells
from benchwarden.suites.arms.html import render_html
from benchwarden.suites.arms.tasks import load_suite
from tests.core.test_store_backends import backend, postgres_database  # noqa: F401 (fixtures)
from tests.suites.arms import reference_views as reference

SCOPE = "scale"
TIERS = ("read", "write")
FAILURES = ("incorrect", "confused", "hung")


def make_record(arm: str, task: str, trial: int, *, passed: bool, tokens: Sequence[int],
                turns: int | None, duration: float, reported: bool = True,
                cost: float | None = None, reasoning: int | None = None,
                failure: str = "incorrect", run_id: str = "run-1", text: str = "") -> Record:
    payload: dict[str, Any] = {
        "tier": TIERS[int(task[1:]) % 2], "failure": None if passed else failure,
        "reasons": [] if passed else ["the label is missing " + text],
        "stopped": "finished", "final_report": "done " + text,
        "transcript": [{"kind": "shell", "command": f"tracker show {n} {text}"} for n in range(5)],
        "denied_calls": trial % 2, "tokens_reported": reported, "bench_version": "1"}
    if turns is not None:
        payload["turns"] = turns
    if cost is not None:
        payload["imputed_cost_usd"] = cost
    fresh, creation, read, output = tokens
    return Record(suite="arms", scope=SCOPE, arm=arm, task=task, trial=trial, run_id=run_id,
                  outcome="pass" if passed else "fail", started_at=1_790_000_000.0 + trial,
                  ended_at=1_790_000_000.0 + trial + duration,
                  tokens=TokenComponents(fresh, creation, read, output, reasoning),
                  payload=payload)


def fill(store: Store, records: Sequence[Record], arms: Sequence[str],
         tasks: Sequence[str]) -> None:
    config = {"scope": SCOPE, "arms": list(arms), "tasks": list(tasks), "tiers": list(TIERS)}
    store.begin_run(stamp_run(suite="arms", bench_version="1", config=config, run_id="run-1"))
    store.append(records)
    store.finish_run(RunEnd("run-1", 1_790_100_000.0, "completed", {}))


# ---------------------------------------------------------------------------- the reference

def reference_clustered(values: Sequence[float],
                        clusters: Sequence[str]) -> tuple[float, float | None]:
    """Mean and CR1 standard error, exactly (fractions) until the square root."""
    exact = [Fraction(value) for value in values]
    mean = sum(exact, Fraction(0)) / len(exact)
    residuals: dict[str, Fraction] = defaultdict(Fraction)
    for value, cluster in zip(exact, clusters, strict=True):
        residuals[cluster] += value - mean
    groups = len(residuals)
    if groups < 2:
        return float(mean), None
    squared = sum((total * total for total in residuals.values()), Fraction(0))
    return float(mean), math.sqrt(groups / (groups - 1) * float(squared)) / len(exact)


def assert_estimate(block: Any, values: Sequence[float], clusters: Sequence[str]) -> None:
    if not values:
        assert block is None
        return
    mean, se = reference_clustered(values, clusters)
    assert block.n == len(values)
    assert block.mean == pytest.approx(mean, rel=1e-12, abs=1e-12)
    if se is None:
        assert block.se is None
    else:
        assert block.se == pytest.approx(se, rel=1e-9, abs=1e-9)


def assert_report_is_the_per_record_computation(report: arms_report.ArmsReport,
                                                records: Sequence[Record],
                                                weights: TokenWeights) -> None:
    assert report.samples == len(records)
    headline = {row.arm: row for row in report.headline}
    tags = {row.arm: row for row in report.failure_tags}
    components = {row.arm: row for row in report.per_component}
    for arm in report.arms:
        mine = [r for r in records if r.arm == arm]
        priced = [r for r in mine if r.payload["tokens_reported"]]
        row = headline[arm]
        assert row.samples == len(mine)
        passes = sum(r.outcome == "pass" for r in mine)
        if mine:
            assert row.success is not None and row.success.mean == pytest.approx(passes / len(mine))
        assert_estimate(row.cost_equivalent, [r.tokens.cost_equivalent(weights) for r in priced],
                        [r.task for r in priced])
        assert_estimate(row.raw_tokens, [r.tokens.raw_total for r in priced],
                        [r.task for r in priced])
        assert_estimate(row.turns, [r.payload.get("turns") or 0 for r in mine],
                        [r.task for r in mine])
        assert_estimate(row.duration_s, [r.duration_s for r in mine], [r.task for r in mine])
        costed = [r for r in mine if r.payload.get("imputed_cost_usd") is not None]
        assert_estimate(row.imputed_cost_usd, [r.payload["imputed_cost_usd"] for r in costed],
                        [r.task for r in costed])
        for name in ("fresh_input", "cache_creation", "cache_read", "output"):
            assert_estimate(components[arm].component(name),
                            [getattr(r.tokens, name) for r in priced], [r.task for r in priced])
        reasoned = [r for r in priced if r.tokens.reasoning is not None]
        assert_estimate(components[arm].reasoning, [r.tokens.reasoning for r in reasoned],
                        [r.task for r in reasoned])
        if mine:
            assert tags[arm].passed == passes
            for tag in FAILURES:
                assert getattr(tags[arm], tag) == sum(
                    r.outcome != "pass" and r.payload["failure"] == tag for r in mine)
            assert tags[arm].denied_calls == sum(r.payload["denied_calls"] for r in mine)
    for tier_row in report.per_tier:
        group = [r for r in records if r.arm == tier_row.arm and r.payload["tier"] == tier_row.tier]
        assert tier_row.samples == len(group)
        priced = [r for r in group if r.payload["tokens_reported"]]
        assert_estimate(tier_row.cost_equivalent,
                        [r.tokens.cost_equivalent(weights) for r in priced],
                        [r.task for r in priced])
    for comparison in report.comparisons:
        def per_task(arm: str) -> dict[str, list[Record]]:
            cells: dict[str, list[Record]] = defaultdict(list)
            for r in records:
                if r.arm == arm:
                    cells[r.task].append(r)
            return {task: group for task, group in cells.items() if len(group) >= report.floor}
        a, b = per_task(comparison.a), per_task(comparison.b)
        shared = sorted(set(a) & set(b))
        assert comparison.tasks == shared
        if shared:
            rate = {arm: [Fraction(sum(r.outcome == "pass" for r in cells[t]), len(cells[t]))
                          for t in shared] for arm, cells in (("a", a), ("b", b))}
            assert comparison.success_a == pytest.approx(float(sum(rate["a"]) / len(shared)))
            assert comparison.success_difference.mean_diff == pytest.approx(
                float((sum(rate["b"]) - sum(rate["a"])) / len(shared)), abs=1e-12)


# ---------------------------------------------------------------------------- equality

record_rows = st.lists(st.tuples(
    st.sampled_from(["cli", "http", "mcp"]), st.sampled_from(["t0", "t1", "t2", "t3"]),
    st.booleans(), st.sampled_from(FAILURES),
    st.tuples(*[st.integers(0, 50_000)] * 4), st.one_of(st.none(), st.integers(0, 40)),
    st.floats(0.0, 500.0, allow_nan=False), st.booleans(),
    st.one_of(st.none(), st.floats(0.0, 2.0, allow_nan=False)),
    st.one_of(st.none(), st.integers(0, 9_000))), min_size=1, max_size=60)


@given(record_rows, st.sampled_from(["", "output=1", "fresh=0.3,cache_read=0.05,output=7"]))
@settings(max_examples=40, deadline=None)
def test_the_streamed_report_equals_a_per_record_computation(rows, weight_text):
    weights = TokenWeights.parse(weight_text) if weight_text else TokenWeights()
    trials: dict[tuple[str, str], int] = defaultdict(int)
    records = []
    for arm, task, passed, failure, tokens, turns, duration, reported, cost, reasoning in rows:
        trials[(arm, task)] += 1
        records.append(make_record(arm, task, trials[(arm, task)], passed=passed, tokens=tokens,
                                   turns=turns, duration=duration, reported=reported, cost=cost,
                                   reasoning=reasoning, failure=failure))
    with SQLiteStore(":memory:") as store:
        fill(store, records, ["cli", "http", "mcp"], ["t0", "t1", "t2", "t3"])
        report = arms_report.build_report(store, "run-1", weights, floor=2)
    assert_report_is_the_per_record_computation(report, records, weights)
    # the same views from the records in memory (no store) give the same report body
    in_memory = views.headline(records, report.arms, report.tasks, weights, 2)
    assert [row.arm for row in report.headline] == [row["arm"] for row in in_memory]
    # equal, floats to rounding: the database adds durations and costs in its own order
    assert msgspec_plain(report.headline) == approx_tree(in_memory)


def approx_tree(value: Any) -> Any:
    """`value` with every float compared to 1e-12 relative (nested dicts and lists)."""
    if isinstance(value, float):
        return pytest.approx(value, rel=1e-12, abs=1e-12)
    if isinstance(value, dict):
        return {key: approx_tree(item) for key, item in value.items()}
    if isinstance(value, list):
        return [approx_tree(item) for item in value]
    return value


def msgspec_plain(value: Any) -> Any:
    import msgspec

    return msgspec.to_builtins(value)


def random_records(seed: int, arms: Sequence[str], tasks: Sequence[str], depth: int,
                   text: str = "") -> list[Record]:
    draw = random.Random(seed)
    return [make_record(arm, task, trial, passed=draw.random() < 0.5 + 0.1 * arms.index(arm),
                        tokens=[draw.randint(0, 4000) for _ in range(4)],
                        turns=draw.randint(1, 12), duration=draw.uniform(0.5, 40.0),
                        reported=draw.random() > 0.1,
                        cost=draw.choice((None, round(draw.uniform(0, 0.05), 6))),
                        reasoning=draw.choice((None, draw.randint(0, 500))),
                        failure=draw.choice(FAILURES), text=text)
            for arm in arms for task in tasks for trial in range(1, depth + 1)]


def test_both_backends_give_the_per_record_report(backend):  # noqa: F811 (the fixture)
    arms, tasks = ["cli", "http", "mcp"], [f"t{n}" for n in range(8)]
    records = random_records(7, arms, tasks, depth=6)
    weights = TokenWeights.parse("cache_read=0.2")
    with backend.open() as store:
        fill(store, records, arms, tasks)
        report = arms_report.build_report(store, "run-1", weights)
        suite = dataclasses.replace(load_suite("tracker"), name=SCOPE)
        plans = plan_cells(store, suite, arms, tasks, 8)  # counted by the database
    assert [(p.arm, p.task, p.before, p.trials) for p in plans] == \
        [(a, t, 6, (7, 8)) for a in arms for t in tasks]
    assert_report_is_the_per_record_computation(report, records, weights)


# ---------------------------------------------------------------------------- bounded

def test_the_page_stays_bounded_however_many_trials_the_store_holds(tmp_path):
    """Every trial carries far more text than is shown; the page is bounded by the cap on
    drawn trials times the cap on what one trial shows, and does not grow with depth."""
    arms, tasks = ["cli", "http"], [f"t{n}" for n in range(150)]
    long_text = "lorem ipsum " * 2_000  # 24 kB per field, far past what is shown
    pages = []
    for depth in (2, 4):
        with SQLiteStore(tmp_path / f"depth-{depth}.sqlite") as store:
            fill(store, random_records(depth, arms, tasks, depth, text=long_text), arms, tasks)
            report = arms_report.with_trials(store, arms_report.build_report(store, "run-1"))
            assert report.trials is not None
            assert len(report.trials) == arms_report.TRIAL_LIMIT
            assert report.trials_total == len(arms) * len(tasks) * depth
            assert report.export_command and "benchwarden export" in report.export_command
            page = render_html(report)
            bare = render_html(msgspec_replace(report, trials=[]))
        assert "benchwarden export" in page
        # a shown trial: its texts clipped to TEXT_SHOWN characters (plus markup), at most
        # TRANSCRIPT_SHOWN tool calls, REASONS_SHOWN reasons and a final report; drawn once
        # and embedded once in the page's JSON
        per_trial = 2 * (arms_report.TRANSCRIPT_SHOWN + arms_report.REASONS_SHOWN + 2) \
            * (arms_report.TEXT_SHOWN + 200)
        bound = len(bare.encode()) + arms_report.TRIAL_LIMIT * per_trial
        assert len(page.encode()) <= bound < 20 * 2**20
        pages.append(len(page.encode()))
    # twice the trials per cell: the same bound; the page moves only with which trials
    # (failing ones carry reasons) fill the cap
    assert pages[1] <= pages[0] * 1.25


def msgspec_replace(report: arms_report.ArmsReport, **changes: Any) -> arms_report.ArmsReport:
    import msgspec

    return msgspec.structs.replace(report, **changes)


def test_shown_trials_put_each_cells_newest_failures_first():
    records = []
    for trial, passed in enumerate((False, True, False, True, True, False, True), start=1):
        records.append(make_record("cli", "t0", trial, passed=passed, tokens=[1, 0, 0, 1],
                                   turns=1, duration=1.0))
    records.append(make_record("http", "t0", 1, passed=True, tokens=[1, 0, 0, 1], turns=1,
                               duration=1.0))
    summary = views.summarize(records)
    chosen = views.shown_trials(summary, limit=10)
    by_seq = {index: record for index, record in enumerate(records, start=1)}
    shown = [(by_seq[seq].arm, by_seq[seq].trial) for seq in chosen]
    assert shown == [("cli", 6), ("cli", 3), ("cli", 1), ("http", 1)]
    assert len(views.shown_trials(summary, limit=2)) == 2


def test_a_fractional_turn_count_is_shown_as_the_mean_counts_it():
    """A driver that reports 2.5 turns: the mean sums it, so the trial's own row shows
    2.5 too, never a dash as if the value were missing."""
    from io import StringIO

    from rich.console import Console

    records = [make_record("cli", "t0", 1, passed=True, tokens=[1, 0, 0, 1], turns=2.5,
                           duration=1.0),
               make_record("cli", "t0", 2, passed=True, tokens=[1, 0, 0, 1], turns=3,
                           duration=1.0)]
    with SQLiteStore(":memory:") as store:
        fill(store, records, ["cli"], ["t0"])
        report = arms_report.build_report(store, "run-1", floor=1)
    assert report.trials is not None
    assert sorted((trial.trial, trial.turns) for trial in report.trials) == [(1, 2.5), (2, 3)]
    output = StringIO()
    arms_report.render_trials(report, Console(file=output, width=200))
    rows = [line for line in output.getvalue().splitlines() if " cli " in f" {line} "]
    assert any("2.5" in row for row in rows) and any(" 3 " in f" {row} " for row in rows)


# ---------------------------------------------------------------------------- compare in words

def _two_arms(pass_a: int, pass_b: int, tasks: int = 6, depth: int = 10) -> list[Record]:
    records = []
    for arm, passes in (("cli", pass_a), ("http", pass_b)):
        for task in range(tasks):
            for trial in range(1, depth + 1):
                records.append(make_record(arm, f"t{task}", trial,
                                           passed=trial <= passes + task % 2,
                                           tokens=[1000 if arm == "cli" else 400, 0, 0, 100],
                                           turns=3, duration=1.0))
    return records


def test_compare_says_which_arm_is_better():
    result = views.compare(_two_arms(2, 8), "cli", "http")
    assert result["conclusion"].startswith("http succeeds more often than cli")
    assert "http costs fewer cost-equivalent tokens than cli" in result["conclusion"]
    flipped = views.compare(_two_arms(2, 8), "http", "cli")
    assert flipped["conclusion"].startswith("http succeeds more often than cli")


def test_compare_says_when_the_data_cannot_tell():
    result = views.compare(_two_arms(5, 5), "cli", "http")
    assert result["conclusion"].startswith("the data cannot tell cli and http apart on success")
    nothing = views.compare(_two_arms(5, 5, depth=2), "cli", "http")
    assert "no task has ≥ 3 samples" in nothing["conclusion"]


def test_compare_shows_the_binomial_mde_when_the_differences_have_no_spread():
    records = _two_arms(5, 5)  # every task: the same rate in both arms, so sd == 0
    comparison = arms_report.comparison_of(views.compare(records, "cli", "http"))
    success = comparison.success_difference
    assert success.sd == 0 and success.mde == 0.0  # "any difference is detectable": untrue
    assert success.mde_binomial is not None and success.mde_binomial > 0
    assert comparison.success_mde == success.mde_binomial
    assert f"{100 * success.mde_binomial:.1f} pp" in comparison.conclusion


# ---------------------------------------------------------------------------- tally of all runs

def test_the_tally_covers_every_run_of_the_cell():
    first = {"recorded": 3, "invalid": 1, "harness_errors": 0, "attempted": 4, "problems": ["x"],
             "cells": [{"arm": "cli", "task": "t0", "before": 0, "after": 3, "passed": 2,
                        "failed": 1, "invalid": 1, "harness_errors": 0}]}
    second = {"recorded": 2, "invalid": 0, "harness_errors": 1, "attempted": 3, "problems": [],
              "cells": [{"arm": "cli", "task": "t0", "before": 3, "after": 5, "passed": 1,
                         "failed": 1, "invalid": 0, "harness_errors": 1},
                        {"arm": "http", "task": "t0", "before": 0, "after": 1, "passed": 1,
                         "failed": 0, "invalid": 0, "harness_errors": 0}]}
    tally = arms_report.runs_tally([first, second], floor=3)
    assert tally is not None
    assert (tally["recorded"], tally["invalid"], tally["harness_errors"]) == (5, 1, 1)
    cells = {(c["arm"], c["task"]): c for c in tally["cells"]}
    assert cells[("cli", "t0")] == {"arm": "cli", "task": "t0", "before": 0, "after": 5,
                                    "passed": 3, "failed": 2, "invalid": 1,
                                    "harness_errors": 1, "covered": True}
    assert not cells[("http", "t0")]["covered"] and not tally["floor_reached"]
    assert arms_report.runs_tally([], floor=3) is None


# ---------------------------------------------------------------------------- in the database

def assert_same_summary(database: views.Summary, streamed: views.Summary) -> None:
    """Integer totals, group keys, first-seen order and newest trials exactly; float sums
    to rounding (the database adds in its own order)."""
    assert list(database.groups) == list(streamed.groups)
    assert database.first_seen == streamed.first_seen and database.versions == streamed.versions
    for key, expected in streamed.groups.items():
        found = database.groups[key]
        for name in ("samples", "passes", "priced", "fresh_input", "cache_creation",
                     "cache_read", "output", "reasoning_samples", "reasoning", "denied_calls",
                     "imputed_samples", "newest"):
            assert getattr(found, name) == getattr(expected, name), (key, name)
        for name in ("duration_s", "turns", "imputed_cost_usd"):
            assert getattr(found, name) == pytest.approx(getattr(expected, name), rel=1e-12,
                                                         abs=1e-9), (key, name)


def database_summary(store: Store, scope: str) -> views.Summary:
    """The scope's `views.Columns` read from the group totals (what a report reads), as a
    `Summary` (`reference_views.summary_of`) to compare with the stream's."""
    return reference.summary_of(arms_report.summary_in_database(store, scope))


def streamed_summary(store: Store) -> views.Summary:
    return views.summarize(store.iter_record_summaries(
        suite="arms", scope=SCOPE, payload_fields=views.PAYLOAD_FIELDS))


# payload values of every JSON type, for the fields the database groups or sums by
odd_values = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(-2, 2),
                       st.sampled_from(["", "read", "3"]), st.lists(st.integers(0, 2), max_size=2),
                       st.dictionaries(st.sampled_from(["k"]), st.integers(0, 2), max_size=1))
SUMMED = ("turns", "denied_calls", "imputed_cost_usd")


def is_summed(value: Any, *, whole: bool = False) -> bool:
    """The rule, stated apart from `summed_number`: a JSON number (not a boolean), whole
    where a count is wanted; these tests' values are small and finite."""
    if type(value) not in (int, float):
        return False
    return not whole or float(value).is_integer()


def expected_skipped(records: Sequence[Record]) -> int:
    return sum(name in r.payload and r.payload[name] is not None
               and not is_summed(r.payload[name], whole=name == "denied_calls")
               for r in records for name in SUMMED)


def records_with_oddities(rows: Any, oddities: Sequence[tuple[str, Any]]) -> list[Record]:
    trials: dict[tuple[str, str], int] = defaultdict(int)
    records = []
    for index, (arm, task, passed, failure, tokens, turns, duration, reported, cost,
                reasoning) in enumerate(rows):
        trials[(arm, task)] += 1
        made = make_record(arm, task, trials[(arm, task)], passed=passed, tokens=tokens,
                           turns=turns, duration=duration, reported=reported, cost=cost,
                           reasoning=reasoning, failure=failure)
        if oddities and index % 3 == 0:
            name, value = oddities[index % len(oddities)]
            made.payload[name] = value
        records.append(made)
    return records


@given(record_rows, st.lists(st.tuples(st.sampled_from(
    ["tier", "failure", "turns", "denied_calls", "tokens_reported", "imputed_cost_usd",
     "bench_version"]), odd_values), max_size=3))
@settings(max_examples=40, deadline=None)
def test_the_database_sums_what_the_stream_sums(rows, oddities):
    """Whatever the payload holds, the database's totals equal the streaming pass over the
    same store, and both skip and count exactly the summed values that are not numbers."""
    records = records_with_oddities(rows, oddities)
    with SQLiteStore(":memory:") as store:
        fill(store, records, ["cli", "http", "mcp"], ["t0", "t1", "t2", "t3"])
        in_database = database_summary(store, SCOPE)
        streamed = streamed_summary(store)
    assert_same_summary(in_database, streamed)
    skipped = expected_skipped(records)
    assert sum(totals.odd_values for totals in in_database.groups.values()) == skipped
    assert sum(totals.denied_calls for totals in streamed.groups.values()) == sum(
        int(r.payload["denied_calls"]) for r in records
        if is_summed(r.payload.get("denied_calls"), whole=True))


@given(record_rows, st.lists(st.tuples(st.sampled_from(
    [*SUMMED, *SUMMED, "tier", "failure", "tokens_reported", "bench_version", "reasons",
     "transcript", "stopped", "final_report", "model"]), odd_values), min_size=1, max_size=3))
@settings(max_examples=30, deadline=None)
def test_a_report_with_odd_payload_values_is_built_and_says_what_it_skipped(rows, oddities):
    """The same report from the database and from the streaming pass, the odd summed
    values skipped and counted in both (once a traceback: `float("read")`), odd shown
    values shown as text."""
    records = records_with_oddities(rows, oddities)
    with SQLiteStore(":memory:") as store:
        fill(store, records, ["cli", "http", "mcp"], ["t0", "t1", "t2", "t3"])
        summed = arms_report.build_report(store, "run-1", floor=2)
        store.has_derived_tables = False  # as a store without the totals is read
        streamed = arms_report.build_report(store, "run-1", floor=2)
    skipped = expected_skipped(records)
    for report in (summed, streamed):
        assert report.skipped_values == skipped
        assert report.verdict is not None
        assert (f"{skipped} turns, denied_calls or imputed_cost_usd values skipped"
                in report.verdict.reason) == bool(skipped)
    assert msgspec_plain(summed.headline) == approx_tree(msgspec_plain(streamed.headline))
    assert msgspec_plain(summed.failure_tags) == msgspec_plain(streamed.failure_tags)


def run_appending(store, records, cuts) -> None:
    """Run `run-1` of the scope begun, then `records` appended in batches of the sizes
    `cuts` names in turn."""
    config = {"scope": SCOPE, "arms": ["cli", "http", "mcp"],
              "tasks": ["t0", "t1", "t2", "t3"], "tiers": list(TIERS)}
    store.begin_run(stamp_run(suite="arms", bench_version="1", config=config, run_id="run-1"))
    start, index = 0, 0
    while start < len(records):
        size = cuts[index % len(cuts)]
        store.append(records[start:start + size])
        start, index = start + size, index + 1


@given(record_rows, st.lists(st.integers(1, 9), min_size=1, max_size=8))
@settings(max_examples=30, deadline=None)
def test_the_group_totals_equal_the_stream_bit_for_bit_whatever_the_batches(rows, cuts):
    """Records appended in any batches: the report's totals read from the store's group
    totals equal the streaming pass over the same records exactly, floats included (one
    fold, `core.group_totals`), and so does the whole report built from them."""
    records = records_with_oddities(rows, [])
    summaries = []
    for batched in (False, True):
        with SQLiteStore(":memory:") as store:
            run_appending(store, records, cuts if batched else [max(1, len(records))])
            in_database = database_summary(store, SCOPE)
            streamed = streamed_summary(store)
            assert list(in_database.groups) == list(streamed.groups)
            assert in_database.groups == streamed.groups  # every field, floats exactly
            assert in_database.first_seen == streamed.first_seen
            summed = arms_report.build_report(store, "run-1", floor=2)
            store.has_derived_tables = False  # as a store without the totals is read
            assert arms_report.build_report(store, "run-1", floor=2) == summed
            summaries.append(in_database)
    assert summaries[0].groups == summaries[1].groups


def test_both_backends_sum_in_the_database_as_the_stream_does(backend):  # noqa: F811
    arms, tasks = ["cli", "http"], [f"t{n}" for n in range(5)]
    records = random_records(11, arms, tasks, depth=7)
    records[3].payload["tier"] = [1, 2]  # grouped by its text, as the stream does
    records[4].payload["failure"] = 1.0
    records[5].payload["failure"] = 1
    records[6].payload["bench_version"] = "2"  # two versions in one group
    with backend.open() as store:
        fill(store, records, arms, tasks)
        assert_same_summary(database_summary(store, SCOPE),
                            streamed_summary(store))
        odd = [make_record("cli", "t9", trial, passed=True, tokens=[1, 1, 1, 1], turns=None,
                           duration=1.0) for trial in (1, 2, 3)]
        odd[0].payload["turns"] = "4"
        odd[1].payload["imputed_cost_usd"] = ["0.1"]
        odd[2].payload["denied_calls"] = True
        store.append(odd)
        in_database = database_summary(store, SCOPE)
        assert_same_summary(in_database, streamed_summary(store))
        assert in_database.versions == {"1", "2"}
        assert sum(totals.odd_values for totals in in_database.groups.values()) == 3
        report = arms_report.build_scope_report(store, SCOPE, floor=2)
        assert report.skipped_values == 3


def test_a_version_3_store_read_as_it_is_sums_what_the_stream_sums(backend):  # noqa: F811
    """Its group index summed by the database (no totals table): the same groups, counts,
    newest trials and versions (two in one group) as the stream, floats to rounding."""
    from tests.core.test_store_summaries import make_version_3

    arms, tasks = ["cli", "http"], [f"t{n}" for n in range(4)]
    records = random_records(13, arms, tasks, depth=6)
    records[2].payload["bench_version"] = "2"
    records[3].payload["turns"] = "four"
    with backend.open() as store:
        fill(store, records, arms, tasks)
    make_version_3(backend)
    with backend.open(create=False) as reader:
        assert reader.has_group_totals and not reader.has_derived_tables
        in_database = database_summary(reader, SCOPE)
        assert_same_summary(in_database, streamed_summary(reader))
    assert in_database.versions == {"1", "2"}
    assert sum(totals.odd_values for totals in in_database.groups.values()) == 1


def report_text_and_json(report: Any) -> tuple[str, Any]:
    """What a user is shown: the terminal text (`arms report`) and the JSON (`--json`)."""
    from io import StringIO

    from rich.console import Console

    output = StringIO()
    arms_report.render_terminal(report, Console(file=output, width=200))
    return output.getvalue(), msgspec_plain(report.to_json())


@pytest.mark.parametrize("version", ["1", "2", "3", "4", "5"])
def test_an_old_store_reports_the_same_read_only_and_after_its_upgrade(backend, version):  # noqa: F811
    """Read as it is, a version 1 or 2 store is streamed, a version 3 store summed by its
    summary rows, a version 4 store read from its totals and a version 5 store from its
    totals with its runs read from their starts; upgraded to this version
    (totals kept or computed from the bodies, no summary row written), each reads the
    group totals: the same report each time, its text and JSON as before the upgrade."""
    from tests.core.test_store_summaries import make_version

    arms, tasks = ["cli", "http", "mcp"], [f"t{n}" for n in range(4)]
    records = random_records(5, arms, tasks, depth=5)
    weights = TokenWeights.parse("output=2")
    with backend.open() as store:
        fill(store, records, arms, tasks)
        current = arms_report.build_report(store, "run-1", weights, floor=2)
    make_version(backend, version)
    with backend.open(create=False) as reader:  # read as it is: nothing made or written
        assert not reader.has_derived_tables
        assert reader.has_group_totals == (version in ("3", "4", "5"))
        before = arms_report.build_report(reader, "run-1", weights, floor=2)
        assert [run.record_count for run in reader.runs()] == [len(records)]
    with backend.open() as writer:  # opened for writing: upgraded
        assert writer.has_derived_tables and writer._stored_schema_version() == "6"
    with backend.open(create=False) as reader:
        upgraded = arms_report.build_report(reader, "run-1", weights, floor=2)
        assert [run.record_count for run in reader.runs()] == [len(records)]
    for report in (current, before, upgraded):
        assert_report_is_the_per_record_computation(report, records, weights)
        assert [trial.trial for trial in report.trials or []] == \
            [trial.trial for trial in current.trials or []]
        assert msgspec_plain(report.coverage) == msgspec_plain(current.coverage)
    text, plain = report_text_and_json(upgraded)
    assert "cli" in text and plain["headline"]
    assert (text, plain) == report_text_and_json(current)
    before_text, before_plain = report_text_and_json(before)
    assert before_text == text
    if version == "3":  # the database summed its floats: equal to rounding
        assert before_plain == approx_tree(plain)
    else:
        assert before_plain == plain


def test_the_commands_report_odd_values_from_the_table_and_from_an_old_store(tmp_path):
    """`arms report`, `arms compare` and `report --html` as a user runs them (their own
    process): odd turns and costs are skipped and said so, on a current store and on a
    version 1 store read as it is (the streaming pass); exit 0, no traceback."""
    import os
    import subprocess
    import sys

    from tests.core.test_store_summaries import make_version_1

    path = tmp_path / "odd.sqlite"
    records = random_records(3, ["cli", "http"], ["t0", "t1", "t2"], depth=3)
    records[0].payload["turns"] = "seven"
    records[1].payload["imputed_cost_usd"] = [0.1]
    records[2].payload["turns"] = True
    with SQLiteStore(path) as store:
        fill(store, records, ["cli", "http"], ["t0", "t1", "t2"])

    def run(*arguments: str) -> str:
        done = subprocess.run([sys.executable, "-m", "benchwarden", *arguments, "--store",
                               str(path)], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "COLUMNS": "200"})
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        return done.stdout

    for summed_by_the_database in (True, False):
        with SQLiteStore(path, create=False) as reader:
            assert reader.has_derived_tables == summed_by_the_database
        assert "3 turns, denied_calls or imputed_cost_usd values skipped" in \
            " ".join(run("arms", "report").split())
        assert "paired" in run("arms", "compare", "cli", "http")
        assert "paired: http − cli" in run("arms", "report", "--baseline", "cli")
        assert "paired: cli − http" in run("arms", "report", "--baseline", "http")
        run("report", "--latest", "--html", str(tmp_path / "page.html"))
        assert "values skipped" in (tmp_path / "page.html").read_text()
        if summed_by_the_database:
            make_version_1(type("SQLite", (), {"name": "sqlite", "path": path})())
    refused = subprocess.run([sys.executable, "-m", "benchwarden", "arms", "report", "--baseline",
                              "nope", "--store", str(path)], capture_output=True, text=True,
                             timeout=120)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "baseline arm 'nope' is not an arm of suite" in refused.stderr


# -------------------------------------------- the report's read: rows streamed into a Summary

def summary_read_as_before(store: Store) -> views.Summary:
    """How a report read the totals before `Store.fold_group_totals`: every group's
    `GroupTotals` at once, then `reference_views.summary_from_groups` (which now folds their rows
    the one way, `summary_from_rows`: these tests hold the streamed, ordered read to the
    whole read; the report's totals are held to the records themselves by
    `test_the_group_totals_equal_the_stream_bit_for_bit_whatever_the_batches`)."""
    return reference.summary_from_groups(store.group_totals("arms", SCOPE))


def assert_identical_summaries(found: views.Summary, expected: views.Summary) -> None:
    """The same groups in the same order, every field the same to the bit (`repr` tells
    -0.0 from 0.0), the same first-seen numbers and versions."""
    assert [(key, repr(dataclasses.astuple(totals))) for key, totals in found.groups.items()] \
        == [(key, repr(dataclasses.astuple(totals))) for key, totals in expected.groups.items()]
    assert list(found.first_seen.items()) == list(expected.first_seen.items())
    assert found.versions == expected.versions


@given(record_rows, st.lists(st.tuples(st.sampled_from(
    ["tier", "failure", "turns", "denied_calls", "tokens_reported", "imputed_cost_usd",
     "bench_version"]), odd_values), max_size=3), st.lists(st.integers(1, 9), min_size=1,
                                                            max_size=4))
@settings(max_examples=60, deadline=None)
def test_the_streamed_read_makes_the_summary_the_group_totals_made(rows, oddities, cuts):
    """Any records, any payload oddities, any batches: the report's Summary read one row
    at a time (`Store.fold_group_totals` into `reference_views.summary_from_rows`) is the one made
    from every group's `GroupTotals` (`summary_from_groups`), bit for bit."""
    records = records_with_oddities(rows, oddities)
    with SQLiteStore(":memory:") as store:
        run_appending(store, records, cuts)
        assert_identical_summaries(database_summary(store, SCOPE),
                                   summary_read_as_before(store))


def test_both_backends_and_a_version_3_store_read_the_summary_as_before(backend):  # noqa: F811
    from tests.core.test_store_summaries import make_version_3

    arms, tasks = ["cli", "http"], [f"t{n}" for n in range(5)]
    records = random_records(17, arms, tasks, depth=7)
    records[3].payload["tier"] = [1, 2]
    records[4].payload["failure"] = 1.0  # keyed as "1.0": its own group
    records[5].payload["failure"] = 1
    records[6].payload["bench_version"] = "2"
    records[7].payload["turns"] = "four"
    with backend.open() as store:
        fill(store, records, arms, tasks)
        assert_identical_summaries(database_summary(store, SCOPE),
                                   summary_read_as_before(store))
    make_version_3(backend)
    with backend.open(create=False) as reader:
        assert not reader.has_derived_tables
        assert_identical_summaries(database_summary(reader, SCOPE),
                                   summary_read_as_before(reader))


def test_edited_group_rows_are_read_or_refused_as_before(tmp_path):
    """Rows an edit left of another kind or shape go the general way (`from_row`) and
    give what they gave; a row it cannot read is refused with the same line."""
    import sqlite3

    from benchwarden.core.store import CorruptStore

    path = tmp_path / "s.sqlite"
    with SQLiteStore(path) as store:
        fill(store, random_records(5, ["cli", "http"], ["t0", "t1", "t2"], depth=4),
             ["cli", "http"], ["t0", "t1", "t2"])
    connection = sqlite3.connect(path)
    with connection:
        connection.execute("UPDATE record_group_totals SET newest = '[3.0, 1]', "
                           "bench_versions = '[1,\"2\"]', records = 7.0, duration_s = 2 "
                           "WHERE task = 't1'")
    with SQLiteStore(path, create=False) as store:
        assert_identical_summaries(database_summary(store, SCOPE),
                                   summary_read_as_before(store))
    with connection:
        connection.execute("UPDATE record_group_totals SET output = 'many' WHERE task = 't2'")
    connection.close()
    with SQLiteStore(path, create=False) as store:
        with pytest.raises(CorruptStore) as before:
            summary_read_as_before(store)
        with pytest.raises(CorruptStore) as now:
            database_summary(store, SCOPE)
    assert str(now.value) == str(before.value)
    assert "column output is not a whole number" in str(now.value)


@pytest.mark.parametrize(("key", "value", "named"), [
    ("tasks", 5, "Expected `array`, got `int` - at `$.tasks`"),
    ("arms", ["cli", None], "Expected `str`, got `null` - at `$.arms[1]`"),
    ("tiers", {"read": 1}, "Expected `array`, got `object` - at `$.tiers`"),
    ("scope", ["scale"], "Expected `str`, got `array` - at `$.scope`"),
])
@pytest.mark.parametrize("build", ["scope", "run"])
def test_a_run_config_of_another_shape_is_named_not_a_crash(key, value, named, build):
    """A report reads `scope`, `arms`, `tasks` and `tiers` of every arms run's
    configuration: one that is not what `arms run` writes (edited, or written by another
    tool) is the store's fault, said in one line naming the run, whichever run is asked."""
    with SQLiteStore(":memory:") as store:
        fill(store, random_records(3, ["cli"], ["t0", "t1"], depth=2), ["cli"], ["t0", "t1"])
        config = {"scope": SCOPE, "arms": ["cli"], "tasks": ["t0"], key: value}
        store.begin_run(stamp_run(suite="arms", bench_version="1", config=config,
                                  run_id="odd-run"))
        with pytest.raises(CorruptStore) as refused:
            if build == "scope":
                arms_report.build_scope_report(store, SCOPE if key == "scope" else None)
            else:
                arms_report.build_report(store, "run-1")
    assert "run odd-run: its configuration is not what `arms run` writes" in str(refused.value)
    assert named in str(refused.value)


def test_rows_out_of_first_seq_order_are_refused():
    """The columns keep first-seen order by taking rows in it, so rows in any other
    order are refused rather than summed into another order."""
    with SQLiteStore(":memory:") as store:
        fill(store, random_records(3, ["cli"], ["t0", "t1"], depth=3), ["cli"], ["t0", "t1"])
        rows = store.fold_group_rows("arms", SCOPE, list)
    assert len(rows) > 1
    assert len(views.columns_from_chunks(decoded_chunks(rows))) == len(rows)  # in order: read
    with pytest.raises(ValueError, match="ascending first_seq order"):
        views.columns_from_chunks(decoded_chunks(list(reversed(rows))))


def test_the_unpacked_columns_are_the_stored_columns():
    from benchwarden.core.group_totals import GROUP_TOTALS_COLUMNS

    assert views.UNPACKED_COLUMNS == GROUP_TOTALS_COLUMNS


def test_one_trial_shown_is_bounded_whatever_text_its_agent_wrote():
    """Every text a trial carries, including what the agent reported about itself (its
    model, how it stopped) and fields a driver of another kind adds to a tool call, is
    clipped: one drawn trial costs at most a few kilobytes of the page however large
    its record is."""
    huge = "x" * 1_000_000
    entry = {"kind": huge, "command": huge, "name": huge, "server": huge, "tool": huge,
             "reason": huge, "arguments": {"text": huge}, "output": huge, "denied": huge}
    payload = {"tier": huge, "failure": huge, "reasons": [huge] * 50, "stopped": huge,
               "final_report": huge, "transcript": [entry] * 50, "model": huge,
               "driver": huge, "turns": 3}
    record = Record(suite="arms", scope=SCOPE, arm="cli", task="t1", trial=1, run_id="run-1",
                    outcome="fail", started_at=1.0, ended_at=2.0,
                    tokens=TokenComponents(1, 2, 3, 4, None), payload=payload)
    (trial,) = arms_report.convert([arms_report.trial_entry(record, TokenWeights.parse(""))],
                                   list[arms_report.Trial], "trials")
    encoded = msgspec_plain(trial)
    texts = 1 + arms_report.REASONS_SHOWN + 6 \
        + arms_report.TRANSCRIPT_SHOWN * len(arms_report._ENTRY_TEXT + ("arguments",))
    assert len(json.dumps(encoded)) <= texts * (arms_report.TEXT_SHOWN + 100)
    assert encoded["model"].startswith("x" * arms_report.TEXT_SHOWN)


@pytest.mark.parametrize("threshold", [None, 3])
def test_a_report_names_the_interval_method_of_each_arms_per_task_mean(monkeypatch, threshold):
    """Up to `stats.ANALYTIC_INTERVAL_ABOVE` tasks an arm's mean of per-task means has the
    BCa bootstrap's interval, above it the ABC interval (here: the threshold lowered under
    the suite's 6 tasks): the JSON names the method of each, the terminal's column says
    it, and the interval is that method's of the per-task means."""
    from benchwarden.core import stats

    if threshold is not None:
        monkeypatch.setattr(stats, "ANALYTIC_INTERVAL_ABOVE", threshold)
    # per-task costs of a long right tail, so the interval has a width and leans
    records = [make_record(arm, f"t{task}", trial, passed=trial % 3 != 0,
                           tokens=[base * (1 + task ** 3) + trial, 0, 0, 100], turns=3,
                           duration=1.0)
               for arm, base in (("cli", 1000), ("http", 400)) for task in range(6)
               for trial in range(1, 4)]
    with SQLiteStore(":memory:") as store:
        fill(store, records, ["cli", "http"], [f"t{n}" for n in range(6)])
        report = arms_report.build_report(store, "run-1", floor=2)
    text, plain = report_text_and_json(report)
    method, shown = ("bootstrap BCa", "BCa") if threshold is None else ("ABC", "ABC")
    weights = TokenWeights()
    for row in plain["headline"]:
        cells: dict[str, list[Record]] = defaultdict(list)
        for record in records:
            if record.arm == row["arm"]:
                cells[record.task].append(record)
        means = [math.fsum(r.tokens.cost_equivalent(weights) for r in cell) / len(cell)
                 for cell in cells.values()]
        expected = (stats.abc_mean_ci if threshold is not None else stats.bootstrap_mean_ci)(means)
        assert row["cost_equivalent_per_task"]["method"] == method
        assert row["cost_equivalent_per_task"] == approx_tree(expected.to_json_dict())
        assert row["cost_equivalent_per_task"]["high"] > row["cost_equivalent_per_task"]["low"]
    assert f"per task [{shown} 95 %]" in text


# ---------------------------------------------------------------------------- many arms

@given(st.integers(min_value=0, max_value=60))
def test_the_pairs_compared_are_every_pair_of_a_few_arms_else_each_with_the_first(count):
    arms = [f"arm-{number}" for number in range(count)]
    pairs = views.pairs_compared(arms)
    assert views.pairs_in_all(arms) == len(views.all_pairs(arms))
    if count <= views.ALL_PAIRS_UP_TO_ARMS:
        assert pairs == views.all_pairs(arms)
    else:
        # linear in the arms, not quadratic: each other arm once, against the first
        assert pairs == [(arms[0], arm) for arm in arms[1:]]
    assert all(a != b for a, b in pairs) and len(set(pairs)) == len(pairs)


@given(count=st.integers(min_value=1, max_value=40), chosen=st.integers(min_value=0))
def test_a_baseline_asked_for_is_compared_with_every_arm_first(count, chosen):
    arms = [f"arm-{number}" for number in range(count)]
    baseline = arms[chosen % count]
    pairs = views.pairs_compared(arms, baseline)
    others = [arm for arm in arms if arm != baseline]
    # its pairs first, each the arm's difference against it
    assert pairs[:len(others)] == [(baseline, arm) for arm in others]
    if count > views.ALL_PAIRS_UP_TO_ARMS:
        assert pairs == [(baseline, arm) for arm in others]
    else:  # every pair once, as without a baseline
        assert sorted(map(frozenset, pairs), key=sorted) == \
            sorted(map(frozenset, views.all_pairs(arms)), key=sorted)
        assert len(pairs) == views.pairs_in_all(arms)
    assert all(a != b for a, b in pairs) and len(set(pairs)) == len(pairs)
    if baseline == arms[0] and count > views.ALL_PAIRS_UP_TO_ARMS:
        assert pairs == views.pairs_compared(arms)
    with pytest.raises(ValueError, match="'nope' is not one of the arms"):
        views.pairs_compared(arms, "nope")


def test_a_report_compares_with_the_baseline_asked_for_and_says_so(tmp_path):
    arms, tasks = [f"arm-{n:02d}" for n in range(12)], [f"t{n}" for n in range(5)]
    with SQLiteStore(tmp_path / "many.sqlite") as store:
        fill(store, random_records(4, arms, tasks, depth=3), arms, tasks)
        first = arms_report.build_scope_report(store)
        report = arms_report.build_scope_report(store, baseline="arm-07")
        with pytest.raises(StoreUsageError) as refused:
            arms_report.build_scope_report(store, baseline="arm-99")
    assert first.baseline is None and "baseline" not in first.to_json()
    assert [(c.a, c.b) for c in report.comparisons] == [
        ("arm-07", arm) for arm in arms if arm != "arm-07"]
    assert report.pairs_left_out == first.pairs_left_out == 66 - 11
    # the same numbers for the pair both reports compare, arm-07 against arm-00
    [both] = [c for c in first.comparisons if c.b == "arm-07"]
    [mirrored] = [c for c in report.comparisons if c.b == "arm-00"]
    assert mirrored.success_difference.mean_diff == \
        pytest.approx(-both.success_difference.mean_diff)
    text, page = _terminal(report), render_html(report)
    note = "12 arms: each compared with arm-07, the baseline asked for; 55 other pairs"
    assert note in text and note in page
    assert "paired: each arm − arm-07 over the tasks both covered" in text
    plain = report.to_json()
    assert plain["baseline"] == "arm-07"
    assert arms_report.ArmsReport.from_json(json.loads(json.dumps(plain))) == report
    message = str(refused.value)
    assert "\n" not in message and "'arm-99' is not an arm of suite" in message
    assert "arm-00" in message


@pytest.mark.parametrize("count", [1, 3, 5, 6, 40])
def test_the_verdict_names_a_few_bench_versions_and_counts_the_rest(tmp_path, count):
    """A store written by another tool may give each record its own bench version: a
    million of them made a verdict line of 12 MB."""
    arms, tasks = ["cli", "http"], [f"t{n}" for n in range(4)]
    records = random_records(2, arms, tasks, depth=2)
    for number, record in enumerate(records):
        record.payload["bench_version"] = f"v{number % count:03d}"
    with SQLiteStore(tmp_path / "versions.sqlite") as store:
        fill(store, records, arms, tasks)
        reason = arms_report.build_report(store, "run-1").verdict.reason
    versions = sorted({f"v{number % count:03d}" for number in range(len(records))})
    if len(versions) == 1:
        assert "mixed bench versions" not in reason
    elif len(versions) <= arms_report.VERSIONS_NAMED:
        assert f"mixed bench versions {versions}: compare with care" in reason
    else:
        assert (f"mixed bench versions {versions[:arms_report.VERSIONS_NAMED]} and "
                f"{len(versions) - arms_report.VERSIONS_NAMED:,} more: compare with care") in reason
        assert versions[arms_report.VERSIONS_NAMED] not in reason


def test_compare_pairs_is_compare_of_each_pair():
    arms, tasks = [f"arm{n}" for n in range(5)], [f"t{n}" for n in range(7)]
    records = random_records(3, arms, tasks, depth=4)
    pairs = [*views.all_pairs(arms), ("arm3", "arm0"), ("arm1", "arm1")]
    summary = views.summarize(records)
    assert views.compare_pairs(summary, pairs, floor=2) == \
        [views.compare(summary, a, b, floor=2) for a, b in pairs]


def _terminal(report: arms_report.ArmsReport) -> str:
    import io

    from rich.console import Console

    output = io.StringIO()
    arms_report.render_terminal(report, Console(file=output, width=400))
    return output.getvalue()


@pytest.mark.parametrize("count", [3, 5, views.ALL_PAIRS_UP_TO_ARMS,
                                   views.ALL_PAIRS_UP_TO_ARMS + 1, 30])
def test_a_report_of_many_arms_compares_each_with_the_first_and_says_so(tmp_path, count):
    arms, tasks = [f"arm-{n:02d}" for n in range(count)], [f"t{n}" for n in range(6)]
    with SQLiteStore(tmp_path / "many.sqlite") as store:
        fill(store, random_records(count, arms, tasks, depth=3), arms, tasks)
        report = arms_report.build_report(store, "run-1")
    pairs = [(c.a, c.b) for c in report.comparisons]
    assert pairs == views.pairs_compared(arms)
    assert report.pairs_left_out == count * (count - 1) // 2 - len(pairs)
    summary = views.summarize(random_records(count, arms, tasks, depth=3))
    assert [arms_report.comparison_of(plain) for plain in views.compare_pairs(summary, pairs)] \
        == report.comparisons
    text, page = _terminal(report), render_html(report)
    tests = 2 * len(pairs)
    chance = f"{tests:,} differences tested ({len(pairs):,} pairs × 2 measures)"
    left_out = f"{count} arms: each compared with arm-00, the first listed; " \
               f"{report.pairs_left_out:,} other pairs are not compared here"
    # the chance note once the tests are many enough for one to look significant by
    # chance (10 pairs of 2 measures at p < 0.05), the left-out note past the threshold
    assert (chance in text, chance in page) == (tests * 0.05 >= 1,) * 2
    assert (left_out in text, left_out in page) == (count > views.ALL_PAIRS_UP_TO_ARMS,) * 2
    # many arms: one table of every arm against the first, a row each, then each sentence
    many = count > views.ALL_PAIRS_UP_TO_ARMS
    assert ("paired: each arm − arm-00 over the tasks both covered" in text) == many
    assert text.count("paired: arm-") == (0 if many else len(pairs))
    for comparison in report.comparisons:
        assert (f"  {comparison.b} − {comparison.a}: {comparison.conclusion}" in text) == many
        assert comparison.conclusion in text
    plain = report.to_json()
    assert ("pairs_left_out" in plain) == (count > views.ALL_PAIRS_UP_TO_ARMS)
    assert arms_report.ArmsReport.from_json(json.loads(json.dumps(plain))) == report


# ---------------------------------------------------------------------------- big tallies

def _tally_cells(count: int, attention: set[int]) -> list[arms_report.TallyCell]:
    kinds = ({"invalid": 1}, {"harness_errors": 2}, {"covered": False})
    return [arms_report.TallyCell(**{"arm": f"arm{n % 3}", "task": f"t{n // 3:05d}",
                                     "before": 0, "after": 3, "passed": 3, "failed": 0,
                                     "covered": True,
                                     **(kinds[n % 3] if n in attention else {})})
            for n in range(count)]


@given(st.integers(min_value=0, max_value=300), st.sets(st.integers(0, 299)),
       st.integers(min_value=1, max_value=150))
@settings(max_examples=60, deadline=None)
def test_the_tally_rows_shown_are_the_cells_needing_attention_first(count, attention, limit):
    tally = arms_report.Tally(cells=_tally_cells(count, attention))
    shown = arms_report.tally_rows_shown(tally, limit)
    needing = [cell for cell in tally.cells
               if cell.invalid or cell.harness_errors or not cell.covered]
    others = [cell for cell in tally.cells if cell not in needing]
    assert shown == (tally.cells if count <= limit else (needing + others)[:limit])


def test_a_terminal_shows_a_bounded_tally_and_says_where_every_cell_is():
    import io

    from rich.console import Console

    attention = {20_000 - 3 * n for n in range(1, 11)}  # the last cells of the run
    tally = arms_report.Tally(recorded=60_000, floor=3, cells=_tally_cells(20_000, attention))
    output = io.StringIO()
    arms_report.render_tally(tally, Console(file=output, width=200), where="benchwarden show R")
    text = output.getvalue()
    rows = [line for line in text.splitlines() if line.startswith("│ arm")]
    assert len(rows) == arms_report.TERMINAL_TALLY_ROWS
    # every cell needing attention is among them, whatever its place in the run
    for n in attention:
        assert f"t{n // 3:05d}" in text
    assert "showing 100 of 20,000 cells, those needing attention first; every cell: " \
           "benchwarden show R" in text
    # the count below the floor is of every cell, shown or not
    assert f"{sum(1 for n in attention if n % 3 == 2)} cells are below the floor" in text
    few = io.StringIO()
    arms_report.render_tally(arms_report.Tally(cells=_tally_cells(40, set())),
                             Console(file=few, width=200), where="benchwarden show R")
    assert len([line for line in few.getvalue().splitlines() if line.startswith("│ arm")]) == 40
    assert "showing" not in few.getvalue()


# ---------------------------------------------------------------------------- many tiers

def _own_tiers(records: Sequence[Record], tiers: int) -> list[Record]:
    """The records with each task in a tier of its own, `tiers` of them (a suite that
    uses its tiers as task names), the last tiers ahead of the first in the records."""
    return [dataclasses.replace(record, payload={**record.payload,
                                                 "tier": f"tier-{int(record.task[1:]) % tiers}"})
            for record in sorted(records, key=lambda r: -int(r.task[1:]))]


def _tiers_report(tmp_path: Any, arms: list[str], tasks: list[str], seed: int) -> tuple[
        arms_report.ArmsReport, list[Record], list[str]]:
    """The report of a run whose every task is its own tier, its records and its tiers."""
    records = _own_tiers(random_records(seed, arms, tasks, depth=3), len(tasks))
    tier_names = [f"tier-{n}" for n in range(len(tasks))]
    with SQLiteStore(tmp_path / "tiers.sqlite") as store:
        store.begin_run(stamp_run(suite="arms", bench_version="1", run_id="run-1", config={
            "scope": SCOPE, "arms": arms, "tasks": tasks, "tiers": tier_names}))
        store.append(records)
        store.finish_run(RunEnd("run-1", 1_790_100_000.0, "completed", {}))
        return arms_report.build_report(store, "run-1"), records, tier_names


@pytest.mark.parametrize("tiers", [1, 7, 45])
def test_per_tier_found_in_one_pass_is_each_tiers_own_total(tiers):
    arms, tasks = ["cli", "http", "mcp"], [f"t{n}" for n in range(60)]
    records = _own_tiers(random_records(tiers, arms, tasks, depth=3), tiers)
    columns = views.columns_of(views.summarize(records))
    listed = [f"tier-{n}" for n in range(tiers)] + ["tier-none"]  # a tier with no record
    weights = TokenWeights.parse("output=4")
    rows = views.per_tier(columns, [*arms, "absent"], listed, weights)
    # the views' own per-tier questions, one at a time, as before the partition
    expected = []
    for arm in [*arms, "absent"]:
        for tier in listed:
            whole = views.Totals(**columns.total(arm=arm, tier=tier))
            per_task = columns.by_task(arm=arm, tier=tier)
            expected.append({"arm": arm, "tier": tier, "samples": whole.samples,
                             "success": views._success(whole),
                             "cost_equivalent": views._clustered(
                                 per_task["priced"], per_task.cost_equivalent(weights))})
    assert rows == expected


def test_a_report_of_many_tiers_shows_the_first_and_says_where_the_rest_are(tmp_path):
    arms, tasks = ["cli", "http"], [f"t{n}" for n in range(arms_report.TIERS_SHOWN + 12)]
    report, records, tier_names = _tiers_report(tmp_path, arms, tasks, seed=5)
    assert len(report.per_tier) == len(arms) * len(tasks)  # the JSON holds every tier
    text = _terminal(report)
    shown = tier_names[:arms_report.TIERS_SHOWN]
    assert f"showing the first {len(shown)} of {len(tasks)} tiers" in text
    assert all(f" {tier} " in text for tier in shown)
    assert not any(f" {tier} " in text for tier in tier_names[len(shown):])
    page = render_html(report)
    assert f"Showing the first {len(shown)} of {len(tasks)} tiers" in page
    copy = arms_html.page_copy(report)
    assert copy.page_cut is not None and copy.page_cut.tiers == len(tasks)
    assert copy.tiers == shown and {row.tier for row in copy.per_tier} == set(shown)
    assert arms_html.page_copy(copy) == copy  # cutting a copy again changes nothing
    # a report of as many tiers as are shown is drawn and embedded whole
    few = msgspec_replace(report, tiers=shown, per_tier=[
        row for row in report.per_tier if row.tier in set(shown)])
    assert "showing the first" not in _terminal(few)
    assert arms_html.page_copy(few).page_cut is None or \
        arms_html.page_copy(few).page_cut.tiers is None


@given(tiers=st.integers(0, 400), arms=st.integers(0, 300), rows=st.integers(1, 5_000))
def test_the_tiers_reported_are_the_first_within_the_rows(tiers, arms, rows):
    import unittest.mock

    names, arm_names = [f"tier-{n}" for n in range(tiers)], [f"a{n}" for n in range(arms)]
    with unittest.mock.patch.object(arms_report, "PER_TIER_ROWS", rows):
        reported = arms_report.tiers_reported(names, arm_names)
    assert reported == names[:len(reported)]  # the first, in the report's order
    assert len(reported) == min(tiers, max(arms_report.TIERS_SHOWN, rows // max(1, arms)))


def test_a_report_of_thousands_of_tiers_computes_the_rows_of_the_first(tmp_path, monkeypatch):
    """A store written by another tool may give each record a tier of its own: each tier
    is a row per arm, about 100 µs of estimates each (300,000 rows at 100,000 records)."""
    monkeypatch.setattr(arms_report, "PER_TIER_ROWS", 100)
    arms, tasks = ["cli", "http"], [f"t{n}" for n in range(80)]
    report, records, tier_names = _tiers_report(tmp_path, arms, tasks, seed=6)
    assert [row.tier for row in report.per_tier] == tier_names[:50] * len(arms)
    assert report.tiers_left_out == 30 and report.tiers == tier_names
    # the rows it computes are those of the whole computation
    columns = views.columns_of(views.summarize(records))
    whole = views.per_tier(columns, arms, tier_names)
    expected = [row for row in whole if row["tier"] in set(tier_names[:50])]
    assert msgspec.convert(json.loads(json.dumps(expected)), list[arms_report.TierRow]) == \
        report.per_tier
    text, page = _terminal(report), render_html(report)
    assert "showing the first 30 of 80 tiers; the rows of the first 50:" in text
    assert "Showing the first 30 of 80 tiers. The rows of the first 50 are in the report" in page
    plain = report.to_json()
    assert plain["tiers_left_out"] == 30
    assert arms_report.ArmsReport.from_json(json.loads(json.dumps(plain))) == report
    monkeypatch.setattr(arms_report, "PER_TIER_ROWS", 160)
    with SQLiteStore(tmp_path / "tiers.sqlite", create=False) as store:
        whole_report = arms_report.build_report(store, "run-1")
    assert "tiers_left_out" not in whole_report.to_json()
    assert len(whole_report.per_tier) == 160


def test_a_report_file_that_says_pairs_were_left_out_renders_whatever_it_lists(tmp_path):
    """A report read back from a file (edited, or cut) may say pairs were left out and
    list no arms or no comparisons: it renders, naming the arm its comparisons use."""
    arms, tasks = [f"arm-{n:02d}" for n in range(10)], [f"t{n}" for n in range(4)]
    with SQLiteStore(tmp_path / "many.sqlite") as store:
        fill(store, random_records(1, arms, tasks, depth=3), arms, tasks)
        report = arms_report.build_report(store, "run-1")
    for changes in ({"arms": []}, {"comparisons": []}, {"arms": [], "comparisons": []}):
        edited = arms_report.ArmsReport.from_json({**report.to_json(), **changes})
        text, page = _terminal(edited), render_html(edited)
        named = "arm-00, the first listed" if edited.comparisons else "the first arm listed"
        assert f"each compared with {named}; 36 other pairs" in text
        # the page's note is in its comparisons' section, which a report without
        # comparisons has none of
        assert (f"each compared with {named}; 36 other pairs" in page) == \
            bool(edited.comparisons)
