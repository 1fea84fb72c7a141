"""Does `retrieval run --executor local:2` beat one process? (issue 12)

Measured in one run, alternating the two so drift on a shared machine hits both alike:

- **command**: the whole `benchwarden retrieval run --strategy bm25 --seeds 1-12` as a
  user runs it (its own process, fresh store), `--executor local:2` against the
  in-process default (the baseline). Start-up, the report and its statistics are
  serial in both, so this ratio cannot reach 0.5 however cheap the pool is.
- **scoring**: only the part an executor changes, timed inside a fresh process after
  the command's modules are imported: make the executor, score and store the 12 seeds
  (`run_strategy`), close it. The baseline is the same call with no executor.
- **warm scoring**: the same, after one other seed was scored in that process, so the
  strategy's own imports (bm25s and NumPy) are done before the clock
  starts and the forked workers inherit them: what the pool does to the work alone.
- **command CPU**: user + system time of that whole command, its workers included:
  what running in a pool adds in work (on two busy cores, extra CPU is extra wall time).
- **phases** of the whole command (one timed run per round, in its own process, with
  the command's own functions wrapped to note the clock): start-up (interpreter and
  imports, until the executor is asked for), executor (the strategy's library imported
  and, for a pool, its workers forked), scoring (seeds scored and stored; for a pool
  this also holds the parent's store opening, run start and report import, which
  overlap the workers' scoring), report (built from the store and printed, plus the
  workers let go) and exit (the interpreter ending). Only the scoring phase uses two
  cores; the rest is one core in both.
- **library import**: the `bm25` strategy's library as it imports it
  (`suites.retrieval.bm25_library`: bm25s with scipy.sparse hidden, NumPy's index
  builder) against a plain `import bm25s` (which pulls in scipy.sparse and, through
  scipy's array-API layer, most NumPy submodules), each in a fresh process after the
  command's own modules are imported: CPU seconds of that import alone. Serial in
  both modes (the parent's, before a pool forks; the first seed's, in one process).
- **pool start**: making a two-worker `LocalExecutor` and getting one trivial task back,
  forked (what the executor does in a single-threaded process) against the forkserver
  it falls back to when other threads run.

The goal (issue 12): local:2 at most 0.6x the one-process wall time. The package's
bytecode is compiled first (`compile_package`), so start-up is what an installed
package costs.

How the command figure is kept honest on a shared machine: `local:2` needs both cores
while one process needs one, so another job's CPU slows the pool more than the baseline
and moves the ratio towards 1. Each round times the two commands back to back, the
order alternating between rounds (in-process first in odd rounds, the pool first in
even ones) so neither always runs in the other's wake; with `--settle S` a round first
waits (up to S seconds) for a half second in which other processes use under 10 % of
the machine. Every timed command also notes how much CPU *other* processes used while
it ran (the machine's busy time from /proc/stat minus the command's own): printed per
round with the round's ratio, and as the `others_cpu_seconds` figure. The figures are
medians over rounds; `command_seconds_fastest` is each mode's fastest run, the one other
jobs disturbed least; `command_seconds_undisturbed` is the median over only the rounds
in which other processes used under 5 % of the machine during both commands (how many
qualified is in its note).

    python bench/retrieval_executor.py [--seeds 1-12] [--repeats 5] [--strategy bm25] [--settle 60]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _checkout import NEUTRAL_FOLDER, child_environment
from _figures import Figure, add_json_option, emit


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def busy_seconds(stat_line: str, ticks_per_second: float) -> float:
    """CPU seconds the whole machine spent busy, from the `cpu` line of /proc/stat
    (user, nice, system, idle, iowait, irq, softirq, steal, ...): everything but idle
    and iowait. Guest time is already inside user and nice, so it is not added again."""
    fields = stat_line.split()
    if not fields or fields[0] != "cpu":
        raise ValueError(f"not the machine's cpu line of /proc/stat: {stat_line!r}")
    ticks = [int(value) for value in fields[1:9]]
    ticks += [0] * (8 - len(ticks))
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks
    return (user + nice + system + irq + softirq + steal) / ticks_per_second


def machine_busy_seconds() -> float | None:
    """The machine's busy CPU seconds so far (None where /proc/stat cannot be read)."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            first = stat.readline()
        return busy_seconds(first, os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError):
        return None


