"""From recorded case outcomes to per-seed scores, multi-seed summaries and verdicts.

Pure: everything here takes recorded data and returns values; nothing reads a file,
the clock or the network.

Invariants:
- A seed's `composite` is the plain mean of its non-empty category means;
  `composite_guarded = composite * efficiency * consistency * canary`.
- Every report this suite writes says `bench_version`. A version-"1" report (no guard
  block) is read with every guard at 1.0 and `composite_guarded` falling back to
  `composite`; `comparable` refuses to pair reports of different versions or seeds.
- A strategy whose run failed (sandbox limit, refusal, crash) cannot win a comparison.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from benchwarden.core.stats import (
    PairedComparison,
    PairedVerdict,
    mean_se,
    paired_difference,
    paired_verdict,
)
from benchwarden.suites.retrieval import guards as guard_math
from benchwarden.suites.retrieval.corpus import CATEGORIES

BENCH_VERSION = "3"
DECIDE_ON = ("composite", "composite_guarded")
_AGREEMENT_TOLERANCE = 1e-9


@dataclass(frozen=True)
class PackMeasure:
    """What one pack scored and cost."""

    score: float
    used_chars: int
    canary_hit: bool
    reason: str | None = None
    template: str | None = None  # None for the original question


@dataclass(frozen=True)
class CaseOutcome:
    """One case of one seed: the original pack and its paraphrased packs."""

    seed: int
    case_id: str
    category: str
    question: str
    original: PackMeasure
    paraphrases: tuple[PackMeasure, ...] = ()

    def packs(self) -> tuple[PackMeasure, ...]:
        return (self.original, *self.paraphrases)

    def to_payload(self) -> dict[str, Any]:
        return {"category": self.category, "question": self.question,
                "score": self.original.score, "reason": self.original.reason,
                "used_chars": self.original.used_chars, "canary_hit": self.original.canary_hit,
                "paraphrases": [{"template": p.template, "score": p.score,
                                 "reason": p.reason, "used_chars": p.used_chars,
                                 "canary_hit": p.canary_hit} for p in self.paraphrases]}

    @classmethod
    def from_payload(cls, seed: int, case_id: str, payload: Mapping[str, Any]) -> CaseOutcome:
        original = PackMeasure(score=float(payload["score"]), used_chars=int(payload["used_chars"]),
                               canary_hit=bool(payload["canary_hit"]), reason=payload.get("reason"))
        paraphrases = tuple(
            PackMeasure(score=float(p["score"]), used_chars=int(p["used_chars"]),
                        canary_hit=bool(p["canary_hit"]), reason=p.get("reason"),
                        template=p["template"])
            for p in payload.get("paraphrases", ()))
        return cls(seed=seed, case_id=case_id, category=str(payload["category"]),
                   question=str(payload.get("question", "")), original=original,
                   paraphrases=paraphrases)


def category_means(outcomes: Iterable[CaseOutcome]) -> dict[str, float | None]:
    """Mean score per category, every known category present (None when empty)."""
    scores: dict[str, list[float]] = defaultdict(list)
    for outcome in outcomes:
        scores[outcome.category].append(outcome.original.score)
    names = list(CATEGORIES) + sorted(set(scores) - set(CATEGORIES))
    return {name: (sum(scores[name]) / len(scores[name]) if scores.get(name) else None)
            for name in names}


def seed_guards(outcomes: Sequence[CaseOutcome], budget_chars: int) -> guard_math.Guards:
    packs = [pack for outcome in outcomes for pack in outcome.packs()]
    agreements: dict[str, list[bool]] = defaultdict(list)
    for outcome in outcomes:
        for paraphrased in outcome.paraphrases:
            agreements[str(paraphrased.template)].append(
                abs(paraphrased.score - outcome.original.score) <= _AGREEMENT_TOLERANCE)
    consistency, per_template = guard_math.consistency(agreements)
    used = [pack.used_chars for pack in packs]
    canary = guard_math.canary(sum(1 for pack in packs if pack.canary_hit), len(packs))
    return guard_math.Guards(
        efficiency=guard_math.efficiency(used, budget_chars),
        consistency=consistency,
        canary=canary.multiplier,
        canary_tripped=canary.tripped,
        canary_leak_rate=canary.leak_rate,
        consistency_per_template=per_template,
        disagreements_per_template=guard_math.disagreements(agreements),
        mean_used_chars=(sum(used) / len(used)) if used else None,
        packs=len(packs),
    )


def score_seed(seed: int, outcomes: Sequence[CaseOutcome], budget_chars: int) -> dict[str, Any]:
    """The report block of one seed."""
    means = category_means(outcomes)
    composite = guard_math.composite(means)
    guards = seed_guards(outcomes, budget_chars)
    failed = [{"case": o.case_id, "category": o.category, "question": o.question,
               "score": o.original.score, "reason": o.original.reason}
              for o in sorted(outcomes, key=lambda o: o.case_id) if o.original.score < 1.0]
    return {
        "seed": seed,
        "cases": len(outcomes),
        "category_means": means,
        "composite": composite,
        "guards": guards.to_json_dict(),
        "composite_guarded": guard_math.composite_guarded(composite, guards),
        "failed_cases": failed,
    }


class SeedDigest(msgspec.Struct, frozen=True, kw_only=True):
    """A seed's report block less its failed cases, which it counts: what the driver
    keeps on the seed's last record (`DIGEST_FIELD`) so a report over many seeds reads
    one record a seed. Mappings whose order the block keeps are lists of pairs, since
    the store writes a record's keys sorted; `block()` gives the block back exactly."""

    seed: int
    """The seed (the records' trial)."""
    cases: int
    """Cases scored: the seed's records."""
    failed_cases: int
    """Cases below 1.0."""
    category_means: list[tuple[str, float | None]]
    """(category, mean score), in the block's order."""
    composite: float
    """Mean of the non-empty category means."""
    composite_guarded: float
    """composite × efficiency × consistency × canary."""
    efficiency: float
    """The efficiency guard."""
    consistency: float
    """The paraphrase consistency guard."""
    canary: float
    """The canary multiplier."""
    canary_tripped: bool
    """Whether a pack surfaced the canary."""
    canary_leak_rate: float
    """Share of packs that surfaced it."""
    consistency_per_template: list[tuple[str, float | None]]
    """(template, agreement), in the block's order."""
    disagreements_per_template: list[tuple[str, int, int]]
    """(template, cases it moved, cases asked), in the block's order."""
    mean_used_chars: float | None
    """Mean characters per pack."""
    packs: int
    """Packs the guards read."""

    @classmethod
    def of(cls, block: Mapping[str, Any]) -> SeedDigest:
        """The digest of a block `score_seed` made (its failed cases counted)."""
        guards = block["guards"]
        return cls(seed=int(block["seed"]), cases=int(block["cases"]),
                   failed_cases=len(block["failed_cases"]),
                   category_means=list(block["category_means"].items()),
                   composite=block["composite"], composite_guarded=block["composite_guarded"],
                   efficiency=guards["efficiency"], consistency=guards["consistency"],
                   canary=guards["canary"], canary_tripped=guards["canary_tripped"],
                   canary_leak_rate=guards["canary_leak_rate"],
                   consistency_per_template=list(guards["consistency_per_template"].items()),
                   disagreements_per_template=[
                       (template, moved, asked) for template, (moved, asked)
                       in guards["disagreements_per_template"].items()],
                   mean_used_chars=guards["mean_used_chars"], packs=guards["packs"])

    def block(self) -> dict[str, Any]:
        """The block `score_seed` made, without `failed_cases` (the digest counts them)."""
        return {
            "seed": self.seed,
            "cases": self.cases,
            "category_means": dict(self.category_means),
            "composite": self.composite,
            "guards": {"efficiency": self.efficiency, "consistency": self.consistency,
                       "canary": self.canary, "canary_tripped": self.canary_tripped,
                       "canary_leak_rate": self.canary_leak_rate,
                       "consistency_per_template": dict(self.consistency_per_template),
                       "disagreements_per_template": {
                           template: [moved, asked] for template, moved, asked
                           in self.disagreements_per_template},
                       "mean_used_chars": self.mean_used_chars, "packs": self.packs},
            "composite_guarded": self.composite_guarded,
        }


