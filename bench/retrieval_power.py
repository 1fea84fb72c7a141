"""Can the retrieval composite rank strategies at 6 seeds? (issue 11 §2)

Scores the built-in strategies, plus an empty one (returns nothing), on seeds 1-6 in
one process (no store, no sandbox: the numbers are the ones `retrieval run` records,
since both call `driver.score_corpus` and `scoring.score_seed`), then takes the paired
verdicts `retrieval compare` would (`scoring.decide`, band = max(0.007, 1.96 se)).

It does so twice: with the default `CASES_PER_CATEGORY` graded cases per category, and
with one case per category (the shape of bench_version 2), so the figures show what
the extra cases buy: the minimum detectable difference at 80 % power over 6 seeds.

The goal, checked here (exit 1 when missed): dump < substring < bm25 on the composite,
each step a paired verdict that decides (margin >= band, not "held"); every lexical
strategy has a non-zero seed SE; the empty strategy scores under 0.1.

    python bench/retrieval_power.py [--seeds 1-6] [--vouch] [--json figures.json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _figures import Figure, add_json_option, emit  # noqa: E402

from benchwarden.suites.retrieval.config import RunSettings  # noqa: E402
from benchwarden.suites.retrieval.corpus import CASES_PER_CATEGORY, generate  # noqa: E402
from benchwarden.suites.retrieval.driver import score_corpus  # noqa: E402
from benchwarden.suites.retrieval.scoring import BENCH_VERSION, CaseOutcome, decide, score_seed  # noqa: E402
from benchwarden.suites.retrieval.strategies import BUILTIN_STRATEGIES  # noqa: E402

LEXICAL = ("substring", "fts5", "bm25")
LADDER = (("dump", "substring"), ("substring", "bm25"), ("substring", "fts5"),
          ("fts5", "bm25"))


class EmptyStrategy:
    """Returns nothing: the floor a composite must sit near."""

    def index(self, sessions: Any) -> None:
        pass

    def pack(self, question: str, limit: int, budget_chars: int) -> list[Any]:
        return []


def score(name: str, seeds: list[int], cases: int) -> tuple[dict[str, Any], float]:
    """A report as `retrieval run` would build it, and the seconds of scoring per seed."""
    settings = RunSettings()
    blocks = []
    spent = 0.0
    for seed in seeds:
        corpus = generate(seed, cases_per_category=cases)
        strategy = EmptyStrategy() if name == "empty" else BUILTIN_STRATEGIES[name]()
        started = time.perf_counter()
        rows = score_corpus(strategy, corpus, settings)
        spent += time.perf_counter() - started
        outcomes = [CaseOutcome.from_payload(seed, case_id, payload)
                    for case_id, payload, _, _ in rows]
        blocks.append(score_seed(seed, outcomes, settings.budget_chars))
    report = {"suite": "retrieval", "bench_version": BENCH_VERSION, "seeds": blocks,
              "settings": {"limit": settings.limit, "budget_chars": settings.budget_chars},
              "strategy": {"name": name}}
    return report, spent / len(seeds)


def composites(report: dict[str, Any]) -> list[float]:
    return [block["composite"] for block in report["seeds"]]


def seed_se(values: list[float]) -> float:
    return statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else 0.0


def parse_seeds(text: str) -> list[int]:
    if "-" in text:
        first, last = text.split("-")
        return list(range(int(first), int(last) + 1))
    return [int(part) for part in text.split(",")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1-6")
    parser.add_argument("--vouch", action="store_true",
                        help="also score vouch-kb (the optional extra; slow)")
    add_json_option(parser)
    args = parser.parse_args()
    seeds = parse_seeds(args.seeds)
    names = ["empty", "dump", *LEXICAL] + (["vouch"] if args.vouch else [])

    reports: dict[tuple[str, int], dict[str, Any]] = {}
    seconds: dict[tuple[str, int], float] = {}
    for cases in (CASES_PER_CATEGORY, 1):
        for name in names if cases == CASES_PER_CATEGORY else ["dump", *LEXICAL]:
            reports[(name, cases)], seconds[(name, cases)] = score(name, seeds, cases)

    k = CASES_PER_CATEGORY
    print(f"bench_version {BENCH_VERSION}, seeds {seeds}, {k} cases per category "
          f"(and 1 for comparison)")
    print(f"{'strategy':10} {'cases':>5} {'composite':>9} {'seed SE':>8} {'guarded':>8} "
          f"{'consist.':>8}  per-template agreement")
    for (name, cases), report in reports.items():
        values = composites(report)
        guarded = statistics.mean(b["composite_guarded"] for b in report["seeds"])
        consistency = statistics.mean(b["guards"]["consistency"] for b in report["seeds"])
        templates: dict[str, list[float]] = {}
        for block in report["seeds"]:
            for template, value in block["guards"]["consistency_per_template"].items():
                templates.setdefault(template, []).append(value)
        per_template = ", ".join(f"{t} {statistics.mean(v):.3f}" for t, v in templates.items())
        print(f"{name:10} {cases:>5} {statistics.mean(values):>9.4f} {seed_se(values):>8.4f} "
              f"{guarded:>8.4f} {consistency:>8.4f}  {per_template}")

    figures: list[Figure] = []
    failures: list[str] = []
    print("\npaired verdicts (challenger - champion, composite):")
    for champion, challenger in LADDER:
        for cases in (k, 1):
            decision = decide(reports[(champion, cases)], reports[(challenger, cases)])
            verdict, paired = decision.verdict, decision.paired
            assert verdict is not None and paired is not None
            print(f"  {challenger} over {champion}, {cases} case(s)/category: "
                  f"{'DECIDES' if decision.dethroned else 'held'}: {decision.reason}")
            if cases == k:
                figures.append(Figure(f"{challenger}_over_{champion}_margin", verdict.mean_diff,
                                      verdict.band, "composite",
                                      "mean paired difference vs its band; >= 1x decides"))
                if (champion, challenger) in (("dump", "substring"), ("substring", "bm25")) \
                        and not decision.dethroned:
                    failures.append(f"{challenger} does not decide over {champion}")
        mdes = []
        for cases in (k, 1):
            paired = decide(reports[(champion, cases)], reports[(challenger, cases)]).paired
            mdes.append(paired.mde if paired else None)
        figures.append(Figure(f"mde_{challenger}_vs_{champion}", mdes[0], mdes[1], "composite",
                              f"smallest difference 6 seeds detect at 80 % power: {k} cases "
                              "per category vs 1"))

    bm25 = statistics.mean(composites(reports[("bm25", k)]))
    for name in names:
        values = composites(reports[(name, k)])
        figures.append(Figure(f"composite_{name}", statistics.mean(values), bm25, "composite",
                              "mean composite over seeds vs bm25's"))
    for name in LEXICAL:
        se_now, se_one = seed_se(composites(reports[(name, k)])), seed_se(
            composites(reports[(name, 1)]))
        figures.append(Figure(f"seed_se_{name}", se_now, se_one, "composite",
                              f"SE over seeds, {k} cases per category vs 1"))
        if se_now <= 0:
            failures.append(f"{name} has zero seed SE")
    empty = statistics.mean(composites(reports[("empty", k)]))
    if empty >= 0.1:
        failures.append(f"the empty strategy scores {empty:.4f}, not near 0")
    figures.append(Figure("seconds_per_seed_bm25", seconds[("bm25", k)], seconds[("bm25", 1)],
                          "s", f"bm25 scoring one seed, {k} cases per category vs 1"))

    emit("retrieval_power", figures, args.json_path)
    if failures:
        print("goal missed: " + "; ".join(failures))
        return 1
    print("goal met: dump < substring < bm25, each step decided; lexical seed SE > 0; "
          "empty near 0")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
