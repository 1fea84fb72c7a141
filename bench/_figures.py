"""The one shape every bench script reports its figures in, printed and as JSON.

A figure is a measured `value` beside a `baseline` measured in the same run, their
`ratio` (value / baseline) and a `unit`. `bench/run.py --json PATH` runs every script
with `--json FILE` and merges what they write:

    {"store_append.sqlite_batch_1000": {"value": 12403.0, "baseline": 376.0,
                                        "ratio": 32.99, "unit": "records/s"}, ...}

Invariants: names are unique within a script and prefixed with the script's name (so
merged files never collide); a ratio is None only when the baseline is zero or missing.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Figure:
    name: str
    value: float | None
    baseline: float | None
    unit: str
    note: str = ""  # printed, not written: what the value and its baseline are

    @property
    def ratio(self) -> float | None:
        if self.value is None or not self.baseline:
            return None
        return self.value / self.baseline

    def as_json(self) -> dict[str, float | str | None]:
        ratio = self.ratio
        return {"value": self.value, "baseline": self.baseline,
                "ratio": None if ratio is None or not math.isfinite(ratio) else round(ratio, 4),
                "unit": self.unit}


def now_vs_before(command: str, label: str, at: str, seconds: tuple[float, float],
                  peak_rss: tuple[float, float] | None = None) -> list[Figure]:
    """A command measured on this code and on an older checkout (`--before`), at one
    point (`label` in the figure's name, `at` in its note: "1M" and "at 1M"): its wall
    time and, when given, its peak RSS, each `(now, before)` with the older checkout as
    the baseline."""
    figures = [Figure(f"{command}.seconds.{label}.now_vs_before", seconds[0], seconds[1], "s",
                      f"wall time {at}, this code vs before")]
    if peak_rss is not None:
        figures.append(Figure(f"{command}.peak_rss.{label}.now_vs_before", peak_rss[0],
                              peak_rss[1], "MiB", f"peak RSS {at}, this code vs before"))
    return figures


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", dest="json_path", default=None, metavar="PATH",
                        help="also write the figures as JSON here (what bench/run.py reads)")


def _number(value: float | None) -> str:
    if value is None:
        return "—"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def emit(script: str, figures: Iterable[Figure], json_path: str | None = None) -> dict:
    """Print the figures as a table and, with `json_path`, write them as JSON."""
    figures = list(figures)
    names = [f"{script}.{figure.name}" for figure in figures]
    if len(set(names)) != len(names):
        raise ValueError(f"{script}: figure names repeat: {names}")
    print(f"\n{script}: figures (ratio = value / baseline, both measured in this run)")
    width = max([len(name) for name in names] + [6])
    print(f"{'figure':<{width}} {'value':>12} {'baseline':>12} {'ratio':>8}  unit")
    for name, figure in zip(names, figures, strict=True):
        ratio = figure.ratio
        print(f"{name:<{width}} {_number(figure.value):>12} {_number(figure.baseline):>12} "
              f"{'—' if ratio is None else f'{ratio:.2f}x':>8}  {figure.unit}"
              + (f"  ({figure.note})" if figure.note else ""))
    document = {name: figure.as_json() for name, figure in zip(names, figures, strict=True)}
    if json_path:
        Path(json_path).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return document