class SeedGroups(msgspec.Struct, frozen=True, kw_only=True):
    """Each arm and seed of a run with its records counted and its last record's
    sequence number, as the store held them when the run ended (`Store.record_groups`
    over the run's scope): what the driver keeps in the run end (`driver.GROUPS_FIELD`)
    so a report finds every seed's digest without walking the address index. Columns,
    one entry per group, so a run of 17,700 seeds keeps about 300 KB; `arm` indexes
    `arms`. `records` is their total, which a report holds against the run's record
    count before it trusts the rest: records are only ever added, so the same count
    means the same records."""

    records: int
    """The groups' records in all (the run's records when it ended)."""
    arms: list[str]
    """The arms named, each once."""
    arm: list[int]
    """Each group's arm, as an index into `arms`."""
    seed: list[int]
    """Each group's seed."""
    count: list[int]
    """Each group's records."""
    last: list[int]
    """Each group's last record's sequence number."""

    @classmethod
    def of(cls, groups: Mapping[tuple[str, int], tuple[int, int]]) -> SeedGroups:
        """The columns of `Store.record_groups`' `{(arm, seed): (records, last seq)}`."""
        arms = sorted({arm for arm, _ in groups})
        index = {arm: number for number, arm in enumerate(arms)}
        ordered = sorted(groups.items(), key=lambda item: (item[0][1], item[0][0]))
        return cls(records=sum(count for count, _ in groups.values()), arms=arms,
                   arm=[index[arm] for (arm, _), _ in ordered],
                   seed=[seed for (_, seed), _ in ordered],
                   count=[count for _, (count, _) in ordered],
                   last=[last for _, (_, last) in ordered])

    def groups(self) -> dict[tuple[str, int], tuple[int, int]] | None:
        """The groups as `Store.record_groups` gives them; None where the columns do not
        make one (lengths that differ, an arm out of range, a group twice, a count that
        is not positive, counts that do not total `records`): a run end not written by
        the driver."""
        columns = (self.arm, self.seed, self.count, self.last)
        if len({len(column) for column in columns}) != 1 or len(set(self.arms)) != len(self.arms):
            return None
        found: dict[tuple[str, int], tuple[int, int]] = {}
        for arm, seed, count, last in zip(*columns, strict=True):
            if not 0 <= arm < len(self.arms) or count < 1:
                return None
            found[(self.arms[arm], seed)] = (count, last)
        if len(found) != len(self.seed) or sum(self.count) != self.records:
            return None
        return found


