"""The arms HTML page, from a report the suite builds out of an in-memory store."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from benchwarden.core.records import Record, Run, RunEnd, TokenComponents
from benchwarden.core.store import open_store
from benchwarden.suites.arms import report as arms_report
from benchwarden.suites.arms.html import enrich, render_html

HOSTILE = ("<script>document.title='PWNED';window.__pwned=1</script>"
           "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\"> \"quoted\" \u2028")

ARMS = ("cli", "mcp", "http-api")
TASKS = {"list-open-bugs": "read", "label-issue": "single-mutation",
         "close-stale-pr": "find-then-act", "triage-and-assign": "multi-step"}


def _trial(arm: str, task: str, trial: int, index: int) -> Record:
    tier = TASKS[task]
    # a deterministic spread of outcomes: mcp fails more, multi-step gets confused
    failing = ((arm == "mcp" and trial == 2)
               or (tier == "multi-step" and arm != "cli" and trial != 1))
    confused = failing and tier == "multi-step" and arm == "http-api"
    hung = arm == "mcp" and task == "close-stale-pr" and trial == 3
    outcome = "fail" if (failing or hung) else "pass"
    failure = "hung" if hung else ("confused" if confused else ("incorrect" if failing else None))
    reasons = {"incorrect": ["missing change: issue 12 label 'bug'",
                             f"extra change: issue 7 title {HOSTILE}"],
               "confused": ["hit the turn cap after 40 turns"], "hung": ["hit the wall clock"]}
    transcript: list[dict[str, Any]] = []
    if arm == "cli":
        transcript = [{"kind": "shell", "command": "tracker issues list --state open | grep bug"},
                      {"kind": "shell", "command": "curl http://example.invalid",
                       "denied": True, "reason": "curl is not on this arm's allow-list"}]
    else:
        transcript = [{"kind": "function", "name": "list_issues", "arguments": '{"state": "open"}'},
                      {"kind": "function", "name": "set_label",
                       "arguments": json.dumps({"issue": 12, "label": HOSTILE})}]
    base = 1_790_000_000.0 + index * 7
    return Record(
        suite="arms", scope="tracker", arm=arm, task=task, trial=trial, run_id="arms-run-1",
        outcome=outcome, started_at=base, ended_at=base + 3.5 + trial,
        tokens=TokenComponents(fresh_input=1200 + 300 * ARMS.index(arm), cache_creation=200,
                               cache_read=900 + 50 * trial, output=180 + 40 * ARMS.index(arm)),
        payload={"tier": tier, "failure": failure, "reasons": reasons.get(failure or "", []),
                 "turns": 4 + trial + ARMS.index(arm),
                 "stopped": "finished" if not (confused or hung)
                 else ("turn_cap" if confused else "wall_clock"),
                 "final_report": "" if hung else f"Done. Open bugs: 3. Note: {HOSTILE}",
                 "transcript": transcript,
                 "denied_calls": sum(1 for e in transcript if e.get("denied")),
                 "tokens_reported": not hung, "imputed_cost_usd": 0.0123 + 0.001 * trial,
                 "driver": "openai-tools", "model": "smollm2", "bench_version": "1"})


def sample_report(tmp_path) -> dict[str, Any]:
    """An arms report built by the suite itself from a store holding 3 arms × 4 tasks × 3 trials."""
    with open_store(tmp_path / "arms.sqlite") as store:
        run = Run(run_id="arms-run-1", suite="arms", bench_version="1",
                  config={"scope": "tracker", "arms": list(ARMS), "tasks": list(TASKS),
                          "tiers": ["read", "single-mutation", "find-then-act", "multi-step"]},
                  seeds=(3,), target={"url": "http://127.0.0.1:8081", "model": "smollm2"},
                  package_version="0.1.0", git_sha="feedface", host={"os": "Linux"},
                  started_at=1_790_000_000.0)
        store.begin_run(run)
        records = [_trial(arm, task, trial, i) for i, (arm, task, trial) in enumerate(
            (a, t, n) for a in ARMS for t in TASKS for n in (1, 2, 3))]
        store.append(records)
        cells = [{"arm": a, "task": t, "before": 0, "after": 3, "passed": 2, "failed": 1,
                  "invalid": 0, "harness_errors": 0, "covered": True}
                 for a in ARMS for t in TASKS]
        store.finish_run(RunEnd("arms-run-1", 1_790_000_500.0, "completed",
                                {"recorded": len(records), "invalid": 1, "harness_errors": 0,
                                 "cells": cells,
                                 "problems": [f"trial 4 of cli × label-issue invalid: {HOSTILE}"],
                                 "floor": 3, "floor_reached": True}))
        return enrich(store, arms_report.build_report(store, "arms-run-1")).to_json()


@pytest.fixture
def report(tmp_path) -> dict[str, Any]:
    return sample_report(tmp_path)


def test_enrich_adds_every_trial_with_its_transcript(report) -> None:
    assert len(report["trials"]) == 36
    first = report["trials"][0]
    assert first["transcript"] and "reasons" in first and first["cost_equivalent"] > 0


def test_hostile_agent_output_is_escaped(report) -> None:
    page = render_html(report)
    assert "<script>document.title" not in page
    assert "<img src=x" not in page
    assert "&lt;script&gt;document.title=&#x27;PWNED&#x27;" in page
    assert page.count("<script") == 2


def test_required_sections_and_charts(report) -> None:
    page = render_html(report)
    for ident in ("verdict", "headline", "charts", "tiers", "coverage", "failures", "paired",
                  "trials", "tally", "run"):
        assert f'id="{ident}"' in page, ident
    assert page.count('class="chart bars"') == 2  # success rate and cost per arm
    assert 'class="chart grid"' in page
    assert page.count('class="whisker"') >= 6
    assert 'class="verdict verdict-info"' in page


def test_every_trial_has_a_drill_down_with_transcript_and_reasons(report) -> None:
    page = render_html(report)
    for trial in report["trials"]:
        ident = f'trial-{trial["arm"]}-{trial["task"]}-{trial["trial"]}'
        assert f'id="{ident}"' in page
    assert "missing change: issue 12 label &#x27;bug&#x27;" in page
    assert "tracker issues list --state open | grep bug" in page
    assert "curl is not on this arm&#x27;s allow-list" in page


def test_coverage_cells_link_to_their_trials(report) -> None:
    page = render_html(report)
    targets = set(re.findall(r'<a class="cell-link" href="#([^"]+)"', page))
    assert len(targets) == len(ARMS) * len(TASKS)
    assert all(f'id="{t}"' in page for t in targets)


def test_no_external_reference(report) -> None:
    page = render_html(report)
    assert not re.search(r'(?:src|href)\s*=\s*["\']?\s*(?:https?:)?//', page, re.I)
    assert "@import" not in page and "url(" not in page


def test_a_report_without_trials_says_where_they_come_from() -> None:
    page = render_html({"suite": "arms", "verdict": {"kind": "fail", "reason": "nothing measured"}})
    assert "benchwarden report RUN --html" in page
    assert 'class="verdict verdict-fail"' in page


def _wide(report: dict[str, Any], tasks: int) -> dict[str, Any]:
    """The sample report made a suite of `tasks` tasks: every cell covered except two
    tasks far down the suite (one short in one arm, one never run in another), and a
    tally cell per arm and task with one cell of invalid trials, also far down."""
    wide = json.loads(json.dumps(report))
    names = [f"wide-task-{number:05d}" for number in range(tasks)]
    short, never, leaking = names[-3], names[-2], names[-5]
    wide["tasks"] = names
    for arm in ARMS:
        samples = {name: 3 for name in names}
        if arm == "mcp":
            samples[short] = 1
        if arm == "cli":
            samples[never] = 0
        wide["coverage"][arm]["samples"] = samples
    cells = [{"arm": arm, "task": name, "before": 0, "after": 3, "passed": 3, "failed": 0,
              "invalid": 1 if name == leaking and arm == "http-api" else 0,
              "harness_errors": 0, "covered": True} for arm in ARMS for name in names]
    for tally in ("tally", "runs_tally"):
        wide[tally]["cells"] = cells
    return wide


def test_a_suite_of_thousands_of_tasks_draws_a_bounded_grid_and_says_so(report) -> None:
    from benchwarden.suites.arms.html import COVERAGE_CELLS_DRAWN, TALLY_ROWS_SHOWN

    tasks = 4 * COVERAGE_CELLS_DRAWN
    page = render_html(_wide(report, tasks))
    drawn = max(1, COVERAGE_CELLS_DRAWN // len(ARMS))
    coverage = page[page.index('id="coverage"'):page.index('id="failures"')]
    assert f"Drawing {drawn:,} of {tasks:,} tasks" in coverage
    assert coverage.count("samples (") == drawn * len(ARMS)  # one title per drawn cell
    # the cells needing trials are drawn though they come last in the suite
    assert f"mcp × wide-task-{tasks - 3:05d}: 1 samples (partial)" in coverage
    assert f"cli × wide-task-{tasks - 2:05d}: 0 samples (missing)" in coverage
    assert "wide-task-00000" in coverage  # then the suite from its start
    assert f"wide-task-{drawn + 5:05d}:" not in coverage
    tally = page[page.index('id="tally"'):page.index('id="run"')]
    assert f"Showing {TALLY_ROWS_SHOWN:,} of {tasks * len(ARMS):,} cells" in tally
    assert f"wide-task-{tasks - 5:05d}" in tally  # its invalid trial first
    # the page grows with the suite only by the report's JSON, not by the drawing
    assert len(page.encode()) < len(json.dumps(_wide(report, tasks)).encode()) + 3_000_000


def test_a_suite_that_fits_draws_every_cell_without_a_note(report) -> None:
    page = render_html(_wide(report, 50))
    coverage = page[page.index('id="coverage"'):page.index('id="failures"')]
    assert "Drawing" not in coverage and coverage.count("samples (") == 50 * len(ARMS)
    assert "Showing" not in page[page.index('id="tally"'):page.index('id="run"')]
