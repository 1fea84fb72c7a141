"""The contamination report: recomputed from the store alone, rendered for a terminal.

`build_report(store, run_id)` reads the run's records (its whole scope, so a resumed run
reports the union of the original and the resumed requests), rebuilds the legs, and
scores them with the pure `scoring` module; `render_terminal` draws that JSON report.
Neither talks to a server, so `benchwarden show RUN` works with the server gone.

Invariants: the report is a function of stored data only; rendering reads only the
report dict (so a report loaded from a JSON file renders the same). Every string in the
report is valid UTF-8: model text and server messages are shown through
`scoring.display_text` (an invalid byte as `\\xNN`), and per-request outcomes keep the
client's stored form (`RequestOutcome.to_json_dict`), which round-trips exactly.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Mapping

from rich.console import Console
from rich.table import Table
from rich.text import Text

from benchwarden.core.records import Record
from benchwarden.core.reports import envelope, store_head_block, verdict_text
from benchwarden.core.store import Store
from benchwarden.core.verdicts import Verdict
from benchwarden.suites.contamination import scoring
from benchwarden.suites.contamination.scoring import BENCH_VERSION, Legs, RungOutcomes
from benchwarden.targets.replies import RequestOutcome

SUITE = "contamination"


def _outcome(record: Record) -> RequestOutcome:
    return RequestOutcome.from_json_dict(record.payload["outcome"])


def legs_from_records(records: list[Record], config: Mapping[str, Any]) -> Legs:
    """Rebuild the scoring input from stored records and the run's configuration."""
    probes = len(config["probe_set"])
    by_address = {(r.arm, r.task, r.trial): r for r in records}

    def solo(leg: str) -> list[RequestOutcome | None]:
        found = [by_address.get((leg, str(i), 1)) for i in range(probes)]
        return [_outcome(r) if r is not None else None for r in found]

    requests_of: dict[tuple[str, int], list[Record]] = defaultdict(list)
    for record in records:
        if record.arm.startswith("c") and record.arm[1:].isdigit():
            requests_of[(record.arm, record.trial)].append(record)
    rungs = []
    for repetition in range(1, int(config["repeat"]) + 1):
        for level in config["concurrency"]:
            label = f"c{level}"
            sent = sorted(requests_of.get((label, repetition), []),
                          key=lambda r: int(r.payload.get("slot", 0)))
            scored = [by_address.get((label, str(i), repetition)) for i in range(probes)]
            rungs.append(RungOutcomes(
                label, int(level), repetition, [_outcome(r) if r else None for r in scored],
                [_outcome(r) for r in sent],
                [r.payload.get("cancel_after_deltas") is not None for r in sent]))
    return Legs(ref_a=solo("ref_a"), ref_b=solo("ref_b"), rungs=rungs, post=solo("post"),
                canaries=[p["canary"] for p in config["probe_set"]],
                min_completion_tokens=int(config["min_completion_tokens"]))


def _request_entries(records: list[Record], probes: int) -> list[dict[str, Any]]:
    entries = []
    for record in records:
        entries.append({
            "leg": record.arm, "task": record.task, "probe": record.payload.get("probe"),
            "repeat": record.trial, "slot": record.payload.get("slot"),
            "scored": not record.task.startswith("ballast") and record.arm != "prime",
            "status": record.outcome, "run_id": record.run_id,
            "cancel_after_deltas": record.payload.get("cancel_after_deltas"),
            "outcome": dict(record.payload["outcome"]),
        })
    return entries


def build_report(store: Store, run_id: str) -> dict[str, Any]:
    info = store.run_info(run_id)
    run = info.run
    if run.suite != SUITE:
        raise ValueError(f"run {run.run_id} is a {run.suite} run, not a contamination run")
    config = run.config
    absent = [key for key in ("scope", "probe_set", "concurrency", "repeat",
                               "min_completion_tokens", "request_bodies") if key not in config]
    if absent:
        raise ValueError(f"run {run.run_id} was not stored by this version of the "
                         f"contamination suite (its config lacks {', '.join(absent)})")
    records = store.records(suite=SUITE, scope=str(config["scope"]))
    legs = legs_from_records(records, config)
    result = scoring.score(legs)
    verdict = scoring.verdict(result)
    prime_failures = [r for r in records if r.arm == "prime" and r.outcome != "ok"]
    warnings = [f"prime of probe {r.task} failed "
                f"({_outcome(r).error or 'no reply'}); "
                "later legs may have started cache-cold"
                for r in prime_failures]
    missing = any(scoring.NOT_RECORDED in getattr(cell.result, "why", "")
                  for cell in result.cells)
    if missing:
        warnings.append(f"run {run.run_id} did not complete "
                        f"({info.end.status if info.end else 'no end recorded'}); "
                        f"`benchwarden contamination --resume {run.run_id}` runs what is missing")
    statuses = Counter((r.arm, r.outcome) for r in records)
    body = {
        "score": result.counters(),
        "cells": [cell.to_json_dict() for cell in result.cells],
        "rungs": [f.to_json_dict() for f in result.fidelity],
        "probes": list(config["probe_set"]),
        "request": {"preset": config.get("preset"), "extra_body": config.get("extra_body"),
                    "bodies": list(config["request_bodies"])},
        "legs": {leg: {status: count for (arm, status), count in statuses.items() if arm == leg}
                 for leg in dict.fromkeys(r.arm for r in records)},
        "warnings": warnings,
        "requests": _request_entries(records, len(config["probe_set"])),
    }
    return json_safe(envelope(suite=SUITE, bench_version=BENCH_VERSION, run=run,
                              end=info.end, verdict=verdict, body=body,
                              store_head=store_head_block(store)))


