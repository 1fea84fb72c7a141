"""A run of the arms suite: plan the missing trials, run them, append, tally.

Cells are `(arm, task)` pairs within the suite's scope, deepened across runs: a run
asks for `trials` samples per cell and runs only the missing ones, numbering them
after the highest trial the store has ever held in that cell (gaps allowed, numbers
never reused). Invalid trials and harness errors keep their number unused, so the
cell stays short and a later run fills it.

Invariants:
- Only this module (in the parent process) writes the store: one record per finished
  sample, appended as soon as it arrives, so a killed run loses nothing recorded.
- The isolation mode is part of the run's recorded configuration; it is checked
  before anything is recorded (a missing bwrap stops the run, it never degrades).
- Every run gets a `RunEnd` (completed / failed / interrupted) whose summary is the
  tally: recorded, invalid, harness errors, samples before → after per cell, floor.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchwarden.core.errors import RunInterrupted
from benchwarden.core.interrupts import signals_deferred
from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import RunEnd
from benchwarden.core.store import DuplicateRecord, Store
from benchwarden.suites.arms.agents import CommandDriver, Limits, OpenAIDriver
from benchwarden.suites.arms.boundary import hidden_store_paths
from benchwarden.suites.arms.config import validate_run
from benchwarden.suites.arms.tasks import FLOOR, Suite
from benchwarden.suites.arms.trial import SUITE_NAME, TrialJob, TrialResult, run_trial


@dataclass(frozen=True)
class CellPlan:
    arm: str
    task: str
    before: int
    """Samples the store held for this cell when the run started."""
    trials: tuple[int, ...]
    """Trial numbers this run will attempt."""


def plan_cells(store: Store, suite: Suite, arms: Sequence[str], tasks: Sequence[str],
               trials: int) -> list[CellPlan]:
    """What each cell still needs: its samples and highest trial number are counted by the
    store's database (`Store.cell_depth`), so planning costs the same however many
    records the store holds."""
    plans = []
    for arm in arms:
        for task in tasks:
            before, highest = store.cell_depth(SUITE_NAME, suite.name, arm, task)
            missing = max(0, trials - before)
            plans.append(CellPlan(arm, task, before,
                                  tuple(range(highest + 1, highest + 1 + missing))))
    return plans


@dataclass
class CellTally:
    arm: str
    task: str
    before: int
    after: int
    passed: int = 0
    failed: int = 0
    invalid: int = 0
    harness_errors: int = 0

    def to_json_dict(self) -> dict[str, Any]:
        return {"arm": self.arm, "task": self.task, "before": self.before, "after": self.after,
                "passed": self.passed, "failed": self.failed, "invalid": self.invalid,
                "harness_errors": self.harness_errors, "covered": self.after >= FLOOR}


@dataclass
class RunTally:
    run_id: str
    cells: dict[tuple[str, str], CellTally]
    recorded: int = 0
    invalid: int = 0
    harness_errors: int = 0
    problems: list[str] = field(default_factory=list)
    """One line per invalid trial or harness error (capped)."""

    @property
    def attempted(self) -> int:
        return self.recorded + self.invalid + self.harness_errors

    @property
    def floor_reached(self) -> bool:
        return all(cell.after >= FLOOR for cell in self.cells.values())

    def take(self, result: TrialResult) -> None:
        cell = self.cells[(result.arm, result.task)]
        if result.kind == "sample":
            self.recorded += 1
            cell.after += 1
            assert result.record is not None
            if result.record.outcome == "pass":
                cell.passed += 1
            else:
                cell.failed += 1
            return
        if result.kind == "invalid":
            self.invalid += 1
            cell.invalid += 1
        else:
            self.harness_errors += 1
            cell.harness_errors += 1
        if len(self.problems) < 50:
            label = "invalid" if result.kind == "invalid" else "harness error"
            self.problems.append(f"{result.arm}/{result.task} trial {result.trial}: "
                                 f"{label}: {result.reason}")

    def to_json_dict(self) -> dict[str, Any]:
        return {"recorded": self.recorded, "invalid": self.invalid,
                "harness_errors": self.harness_errors, "attempted": self.attempted,
                "floor": FLOOR, "floor_reached": self.floor_reached,
                "cells": [c.to_json_dict() for c in self.cells.values()],
                "problems": list(self.problems)}


# the limits of a run that names none (frozen: one shared default is safe)
DEFAULT_LIMITS = Limits()


def run_arms(store: Store, suite: Suite, suite_spec: str, *, arms: Sequence[str],
             tasks: Sequence[str], trials: int, driver: OpenAIDriver | CommandDriver,
             limits: Limits = DEFAULT_LIMITS, seed: int | None = None, executor: Any = None,
             on_start: Callable[[list[CellPlan]], None] | None = None,
             on_result: Callable[[TrialResult], None] | None = None,
             run_id: str | None = None, isolation: str = "bwrap") -> RunTally:
    """Run the missing trials of every (arm, task) cell and append their records.

    `isolation`: "bwrap" runs every shell command and the trial's services inside a
    bubblewrap boundary (IsolationUnavailable when bwrap cannot work here: never a
    silent fallback); "none" runs them without one (explicit and unsafe)."""
    validate_run(trials, limits, isolation)
    hidden = tuple(str(path) for path in hidden_store_paths(getattr(store, "location", None)))
    plans = plan_cells(store, suite, arms, tasks, trials)
    config = {"suite_spec": suite_spec, "scope": suite.name, "arms": list(arms),
              "tasks": list(tasks), "all_tasks": [t.id for t in suite.tasks],
              "tiers": list(suite.tiers), "task_tiers": {t.id: t.tier for t in suite.tasks},
              "trials": trials, "turn_cap": limits.turn_cap, "wall_clock": limits.wall_clock,
              "command_timeout": limits.command_timeout, "seed": seed,
              "executor": repr(executor) if executor is not None else "sequential",
              "isolation": isolation}
    run = stamp_run(suite=SUITE_NAME, bench_version=suite.bench_version, config=config,
                    seeds=[seed] if seed is not None else [], target=driver.describe(),
                    run_id=run_id)
    store.begin_run(run)
    tally = RunTally(run.run_id, {(p.arm, p.task): CellTally(p.arm, p.task, p.before, p.before)
                                  for p in plans})
    jobs = [TrialJob(suite_spec, plan.arm, plan.task, number, run.run_id, driver, limits, seed,
                     isolation, hidden)
            for plan in plans for number in plan.trials]
    # Interleave cells so a drifting server or machine does not favour one arm.
    random.Random(seed if seed is not None else 0).shuffle(jobs)
    if on_start:
        on_start(plans)
    status = "failed"
    try:
        for result in _execute(jobs, executor):
            if result.record is not None:
                result = _append(store, result)
            tally.take(result)
            if on_result:
                on_result(result)
        status = "completed"
    except KeyboardInterrupt:  # a signal (core.interrupts): the run ends "interrupted"
        status = "interrupted"
        raise RunInterrupted(
            f"run {run.run_id} stopped; its finished trials are kept; run the same "
            "`benchwarden arms run` command again to run only the missing trials") from None
    finally:
        with signals_deferred():  # a second Ctrl-C must not leave the run without an end
            store.finish_run(RunEnd(run.run_id, time.time(), status, tally.to_json_dict()))
    return tally


def _append(store: Store, result: TrialResult) -> TrialResult:
    """Append a sample; if another run took its trial number meanwhile (two runs
    deepening one cell at once), renumber it after the highest number now used."""
    record = result.record
    assert record is not None
    for _ in range(5):
        try:
            store.append([record])
            return result if record is result.record else dataclasses.replace(
                result, trial=record.trial, record=record)
        except DuplicateRecord:
            highest = store.highest_trial(record.suite, record.scope, record.arm, record.task)
            record = dataclasses.replace(record, trial=max(highest, record.trial) + 1)
    store.append([record])  # still contended: let the refusal surface
    return dataclasses.replace(result, trial=record.trial, record=record)


def _execute(jobs: Sequence[TrialJob], executor: Any) -> Iterable[TrialResult]:
    if executor is None:
        for job in jobs:
            yield run_trial(job)
        return
    from benchwarden.core.executors import TaskFailure

    for index, result in executor.map_unordered(run_trial, jobs):
        if isinstance(result, TaskFailure):
            job = jobs[index]
            yield TrialResult(job.arm, job.task, job.trial, "harness_error",
                              reason=f"executor: {getattr(result, 'message', result)}")
        else:
            yield result
