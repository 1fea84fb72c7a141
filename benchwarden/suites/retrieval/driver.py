"""Runs a strategy over seeds and records every graded pack (the imperative shell).

For each seed: generate the corpus, give the strategy a fresh `index`, ask one pack
per case plus one per paraphrase template, hold every pack to the limit and budget
(`enforce_limits`: the strategy is never trusted), grade it, and append one record per
case: scope = the run, arm = the strategy, task = the case id, trial = the seed.

Invariants:
- A strategy that fails (a sandbox limit, a crash, an exception, an unreadable pack)
  ends its run: one `error` record names the seed, the case it failed on, the reason
  (one line, with the innermost file and line) and the traceback, the run ends
  `failed`, and nothing else is raised to the caller. Seeds already scored stay recorded.
- With `sandbox`, every strategy (built-ins included) runs in `SandboxedStrategy`
  under the chosen isolation, with the run's store file hidden from it.
- A seed's records are appended in one batch, after the whole seed was scored, so a
  seed is either wholly in the store or not at all; a killed run (no end recorded) is
  finished by `resume_run`, which scores only the seeds with no records.
- A seed's last record carries the seed's digest (`DIGEST_FIELD`), computed by
  `scoring.score_seed` from the very payloads appended with it: a report reads it in
  place of the seed's records and recounts the seeds whose failed cases it lists. The
  run end keeps where each seed's last record is (`GROUPS_FIELD`), counted from the
  store when the run ends, so a report need not walk the address index to find them.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import msgspec

from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import Record, RunEnd
from benchwarden.core.run_config import config_as
from benchwarden.core.store import Store
from benchwarden.core.verdicts import one_line
from benchwarden.suites.retrieval.api import PackError, coerce_pack, enforce_limits
from benchwarden.suites.retrieval.config import RunSettings, StoredConfig, validate_seeds
from benchwarden.suites.retrieval.corpus import Case, Corpus, generate
from benchwarden.suites.retrieval.grading import contains_value, grade_pack, pack_text
from benchwarden.suites.retrieval.sandbox import (
    SandboxedStrategy,
    SandboxFailure,
)
from benchwarden.suites.retrieval.scoring import (
    BENCH_VERSION,
    CaseOutcome,
    PackMeasure,
    SeedDigest,
    SeedGroups,
    score_seed,
)
from benchwarden.suites.retrieval.strategies import (
    StrategyLoadError,
    StrategySpec,
    make_strategy,
    parse_strategy,
)

SUITE = "retrieval"
FAILURE_TASK = "__run__"
# The payload field of a seed's last record holding the seed's digest (`scoring.SeedDigest`).
DIGEST_FIELD = "seed_digest"
# The run end's summary field holding the run's groups as they stood at its end
# (`scoring.SeedGroups`), where a report finds each seed's digest.
GROUPS_FIELD = "seed_groups"
ProgressCallback = Callable[[int], None]


@dataclass(frozen=True)
class SeedTask:
    spec: StrategySpec
    seed: int
    settings: RunSettings


@dataclass
class SeedResult:
    seed: int
    cases: list[tuple[str, dict[str, Any], float, float]] = field(default_factory=list)
    failure: dict[str, Any] | None = None


class StrategyFailure(Exception):
    def __init__(self, kind: str, reason: str, traceback_text: str = "",
                 case: str | None = None) -> None:
        self.kind = kind
        self.reason = one_line(reason, 400)
        self.traceback_text = traceback_text[-MAX_TRACEBACK_CHARS:]
        self.case = case
        super().__init__(self.reason)

    def on_case(self, case: str) -> StrategyFailure:
        """The same failure, naming the case (and question form) it happened on."""
        return StrategyFailure(self.kind, f"{self.reason} (on case {case})",
                               self.traceback_text, case)


MAX_TRACEBACK_CHARS = 6000


def _new_strategy(spec: StrategySpec, settings: RunSettings) -> Any:
    if settings.sandbox:
        return SandboxedStrategy(spec.path, spec.attribute or spec.name, settings.sandbox_limits,
                                 isolation=settings.isolation, hidden=settings.hidden)
    return make_strategy(spec)


def _innermost(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    return f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""


def _call(what: str, function: Callable[..., Any], *args: Any) -> Any:
    """Run one strategy call, turning anything it raises into a StrategyFailure."""
    try:
        return function(*args)
    except SandboxFailure as failure:
        raise StrategyFailure(failure.kind, failure.reason, failure.traceback_text) from None
    except StrategyLoadError as error:
        raise StrategyFailure("load_error", str(error)) from None
    except Exception as error:  # a strategy's bug ends its run, never the harness
        raise StrategyFailure("strategy_error",
                              f"{what} raised {type(error).__name__}: {error}{_innermost(error)}",
                              "".join(traceback.format_exception(error))) from None
    except SystemExit as error:
        # sys.exit() in a strategy ends its run like any other error: it must not end
        # the harness with an exit code of its choosing (3 would read as "held")
        raise StrategyFailure("strategy_error",
                              f"{what} called sys.exit({error.code!r}){_innermost(error)}",
                              "".join(traceback.format_exception(error))) from None


def _measure(strategy: Any, corpus: Corpus, case: Case, question: str,
             settings: RunSettings, template: str | None) -> tuple[PackMeasure, list[Any], bool]:
    raw = _call("pack()", strategy.pack, question, settings.limit, settings.budget_chars)
    try:
        items = coerce_pack(raw)
    except PackError as error:
        raise StrategyFailure("protocol",
                              f"pack() returned something unreadable: {error}") from None
    items, cut = enforce_limits(items, settings.limit, settings.budget_chars)
    grade = grade_pack(case, items, corpus.session_text)
    used = sum(len(item.text) for item in items)
    canary_hit = contains_value(pack_text(items), corpus.canary)
    return PackMeasure(grade.score, used, canary_hit, grade.reason, template), items, cut


def score_corpus(strategy: Any, corpus: Corpus, settings: RunSettings,
                 on_case: ProgressCallback | None = None
                 ) -> list[tuple[str, dict[str, Any], float, float]]:
    """Index and query one strategy over one corpus; (case id, payload, start, end) rows."""
    try:
        _call("index()", strategy.index, list(corpus.sessions))
    except StrategyFailure as failure:
        raise StrategyFailure(failure.kind, f"{failure.reason} (in index(), before any case)",
                              failure.traceback_text) from None
    rows = []
    for case in corpus.cases:
        started = time.time()
        try:
            original, items, cut = _measure(strategy, corpus, case, case.question, settings, None)
        except StrategyFailure as failure:
            raise failure.on_case(case.id) from None
        paraphrased = []
        for number, (template, question) in enumerate(case.paraphrases, start=1):
            try:
                measure, _, _ = _measure(strategy, corpus, case, question, settings, template)
            except StrategyFailure as failure:
                raise failure.on_case(f"{case.id}, paraphrase {number}") from None
            paraphrased.append(measure)
        outcome = CaseOutcome(corpus.seed, case.id, case.category, case.question, original,
                              tuple(paraphrased))
        payload = outcome.to_payload()
        payload["truncated"] = cut
        payload["items"] = [{"text": item.text,
                             "source": list(item.source) if item.source else None,
                             "status": item.status} for item in items]
        rows.append((case.id, payload, started, time.time()))
        if on_case:
            on_case(1)
    return rows


def score_one_seed(task: SeedTask, on_case: ProgressCallback | None = None) -> SeedResult:
    """Everything one seed needs, in one call (picklable, so executors can fan it out)."""
    result = SeedResult(seed=task.seed)
    corpus = generate(task.seed)
    strategy = None
    try:
        strategy = _call("loading", _new_strategy, task.spec, task.settings)
        result.cases = score_corpus(strategy, corpus, task.settings, on_case)
    except StrategyFailure as failure:
        result.cases = []
        result.failure = {"seed": task.seed, "kind": failure.kind, "reason": failure.reason,
                          "case": failure.case, "traceback": failure.traceback_text}
    finally:
        close = getattr(strategy, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # closing is best effort; the run's outcome is already known
                pass
    return result


@dataclass(frozen=True)
class StartedSeeds:
    """Seeds already handed to an executor, before the store is open: a pool's workers
    score them while this process opens the store and records the run's start. Read
    once, by `run_strategy(..., started=...)`, which checks it is the same run."""

    spec: StrategySpec
    seeds: tuple[int, ...]
    settings: RunSettings
    results: Iterator[SeedResult]


def start_seeds(spec: StrategySpec, seeds: Sequence[int], settings: RunSettings,
                executor: Any) -> StartedSeeds:
    """Submit every seed of an unsandboxed run to `executor` now (a local pool starts
    them at once; the in-process loop still runs them as they are read).

    Raises ConfigurationError, before anything is submitted, for invalid settings or
    seeds; ValueError for a sandboxed run, whose tasks must carry the store's files to
    hide, so they are made once the store is open (`run_strategy` without `started`)."""
    settings.validate()
    validate_seeds(seeds)
    if executor is None:
        raise ValueError("start_seeds needs an executor (a pool or a cluster); in this "
                         "process, seeds are scored as run_strategy reads them")
    if settings.sandbox:
        raise ValueError("a sandboxed run hides its store from the strategy: its seeds "
                         "start once the store is open (run_strategy without started)")
    tasks = [SeedTask(spec, int(seed), settings) for seed in seeds]
    return StartedSeeds(spec, tuple(task.seed for task in tasks), settings,
                        _fan_out(executor, tasks))


def run_strategy(store: Store, spec: StrategySpec, seeds: Sequence[int], settings: RunSettings,
                 *, on_progress: ProgressCallback | None = None, executor: Any = None,
                 run_id: str | None = None, extra_config: dict[str, Any] | None = None,
                 started: StartedSeeds | None = None) -> str:
    """Score `spec` on `seeds`, record everything in `store`, return the run id.
    `started`: the same seeds already submitted by `start_seeds` (then `executor` is
    the one they were submitted to, and nothing is submitted again).

    Raises ConfigurationError, before anything is written, for invalid settings or seeds;
    ValueError when `started` is another strategy's, seeds' or settings' work."""
    settings.validate()
    validate_seeds(seeds)
    if started is not None and (started.spec, started.seeds, started.settings) != (
            spec, tuple(int(seed) for seed in seeds), settings):
        raise ValueError("started seeds are not this run's (another strategy, seeds or "
                         "settings)")
    settings = hiding_the_store(settings, store)
    config = {"strategy": spec.describe(), "settings": settings.to_json_dict(),
              **(extra_config or {})}
    run = stamp_run(suite=SUITE, bench_version=BENCH_VERSION, config=config, seeds=seeds,
                    target={"strategy": spec.name}, run_id=run_id)
    store.begin_run(run)
    _score_into(store, run.run_id, spec, list(seeds), settings, on_progress, executor,
                started.results if started is not None else None)
    return run.run_id