class _GuardScores(msgspec.Struct):
    """A seed's guard block as `guards.Guards.from_json_dict` reads it."""

    efficiency: float = 1.0
    consistency: float = 1.0
    canary: float = 1.0
    canary_tripped: bool = False
    canary_leak_rate: float = 0.0
    consistency_per_template: dict[str, float | None] | None = None
    disagreements_per_template: dict[str, list[int]] | None = None
    mean_used_chars: float | None = None
    packs: int = 0


class _SeedScores(msgspec.Struct):
    """What every version's seed block holds and the normalising below reads; the rest
    of the block is checked when the whole report is read into its type."""

    seed: int
    composite: float
    composite_guarded: float | None = None
    guards: _GuardScores | None = None
    category_means: dict[str, float | None] = {}
    failed_cases: list[Any] = []
    cases: int | None = None


def _check_seed_block(number: int, block: Any) -> None:
    """ValueError (one line) naming the block, for a report file edited or made by hand
    (a seed block without `composite` was a bare KeyError, 'unexpected KeyError')."""
    try:
        msgspec.convert(block, _SeedScores)
    except msgspec.ValidationError as error:
        raise ValueError(f"report seed block {number} is not a seed's scores: {error}") from None


def normalise_seed_block(block: Mapping[str, Any]) -> dict[str, Any]:
    """A seed block with a guard block and a guarded composite, whatever its version."""
    normal = dict(block)
    guards = guard_math.Guards.from_json_dict(block.get("guards"))
    normal["guards"] = guards.to_json_dict()
    if normal.get("composite_guarded") is None:
        normal["composite_guarded"] = normal["composite"]
    normal.setdefault("category_means", {})
    normal.setdefault("failed_cases", [])
    return normal


