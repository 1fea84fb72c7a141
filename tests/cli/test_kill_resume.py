"""kill -9 at seeded points of a contamination run, then verify and resume (issue 8).

One run is killed outright (SIGKILL: no handler, no run end) ten times at seeded points,
each counted in stored records (the test watches the store read-only and kills as soon
as the count reaches the point), and resumed after every kill. After each kill
`verify --store` must say the chain is intact; at the end no record seen after any kill
may be lost or stored twice, nothing planned may be missing, and the verdict must equal
that of the same run made without interruption.
"""

from __future__ import annotations

import hashlib
import json
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from benchwarden.core.store import SQLiteStore
from tests.fakes import FakeOpenAIServer

SEED = 20261130
KILLS = 10
# 2 probes x (prime, ref_a, ref_b, post) + 3 repetitions of rungs c2 and c4 (2 + 4 slots)
RUN = ["--probes", "2", "--concurrency", "2,4", "--repeat", "3", "--max-tokens", "64",
       "--seed", "9", "--no-progress"]
PLANNED = 2 * 4 + 3 * (2 + 4)


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "benchwarden", *args]


def records_now(path: Path) -> dict[tuple, str]:
    """Every stored record's address -> SHA-256 of its body (read-only, never creating)."""
    if not path.exists():
        return {}
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        rows = connection.execute("SELECT suite, scope, arm, task, trial, body FROM entries "
                                  "WHERE kind = 'record'").fetchall()
    except sqlite3.OperationalError:  # the schema is not there yet
        return {}
    finally:
        connection.close()
    addresses = [tuple(row[:5]) for row in rows]
    assert len(addresses) == len(set(addresses)), "a record address is stored twice"
    return {tuple(row[:5]): hashlib.sha256(bytes(row[5])).hexdigest() for row in rows}


def record_count(path: Path) -> int:
    if not path.exists():
        return 0
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        return connection.execute(
            "SELECT COUNT(*) FROM entries WHERE kind = 'record'").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        connection.close()


def kill_at(args: list[str], store: Path, at_least: int, timeout: float = 120) -> bool:
    """Start `benchwarden ARGS`; SIGKILL it once `at_least` records are stored. False
    when it finished on its own first."""
    process = subprocess.Popen(command(*args), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout
    try:
        while record_count(store) < at_least:
            if process.poll() is not None:
                return False
            assert time.monotonic() < deadline, "the run made no progress"
            time.sleep(0.005)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        return True
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def verdict_of(report: dict) -> tuple:
    """What the verdict rests on: its kind, the score and every cell's class."""
    cells = sorted((cell["leg"], cell["probe"], cell["repeat"], cell["class"])
                   for cell in report["cells"])
    return report["verdict"]["kind"], report["score"], cells


def test_ten_seeded_kill_9_points_lose_and_duplicate_nothing(tmp_path):
    rng = random.Random(SEED)
    points = sorted(rng.sample(range(1, PLANNED - 2), KILLS))
    store = tmp_path / "killed.sqlite"
    seen: dict[tuple, str] = {}
    kills = 0
    with FakeOpenAIServer("clean", delta_delay=0.004) as server:
        first = ["contamination", "--url", server.url, *RUN, "--store", str(store)]
        args = first
        original = None
        for point in points:
            # each kill needs at least one new record, so every kill point is distinct
            target = max(point, record_count(store) + 1)
            if target >= PLANNED or not kill_at(args, store, target):
                break
            kills += 1
            now = records_now(store)
            lost = {address for address, digest in seen.items() if now.get(address) != digest}
            assert not lost, f"kill {kills} (at {target} records) lost {sorted(lost)}"
            seen.update(now)
            verified = subprocess.run(command("verify", "--store", str(store)),
                                      capture_output=True, text=True, timeout=120)
            assert verified.returncode == 0 and "intact" in verified.stdout, verified
            if original is None:
                with SQLiteStore(store) as opened:
                    original = opened.runs()[0].run.run_id
            args = ["contamination", "--resume", original, "--store", str(store),
                    "--no-progress"]
        assert kills >= KILLS, f"only {kills} kill points were reached ({points})"

        finished = subprocess.run(command(*args, "--json", str(tmp_path / "resumed.json")),
                                  capture_output=True, text=True, timeout=300)
        assert finished.returncode == 0, finished.stderr
        uninterrupted = subprocess.run(
            command("contamination", "--url", server.url, *RUN, "--store",
                    str(tmp_path / "whole.sqlite"), "--json", str(tmp_path / "whole.json")),
            capture_output=True, text=True, timeout=300)
        assert uninterrupted.returncode == 0, uninterrupted.stderr

    final = records_now(store)
    lost = {address for address, digest in seen.items() if final.get(address) != digest}
    assert not lost and len(final) == PLANNED  # nothing lost, nothing missing, no duplicate
    with SQLiteStore(store) as opened:
        assert opened.verify().ok
        assert len(opened.records()) == PLANNED
    resumed = json.loads((tmp_path / "resumed.json").read_text())
    whole = json.loads((tmp_path / "whole.json").read_text())
    assert verdict_of(resumed) == verdict_of(whole)
    assert resumed["verdict"]["kind"] == "pass" and resumed["score"]["unmeasured"] == 0