def resume_run(store: Store, run_id: str, *, on_progress: ProgressCallback | None = None,
               executor: Any = None) -> tuple[str, list[int]]:
    """Finish a run that was killed: score only the seeds it has no records for.

    Refuses (ValueError, one line) a run that already ended, one of another suite or
    version, and one whose strategy file changed since (its SHA-256 no longer matches).
    Returns the run id and the seeds that were still missing.
    """
    info = store.run_info(run_id)
    run = info.run
    if run.suite != SUITE or run.bench_version != BENCH_VERSION:
        raise ValueError(f"run {run.run_id} is {run.suite} version {run.bench_version}, "
                         f"not {SUITE} version {BENCH_VERSION}")
    if info.end is not None:
        raise ValueError(f"run {run.run_id} already ended ({info.end.status}); nothing to resume")
    stored = config_as(store.location, run, StoredConfig, "retrieval run")
    recorded = stored.strategy
    if recorded.builtin:
        spec = parse_strategy(str(recorded.name))
    else:
        spec = parse_strategy(f"{recorded.path}:{recorded.object}")
        if spec.source_sha256 != recorded.source_sha256:
            raise ValueError(f"strategy file {spec.path} changed since run {run.run_id} "
                             "started; start a new run instead")
    settings = stored.settings.run_settings()
    done = {summary.trial for summary in store.iter_record_summaries(suite=SUITE,
                                                                    run_id=run.run_id)}
    missing = [seed for seed in run.seeds if seed not in done]
    _score_into(store, run.run_id, spec, missing, settings, on_progress, executor)
    return run.run_id, missing


