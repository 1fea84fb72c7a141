"""The retrieval views bound the number of categories and paraphrase templates they show
(issue 12): a store written by another tool can give each question its own, and 100,000
of them made a terminal of 100,000 lines and pages of 42 and 76 MB. The terminal and the
page show at most `CATEGORIES_SHOWN` categories and `TEMPLATES_SHOWN` templates, those of
lowest mean, say how many there are and which command writes them all; the page's
embedded copy keeps the same ones in every seed; the report itself keeps every one."""

from __future__ import annotations

import io
import json
import re
from typing import Any

import pytest
from rich.console import Console

from benchwarden.suites.retrieval.html import page_copy, render_html, whole_report_command
from benchwarden.suites.retrieval.report import (
    CATEGORIES_SHOWN,
    TEMPLATES_SHOWN,
    as_report,
    render_terminal,
)
from benchwarden.suites.retrieval.scoring import (
    CaseOutcome,
    PackMeasure,
    decide,
    score_seed,
)
from tests.suites.retrieval.test_html import report_of_seeds

SEEDS = (7, 8, 9)
CASES = 1_000


def _outcomes(seed: int, categories: int, templates: int, skill: float) -> list[CaseOutcome]:
    """`CASES` cases spread over `categories` categories and `templates` templates, their
    scores varying with the case so that each category and template has its own mean."""
    outcomes = []
    for index in range(CASES):
        score = 1.0 if (index * 7 + seed) % 11 < 11 * skill else 0.0
        moved = 1.0 - score if (index * 5 + seed) % 13 < 4 else score
        outcomes.append(CaseOutcome(
            seed=seed, case_id=f"case-{index:05d}", category=f"cat-{index % categories:05d}",
            question=f"What is v{index:05d}?",
            original=PackMeasure(score, 600, False, reason=None if score else "missing"),
            paraphrases=(PackMeasure(moved, 600, False,
                                     template=f"tpl-{index % templates:05d}"),)))
    return outcomes


def wide_report(categories: int, templates: int, *, name: str = "wide",
                skill: float = 0.6) -> dict[str, Any]:
    """One strategy's report JSON over `SEEDS` with that many categories and templates
    (each seed also lists the suite's own `CATEGORIES`, empty)."""
    blocks = [score_seed(seed, _outcomes(seed, categories, templates, skill), 2000)
              for seed in SEEDS]
    return report_of_seeds(blocks, SEEDS, name=name, run_id=f"retrieval-{name}",
                           bench_version="3")


def _lowest(means: dict[str, Any], limit: int) -> set[str]:
    """The `limit` names of lowest mean, ties in order (what a view must show)."""
    ranked = sorted(enumerate(means.items()), key=lambda item: (
        item[1][1]["mean"] is None, item[1][1]["mean"] or 0.0, item[0]))
    return {name for _, (name, _) in ranked[:limit]}


def _terminal(report: dict[str, Any]) -> str:
    out = io.StringIO()
    render_terminal(report, Console(file=out, width=200, color_system=None))
    return out.getvalue()


def _embedded(page: str) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page,
                      re.S)
    assert found is not None
    return json.loads(found.group(1))  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def wide() -> dict[str, Any]:
    return wide_report(500, 500)


def test_the_terminal_shows_the_lowest_categories_and_templates_and_says_how_many(
        wide: dict[str, Any]) -> None:
    text = _terminal(wide)
    flat = " ".join(text.split())
    summary = wide["summary"]
    categories = set(re.findall(r"^│ (cat-\d{5}) ", text, re.M))
    templates = set(re.findall(r"^│ (tpl-\d{5}) ", text, re.M))
    assert categories == _lowest(summary["category_means"], CATEGORIES_SHOWN)
    assert templates == _lowest(summary["guards"]["consistency_per_template"], TEMPLATES_SHOWN)
    categories_in_all = len(summary["category_means"])  # the measured ones
    assert categories_in_all == 500
    assert (f"per-category means (the {CATEGORIES_SHOWN} lowest of {categories_in_all})"
            in flat)
    assert f"paraphrase agreement per template (the {TEMPLATES_SHOWN} lowest of 500)" in flat
    for kind, shown, total in (("categories", CATEGORIES_SHOWN, categories_in_all),
                               ("templates", TEMPLATES_SHOWN, 500)):
        assert (f"{total - shown} more {kind} not shown (the {shown} with the lowest mean are): "
                "the JSON report (benchwarden show retrieval-wide --json FILE) holds every "
                "one") in flat


