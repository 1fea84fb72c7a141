"""The retrieval sandbox, for real: strategies run inside bubblewrap, and every hostile
act is proven absent by a marker file or a listener that must stay untouched. What
real memory systems need (C extensions, threads, files in the scratch folder) works.
The arena (marker, listener, ledger, store) is in `arena.py`.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from benchwarden.core import sandbox as core_sandbox
from benchwarden.suites.retrieval.corpus import generate
from benchwarden.suites.retrieval.driver import RunSettings, SeedTask, score_one_seed
from benchwarden.suites.retrieval.sandbox import SandboxedStrategy, SandboxFailure, SandboxLimits
from benchwarden.suites.retrieval.strategies import parse_strategy
from tests.suites.retrieval.arena import SECRET, Arena, bwrap_or_skip, make_arena

FILES = Path(__file__).with_name("strategy_files")
MISBEHAVING = FILES / "misbehaving.py"
EXAMPLE = FILES / "entity_first.py"
# Small limits keep the suite fast; the wall clock is generous because the CI machine
# is shared, so CPU seconds are what a busy loop exhausts first.
LIMITS = SandboxLimits(wall_seconds=90, cpu_seconds=10, memory_mb=1024, open_files=64)
SESSIONS = list(generate(1).sessions)


@pytest.fixture()
def arena():
    with make_arena() as made:
        yield made


def hostile(arena: Arena, name: str, limits: SandboxLimits = LIMITS) -> SandboxedStrategy:
    return SandboxedStrategy(str(arena.strategy), name, limits, hidden=arena.hidden())


def run_to_failure(strategy: SandboxedStrategy) -> SandboxFailure:
    try:
        with pytest.raises(SandboxFailure) as caught:
            strategy.index(SESSIONS)
            strategy.pack("What is it?", 10, 2000)
    finally:
        strategy.close()
    assert strategy.process is None and strategy.scratch is None
    failure = caught.value
    assert failure.reason.startswith("sandbox: ") and "\n" not in failure.reason
    return failure


def run_contained(strategy: SandboxedStrategy) -> list:
    with strategy:
        strategy.index(SESSIONS)
        return strategy.pack("What is it?", 10, 2000)


# -- hostile acts: each stopped, or contained, never acting --------------------------

def test_a_write_outside_the_scratch_folder_is_refused_by_the_file_system(arena):
    failure = run_to_failure(hostile(arena, "WritesOutsideScratch"))
    assert failure.kind == "strategy_error" and "Read-only file system" in failure.reason
    arena.untouched()


def test_a_strategy_cannot_rewrite_its_own_folder(arena):
    failure = run_to_failure(hostile(arena, "WritesBesideItself"))
    assert "Read-only file system" in failure.reason
    assert not (arena.strategy.parent / "planted.py").exists()


def test_a_socket_to_a_listener_outside_never_connects(arena):
    failure = run_to_failure(hostile(arena, "ConnectsOut"))
    assert failure.kind == "strategy_error"
    assert "Connection refused" in failure.reason or "unreachable" in failure.reason
    arena.untouched()


def test_a_unix_socket_outside_is_not_connectable(arena):
    failure = run_to_failure(hostile(arena, "ConnectsToUnixSocket"))
    assert "Connection refused" in failure.reason
    arena.untouched()


def test_a_subprocess_that_tries_to_escape_runs_contained_and_dies_with_the_sandbox(arena):
    strategy = hostile(arena, "SubprocessEscapes")
    with strategy:
        strategy.index(SESSIONS)
        assert strategy.pack("q", 10, 2000)  # the strategy went on: its child ran, reached nothing
        deadline = time.monotonic() + 20  # it starts in the background: give it time
        while not sleepers() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sleepers(), "the detached sleeper should be running while the seed runs"
    deadline = time.monotonic() + 10
    while sleepers() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not sleepers()  # the detached process died with the sandbox
    arena.untouched()


def sleepers() -> list[str]:
    """Processes anywhere on the machine still running the hostile `sleep 31.337`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as stream:
                command = stream.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if command.startswith("sleep 31.337"):
            found.append(entry)
    return found


def test_ctypes_calling_libc_system_is_contained(arena):
    items = run_contained(hostile(arena, "CtypesSystem"))
    assert items
    arena.untouched()


def test_ctypes_writing_through_a_bad_pointer_crashes_only_the_child(arena):
    failure = run_to_failure(SandboxedStrategy(str(MISBEHAVING), "CtypesWritesMemory", LIMITS))
    assert failure.kind == "crash" and "SIGSEGV" in failure.reason