def _score_into(store: Store, run_id: str, spec: StrategySpec, seeds: list[int],
                settings: RunSettings, on_progress: ProgressCallback | None,
                executor: Any, started: Iterator[SeedResult] | None = None) -> None:
    settings = hiding_the_store(settings, store)
    tasks = [SeedTask(spec, int(seed), settings) for seed in seeds]
    failure: dict[str, Any] | None = None
    if started is not None:
        results = started
    elif executor is None:
        results = (score_one_seed(task, on_progress) for task in tasks)
    else:
        results = _fan_out(executor, tasks)
    for result in results:
        if on_progress and (started is not None or executor is not None):
            on_progress(len(result.cases))  # a pool's seed arrives whole
        _record_seed(store, run_id, spec, result, settings.budget_chars)
        if result.failure and failure is None:
            failure = result.failure
            if executor is None:
                break  # in order: later seeds would only repeat the failure
    # Only here: a run killed above (Ctrl-C, a dead machine) keeps no end, so
    # `resume_run` can finish it later.
    summary: dict[str, Any] = {"failure": failure} if failure else {}
    groups = groups_at_end(store, run_id)
    if groups is not None:
        summary[GROUPS_FIELD] = msgspec.to_builtins(groups)
    store.finish_run(RunEnd(run_id, time.time(), "failed" if failure else "completed", summary))


