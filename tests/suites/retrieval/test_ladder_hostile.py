"""Hostile challengers on a real ladder: each is stopped or contained inside the
boundary (proven by the arena's marker and listener), the champion holds, the ledger
records the decision with a one-line reason, and the command exits 3 (held)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest

from benchwarden.core.errors import EXIT_HELD
from benchwarden.core.store import open_store
from benchwarden.suites.retrieval.ladder import Ladder, challenge
from benchwarden.suites.retrieval.sandbox import SandboxLimits
from tests.suites.retrieval.arena import FILES, SECRET, make_arena

LIMITS = SandboxLimits(wall_seconds=120, cpu_seconds=2, memory_mb=1024, open_files=64)
# Filling the 1 GiB address space zeroes it page by page, CPU time the child is charged
# for: on a loaded machine that went past 2 s, and the CPU limit (what `LoopsForever`
# tests) stopped it before the address-space cap this case is about.
ALLOCATION_LIMITS = replace(LIMITS, cpu_seconds=30)


@pytest.fixture()
def arena():
    with make_arena() as made:
        yield made


@pytest.mark.parametrize("challenger, failed", [
    ("hostile:WritesOutsideScratch", "Read-only file system"),
    ("hostile:ConnectsOut", "Connection refused"),
    ("hostile:ConnectsToUnixSocket", "Connection refused"),
    ("hostile:SubprocessEscapes", None),  # contained: it runs, reaches nothing, scores low
    ("hostile:CtypesSystem", None),
    ("hostile:ReadsSecrets", None),
    ("misbehaving:LoopsForever", "CPU limit"),
    ("misbehaving:AllocatesWithoutBound", "address-space cap"),
    ("misbehaving:CtypesWritesMemory", "SIGSEGV"),
])
def test_a_hostile_challenger_never_acts_and_the_champion_holds(arena, challenger, failed):
    module, name = challenger.split(":")
    path = arena.strategy if module == "hostile" else FILES / "misbehaving.py"
    ladder = Ladder(arena.ladder)
    with open_store(arena.store) as store:  # the arena's store, holding the secret
        result = challenge(ladder, f"{path}:{name}", store=store, base="h0stile",
                           date="2026-11-30", seed_count=2,
                           limits=ALLOCATION_LIMITS if failed == "address-space cap" else LIMITS,
                           initial_champion="substring")
        payloads = [json.dumps(record.payload) for record in store.records()]
    assert result.exit_code == EXIT_HELD and result.outcome == "held"
    entry = ladder.entries()[-1]
    assert entry["outcome"] == "held" and entry["champion"]["name"] == "substring"
    failure = entry["challenger"]["failure"]
    if failed:
        assert failure is not None and failed in failure["reason"], failure
        assert "\n" not in failure["reason"] and "traceback" not in failure
        assert entry["verdict"] is None
    else:
        assert failure is None and entry["verdict"] is not None  # decided on its (low) scores
    assert ladder.champion()["name"] == "substring"
    assert not (arena.ladder / "champions").exists()
    arena.untouched()
    # nothing the challenger could have read of the ledger or the store reached a pack
    challenger_payloads = payloads[len(payloads) // 2:] if failed is None else payloads
    assert not any(SECRET in payload or "prev_hash" in payload or "SQLite format" in payload
                   for payload in challenger_payloads)


def test_the_cli_exits_3_for_a_held_hostile_challenger(arena):
    env = {**os.environ, "COLUMNS": "160"}
    done = subprocess.run(
        [sys.executable, "-m", "benchwarden", "ladder", "challenge", "--challenger",
         f"{arena.strategy}:SubprocessEscapes", "--ladder", str(arena.ladder), "--base", "h0stile",
         "--date", "2026-11-30", "--seeds", "2", "--initial-champion", "substring",
         "--store", str(arena.store)],
        capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == EXIT_HELD, done.stdout + done.stderr
    assert "HELD" in done.stdout
    arena.untouched()
