"""The retrieval HTML page, from reports scored by the suite's own pure scoring."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from html import escape
from typing import Any

import pytest

from benchwarden.suites.retrieval.corpus import CATEGORIES
from benchwarden.suites.retrieval.html import render_html
from benchwarden.suites.retrieval.report import as_report
from benchwarden.suites.retrieval.scoring import (
    CaseOutcome,
    PackMeasure,
    decide,
    run_seeds,
    score_seed,
)

HOSTILE = ("<script>document.title='PWNED';window.__pwned=1</script>"
           "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\"> \"q\" \u2028")
SEEDS = (101, 202, 303, 404, 505)
TEMPLATES = ("Remind me: {q}", "Quick question, {q}")


def _outcomes(seed: int, skill: float, dumps: bool) -> list[CaseOutcome]:
    rng = random.Random(seed * 31 + int(skill * 100))
    outcomes = []
    for index, category in enumerate(CATEGORIES):
        score = 1.0 if rng.random() < skill else 0.0
        used = 1950 if dumps else 600 + 40 * index
        reason = None if score == 1.0 else f"expected value missing from the pack: {HOSTILE}"
        paraphrases = tuple(PackMeasure(score if (index + t) % 5 else 1.0 - score, used,
                                        canary_hit=dumps and t == 0 and index == 3,
                                        template=template)
                            for t, template in enumerate(TEMPLATES))
        outcomes.append(CaseOutcome(seed=seed, case_id=f"{category}-{seed}", category=category,
                                    question=f"What is the code Ada gave for {category}? {HOSTILE}",
                                    original=PackMeasure(score, used, canary_hit=False,
                                                         reason=reason),
                                    paraphrases=paraphrases))
    return outcomes


def strategy_report(name: str, skill: float, dumps: bool = False) -> dict[str, Any]:
    blocks = [score_seed(seed, _outcomes(seed, skill, dumps), 2000) for seed in SEEDS]
    return report_of_seeds(blocks, SEEDS, name=name, run_id=f"retrieval-{name[:6]}",
                           bench_version="2")


def report_of_seeds(blocks: list[Any], seeds: Sequence[int], *, name: str, run_id: str,
                    bench_version: str) -> dict[str, Any]:
    """One strategy's report JSON over its scored seed `blocks`, of `seeds`."""
    return {
        "schema": "benchwarden.report/1", "suite": "retrieval", "bench_version": bench_version,
        "run": {"id": run_id, "suite": "retrieval", "bench_version": bench_version,
                "config": {}, "seeds": list(seeds), "target": {}, "package_version": "0.1.0",
                "git_sha": "c0ffee", "host": {}, "started_at": 1_790_000_000.0,
                "ended_at": 1_790_000_030.0, "status": "completed", "resumed_from": None},
        "verdict": {"kind": "info", "reason": f"composite over {len(seeds)} seeds"},
        "strategy": {"name": name, "version": "1"},
        "settings": {"limit": 10, "budget_chars": 2000},
        "seeds": blocks, "summary": run_seeds(blocks), "failure": None,
    }


def ladder_report() -> dict[str, Any]:
    """A challenger report carrying its comparison with the champion and the ledger."""
    champion = strategy_report("fts5-bm25", 0.6)
    challenger = strategy_report(f"dump {HOSTILE}", 0.85, dumps=True)
    decision = decide(champion, challenger).to_json_dict()
    report = dict(challenger)
    report["verdict"] = {"kind": "pass" if decision["dethroned"] else "fail",
                         "reason": decision["reason"]}
    report["comparison"] = {"champion": champion, "challenger": challenger, "decision": decision}
    report["ledger"] = [
        {"decided_at": 1_789_000_000.0, "champion": "substring", "challenger": "fts5-bm25",
         "dethroned": True, "mean_diff": 0.21, "band": 0.03, "n": 5,
         "public_value": "a1b2c3 2026-11-01",
         "reason": "challenger dethrones"},
        {"decided_at": 1_790_000_000.0, "champion": "fts5-bm25", "challenger": f"dump {HOSTILE}",
         **{k: decision["verdict"][k] for k in ("mean_diff", "band", "n", "dethroned")},
         "reason": decision["reason"]},
    ]
    return report


@pytest.fixture
def single() -> str:
    return render_html(strategy_report("fts5-bm25", 0.7))


@pytest.fixture
def ladder() -> str:
    return render_html(ladder_report())


def test_single_strategy_page_has_every_section(single: str) -> None:
    for ident in ("verdict", "summary", "categories", "composite", "guards", "seeds", "failed",
                  "run"):
        assert f'id="{ident}"' in single, ident
    assert 'id="ladder"' not in single
    assert "paired band is drawn when the ladder compares" in single


def test_category_bars_cover_every_measured_category(single: str) -> None:
    for category in CATEGORIES:
        assert category.replace("_", " ") in single


def test_ladder_page_draws_both_strategies_band_and_history(ladder: str) -> None:
    assert 'id="ladder"' in ladder
    assert 'class="chart diverging"' in ladder
    assert 'class="band"' in ladder
    assert "champion fts5-bm25" in ladder
    assert ladder.count("<tr>") > 10
    assert "a1b2c3 2026-11-01" in ladder


