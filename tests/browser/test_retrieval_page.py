"""The retrieval report (a ladder comparison with its history) in headless Chromium."""

from __future__ import annotations

import pytest

from benchwarden.suites.retrieval.html import render_html
from tests.browser.checks import COMMON_EXPRESSIONS, assert_clean_visit
from tests.browser.chromium import chromium_path, visit_page
from tests.conftest import require
from tests.suites.retrieval.test_html import ladder_report

pytestmark = pytest.mark.browser


def test_retrieval_page_renders_safely(tmp_path, output_dir) -> None:
    require(chromium_path() is not None, "headless Chromium",
            "apt-get install chromium, or set BENCHWARDEN_TEST_CHROMIUM")
    report = ladder_report()
    page = tmp_path / "retrieval.html"
    page.write_text(render_html(report), encoding="utf-8")
    visit = visit_page(page, {
        **COMMON_EXPRESSIONS,
        "category_bars": "document.querySelectorAll('#categories svg.grouped g.bar-col').length",
        "band": "document.querySelectorAll('#seeds svg.diverging rect.band').length",
        "seed_differences": "document.querySelectorAll('#seeds svg.diverging g.bar-row').length",
        "ledger_rows": "document.querySelectorAll('#ladder tbody tr').length",
        "guard_charts": "document.querySelectorAll('#guards svg.chart').length",
    }, screenshot=output_dir / "retrieval.png", full_page=output_dir / "retrieval-full.png")
    assert_clean_visit(visit, report)
    assert visit.values["category_bars"] >= 2 * 10
    assert visit.values["band"] == 1
    assert visit.values["seed_differences"] == len(report["seeds"])
    assert visit.values["ledger_rows"] == len(report["ledger"])
    assert visit.values["guard_charts"] == 1
