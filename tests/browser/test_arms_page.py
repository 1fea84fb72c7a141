"""The arms report in a real headless Chromium with the network off."""

from __future__ import annotations

import pytest

from benchwarden.suites.arms.html import render_html
from tests.browser.checks import COMMON_EXPRESSIONS, assert_clean_visit
from tests.browser.chromium import chromium_path, visit_page
from tests.conftest import require
from tests.suites.arms.test_html import sample_report

pytestmark = pytest.mark.browser


def test_arms_page_renders_safely(tmp_path, output_dir) -> None:
    require(chromium_path() is not None, "headless Chromium",
            "apt-get install chromium, or set BENCHWARDEN_TEST_CHROMIUM")
    report = sample_report(tmp_path)
    page = tmp_path / "arms.html"
    page.write_text(render_html(report), encoding="utf-8")
    visit = visit_page(page, {
        **COMMON_EXPRESSIONS,
        "bar_charts": "document.querySelectorAll('#charts svg.bars').length",
        "whiskers": "document.querySelectorAll('#charts g.whisker').length",
        "trial_details": "document.querySelectorAll('details[id^=\"trial-\"]').length",
        "coverage_opens": """new Promise(resolve => {
            const link = document.querySelector('#coverage a.cell-link');
            const target = document.getElementById(link.getAttribute('href').slice(1));
            const before = target.open;
            link.dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true}));
            setTimeout(() => resolve([before, target.open]), 200);
        })""",
    }, screenshot=output_dir / "arms.png", full_page=output_dir / "arms-full.png")
    assert_clean_visit(visit, report)
    assert visit.values["bar_charts"] == 2
    assert visit.values["whiskers"] >= 2 * 3
    assert visit.values["trial_details"] == len(report["trials"])
    assert visit.values["coverage_opens"] == [False, True]