def summary_over_seeds(
        seeds: Sequence[int], composite: Sequence[float], composite_guarded: Sequence[float],
        *, efficiency: Sequence[float], consistency: Sequence[float], canary: Sequence[float],
        canary_leak_rate: Sequence[float], canary_tripped: Iterable[bool],
        category_means: Iterable[Iterable[tuple[str, float | None]]],
        consistency_per_template: Iterable[Iterable[tuple[str, float | None]]],
        disagreements_per_template: Iterable[Iterable[tuple[str, Sequence[int]]]],
) -> dict[str, Any]:
    """Mean, standard error and Student t 95 % interval over seeds of both composites,
    every guard, each template's paraphrase agreement and each category mean; the
    canary's trips and each template's disagreements counted. Each argument is a
    column, one entry a seed in seed order (category means and per-template figures as
    each seed's pairs): `run_seeds` takes them from seed blocks as mappings, a report
    being built from its typed blocks, no mapping made for a seed. Categories and
    templates are in the order of their first appearance."""
    categories: dict[str, list[float]] = defaultdict(list)
    templates: dict[str, list[float]] = defaultdict(list)
    disagreed: dict[str, list[int]] = {}
    for counts in disagreements_per_template:
        for template, (moved, asked) in counts:
            total = disagreed.setdefault(str(template), [0, 0])
            total[0] += int(moved)
            total[1] += int(asked)
    for means in category_means:
        for name, value in means:
            if value is not None:
                categories[name].append(float(value))
    for agreements in consistency_per_template:
        for template, value in agreements:
            if value is not None:
                templates[str(template)].append(float(value))

    def estimate(values: Sequence[float]) -> dict[str, Any]:
        return mean_se(values).to_json_dict()  # (it makes its own list of floats)

    return {
        "seeds": list(seeds),
        "composite": estimate(composite),
        "composite_guarded": estimate(composite_guarded),
        "guards": {
            "efficiency": estimate(efficiency),
            "consistency": estimate(consistency),
            "canary": estimate(canary),
            "canary_leak_rate": estimate(canary_leak_rate),
            "canary_tripped_seeds": sum(1 for tripped in canary_tripped if tripped),
            "consistency_per_template": {template: estimate(values)
                                         for template, values in templates.items()},
            "disagreements_per_template": disagreed,
        },
        "category_means": {name: estimate(values) for name, values in categories.items()},
    }


def run_seeds(seed_blocks: Sequence[Mapping[str, Any]], *, normal: bool = False
              ) -> dict[str, Any]:
    """Mean, standard error and Student t 95 % interval over seeds of both composites,
    every guard, each template's paraphrase agreement and each category mean: every
    number a view shows over seeds is here, so no view computes one
    (`summary_over_seeds`). `normal`: the blocks are as `normalise_seed_block` makes
    them already (a built report's, a normalised report's), so they are not normalised
    again."""
    blocks = list(seed_blocks) if normal else [normalise_seed_block(block)
                                               for block in seed_blocks]
    guards = [block["guards"] for block in blocks]
    return summary_over_seeds(
        [block["seed"] for block in blocks], [block["composite"] for block in blocks],
        [block["composite_guarded"] for block in blocks],
        efficiency=[guard["efficiency"] for guard in guards],
        consistency=[guard["consistency"] for guard in guards],
        canary=[guard["canary"] for guard in guards],
        canary_leak_rate=[guard["canary_leak_rate"] for guard in guards],
        canary_tripped=[guard["canary_tripped"] for guard in guards],
        category_means=(block["category_means"].items() for block in blocks),
        consistency_per_template=((guard.get("consistency_per_template") or {}).items()
                                  for guard in guards),
        disagreements_per_template=((guard.get("disagreements_per_template") or {}).items()
                                    for guard in guards))


def _plain(report: Any) -> Mapping[str, Any]:
    """A typed report (`report.RetrievalReport`, already normal) as its JSON mapping."""
    if isinstance(report, msgspec.Struct):
        return msgspec.to_builtins(report)  # type: ignore[no-any-return]
    return report  # type: ignore[no-any-return]


def normalise_report(report: Mapping[str, Any]) -> dict[str, Any]:
    """Read any retrieval report: version 1 gains neutral guards; the version is kept.

    Raises ValueError (one line) when this is not a retrieval report at all.
    """
    if report.get("suite", "retrieval") != "retrieval":
        raise ValueError(f"not a retrieval report (suite {report.get('suite')!r})")
    version = report.get("bench_version")
    if version is None:
        raise ValueError("report has no bench_version; cannot tell what its numbers mean")
    if not isinstance(report.get("seeds"), list):
        raise ValueError("report has no per-seed scores (`seeds` list)")
    for number, block in enumerate(report["seeds"], start=1):
        _check_seed_block(number, block)
    normal = dict(report)
    normal["bench_version"] = str(version)
    normal["seeds"] = [normalise_seed_block(block) for block in report["seeds"]]
    normal["legacy_guards"] = any(not block.get("guards") for block in report["seeds"])
    normal["summary"] = run_seeds(normal["seeds"], normal=True) if normal["seeds"] else None
    return normal


