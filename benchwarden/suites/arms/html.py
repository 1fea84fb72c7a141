"""The arms report as one self-contained HTML page.

`render_html(report)` draws the suite's typed report (`report.ArmsReport`, or its JSON,
read back with `ArmsReport.from_json`): the headline table, success rate (Wilson
interval) and cost-equivalent tokens per arm as charts, token components, per-tier
breakdown, coverage grid, failure tags, paired comparisons, and (when the report carries
`trials`) a per-trial drill-down with the tool-call transcript and the checker's reasons.

`enrich(store, report)` is `report.with_trials`: the report plus its shown trials (a
bounded selection, worst first per cell), read from the store for a report written
before reports carried them (called by `benchwarden report` before rendering).

Invariants:
- A view only formats: every number on the page is a field of the typed report printed
  through `benchwarden.core.formatting` (a test checks the page against the JSON).
- Every command, argument, final report and reason (written by a model or an agent)
  reaches the page through the escaping helpers of `benchwarden.core.html`.
- The page is bounded whatever the store's size: at most `TRIAL_LIMIT` trials are drawn
  (and embedded), each with clipped text; the page names the export command that gives
  every trial as data. A suite of thousands of tasks draws at most
  `COVERAGE_CELLS_DRAWN` coverage cells and `TALLY_ROWS_SHOWN` tally rows, those that
  need attention first, and says how many it left out.
- What the page embeds is `page_copy(report)`: the report with the lists that grow with
  the suite's tasks or the store's runs cut to what the page draws, and a `page_cut`
  block with their counts and the command that writes the whole report. A report within
  every bound is embedded as it is, byte for byte.
- A name longer than `core.html.NAME_LIMIT` (a store written by another tool) is clipped
  wherever the copy holds it, the same clipped name everywhere, distinct from every
  other; the commands the page names stay whole.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from benchwarden.core import formatting as fmt
from benchwarden.core import html as h
from benchwarden.suites.arms.report import (
    COMPONENTS,
    TRIAL_LIMIT,
    ArmsReport,
    EstimateBlock,
    PageCut,
    Trial,
    as_report,
    comparison_cells,
    comparisons_notes,
    names_clipped,
    tally_rows_shown,
    tiers_shown,
    whole_report_command,
    with_trials,
)

OUTCOME_COLORS = {"pass": h.GOOD, "incorrect": h.BAD, "confused": "#e69f00", "hung": "#8250df",
                  "fail": h.BAD}
COVERAGE_COLORS = {"covered": h.GOOD, "partial": "#e69f00", "missing": "#afb8c1"}
COMPONENT_COLORS = {"fresh_input": "#0072B2", "cache_creation": "#E69F00",
                    "cache_read": "#56B4E9", "output": "#D55E00"}
# Cells of the coverage grid and rows of the tally drawn at most: a grid of 30,000 cells
# was 9 MB of the page and no one can read it; past these, the tasks and cells needing
# trials (below the floor, invalid, harness errors) come first.
COVERAGE_CELLS_DRAWN = 2_400
TALLY_ROWS_SHOWN = 600
# What the embedded copy keeps of the other lists that grow with a suite or a store
# (`page_copy`): the newest run ids, the first tasks of each comparison's three lists
# (fewer where their names would pass the characters below in all), and run
# configuration values up to this size as JSON.
RUNS_EMBEDDED = 100
COMPARISON_TASKS_EMBEDDED = 1_000
COMPARISON_TASK_CHARACTERS_EMBEDDED = 1_000_000
CONFIG_VALUE_EMBEDDED_BYTES = 64 * 1024


def _coverage_tasks(report: ArmsReport) -> tuple[list[str], dict[tuple[str, str], int]]:
    """The tasks the coverage grid draws from (the report's, then any only the samples
    name), in order, and the samples per (arm, task) cell."""
    tasks = dict.fromkeys(report.tasks)  # ordered, and a set for thousands of tasks
    samples_of = {}
    for arm, row in report.coverage.items():
        for task, samples in row.samples.items():
            samples_of[(arm, task)] = samples
            tasks.setdefault(task)
    return list(tasks), samples_of


def _comparison_tasks_embedded(comparisons: Sequence[Any]) -> int:
    """How many of the first tasks of each comparison's three lists the page's copy keeps:
    `COMPARISON_TASKS_EMBEDDED`, fewer where their names would hold more than
    `COMPARISON_TASK_CHARACTERS_EMBEDDED` characters in all (many arms' comparisons, or
    long task names: the page draws only their counts)."""
    lists = [listed for c in comparisons for listed in (c.tasks, c.only_a, c.only_b)]

    def characters(kept: int) -> int:
        return sum(len(name) for listed in lists for name in listed[:kept])

    low, high = 0, COMPARISON_TASKS_EMBEDDED
    if characters(high) <= COMPARISON_TASK_CHARACTERS_EMBEDDED:
        return high
    while low < high:  # the most kept whose names fit
        middle = (low + high + 1) // 2
        if characters(middle) <= COMPARISON_TASK_CHARACTERS_EMBEDDED:
            low = middle
        else:
            high = middle - 1
    return low


def page_copy(report: ArmsReport) -> ArmsReport:
    """The report as the page embeds and draws it: `report` itself when every list is
    within the page's bounds, else with the coverage's tasks cut to those the grid draws,
    the tallies' cells to the rows shown, the run ids to the newest `RUNS_EMBEDDED`, each
    comparison's task lists to their first `COMPARISON_TASKS_EMBEDDED` and the run
    configuration's values over `CONFIG_VALUE_EMBEDDED_BYTES` left out, with a
    `page_cut` block holding their counts. Cutting a copy again changes nothing."""
    before = report.page_cut
    changes: dict[str, Any] = {}
    cut: dict[str, Any] = {}

    tasks, samples_of = _coverage_tasks(report)
    drawn = _tasks_drawn(tasks, list(report.coverage), samples_of, report.floor)
    if len(drawn) < len(tasks):
        kept = set(drawn)
        changes["tasks"] = [task for task in report.tasks if task in kept]
        changes["coverage"] = {
            arm: msgspec.structs.replace(row, samples={
                task: samples for task, samples in row.samples.items() if task in kept})
            for arm, row in report.coverage.items()}
        cut["tasks"] = len(tasks)
    for name, key in (("tally", "tally_cells"), ("runs_tally", "runs_tally_cells")):
        tally = getattr(report, name)
        if tally is not None and len(tally.cells) > TALLY_ROWS_SHOWN:
            changes[name] = msgspec.structs.replace(
                tally, cells=tally_rows_shown(tally, TALLY_ROWS_SHOWN))
            cut[key] = len(tally.cells)
    shown_tiers, tier_count = tiers_shown(report)
    if len(shown_tiers) < tier_count and report.page_cut is None:
        kept_tiers = set(shown_tiers)
        changes["tiers"] = [tier for tier in report.tiers if tier in kept_tiers]
        changes["per_tier"] = [row for row in report.per_tier if row.tier in kept_tiers]
        cut["tiers"] = tier_count
    if len(report.runs) > RUNS_EMBEDDED:
        changes["runs"] = report.runs[-RUNS_EMBEDDED:]
        cut["runs"] = len(report.runs)
    kept_tasks = _comparison_tasks_embedded(report.comparisons)
    if any(len(listed) > kept_tasks for c in report.comparisons
           for listed in (c.tasks, c.only_a, c.only_b)):
        cut["comparison_tasks"] = [(len(c.tasks), len(c.only_a), len(c.only_b))
                                   for c in report.comparisons]
        changes["comparisons"] = [msgspec.structs.replace(
            c, tasks=c.tasks[:kept_tasks], only_a=c.only_a[:kept_tasks],
            only_b=c.only_b[:kept_tasks]) for c in report.comparisons]
    if report.run is not None:
        large = [key for key, value in report.run.config.items()
                 if len(json.dumps(value, default=str)) > CONFIG_VALUE_EMBEDDED_BYTES]
        if large:
            changes["run"] = msgspec.structs.replace(report.run, config={
                key: value for key, value in report.run.config.items() if key not in large})
            cut["run_config_keys"] = large
    command = whole_report_command(report, "page")  # a copy cut again: its own command
    if changes:
        if before is not None:  # a copy cut again (never within its bounds): keep its counts
            earlier = {key: getattr(before, key) for key in PageCut.__struct_fields__
                       if key != "command" and getattr(before, key) is not None}
            cut = {**cut, **earlier}
        report = msgspec.structs.replace(report, **changes,
                                         page_cut=PageCut(command=command, **cut))
    return names_clipped(report, command)


def enrich(store: Any, report: ArmsReport | Mapping[str, Any]) -> ArmsReport:
    """The report plus its shown `trials` read from the store."""
    return with_trials(store, report)


# ---------------------------------------------------------------------------- helpers

def _mean(estimate: EstimateBlock | None) -> float | None:
    return None if estimate is None else estimate.mean


def _interval(estimate: EstimateBlock | None) -> tuple[float | None, float | None]:
    return (None, None) if estimate is None else (estimate.low, estimate.high)


def _arm_colors(arms: Sequence[str]) -> dict[str, str]:
    return {arm: h.SERIES_COLORS[index % len(h.SERIES_COLORS)] for index, arm in enumerate(arms)}


def _arms(report: ArmsReport) -> list[str]:
    arms = list(report.arms)
    for row in report.headline:
        if row.arm not in arms:
            arms.append(row.arm)
    return arms


def _coverage_kind(samples: int, floor: int) -> str:
    if samples >= floor:
        return "covered"
    return "partial" if samples > 0 else "missing"


# ---------------------------------------------------------------------------- sections

def _headline_section(report: ArmsReport, colors: Mapping[str, str]) -> str:
    rows = []
    for row in report.headline:
        coverage = row.coverage
        rows.append((
            f'<span class="swatch" style="background:'
            f'{h.color(colors.get(row.arm, h.MUTED))}"></span> '
            f'<strong class="nowrap">{h.escape(row.arm)}</strong>',
            h.escape(fmt.count(row.samples)),
            h.escape(fmt.rate(row.success)),
            h.escape(fmt.estimate(row.cost_equivalent, 0)),
            h.escape(fmt.estimate(row.raw_tokens, 0)),
            h.escape(fmt.estimate(row.turns, 1)),
            h.escape(fmt.estimate(row.duration_s, 1)),
            h.escape(f"{coverage.covered} / {coverage.partial} / "
                     f"{coverage.missing} of {coverage.cells}"),
            h.escape(fmt.estimate(row.imputed_cost_usd, 4)),
        ))
    weights = ", ".join(f"{k.replace('_', ' ')} × {v:g}" for k, v in report.weights.items())
    note = ('<p class="note">Means ± standard error clustered by task; success with a Wilson 95 % '
            "interval. Cost-equivalent tokens weigh the stored components "
            + h.escape(weights)
            + f". A cell is covered at ≥ {h.escape(report.floor)} samples.</p>")
    clipped = report.page_cut.names if report.page_cut is not None else None
    if clipped:
        note += (f'<p class="note">{h.escape(fmt.count(clipped))} names longer than '
                 f"{h.NAME_LIMIT} characters are clipped on this page (their start, an "
                 f"ellipsis and the start of their SHA-256){_whole(report)}.</p>")
    table = h.table(("arm", "samples", "success", "cost-eq tokens", "raw tokens", "turns",
                     "duration s", "covered / partial / missing", "imputed $"),
                    rows, numeric=(1, 2, 3, 4, 5, 6, 8), row_html=True)
    return h.section("headline", "Headline per arm", table + note,
                     intro="Correctness first, then cost.")


def _charts_section(report: ArmsReport, colors: Mapping[str, str]) -> str:
    success_bars, cost_bars = [], []
    for row in report.headline:
        arm = row.arm
        low, high = _interval(row.success)
        success_bars.append(h.Bar(
            arm, _mean(row.success), low, high, color=colors.get(arm, h.ACCENT),
            note=f"{fmt.rate(row.success)} over {fmt.count(row.samples)} samples",
            value_text=fmt.rate(row.success)))
        low, high = _interval(row.cost_equivalent)
        cost_bars.append(h.Bar(
            arm, _mean(row.cost_equivalent), low, high, color=colors.get(arm, h.ACCENT),
            note=f"{fmt.estimate(row.cost_equivalent, 0)} cost-equivalent tokens per trial",
            value_text=fmt.estimate(row.cost_equivalent, 0)))
    left = ("<h3>Success rate (Wilson 95 %)</h3>"
            + h.bar_chart(success_bars, label="success rate per arm", max_value=1.0, width=600,
                          value_format="{:.0%}", unit="share of trials passed"))
    right = ("<h3>Cost-equivalent tokens per trial (95 % CI)</h3>"
             + h.bar_chart(cost_bars, label="cost-equivalent tokens per arm", width=600,
                           unit="cost-equivalent tokens"))
    series = [h.Series(name.replace("_", " "), colour) for name, colour in COMPONENT_COLORS.items()]
    values: dict[tuple[str, str], h.Bar] = {}
    for component in report.per_component:
        for name in COMPONENTS:
            weighted = component.weighted(name)
            if weighted is not None:
                values[(component.arm, name.replace("_", " "))] = h.Bar(
                    component.arm, float(weighted), value_text=fmt.tokens(weighted),
                    note=f"raw mean {fmt.estimate(component.component(name), 0)}")
    component_chart = ""
    if values:
        component_chart = ("<h3>Where the cost goes: weighted token components per trial</h3>"
                           + h.grouped_bars([c.arm for c in report.per_component], series, values,
                                            label="weighted token components per arm",
                                            unit="cost-equivalent tokens", height=300))
    return h.section("charts", "Success and cost", f'<div class="two-col"><div>{left}</div>'
                     f"<div>{right}</div></div>{component_chart}",
                     intro="Whiskers are 95 % intervals; overlapping whiskers are not a "
                           "difference.")


def _tier_section(report: ArmsReport, colors: Mapping[str, str]) -> str:
    if not report.per_tier:
        return h.section("tiers", "Per tier", h.empty_note("no tiers recorded"))
    tiers, tier_count = tiers_shown(report)
    kept = set(tiers)
    rows = [row for row in report.per_tier if row.tier in kept]
    arms = list(dict.fromkeys(r.arm for r in rows))
    series = [h.Series(arm, colors.get(arm, h.ACCENT)) for arm in arms]
    values = {}
    for row in rows:
        mean = _mean(row.success)
        if mean is None:
            continue
        low, high = _interval(row.success)
        values[(row.tier, row.arm)] = h.Bar(
            row.arm, mean, low, high, value_text=fmt.percent(mean),
            note=f"{fmt.count(row.samples)} samples, {fmt.rate(row.success)}")
    chart = h.grouped_bars(tiers, series, values, label="success rate per tier and arm",
                           unit="success rate", max_value=1.0, height=300, width=900)
    table = h.table(("arm", "tier", "samples", "success", "cost-eq tokens"),
                    ((r.arm, r.tier, fmt.count(r.samples) if r.samples else fmt.DASH,
                      fmt.rate(r.success), fmt.estimate(r.cost_equivalent, 0))
                     for r in rows), numeric=(2, 3, 4))
    in_json = ("Every tier's rows are" if not report.tiers_left_out else
               f"The rows of the first {fmt.count(tier_count - report.tiers_left_out)} are")
    left_out = (f'<p class="note">Showing the first {fmt.count(len(tiers))} of '
                f"{fmt.count(tier_count)} tiers. {in_json} in the report's JSON "
                "(<code>per_tier</code>)</p>" if len(tiers) < tier_count else "")
    return h.section("tiers", "Per tier", chart + table + left_out,
                     intro="Success rate by task tier, with Wilson 95 % intervals.")


def _coverage_section(report: ArmsReport) -> str:
    floor = report.floor
    tasks, samples_of = _coverage_tasks(report)
    arms = list(report.coverage)
    if not samples_of:
        return h.section("coverage", "Coverage", h.empty_note("no cells planned or recorded"))
    drawn = _tasks_drawn(tasks, arms, samples_of, floor)
    cut = report.page_cut
    total = cut.tasks if cut is not None and cut.tasks is not None else len(tasks)
    drawn_set = set(drawn)  # a list of hundreds, asked once per cell: tens of thousands
    cells = {}
    for (arm, task), samples in samples_of.items():
        if task in drawn_set:
            kind = _coverage_kind(samples, floor)
            cells[(arm, task)] = h.GridCell(
                COVERAGE_COLORS[kind], fmt.count(samples),
                f"{arm} × {task}: {fmt.count(samples)} samples ({kind})",
                href="#" + h.anchor_id("trials", arm, task) if samples else None)
    left_out = ""
    if len(drawn) < total:
        left_out = (f'<p class="note">Drawing {fmt.count(len(drawn))} of '
                    f"{fmt.count(total)} tasks (chosen from those with a cell below the "
                    f"floor of {fmt.count(floor)} samples first, then from the rest). Every "
                    "cell's count is in the report's JSON (<code>coverage</code>)"
                    f"{_whole(report)}.</p>")
    key = h.legend((colour, name, meaning) for name, colour, meaning in (
        ("covered", COVERAGE_COLORS["covered"], f"≥ {floor} samples"),
        ("partial", COVERAGE_COLORS["partial"], f"1–{floor - 1} samples"),
        ("missing", COVERAGE_COLORS["missing"], "no sample yet")))
    chart = h.grid(arms, drawn, cells, label="samples per arm and task",
                   cell_width=max(44, min(90, 1000 // max(1, len(drawn)))), row_header="arm",
                   column_header="task →")
    return h.section("coverage", "Coverage", key + left_out + chart,
                     intro="Samples per arm × task. Click a cell to open its trials.")


def _whole(report: ArmsReport) -> str:
    """Where a note sends the reader for what the page leaves out: the JSON embedded in
    the page when it is whole, else the command that writes the whole report."""
    if report.page_cut is None:
        return ", embedded in this page as <code>#report-data</code>"
    return (": <code>#report-data</code> holds only what this page draws; "
            f"<code>{h.escape(report.page_cut.command)}</code> writes all of it")


def _tasks_drawn(tasks: list[str], arms: Sequence[str], samples_of: Mapping[tuple[str, str], int],
                 floor: int) -> list[str]:
    """The tasks the coverage grid draws, in suite order: all of them up to
    `COVERAGE_CELLS_DRAWN` cells, else as many as fit, chosen from those with a cell
    below the floor first (the cells a user must run again), then from the rest."""
    fitting = max(1, COVERAGE_CELLS_DRAWN // max(1, len(arms)))
    if len(tasks) <= fitting:
        return tasks
    short = [task for task in tasks
             if any(samples_of.get((arm, task), 0) < floor for arm in arms)]
    below = set(short)
    chosen = set([*short, *(task for task in tasks if task not in below)][:fitting])
    return [task for task in tasks if task in chosen]


def _failure_section(report: ArmsReport) -> str:
    rows = report.failure_tags
    if not rows:
        return h.section("failures", "Outcomes and failure tags", h.empty_note("no samples"))
    names = ("pass", "incorrect", "confused", "hung")
    series = [h.Series(name, OUTCOME_COLORS[name]) for name in names]
    values = {}
    for row in rows:
        for name, value in zip(names, (row.passed, row.incorrect, row.confused, row.hung),
                               strict=True):
            if value is not None:
                values[(row.arm, name)] = h.Bar(name, float(value), value_text=fmt.count(value))
    chart = h.grouped_bars([r.arm for r in rows], series, values,
                           label="outcomes per arm", unit="trials", height=260)
    table = h.table(("arm", "samples", "pass", "incorrect", "confused", "hung", "denied calls"),
                    ((r.arm, fmt.count(r.samples) if r.samples else fmt.DASH,
                      *(fmt.count(v) for v in (r.passed, r.incorrect, r.confused, r.hung,
                                               r.denied_calls)))
                     for r in rows), numeric=(1, 2, 3, 4, 5, 6))
    key = h.legend([(OUTCOME_COLORS["incorrect"], "incorrect", "finished; the checker says wrong"),
                    (OUTCOME_COLORS["confused"], "confused", "hit the turn cap: not scored"),
                    (OUTCOME_COLORS["hung"], "hung", "hit the wall clock")])
    return h.section("failures", "Outcomes and failure tags", key + chart + table)


def _comparison_section(report: ArmsReport) -> str:
    if not report.comparisons:
        return ""
    rows = []
    cut = report.page_cut
    paired = ([tasks for tasks, _, _ in cut.comparison_tasks]
              if cut is not None and cut.comparison_tasks is not None
              else [len(c.tasks) for c in report.comparisons])
    for c, tasks in zip(report.comparisons, paired, strict=True):
        success_cells, (cost_diff, cost_interval, _, cost_mde) = comparison_cells(c)
        rows.append((f"{c.b} − {c.a}", fmt.count(tasks), *success_cells, cost_diff,
                     cost_interval, cost_mde))
    conclusions = "".join(f"<li><strong>{h.escape(f'{c.b} − {c.a}')}</strong>: "
                          f"{h.escape(c.conclusion)}</li>" for c in report.comparisons
                          if c.conclusion)
    return h.section("paired", "Paired comparisons", h.table(
        ("pair (b − a)", "tasks", "success diff", "95 % CI", "p", "MDE", "cost-eq diff", "95 % CI",
         "MDE"), rows, numeric=(1, 2, 3, 4, 5, 6, 7, 8))
        + (f'<ul class="conclusions">{conclusions}</ul>' if conclusions else "")
        + "".join(f'<p class="note">{h.escape(note)}</p>' for note in comparisons_notes(report)),
        intro="Over the tasks both arms covered. A difference below the minimum detectable "
              "effect (MDE) that is not significant means \"not measured\", not \"no difference\".")


def _transcript_html(transcript: Sequence[Any]) -> str:
    if not transcript:
        return '<p class="note">no tool calls</p>'
    items = []
    for entry in transcript:
        kind = entry.kind
        if kind == "shell":
            call = f'<code class="kv">$ {h.pre_text(entry.command or "")}</code>'
        else:
            arguments = entry.arguments if isinstance(entry.arguments, str) \
                or entry.arguments is None else json.dumps(entry.arguments, ensure_ascii=False)
            callee = (f"{entry.server or ''}.{entry.tool or ''}" if kind == "mcp"
                      else entry.name or "")
            call = (f'<code class="kv">{h.pre_text(callee)}'
                    f'({h.pre_text(arguments or "")})</code>')
        denied = ""
        if entry.denied:
            denied = (f' {h.badge("denied", h.BAD)} <span class="muted">'
                      f'{h.escape(entry.reason or "")}</span>')
        items.append(f'<li><span class="muted">{h.escape(kind)}</span> {call}{denied}</li>')
    return f'<ol class="transcript">{"".join(items)}</ol>'


def _trial_detail(trial: Trial) -> str:
    outcome = trial.outcome
    tag = trial.failure or outcome
    colour = OUTCOME_COLORS.get(tag if outcome != "pass" else "pass", h.MUTED)
    summary = (f'{h.badge(tag, colour)}<strong>trial {h.escape(trial.trial)}</strong>'
               f'<span class="muted">{h.escape(fmt.number(trial.turns, 1))} turns · '
               f'{h.escape(fmt.tokens(trial.cost_equivalent))} cost-eq tokens · '
               f'{h.escape(fmt.duration(trial.duration_s))}</span>')
    body = []
    if trial.reasons:
        body.append("<h4>checker's reasons</h4><ul>"
                    + "".join(f"<li>{h.escape(r)}</li>" for r in trial.reasons) + "</ul>")
    elif outcome == "pass":
        body.append('<p class="note">the checker accepted the result</p>')
    calls = trial.tool_calls if trial.tool_calls is not None else len(trial.transcript)
    more = (f" (the first {fmt.count(len(trial.transcript))} shown)"
            if calls > len(trial.transcript) else "")
    body.append(f"<h4>tool calls ({h.escape(fmt.count(calls))}){h.escape(more)}</h4>"
                + _transcript_html(trial.transcript))
    if trial.final_report:
        body.append("<h4>final report</h4>" + h.pre(trial.final_report))
    body.append(h.facts([
        ("stopped", fmt.text(trial.stopped)),
        ("tokens", " · ".join(f"{k.replace('_', ' ')} {fmt.count(v)}"
                              for k, v in trial.tokens.items())
         + ("" if trial.tokens_reported else " (not reported by the driver)")),
        ("model", fmt.text(trial.model)),
        ("run", fmt.text(trial.run_id)),
    ]))
    return h.details(summary, "".join(body),
                     element_id=h.anchor_id("trial", trial.arm, trial.task, trial.trial))


def _trials_section(report: ArmsReport) -> str:
    if report.trials is None:
        return h.section("trials", "Trials", h.empty_note(
            "this report carries no per-trial data; `benchwarden report RUN --html` adds it "
            "from the store"))
    trials = report.trials
    if not trials:
        return h.section("trials", "Trials", h.empty_note("no trial recorded"))
    shown = trials[:TRIAL_LIMIT]  # a report written before the cap may hold every trial
    groups: dict[tuple[str, str], list[Trial]] = defaultdict(list)
    for trial in shown:
        groups[(trial.arm, trial.task)].append(trial)
    blocks = []
    for arm in list(dict.fromkeys(arm for arm, _ in groups)):
        cells = []
        for (group_arm, task), items in groups.items():
            if group_arm != arm:
                continue
            items = sorted(items, key=lambda t: t.trial)
            passes = sum(1 for t in items if t.outcome == "pass")
            tier = next((t.tier for t in items if t.tier), None)
            summary = (f"<strong>{h.escape(task)}</strong>"
                       + (f'<span class="muted">{h.escape(tier)}</span>' if tier else "")
                       + '<span class="chips">'
                       + "".join(f'<span class="swatch" title="trial {h.escape(t.trial)}: '
                                 f'{h.escape(t.failure or t.outcome)}" style="background:'
                                 f'{h.color(OUTCOME_COLORS.get(t.failure or t.outcome, h.MUTED))}'
                                 '"></span>'
                                 for t in items)
                       + f'</span><span class="muted">{passes}/{len(items)} passed</span>')
            cells.append(h.details(summary, "".join(_trial_detail(t) for t in items),
                                   element_id=h.anchor_id("trials", arm, task)))
        blocks.append(f"<h3>{h.escape(arm)}</h3>{''.join(cells)}")
    total = report.trials_total if report.trials_total is not None else len(trials)
    note = ""
    if total > len(shown):
        note = (f'<p class="note">Showing {h.escape(fmt.count(len(shown)))} of '
                f"{h.escape(fmt.count(total))} trials: per cell the newest failures first, then "
                "passes.</p>")
    if report.export_command:
        note += ('<p class="note">Every trial as data (outcome, failure, turns, tokens, '
                 f"transcript): <code>{h.escape(report.export_command)}</code></p>")
    return h.section("trials", "Trials", note + "".join(blocks),
                     intro="Recorded trials by arm and task: outcome, the checker's reasons, "
                           "and the tool calls the agent made (denied calls were not run).")


def _tally_section(report: ArmsReport) -> str:
    tally = report.runs_tally if report.runs_tally is not None else report.tally
    if tally is None:
        return ""
    cut = report.page_cut
    runs = cut.runs if cut is not None and cut.runs is not None else len(report.runs)
    title = (f"Tally of all {fmt.count(runs)} runs"
             if report.runs_tally is not None and runs > 1 else "This run's tally")
    tiles = h.stat_tiles([("recorded", fmt.count(tally.recorded), h.GOOD),
                          ("invalid (isolation leaks)", fmt.count(tally.invalid), h.BAD),
                          ("harness errors", fmt.count(tally.harness_errors), h.WARN)])
    shown = tally_rows_shown(tally, TALLY_ROWS_SHOWN)
    counted = (None if cut is None else
               cut.runs_tally_cells if report.runs_tally is not None else cut.tally_cells)
    total = counted if counted is not None else len(tally.cells)
    left_out = ""
    if len(shown) < total:
        left_out = (f'<p class="note">Showing {fmt.count(len(shown))} of '
                    f"{fmt.count(total)} cells: those with invalid trials, harness "
                    "errors or below the floor first. Every cell is in the report's JSON "
                    f"(<code>tally</code>){_whole(report)}.</p>")
    rows = [(c.arm, c.task, f"{fmt.count(c.before)} → {fmt.count(c.after)}",
             fmt.count(c.passed), fmt.count(c.failed), fmt.count(c.invalid),
             fmt.count(c.harness_errors), "reached" if c.covered else "below")
            for c in shown]
    problems = "".join(f"<li>{h.escape(p)}</li>" for p in tally.problems)
    return h.section("tally", title, tiles + left_out + h.table(
        ("arm", "task", "samples before → after", "pass", "fail", "invalid", "harness errors",
         "floor"),
        rows, numeric=(3, 4, 5, 6)) + (f"<ul>{problems}</ul>" if problems else ""))


def render_html(report: ArmsReport | Mapping[str, Any]) -> str:
    report = page_copy(as_report(report))
    arms = _arms(report)
    colors = _arm_colors(arms)
    plain = report.to_json()
    run_id = report.run.id if report.run is not None else None
    subtitle = " · ".join(str(x) for x in (f"suite {report.scope}" if report.scope else None,
                                           f"{fmt.count(report.samples)} samples", run_id) if x)
    sections = [
        ("headline", "headline", _headline_section(report, colors)),
        ("charts", "success & cost", _charts_section(report, colors)),
        ("tiers", "per tier", _tier_section(report, colors)),
        ("coverage", "coverage", _coverage_section(report)),
        ("failures", "failure tags", _failure_section(report)),
    ]
    paired = _comparison_section(report)
    if paired:
        sections.append(("paired", "paired", paired))
    sections.append(("trials", "trials", _trials_section(report)))
    tally = _tally_section(report)
    if tally:
        sections.append(("tally", "run tally", tally))
    sections.append(("run", "run", h.section("run", "Run", h.run_facts(plain))))
    return h.page(title="arms report", subtitle=subtitle, report=plain, sections=sections)
