"""The contamination driver: the legs, in order, against one server; every request recorded.

This is the imperative shell: it reads the environment (the API key), the network and
the clock, and writes the store. Scoring happens afterwards, from the store alone
(`report.build_report`), so a run that is re-scored later gives the same answer.

Legs: reachability (no verdict is recorded when it fails) → prime (not scored) →
reference A → reference B → rungs (repeated `repeat` times) → post-check.

Invariants:
- Every request becomes a `Record` as soon as it completes: solo legs one record per
  request, a rung as one batch once all its slots are done, so a killed run never holds
  half a rung and `--resume` re-runs whole rungs only.
- A rung's slots are each built and connected, then released together before any is
  written (`ChatClient.stream_together`), so the client's launch is not what limits
  concurrency (the launch skew, first to last write, is reported).
- The API key comes from the environment variable the user names and is never stored:
  the run records the variable's name only.
- Resuming appends a new run entry (`resumed_from`) whose records go into the original
  run's scope; only missing requests are sent, with the exact bodies stored at the start.
  A scope with nothing left to send (a completed run) is refused, not resumed empty.
- A signal (SIGINT/SIGTERM/SIGHUP, see `core.interrupts`) or any error after the run
  entry is written ends the run "interrupted" with its resume command; a signal then
  surfaces as `RunInterrupted` (exit 130).
- The API key is remembered by the process scrubber (`core.secrets`), so a server that
  echoes it cannot put it into a record or onto the terminal.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

from benchwarden.core import secrets as credentials
from benchwarden.core.errors import ConfigurationError, RunInterrupted
from benchwarden.core.interrupts import last_signal_name, signals_deferred
from benchwarden.core.progress import progress_bar
from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import Record, Run, RunEnd, TokenComponents, canonical_json_many
from benchwarden.core.reports import as_json, store_head_block
from benchwarden.core.store import Store
from benchwarden.suites.contamination.config import (
    CLIENT_BOUNDS,
    MAX_CONCURRENCY,
    ContaminationConfig,
    config_from_run,
)
from benchwarden.suites.contamination.digest import SUMMARY_KEY, RungDigest, as_summary
from benchwarden.suites.contamination.presets import request_body
from benchwarden.suites.contamination.probes import Probe, make_probes
from benchwarden.suites.contamination.scoring import (
    BENCH_VERSION,
    bisect_step,
    rung_label,
    score,
)
from benchwarden.targets import event_loop
from benchwarden.targets.models import choose_model
from benchwarden.targets.openai_client import (
    ChatClient,
    TargetUnreachable,
    normalise_base_url,
)
from benchwarden.targets.replies import RequestOutcome

if TYPE_CHECKING:
    from benchwarden.suites.contamination.report import ContaminationReport

__all__ = ["BENCH_VERSION", "SUITE", "ContaminationConfig", "TargetUnreachable",
           "config_from_run", "run_contamination"]

SUITE = "contamination"
SOLO_LEGS_BEFORE = ("prime", "ref_a", "ref_b")
POST = "post"
# In the cancel scenario every other ballast slot is cut after this many content deltas:
# late enough that the server has scheduled it, early enough to be mid-stream.
CANCEL_AFTER_DELTAS = 4


# -- the plan of a run: everything needed to (re)send its requests -------------------------
@dataclass(frozen=True)
class Plan:
    run_id: str
    scope: str
    bodies: tuple[dict[str, Any], ...]
    concurrency: tuple[int, ...]
    repeat: int
    scenario: str
    bisect: tuple[int, int] | None = None  # --bisect: rungs chosen as the run goes

    @property
    def probes(self) -> int:
        return len(self.bodies)

    def slots(self, level: int) -> int:
        if self.scenario == "cancel":
            # every probe gets at least one ballast twin, so each rung has something to cut
            return max(level, 2 * self.probes)
        return max(level, self.probes)

    def cancel_after(self, slot: int) -> int | None:
        if self.scenario != "cancel" or slot < self.probes:
            return None
        return CANCEL_AFTER_DELTAS if (slot - self.probes) % 2 == 0 else None

    def total_requests(self) -> int:
        """Requests the run sends (for a bisect, the most it can send)."""
        solo = (len(SOLO_LEGS_BEFORE) + 1) * self.probes
        levels = list(self.concurrency)
        if self.bisect is not None:  # the top, then at most log2(range) halvings
            low, high = self.bisect
            levels = [high] * (1 + (high - low).bit_length())
        return solo + self.repeat * sum(self.slots(level) for level in levels)


def _stored_config(config: ContaminationConfig, *, model: str, seed: int, scope: str,
                   probes: Sequence[Probe], bodies: Sequence[dict[str, Any]]) -> dict[str, Any]:
    data = config.to_json_dict()
    data.update(model=model, seed=seed, scope=scope, url=normalise_base_url(config.url),
                probe_set=[{"index": p.index, "canary": p.canary, "topic": p.topic}
                           for p in probes],
                request_bodies=list(bodies), cancel_after_deltas=CANCEL_AFTER_DELTAS)
    return data


# -- records -------------------------------------------------------------------------------
def outcome_word(outcome: RequestOutcome) -> str:
    if outcome.ok:
        return "ok"
    return "cancelled" if outcome.extra.get("cancelled") else "error"


def make_record(plan: Plan, run_id: str, leg: str, task: str, trial: int, probe: int,
                slot: int, outcome: RequestOutcome, cancel_after: int | None,
                level: int | None = None) -> Record:
    reply = outcome.reply
    tokens = TokenComponents()
    if reply is not None:
        cached = reply.cached_prompt_tokens or 0
        tokens = TokenComponents(fresh_input=max(0, (reply.prompt_tokens or 0) - cached),
                                 cache_read=cached, output=reply.completion_tokens)
    timings = outcome.timings
    return Record(
        suite=SUITE, scope=plan.scope, arm=leg, task=task, trial=trial, run_id=run_id,
        outcome=outcome_word(outcome), started_at=timings.sent_at,
        ended_at=timings.last_byte_at or timings.sent_at, tokens=tokens,
        payload={"probe": probe, "slot": slot, "cancel_after_deltas": cancel_after,
                 "outcome": outcome.to_json_dict(),
                 **({} if level is None else {"level": level})})


# -- running -------------------------------------------------------------------------------
Tick = Callable[[str, int], None]


async def _fire_rung(client: ChatClient, plan: Plan, level: int,
                     tick: Callable[[], None]) -> list[RequestOutcome]:
    # Every slot is built and holds its connection before any is written, then all are
    # released together: the launch skew is only the writes (ChatClient.stream_together).
    requests = [(plan.bodies[index % plan.probes], plan.cancel_after(index))
                for index in range(plan.slots(level))]
    return await client.stream_together(requests, on_each_done=tick)


def digests_as_stored(records: Sequence[Record]) -> list[RungDigest]:
    """The digests (`report.digest_of`) of a rung's records just appended, counted from
    the records as the store keeps them: the store writes `canonical_json(scrub_entry(
    record))` for a record whose JSON may hold a remembered secret (`core.store`), and a
    digest fingerprints scored replies' stored bytes, so such a record is scrubbed here
    the same way first. A process that remembers no secret counts them as they are."""
    from benchwarden.suites.contamination.report import digest_of

    if not credentials.process_scrubber():
        return digest_of(records)
    bodies = canonical_json_many(list(records))
    if not credentials.may_alter_json(b"\n".join(bodies)):
        return digest_of(records)
    return digest_of([credentials.scrub_entry(record) if credentials.may_alter_json(body)
                      else record for record, body in zip(records, bodies, strict=True)])


async def _drive(open_client: Callable[[], ChatClient], plan: Plan, store: Store,
                 done: set[tuple[str, str, int]], advance: Tick,
                 warn: Callable[[str], None], digests: list[RungDigest]) -> None:
    """Run the legs. Every solo request and every rung gets a fresh client (so fresh
    connections): a server that closes keep-alive connections between replies
    (llama-server does) must not turn a reused, dead connection into a failed request.
    Each rung's digest is added to `digests` once its records are stored (the run end
    keeps them: `digest`)."""
    run_id = plan.run_id

    async def solo(leg: str) -> None:
        for probe, body in enumerate(plan.bodies):
            if (leg, str(probe), 1) in done:
                advance(leg, 1)
                continue
            async with open_client() as client:
                outcome = await client.stream_chat(body)
            store.append([make_record(plan, run_id, leg, str(probe), 1, probe, probe,
                                      outcome, None)])
            advance(leg, 1)
            if leg == "prime" and not outcome.ok:
                warn(f"prime of probe {probe} failed ({outcome.error}); later legs may "
                     "start cache-cold")

    async def rung(level: int, repetition: int) -> None:
        label = rung_label(level)
        slots = plan.slots(level)
        if (label, "0", repetition) in done:  # rungs are written whole
            advance(label, slots)
            return
        async with open_client() as client:
            outcomes = await _fire_rung(client, plan, level, lambda: advance(label, 1))
        records = [
            make_record(plan, run_id, label,
                        str(index) if index < plan.probes else f"ballast-{index}",
                        repetition, index % plan.probes, index, outcome,
                        plan.cancel_after(index), level)
            for index, outcome in enumerate(outcomes)]
        store.append(records)
        digests.extend(digests_as_stored(records))

    for leg in SOLO_LEGS_BEFORE:
        await solo(leg)
    if plan.bisect is not None:
        await _bisect(plan, store, rung)
    for repetition in range(1, plan.repeat + 1):
        for level in plan.concurrency:
            await rung(level, repetition)
    await solo(POST)


async def _bisect(plan: Plan, store: Store,
                  rung: Callable[[int, int], Awaitable[None]]) -> None:
    """Run rungs chosen by `scoring.bisect_step` from what the stored rungs showed, until
    the smallest diverging concurrency in the range is found (or none can be)."""
    from benchwarden.suites.contamination.report import (
        PAYLOAD_FIELDS,
        bisect_progress,
        legs_from_records,
    )

    assert plan.bisect is not None
    low, high = plan.bisect
    while True:
        run = store.run_info(plan.run_id).run
        config = {**run.config, "bisect": [low, high]}
        shown = bisect_progress(score(legs_from_records(store.iter_record_summaries(
            suite=SUITE, scope=plan.scope, payload_fields=PAYLOAD_FIELDS), config)))
        level, _ = bisect_step(low, high, shown)
        if level is None:
            return
        await rung(level, 1)


async def _reach(client: ChatClient) -> list[str]:
    return await client.list_models(timeout=10.0)


async def _logprobs_refused(config: ContaminationConfig, api_key: str | None,
                            body: dict[str, Any]) -> str | None:
    """One short request with the logprob fields, before the run begins: why the server
    refused it (HTTP 400 or 422), or None. Only those drop the fields: other failures
    are the run's to record, and a server that ignores the fields costs nothing."""
    async with ChatClient(config.url, api_key=api_key, request_timeout=config.request_timeout,
                          **config.client_bounds()) as client:
        outcome = await client.stream_chat(body)
    if outcome.status in (400, 422):  # a bad request: the fields it does not take
        return f"the server refused logprobs: {outcome.error}"
    return None


