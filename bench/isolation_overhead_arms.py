"""Per-trial cost of the arms boundary: a whole tracker trial under `--isolation bwrap`
against the same trial under `--isolation none`, measured in the same run.

Each trial is what `arms run` does (fresh tracker, seed, the supervisor and, for the
http arm, the REST server started, a fixed scripted agent issuing the same shell
commands through the gate, the sandbox stopped, the state captured and checked, the
folder deleted), through `run_trial`, with no model in the loop: the figure is the
harness's own cost, so it is the worst case for the ratio (a real model's seconds per
turn would dwarf it). The two modes alternate trial by trial, so a drifting machine
affects both alike. Printed: median and interquartile range of trial wall time per
mode and arm, the per-trial overhead in milliseconds, and the ratio bwrap / none; also
the median time of one shell command in each mode (the per-command cost once the
boundary is up). Last, the boundary's fixed cost alone: starting the supervisor, running
`true` and stopping it, with and without bwrap (no tracker, no Python imports of the
harness inside), which the whole-trial figures can hide in a loaded machine's noise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _figures import Figure, add_json_option, emit  # noqa: E402

from benchwarden.core.records import TokenComponents  # noqa: E402
from benchwarden.suites.arms.agents import AgentContext, Episode, Limits  # noqa: E402
from benchwarden.suites.arms.boundary import TrialSandbox, trial_limits  # noqa: E402
from benchwarden.suites.arms.trial import TrialJob, run_trial  # noqa: E402

COMMANDS = {
    "cli": ["tracker issue list --state open | wc -l", "tracker issue show 2",
            "tracker issue close 2"],
    "http": ['curl -s "$TRACKER_URL/issues?state=open" | jq length',
             'curl -s "$TRACKER_URL/issues/2"',
             "curl -s -X PATCH \"$TRACKER_URL/issues/2\" -d '{\"state\": \"closed\"}'"],
}


@dataclass(frozen=True)
class ScriptedDriver:
    """Runs a fixed list of shell commands through the trial's toolbox; no model."""

    commands: tuple[str, ...]
    name: str = "bench-scripted"

    def describe(self) -> dict[str, Any]:
        return {"driver": self.name}

    def run(self, context: AgentContext) -> Episode:
        async def episode() -> Episode:
            deadline = time.monotonic() + context.limits.wall_clock
            for command in self.commands:
                started = time.perf_counter()
                answer = await context.toolbox.call("shell", json.dumps({"command": command}),
                                                    deadline)
                COMMAND_TIMES.append(time.perf_counter() - started)
                if "[exit status 0]" not in answer:
                    raise SystemExit(f"bench command failed: {command!r}: {answer[:200]}")
            return Episode("Done.", TokenComponents(), True, len(self.commands),
                           context.toolbox.transcript, "finished")
        return asyncio.run(episode())


COMMAND_TIMES: list[float] = []


def one_trial(arm: str, isolation: str, number: int) -> tuple[float, list[float]]:
    COMMAND_TIMES.clear()
    job = TrialJob("tracker", arm, "close-issue", number, "bench",
                   ScriptedDriver(tuple(COMMANDS[arm])),
                   Limits(wall_clock=120, command_timeout=60), None, isolation)
    started = time.perf_counter()
    result = run_trial(job)
    elapsed = time.perf_counter() - started
    if result.kind != "sample" or result.record is None or result.record.outcome != "pass":
        raise SystemExit(f"bench trial did not pass ({isolation}, {arm}): {result.kind} "
                         f"{result.reason} "
                         f"{result.record.payload['reasons'] if result.record else ''}")
    return elapsed, list(COMMAND_TIMES)


