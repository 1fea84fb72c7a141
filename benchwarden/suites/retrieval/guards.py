"""The guards reported beside the composite (SPEC §4). Pure arithmetic, no I/O.

- efficiency = 0.5 + 0.5 * (1 - min(1, mean_used_chars / budget)): a bounded penalty
  on budget spent, floored at 0.5 so a wasteful strategy is penalised, never zeroed;
- consistency = fraction of (case, paraphrase template) pairs whose paraphrased pack
  grades the same as the original, with the agreement of each template beside it so a
  template that never moves retrieval is visible, and how many cases each template
  moved (disagreements of n asked);
- canary = 0.5 when any pack surfaced the planted canary, else 1.0, with the leak rate
  (packs that surfaced it / packs) beside it.

`composite` is the plain mean of the non-empty category means and never changes
meaning; `composite_guarded` is the product of the composite and the three guards.
Degenerate inputs have defined values: no packs use no budget (efficiency 1.0), no
paraphrases cannot disagree (consistency 1.0), no packs leak nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

CANARY_PENALTY = 0.5
EFFICIENCY_FLOOR = 0.5


def efficiency(used_chars: Sequence[int], budget_chars: int) -> float:
    if not used_chars:
        return 1.0
    mean_used = sum(used_chars) / len(used_chars)
    if budget_chars <= 0:
        # nothing may be used: any use spends "everything"
        ratio = 1.0 if mean_used > 0 else 0.0
    else:
        ratio = min(1.0, mean_used / budget_chars)
    return EFFICIENCY_FLOOR + (1.0 - EFFICIENCY_FLOOR) * (1.0 - ratio)


def disagreements(agreements: Mapping[str, Sequence[bool]]) -> dict[str, list[int]]:
    """Per template: [cases whose paraphrase graded differently, cases asked]."""
    return {template: [len(outcomes) - sum(outcomes), len(outcomes)]
            for template, outcomes in agreements.items()}


def consistency(agreements: Mapping[str, Sequence[bool]]) -> tuple[float, dict[str, float | None]]:
    """Overall agreement over every (case, template) pair, and agreement per template."""
    per_template: dict[str, float | None] = {}
    total = agreed = 0
    for template, outcomes in agreements.items():
        per_template[template] = (sum(outcomes) / len(outcomes)) if outcomes else None
        total += len(outcomes)
        agreed += sum(outcomes)
    return (agreed / total if total else 1.0), per_template


@dataclass(frozen=True)
class Canary:
    multiplier: float
    tripped: bool
    leak_rate: float
    hits: int
    packs: int


def canary(hits: int, packs: int) -> Canary:
    if hits < 0 or packs < 0 or hits > packs:
        raise ValueError(f"canary hits must be between 0 and packs, got {hits} of {packs}")
    tripped = hits > 0
    return Canary(multiplier=CANARY_PENALTY if tripped else 1.0, tripped=tripped,
                  leak_rate=(hits / packs) if packs else 0.0, hits=hits, packs=packs)


@dataclass(frozen=True)
class Guards:
    efficiency: float = 1.0
    consistency: float = 1.0
    canary: float = 1.0
    canary_tripped: bool = False
    canary_leak_rate: float = 0.0
    consistency_per_template: Mapping[str, float | None] = field(default_factory=dict)
    disagreements_per_template: Mapping[str, list[int]] = field(default_factory=dict)
    """template -> [cases whose paraphrase graded differently, cases asked]."""
    mean_used_chars: float | None = None
    packs: int = 0

    def to_json_dict(self) -> dict[str, Any]:
        return {"efficiency": self.efficiency, "consistency": self.consistency,
                "canary": self.canary, "canary_tripped": self.canary_tripped,
                "canary_leak_rate": self.canary_leak_rate,
                "consistency_per_template": dict(self.consistency_per_template),
                "disagreements_per_template": {template: list(counts) for template, counts
                                               in self.disagreements_per_template.items()},
                "mean_used_chars": self.mean_used_chars, "packs": self.packs}

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any] | None) -> Guards:
        """Read a guard block; a missing block (a version-1 report) is all 1.0."""
        if not data:
            return cls()
        return cls(efficiency=float(data.get("efficiency", 1.0)),
                   consistency=float(data.get("consistency", 1.0)),
                   canary=float(data.get("canary", 1.0)),
                   canary_tripped=bool(data.get("canary_tripped", False)),
                   canary_leak_rate=float(data.get("canary_leak_rate", 0.0)),
                   consistency_per_template=dict(data.get("consistency_per_template") or {}),
                   disagreements_per_template={
                       str(template): [int(count) for count in counts] for template, counts
                       in (data.get("disagreements_per_template") or {}).items()},
                   mean_used_chars=data.get("mean_used_chars"),
                   packs=int(data.get("packs", 0)))


def composite(category_means: Mapping[str, float | None]) -> float:
    """Mean of the non-empty category means; 0.0 when no category was measured."""
    values = [value for value in category_means.values()
              if value is not None and not math.isnan(value)]
    return sum(values) / len(values) if values else 0.0


def composite_guarded(composite_value: float, guards: Guards) -> float:
    return composite_value * guards.efficiency * guards.consistency * guards.canary