def test_the_ledger_and_the_store_are_hidden(arena):
    items = run_contained(hostile(arena, "ReadsSecrets"))
    text = items[0].text
    assert SECRET not in text and "SQLite" not in text and "prev_hash" not in text
    assert text.count("unreadable") == 3, text


def test_system_secrets_outside_home_are_covered():
    bwrap_or_skip()
    if not os.access("/etc/shadow", os.R_OK):
        pytest.skip("/etc/shadow is not readable here anyway (not root)")
    import subprocess

    strategy = SandboxedStrategy(str(MISBEHAVING), "Polite", LIMITS)
    inside = subprocess.run(strategy.boundary("/var/tmp").argv(["cat", "/etc/shadow"]),
                            capture_output=True, text=True, timeout=60)
    assert inside.returncode != 0 and inside.stdout == ""


def test_an_endless_loop_hits_the_cpu_limit():
    bwrap_or_skip()
    limits = SandboxLimits(wall_seconds=90, cpu_seconds=1, memory_mb=1024, open_files=64)
    failure = run_to_failure(SandboxedStrategy(str(MISBEHAVING), "LoopsForever", limits))
    assert failure.kind == "cpu", failure.reason


def test_a_sleeping_strategy_hits_the_wall_clock():
    bwrap_or_skip()
    limits = SandboxLimits(wall_seconds=3, cpu_seconds=10, memory_mb=1024, open_files=64)
    failure = run_to_failure(SandboxedStrategy(str(MISBEHAVING), "Sleeps", limits))
    assert failure.kind == "wall_clock"


def test_unbounded_allocation_hits_the_address_space_cap():
    bwrap_or_skip()
    failure = run_to_failure(SandboxedStrategy(str(MISBEHAVING), "AllocatesWithoutBound", LIMITS))
    assert failure.kind == "memory", failure.reason


@pytest.mark.parametrize("name, kind", [
    ("Crashes", "crash"),
    ("ReturnsGarbage", "protocol"),
    ("Missing", "load_error"),
    ("RaisesInPack", "strategy_error"),
])
def test_broken_strategies_end_with_the_right_reason(name, kind):
    bwrap_or_skip()
    failure = run_to_failure(SandboxedStrategy(str(MISBEHAVING), name, LIMITS))
    assert failure.kind == kind, failure.reason


def test_a_strategy_error_carries_file_line_and_traceback():
    bwrap_or_skip()
    failure = run_to_failure(SandboxedStrategy(str(MISBEHAVING), "RaisesInPack", LIMITS))
    assert "KeyError" in failure.reason and "misbehaving.py:" in failure.reason
    assert "in helper" in failure.traceback_text and "Traceback" in failure.traceback_text


def test_the_harness_environment_does_not_reach_the_strategy(monkeypatch):
    bwrap_or_skip()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-should-not-leak")
    items = run_contained(SandboxedStrategy(str(MISBEHAVING), "ReadsEnvironment", LIMITS))
    assert "sk-test-should-not-leak" not in items[0].text
    assert "OPENAI_API_KEY" not in items[0].text
    assert "BENCHWARDEN_SCRATCH=" in items[0].text


# -- what real systems need works ----------------------------------------------------

@pytest.mark.parametrize("isolation", ["bwrap", "none"])
def test_c_extensions_threads_and_scratch_files_work(isolation):
    if isolation == "bwrap":
        bwrap_or_skip()
    items = run_contained(SandboxedStrategy(str(MISBEHAVING), "UsesRealParts", LIMITS,
                                            isolation=isolation))
    report = items[0].text
    assert "libyaml=True" in report and "pydantic_core=" in report
    assert "thread ran" in report and "file={'written': True}" in report and "cwd=True" in report


def test_the_scratch_folder_is_fresh_per_child_and_removed_after():
    bwrap_or_skip()
    first = SandboxedStrategy(str(MISBEHAVING), "Polite", LIMITS)
    second = SandboxedStrategy(str(MISBEHAVING), "Polite", LIMITS)
    first.index(SESSIONS)
    second.index(SESSIONS)
    folders = [first.scratch, second.scratch]
    assert folders[0] != folders[1] and all(os.path.isdir(folder) for folder in folders)
    first.close()
    second.close()
    assert not any(os.path.exists(folder) for folder in folders)


def test_the_strategy_close_hook_runs_inside_the_boundary():
    bwrap_or_skip()
    seen: list[bool] = []

    class Watching(SandboxedStrategy):
        def _stop(self) -> None:
            if self.scratch:
                seen.append(os.path.exists(os.path.join(self.scratch, "closed")))
            super()._stop()

    strategy = Watching(str(MISBEHAVING), "Closes", LIMITS)
    strategy.index(SESSIONS)
    strategy.close()
    assert seen == [True]


