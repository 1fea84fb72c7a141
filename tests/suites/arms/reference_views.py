"""The arms views as they were computed from a `views.Summary` before `views.Columns`:
the reference the columnar views are held to, bit for bit (`test_columns.py`).

Copied from `benchwarden/suites/arms/views.py` as it stood before the columnar views
(every union a `Totals`, every per-task table a dict): the functions the columns
changed. What they did not change (`paired_comparison`, the comparison of two arms'
per-task means, and the small helpers) is imported from the views, not copied. Not
used by benchwarden itself.

A `Summary`'s unions are answered here by scanning every group (`total`, `by_task`:
the definition its index once answered by, merged in the same order), and a `Summary`
is made of the store's group totals one row at a time (`summary_from_rows`), the way
the report read them before `Columns`: what the columnar read is held to.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from benchwarden.core.group_totals import DecodedChunk, DecodedRow, GroupTotals, decoded_rows
from benchwarden.core.records import DEFAULT_WEIGHTS, TokenWeights
from benchwarden.core.stats import (
    clustered_mean_se_of_totals,
    skewed_mean_ci,
)
from benchwarden.suites.arms.columns import KEY_FIELDS, NO_TRIAL
from benchwarden.suites.arms.tasks import FAILURE_TAGS, FLOOR, PASS
from benchwarden.suites.arms.views import (
    _RAW,
    _TOTAL_FIELDS,
    COMPONENTS,
    TRIALS_PER_CELL,
    Columns,
    GroupKey,
    Summary,
    Totals,
    _from_json,
    _success,
    _tier_and_failure,
    columns_from_chunks,
    coverage_class,
    paired_comparison,
    summarize,
)

Source = Any


# ---------------------------------------------------------------------------- a Summary

def _summary(source: Source) -> Summary:
    return source if isinstance(source, Summary) else summarize(source)


def _matches(key: GroupKey, match: Mapping[str, Any]) -> bool:
    for name in match:
        if name not in GroupKey._fields:
            raise TypeError(f"a group has no field {name!r}")
    return all(getattr(key, name) == value for name, value in match.items())


def ordered(summary: Summary) -> list[GroupKey]:
    """Every group's key, in first-seen order (ties in insertion order)."""
    return sorted(summary.groups, key=summary.first_seen.__getitem__)


def keys(summary: Summary, **match: Any) -> list[GroupKey]:
    """The keys of the groups whose key fields equal `match`, in insertion order."""
    return [key for key in summary.groups if _matches(key, match)]


def total(summary: Summary, **match: Any) -> Totals:
    """The union of the groups whose key fields equal `match`, merged in insertion
    order; its `newest` empty, as a merge leaves it."""
    union = Totals()
    for key in keys(summary, **match):
        union.merge(summary.groups[key])
    return union