def seed_scores(report: Mapping[str, Any], decide_on: str = "composite") -> dict[int, float]:
    if decide_on not in DECIDE_ON:
        raise ValueError(f"decide on composite or composite_guarded, not {decide_on!r}")
    return {int(block["seed"]): float(block[decide_on]) for block in report["seeds"]}


def comparable(champion: Mapping[str, Any], challenger: Mapping[str, Any]) -> None:
    """Refuse (ValueError, one line) to pair reports that do not measure the same thing."""
    old, new = str(champion.get("bench_version")), str(challenger.get("bench_version"))
    if old != new:
        raise ValueError(f"refusing to compare bench_version {old} with bench_version {new}: "
                         "their numbers mean different things; re-run both on one version")
    old_seeds = sorted(int(b["seed"]) for b in champion["seeds"])
    new_seeds = sorted(int(b["seed"]) for b in challenger["seeds"])
    if old_seeds != new_seeds:
        raise ValueError(f"refusing to compare different seeds: champion {old_seeds}, "
                         f"challenger {new_seeds}")
    old_settings = champion.get("settings") or {}
    new_settings = challenger.get("settings") or {}
    for key in ("limit", "budget_chars"):
        if old_settings.get(key) != new_settings.get(key):
            raise ValueError(f"refusing to compare runs with different {key}: "
                             f"{old_settings.get(key)} and {new_settings.get(key)}")


@dataclass(frozen=True)
class Decision:
    """The outcome of a paired comparison, including the failed-challenger case."""

    dethroned: bool
    reason: str
    verdict: PairedVerdict | None
    seeds: tuple[int, ...]
    champion_scores: tuple[float, ...]
    challenger_scores: tuple[float, ...]
    decide_on: str = "composite"
    paired: PairedComparison | None = None
    """The same per-seed differences as a paired t analysis: interval, p-value and the
    minimum detectable effect, so that "held" is read as "not shown", not "no better"."""

    def to_json_dict(self) -> dict[str, Any]:
        return {"dethroned": self.dethroned, "reason": self.reason,
                "verdict": self.verdict.to_json_dict() if self.verdict else None,
                "seeds": list(self.seeds), "champion_scores": list(self.champion_scores),
                "challenger_scores": list(self.challenger_scores),
                "decide_on": self.decide_on,
                "paired": self.paired.to_json_dict() if self.paired else None}


def decide(champion: Any, challenger: Any,
           decide_on: str = "composite") -> Decision:
    """Paired verdict, challenger minus champion, over the same seeds.

    A failed challenger holds by construction; a failed champion raises ValueError (the
    ladder cannot decide against a champion it could not score).
    """
    # A typed report was built (or read) normal already: it is not normalised again.
    champion = (_plain(champion) if isinstance(champion, msgspec.Struct)
                else normalise_report(champion))
    challenger = (_plain(challenger) if isinstance(challenger, msgspec.Struct)
                  else normalise_report(challenger))
    if champion.get("failure"):
        raise ValueError(f"champion run failed: {champion['failure'].get('reason')}")
    if challenger.get("failure"):
        held = seed_scores(champion, decide_on)
        seeds = tuple(sorted(held))
        return Decision(False, "challenger failed, champion holds: "
                               f"{challenger['failure'].get('reason')}", None, seeds,
                        tuple(held[seed] for seed in seeds), (), decide_on)
    comparable(champion, challenger)
    old, new = seed_scores(champion, decide_on), seed_scores(challenger, decide_on)
    seeds = tuple(sorted(old))
    old_scores = tuple(old[s] for s in seeds)
    new_scores = tuple(new[s] for s in seeds)
    verdict = paired_verdict(old_scores, new_scores)
    paired = paired_difference(dict(zip(seeds, old_scores, strict=True)),
                               dict(zip(seeds, new_scores, strict=True)))
    if verdict.dethroned:
        reason = (f"challenger dethrones: mean {decide_on} difference {verdict.mean_diff:+.4f} "
                  f">= band {verdict.band:.4f} over {verdict.n} seeds")
    else:
        reason = (f"champion holds: mean {decide_on} difference {verdict.mean_diff:+.4f} "
                  f"< band {verdict.band:.4f} over {verdict.n} seeds")
        if paired.mde:
            reason += (f"; {verdict.n} seeds detect differences of about {paired.mde:.4f} "
                       "or more (80 % power)")
    return Decision(verdict.dethroned, reason, verdict, seeds, old_scores, new_scores, decide_on,
                    paired)