def test_prints_go_to_stderr_not_into_the_protocol():
    bwrap_or_skip()
    items = run_contained(SandboxedStrategy(str(MISBEHAVING), "PrintsToStdout", LIMITS))
    assert items and items[0].source == (0, 0, len(items[0].text))


def test_a_sandboxed_strategy_scores_like_it_does_in_process():
    bwrap_or_skip()
    spec = parse_strategy(f"{EXAMPLE}:EntityFirst")
    inside = score_one_seed(SeedTask(spec, 2, RunSettings(sandbox=True, sandbox_limits=LIMITS)))
    outside = score_one_seed(SeedTask(spec, 2, RunSettings(sandbox=False)))
    assert inside.failure is None
    assert [p for _, p, _, _ in inside.cases] == [p for _, p, _, _ in outside.cases]


def test_a_sandboxed_builtin_scores_like_it_does_in_process():
    bwrap_or_skip()
    spec = parse_strategy("bm25")
    inside = score_one_seed(SeedTask(spec, 3, RunSettings(sandbox=True, sandbox_limits=LIMITS)))
    outside = score_one_seed(SeedTask(spec, 3, RunSettings(sandbox=False)))
    assert inside.failure is None
    assert [p for _, p, _, _ in inside.cases] == [p for _, p, _, _ in outside.cases]


# -- failures are records, never exceptions; no silent fallback ------------------------

def test_a_sandbox_failure_ends_the_run_with_a_recorded_reason_not_an_exception():
    bwrap_or_skip()
    spec = parse_strategy(f"{MISBEHAVING}:RaisesInPack")
    result = score_one_seed(SeedTask(spec, 1, RunSettings(sandbox=True, sandbox_limits=LIMITS)))
    assert result.cases == []
    assert result.failure["kind"] == "strategy_error"
    assert result.failure["case"]
    assert f"on case {result.failure['case']}" in result.failure["reason"]
    assert "KeyError" in result.failure["reason"]
    assert "in helper" in result.failure["traceback"]


def test_a_missing_bwrap_fails_the_run_and_never_falls_back(monkeypatch, tmp_path):
    monkeypatch.setenv("BENCHWARDEN_BWRAP", "")
    monkeypatch.setattr(core_sandbox.shutil, "which", lambda name: None)
    spec = parse_strategy(f"{MISBEHAVING}:Polite")
    result = score_one_seed(SeedTask(spec, 1, RunSettings(sandbox=True, sandbox_limits=LIMITS)))
    assert result.cases == []
    assert result.failure["kind"] == "isolation"
    assert "bubblewrap" in result.failure["reason"]


def test_an_unknown_isolation_mode_is_refused():
    with pytest.raises(ValueError, match="isolation must be one of"):
        SandboxedStrategy(str(MISBEHAVING), "Polite", LIMITS, isolation="docker")


# -- control: without the boundary the same acts succeed --------------------------------

@pytest.mark.parametrize("name, evidence", [
    ("WritesOutsideScratch", "marker"),
    ("SubprocessEscapes", "marker"),
    ("CtypesSystem", "marker"),
    ("ConnectsOut", "listener"),
    ("ConnectsToUnixSocket", "unix listener"),
    ("ReadsSecrets", "secret"),
])
def test_without_the_boundary_the_same_hostile_acts_succeed(arena, name, evidence):
    """So the tests above prove the boundary, not a hostile file that never worked.
    (This is what --isolation none means, and why it is documented as unsafe.)"""
    strategy = SandboxedStrategy(str(arena.strategy), name, LIMITS, isolation="none",
                                 hidden=arena.hidden())
    try:
        items = run_contained(strategy)
    finally:
        for pid in sleepers():  # unconfined, the detached sleeper outlives the run: end it
            os.kill(int(pid), signal.SIGKILL)
    if evidence == "marker":
        assert arena.marker.exists()
    elif evidence in ("listener", "unix listener"):
        listener = arena.listener if evidence == "listener" else arena.unix_listener
        deadline = time.monotonic() + 10
        while not listener.accepted and time.monotonic() < deadline:
            time.sleep(0.05)
        assert listener.accepted
    else:
        assert SECRET in items[0].text


def test_a_flood_on_stderr_is_kept_bounded_and_the_last_words_survive():
    bwrap_or_skip()
    strategy = SandboxedStrategy(str(MISBEHAVING), "FloodsStderr", LIMITS)
    failure = run_to_failure(strategy)
    assert failure.kind == "crash" and "last words" in failure.reason
    assert all(len(line) <= 4096 for line in strategy._stderr_tail)