def _api_key(config: ContaminationConfig) -> str | None:
    if not config.api_key_env:
        return None
    key = os.environ.get(config.api_key_env)
    if not key:
        raise ValueError(f"environment variable {config.api_key_env} (from --api-key-env) "
                         "is not set or empty")
    # from here on, the store and the terminal replace the key wherever it shows up
    credentials.remember(key, source=f"the key in {config.api_key_env} (--api-key-env)")
    return key


def resume_hint(run_id: str) -> str:
    return f"benchwarden contamination --resume {run_id}"


def refuse_finished_scope(store: Store, original: Run) -> None:
    """`--resume` of a run with nothing left to measure is a usage error, not a new,
    empty run: the run (or a later resume of it) completed, or every request is stored."""
    scope = str(original.config.get("scope", original.run_id))
    # only the scope of each run's config is read (a run's config holds its request
    # bodies: a store of many runs held every one of them to answer this)
    completed = [info.run.run_id for info in store.runs_with_config(SUITE, ("scope",))
                 if info.end is not None and info.end.status == "completed"
                 and str(info.run.config.get("scope", info.run.run_id)) == scope]
    if completed:
        finished_by = "" if completed == [original.run_id] else f" (by run {completed[-1]})"
        raise ConfigurationError(
            f"run {original.run_id} is already complete{finished_by}; nothing to resume "
            f"(`benchwarden show {completed[-1]}` shows its report)")
    config = original.config
    plan = Plan(original.run_id, scope, tuple(config.get("request_bodies") or ()),
                tuple(config.get("concurrency") or ()), int(config.get("repeat", 1)),
                str(config.get("scenario", "shared-prefix")))
    # counted over slim summaries (a page at a time, no reply decoded)
    stored = sum(1 for _ in store.iter_record_summaries(suite=SUITE, scope=scope))
    if plan.probes and not config.get("bisect") and stored >= plan.total_requests():
        raise ConfigurationError(
            f"run {original.run_id} already holds all {stored} requests it plans (it "
            f"stopped before recording its end); nothing to resume: `benchwarden show "
            f"{original.run_id}` shows its report")


