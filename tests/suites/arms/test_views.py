"""Views: known values for Wilson and paired statistics, re-weighting, coverage,
failure tags, and dashes (None) for empty groups."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchwarden.core.records import Record, TokenComponents, TokenWeights
from benchwarden.suites.arms import views

T_975_2 = 4.302652729911275  # Student t, 97.5th percentile, 2 degrees of freedom


def rec(arm: str, task: str, trial: int, outcome: str = "pass", failure: str | None = None,
        tier: str = "read", tokens: TokenComponents | None = None, turns: int = 3,
        tokens_reported: bool = True, duration: float = 2.0) -> Record:
    return Record(suite="arms", scope="demo", arm=arm, task=task, trial=trial, run_id="r",
                  outcome=outcome, started_at=100.0, ended_at=100.0 + duration,
                  tokens=tokens or TokenComponents(fresh_input=100, output=10),
                  payload={"tier": tier, "failure": failure, "turns": turns,
                           "tokens_reported": tokens_reported, "denied_calls": 0})


def test_success_rate_carries_the_wilson_interval():
    records = [rec("a", f"t{i}", 1) for i in range(8)] + \
              [rec("a", f"t{i}", 1, "fail", "incorrect") for i in range(8, 10)]
    row = views.headline(records, ["a"], [f"t{i}" for i in range(10)])[0]
    assert row["success"]["mean"] == pytest.approx(0.8)
    assert row["success"]["low"] == pytest.approx(0.4902, abs=1e-4)
    assert row["success"]["high"] == pytest.approx(0.9433, abs=1e-4)
    assert row["samples"] == 10


def test_cost_equivalent_is_reweighted_at_render_time():
    tokens = TokenComponents(fresh_input=1000, cache_creation=200, cache_read=5000, output=300)
    records = [rec("a", "t", 1, tokens=tokens)]
    default = views.headline(records, ["a"], ["t"])[0]
    cheap_output = views.headline(records, ["a"], ["t"], TokenWeights.parse("output=1"))[0]
    assert default["cost_equivalent"]["mean"] == 1000 + 250 + 500 + 1500
    assert cheap_output["cost_equivalent"]["mean"] == 1000 + 250 + 500 + 300
    assert default["raw_tokens"]["mean"] == cheap_output["raw_tokens"]["mean"] == 6500
    component = views.per_component(records, ["a"], TokenWeights.parse("cache_read=0.5"))[0]
    assert component["cache_read"]["mean"] == 5000
    assert component["cache_read_weighted"] == 2500


def test_coverage_classes_cells_by_sample_count():
    records = [rec("a", "t1", n) for n in (1, 2, 3)] + [rec("a", "t2", 1)]
    table = views.coverage(records, ["a", "b"], ["t1", "t2", "t3"])
    assert table["a"]["covered"] == 1 and table["a"]["partial"] == 1 and table["a"]["missing"] == 1
    assert table["b"] == {"covered": 0, "partial": 0, "missing": 3, "cells": 3,
                          "samples": {"t1": 0, "t2": 0, "t3": 0}}
    assert [views.coverage_class(n) for n in (0, 1, 2, 3, 7)] == \
        ["missing", "partial", "partial", "covered", "covered"]


@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["t1", "t2", "t3", "t4"])),
                max_size=30),
       st.lists(st.sampled_from(["t1", "t2", "t3", "t4", "t5"]), max_size=8),
       st.integers(1, 4))
def test_coverage_counts_each_task_s_class_once(cells, tasks, floor):
    """Covered, partial and missing count each listed task's class once (a task listed
    twice is one cell, as the samples' mapping holds it once); the headline's counts are
    the coverage's."""
    records = [rec(arm, task, trial) for trial, (arm, task) in enumerate(cells, start=1)]
    table = views.coverage(records, ["a", "b"], tasks, floor)
    for arm in ("a", "b"):
        samples = {task: sum(1 for cell in cells if cell == (arm, task)) for task in tasks}
        classes = [views.coverage_class(count, floor) for count in samples.values()]
        assert table[arm] == {"covered": classes.count("covered"),
                              "partial": classes.count("partial"),
                              "missing": classes.count("missing"), "cells": len(tasks),
                              "samples": samples}
    if records:
        shown = {row["arm"]: row["coverage"]
                 for row in views.headline(records, ["a", "b"], tasks, floor=floor)}
        assert shown == {arm: {name: value for name, value in table[arm].items()
                               if name != "samples"} for arm in ("a", "b")}


