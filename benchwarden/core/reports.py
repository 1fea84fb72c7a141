"""Report plumbing shared by every suite: the JSON envelope and the terminal look.

Invariants:
- Every JSON report carries `schema` (the envelope's version), `suite` and
  `bench_version` (the suite's), so numbers are never compared across versions by
  accident.
- JSON is written atomically (temp file then rename): a reader never sees half a report.
- A report built from a store carries `store_head`, the store's last entry when the
  report was built: a head witness (core/witness.py) that `verify --store S --witness
  REPORT` checks, so a signed report proves entries were not later cut off the store.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from rich.console import Console
from rich.text import Text

from benchwarden.core.files import write_text_atomically
from benchwarden.core.records import Run, RunEnd
from benchwarden.core.verdicts import Verdict

REPORT_SCHEMA = "benchwarden.report/1"

VERDICT_STYLE = {"pass": "bold white on green", "fail": "bold white on red",
                 "info": "bold white on blue"}


def run_block(run: Run, end: RunEnd | None) -> dict[str, Any]:
    """The `run` block of a report: identity, configuration, target, provenance."""
    return {
        "id": run.run_id,
        "suite": run.suite,
        "bench_version": run.bench_version,
        "config": dict(run.config),
        "seeds": list(run.seeds),
        "target": dict(run.target),
        "package_version": run.package_version,
        "git_sha": run.git_sha,
        "host": dict(run.host),
        "started_at": run.started_at,
        "ended_at": end.ended_at if end else None,
        "status": end.status if end else "incomplete",
        "resumed_from": run.resumed_from,
    }


def store_head_block(store: Any) -> dict[str, Any] | None:
    """The `store_head` of a report built from `store` (None for an empty store)."""
    head = store.head()
    return head.to_json_dict() if head is not None else None


def envelope(*, suite: str, bench_version: str, run: Run | None, end: RunEnd | None,
             verdict: Verdict | None, body: Mapping[str, Any],
             store_head: Mapping[str, Any] | None = None) -> dict[str, Any]:
    report: dict[str, Any] = {
        "schema": REPORT_SCHEMA,
        "suite": suite,
        "bench_version": bench_version,
    }
    if run is not None:
        report["run"] = run_block(run, end)
    if verdict is not None:
        report["verdict"] = verdict.to_json_dict()
    if store_head is not None:
        report["store_head"] = dict(store_head)
    report.update(body)
    return report


def write_json(path: str | Path, report: Mapping[str, Any]) -> Path:
    text = json.dumps(report, indent=2, ensure_ascii=False, sort_keys=False) + "\n"
    return write_text_atomically(Path(path).expanduser(), text)


def read_json(path: str | Path) -> dict[str, Any]:
    try:
        with open(Path(path).expanduser(), encoding="utf-8") as stream:
            data = json.load(stream)
    except FileNotFoundError:
        raise ValueError(f"report {path} does not exist") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"report {path} is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise ValueError(f"report {path} is not a JSON object")
    return data


def verdict_text(verdict: Verdict) -> Text:
    text = Text()
    text.append(f" {verdict.kind.upper()} ", style=VERDICT_STYLE[verdict.kind])
    text.append(" " + verdict.reason)
    return text


def console(stderr: bool = False) -> Console:
    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def dash_if_empty(value: Any, fmt: str = "{}") -> str:
    """Empty groups print as a dash, never as 0."""
    if value is None:
        return "—"
    return fmt.format(value)
