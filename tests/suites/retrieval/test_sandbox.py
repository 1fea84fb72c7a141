"""The sandbox stops hostile strategies with the right reason and never crashes the
harness; a polite strategy works through it unchanged."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchwarden.suites.retrieval.corpus import generate
from benchwarden.suites.retrieval.driver import RunSettings, SeedTask, score_one_seed
from benchwarden.suites.retrieval.sandbox import SandboxFailure, SandboxedStrategy, SandboxLimits
from benchwarden.suites.retrieval.strategies import parse_strategy

HOSTILE = Path(__file__).with_name("strategy_files") / "hostile.py"
EXAMPLE = Path(__file__).with_name("strategy_files") / "entity_first.py"
# small limits keep the suite fast; the wall clock is generous because the CI machine
# is shared, so CPU seconds are what a busy loop exhausts first
LIMITS = SandboxLimits(wall_seconds=60, cpu_seconds=5, memory_mb=512, open_files=32)
TIGHT_CPU = SandboxLimits(wall_seconds=60, cpu_seconds=1, memory_mb=512, open_files=32)
SESSIONS = list(generate(1).sessions)


def run_hostile(name: str, limits: SandboxLimits = LIMITS) -> SandboxFailure:
    strategy = SandboxedStrategy(str(HOSTILE), name, limits)
    try:
        with pytest.raises(SandboxFailure) as caught:
            strategy.index(SESSIONS)
            strategy.pack("What is it?", 10, 2000)
    finally:
        strategy.close()
    assert strategy.process is None
    return caught.value


@pytest.mark.parametrize("name, kind", [
    ("OpensSocket", "network"),
    ("SwallowsRefusal", "network"),
    ("SpawnsProcess", "subprocess"),
    ("CallsSystem", "subprocess"),
    ("UsesForkHelper", "subprocess"),
    ("WritesFile", "file_write"),
    ("RemovesFile", "file_write"),
    ("ReadsSecrets", "file_read"),
    ("ImportsCtypes", "native_code"),
    ("ImportsNumpy", "native_code"),
    ("AllocatesWithoutBound", "memory"),
    ("OpensManyFiles", "open_files"),
    ("LoopsForever", "cpu"),
    ("Crashes", "crash"),
    ("RaisesLimits", "limits"),
    ("ReturnsGarbage", "protocol"),
    ("Missing", "load_error"),
])
def test_hostile_strategy_is_stopped_with_the_right_reason(name, kind):
    failure = run_hostile(name, TIGHT_CPU if kind == "cpu" else LIMITS)
    assert failure.kind == kind, failure.reason
    assert failure.reason.startswith("sandbox: ") and "\n" not in failure.reason


def test_the_file_was_not_written():
    run_hostile("WritesFile")
    assert not os.path.exists("/tmp/benchwarden-sandbox-should-not-exist.txt")


def test_wall_clock_stops_a_strategy_that_sleeps():
    failure = run_hostile("Sleeps", SandboxLimits(wall_seconds=2, cpu_seconds=5,
                                                  memory_mb=512, open_files=32))
    assert failure.kind == "wall_clock"


def test_prints_go_to_stderr_not_into_the_protocol():
    strategy = SandboxedStrategy(str(HOSTILE), "PrintsToStdout", LIMITS)
    with strategy:
        strategy.index(SESSIONS)
        items = strategy.pack("q", 10, 2000)
    assert items and items[0].source == (0, 0, len(items[0].text))


def test_a_sandboxed_strategy_scores_like_it_does_in_process():
    spec = parse_strategy(f"{EXAMPLE}:EntityFirst")
    inside = score_one_seed(SeedTask(spec, 2, RunSettings(sandbox=True, sandbox_limits=LIMITS)))
    outside = score_one_seed(SeedTask(spec, 2, RunSettings(sandbox=False)))
    assert inside.failure is None
    assert [p for _, p, _, _ in inside.cases] == [p for _, p, _, _ in outside.cases]


def test_a_sandbox_failure_ends_the_run_with_a_recorded_reason_not_an_exception():
    spec = parse_strategy(f"{HOSTILE}:OpensSocket")
    result = score_one_seed(SeedTask(spec, 1, RunSettings(sandbox=True, sandbox_limits=LIMITS)))
    assert result.cases == []
    assert result.failure["kind"] == "network"
    assert "refused network access" in result.failure["reason"]


def test_the_harness_environment_does_not_reach_the_strategy(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-should-not-leak")
    strategy = SandboxedStrategy(str(HOSTILE), "ReadsEnvironment", LIMITS)
    with strategy:
        strategy.index(SESSIONS)
        items = strategy.pack("q", 10, 2000)
    assert "sk-test-should-not-leak" not in items[0].text
    assert "OPENAI_API_KEY" not in items[0].text
