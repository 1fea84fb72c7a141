"""The trial lifecycle: a fresh environment per trial, torn down whatever happens;
driver and environment failures are harness errors, never samples."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from benchwarden.core.records import TokenComponents
from benchwarden.suites.arms.agents import Episode, HarnessError
from benchwarden.suites.arms.checkers import Fact, ReadCheck
from benchwarden.suites.arms.tasks import Arm, CheckResult, Suite, Task
from benchwarden.suites.arms.trial import TrialJob, outcome_of, run_trial

EVENTS: list[tuple[str, str]] = []


class RecordingEnvironment:
    """Logs its lifecycle; `boom` in the arm name makes seeding fail."""

    def __init__(self, arm: Arm, directory: Path) -> None:
        self.arm, self.directory = arm, Path(directory)
        self.directory.mkdir(parents=True)
        EVENTS.append(("create", str(self.directory)))

    def seed(self) -> None:
        if "boom" in self.arm.name:
            raise RuntimeError("seed failed")
        (self.directory / "seeded").write_text("yes")

    def capture_state(self):
        return {"files": {p.name: {} for p in self.directory.iterdir()}}

    def destroy(self) -> None:
        EVENTS.append(("destroy", str(self.directory)))

    def agent_env(self):
        return {}

    def functions(self):
        return ()

    def call_function(self, name: str, arguments: Any) -> str:
        raise ValueError("no functions")


SUITE = Suite(
    name="lifecycle", bench_version="1", base_prompt="base",
    arms=(Arm("plain", "shell", "use the shell", allowed_commands=frozenset({"ls"})),
          Arm("boom", "shell", "seeding fails")),
    tasks=(Task("answer", "read", "say yes", ReadCheck((Fact("yes", ("yes",)),))),),
    environment=RecordingEnvironment)


@dataclass(frozen=True)
class ScriptedDriver:
    behaviour: str
    name: str = "scripted"

    def describe(self) -> dict[str, Any]:
        return {"driver": self.name}

    def run(self, context) -> Episode:
        EVENTS.append(("run", str(context.workdir)))
        if self.behaviour == "harness":
            raise HarnessError("server went away")
        if self.behaviour == "crash":
            raise RuntimeError("driver bug")
        transcript = [{"kind": "shell", "command": "ls"}]
        if self.behaviour == "leak":
            transcript.append({"kind": "shell", "command": "python3 -c 1"})
        return Episode("yes", TokenComponents(fresh_input=5), True, 2, transcript, "finished")


def job(behaviour: str, arm: str = "plain", trial: int = 1) -> TrialJob:
    return TrialJob(f"{__name__}:SUITE", arm, "answer", trial, "run-1",
                    ScriptedDriver(behaviour))  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def clear_events():
    EVENTS.clear()


def created_and_destroyed() -> tuple[list[str], list[str]]:
    return ([d for e, d in EVENTS if e == "create"], [d for e, d in EVENTS if e == "destroy"])


@pytest.mark.parametrize("behaviour, kind", [("ok", "sample"), ("leak", "invalid"),
                                             ("harness", "harness_error"),
                                             ("crash", "harness_error")])
def test_every_trial_destroys_its_environment_and_deletes_its_directory(behaviour, kind):
    result = run_trial(job(behaviour))
    assert result.kind == kind
    created, destroyed = created_and_destroyed()
    assert created == destroyed and len(created) == 1
    assert not Path(created[0]).exists()
    assert (result.record is not None) == (kind == "sample")
    if kind == "harness_error":
        assert result.reason in ("server went away", "RuntimeError: driver bug")


def test_a_sample_record_carries_the_cell_address_and_evidence():
    result = run_trial(job("ok", trial=7))
    record = result.record
    assert (record.suite, record.scope, record.arm, record.task, record.trial) == \
        ("arms", "lifecycle", "plain", "answer", 7)
    assert record.outcome == "pass" and record.payload["tier"] == "read"
    assert record.payload["transcript"] == [{"kind": "shell", "command": "ls"}]
    assert record.tokens.fresh_input == 5 and record.payload["turns"] == 2


def test_an_invalid_trial_names_the_leak():
    result = run_trial(job("leak"))
    assert "python3" in result.reason and result.findings[0].startswith("call 2:")


def test_a_failing_environment_is_a_harness_error_and_is_still_destroyed():
    result = run_trial(job("ok", arm="boom"))
    assert result.kind == "harness_error" and "seed failed" in result.reason
    created, destroyed = created_and_destroyed()
    assert created == destroyed and len(created) == 1
    assert not any(event == "run" for event, _ in EVENTS)


def test_environments_are_never_reused_between_trials():
    run_trial(job("ok"))
    run_trial(job("ok"))
    created, _ = created_and_destroyed()
    runs = [d for e, d in EVENTS if e == "run"]
    assert len(set(created)) == 2 and len(set(runs)) == 2


def test_outcome_mapping():
    def episode(stopped: str) -> Episode:
        return Episode("", TokenComponents(output=3), True, 40, [], stopped)  # type: ignore[arg-type]
    passed, failed = CheckResult(True), CheckResult(False, ("wrong",))
    assert outcome_of(episode("finished"), passed) == ("pass", None, ())
    assert outcome_of(episode("finished"), failed) == ("fail", "incorrect", ("wrong",))
    assert outcome_of(episode("turn_cap"), None)[:2] == ("fail", "confused")
    assert outcome_of(episode("wall_clock"), None)[:2] == ("fail", "hung")
