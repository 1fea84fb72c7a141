"""Views of arms records: pure functions from records to JSON-able tables.

Nothing here reads a file, a clock or a socket: the report builds these from the
store, tests from in-memory records.

Invariants:
- Every rate comes with a Wilson interval and every mean with a standard error
  (clustered by task: trials of one task are not independent) and its interval.
- An empty group yields `None` (rendered as a dash), never 0.
- Cost-equivalent tokens are computed here from stored components and a weight
  table, so history is re-weighted without re-running.
- Token means use only samples whose driver reported tokens (a hung external agent
  reports none); `n` says how many.
- Paired comparisons are over tasks both arms covered, `b - a`, with the minimum
  detectable effect at that number of pairs.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Mapping, Sequence

from benchwarden.core.records import DEFAULT_WEIGHTS, Record, TokenWeights
from benchwarden.core.stats import (
    bootstrap_mean_ci,
    clustered_mean_se,
    mde_proportions,
    paired_difference,
    wilson_interval,
)
from benchwarden.suites.arms.tasks import FAILURE_TAGS, FLOOR, PASS

COMPONENTS = ("fresh_input", "cache_creation", "cache_read", "output")


def _estimate(values: Sequence[float], clusters: Sequence[str]) -> dict[str, Any] | None:
    if not values:
        return None
    return clustered_mean_se(list(values), list(clusters)).to_json_dict()


def _per_task_bootstrap(records: Sequence[Record], weights: TokenWeights) -> dict[str, Any] | None:
    """Mean over tasks of each task's mean cost, with a BCa bootstrap interval over
    tasks: every task weighs the same however deep its cell, and a skewed task mix
    is not forced into a t interval."""
    by_task: dict[str, list[float]] = defaultdict(list)
    for record in records:
        by_task[record.task].append(record.tokens.cost_equivalent(weights))
    if not by_task:
        return None
    means = [sum(values) / len(values) for values in by_task.values()]
    return bootstrap_mean_ci(means).to_json_dict()


def _success(records: Sequence[Record]) -> dict[str, Any] | None:
    if not records:
        return None
    passes = sum(1 for r in records if r.outcome == PASS)
    return wilson_interval(passes, len(records)).to_json_dict()


def _tokens_known(record: Record) -> bool:
    return bool(record.payload.get("tokens_reported", True))


def by_arm(records: Iterable[Record]) -> dict[str, list[Record]]:
    groups: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        groups[record.arm].append(record)
    return groups


def cell_counts(records: Iterable[Record]) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for record in records:
        counts[(record.arm, record.task)] += 1
    return dict(counts)


def coverage_class(samples: int, floor: int = FLOOR) -> str:
    if samples >= floor:
        return "covered"
    return "partial" if samples > 0 else "missing"


def coverage(records: Sequence[Record], arms: Sequence[str], tasks: Sequence[str],
             floor: int = FLOOR) -> dict[str, dict[str, Any]]:
    """Per arm: covered / partial / missing cell counts and samples per task."""
    counts = cell_counts(records)
    table: dict[str, dict[str, Any]] = {}
    for arm in arms:
        cells = {task: counts.get((arm, task), 0) for task in tasks}
        classes = [coverage_class(n, floor) for n in cells.values()]
        table[arm] = {"covered": classes.count("covered"), "partial": classes.count("partial"),
                      "missing": classes.count("missing"), "cells": len(tasks),
                      "samples": cells}
    return table


def headline(records: Sequence[Record], arms: Sequence[str], tasks: Sequence[str],
             weights: TokenWeights = DEFAULT_WEIGHTS, floor: int = FLOOR) -> list[dict[str, Any]]:
    groups = by_arm(records)
    covered = coverage(records, arms, tasks, floor)
    rows = []
    for arm in arms:
        group = groups.get(arm, [])
        priced = [r for r in group if _tokens_known(r)]
        costs = [r.payload.get("imputed_cost_usd") for r in group]
        known_costs = [(float(c), r.task) for c, r in zip(costs, group) if c is not None]
        rows.append({
            "arm": arm,
            "samples": len(group),
            "success": _success(group),
            "cost_equivalent": _estimate([r.tokens.cost_equivalent(weights) for r in priced],
                                         [r.task for r in priced]),
            "cost_equivalent_per_task": _per_task_bootstrap(priced, weights),
            "raw_tokens": _estimate([float(r.tokens.raw_total) for r in priced],
                                    [r.task for r in priced]),
            "turns": _estimate([float(r.payload.get("turns", 0)) for r in group],
                               [r.task for r in group]),
            "duration_s": _estimate([r.duration_s for r in group], [r.task for r in group]),
            "coverage": {k: covered[arm][k] for k in ("covered", "partial", "missing", "cells")},
            "imputed_cost_usd": _estimate([c for c, _ in known_costs],
                                          [t for _, t in known_costs]),
        })
    return rows


def per_tier(records: Sequence[Record], arms: Sequence[str], tiers: Sequence[str],
             weights: TokenWeights = DEFAULT_WEIGHTS) -> list[dict[str, Any]]:
    rows = []
    for arm in arms:
        for tier in tiers:
            group = [r for r in records if r.arm == arm and r.payload.get("tier") == tier]
            priced = [r for r in group if _tokens_known(r)]
            rows.append({"arm": arm, "tier": tier, "samples": len(group),
                         "success": _success(group),
                         "cost_equivalent": _estimate(
                             [r.tokens.cost_equivalent(weights) for r in priced],
                             [r.task for r in priced])})
    return rows


def per_component(records: Sequence[Record], arms: Sequence[str],
                  weights: TokenWeights = DEFAULT_WEIGHTS) -> list[dict[str, Any]]:
    """Mean of each unweighted token component per arm, and its weighted share."""
    groups = by_arm(records)
    rows = []
    for arm in arms:
        priced = [r for r in groups.get(arm, []) if _tokens_known(r)]
        clusters = [r.task for r in priced]
        row: dict[str, Any] = {"arm": arm, "samples": len(priced)}
        for name in COMPONENTS:
            row[name] = _estimate([float(getattr(r.tokens, name)) for r in priced], clusters)
            row[f"{name}_weighted"] = (
                None if row[name] is None else row[name]["mean"] * getattr(weights, name))
        reasoning = [float(r.tokens.reasoning) for r in priced if r.tokens.reasoning is not None]
        row["reasoning"] = _estimate(reasoning, [r.task for r in priced
                                                 if r.tokens.reasoning is not None])
        rows.append(row)
    return rows


def failure_tags(records: Sequence[Record], arms: Sequence[str]) -> list[dict[str, Any]]:
    groups = by_arm(records)
    rows = []
    for arm in arms:
        group = groups.get(arm, [])
        if not group:
            rows.append({"arm": arm, "samples": 0, "pass": None,
                         **{tag: None for tag in FAILURE_TAGS}, "denied_calls": None})
            continue
        row = {"arm": arm, "samples": len(group),
               "pass": sum(1 for r in group if r.outcome == PASS)}
        for tag in FAILURE_TAGS:
            row[tag] = sum(1 for r in group if r.outcome != PASS and r.payload.get("failure") == tag)
        row["denied_calls"] = sum(int(r.payload.get("denied_calls", 0)) for r in group)
        rows.append(row)
    return rows


def _cell_means(records: Sequence[Record], arm: str, weights: TokenWeights,
                floor: int) -> tuple[dict[str, float], dict[str, float]]:
    """Per covered task: success rate and mean cost-equivalent tokens of one arm."""
    by_task: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        if record.arm == arm:
            by_task[record.task].append(record)
    success, cost = {}, {}
    for task, group in by_task.items():
        if len(group) < floor:
            continue
        success[task] = sum(1 for r in group if r.outcome == PASS) / len(group)
        priced = [r.tokens.cost_equivalent(weights) for r in group if _tokens_known(r)]
        if priced:
            cost[task] = sum(priced) / len(priced)
    return success, cost


def compare(records: Sequence[Record], arm_a: str, arm_b: str,
            weights: TokenWeights = DEFAULT_WEIGHTS, floor: int = FLOOR) -> dict[str, Any]:
    """Paired comparison `b - a` over the tasks both arms covered (≥ `floor` samples)."""
    success_a, cost_a = _cell_means(records, arm_a, weights, floor)
    success_b, cost_b = _cell_means(records, arm_b, weights, floor)
    shared = sorted(set(success_a) & set(success_b))
    success = paired_difference(success_a, success_b)
    tokens = paired_difference(cost_a, cost_b)
    pooled = [*success_a.values(), *success_b.values()]
    base_rate = sum(pooled) / len(pooled) if pooled else None
    success_row = success.to_json_dict()
    # Where the per-task differences have no spread yet, fall back to the binomial MDE
    # at the pooled pass rate so a reader still learns how coarse the comparison is.
    per_arm_samples = min(
        (sum(1 for r in records if r.arm == arm and r.task in shared) for arm in (arm_a, arm_b)),
        default=0)
    success_row["mde_binomial"] = (mde_proportions(base_rate, per_arm_samples)
                                   if shared else None)
    success_row["samples_per_arm"] = per_arm_samples
    return {
        "a": arm_a, "b": arm_b, "floor": floor,
        "tasks": shared,
        "only_a": sorted(set(success_a) - set(success_b)),
        "only_b": sorted(set(success_b) - set(success_a)),
        "success_difference": success_row,
        "cost_equivalent_difference": tokens.to_json_dict(),
        "success_a": _mean_or_none([success_a[t] for t in shared]),
        "success_b": _mean_or_none([success_b[t] for t in shared]),
        "cost_a": _mean_or_none([cost_a[t] for t in shared if t in cost_a and t in cost_b]),
        "cost_b": _mean_or_none([cost_b[t] for t in shared if t in cost_a and t in cost_b]),
    }


def _mean_or_none(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def all_pairs(arms: Sequence[str]) -> list[tuple[str, str]]:
    return [(a, b) for i, a in enumerate(arms) for b in arms[i + 1:]]


def arms_and_tasks(records: Sequence[Record],
                   configs: Iterable[Mapping[str, Any]] = ()) -> tuple[list[str], list[str], list[str]]:
    """Arms, tasks and tiers to show: what runs planned plus what records hold, in
    first-seen order, so a planned cell with no sample shows as missing."""
    arms: dict[str, None] = {}
    tasks: dict[str, None] = {}
    tiers: dict[str, None] = {}
    for config in configs:
        arms.update(dict.fromkeys(config.get("arms", [])))
        tasks.update(dict.fromkeys(config.get("tasks", [])))
        tiers.update(dict.fromkeys(config.get("tiers", [])))
    for record in records:
        arms.setdefault(record.arm)
        tasks.setdefault(record.task)
        if record.payload.get("tier"):
            tiers.setdefault(record.payload["tier"])
    return list(arms), list(tasks), list(tiers)


__all__ = ["COMPONENTS", "FLOOR", "all_pairs", "arms_and_tasks", "by_arm",
           "cell_counts", "compare", "coverage", "coverage_class", "failure_tags",
           "headline", "per_component", "per_tier"]