def groups_at_end(store: Store, run_id: str) -> SeedGroups | None:
    """The run's groups as the store holds them now (`Store.record_groups` over its
    scope), for its end; None when the scope holds records of another run too (a report
    then walks the address index, as for a run ended before this)."""
    groups = store.record_groups(SUITE, run_id)
    if not groups or sum(count for count, _ in groups.values()) != \
            store.run_info(run_id).record_count:
        return None
    return SeedGroups.of(groups)


def hiding_the_store(settings: RunSettings, store: Store) -> RunSettings:
    """Sandboxed settings that also hide this store's files (idempotent)."""
    if not settings.sandbox:
        return settings
    return replace(settings, hidden=tuple(dict.fromkeys((*settings.hidden, *store_files(store)))))


def store_files(store: Store) -> list[str]:
    """The files of a SQLite store (with its journal and WAL files): a sandboxed
    strategy never sees them. A PostgreSQL store is out of reach already (no network)."""
    location = str(getattr(store, "location", "") or "")
    if not location or "://" in location:
        return []
    path = Path(location).expanduser().resolve()
    return [str(path)] + [f"{path}{suffix}" for suffix in ("-wal", "-shm", "-journal")]


def _fan_out(executor: Any, tasks: Sequence[SeedTask]) -> Iterator[SeedResult]:
    """The seeds' results as they end; a local pool starts them here, before the
    first is read (`LocalExecutor.map_unordered`)."""
    from benchwarden.core.executors import TaskFailure

    mapped = executor.map_unordered(score_one_seed, tasks)

    def results() -> Iterator[SeedResult]:
        for index, result in mapped:
            if isinstance(result, TaskFailure):
                yield SeedResult(seed=tasks[index].seed, failure={
                    "seed": tasks[index].seed, "kind": "crash", "reason": result.message})
            else:
                yield result

    return results()


def seed_records(run_id: str, arm: str, seed: int,
                 cases: Sequence[tuple[str, dict[str, Any], float, float]],
                 budget_chars: int) -> list[Record]:
    """One record per case of a seed, in the order scored; the last carries the seed's
    digest (`DIGEST_FIELD`: its scores as `scoring.score_seed` makes them from these
    records, so a report need not read them all)."""
    records = [
        Record(suite=SUITE, scope=run_id, arm=arm, task=case_id, trial=seed,
               run_id=run_id, outcome="pass" if payload["score"] >= 1.0 else "fail",
               started_at=started, ended_at=ended, payload=payload)
        for case_id, payload, started, ended in cases
    ]
    if records:
        outcomes = [CaseOutcome.from_payload(seed, case_id, payload)
                    for case_id, payload, _, _ in cases]
        digest = SeedDigest.of(score_seed(seed, outcomes, budget_chars))
        last = records[-1]
        records[-1] = replace(last, payload={**last.payload,
                                             DIGEST_FIELD: msgspec.to_builtins(digest)})
    return records


def _record_seed(store: Store, run_id: str, spec: StrategySpec, result: SeedResult,
                 budget_chars: int) -> None:
    records = seed_records(run_id, spec.name, result.seed, result.cases, budget_chars)
    if result.failure:
        now = time.time()
        records.append(Record(suite=SUITE, scope=run_id, arm=spec.name, task=FAILURE_TASK,
                              trial=result.seed, run_id=run_id, outcome="error",
                              started_at=now, ended_at=now, payload=result.failure))
    store.append(records)