def others_seconds(busy_before: float | None, busy_after: float | None,
                   own_cpu: float) -> float | None:
    """CPU other processes used meanwhile: the machine's busy time minus our own (never
    below zero: the kernel counts in ticks, 10 ms apart, so a quiet machine can read a
    little under what the command itself used)."""
    if busy_before is None or busy_after is None:
        return None
    return max(0.0, busy_after - busy_before - own_cpu)


QUIET_SHARE = 0.05  # of the machine's cores over a command's wall time


def undisturbed(others: float | None, wall: float, cores: int) -> bool:
    """Whether other processes left a timed command alone: they used under
    `QUIET_SHARE` of the machine while it ran (a known amount; unknown is not quiet)."""
    return others is not None and others <= QUIET_SHARE * cores * wall


def wait_for_quiet(limit_seconds: float, window: float = 0.5, share: float = 0.1) -> float:
    """Wait until, for `window` seconds, the machine's busy time stays under `share` of
    its cores (other jobs are quiet), at most `limit_seconds`; returns the seconds waited."""
    started = time.perf_counter()
    cores = os.cpu_count() or 1
    while time.perf_counter() - started < limit_seconds:
        before = machine_busy_seconds()
        time.sleep(window)
        after = machine_busy_seconds()
        if before is None or after is None or after - before <= share * cores * window:
            break
    return time.perf_counter() - started


def command_seconds(strategy: str, seeds: str, executor: str
                    ) -> tuple[float, float, float | None]:
    """Wall time and CPU time (user + system, the command and its workers) of one run,
    and the CPU other processes on the machine used while it ran."""
    with tempfile.TemporaryDirectory(prefix="bw-exec-") as folder:
        cpu_before = _children_cpu()
        busy_before = machine_busy_seconds()
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "benchwarden", "retrieval", "run",
                        "--strategy", strategy, "--seeds", seeds, "--executor", executor,
                        "--store", str(Path(folder) / "store.sqlite")],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env=child_environment(), cwd=NEUTRAL_FOLDER)
        wall = time.perf_counter() - started
        busy_after = machine_busy_seconds()
        cpu = _children_cpu() - cpu_before
        return wall, cpu, others_seconds(busy_before, busy_after, cpu)


def phase_seconds(mode: str, strategy: str, seeds: str, executor: str) -> float:
    """Runs `--phase` of this script in a fresh process; returns what it measured."""
    output = subprocess.run([sys.executable, os.path.abspath(__file__), "--phase", mode,
                             "--strategy", strategy, "--seeds", seeds, "--executor", executor],
                            check=True, capture_output=True, text=True,
                            env=child_environment(), cwd=NEUTRAL_FOLDER).stdout
    return float(json.loads(output.strip().splitlines()[-1])["seconds"])


PHASES = ("startup", "executor", "scoring", "report", "exit")


def timeline_seconds(strategy: str, seeds: str, executor: str) -> dict[str, float]:
    """Runs `--phase timeline` (the real command, its functions wrapped) in a fresh
    process; returns how long each phase took. The clock is the system's monotonic
    one, which this process and its child share."""
    with tempfile.TemporaryDirectory(prefix="bw-exec-") as folder:
        started = time.perf_counter()
        output = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--phase", "timeline", "--strategy",
             strategy, "--seeds", seeds, "--executor", executor, "--store",
             str(Path(folder) / "store.sqlite")],
            check=True, capture_output=True, text=True, env=child_environment(),
            cwd=NEUTRAL_FOLDER).stdout
        ended = time.perf_counter()
    marks = json.loads(output.strip().splitlines()[-1])
    points = [started, marks["executor_asked"], marks["executor_made"], marks["scored"],
              marks["reported"], ended]
    return {phase: points[index + 1] - points[index] for index, phase in enumerate(PHASES)}