def test_empty_groups_are_none_never_zero():
    records = [rec("a", "t1", 1, tier="read")]
    tiers = views.per_tier(records, ["a", "b"], ["read", "multi-step"])
    empty = [row for row in tiers if row["samples"] == 0]
    assert len(empty) == 3
    assert all(row["success"] is None and row["cost_equivalent"] is None for row in empty)
    tags = {row["arm"]: row for row in views.failure_tags(records, ["a", "b"])}
    assert tags["b"]["pass"] is None and tags["b"]["hung"] is None
    assert tags["a"]["pass"] == 1 and tags["a"]["hung"] == 0
    head = {row["arm"]: row for row in views.headline(records, ["a", "b"], ["t1"])}
    assert head["b"]["success"] is None and head["b"]["turns"] is None
    assert head["a"]["imputed_cost_usd"] is None  # nothing known is not $0


def test_failure_tags_count_each_failure_once():
    records = [rec("a", "t", 1), rec("a", "t", 2, "fail", "incorrect"),
               rec("a", "t", 3, "fail", "confused"), rec("a", "t", 4, "fail", "hung"),
               rec("a", "t", 5, "fail", "hung")]
    row = views.failure_tags(records, ["a"])[0]
    assert (row["pass"], row["incorrect"], row["confused"], row["hung"]) == (1, 1, 1, 2)
    assert row["pass"] + row["incorrect"] + row["confused"] + row["hung"] == row["samples"]


def test_unreported_tokens_are_left_out_of_token_means_not_counted_as_zero():
    records = [rec("a", "t", 1, tokens=TokenComponents(fresh_input=1000)),
               rec("a", "t", 2, "fail", "hung", tokens=TokenComponents(), tokens_reported=False)]
    row = views.headline(records, ["a"], ["t"])[0]
    assert row["cost_equivalent"]["mean"] == 1000 and row["cost_equivalent"]["n"] == 1
    assert row["success"]["n"] == 2


def test_token_standard_error_is_clustered_by_task():
    records = [rec("a", "t1", n, tokens=TokenComponents(fresh_input=100)) for n in (1, 2)] + \
              [rec("a", "t2", n, tokens=TokenComponents(fresh_input=300)) for n in (1, 2)]
    estimate = views.headline(records, ["a"], ["t1", "t2"])[0]["cost_equivalent"]
    # residuals ±100 summed per task: ±200; CR1 with G=2, N=4: sqrt(2 * 80000) / 4
    assert estimate["mean"] == 200
    assert estimate["se"] == pytest.approx(math.sqrt(2 * (200**2 + 200**2)) / 4)
    assert estimate["method"] == "cluster-robust t"
    per_task = views.headline(records, ["a"], ["t1", "t2"])[0]["cost_equivalent_per_task"]
    assert per_task["mean"] == 200 and per_task["n"] == 2
    assert per_task["low"] <= 200 <= per_task["high"]


def paired_records() -> list[Record]:
    rates = {"a": {"t1": 3, "t2": 1, "t3": 2}, "b": {"t1": 3, "t2": 2, "t3": 3}}
    cost = {"a": {"t1": 100, "t2": 200, "t3": 300}, "b": {"t1": 150, "t2": 200, "t3": 400}}
    records = []
    for arm, passes in rates.items():
        for task, count in passes.items():
            for trial in (1, 2, 3):
                outcome = "pass" if trial <= count else "fail"
                failure = None if outcome == "pass" else "incorrect"
                records.append(rec(arm, task, trial, outcome, failure,
                                   tokens=TokenComponents(fresh_input=cost[arm][task])))
    records.append(rec("a", "t4", 1))  # partial cell: never paired
    return records


def test_paired_comparison_against_known_values():
    result = views.compare(paired_records(), "a", "b")
    assert result["tasks"] == ["t1", "t2", "t3"]
    success = result["success_difference"]
    # per-task differences b - a: 0, 1/3, 1/3
    sd = math.sqrt(((0 - 2 / 9) ** 2 + 2 * (1 / 3 - 2 / 9) ** 2) / 2)
    se = sd / math.sqrt(3)
    assert success["n"] == 3
    assert success["mean_diff"] == pytest.approx(2 / 9)
    assert success["se"] == pytest.approx(se)
    assert success["low"] == pytest.approx(2 / 9 - T_975_2 * se)
    assert success["high"] == pytest.approx(2 / 9 + T_975_2 * se)
    assert success["mde"] is not None and success["mde"] > abs(success["mean_diff"])
    assert success["samples_per_arm"] == 9 and success["mde_binomial"] is not None
    tokens = result["cost_equivalent_difference"]
    assert tokens["mean_diff"] == pytest.approx((50 + 0 + 100) / 3)
    assert result["cost_a"] == pytest.approx(200) and result["cost_b"] == pytest.approx(250)


