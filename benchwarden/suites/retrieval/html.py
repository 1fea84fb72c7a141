"""The retrieval report as one self-contained HTML page.

`render_html(report)` draws a retrieval JSON report (`report.build_report`): per-category
bars per strategy, composite against composite_guarded, the three guards (efficiency,
paraphrase consistency, canary), per-seed scores, failed cases. When the report also
carries a champion/challenger comparison (`comparison: {champion, challenger, decision}`
or the same three keys at the top level, each side a retrieval report and `decision` the
scoring module's `Decision.to_json_dict()`), the page adds both strategies to the
charts and draws the per-seed differences against the paired band; a `ledger` (or
`history`) list of decisions becomes the ladder history. `enrich(store, report)` adds
both from the ladder folder a ladder-scored run names (called by `benchwarden report`).

Invariants: strategy names, questions, grading reasons and failure reasons (all of which
can come from a strategy's code or output) reach the page only through the escaping
helpers of `benchwarden.core.html`. A version-1 report (no guard block) is read with the
guards at 1.0 and the guarded composite falling back to the composite, and says so.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Mapping, Sequence

from benchwarden.core import html as h

COMPOSITE = "#0072B2"
GUARDED = "#009E73"
GUARD_COLORS = {"efficiency": "#56B4E9", "consistency": "#CC79A7", "canary": "#E69F00"}
STRATEGY_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9")


# ---------------------------------------------------------------------------- reading

def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _guards(block: Mapping[str, Any]) -> dict[str, Any]:
    guards = block.get("guards") if isinstance(block.get("guards"), Mapping) else {}
    return {"efficiency": _number(guards.get("efficiency")) if guards else 1.0,
            "consistency": _number(guards.get("consistency")) if guards else 1.0,
            "canary": _number(guards.get("canary")) if guards else 1.0,
            "canary_tripped": bool(guards.get("canary_tripped", False)),
            "canary_leak_rate": _number(guards.get("canary_leak_rate")) if guards else 0.0,
            "consistency_per_template": dict(guards.get("consistency_per_template") or {}),
            "mean_used_chars": _number(guards.get("mean_used_chars")),
            "packs": guards.get("packs"), "legacy": not guards}


def _seeds(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    blocks = []
    for block in report.get("seeds") or []:
        if not isinstance(block, Mapping):
            continue
        composite = _number(block.get("composite"))
        guarded = _number(block.get("composite_guarded"))
        blocks.append({"seed": block.get("seed"), "cases": block.get("cases"),
                       "category_means": dict(block.get("category_means") or {}),
                       "composite": composite,
                       "composite_guarded": guarded if guarded is not None else composite,
                       "guards": _guards(block),
                       "failed_cases": [c for c in block.get("failed_cases") or [] if isinstance(c, Mapping)]})
    return blocks


def _estimate(values: Sequence[float | None]) -> dict[str, float | None]:
    """Mean, standard error and a normal 95 % interval over seeds (None when empty)."""
    present = [v for v in values if v is not None]
    if not present:
        return {"mean": None, "se": None, "low": None, "high": None}
    mean = sum(present) / len(present)
    if len(present) < 2:
        return {"mean": mean, "se": None, "low": None, "high": None}
    variance = sum((v - mean) ** 2 for v in present) / (len(present) - 1)
    se = (variance / len(present)) ** 0.5
    return {"mean": mean, "se": se, "low": mean - 1.96 * se, "high": mean + 1.96 * se}


class _Strategy:
    """One strategy's report, read tolerantly."""

    def __init__(self, report: Mapping[str, Any], fallback_name: str) -> None:
        strategy = report.get("strategy") if isinstance(report.get("strategy"), Mapping) else {}
        self.name = str(strategy.get("name") or report.get("name") or fallback_name)
        self.report = report
        self.blocks = _seeds(report)
        self.failure = report.get("failure") if isinstance(report.get("failure"), Mapping) else None

    def estimate(self, key: str) -> dict[str, float | None]:
        return _estimate([b[key] for b in self.blocks])

    def guard(self, key: str) -> dict[str, float | None]:
        return _estimate([b["guards"][key] for b in self.blocks])

    def categories(self) -> dict[str, dict[str, float | None]]:
        names: list[str] = []
        for block in self.blocks:
            names += [n for n in block["category_means"] if n not in names]
        return {name: _estimate([_number(b["category_means"].get(name)) for b in self.blocks])
                for name in names}

    @property
    def legacy(self) -> bool:
        return any(b["guards"]["legacy"] for b in self.blocks)