def run_timeline(strategy: str, seeds: str, executor_spec: str, store: str) -> None:
    """The command as a user runs it (`main()` with this process's argv), noting the
    clock when it asks for the executor, gets it, has scored, and has reported."""
    import atexit

    from benchwarden.cli import main as cli_main
    from benchwarden.suites.retrieval import command

    marks: dict[str, float] = {}

    def noting(function, before: str | None, after: str):
        def wrapper(*args, **kwargs):
            if before:
                marks[before] = time.perf_counter()
            result = function(*args, **kwargs)
            marks[after] = time.perf_counter()
            return result
        return wrapper

    from benchwarden.suites.retrieval import report

    command.executor_or_exit = noting(command.executor_or_exit, "executor_asked",
                                      "executor_made")
    command.run_strategy = noting(command.run_strategy, None, "scored")
    # the command imports its report on use, so the wrapper goes where it looks
    report.render_terminal = noting(report.render_terminal, None, "reported")
    real_stdout = os.dup(1)
    # printed last, after the command's own output (sent to /dev/null) is done
    atexit.register(lambda: os.write(real_stdout, (json.dumps(marks) + "\n").encode()))
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    sys.argv = ["benchwarden", "retrieval", "run", "--strategy", strategy, "--seeds", seeds,
                "--executor", executor_spec, "--store", store]
    cli_main.main()


def pool_bound(phases: dict[str, float], library_import: float,
               workers: int) -> tuple[float, float]:
    """`(bound, whole)` for one in-process timeline: `whole` its phases' sum, `bound` the
    same with the scoring work (the scoring phase less the strategy library's import,
    which a pool pays once before forking) divided evenly among `workers` at no cost.
    No pool of that many workers can take less than `bound` on this workload."""
    whole = sum(phases.values())
    work = min(max(0.0, phases["scoring"] - library_import), phases["scoring"])
    return whole - work + work / max(1, workers), whole


def _trivial(value: int) -> int:
    return value


def run_phase(mode: str, strategy: str, seeds: str, executor_spec: str) -> float:
    from benchwarden.core.executors import LocalExecutor, make_executor
    from benchwarden.core.store import open_store
    from benchwarden.suites.retrieval.command import parse_seeds  # noqa: F401 (the command's imports)
    from benchwarden.suites.retrieval.driver import RunSettings, run_strategy
    from benchwarden.suites.retrieval.strategies import parse_strategy

    if mode in ("import-library", "import-plain"):
        started = time.process_time()
        if mode == "import-library":
            import benchwarden.suites.retrieval.bm25_library  # noqa: F401
        else:
            import bm25s  # noqa: F401
        return time.process_time() - started
    if mode == "pool-fork" or mode == "pool-forkserver":
        if mode == "pool-forkserver":
            import threading
            gate = threading.Event()
            threading.Thread(target=gate.wait, daemon=True).start()  # a second thread
        started = time.perf_counter()
        executor = LocalExecutor(2)
        assert executor.start_method == mode.removeprefix("pool-"), executor.start_method
        list(executor.map_unordered(_trivial, [1, 2]))
        elapsed = time.perf_counter() - started
        executor.close()
        return elapsed
    spec = parse_strategy(strategy)
    numbers = parse_seeds(seeds)
    if mode == "scoring-warm":
        # Score one other seed first, in this process: every import the strategy needs
        # is done before the clock starts (and before a pool forks its workers).
        from benchwarden.suites.retrieval.driver import SeedTask, score_one_seed
        score_one_seed(SeedTask(spec, max(numbers) + 1, RunSettings()))
    with tempfile.TemporaryDirectory(prefix="bw-exec-") as folder, \
            open_store(Path(folder) / "store.sqlite") as store:
        started = time.perf_counter()
        executor = None if executor_spec == "local" else make_executor(executor_spec)
        try:
            run_strategy(store, spec, numbers, RunSettings(), executor=executor)
        finally:
            if executor is not None:
                executor.close()
        return time.perf_counter() - started


