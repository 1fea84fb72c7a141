"""The terminal rendering of a contamination report: rung sentences and old reports."""

from __future__ import annotations

from rich.console import Console

from benchwarden.core.tables import FitTables
from benchwarden.suites.contamination.report import json_safe
from benchwarden.suites.contamination.terminal import render_terminal, rung_line

XFF = b"\xff".decode("utf-8", "surrogateescape")


def rendered(report) -> str:
    console = Console(record=True, width=250)
    render_terminal(report, console)
    return console.export_text()


def report_with(rungs):
    return {"run": {"id": "r", "config": {"concurrency": [r["concurrency"] for r in rungs],
                                          "repeat": 1}},
            "cells": [], "probes": [], "rungs": rungs, "score": {},
            "verdict": {"kind": "fail", "reason": "x"}}


def test_the_rung_sentence_is_printed_in_red_when_its_cells_are_unmeasured():
    rung = {"label": "c32", "concurrency": 32, "repeat": 1, "requests_sent": 32,
            "requests_failed": 26, "peak_in_flight": 6,
            "unmeasured_reason": "rung c32: 26 of 32 requests failed: HTTP 500 ×26",
            "description": "rung c32: 32 requests sent in the rung; ... 26 of 32 failed"}
    assert rung_line(rung).style == "red"
    assert "rung c32: 32 requests sent in the rung" in rendered(report_with([rung]))


def test_a_peak_below_the_label_is_yellow():
    rung = {"label": "c8", "concurrency": 8, "repeat": 1, "requests_sent": 8,
            "requests_failed": 0, "peak_in_flight": 4, "unmeasured_reason": None,
            "description": "rung c8: 8 requests sent in the rung; peak in flight 4"}
    assert rung_line(rung).style == "yellow"


def test_a_bench_version_1_report_still_renders_its_rungs():
    rung = {"label": "c2", "concurrency": 2, "repeat": 1, "slots": 4, "peak_in_flight": 1,
            "launch_skew_ms": 0.5}
    text = rendered(report_with([rung]))
    assert "rung c2: 4 requests sent in the rung" in text  # `slots` read as requests sent
    assert "peak in flight 1: the server ran them one at a time; launch skew 0.5 ms" in text
    assert rung_line(rung).style == "red"


def test_json_safe_leaves_valid_text_and_escapes_lone_surrogates():
    value = {"a": ["ok ü", "bad " + XFF], "b": 3}
    assert json_safe(value) == {"a": ["ok ü", "bad \\xff"], "b": 3}


def many_rungs_report(rungs: int, probes: int = 4) -> dict:
    levels = [2 ** (1 + index % 7) for index in range(rungs)]
    rung_blocks = [{"label": f"c{level}", "concurrency": level, "repeat": 1 + index // 7,
                    "requests_sent": level, "requests_failed": 0, "peak_in_flight": level,
                    "description": f"rung c{level}: {level} requests sent in the rung"}
                   for index, level in enumerate(levels)]
    cells = [{"probe": probe, "leg": f"c{level}", "repeat": 1 + index // 7, "level": level,
              "class": "identical" if (probe + index) % 3 else "diverged", "at": 1234}
             for probe in range(probes) for index, level in enumerate(levels)]
    return {"run": {"id": "r", "config": {"concurrency": sorted(set(levels)),
                                          "repeat": 1 + (rungs - 1) // 7}},
            "cells": cells, "rungs": rung_blocks, "score": {},
            "probes": [{"index": probe, "canary": f"ZZ-CANARY-NUMBER-{probe:02d}"}
                       for probe in range(probes)],
            "verdict": {"kind": "fail", "reason": "x"}}


def narrow_text(report, width: int) -> str:
    console = Console(record=True, width=width)
    console.push_render_hook(FitTables(console))
    render_terminal(report, console)
    return console.export_text()


def test_two_dozen_rungs_at_80_columns_are_a_row_per_leg_with_every_cell_whole():
    """At 80 columns a grid of 26 legs across drew empty boxes (each column a character
    or two wide); it is now a row per leg, in one part, every class and place whole."""
    text = narrow_text(many_rungs_report(24), 80)
    grid = text[text.index("probe × leg"):text.index("rung c2:")]
    assert "a row per leg" in grid and "part 1 of" not in grid
    assert all(f"{probe} ZZ-CANARY-NUMBER-0{probe}" in " ".join(grid.split())
               for probe in range(4))
    legs = [line.split("│")[1].strip() for line in grid.splitlines() if line.startswith("│")]
    assert [leg for leg in legs if leg] == ["ref"] + [
        f"c{2 ** (1 + index % 7)} #{1 + index // 7}" for index in range(24)] + ["post"]
    assert grid.count("DIVERGED") == grid.count("1,234") == 32  # the place is never split
    assert grid.count("identical") == 64
    assert max(map(len, text.splitlines())) <= 80


def test_a_grid_that_fits_keeps_a_row_per_probe():
    text = narrow_text(many_rungs_report(3), 120)
    assert "a row per leg" not in text
    assert all(f"│ {probe} ZZ-CANARY-NUMBER-0{probe}" in text for probe in range(4))


def test_many_probes_and_few_legs_keep_a_row_per_probe_at_80_columns():
    text = narrow_text(many_rungs_report(3, probes=30), 80)
    assert "a row per leg" not in text
    assert all(f"ZZ-CANARY-NUMBER-{probe:02d}" in text for probe in range(30))