def _comparison(report: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]] | None:
    holder = report.get("comparison") if isinstance(report.get("comparison"), Mapping) else report
    champion, challenger = holder.get("champion"), holder.get("challenger")
    decision = holder.get("decision")
    if isinstance(champion, Mapping) and isinstance(challenger, Mapping):
        return champion, challenger, decision if isinstance(decision, Mapping) else {}
    return None


def _fmt(value: Any, digits: int = 4) -> str:
    number = _number(value)
    return "—" if number is None else f"{number:.{digits}f}"


def _est_text(estimate: Mapping[str, Any], digits: int = 4) -> str:
    if estimate.get("mean") is None:
        return "—"
    text = f"{estimate['mean']:.{digits}f}"
    if estimate.get("se") is not None:
        text += f" ± {estimate['se']:.{digits}f}"
    return text


# ---------------------------------------------------------------------------- sections

def _summary_section(main: _Strategy, report: Mapping[str, Any]) -> str:
    composite, guarded = main.estimate("composite"), main.estimate("composite_guarded")
    tiles = h.stat_tiles([
        ("composite", _est_text(composite), COMPOSITE),
        ("composite guarded", _est_text(guarded), GUARDED),
        ("seeds", len(main.blocks), h.MUTED),
        ("efficiency", _est_text(main.guard("efficiency"), 3), GUARD_COLORS["efficiency"]),
        ("consistency", _est_text(main.guard("consistency"), 3), GUARD_COLORS["consistency"]),
        ("canary multiplier", _est_text(main.guard("canary"), 2), GUARD_COLORS["canary"]),
    ])
    notes = []
    if main.failure:
        notes.append(f'<p class="alert"><strong>The strategy failed</strong> on seed '
                     f'{h.escape(main.failure.get("seed", "—"))}: {h.escape(main.failure.get("reason", ""))}'
                     "</p>")
    if main.legacy:
        notes.append('<p class="note">A version-1 report without guard blocks: guards read as 1.0 '
                     "and the guarded composite falls back to the composite. Never compare it "
                     "with a newer version's numbers.</p>")
    return h.section("summary", f"Strategy {main.name}", "".join(notes) + tiles,
                     intro="The composite is the mean of the non-empty category means; the guards "
                           "sit beside it and only multiply into the guarded composite. "
                           "± is the standard error over seeds.")


def _category_section(strategies: Sequence[_Strategy]) -> str:
    if not any(s.blocks for s in strategies):
        return h.section("categories", "Per category", h.empty_note("no seed was scored"))
    if len(strategies) == 1:
        only = strategies[0]
        bars = [h.Bar(name.replace("_", " "), est["mean"], est["low"], est["high"],
                      color=COMPOSITE if est["mean"] is not None and est["mean"] >= 0.5 else h.WARN,
                      value_text=_est_text(est, 2), note=f"{name}: {_est_text(est)} over seeds")
                for name, est in only.categories().items()]
        chart = h.bar_chart(bars, label=f"per-category mean of {only.name}", max_value=1.0,
                            width=900, unit="mean score (whiskers: 95 % over seeds)")
    else:
        names: list[str] = []
        for strategy in strategies:
            names += [n for n in strategy.categories() if n not in names]
        series = [h.Series(s.name, STRATEGY_COLORS[i % len(STRATEGY_COLORS)]) for i, s in enumerate(strategies)]
        values = {}
        for strategy in strategies:
            for name, est in strategy.categories().items():
                if est["mean"] is not None:
                    values[(name.replace("_", " "), strategy.name)] = h.Bar(
                        strategy.name, est["mean"], est["low"], est["high"],
                        value_text=f"{est['mean']:.2f}", note=_est_text(est))
        chart = h.grouped_bars([n.replace("_", " ") for n in names], series, values,
                               label="per-category mean per strategy", max_value=1.0, width=1150,
                               height=340, unit="mean score")
    return h.section("categories", "Per category", chart,
                     intro="One case per category per seed; a category with no case is left out "
                           "of the composite, never counted as zero.")


