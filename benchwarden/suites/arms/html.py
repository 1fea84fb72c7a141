"""The arms report as one self-contained HTML page.

`render_html(report)` draws the suite's JSON report (`report.build_report`): the
headline table, success rate (Wilson interval) and cost-equivalent tokens per arm as
charts, token components, per-tier breakdown, coverage grid, failure tags, paired
comparisons, and (when the report carries `trials`) a per-trial drill-down with the
tool-call transcript and the checker's reasons.

The JSON report has no per-trial list, so `enrich(store, report)` adds one from the
store (called by `benchwarden report` before rendering); a report that already has
`trials` is left as it is.

Invariant: every command, argument, final report and reason (written by a model or an
agent) reaches the page through the escaping helpers of `benchwarden.core.html`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, Mapping, Sequence

from benchwarden.core import html as h

OUTCOME_COLORS = {"pass": h.GOOD, "incorrect": h.BAD, "confused": "#e69f00", "hung": "#8250df",
                  "fail": h.BAD}
COVERAGE_COLORS = {"covered": h.GOOD, "partial": "#e69f00", "missing": "#afb8c1"}
COMPONENT_COLORS = {"fresh_input": "#0072B2", "cache_creation": "#E69F00",
                    "cache_read": "#56B4E9", "output": "#D55E00"}
TRIAL_LIMIT = 2000  # trials drawn on the page (newest kept); the JSON island keeps all


# ---------------------------------------------------------------------------- enrich

def _trial_entry(record: Any, weights: Mapping[str, float]) -> dict[str, Any]:
    payload = dict(record.payload)
    tokens = record.tokens
    components = {"fresh_input": tokens.fresh_input, "cache_creation": tokens.cache_creation,
                  "cache_read": tokens.cache_read, "output": tokens.output}
    return {
        "arm": record.arm, "task": record.task, "trial": record.trial, "run_id": record.run_id,
        "outcome": record.outcome, "failure": payload.get("failure"),
        "tier": payload.get("tier"), "reasons": list(payload.get("reasons") or []),
        "turns": payload.get("turns"), "stopped": payload.get("stopped"),
        "final_report": payload.get("final_report"),
        "transcript": list(payload.get("transcript") or []),
        "denied_calls": payload.get("denied_calls"),
        "tokens": components, "tokens_reported": payload.get("tokens_reported", True),
        "cost_equivalent": sum(weights.get(k, 0.0) * v for k, v in components.items()),
        "duration_s": max(0.0, record.ended_at - record.started_at),
        "model": payload.get("model"), "driver": payload.get("driver"),
    }


def enrich(store: Any, report: Mapping[str, Any]) -> dict[str, Any]:
    """The report plus `trials` read from the store (the scope's records)."""
    enriched = dict(report)
    if "trials" in enriched:
        return enriched
    records = store.records(suite=str(report.get("suite", "arms")), scope=str(report.get("scope", "")))
    weights = {k: float(v) for k, v in (report.get("weights") or {}).items()}
    enriched["trials"] = [_trial_entry(record, weights) for record in records]
    return enriched


# ---------------------------------------------------------------------------- helpers

def _mean(estimate: Any) -> float | None:
    if isinstance(estimate, Mapping) and isinstance(estimate.get("mean"), (int, float)):
        return float(estimate["mean"])
    return None


def _interval(estimate: Any) -> tuple[float | None, float | None]:
    if isinstance(estimate, Mapping) and isinstance(estimate.get("low"), (int, float)) \
            and isinstance(estimate.get("high"), (int, float)):
        return float(estimate["low"]), float(estimate["high"])
    return None, None


def _rate_text(estimate: Any) -> str:
    mean = _mean(estimate)
    if mean is None:
        return "—"
    low, high = _interval(estimate)
    text = f"{100 * mean:.0f}%"
    if low is not None and high is not None:
        text += f" [{100 * low:.0f}–{100 * high:.0f}]"
    return text


def _mean_text(estimate: Any, digits: int = 0) -> str:
    mean = _mean(estimate)
    if mean is None:
        return "—"
    text = f"{mean:,.{digits}f}"
    se = estimate.get("se") if isinstance(estimate, Mapping) else None
    if isinstance(se, (int, float)):
        text += f" ± {se:,.{digits}f}"
    return text


def _arm_colors(arms: Sequence[str]) -> dict[str, str]:
    return {arm: h.SERIES_COLORS[index % len(h.SERIES_COLORS)] for index, arm in enumerate(arms)}


def _arms(report: Mapping[str, Any]) -> list[str]:
    arms = [str(a) for a in report.get("arms") or []]
    for row in report.get("headline") or []:
        if str(row.get("arm")) not in arms:
            arms.append(str(row.get("arm")))
    return arms


# ---------------------------------------------------------------------------- sections

def _headline_section(report: Mapping[str, Any], colors: Mapping[str, str]) -> str:
    rows = []
    for row in report.get("headline") or []:
        coverage = row.get("coverage") or {}
        arm = str(row.get("arm"))
        rows.append((
            f'<span class="swatch" style="background:{h.color(colors.get(arm, h.MUTED))}"></span> '
            f'<strong class="nowrap">{h.escape(arm)}</strong>',
            h.escape(h.fmt_number(row.get("samples"))),
            h.escape(_rate_text(row.get("success"))),
            h.escape(_mean_text(row.get("cost_equivalent"))),
            h.escape(_mean_text(row.get("raw_tokens"))),
            h.escape(_mean_text(row.get("turns"), 1)),
            h.escape(_mean_text(row.get("duration_s"), 1)),
            h.escape(f"{coverage.get('covered', '—')} / {coverage.get('partial', '—')} / "
                     f"{coverage.get('missing', '—')} of {coverage.get('cells', '—')}"),
            h.escape(_mean_text(row.get("imputed_cost_usd"), 4)),
        ))
    weights = report.get("weights") or {}
    note = ('<p class="note">Means ± standard error clustered by task; success with a Wilson 95 % '
            "interval. Cost-equivalent tokens weigh the stored components "
            + h.escape(", ".join(f"{k.replace('_', ' ')} × {v:g}" for k, v in weights.items()
                                 if isinstance(v, (int, float))))
            + f". A cell is covered at ≥ {h.escape(report.get('floor', 3))} samples.</p>")
    table = h.table(("arm", "samples", "success", "cost-eq tokens", "raw tokens", "turns",
                     "duration s", "covered / partial / missing", "imputed $"),
                    rows, numeric=(1, 2, 3, 4, 5, 6, 8), row_html=True)
    return h.section("headline", "Headline per arm", table + note,
                     intro="Correctness first, then cost.")


def _charts_section(report: Mapping[str, Any], colors: Mapping[str, str]) -> str:
    success_bars, cost_bars = [], []
    for row in report.get("headline") or []:
        arm = str(row.get("arm"))
        rate = row.get("success")
        low, high = _interval(rate)
        mean = _mean(rate)
        success_bars.append(h.Bar(arm, mean, low, high, color=colors.get(arm, h.ACCENT),
                                  note=f"{_rate_text(rate)} over {row.get('samples', 0)} samples",
                                  value_text=_rate_text(rate)))
        cost = row.get("cost_equivalent")
        low, high = _interval(cost)
        cost_bars.append(h.Bar(arm, _mean(cost), low, high, color=colors.get(arm, h.ACCENT),
                               note=f"{_mean_text(cost)} cost-equivalent tokens per trial",
                               value_text=_mean_text(cost)))
    left = ("<h3>Success rate (Wilson 95 %)</h3>"
            + h.bar_chart(success_bars, label="success rate per arm", max_value=1.0, width=600,
                          value_format="{:.0%}", unit="share of trials passed"))
    right = ("<h3>Cost-equivalent tokens per trial (95 % CI)</h3>"
             + h.bar_chart(cost_bars, label="cost-equivalent tokens per arm", width=600,
                           unit="cost-equivalent tokens"))
    components = report.get("per_component") or []
    series = [h.Series(name.replace("_", " "), colour) for name, colour in COMPONENT_COLORS.items()]
    values: dict[tuple[str, str], h.Bar] = {}
    for row in components:
        arm = str(row.get("arm"))
        for name in COMPONENT_COLORS:
            weighted = row.get(f"{name}_weighted")
            if isinstance(weighted, (int, float)):
                values[(arm, name.replace("_", " "))] = h.Bar(
                    arm, float(weighted), value_text=f"{weighted:,.0f}",
                    note=f"raw mean {_mean_text(row.get(name))}")
    component_chart = ""
    if values:
        component_chart = ("<h3>Where the cost goes: weighted token components per trial</h3>"
                           + h.grouped_bars([str(r.get("arm")) for r in components], series, values,
                                            label="weighted token components per arm",
                                            unit="cost-equivalent tokens", height=300))
    return h.section("charts", "Success and cost", f'<div class="two-col"><div>{left}</div>'
                     f"<div>{right}</div></div>{component_chart}",
                     intro="Whiskers are 95 % intervals; overlapping whiskers are not a difference.")


def _tier_section(report: Mapping[str, Any], colors: Mapping[str, str]) -> str:
    rows = [r for r in report.get("per_tier") or [] if isinstance(r, Mapping)]
    if not rows:
        return h.section("tiers", "Per tier", h.empty_note("no tiers recorded"))
    tiers = list(dict.fromkeys([str(t) for t in report.get("tiers") or []] + [str(r.get("tier")) for r in rows]))
    arms = list(dict.fromkeys(str(r.get("arm")) for r in rows))
    series = [h.Series(arm, colors.get(arm, h.ACCENT)) for arm in arms]
    values = {}
    for row in rows:
        mean = _mean(row.get("success"))
        if mean is None:
            continue
        low, high = _interval(row.get("success"))
        values[(str(row.get("tier")), str(row.get("arm")))] = h.Bar(
            str(row.get("arm")), mean, low, high, value_text=f"{100 * mean:.0f}%",
            note=f"{row.get('samples')} samples, {_rate_text(row.get('success'))}")
    chart = h.grouped_bars(tiers, series, values, label="success rate per tier and arm",
                           unit="success rate", max_value=1.0, height=300, width=900)
    table = h.table(("arm", "tier", "samples", "success", "cost-eq tokens"),
                    ((str(r.get("arm")), str(r.get("tier")), r.get("samples") or "—",
                      _rate_text(r.get("success")), _mean_text(r.get("cost_equivalent")))
                     for r in rows), numeric=(2, 3, 4))
    return h.section("tiers", "Per tier", chart + table,
                     intro="Success rate by task tier, with Wilson 95 % intervals.")


def _coverage_section(report: Mapping[str, Any]) -> str:
    coverage = report.get("coverage") or {}
    floor = report.get("floor", 3)
    floor = floor if isinstance(floor, int) else 3
    tasks = [str(t) for t in report.get("tasks") or []]
    arms = [str(a) for a in coverage]
    cells = {}
    for arm, row in coverage.items():
        for task, samples in (row.get("samples") or {}).items():
            samples = samples if isinstance(samples, int) else 0
            kind = "covered" if samples >= floor else ("partial" if samples > 0 else "missing")
            cells[(str(arm), str(task))] = h.GridCell(
                COVERAGE_COLORS[kind], str(samples), f"{arm} × {task}: {samples} samples ({kind})",
                href="#" + h.anchor_id("trials", arm, task) if samples else None)
            if str(task) not in tasks:
                tasks.append(str(task))
    if not cells:
        return h.section("coverage", "Coverage", h.empty_note("no cells planned or recorded"))
    key = h.legend((colour, name, meaning) for name, colour, meaning in (
        ("covered", COVERAGE_COLORS["covered"], f"≥ {floor} samples"),
        ("partial", COVERAGE_COLORS["partial"], f"1–{floor - 1} samples"),
        ("missing", COVERAGE_COLORS["missing"], "no sample yet")))
    chart = h.grid(arms, tasks, cells, label="samples per arm and task",
                   cell_width=max(44, min(90, 1000 // max(1, len(tasks)))), row_header="arm",
                   column_header="task →")
    return h.section("coverage", "Coverage", key + chart,
                     intro="Samples per arm × task. Click a cell to open its trials.")


def _failure_section(report: Mapping[str, Any]) -> str:
    rows = [r for r in report.get("failure_tags") or [] if isinstance(r, Mapping)]
    if not rows:
        return h.section("failures", "Outcomes and failure tags", h.empty_note("no samples"))
    names = ("pass", "incorrect", "confused", "hung")
    series = [h.Series(name, OUTCOME_COLORS[name]) for name in names]
    values = {}
    for row in rows:
        for name in names:
            if isinstance(row.get(name), int):
                values[(str(row.get("arm")), name)] = h.Bar(name, float(row[name]), value_text=str(row[name]))
    chart = h.grouped_bars([str(r.get("arm")) for r in rows], series, values,
                           label="outcomes per arm", unit="trials", height=260)
    table = h.table(("arm", "samples", "pass", "incorrect", "confused", "hung", "denied calls"),
                    ((str(r.get("arm")), r.get("samples") or "—", *(r.get(k) if r.get(k) is not None else "—"
                      for k in ("pass", "incorrect", "confused", "hung", "denied_calls")))
                     for r in rows), numeric=(1, 2, 3, 4, 5, 6))
    key = h.legend([(OUTCOME_COLORS["incorrect"], "incorrect", "finished; the checker says wrong"),
                    (OUTCOME_COLORS["confused"], "confused", "hit the turn cap: not scored"),
                    (OUTCOME_COLORS["hung"], "hung", "hit the wall clock")])
    return h.section("failures", "Outcomes and failure tags", key + chart + table)


def _comparison_section(report: Mapping[str, Any]) -> str:
    comparisons = [c for c in report.get("comparisons") or [] if isinstance(c, Mapping)]
    if not comparisons:
        return ""
    rows = []
    for c in comparisons:
        success = c.get("success_difference") or {}
        cost = c.get("cost_equivalent_difference") or {}

        def signed(value: Any, scale: float = 1, digits: int = 0, suffix: str = "") -> str:
            return "—" if not isinstance(value, (int, float)) else f"{scale * value:+,.{digits}f}{suffix}"

        def interval(row: Mapping[str, Any], scale: float = 1, digits: int = 0) -> str:
            if not isinstance(row.get("low"), (int, float)) or not isinstance(row.get("high"), (int, float)):
                return "—"
            return f"[{scale * row['low']:+,.{digits}f}, {scale * row['high']:+,.{digits}f}]"
        mde = success.get("mde") if success.get("mde") is not None else success.get("mde_binomial")
        rows.append((f"{c.get('b')} − {c.get('a')}", len(c.get("tasks") or []),
                     signed(success.get("mean_diff"), 100, 1, " pp"), interval(success, 100, 1),
                     "—" if success.get("p_value") is None else f"{success['p_value']:.3f}",
                     "—" if mde is None else f"{100 * mde:.1f} pp",
                     signed(cost.get("mean_diff")), interval(cost),
                     "—" if cost.get("mde") is None else f"{cost['mde']:,.0f}"))
    return h.section("paired", "Paired comparisons", h.table(
        ("pair (b − a)", "tasks", "success diff", "95 % CI", "p", "MDE", "cost-eq diff", "95 % CI",
         "MDE"), rows, numeric=(1, 2, 3, 4, 5, 6, 7, 8)),
        intro="Over the tasks both arms covered. A difference below the minimum detectable "
              "effect (MDE) that is not significant means \"not measured\", not \"no difference\".")


def _transcript_html(transcript: Sequence[Any]) -> str:
    if not transcript:
        return '<p class="note">no tool calls</p>'
    items = []
    for index, entry in enumerate(transcript, 1):
        if not isinstance(entry, Mapping):
            items.append(f"<li>{h.pre(json.dumps(entry, ensure_ascii=False))}</li>")
            continue
        kind = str(entry.get("kind", "call"))
        if kind == "shell":
            call = f'<code class="kv">$ {h.pre_text(entry.get("command", ""))}</code>'
        else:
            call = (f'<code class="kv">{h.pre_text(entry.get("name", ""))}'
                    f'({h.pre_text(entry.get("arguments", ""))})</code>')
        denied = ""
        if entry.get("denied"):
            denied = (f' {h.badge("denied", h.BAD)} <span class="muted">'
                      f'{h.escape(entry.get("reason", ""))}</span>')
        items.append(f'<li><span class="muted">{h.escape(kind)}</span> {call}{denied}</li>')
    return f'<ol class="transcript">{"".join(items)}</ol>'


def _trial_detail(trial: Mapping[str, Any]) -> str:
    outcome = str(trial.get("outcome", ""))
    tag = str(trial.get("failure") or outcome)
    colour = OUTCOME_COLORS.get(tag if outcome != "pass" else "pass", h.MUTED)
    summary = (f'{h.badge(tag, colour)}<strong>trial {h.escape(trial.get("trial"))}</strong>'
               f'<span class="muted">{h.escape(trial.get("turns", "—"))} turns · '
               f'{h.escape(h.fmt_number(trial.get("cost_equivalent"), 0))} cost-eq tokens · '
               f'{h.escape(h.fmt_number(trial.get("duration_s"), 1))} s</span>')
    reasons = trial.get("reasons") or []
    body = []
    if reasons:
        body.append("<h4>checker's reasons</h4><ul>" + "".join(f"<li>{h.escape(r)}</li>" for r in reasons)
                    + "</ul>")
    elif outcome == "pass":
        body.append('<p class="note">the checker accepted the result</p>')
    body.append(f"<h4>tool calls ({len(trial.get('transcript') or [])})</h4>"
                + _transcript_html(trial.get("transcript") or []))
    if trial.get("final_report"):
        body.append("<h4>final report</h4>" + h.pre(trial["final_report"]))
    tokens = trial.get("tokens") or {}
    body.append(h.facts([
        ("stopped", str(trial.get("stopped") or "—")),
        ("tokens", " · ".join(f"{k.replace('_', ' ')} {h.fmt_number(v)}" for k, v in tokens.items())
         + ("" if trial.get("tokens_reported", True) else " (not reported by the driver)")),
        ("model", str(trial.get("model") or "—")),
        ("run", str(trial.get("run_id") or "—")),
    ]))
    return h.details(summary, "".join(body),
                     element_id=h.anchor_id("trial", trial.get("arm"), trial.get("task"), trial.get("trial")))


def _trials_section(report: Mapping[str, Any]) -> str:
    trials = [t for t in report.get("trials") or [] if isinstance(t, Mapping)]
    if "trials" not in report:
        return h.section("trials", "Trials", h.empty_note(
            "this report carries no per-trial data; `benchwarden report RUN --html` adds it from the store"))
    if not trials:
        return h.section("trials", "Trials", h.empty_note("no trial recorded"))
    shown = trials[-TRIAL_LIMIT:]
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for trial in shown:
        groups[(str(trial.get("arm")), str(trial.get("task")))].append(trial)
    blocks = []
    for arm in list(dict.fromkeys(arm for arm, _ in groups)):
        cells = []
        for (group_arm, task), items in groups.items():
            if group_arm != arm:
                continue
            items = sorted(items, key=lambda t: t.get("trial") or 0)
            passes = sum(1 for t in items if t.get("outcome") == "pass")
            tier = next((t.get("tier") for t in items if t.get("tier")), None)
            summary = (f"<strong>{h.escape(task)}</strong>"
                       + (f'<span class="muted">{h.escape(tier)}</span>' if tier else "")
                       + '<span class="chips">'
                       + "".join(f'<span class="swatch" title="trial {h.escape(t.get("trial"))}: '
                                 f'{h.escape(t.get("failure") or t.get("outcome"))}" style="background:'
                                 f'{h.color(OUTCOME_COLORS.get(str(t.get("failure") or t.get("outcome")), h.MUTED))}"></span>'
                                 for t in items)
                       + f'</span><span class="muted">{passes}/{len(items)} passed</span>')
            cells.append(h.details(summary, "".join(_trial_detail(t) for t in items),
                                   element_id=h.anchor_id("trials", arm, task)))
        blocks.append(f"<h3>{h.escape(arm)}</h3>{''.join(cells)}")
    note = ""
    if len(trials) > len(shown):
        note = f'<p class="note">Showing the newest {len(shown)} of {len(trials)} trials.</p>'
    return h.section("trials", "Trials", note + "".join(blocks),
                     intro="Every recorded trial by arm and task: outcome, the checker's reasons, "
                           "and the tool calls the agent made (denied calls were not run).")


def _tally_section(report: Mapping[str, Any]) -> str:
    tally = report.get("tally")
    if not isinstance(tally, Mapping):
        return ""
    tiles = h.stat_tiles([("recorded", tally.get("recorded"), h.GOOD),
                          ("invalid (isolation leaks)", tally.get("invalid"), h.BAD),
                          ("harness errors", tally.get("harness_errors"), h.WARN)])
    rows = [(str(c.get("arm")), str(c.get("task")), f"{c.get('before')} → {c.get('after')}",
             c.get("passed"), c.get("failed"), c.get("invalid"), c.get("harness_errors"),
             "reached" if c.get("covered") else "below")
            for c in tally.get("cells") or [] if isinstance(c, Mapping)]
    problems = "".join(f"<li>{h.escape(p)}</li>" for p in tally.get("problems") or [])
    return h.section("tally", "This run's tally", tiles + h.table(
        ("arm", "task", "samples before → after", "pass", "fail", "invalid", "harness errors", "floor"),
        rows, numeric=(3, 4, 5, 6)) + (f"<ul>{problems}</ul>" if problems else ""))


def render_html(report: Mapping[str, Any]) -> str:
    arms = _arms(report)
    colors = _arm_colors(arms)
    run = report.get("run") or {}
    subtitle = " · ".join(str(x) for x in (f"suite {report.get('scope')}" if report.get("scope") else None,
                                           f"{report.get('samples', 0)} samples", run.get("id")) if x)
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
    sections.append(("run", "run", h.section("run", "Run", h.run_facts(report))))
    return h.page(title="arms report", subtitle=subtitle, report=report, sections=sections)
