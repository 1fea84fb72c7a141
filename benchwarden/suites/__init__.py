"""The suites, registered the way a third-party suite would be.

Every suite package has a `report` module with:
- `build_report(store, run_id)`: the report, recomputed from the store alone (a typed
  `msgspec.Struct` with `to_json()`, or a JSON dict for a suite not yet typed);
- `render_terminal(report, console) -> None`: the terminal summary of that report;
- `render_html(report) -> str` (optional): a self-contained HTML page.
"""

from __future__ import annotations

import importlib
from types import ModuleType

SUITE_REPORTS: dict[str, str] = {
    "contamination": "benchwarden.suites.contamination.report",
    "arms": "benchwarden.suites.arms.report",
    "retrieval": "benchwarden.suites.retrieval.report",
}


def report_module(suite: str) -> ModuleType:
    try:
        return importlib.import_module(SUITE_REPORTS[suite])
    except KeyError:
        raise ValueError(f"unknown suite {suite!r}; known: {', '.join(sorted(SUITE_REPORTS))}") from None