def test_paired_comparison_uses_only_tasks_both_covered():
    records = paired_records()
    result = views.compare(records, "a", "b", floor=4)
    assert result["tasks"] == [] and result["success_difference"]["mean_diff"] is None
    assert result["success_difference"]["mde_binomial"] is None
    relaxed = views.compare(records, "a", "b", floor=1)
    assert relaxed["only_a"] == ["t4"]


@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["t1", "t2", "t3"]),
                          st.booleans(), st.integers(0, 10_000)), max_size=40))
def test_headline_and_tags_agree_for_any_records(rows):
    records = [rec(arm, task, index + 1, "pass" if ok else "fail", None if ok else "incorrect",
                   tokens=TokenComponents(output=tokens))
               for index, (arm, task, ok, tokens) in enumerate(rows)]
    head = {row["arm"]: row for row in views.headline(records, ["a", "b"], ["t1", "t2", "t3"])}
    tags = {row["arm"]: row for row in views.failure_tags(records, ["a", "b"])}
    for arm in ("a", "b"):
        mine = [r for r in records if r.arm == arm]
        assert head[arm]["samples"] == len(mine)
        if not mine:
            assert head[arm]["success"] is None and tags[arm]["pass"] is None
            continue
        assert head[arm]["success"]["mean"] == pytest.approx(tags[arm]["pass"] / len(mine))
        assert head[arm]["cost_equivalent"]["mean"] == pytest.approx(
            sum(5 * r.tokens.output for r in mine) / len(mine))
        low, high = head[arm]["success"]["low"], head[arm]["success"]["high"]
        assert 0 <= low <= head[arm]["success"]["mean"] <= high <= 1


view_records = st.lists(st.tuples(
    st.sampled_from(["a", "b", "c"]), st.sampled_from([f"t{n}" for n in range(6)]),
    st.sampled_from(["pass", "fail"]), st.sampled_from([None, "incorrect", "hung"]),
    st.sampled_from(["read", "write", None]),
    st.floats(0, 1e9, allow_nan=False, allow_infinity=False)), min_size=0, max_size=60)


def _records(rows) -> list[Record]:
    return [Record(suite="arms", scope="s", arm=arm, task=task, trial=index, run_id="r",
                   outcome=outcome, started_at=0.0, ended_at=duration,
                   tokens=TokenComponents(fresh_input=index, output=3),
                   payload={"tier": tier, "failure": failure, "turns": duration / 7})
            for index, (arm, task, outcome, failure, tier, duration) in enumerate(rows, 1)]


@given(st.lists(st.integers(-10**6, 10**6), min_size=15, max_size=15),
       st.lists(st.integers(-10**6, 10**6), min_size=15, max_size=15))
def test_merge_adds_every_total_field_once(first, second):
    """`Totals.merge` is spelled out field by field: it must add each field of
    `_TOTAL_FIELDS`, and only once."""
    names = views._TOTAL_FIELDS
    assert len(names) == 15
    a = views.Totals(**dict(zip(names, first, strict=True)))
    b = views.Totals(**dict(zip(names, second, strict=True)))
    a.merge(b)
    assert [getattr(a, name) for name in names] == [x + y for x, y in
                                                    zip(first, second, strict=True)]


@given(view_records, st.integers(0, 70))
def test_shown_trials_under_a_limit_are_the_first_of_the_whole_choice(rows, limit):
    """The choice stops once the limit is reached (a suite of thousands of cells shows a
    few hundred trials): what it returns is the start of the choice made in full."""
    summary = views.summarize(_records(rows))
    whole = views.shown_trials(summary, limit=10**9)
    assert views.shown_trials(summary, limit=limit) == whole[:limit]


def test_a_union_on_a_field_groups_do_not_have_is_refused():
    columns = views.columns_of(_records([("a", "t1", "pass", None, "read", 2.0)]))
    with pytest.raises(TypeError, match="no field 'colour'"):
        columns.total(colour="red")
    with pytest.raises(TypeError, match="no field 'colour'"):
        columns.by_task(arm="a", colour="red")


def test_cell_counts_are_handed_out_as_a_copy():
    summary = views.summarize([rec("a", "t1", 1), rec("b", "t1", 2)])
    views.cell_counts(summary).clear()
    assert views.cell_counts(summary) == {("a", "t1"): 1, ("b", "t1"): 1}