def run_contamination(config: ContaminationConfig, store: Store, *, progress: bool = True,
                      resume: str | None = None,
                      console: Console | None = None) -> ContaminationReport:
    """Run (or resume) the suite against `config.url`; return its typed report.

    Raises ValueError (bad configuration), TargetUnreachable (no 200 from /v1/models
    within 10 s: nothing is recorded) and StoreError; request failures never raise.
    With `resume`, the stored run's configuration is used, except the URL and the API
    key variable, which come from `config` (the server may have moved).
    """
    from benchwarden.suites.contamination.report import build_report

    console = console or Console(stderr=True)
    config.validate()
    api_key = _api_key(config)
    original: Run | None = None
    if resume is not None:
        original = store.run_info(resume).run
        if original.suite != SUITE:
            raise ValueError(f"run {original.run_id} is a {original.suite} run, "
                             "not a contamination run")
        refuse_finished_scope(store, original)
        stored = config_from_run(original, store.location)
        # where the server is, its key and the client's limits come from the caller
        # (the CLI passes the stored limits unless new ones were given)
        config = dataclasses.replace(stored, url=config.url, api_key_env=config.api_key_env,
                                     request_timeout=config.request_timeout,
                                     **{name: getattr(config, name) for name in CLIENT_BOUNDS})

    async def reach() -> list[str]:
        async with ChatClient(config.url, api_key=api_key, request_timeout=config.request_timeout,
                              **config.client_bounds()) as client:
            return await _reach(client)

    models = event_loop.run(reach())
    if original is not None:
        run_config = dict(original.config)
        run_config.update(url=normalise_base_url(config.url), api_key_env=config.api_key_env,
                          request_timeout=config.request_timeout,
                          **{name: getattr(config, name) for name in CLIENT_BOUNDS})
        run = stamp_run(suite=SUITE, bench_version=BENCH_VERSION, config=run_config,
                        seeds=original.seeds, target={"url": run_config["url"],
                                                      "model": run_config["model"]},
                        resumed_from=original.run_id)
        scope = str(run_config["scope"])
        bodies = tuple(run_config["request_bodies"])
    else:
        model = choose_model(models, config.model, any_model=config.any_model, url=config.url)
        seed = config.seed if config.seed is not None else secrets.randbits(32)
        probes = make_probes(seed, config.probes, config.scenario)
        top_logprobs = config.top_logprobs()
        refused = None
        if top_logprobs:
            refused = event_loop.run(_logprobs_refused(config, api_key, request_body(
                model=model, prompt=probes[0].prompt, max_tokens=2, preset=config.preset,
                extra=config.extra_body, top_logprobs=top_logprobs)))
            if refused is not None:
                console.print(f"[yellow]warning:[/] {escape(refused)}: running without "
                              "token logprobs")
                top_logprobs = 0
        bodies = tuple(request_body(model=model, prompt=p.prompt, max_tokens=config.max_tokens,
                                    preset=config.preset, extra=config.extra_body,
                                    top_logprobs=top_logprobs)
                       for p in probes)
        run = stamp_run(suite=SUITE, bench_version=BENCH_VERSION, config={}, seeds=(seed,),
                        target={"url": normalise_base_url(config.url), "model": model})
        scope = run.run_id
        run = dataclasses.replace(run, config={**_stored_config(
            config, model=model, seed=seed, scope=scope, probes=probes, bodies=bodies),
            "logprobs": top_logprobs, "logprobs_unavailable": refused})
        run_config = dict(run.config)
    bisect = run_config.get("bisect")
    plan = Plan(run.run_id, scope, bodies,
                () if bisect else tuple(run_config["concurrency"]),
                int(run_config["repeat"]), str(run_config["scenario"]),
                (int(bisect[0]), int(bisect[1])) if bisect else None)
    store.begin_run(run)
    done = {(r.arm, r.task, r.trial)
            for r in store.iter_record_summaries(suite=SUITE, scope=scope)}

    columns = (TextColumn("[bold]{task.description:>6}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("requests"), TimeElapsedColumn())
    with progress_bar(*columns, console=console, transient=True, disable=not progress) as bar:
        task = bar.add_task("reach", total=plan.total_requests())

        def advance(leg: str, count: int) -> None:
            bar.update(task, description=leg, advance=count)

        def warn(message: str) -> None:
            console.print(f"[yellow]warning:[/] {escape(credentials.scrub(message))}")

        def open_client() -> ChatClient:
            return ChatClient(config.url, api_key=api_key, request_timeout=config.request_timeout,
                              max_connections=max(1024, 2 * MAX_CONCURRENCY),
                              **config.client_bounds())

        digests: list[RungDigest] = []

        async def drive() -> None:
            await _drive(open_client, plan, store, done, advance, warn, digests)

        try:
            event_loop.run(drive())
            report = build_report(store, run.run_id, kept=digests)
        except BaseException as error:  # a signal, a store error: keep what was measured
            _end_interrupted(store, run.run_id, resume_hint(plan.scope), error, digests)
            if isinstance(error, KeyboardInterrupt):
                raise RunInterrupted(
                    f"run {run.run_id} stopped; what it measured is kept; resume with "
                    f"`{resume_hint(plan.scope)}`") from None
            raise
    plain = as_json(report)  # built once (above): the end only changes its run block
    end = RunEnd(run.run_id, time.time(), "completed",
                 {"verdict": plain["verdict"], "score": plain["score"],
                  SUMMARY_KEY: as_summary(digests)})
    with signals_deferred():  # a signal now lands after the end is recorded, not inside it
        store.finish_run(end)
    return report.ended(run, end, store_head_block(store))


def _end_interrupted(store: Store, run_id: str, hint: str, error: BaseException,
                     digests: Sequence[RungDigest] = ()) -> None:
    """Record the run end "interrupted" (signals held back while it is written), with the
    digests of the rungs stored; a store that refuses it too leaves the run without an
    end, which `--resume` also accepts (its rungs are then read from their records)."""
    reason = (f"signal {last_signal_name()}" if isinstance(error, KeyboardInterrupt)
              else f"{type(error).__name__}: {error}")
    with signals_deferred():
        try:
            store.finish_run(RunEnd(run_id, time.time(), "interrupted",
                                    {"error": reason[:300], "resume": hint,
                                     SUMMARY_KEY: as_summary(digests)}))
        except Exception:  # noqa: BLE001 - the original error is the one to report
            pass