def sandbox_cycle(isolation: str) -> float:
    """Seconds to start a trial's sandbox, run `true` in it and stop it."""
    with tempfile.TemporaryDirectory(prefix="bw-bench-") as folder:
        started = time.perf_counter()
        with TrialSandbox(isolation, Path(folder), limits=trial_limits(120)) as sandbox:
            sandbox.start()
            outcome = sandbox.run(command="true", env={"PATH": "/usr/bin:/bin"},
                                  cwd=Path(folder), timeout=30)
        elapsed = time.perf_counter() - started
    if outcome.exit_status != 0:
        raise SystemExit(f"`true` failed in the {isolation} sandbox: {outcome}")
    return elapsed


def quartiles(values: list[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    q = statistics.quantiles(ordered, n=4) if len(ordered) >= 2 else [ordered[0]] * 3
    return q[0], statistics.median(ordered), q[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=15, help="measured trials per arm and mode")
    parser.add_argument("--arms", default="cli,http")
    parser.add_argument("--cycles", type=int, default=30,
                        help="sandbox start/stop cycles per mode for the fixed cost")
    add_json_option(parser)
    options = parser.parse_args()
    figures: list[Figure] = []
    print(f"{options.trials} trials per arm and mode (after one warm-up each), alternating modes")
    print(f"{'arm':<6}{'mode':<7}{'trial median':>14}{'IQR':>20}{'per command':>14}")
    for arm in options.arms.split(","):
        for isolation in ("none", "bwrap"):
            one_trial(arm, isolation, 0)  # warm-up: imports, page cache, bwrap's probe
        times: dict[str, list[float]] = {"none": [], "bwrap": []}
        commands: dict[str, list[float]] = {"none": [], "bwrap": []}
        for number in range(1, options.trials + 1):
            for isolation in (("none", "bwrap") if number % 2 else ("bwrap", "none")):
                elapsed, command_times = one_trial(arm, isolation, number)
                times[isolation].append(elapsed)
                commands[isolation].extend(command_times)
        for isolation in ("none", "bwrap"):
            low, median, high = quartiles(times[isolation])
            print(f"{arm:<6}{isolation:<7}{median * 1000:>11.0f} ms"
                  f"{f'{low * 1000:.0f}-{high * 1000:.0f} ms':>20}"
                  f"{statistics.median(commands[isolation]) * 1000:>11.1f} ms")
        base = statistics.median(times["none"])
        boxed = statistics.median(times["bwrap"])
        per_command = (statistics.median(commands["bwrap"]) /
                       statistics.median(commands["none"]))
        print(f"{arm:<6}overhead per trial {1000 * (boxed - base):+.0f} ms; "
              f"bwrap / none = {boxed / base:.2f}x per trial, {per_command:.2f}x per command")
        figures.append(Figure(f"{arm}_trial", boxed, base, "s/trial",
                              "median trial seconds in bwrap, against --isolation none"))
    cycles: dict[str, list[float]] = {"none": [], "bwrap": []}
    for isolation in ("none", "bwrap"):
        sandbox_cycle(isolation)  # warm-up
    for number in range(options.cycles):
        for isolation in (("none", "bwrap") if number % 2 else ("bwrap", "none")):
            cycles[isolation].append(sandbox_cycle(isolation))
    low_none, median_none, high_none = quartiles(cycles["none"])
    low_box, median_box, high_box = quartiles(cycles["bwrap"])
    print(f"sandbox start + `true` + stop, {options.cycles} cycles each: "
          f"none {median_none * 1000:.0f} ms (IQR {low_none * 1000:.0f}-{high_none * 1000:.0f}), "
          f"bwrap {median_box * 1000:.0f} ms (IQR {low_box * 1000:.0f}-{high_box * 1000:.0f}); "
          f"fixed cost of the boundary {1000 * (median_box - median_none):+.0f} ms, "
          f"bwrap / none = {median_box / median_none:.2f}x")
    figures.append(Figure("sandbox_cycle", median_box, median_none, "s",
                          "sandbox start + `true` + stop in bwrap, against none"))
    emit("isolation_overhead_arms", figures, options.json_path)


if __name__ == "__main__":
    main()