def test_the_page_draws_and_embeds_the_same_lowest_ones_in_every_seed(
        wide: dict[str, Any]) -> None:
    whole = as_report(wide)
    page = render_html(whole)
    embedded = _embedded(page)
    summary = wide["summary"]
    categories = _lowest(summary["category_means"], CATEGORIES_SHOWN)
    templates = _lowest(summary["guards"]["consistency_per_template"], TEMPLATES_SHOWN)
    assert set(embedded["summary"]["category_means"]) == categories
    assert set(embedded["summary"]["guards"]["consistency_per_template"]) == templates
    assert set(embedded["summary"]["guards"]["disagreements_per_template"]) == templates
    for block in embedded["seeds"]:
        assert set(block["category_means"]) <= categories
        assert set(block["guards"]["consistency_per_template"]) <= templates
        assert set(block["guards"]["disagreements_per_template"]) <= templates
    assert embedded["page_cut"]["categories"] == 500
    assert embedded["page_cut"]["templates"] == 500
    assert embedded["page_cut"]["command"] == whole_report_command(whole)
    drawn = page.split('<script type="application/json"')[0]
    assert set(re.findall(r"cat-\d{5}", drawn.split('id="failed"')[0])) == categories
    assert set(re.findall(r"tpl-\d{5}", drawn)) == templates
    for kind, shown, total in (("categories", CATEGORIES_SHOWN, 500),
                               ("templates", TEMPLATES_SHOWN, 500)):
        assert (f"Of {total} {kind}, the {shown} with the lowest mean over seeds of each "
                "strategy are drawn and embedded here; <code>benchwarden show retrieval-wide "
                "--json FILE (with this page&#x27;s --store)</code> writes every one") in page
    # the report itself keeps every one
    assert len(whole.summary.category_means) == 500  # type: ignore[union-attr]
    assert len(whole.seeds[0].guards.consistency_per_template) == 500


def test_a_comparison_page_cuts_both_sides() -> None:
    champion = wide_report(200, 300, name="champion", skill=0.7)
    challenger = wide_report(200, 300, name="challenger", skill=0.5)
    page_report = {**challenger, "comparison": {
        "champion": champion, "challenger": challenger,
        "decision": decide(champion, challenger).to_json_dict()}}
    copy = page_copy(page_report)
    assert copy.page_cut is not None
    assert (copy.page_cut.categories, copy.page_cut.templates) == (200, 300)
    assert copy.comparison is not None
    for side in (copy, copy.comparison.champion, copy.comparison.challenger):
        assert side.summary is not None
        assert len(side.summary.category_means) == CATEGORIES_SHOWN
        assert len(side.summary.guards.consistency_per_template) == TEMPLATES_SHOWN
        for block in side.seeds:
            assert len(block.category_means) <= CATEGORIES_SHOWN
            assert len(block.guards.consistency_per_template) <= TEMPLATES_SHOWN


def test_the_page_does_not_grow_with_the_number_of_categories_and_templates() -> None:
    """The same cases in 100 and in 1,000 categories and templates (names of the same
    length): the pages differ by at most a few per cent."""
    small = len(render_html(wide_report(100, 100)))
    large = len(render_html(wide_report(1_000, 1_000)))
    assert large < 1.03 * small, (small, large)


def test_a_report_within_the_bounds_is_drawn_and_embedded_whole() -> None:
    report = as_report(wide_report(CATEGORIES_SHOWN, TEMPLATES_SHOWN))
    copy = page_copy(report)
    assert copy.page_cut is None
    assert copy.summary == report.summary
    assert [(b.category_means, b.guards) for b in copy.seeds] == [
        (b.category_means, b.guards) for b in report.seeds]
    text = _terminal(report.to_json())
    assert len(set(re.findall(r"^│ (cat-\d{5}) ", text, re.M))) == CATEGORIES_SHOWN
    assert len(set(re.findall(r"^│ (tpl-\d{5}) ", text, re.M))) == TEMPLATES_SHOWN
    assert "more categories" not in text and "more templates" not in text
    assert "lowest" not in text
    assert "with the lowest mean" not in render_html(report)