def _composite_section(strategies: Sequence[_Strategy]) -> str:
    series = [h.Series("composite", COMPOSITE), h.Series("composite guarded", GUARDED)]
    values = {}
    for strategy in strategies:
        for key, name in (("composite", "composite"), ("composite_guarded", "composite guarded")):
            est = strategy.estimate(key)
            if est["mean"] is not None:
                values[(strategy.name, name)] = h.Bar(name, est["mean"], est["low"], est["high"],
                                                      value_text=f"{est['mean']:.3f}", note=_est_text(est))
    chart = h.grouped_bars([s.name for s in strategies], series, values,
                           label="composite against composite guarded", max_value=1.0,
                           width=max(420, 260 * len(strategies)), height=300, unit="score")
    return h.section("composite", "Composite and guarded composite", chart,
                     intro="composite_guarded = composite × efficiency × consistency × canary. "
                           "A large gap means the guards caught something: dumping the corpus, "
                           "brittleness under paraphrase, or a surfaced canary.")


def _guard_section(strategies: Sequence[_Strategy]) -> str:
    parts = []
    names = ("efficiency", "consistency", "canary")
    if len(strategies) == 1:
        only = strategies[0]
        bars = [h.Bar(name, only.guard(name)["mean"], only.guard(name)["low"], only.guard(name)["high"],
                      color=GUARD_COLORS[name], value_text=_est_text(only.guard(name), 3)) for name in names]
        parts.append(h.bar_chart(bars, label="guards", max_value=1.0, width=760, unit="multiplier"))
    else:
        series = [h.Series(s.name, STRATEGY_COLORS[i % len(STRATEGY_COLORS)]) for i, s in enumerate(strategies)]
        values = {(name, s.name): h.Bar(s.name, s.guard(name)["mean"], s.guard(name)["low"],
                                        s.guard(name)["high"], value_text=_fmt(s.guard(name)["mean"], 3))
                  for s in strategies for name in names if s.guard(name)["mean"] is not None}
        parts.append(h.grouped_bars(list(names), series, values, label="guards per strategy",
                                    max_value=1.0, height=280, unit="multiplier"))
    rows = []
    for strategy in strategies:
        for block in strategy.blocks:
            guards = block["guards"]
            rows.append((strategy.name, str(block["seed"]), _fmt(guards["efficiency"], 3),
                         _fmt(guards["mean_used_chars"], 0), _fmt(guards["consistency"], 3),
                         _fmt(guards["canary"], 2), "yes" if guards["canary_tripped"] else "no",
                         _fmt(guards["canary_leak_rate"], 3), _fmt(block["composite"]),
                         _fmt(block["composite_guarded"])))
    parts.append(h.table(("strategy", "seed", "efficiency", "mean chars used", "consistency", "canary",
                          "tripped", "leak rate", "composite", "guarded"), rows,
                         numeric=(2, 3, 4, 5, 7, 8, 9)))
    templates: dict[tuple[str, str], list[float]] = {}
    for strategy in strategies:
        for block in strategy.blocks:
            for template, value in block["guards"]["consistency_per_template"].items():
                if _number(value) is not None:
                    templates.setdefault((strategy.name, str(template)), []).append(float(value))
    if templates:
        parts.append("<h3>Paraphrase agreement per template</h3>" + h.table(
            ("strategy", "template", "agreement"),
            ((name, template, f"{sum(v) / len(v):.3f}") for (name, template), v in templates.items()),
            numeric=(2,)))
    key = h.legend([(GUARD_COLORS["efficiency"], "efficiency", "0.5 + 0.5 × (1 − min(1, mean chars used / budget))"),
                    (GUARD_COLORS["consistency"], "consistency", "share of cases whose paraphrase grades the same"),
                    (GUARD_COLORS["canary"], "canary", "0.5 when any pack surfaced the planted canary, else 1")])
    return h.section("guards", "The three guards", key + "".join(parts),
                     intro="Reported beside the composite, never folded into it.")


