"""The contamination report in a real headless Chromium with the network off."""

from __future__ import annotations

import pytest

from benchwarden.suites.contamination.html import render_html
from tests.browser.checks import COMMON_EXPRESSIONS, assert_clean_visit
from tests.browser.chromium import chromium_path, visit_page
from tests.conftest import require
from tests.suites.contamination.test_html import sample_report

pytestmark = pytest.mark.browser


def test_contamination_page_renders_safely(tmp_path, output_dir) -> None:
    require(chromium_path() is not None, "headless Chromium",
            "apt-get install chromium, or set BENCHWARDEN_TEST_CHROMIUM")
    report = sample_report()
    page = tmp_path / "contamination.html"
    page.write_text(render_html(report), encoding="utf-8")
    visit = visit_page(page, {
        **COMMON_EXPRESSIONS,
        "grid_cells": "document.querySelectorAll('svg.grid a.cell-link').length",
        "timelines": "document.querySelectorAll('svg.timeline').length",
        "fidelity": "document.querySelectorAll('#fidelity svg.grouped rect').length",
        "cell_opens": """new Promise(resolve => {
            const detail = document.getElementById('cell-2-c4');
            const before = detail.open;
            document.querySelector('a.cell-link[href="#cell-2-c4"]')
                .dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true}));
            setTimeout(() => resolve([before, detail.open]), 200);
        })""",
        "foreign_marked": "[...document.querySelectorAll('mark.foreign')].map(m => m.textContent)",
    }, screenshot=output_dir / "contamination.png",
       full_page=output_dir / "contamination-full.png")
    assert_clean_visit(visit, report)
    assert visit.values["grid_cells"] == len(report["cells"])
    assert visit.values["timelines"] == len(report["rungs"])
    assert visit.values["fidelity"] > 0
    assert visit.values["cell_opens"] == [False, True]
    assert "WM-COBALT-LYNX-18" in visit.values["foreign_marked"]