def test_the_dumping_challenger_shows_its_guards_tripping(ladder: str) -> None:
    report = ladder_report()
    guards = report["comparison"]["challenger"]["seeds"][0]["guards"]
    assert guards["canary_tripped"] and guards["efficiency"] < 0.6
    assert ">yes<" in ladder  # the tripped column


def test_strategy_names_questions_and_reasons_are_escaped(ladder: str, single: str) -> None:
    for page in (ladder, single):
        assert "<script>document.title" not in page
        assert "<img src=x" not in page
        assert page.count("<script") == 2
    assert "&lt;script&gt;document.title=&#x27;PWNED&#x27;" in ladder


def test_a_version_one_report_is_read_with_neutral_guards() -> None:
    old = strategy_report("substring", 0.5)
    old["bench_version"] = "1"
    for block in old["seeds"]:
        del block["guards"]
        del block["composite_guarded"]
    page = render_html(old)
    assert "version-1 report without guard blocks" in page


def test_a_failed_strategy_says_why() -> None:
    report = strategy_report("sandboxed", 0.5)
    report["failure"] = {"seed": 202, "reason": "sandbox: exceeded the 512 MiB memory cap"}
    report["verdict"] = {"kind": "fail", "reason": "strategy sandboxed failed on seed 202"}
    page = render_html(report)
    assert "exceeded the 512 MiB memory cap" in page and 'class="alert"' in page


def test_no_external_reference(ladder: str) -> None:
    assert not re.search(r'(?:src|href)\s*=\s*["\']?\s*(?:https?:)?//', ladder, re.I)
    assert "@import" not in ladder and "url(" not in ladder


def test_an_empty_report_still_renders() -> None:
    page = render_html({"suite": "retrieval",
                        "verdict": {"kind": "fail", "reason": "nothing measured: no seed"}})
    assert "no seed was scored" in page


def test_a_bare_comparison_renders_both_sides() -> None:
    """What `retrieval compare` has: two reports and a decision, no run of its own."""
    champion, challenger = strategy_report("bm25", 0.6), strategy_report("fts5", 0.7)
    decision = decide(champion, challenger).to_json_dict()
    page = render_html({"suite": "retrieval", "bench_version": "2",
                        "verdict": {"kind": "info", "reason": decision["reason"]},
                        "comparison": {"champion": champion, "challenger": challenger,
                                       "decision": decision}})
    assert "champion bm25" in page and "challenger fts5" in page
    assert 'class="chart diverging"' in page
    assert "Strategy fts5" in page


def test_each_template_shows_how_many_cases_it_moved(single: str) -> None:
    report = strategy_report("fts5-bm25", 0.7)
    moved = report["summary"]["guards"]["disagreements_per_template"]
    assert set(moved) == set(TEMPLATES)
    assert "cases it moved" in single
    for template, (count, asked) in moved.items():
        assert asked == len(SEEDS) * len(CATEGORIES)
        assert f"{count} of {asked}" in single, template
    # a version-2 report has no counts and shows a dash, not a crash
    old = strategy_report("fts5-bm25", 0.7)
    for block in old["seeds"]:
        block["guards"].pop("disagreements_per_template")
    old["summary"] = run_seeds(old["seeds"])
    assert "cases it moved" in render_html(old)



def _embedded(page: str) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page,
                      re.S)
    assert found is not None
    return json.loads(found.group(1))  # type: ignore[no-any-return]


def _failed_cases(report: Any) -> list[str]:
    """The failed case ids of a report (typed, or its JSON), in seed order."""
    plain = report if isinstance(report, dict) else report.to_json()
    return [case["case"] for block in plain["seeds"] for case in block["failed_cases"]]


@pytest.mark.parametrize("cap", [0, 3, 7, 10_000])
def test_the_page_keeps_the_first_failed_cases_of_each_strategy_and_says_how_many_more(
        monkeypatch: pytest.MonkeyPatch, cap: int) -> None:
    """However many seeds a run has, a strategy's page draws and embeds at most
    `FAILED_CASES_DRAWN` failed cases (the first seeds' first), says how many it left
    out and where they all are, and changes no number."""
    from benchwarden.suites.retrieval import html

    monkeypatch.setattr(html, "FAILED_CASES_DRAWN", cap)
    whole = as_report(ladder_report())
    page = render_html(whole)
    embedded = _embedded(page)
    sides = [(embedded, whole),
             (embedded["comparison"]["champion"], whole.comparison.champion),
             (embedded["comparison"]["challenger"], whole.comparison.challenger)]
    left_out = 0  # of the two sides the failed-case section draws
    for shown, report in sides:
        every = _failed_cases(report)
        assert _failed_cases(shown) == every[:cap]  # the first ones, in order
        if shown is not embedded:
            left_out += len(every) - len(every[:cap])
        plain = report.to_json()
        for block, original in zip(shown["seeds"], plain["seeds"], strict=True):
            assert {**block, "failed_cases": []} == {**original, "failed_cases": []}
        assert shown["summary"] == plain["summary"]
    drawn = page.split('id="failed"')[1]
    assert drawn.count("<tr>") - drawn.count("<thead>") <= 3 * cap + 1
    if cap < 10_000:
        assert left_out > 0
        assert f"{left_out:,} more failed cases are neither drawn nor embedded" in page
        assert (f"benchwarden export --suite retrieval --run {escape(whole.run.id)} "
                "--out cases.jsonl") in page
    else:
        assert left_out == 0 and "more failed cases" not in page