def _seed_section(strategies: Sequence[_Strategy], comparison: Any) -> str:
    parts = []
    if comparison is not None:
        champion, challenger = strategies[0], strategies[1]
        decision = comparison[2]
        decide_on = str(decision.get("decide_on") or "composite")
        seeds = [s for s in decision.get("seeds") or []]
        old = [_number(v) for v in decision.get("champion_scores") or []]
        new = [_number(v) for v in decision.get("challenger_scores") or []]
        if not seeds:  # no decision: pair the seeds both sides scored
            mine = {b["seed"]: b[decide_on] for b in champion.blocks}
            theirs = {b["seed"]: b[decide_on] for b in challenger.blocks}
            seeds = [s for s in mine if s in theirs]
            old, new = [mine[s] for s in seeds], [theirs[s] for s in seeds]
        series = [h.Series(f"champion {champion.name}", STRATEGY_COLORS[0]),
                  h.Series(f"challenger {challenger.name}", STRATEGY_COLORS[1])]
        values = {}
        for seed, a, b in zip(seeds, old, new):
            if a is not None:
                values[(str(seed), series[0].name)] = h.Bar(str(seed), a, value_text=f"{a:.3f}")
            if b is not None:
                values[(str(seed), series[1].name)] = h.Bar(str(seed), b, value_text=f"{b:.3f}")
        parts.append(f"<h3>{h.escape(decide_on.replace('_', ' '))} per seed</h3>" + h.grouped_bars(
            [str(s) for s in seeds], series, values, label="per-seed scores of champion and challenger",
            max_value=1.0, width=1000, height=300, unit=decide_on.replace("_", " ")))
        verdict = decision.get("verdict") if isinstance(decision.get("verdict"), Mapping) else {}
        band = _number(verdict.get("band"))
        mean_diff = _number(verdict.get("mean_diff"))
        diffs = [h.Bar(f"seed {s}", b - a, color=h.GOOD if b - a >= 0 else h.BAD,
                       note=f"seed {s}: challenger {b:.4f} − champion {a:.4f}")
                 for s, a, b in zip(seeds, old, new) if a is not None and b is not None]
        rules = []
        if mean_diff is not None:
            rules.append(h.Rule(mean_diff, f"mean {mean_diff:+.4f}", h.ACCENT, dashed=False))
        if band is not None:
            rules.append(h.Rule(band, f"band {band:.4f}", h.BAD))
        parts.append("<h3>Challenger − champion per seed, against the paired band</h3>" + h.diverging_bars(
            diffs, label="per-seed differences and the paired band", rules=rules,
            shade=(-band, band) if band is not None else None,
            shade_label="within ±band: not a win", width=1000, unit="difference"))
        outcome = decision.get("dethroned")
        reason = decision.get("reason") or ""
        if outcome is not None:
            parts.append(f'<p>{h.badge("dethroned" if outcome else "champion holds", h.GOOD if outcome else h.MUTED)} '
                         f"{h.escape(reason)}</p>")
        parts.append('<p class="note">band = max(0.007, 1.96 × standard error of the per-seed '
                     "differences); the challenger dethrones the champion only when the mean "
                     "difference reaches the band.</p>")
    else:
        only = strategies[0]
        series = [h.Series("composite", COMPOSITE), h.Series("composite guarded", GUARDED)]
        values = {}
        for block in only.blocks:
            for key, name in (("composite", "composite"), ("composite_guarded", "composite guarded")):
                if block[key] is not None:
                    values[(str(block["seed"]), name)] = h.Bar(name, block[key], value_text=f"{block[key]:.3f}")
        parts.append(h.grouped_bars([str(b["seed"]) for b in only.blocks], series, values,
                                    label="per-seed scores", max_value=1.0, width=1000, height=280,
                                    unit="score"))
        parts.append('<p class="note">No champion/challenger comparison in this report: '
                     "the paired band is drawn when the ladder compares two strategies.</p>")
    return h.section("seeds", "Per seed", "".join(parts))


