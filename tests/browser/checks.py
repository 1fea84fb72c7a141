"""What every report page must satisfy in the browser, whatever its suite."""

from __future__ import annotations

from typing import Any

from tests.browser.chromium import PageVisit

# The hostile payload the sample reports carry sets these if it ever runs.
COMMON_EXPRESSIONS = {
    "title": "document.title",
    "pwned_global": "typeof window.__pwned",
    "pwned_attribute": "document.body.getAttribute('data-pwned')",
    "images": "document.images.length",
    "banner": "document.getElementById('verdict').innerText",
    "banner_class": "document.getElementById('verdict').className",
    "charts": "document.querySelectorAll('svg.chart').length",
    # textContent: the payload sits in closed <details>, which innerText skips
    "hostile_as_text": "document.querySelector('main').textContent.includes("
                       "\"<script>document.title='PWNED'\")"
                       " && document.querySelector('main').textContent"
                       ".includes('<img src=x onerror=')",
    "embedded_kind": "JSON.parse(document.getElementById('report-data').textContent).verdict.kind",
}


def assert_clean_visit(visit: PageVisit, report: dict[str, Any]) -> None:
    assert visit.errors == []
    # nothing but the page itself was requested: no network, no external resource
    assert [url for url in visit.requests if not url.startswith(("file:", "data:"))] == []
    assert visit.values["title"] != "PWNED" and "PWNED" not in str(visit.values["title"])
    assert visit.values["pwned_global"] == "undefined"
    assert visit.values["pwned_attribute"] is None
    assert visit.values["images"] == 0
    assert visit.values["hostile_as_text"] is True
    verdict = report["verdict"]
    assert verdict["kind"].upper() in visit.values["banner"]
    assert verdict["reason"] in visit.values["banner"].replace("\n", " ")
    assert f"verdict-{verdict['kind']}" in visit.values["banner_class"]
    assert visit.values["charts"] >= 3
    assert visit.values["embedded_kind"] == verdict["kind"]
