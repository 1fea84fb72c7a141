"""Per-seed cost of the retrieval sandbox's OS boundary (bubblewrap), as a ratio.

For each strategy, one seed is scored (index plus 14 cases x 4 question forms) the way
`retrieval run` scores it, in three modes measured in the same run, interleaved round
by round so machine load falls on all of them alike:

- in-process: no child at all (`--sandbox` off), the floor;
- child, no boundary: the sandbox child with `--isolation none` (rlimits, scratch
  folder, cleared environment, no namespaces): the baseline the boundary is judged on;
- child in bwrap: the same child inside the bubblewrap boundary (`--isolation bwrap`).

Printed: the median wall seconds per seed of each mode and the ratios
bwrap / no-boundary (the boundary's own cost) and bwrap / in-process (the cost of
sandboxing at all). Every run's scores are checked to be identical across modes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _figures import Figure, add_json_option, emit  # noqa: E402

from benchwarden.suites.retrieval.driver import RunSettings, SeedTask, score_one_seed  # noqa: E402
from benchwarden.suites.retrieval.sandbox import SandboxLimits  # noqa: E402
from benchwarden.suites.retrieval.strategies import parse_strategy  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "tests", "suites", "retrieval", "strategy_files", "entity_first.py")
LIMITS = SandboxLimits(wall_seconds=600, cpu_seconds=300)
MODES = {
    "in-process": RunSettings(sandbox=False),
    "child, no boundary": RunSettings(sandbox=True, sandbox_limits=LIMITS, isolation="none"),
    "child in bwrap": RunSettings(sandbox=True, sandbox_limits=LIMITS, isolation="bwrap"),
}


def seconds_per_seed(strategy: str, seed: int, settings: RunSettings) -> tuple[float, list[float]]:
    spec = parse_strategy(strategy)
    started = time.perf_counter()
    result = score_one_seed(SeedTask(spec, seed, settings))
    elapsed = time.perf_counter() - started
    if result.failure:
        raise SystemExit(f"{strategy} failed: {result.failure['reason']}")
    return elapsed, [payload["score"] for _, payload, _, _ in result.cases]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strategies", default=f"{EXAMPLE}:EntityFirst,bm25,vouch",
                        help="comma-separated strategies (vouch needs benchwarden[vouch])")
    parser.add_argument("--repeats", type=int, default=5, help="rounds per strategy")
    parser.add_argument("--seed", type=int, default=1)
    add_json_option(parser)
    options = parser.parse_args()
    figures: list[Figure] = []
    print(f"seed {options.seed}, {options.repeats} rounds per mode, median wall seconds per seed")
    header = f"{'strategy':<24}" + "".join(f"{mode:>20}" for mode in MODES)
    print(header + f"{'bwrap/no-boundary':>20}{'bwrap/in-process':>18}")
    for strategy in options.strategies.split(","):
        times: dict[str, list[float]] = {mode: [] for mode in MODES}
        scores: dict[str, list[float]] = {}
        for _ in range(options.repeats):
            for mode, settings in MODES.items():
                elapsed, mode_scores = seconds_per_seed(strategy, options.seed, settings)
                times[mode].append(elapsed)
                scores.setdefault(mode, mode_scores)
                if mode_scores != scores[mode] or mode_scores != next(iter(scores.values())):
                    raise SystemExit(f"{strategy}: scores differ between modes or rounds")
        medians = {mode: statistics.median(values) for mode, values in times.items()}
        label = "entity_first" if strategy.endswith(":EntityFirst") else strategy
        print(f"{label:<24}" + "".join(f"{medians[mode]:>20.3f}" for mode in MODES)
              + f"{medians['child in bwrap'] / medians['child, no boundary']:>19.2f}x"
              + f"{medians['child in bwrap'] / medians['in-process']:>17.2f}x")
        figures.append(Figure(f"{label}_bwrap_vs_no_boundary", medians["child in bwrap"],
                              medians["child, no boundary"], "s/seed",
                              "median seconds per seed in bwrap, against the same child unbounded"))
    emit("isolation_overhead_retrieval", figures, options.json_path)


if __name__ == "__main__":
    main()
