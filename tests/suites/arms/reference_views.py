"""The arms views as they were computed from a `views.Summary` before `views.Columns`:
the reference the columnar views are held to, bit for bit (`test_columns.py`).

Copied from `benchwarden/suites/arms/views.py` as it stood before the columnar views
(every union a `Totals`, every per-task table a dict): the functions the columns
changed. What they did not change (`paired_comparison`, the comparison of two arms'
per-task means, and the small helpers) is imported from the views, not copied. Not
used by benchwarden itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from benchwarden.core.records import DEFAULT_WEIGHTS, TokenWeights
from benchwarden.core.stats import (
    bootstrap_mean_ci,
    clustered_mean_se_of_totals,
)
from benchwarden.suites.arms.tasks import FAILURE_TAGS, FLOOR, PASS
from benchwarden.suites.arms.views import (
    _RAW,
    COMPONENTS,
    TRIALS_PER_CELL,
    Summary,
    Totals,
    _success,
    _summary,
    coverage_class,
    paired_comparison,
)

Source = Any


# ---------------------------------------------------------------------------- estimates

def _clustered(per_task: Mapping[str, tuple[int, float]]) -> dict[str, Any] | None:
    if not any(count for count, _ in per_task.values()):
        return None
    return clustered_mean_se_of_totals(per_task).to_json_dict()


def _cost_by_task(per_task: Mapping[str, Totals],
                  weights: TokenWeights) -> dict[str, tuple[int, float]]:
    return {task: (t.priced, t.cost_equivalent(weights)) for task, t in per_task.items()}


def _per_task_bootstrap(per_task: Mapping[str, Totals],
                        weights: TokenWeights) -> dict[str, Any] | None:
    """Mean over tasks of each task's mean cost, with a BCa bootstrap interval over
    tasks: every task weighs the same however deep its cell, and a skewed task mix
    is not forced into a t interval."""
    means = [t.cost_equivalent(weights) / t.priced for t in per_task.values() if t.priced]
    if not means:
        return None
    return bootstrap_mean_ci(means).to_json_dict()


# ---------------------------------------------------------------------------- views

def cell_counts(source: Source) -> dict[tuple[str, str], int]:
    return _summary(source).cell_counts()


def coverage(source: Source, arms: Sequence[str], tasks: Sequence[str],
             floor: int = FLOOR) -> dict[str, dict[str, Any]]:
    """Per arm: covered / partial / missing cell counts and samples per task."""
    counts = cell_counts(source)
    table: dict[str, dict[str, Any]] = {}
    for arm in arms:
        cells = {task: counts.get((arm, task), 0) for task in tasks}
        classes = [coverage_class(n, floor) for n in cells.values()]
        table[arm] = {"covered": classes.count("covered"), "partial": classes.count("partial"),
                      "missing": classes.count("missing"), "cells": len(tasks),
                      "samples": cells}
    return table


def headline(source: Source, arms: Sequence[str], tasks: Sequence[str],
             weights: TokenWeights = DEFAULT_WEIGHTS, floor: int = FLOOR) -> list[dict[str, Any]]:
    summary = _summary(source)
    covered = coverage(summary, arms, tasks, floor)
    rows = []
    for arm in arms:
        per_task = summary.by_task(arm=arm)
        whole = summary.total(arm=arm)
        rows.append({
            "arm": arm,
            "samples": whole.samples,
            "success": _success(whole),
            "cost_equivalent": _clustered(_cost_by_task(per_task, weights)),
            "cost_equivalent_per_task": _per_task_bootstrap(per_task, weights),
            "raw_tokens": _clustered({task: (t.priced, float(t.cost_equivalent(_RAW)))
                                      for task, t in per_task.items()}),
            "turns": _clustered({task: (t.samples, t.turns)
                                 for task, t in per_task.items()}),
            "duration_s": _clustered({task: (t.samples, t.duration_s)
                                      for task, t in per_task.items()}),
            "coverage": {k: covered[arm][k] for k in ("covered", "partial", "missing", "cells")},
            "imputed_cost_usd": _clustered({task: (t.imputed_samples, t.imputed_cost_usd)
                                            for task, t in per_task.items()}),
        })
    return rows


def per_tier(source: Source, arms: Sequence[str], tiers: Sequence[str],
             weights: TokenWeights = DEFAULT_WEIGHTS) -> list[dict[str, Any]]:
    summary = _summary(source)
    rows = []
    for arm in arms:
        for tier in tiers:
            whole = summary.total(arm=arm, tier=tier)
            rows.append({"arm": arm, "tier": tier, "samples": whole.samples,
                         "success": _success(whole),
                         "cost_equivalent": _clustered(_cost_by_task(
                             summary.by_task(arm=arm, tier=tier), weights))})
    return rows


def per_component(source: Source, arms: Sequence[str],
                  weights: TokenWeights = DEFAULT_WEIGHTS) -> list[dict[str, Any]]:
    """Mean of each unweighted token component per arm, and its weighted share."""
    summary = _summary(source)
    rows = []
    for arm in arms:
        per_task = summary.by_task(arm=arm)
        row: dict[str, Any] = {"arm": arm, "samples": summary.total(arm=arm).priced}
        for name in COMPONENTS:
            row[name] = _clustered({task: (t.priced, float(getattr(t, name)))
                                    for task, t in per_task.items()})
            row[f"{name}_weighted"] = (
                None if row[name] is None else row[name]["mean"] * getattr(weights, name))
        row["reasoning"] = _clustered({task: (t.reasoning_samples, float(t.reasoning))
                                       for task, t in per_task.items()})
        rows.append(row)
    return rows


def failure_tags(source: Source, arms: Sequence[str]) -> list[dict[str, Any]]:
    summary = _summary(source)
    rows = []
    for arm in arms:
        whole = summary.total(arm=arm)
        if not whole.samples:
            rows.append({"arm": arm, "samples": 0, "pass": None,
                         **{tag: None for tag in FAILURE_TAGS}, "denied_calls": None})
            continue
        row: dict[str, Any] = {"arm": arm, "samples": whole.samples, "pass": whole.passes}
        for tag in FAILURE_TAGS:
            row[tag] = sum(summary.groups[key].samples for key
                           in summary.keys(arm=arm, failure=tag) if key.outcome != PASS)
        row["denied_calls"] = whole.denied_calls
        rows.append(row)
    return rows


def _cell_means(summary: Summary, arm: str, weights: TokenWeights,
                floor: int) -> tuple[dict[str, float], dict[str, float], dict[str, int]]:
    """Per covered task: success rate, mean cost-equivalent tokens and samples of one arm."""
    success, cost, samples = {}, {}, {}
    for task, totals in summary.by_task(arm=arm).items():
        if totals.samples < floor:
            continue
        success[task] = totals.passes / totals.samples
        samples[task] = totals.samples
        if totals.priced:
            cost[task] = totals.cost_equivalent(weights) / totals.priced
    return success, cost, samples


def compare(source: Source, arm_a: str, arm_b: str,
            weights: TokenWeights = DEFAULT_WEIGHTS, floor: int = FLOOR) -> dict[str, Any]:
    """Paired comparison `b - a` over the tasks both arms covered (≥ `floor` samples)."""
    summary = _summary(source)
    # the comparison of the per-task means is the views' own (unchanged by the columns)
    return paired_comparison(arm_a, arm_b, floor, _cell_means(summary, arm_a, weights, floor),
                             _cell_means(summary, arm_b, weights, floor))


def arms_and_tasks(source: Source, configs: Iterable[Mapping[str, Any]] = ()
                   ) -> tuple[list[str], list[str], list[str]]:
    """Arms, tasks and tiers to show: what runs planned plus what records hold, in
    first-seen order, so a planned cell with no sample shows as missing."""
    summary = _summary(source)
    arms: dict[str, None] = {}
    tasks: dict[str, None] = {}
    tiers: dict[Any, None] = {}
    for config in configs:
        arms.update(dict.fromkeys(config.get("arms", [])))
        tasks.update(dict.fromkeys(config.get("tasks", [])))
        tiers.update(dict.fromkeys(config.get("tiers", [])))
    for key in summary.ordered():
        arms.setdefault(key.arm)
        tasks.setdefault(key.task)
        if key.tier:
            tiers.setdefault(key.tier)
    return list(arms), list(tasks), list(tiers)


def shown_trials(source: Source, limit: int) -> list[int]:
    """Sequence numbers of the trials a report shows in full: per cell the newest
    failures first, then the newest passes, `TRIALS_PER_CELL` at most; cells in
    first-seen order, failures of every cell before any pass, `limit` in all."""
    summary = _summary(source)
    failing: dict[tuple[str, str], list[int]] = {}
    passing: dict[tuple[str, str], list[int]] = {}
    for key in summary.ordered():
        pool = passing if key.outcome == PASS else failing
        failing.setdefault((key.arm, key.task), [])
        pool.setdefault((key.arm, key.task), []).extend(summary.groups[key].newest)
    chosen: dict[tuple[str, str], int] = dict.fromkeys(failing, 0)
    picked: list[int] = []
    for pool in (failing, passing):
        for cell, seqs in pool.items():
            if len(picked) >= limit:  # a suite of thousands of cells: the rest is cut
                return picked[:limit]
            take = sorted(seqs, reverse=True)[:TRIALS_PER_CELL - chosen[cell]]
            chosen[cell] += len(take)
            picked.extend(take)
    return picked[:limit]