def compile_package() -> None:
    """Writes the package's bytecode (`__pycache__`) before anything is timed, as `pip
    install` does: a checkout run with PYTHONDONTWRITEBYTECODE=1 (as on the project's
    machines) would otherwise compile every module from source in every command, about
    0.05 s of start-up in both modes that no user pays."""
    import compileall

    import benchwarden

    compileall.compile_dir(os.path.dirname(os.path.abspath(benchwarden.__file__)), quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1-12")
    parser.add_argument("--strategy", default="bm25")
    parser.add_argument("--executor", default="local:2", help="the executor to compare")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--settle", type=float, default=0.0, metavar="SECONDS",
                        help="before each round, wait up to this long for other jobs to "
                             "go quiet (under 10%% of the machine for half a second)")
    parser.add_argument("--phase", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--store", default=None, help=argparse.SUPPRESS)
    add_json_option(parser)
    options = parser.parse_args()
    if options.phase == "timeline":
        run_timeline(options.strategy, options.seeds, options.executor, options.store)
        return
    if options.phase:
        seconds = run_phase(options.phase, options.strategy, options.seeds, options.executor)
        print(json.dumps({"seconds": seconds}))
        return

    compile_package()
    timings: dict[str, list[float]] = {key: [] for key in (
        "command.local", "command.parallel", "cpu.local", "cpu.parallel", "scoring.local",
        "scoring.parallel", "warm.local", "warm.parallel", "pool.fork", "pool.forkserver",
        "import.library", "import.plain")}
    others: dict[str, list[float]] = {"local": [], "parallel": []}
    quiet_rounds: list[tuple[float, float]] = []  # (in-process, pool) walls, both undisturbed
    cores = os.cpu_count() or 1
    for round_number in range(options.repeats):
        waited = wait_for_quiet(options.settle) if options.settle > 0 else 0.0
        modes = [("local", "local"), (options.executor, "parallel")]
        if round_number % 2:  # alternate which command runs first (in the other's wake)
            modes.reverse()
        # the two timed commands back to back; the diagnostics come after both
        quiet = True
        for executor, key in modes:
            wall, cpu, other = command_seconds(options.strategy, options.seeds, executor)
            timings[f"command.{key}"].append(wall)
            timings[f"cpu.{key}"].append(cpu)
            if other is not None:
                others[key].append(other)
            quiet = quiet and undisturbed(other, wall, cores)
        if quiet:
            quiet_rounds.append((timings["command.local"][-1], timings["command.parallel"][-1]))
        for executor, key in modes:
            timings[f"scoring.{key}"].append(
                phase_seconds("scoring", options.strategy, options.seeds, executor))
            timings[f"warm.{key}"].append(
                phase_seconds("scoring-warm", options.strategy, options.seeds, executor))
            for phase, seconds in timeline_seconds(options.strategy, options.seeds,
                                                   executor).items():
                timings.setdefault(f"phase.{phase}.{key}", []).append(seconds)
        for kind in ("library", "plain"):
            timings[f"import.{kind}"].append(
                phase_seconds(f"import-{kind}", options.strategy, options.seeds, "local"))
        for method in ("fork", "forkserver"):
            timings[f"pool.{method}"].append(
                phase_seconds(f"pool-{method}", options.strategy, options.seeds, "local:2"))
        ratio = timings["command.parallel"][-1] / timings["command.local"][-1]
        disturbed = ", ".join(f"{key} {values[-1]:.2f} s" for key, values in others.items()
                              if values)
        print(f"  round {round_number + 1} ({'in-process' if modes[0][1] == 'local' else 'pool'}"
              f" first{f', waited {waited:.0f} s for quiet' if options.settle > 0 else ''}): "
              f"command ratio {ratio:.2f}x{' (undisturbed)' if quiet else ''}; "
              f"other processes' CPU meanwhile: "
              f"{disturbed or 'unknown'}; load average {os.getloadavg()[0]:.2f}", flush=True)
        print("    " + ", ".join(f"{key} {values[-1]:.2f} s" for key, values in timings.items()),
              flush=True)

    median = {key: statistics.median(values) for key, values in timings.items()}
    # the least any pool of `cores` workers could take in this run (`pool_bound`): every
    # phase but the scoring work is serial in both modes; per round, then the median
    bounds, wholes = [], []
    for index in range(options.repeats):
        phases = {name: timings[f"phase.{name}.local"][index] for name in PHASES}
        bound, whole = pool_bound(phases, timings["import.library"][index], cores)
        bounds.append(bound)
        wholes.append(whole)
    label = f"{options.executor}, {options.strategy}, seeds {options.seeds}"
    emit("retrieval_executor", [
        Figure("command_seconds", median["command.parallel"], median["command.local"], "s",
               f"whole command, {label}, vs in-process; goal ratio <= 0.6"),
        Figure("command_seconds_fastest", min(timings["command.parallel"]),
               min(timings["command.local"]), "s",
               f"each mode's fastest whole command over the rounds (the least disturbed "
               f"by other jobs), {label}"),
        Figure("command_seconds_undisturbed",
               statistics.median(pool for _, pool in quiet_rounds) if quiet_rounds else None,
               statistics.median(alone for alone, _ in quiet_rounds) if quiet_rounds else None,
               "s", f"as command_seconds, over the {len(quiet_rounds)} of {options.repeats} "
               f"rounds in which other processes used under {QUIET_SHARE:.0%} of the machine "
               "during both commands" + ("" if quiet_rounds else "; try --settle")),
        Figure("command_seconds_bound", statistics.median(bounds), statistics.median(wholes),
               "s", f"the least a pool of {cores} could take, estimated from a timed "
               "in-process run of the same round: its phases with only the scoring work "
               "(less the library import) split evenly at no cost, vs the same phases; "
               "an estimate from a separate run, as noisy as the wall figures"),
        Figure("others_cpu_seconds",
               statistics.median(others["parallel"]) if others["parallel"] else None,
               statistics.median(others["local"]) if others["local"] else None, "s",
               "CPU other processes used while the command ran (median over rounds), "
               "local:2 vs in-process: near 0 on a quiet machine; the wall figures above "
               "mean little when it is not"),
        Figure("command_cpu_seconds", median["cpu.parallel"], median["cpu.local"], "s",
               f"CPU (user + system, workers included) of the whole command, {label}, "
               "vs in-process: what the pool adds in work, not in waiting"),
        Figure("scoring_seconds", median["scoring.parallel"], median["scoring.local"], "s",
               f"executor made + seeds scored and stored, {label}, vs in-process"),
        Figure("warm_scoring_seconds", median["warm.parallel"], median["warm.local"], "s",
               f"as scoring, the strategy's imports done first (the work alone), {label}"),
        *[Figure(f"phase_{phase}_seconds", median[f"phase.{phase}.parallel"],
                 None if phase == "executor" else median[f"phase.{phase}.local"], "s",
                 f"{phase} phase of the whole command, {label}, vs in-process"
                 + (" (which makes none: its strategy import is in scoring)"
                    if phase == "executor" else ""))
          for phase in PHASES],
        Figure("library_import_cpu_seconds", median["import.library"], median["import.plain"],
               "s", "CPU of importing bm25s as the bm25 strategy does (no scipy.sparse) vs "
               "a plain `import bm25s`, after the command's modules"),
        Figure("pool_start_seconds", median["pool.fork"], median["pool.forkserver"], "s",
               "two-worker pool, first results back: fork vs forkserver"),
    ], options.json_path)


if __name__ == "__main__":
    main()