def json_safe(value: Any) -> Any:
    """`value` with any lone surrogate left in a string shown as `\\xNN`/`\\uNNNN`, so
    the report always encodes as UTF-8 (strings without one are returned as they are)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return "".join(scoring.display_text(c) if 0xD800 <= ord(c) <= 0xDFFF else c
                           for c in value)
    if isinstance(value, dict):
        return {json_safe(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


# -- terminal --------------------------------------------------------------------------------
def rung_line(rung: Mapping[str, Any], repeats: int = 1) -> Text:
    """The rung's own sentence (`RungFidelity.describe`), coloured: red when its cells are
    unmeasured, yellow when the server ran fewer at once than the label asked."""
    peak, level = rung.get("peak_in_flight", 0) or 0, rung.get("concurrency")
    sent = rung.get("requests_sent", rung.get("slots"))  # `slots` before bench version 2
    line = rung.get("description")
    if not line:  # a report from before bench version 2
        skew = rung.get("launch_skew_ms")
        line = (f"rung {rung.get('label')}" + (f" #{rung.get('repeat')}" if repeats > 1 else "")
                + f": {sent} requests sent in the rung; peak in flight {peak}; launch skew "
                + (f"{skew:.1f} ms" if isinstance(skew, (int, float)) else "—"))
    style = ""
    if rung.get("unmeasured_reason") or (sent and peak < 2):
        style = "red"
    elif isinstance(level, int) and peak < level:
        style = "yellow"
    return Text(str(line), style=style)


def cell_text(cell: Mapping[str, Any]) -> Text:
    kind = cell.get("class")
    if kind == "identical":
        return Text("identical", style="green")
    if kind == "diverged":
        return Text(f"DIVERGED @ char {cell.get('at')}", style="bold yellow")
    if kind == "contaminated":
        return Text(f"CONTAMINATED carrying {cell.get('foreign')}", style="bold red")
    if kind == "persistent":
        return Text(f"PERSISTENT @ char {cell.get('at')}", style="bold red")
    if kind == "alone_unstable":
        return Text("alone-unstable", style="magenta")
    why = str(cell.get("why", ""))
    return Text(f"unmeasured: {why[:70] + ('…' if len(why) > 70 else '')}", style="dim")


def _column(cell: Mapping[str, Any], repeats: int) -> str:
    leg = str(cell["leg"])
    if leg.startswith("c") and repeats > 1:
        return f"{leg} #{cell.get('repeat', 1)}"
    return leg


def render_terminal(report: Mapping[str, Any], console: Console) -> None:
    run = report.get("run", {})
    config = run.get("config", {})
    target = run.get("target", {})
    repeats = int(config.get("repeat", 1) or 1)
    console.print(Text.assemble(
        ("contamination ", "bold"), f"run {run.get('id')}  ",
        f"{target.get('url', '?')} model {target.get('model', '?')}  ",
        f"seed {config.get('seed')}  scenario {config.get('scenario')}  "
        f"max_tokens {config.get('max_tokens')}  floor {config.get('min_completion_tokens')}"))
    if run.get("resumed_from"):
        console.print(f"resumed from {run['resumed_from']}")

    cells = list(report.get("cells", []))
    columns = ["ref"] + [f"c{level}" + (f" #{r}" if repeats > 1 else "")
                         for r in range(1, repeats + 1) for level in config.get("concurrency", [])]
    columns.append("post")
    grid: dict[tuple[int, str], Text] = {(int(c["probe"]), _column(c, repeats)): cell_text(c)
                                         for c in cells}
    table = Table(title="probe × leg", title_justify="left")
    table.add_column("probe")
    for column in columns:
        table.add_column(column)
    for probe in report.get("probes", []):
        index = int(probe["index"])
        has_ref_cell = (index, "ref") in grid
        row: list[Text | str] = [f"{index} {probe.get('canary', '')}"]
        for column in columns:
            if column == "ref" and not has_ref_cell:
                row.append(Text("stable", style="green"))
            else:
                row.append(grid.get((index, column), Text("—", style="dim")))
        table.add_row(*row)
    console.print(table)

    for rung in report.get("rungs", []):
        console.print(rung_line(rung, repeats))

    score = report.get("score", {})
    console.print(" · ".join(f"{name} {'—' if score.get(name) is None else score.get(name)}"
                             for name in scoring.Score.COUNTERS))
    for warning in report.get("warnings", []):
        console.print(Text(f"warning: {warning}", style="yellow"))
    verdict = report.get("verdict")
    if verdict:
        console.print(verdict_text(Verdict(verdict["kind"], verdict["reason"])))
