"""The terminal rendering of a contamination report: rung sentences and old reports."""

from __future__ import annotations

from rich.console import Console

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