def by_task(summary: Summary, **match: Any) -> dict[str, Totals]:
    """The union of the matching groups per task, in first-seen order."""
    tasks: dict[str, Totals] = {}
    for key in ordered(summary):
        if _matches(key, match):
            tasks.setdefault(key.task, Totals()).merge(summary.groups[key])
    return tasks




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
    is not forced into a t interval.

    Up to `stats.ANALYTIC_INTERVAL_ABOVE` tasks this is `bootstrap_mean_ci`, as it was
    before the columns; above it (a later decision, not the columns') both sides take
    `abc_mean_ci` of the same task means, so there the comparison holds the per-task
    means and the analytic interval of them, not a bootstrap."""
    means = [t.cost_equivalent(weights) / t.priced for t in per_task.values() if t.priced]
    if not means:
        return None
    return skewed_mean_ci(means).to_json_dict()


# ---------------------------------------------------------------------------- views

def cell_counts(source: Source) -> dict[tuple[str, str], int]:
    summary = _summary(source)
    counts: dict[tuple[str, str], int] = {}
    for key in ordered(summary):
        counts[(key.arm, key.task)] = (counts.get((key.arm, key.task), 0)
                                       + summary.groups[key].samples)
    return counts


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
        per_task = by_task(summary, arm=arm)
        whole = total(summary, arm=arm)
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
            whole = total(summary, arm=arm, tier=tier)
            rows.append({"arm": arm, "tier": tier, "samples": whole.samples,
                         "success": _success(whole),
                         "cost_equivalent": _clustered(_cost_by_task(
                             by_task(summary, arm=arm, tier=tier), weights))})
    return rows


def per_component(source: Source, arms: Sequence[str],
                  weights: TokenWeights = DEFAULT_WEIGHTS) -> list[dict[str, Any]]:
    """Mean of each unweighted token component per arm, and its weighted share."""
    summary = _summary(source)
    rows = []
    for arm in arms:
        per_task = by_task(summary, arm=arm)
        row: dict[str, Any] = {"arm": arm, "samples": total(summary, arm=arm).priced}
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
        whole = total(summary, arm=arm)
        if not whole.samples:
            rows.append({"arm": arm, "samples": 0, "pass": None,
                         **{tag: None for tag in FAILURE_TAGS}, "denied_calls": None})
            continue
        row: dict[str, Any] = {"arm": arm, "samples": whole.samples, "pass": whole.passes}
        for tag in FAILURE_TAGS:
            row[tag] = sum(summary.groups[key].samples for key
                           in keys(summary, arm=arm, failure=tag) if key.outcome != PASS)
        row["denied_calls"] = whole.denied_calls
        rows.append(row)
    return rows


def _cell_means(summary: Summary, arm: str, weights: TokenWeights,
                floor: int) -> tuple[dict[str, float], dict[str, float], dict[str, int]]:
    """Per covered task: success rate, mean cost-equivalent tokens and samples of one arm."""
    success, cost, samples = {}, {}, {}
    for task, totals in by_task(summary, arm=arm).items():
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
    for key in ordered(summary):
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
    for key in ordered(summary):
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


# ------------------------------------------------------------ group totals read by row

def summary_from_groups(groups: Iterable[GroupTotals]) -> Summary:
    """The `Summary` that `summarize` makes of the records, from the store's totals per
    (arm, task, outcome, group key text) of one scope (`Store.group_totals`), as
    `summary_from_rows` makes it of their rows. Groups whose keys come out equal are
    merged, as `summarize` would have put their records in one group (their float sums
    then agree with the stream's to rounding only)."""
    by_first_record = sorted(groups, key=lambda group: int(group.first_seq))
    return summary_from_rows(decoded_rows(group.row() for group in by_first_record))


def summary_from_rows(rows: Iterable[DecodedRow]) -> Summary:
    """`summary_from_groups` of the store's group totals as `Store.fold_group_totals`
    hands them over (`(plain columns, bench versions, newest)` per group, every column
    of its kind already, in ascending `first_seq` order: a `ValueError` otherwise): the
    same Summary to the last bit, one row at a time: how a report read the group totals
    before `Columns`."""
    summary = Summary()
    groups, first_seen = summary.groups, summary.first_seen
    # keys made of more than one stored group, and their newest trials so far
    merged: dict[GroupKey, list[int]] = {}
    seen_versions: set[tuple[str, ...]] = set()
    previous = None
    # one string per distinct arm and task name (the database gives each row its own:
    # a task's name held once per group it has, six or more, in every key)
    names: dict[str, str] = {}
    for row, versions, newest in rows:
        (_, _, arm, task, outcome, group_key, first_seq, records, priced, fresh_input,
         cache_creation, cache_read, output, reasoning_samples, reasoning, duration_s,
         duration_s_error, turns, turns_error, denied_calls, imputed_samples,
         imputed_cost_usd, imputed_cost_usd_error, odd_values, *_) = row
        if previous is not None and first_seq < previous:
            raise ValueError("group totals must come in ascending first_seq order")
        previous = first_seq
        tier, failure = _tier_and_failure(group_key)
        key = GroupKey(names.setdefault(arm, arm), names.setdefault(task, task), tier,
                       outcome, failure)
        totals = Totals(
            records, records if outcome == PASS else 0, priced, fresh_input, cache_creation,
            cache_read, output, reasoning_samples, reasoning, duration_s + duration_s_error,
            turns + turns_error, denied_calls, imputed_samples,
            imputed_cost_usd + imputed_cost_usd_error, odd_values)
        known = groups.get(key)
        if known is None:
            groups[key] = totals
            first_seen[key] = first_seq
            totals.newest = tuple((sorted(newest) if len(newest) > 1 else newest)
                                  [-TRIALS_PER_CELL:])
        else:
            known.merge(totals)
            found = merged.get(key)
            if found is None:
                found = merged[key] = list(known.newest)
            found.extend(newest)
        if versions not in seen_versions:
            seen_versions.add(versions)
            for text in versions:
                version = _from_json(text)
                if version:
                    summary.versions.add(str(version))
    for key, found in merged.items():
        groups[key].newest = tuple(sorted(found)[-TRIALS_PER_CELL:])
    return summary


def summary_of(columns: Columns) -> Summary:
    """The `Summary` holding the same groups as `columns` (keys, totals, newest trials,
    first-seen sequence numbers and versions), in the same order: `columns_of`'s
    inverse, for comparing the two forms."""
    summary = Summary(versions=set(columns.versions))
    everything = np.arange(len(columns))
    group_keys = zip(*(columns.names_of(name, everything) for name in KEY_FIELDS), strict=True)
    values = [columns.values[name].tolist() for name in _TOTAL_FIELDS]
    for position, (key, first_seq) in enumerate(zip(group_keys, columns.first_seq.tolist(),
                                                     strict=True)):
        group = GroupKey(*key)
        totals = Totals(*(column[position] for column in values))
        totals.newest = tuple(seq for seq in columns.newest[position].tolist()
                              if seq != NO_TRIAL)
        summary.groups[group] = totals
        summary.first_seen[group] = first_seq
    return summary


def columns_from_rows(rows: Iterable[DecodedRow]) -> Columns:
    """`summary_from_rows` by column: the store's group totals as `Store.fold_group_totals`
    hands them over (in ascending `first_seq` order: a `ValueError` otherwise), groups
    whose keys come out equal merged as `summary_from_rows` merges them. The same totals
    to the last bit (tested), in memory of a few arrays."""
    def chunks() -> Iterator[DecodedChunk]:
        for chunk in _chunks_of(rows, 8192):
            yield (list(zip(*(plain for plain, _, _ in chunk), strict=True)),
                   [versions for _, versions, _ in chunk], [newest for _, _, newest in chunk])
    return columns_from_chunks(chunks())


def _chunks_of(rows: Iterable[Any], size: int) -> Iterator[list[Any]]:
    iterator = iter(rows)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk
