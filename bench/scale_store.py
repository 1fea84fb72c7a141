"""Synthetic arms stores of a given size for the scale benches, built once and cached.

Each store holds what a large arms campaign leaves behind, written through the store
API (so the hash chain, indexes and triggers are the real ones): 3 arms x 200 tasks,
trials numbered upwards until the size is reached, one run per 100,000 records; every
record has the 4 token components, an outcome, a 5-entry transcript and a final report
string, about 1 KB of canonical JSON. Values are drawn from a fixed seed, so a size
always gives the same records (timestamps of the runs themselves excepted).

Stores are cached as `arms-<size>.v<schema version>.sqlite` in the bench cache folder
(`$BENCHWARDEN_BENCH_CACHE`, default `~/.cache/benchwarden/bench`); a store is built
beside its final name and renamed only when complete, so an interrupted build is
never reused.

    python bench/scale_store.py 10k 100k 1M        # build (or reuse) and print paths
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import Record, RunEnd, TokenComponents
from benchwarden.core.store import SCHEMA_VERSION, open_store
from benchwarden.core.witness import sidecar_for

ARMS = ("cli", "http", "mcp")
TASKS = tuple(f"task-{number:03d}" for number in range(200))
TIERS = ("lookup", "find-then-act", "multi-step", "judgement")
SCOPE = "scale-bench"
RUN_SIZE = 100_000
BATCH = 1_000
SIZES = {"10k": 10_000, "100k": 100_000, "1M": 1_000_000}


def cache_folder() -> Path:
    configured = os.environ.get("BENCHWARDEN_BENCH_CACHE")
    return Path(configured).expanduser().resolve() if configured else \
        Path.home() / ".cache" / "benchwarden" / "bench"


def parse_size(text: str) -> int:
    """`10k`, `100k`, `1M` or a plain number of records."""
    cleaned = text.strip()
    if cleaned in SIZES:
        return SIZES[cleaned]
    multiplier = {"k": 1_000, "K": 1_000, "m": 1_000_000, "M": 1_000_000}.get(cleaned[-1:], 1)
    number = cleaned[:-1] if multiplier != 1 else cleaned
    if not number.isdigit() or int(number) < 1:
        raise ValueError(f"size {text!r} is not a positive number like 10k, 100k or 1M")
    return int(number) * multiplier


def size_label(size: int) -> str:
    if size % 1_000_000 == 0:
        return f"{size // 1_000_000}M"
    if size % 1_000 == 0:
        return f"{size // 1_000}k"
    return str(size)


def task_names(count: int) -> tuple[str, ...]:
    """The suite's task names: `TASKS` for the usual 200, else `count` names as wide as
    they need (`wide_suite.py`)."""
    if count == len(TASKS):
        return TASKS
    width = max(3, len(str(count - 1)))
    return tuple(f"task-{number:0{width}d}" for number in range(count))


def arm_names(count: int) -> tuple[str, ...]:
    """The suite's arms: `ARMS` for the usual 3, else those and `arm-003`, `arm-004`...
    up to `count` (the first three keep their names: `arms compare cli http` still
    names two of them)."""
    return ARMS[:count] + tuple(f"arm-{number:03d}" for number in range(len(ARMS), count))


def synthetic_record(index: int, run_id: str, draw: random.Random,
                     tasks: tuple[str, ...] = TASKS, arms: tuple[str, ...] = ARMS) -> Record:
    """Record number `index` (0-based): arm and task cycle, trial counts full rounds."""
    arm = arms[index % len(arms)]
    task_number = (index // len(arms)) % len(tasks)
    trial = index // (len(arms) * len(tasks)) + 1
    passed = draw.random() < (0.55, 0.62, 0.48)[index % len(arms) % 3]
    started = 1_790_000_000.0 + index * 0.5
    tokens = TokenComponents(fresh_input=draw.randint(800, 4_000),
                             cache_creation=draw.choice((0, 0, 512, 1_024)),
                             cache_read=draw.randint(0, 20_000),
                             output=draw.randint(100, 900), reasoning=None)
    commands = ("tracker list --state open", f"tracker show {task_number}",
                "tracker search 'crash on start'", f"tracker label {task_number} bug",
                f"tracker comment {task_number} 'triaged'")
    transcript = [{"kind": "shell", "command": command,
                   "output": f"ok: {draw.randint(0, 10**6)} {'lines ' * draw.randint(1, 6)}"}
                  for command in commands]
    return Record(
        suite="arms", scope=SCOPE, arm=arm, task=tasks[task_number], trial=trial,
        run_id=run_id, outcome="pass" if passed else "fail", started_at=started,
        ended_at=started + draw.uniform(2.0, 40.0), tokens=tokens,
        payload={
            "tier": TIERS[task_number % len(TIERS)],
            "failure": None if passed else draw.choice(("incorrect", "incomplete", "turn_cap")),
            "reasons": [] if passed else ["label bug missing on the issue"],
            "turns": draw.randint(3, 12),
            "stopped": "finished",
            "final_report": ("Listed the open issues, found the crash report, labelled it "
                             f"bug and left a triage comment (issue {task_number}). ")
                            * draw.randint(1, 3),
            "transcript": transcript,
            "denied_calls": 0,
            "tokens_reported": True,
            "imputed_cost_usd": round(draw.uniform(0.001, 0.05), 6),
            "driver": "command",
            "model": "synthetic-model",
            "bench_version": "1",
        })


def synthetic_config(tasks: tuple[str, ...], size: int,
                     arms: tuple[str, ...] = ARMS) -> dict[str, object]:
    """The run configuration of a synthetic arms store of `size` records over `tasks`."""
    return {"suite_spec": "synthetic", "scope": SCOPE, "arms": list(arms),
            "tasks": list(tasks), "all_tasks": list(tasks), "tiers": list(TIERS),
            "task_tiers": {task: TIERS[number % len(TIERS)] for number, task in enumerate(tasks)},
            "trials": -(-size // (len(arms) * len(tasks))), "seed": None,
            "executor": "synthetic"}


def build(path: Path | str, size: int, *, quiet: bool = False,
          task_count: int = len(TASKS), run_size: int = RUN_SIZE,
          arm_count: int = len(ARMS)) -> None:
    """Write a store of `size` records at `path` (which must not exist; a PostgreSQL URL
    names an empty schema: `postgres_growth.py`) for a suite of `arm_count` arms and
    `task_count` tasks, in runs of `run_size` records."""
    draw = random.Random(size)
    tasks = task_names(task_count)
    arms = arm_names(arm_count)
    config = synthetic_config(tasks, size, arms)
    started = time.perf_counter()
    with open_store(path) as store:
        for first in range(0, size, run_size):
            run_id = f"arms-synthetic-{first // run_size:04d}"
            store.begin_run(stamp_run(suite="arms", bench_version="1", config=config,
                                      target={"driver": "synthetic"}, run_id=run_id))
            last = min(size, first + run_size)
            for offset in range(first, last, BATCH):
                store.append([synthetic_record(index, run_id, draw, tasks, arms)
                              for index in range(offset, min(last, offset + BATCH))])
            store.finish_run(RunEnd(run_id, time.time(), "completed", {}))
            if not quiet and (last % RUN_SIZE == 0 or last == size):
                print(f"  {Path(str(path)).name}: {last:,} of {size:,} records "
                      f"({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)


def cached_name(size: int, task_count: int = len(TASKS), run_size: int = RUN_SIZE,
                version: int = SCHEMA_VERSION, arm_count: int = len(ARMS)) -> str:
    """Stores are cached per schema version (`version`, default this one's): a store of
    an older version is never upgraded in place (a benchwarden of that version may still
    read it). A suite of other than 200 tasks says how many, and runs of other than
    100,000 records how long, and one of other than 3 arms how many."""
    label = (size_label(size) + ("" if task_count == len(TASKS) else f"-{task_count}-tasks")
             + ("" if run_size == RUN_SIZE else f"-runs-of-{run_size}")
             + ("" if arm_count == len(ARMS) else f"-{arm_count}-arms"))
    if version == 1:
        return f"arms-{label}.sqlite"
    return f"arms-{label}.v{version}.sqlite"


def upgrade_copy(older: Path, partial: Path, *, quiet: bool = False) -> None:
    """A copy of an older version's cached store at `partial`, upgraded by opening it for
    writing (what that version lacks made from the stored records); the original untouched."""
    if not quiet:
        print(f"copying {older} to upgrade it (the original is left as it is)", file=sys.stderr)
    with open_store(older, create=False) as source:
        source.backup_to(partial)
    started = time.perf_counter()
    with open_store(partial, create=False, read_only=False):
        pass
    if not quiet:
        print(f"upgraded {partial.name} in {time.perf_counter() - started:.1f} s "
              "(open for writing, the upgrade's own progress lines above)", file=sys.stderr)


def ensure_store(size: int, folder: Path | None = None, *, quiet: bool = False,
                 task_count: int = len(TASKS), run_size: int = RUN_SIZE,
                 arm_count: int = len(ARMS)) -> Path:
    """The cached store of `size` records, built first when missing (or copied from the
    cached store of an older schema version and upgraded, which is faster)."""
    folder = folder or cache_folder()
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / cached_name(size, task_count, run_size, arm_count=arm_count)
    if final.exists():
        return final
    partial = folder / f".{final.stem}.building.sqlite"
    for leftover in folder.glob(partial.name + "*"):  # a build that was interrupted
        leftover.unlink()
    # the newest older version cached of the same store (size, tasks, run size): the
    # least to upgrade (from version 5, the run starts listed; from 4, its summary table
    # dropped and the runs counted; from 1 to 3, the totals computed from the bodies)
    older_names = [cached_name(size, task_count, run_size, version, arm_count)
                   for version in range(SCHEMA_VERSION - 1, 0, -1)]
    older = next((folder / name for name in older_names if (folder / name).exists()), None)
    if older is not None and older != final:
        upgrade_copy(older, partial, quiet=quiet)
    else:
        if not quiet:
            print(f"building {final} ({size:,} records, cached for later runs)",
                  file=sys.stderr)
        build(partial, size, quiet=quiet, task_count=task_count, run_size=run_size,
              arm_count=arm_count)
    for suffix in ("-wal", "-shm"):  # closed cleanly: the WAL is checkpointed away
        Path(f"{partial}{suffix}").unlink(missing_ok=True)
    witness = sidecar_for(partial)  # the head witness goes with its store
    if witness.exists():
        witness.rename(sidecar_for(final))
    partial.rename(final)
    return final


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sizes", nargs="*", default=["10k", "100k"],
                        help="sizes to build or reuse: 10k, 100k, 1M or a number")
    parser.add_argument("--cache", default=None, help="cache folder (default: "
                        "$BENCHWARDEN_BENCH_CACHE or ~/.cache/benchwarden/bench)")
    options = parser.parse_args()
    folder = Path(options.cache).expanduser().resolve() if options.cache else None
    for text in options.sizes:
        print(ensure_store(parse_size(text), folder))


if __name__ == "__main__":
    main()