def _when(value: Any) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return dt.datetime.fromtimestamp(value, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return str(value) if value not in (None, "") else "—"


def _ledger_section(report: Mapping[str, Any]) -> str:
    entries = report.get("ledger") or report.get("history")
    if not isinstance(entries, list) or not entries:
        return ""
    rows = []
    for entry in entries:
        if not isinstance(entry, Mapping):
            continue
        verdict = entry.get("verdict") if isinstance(entry.get("verdict"), Mapping) else {}
        decision = entry.get("decision") if isinstance(entry.get("decision"), Mapping) else {}
        merged = {**decision, **verdict, **entry}

        def name(side: str) -> str:
            value = merged.get(side)
            if isinstance(value, Mapping):
                value = value.get("name") or value.get("strategy")
            return str(value) if value not in (None, "") else "—"
        dethroned = merged.get("dethroned")
        word = str(merged.get("outcome") or merged.get("kind") or "")
        if word == "dethroned" or (not word and dethroned is True):
            outcome = h.badge("dethroned", h.GOOD)
        elif word in ("held", "holds") or (not word and dethroned is False):
            outcome = h.badge("champion holds", h.MUTED)
        elif word == "error":
            outcome = h.badge("error", h.BAD)
        elif word == "genesis":
            outcome = h.badge("first champion", h.ACCENT)
        else:
            outcome = h.escape(word or "—")
        source = merged.get("public_value") or merged.get("seed_source") or " ".join(
            str(merged[k]) for k in ("base", "date") if merged.get(k))
        rows.append((h.escape(_when(merged.get("decided_at") or merged.get("at") or merged.get("timestamp"))),
                     h.escape(name("champion")), h.escape(name("challenger")), outcome,
                     h.escape(_fmt(merged.get("mean_diff"))), h.escape(_fmt(merged.get("band"))),
                     h.escape(merged.get("n") if merged.get("n") is not None else len(merged.get("seeds") or []) or "—"),
                     h.escape(source or "—"),
                     h.escape(merged.get("reason") or "")))
    problem = report.get("ledger_problem")
    warning = f'<p class="alert">{h.escape(problem)}</p>' if problem else ""
    return h.section("ladder", "Ladder history", warning + h.table(
        ("decided", "champion", "challenger", "outcome", "mean diff", "band", "seeds", "seeds from", "reason"),
        rows, numeric=(4, 5, 6), row_html=True),
        intro="Every decision appended to the ledger, oldest first, with its numbers.")


def enrich(store: Any, report: Mapping[str, Any]) -> dict[str, Any]:
    """For a run a ladder scored: the ledger, and the decision it took part in with both
    sides' reports (read from the ladder folder named in the run's configuration and
    from the store). Any other report is returned as it is."""
    enriched = dict(report)
    run = report.get("run") if isinstance(report.get("run"), Mapping) else {}
    directory = (run.get("config") or {}).get("ladder")
    if not directory or "ledger" in enriched:
        return enriched
    from benchwarden.core.store import StoreError
    from benchwarden.suites.retrieval.ladder import Ladder, LedgerError
    from benchwarden.suites.retrieval.report import build_report

    try:
        entries = Ladder(directory).entries()
    except (LedgerError, OSError) as error:
        enriched["ledger_problem"] = f"ladder history unavailable: {error}"
        return enriched
    enriched["ledger"] = entries
    for entry in reversed(entries):
        champion = entry.get("champion") if isinstance(entry.get("champion"), Mapping) else {}
        challenger = entry.get("challenger") if isinstance(entry.get("challenger"), Mapping) else {}
        if entry.get("kind") != "decision" or run.get("id") not in (champion.get("run_id"),
                                                                    challenger.get("run_id")):
            continue
        try:
            enriched["comparison"] = {
                "champion": build_report(store, str(champion.get("run_id"))),
                "challenger": build_report(store, str(challenger.get("run_id"))),
                "decision": {"dethroned": entry.get("outcome") == "dethroned",
                             "reason": entry.get("reason"), "verdict": entry.get("verdict"),
                             "decide_on": entry.get("decide_on", "composite")}}
        except (StoreError, ValueError) as error:
            enriched["ledger_problem"] = f"the other side of this decision is not in the store: {error}"
        break
    return enriched


def _failed_section(strategies: Sequence[_Strategy]) -> str:
    blocks = []
    total = 0
    for strategy in strategies:
        for block in strategy.blocks:
            cases = block["failed_cases"]
            if not cases:
                continue
            total += len(cases)
            table = h.table(("case", "category", "question", "score", "reason"),
                            ((str(c.get("case", "")), str(c.get("category", "")), str(c.get("question", "")),
                              _fmt(c.get("score"), 2), str(c.get("reason") or "")) for c in cases),
                            numeric=(3,))
            blocks.append(h.details(f"<strong>{h.escape(strategy.name)}</strong>"
                                    f'<span class="muted">seed {h.escape(block["seed"])} · '
                                    f"{len(cases)} cases below 1.0</span>", table))
    if not blocks:
        return h.section("failed", "Failed cases", '<p class="note">Every case scored 1.0.</p>')
    return h.section("failed", f"Failed cases ({total})", "".join(blocks),
                     intro="Cases that scored below 1.0, with the grader's reason.")


def _run_section(report: Mapping[str, Any], main: _Strategy) -> str:
    strategy = report.get("strategy") if isinstance(report.get("strategy"), Mapping) else {}
    settings = report.get("settings") if isinstance(report.get("settings"), Mapping) else {}
    items = [(f"strategy {k}", v if isinstance(v, str) else str(v)) for k, v in strategy.items()]
    items += [(k.replace("_", " "), v if isinstance(v, str) else str(v)) for k, v in settings.items()]
    return h.section("run", "Run", h.run_facts(report) + ("<h3>Strategy and settings</h3>" + h.facts(items)
                                                          if items else ""))


def render_html(report: Mapping[str, Any]) -> str:
    comparison = _comparison(report)
    if comparison is not None:
        strategies = [_Strategy(comparison[0], "champion"), _Strategy(comparison[1], "challenger")]
        main = _Strategy(report, strategies[1].name) if report.get("seeds") else strategies[1]
    else:
        main = _Strategy(report, "strategy")
        strategies = [main]
    run = report.get("run") or {}
    subtitle = " · ".join(x for x in (
        " vs ".join(s.name for s in strategies), f"bench {report.get('bench_version', '—')}",
        str(run.get("id") or "")) if x)
    sections = [
        ("summary", "summary", _summary_section(main, report)),
        ("categories", "categories", _category_section(strategies)),
        ("composite", "composite", _composite_section(strategies)),
        ("guards", "guards", _guard_section(strategies)),
        ("seeds", "per seed", _seed_section(strategies, comparison)),
    ]
    ledger = _ledger_section(report)
    if ledger:
        sections.append(("ladder", "ladder", ledger))
    sections.append(("failed", "failed cases", _failed_section(strategies)))
    sections.append(("run", "run", _run_section(report, main)))
    return h.page(title="retrieval report", subtitle=subtitle, report=report, sections=sections)
