"""One trial, start to finish: the lifecycle every sample goes through.

fresh directory and environment (never reused) → seed → capture the seeded state →
start the trial's boundary (shell and mcp arms: one sandbox holding the environment's
services and, later, every shell command or MCP server; see `boundary`) → run the
agent under the turn cap and the wall clock → stop the boundary (nothing the agent
started survives) → audit the transcript → capture the final state from the data →
check → build the record → destroy the environment and delete the directory (always,
in `finally`, whatever happened).

The final state is captured by the harness after the boundary is gone, from the data
alone (never by running a program the agent could reach); when the agent left it
unreadable, the trial fails as `incorrect` with that reason.

A `TrialJob` is plain, picklable data (the suite travels as its spec string), so
trials can fan out over any executor; the parent process alone writes the store.

Outcomes of a trial:
- `sample`: a record to append (pass, or fail tagged incorrect / confused / hung);
- `invalid`: the audit found a call outside the arm's channel; never a sample;
- `harness_error`: the driver, the server or the environment failed; never a sample
  and never counted as an agent failure.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from benchwarden.core.records import Record
from benchwarden.core.verdicts import one_line
from benchwarden.suites.arms.agents import (
    AgentContext,
    CommandDriver,
    Episode,
    HarnessError,
    Limits,
    OpenAIDriver,
    Toolbox,
)
from benchwarden.suites.arms.boundary import SandboxFailure, TrialSandbox, trial_limits
from benchwarden.suites.arms.isolation import NetworkChannel, audit_transcript
from benchwarden.suites.arms.tasks import (
    FAIL,
    PASS,
    SUITE_NAME,
    CheckResult,
    Suite,
    load_suite,
)

TrialKind = Literal["sample", "invalid", "harness_error"]


@dataclass(frozen=True)
class TrialJob:
    suite_spec: str
    arm: str
    task: str
    trial: int
    run_id: str
    driver: OpenAIDriver | CommandDriver
    limits: Limits = Limits()
    seed: int | None = None
    isolation: str = "bwrap"
    """`bwrap` (the boundary) or `none` (explicitly chosen, unsafe)."""
    hidden: tuple[str, ...] = ()
    """Paths the boundary hides besides the defaults (the run's store)."""


@dataclass(frozen=True)
class TrialResult:
    arm: str
    task: str
    trial: int
    kind: TrialKind
    record: Record | None = None
    reason: str = ""
    findings: tuple[str, ...] = field(default_factory=tuple)


@functools.lru_cache(maxsize=8)
def _suite(spec: str) -> Suite:
    return load_suite(spec)


def outcome_of(episode: Episode, check: Any) -> tuple[str, str | None, tuple[str, ...]]:
    """(outcome, failure tag, reasons). Pure. A stopped episode is never checked."""
    if episode.stopped == "wall_clock":
        return FAIL, "hung", ("hit the wall clock",)
    if episode.stopped == "turn_cap":
        return FAIL, "confused", (f"hit the turn cap after {episode.turns} turns",)
    if check.passed:
        return PASS, None, ()
    return FAIL, "incorrect", tuple(check.reasons) or ("the checker rejected the result",)


def run_trial(job: TrialJob) -> TrialResult:
    suite = _suite(job.suite_spec)
    arm = suite.arm(job.arm)
    task = suite.task(job.task)
    root = Path(tempfile.mkdtemp(prefix=f"bw-arms-{arm.name}-{task.id}-"))
    environment = None
    sandbox: TrialSandbox | None = None
    try:
        environment = suite.environment(arm, root / "environment")
        environment.seed()
        seeded = environment.capture_state()
        workdir = root / "work"
        workdir.mkdir()
        home = root / "home"  # empty and read-only inside the boundary
        home.mkdir()
        agent_env = environment.agent_env()
        # optional for user environments: without it, network tools are gated by name only
        origins = getattr(environment, "network_origins", lambda: ())()
        channel = NetworkChannel.of(origins, agent_env)
        mcp_servers = list(getattr(environment, "mcp_servers", lambda: ())())
        if arm.channel in ("shell", "mcp"):
            read_only = [Path(p) for p in getattr(environment, "read_only_paths", lambda: ())()]
            sandbox = TrialSandbox(
                job.isolation, root, read_only=[*read_only, home],
                hidden=[Path(p) for p in job.hidden], limits=trial_limits(job.limits.wall_clock),
                # an external agent needs its model endpoint: see docs/arms.md
                host_network=isinstance(job.driver, CommandDriver))
            sandbox.start(getattr(environment, "services", lambda: ())())
        toolbox = Toolbox(arm, workdir, agent_env, environment.functions(),
                          environment.call_function, job.limits.command_timeout, channel,
                          runner=sandbox, home=home, mcp_servers=mcp_servers)
        context = AgentContext(suite.prompt_for(arm), task.intent, arm, task.id, workdir,
                               toolbox, job.limits, job.seed, job.trial)
        started = time.time()
        episode = job.driver.run(context)
        ended = time.time()
        started = max(started, episode.began_at or started)  # MCP servers' start excluded
        if sandbox is not None:
            sandbox.close()  # every process of the trial ends before its state is read
        findings = audit_transcript(episode.transcript, arm,
                                    (f.name for f in environment.functions()), channel,
                                    mcp_servers=(server.name for server in mcp_servers))
        if findings:
            return TrialResult(arm.name, task.id, job.trial, "invalid",
                               reason=f"isolation leak: {findings[0].reason}",
                               findings=tuple(f"call {f.index + 1}: {f.reason}" for f in findings))
        check = None
        if episode.stopped == "finished":
            try:
                final = environment.capture_state()
            except Exception as error:  # the agent damaged its own data: its failure
                check = CheckResult(False, (one_line(
                    f"the final state cannot be read ({type(error).__name__}: {error})", 300),))
            else:
                check = task.checker.check(report=episode.final_report, seeded=seeded,
                                           final=final)
        outcome, failure, reasons = outcome_of(episode, check)
        record = Record(
            suite=SUITE_NAME, scope=suite.name, arm=arm.name, task=task.id, trial=job.trial,
            run_id=job.run_id, outcome=outcome, started_at=started, ended_at=ended,
            tokens=episode.tokens,
            payload={
                "tier": task.tier,
                "failure": failure,
                "reasons": list(reasons),
                "turns": episode.turns,
                "stopped": episode.stopped,
                "final_report": episode.final_report,
                "transcript": episode.transcript,
                "denied_calls": sum(1 for e in episode.transcript if e.get("denied")),
                "tokens_reported": episode.tokens_reported,
                "imputed_cost_usd": episode.imputed_cost_usd,
                "driver": job.driver.name,
                "model": episode.model,
                "isolation": job.isolation if sandbox is not None else "no shell",
                "bench_version": suite.bench_version,
            })
        return TrialResult(arm.name, task.id, job.trial, "sample", record=record)
    except (HarnessError, SandboxFailure) as error:
        return TrialResult(arm.name, task.id, job.trial, "harness_error",
                           reason=one_line(str(error), 300))
    except Exception as error:  # an environment or checker crash is the harness's fault too
        return TrialResult(arm.name, task.id, job.trial, "harness_error",
                           reason=one_line(f"{type(error).__name__}: {error}", 300))
    finally:
        if sandbox is not None:
            sandbox.close()
        if environment is not None:
            try:
                environment.destroy()
            except Exception:
                pass
        shutil.rmtree(root, ignore_errors=True)
