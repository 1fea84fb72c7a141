"""The contamination report for a terminal: the probe × leg grid, the rung sentences, the
counters and the verdict.

Invariants: a view only. It reads a `ContaminationReport` (or a report file's JSON, read
into one) and formats it through `benchwarden.core.formatting`; every number it prints is
a field of the report (the rung's sentence and state come with the report too), so a
report loaded from a JSON file renders the same as the one just built. A report that
lists only some rungs and requests (`shown`) says so after the rung lines, with what
was left out and the export command.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from benchwarden.core import formatting as fmt
from benchwarden.core.html import NAME_LIMIT, SENTENCE_LIMIT
from benchwarden.core.reports import verdict_text
from benchwarden.core.tables import fitted
from benchwarden.core.verdicts import Verdict
from benchwarden.suites.contamination.report import (
    CellBlock,
    ContaminationReport,
    DivergenceBlock,
    RungBlock,
    as_report,
    column_name,
    names_clipped,
    probes_shown,
)
from benchwarden.suites.contamination.scoring import Score

STATE_STYLE = {"unmeasured": "red", "below_label": "yellow"}
WHY_SHOWN = 70  # characters of an unmeasured cell's reason in a grid cell


def rung_line(rung: RungBlock | Mapping[str, Any]) -> Text:
    """The rung's own sentence (`RungFidelity.describe`), coloured by its state: red when
    its cells are unmeasured, yellow when the server ran fewer at once than the label asked."""
    if not isinstance(rung, RungBlock):
        rung = as_report({"rungs": [dict(rung)]}).rungs[0]
    return Text(rung.description, style=STATE_STYLE.get(rung.state, ""))


DIVERGENCE_STYLE = {"near-tie": "yellow", "substantive": "bold red", "unclassified": "dim"}


def divergence_text(point: DivergenceBlock | None) -> str:
    """` near-tie Δ0.12` (the class and the reference's margin, `≥` when a bound)."""
    if point is None:
        return ""
    margin = ""
    if point.margin is not None:
        margin = f" Δ{'≥' if point.margin_is_bound else ''}{fmt.number(point.margin, 3)}"
    return f" {point.kind}{margin}"


def cell_text(cell: CellBlock) -> Text:
    text = _class_text(cell)
    if cell.divergence is not None:
        text.append(divergence_text(cell.divergence),
                    style=DIVERGENCE_STYLE.get(cell.divergence.kind, ""))
    return text


def _class_text(cell: CellBlock) -> Text:
    kind = cell.kind
    if kind == "identical":
        return Text("identical", style="green")
    if kind == "diverged":
        return Text(f"DIVERGED @ char {fmt.number(cell.at)}", style="bold yellow")
    if kind == "contaminated":
        return Text(f"CONTAMINATED carrying {fmt.text(cell.foreign)}", style="bold red")
    if kind == "persistent":
        return Text(f"PERSISTENT @ char {fmt.number(cell.at)}", style="bold red")
    if kind == "alone_unstable":
        return Text("alone-unstable", style="magenta")
    why = cell.why or ""
    return Text(f"unmeasured: {why[:WHY_SHOWN] + ('…' if len(why) > WHY_SHOWN else '')}",
                style="dim")


def _divergence_table(report: ContaminationReport, console: Console) -> None:
    """Each classified divergence: where the tokens part, the margin, the candidates."""
    points = [cell for cell in report.cells if cell.divergence is not None]
    if not points:
        return
    table = Table(title="divergences (margin: reference logprob of its token minus the "
                        "reply's token, nats)", title_justify="left")
    for heading in ("probe", "leg", "class", "margin", "token #", "reference → reply",
                    "reference's top candidates", "why"):
        table.add_column(heading)
    for cell in points:
        point = cell.divergence
        assert point is not None
        margin = fmt.number(point.margin, 3)
        if point.margin is not None and point.margin_is_bound:
            margin = "≥" + margin
        tokens = ("" if point.reference_token is None
                  else f"{point.reference_token!r} → {point.reply_token!r}")
        top = ", ".join(f"{c.token!r} {fmt.number(c.logprob, 3)}" for c in point.reference_top)
        table.add_row(str(cell.probe), column_name(cell.leg, cell.repeat, report.repeated,
                                                   cell.level),
                      Text(point.kind, style=DIVERGENCE_STYLE.get(point.kind, "")), margin,
                      fmt.number(point.step), tokens, top, point.reason)
    console.print(table)


def left_out_lines(report: ContaminationReport) -> list[str]:
    """What a report of a run too large to list whole leaves out (`shown`), in a
    sentence each; none when everything is listed."""
    lines = []
    if isinstance(report.rungs_total, int):
        states = report.rungs_left_out if isinstance(report.rungs_left_out, dict) else {}
        counted = ", ".join(f"{fmt.count(count)} {state.replace('_', ' ')}"
                            for state, count in states.items())
        lines.append(f"listed {fmt.count(len(report.rungs))} of {fmt.count(report.rungs_total)} "
                     "rungs, those needing attention first (a leak, a divergence, failed "
                     "requests, unmeasured, below the label), in the order run; not listed: "
                     f"{counted or fmt.DASH}. The counters and the verdict count every rung.")
    if isinstance(report.requests_total, int):
        lines.append(f"listed {fmt.count(len(report.requests))} of "
                     f"{fmt.count(report.requests_total)} requests")
    if isinstance(report.export_command, str):
        lines.append(f"every request as data: {report.export_command}")
    return lines


def grid_table(report: ContaminationReport, console: Console) -> Table:
    """The probe × leg grid, a row per probe; a row per leg instead when the legs
    outnumber the probes and the grid would not fit the console's width in fewer parts
    that way (a run of two dozen listed rungs and four probes is a tall table, not seven
    wide ones)."""
    by_probe = _grid(report, rows_are_legs=False)
    if len(report.rungs) + 2 <= len(report.probes):
        return by_probe
    parts = len(fitted(by_probe, console))
    if parts == 1:
        return by_probe
    by_leg = _grid(report, rows_are_legs=True)
    return by_leg if len(fitted(by_leg, console)) < parts else by_probe


def _grid(report: ContaminationReport, *, rows_are_legs: bool) -> Table:
    repeated = report.repeated
    legs = ["ref"] + [column_name(rung.label, rung.repeat, repeated, rung.concurrency)
                      for rung in report.rungs] + ["post"]
    grid = {(cell.probe, column_name(cell.leg, cell.repeat, repeated, cell.level)): cell_text(cell)
            for cell in report.cells}
    probes_with_ref_cell = {probe for probe, leg in grid if leg == "ref"}

    def cell(probe: int, leg: str) -> Text:
        if leg == "ref" and probe not in probes_with_ref_cell:
            return Text("stable", style="green")
        return grid.get((probe, leg), Text(fmt.DASH, style="dim"))

    if rows_are_legs:
        canaries = " · ".join(f"{probe.index} {probe.canary}" for probe in report.probes)
        table = Table(title=f"probe × leg (a row per leg; probes: {canaries})",
                      title_justify="left")
        table.add_column("leg")
        for probe in report.probes:
            table.add_column(f"probe {probe.index}")
        for leg in legs:
            table.add_row(leg, *(cell(probe.index, leg) for probe in report.probes))
        return table
    table = Table(title="probe × leg", title_justify="left")
    table.add_column("probe")
    for leg in legs:
        table.add_column(leg)
    for probe in report.probes:
        table.add_row(f"{probe.index} {probe.canary}", *(cell(probe.index, leg) for leg in legs))
    return table


def render_terminal(report: ContaminationReport | Mapping[str, Any], console: Console) -> None:
    report, names, sentences = names_clipped(probes_shown(as_report(report)))
    run = report.run
    config = run.config if run else {}
    target = run.target if run else {}
    console.print(Text.assemble(
        ("contamination ", "bold"), f"run {fmt.text(run.id if run else None)}  ",
        f"{fmt.text(target.get('url'))} model {fmt.text(target.get('model'))}  ",
        f"seed {fmt.text(config.get('seed'))}  scenario {fmt.text(config.get('scenario'))}  "
        f"max_tokens {fmt.text(config.get('max_tokens'))}  "
        f"floor {fmt.text(config.get('min_completion_tokens'))}"))
    if run and run.resumed_from:
        console.print(f"resumed from {run.resumed_from}")

    console.print(grid_table(report, console))
    if isinstance(report.probes_total, int):
        console.print(Text(f"showing {fmt.count(len(report.probes))} of "
                           f"{fmt.count(report.probes_total)} probes (those with a cell that "
                           "is not identical first); the score counts every probe",
                           style="yellow"))

    for rung in report.rungs:
        console.print(rung_line(rung))
    for line in left_out_lines(report):
        console.print(Text(line, style="bold"))
    _divergence_table(report, console)
    if report.bisect is not None:
        console.print(Text(f"bisect {report.bisect.low}-{report.bisect.high}: "
                           f"{report.bisect.reading}", style="bold"))

    score = report.score
    console.print(" · ".join(
        f"{name} {fmt.number(None if score is None else getattr(score, name))}"
        for name in Score.COUNTERS))
    for warning in report.warnings:
        console.print(Text(f"warning: {warning}", style="yellow"))
    if names or sentences:
        console.print(Text(
            f"{fmt.count(names)} names longer than {NAME_LIMIT} characters shown clipped, "
            f"{fmt.count(sentences)} sentences cut at {fmt.count(SENTENCE_LIMIT)} characters "
            "(`show RUN --json FILE` writes them whole)", style="yellow"))
    if report.verdict:
        console.print(verdict_text(Verdict(report.verdict.kind, report.verdict.reason)))  # type: ignore[arg-type]
