"""The retrieval report as one self-contained HTML page.

`render_html(report)` draws a typed retrieval report (`report.RetrievalReport`, or its
JSON read back with `RetrievalReport.from_json`): per-category bars per strategy,
composite against composite_guarded, the three guards (efficiency, paraphrase
consistency, canary), per-seed scores, failed cases. When the report also carries a
champion/challenger comparison (`comparison`: both sides' reports, the decision and the
per-seed pairs), the page adds both strategies to the charts and draws the per-seed
differences against the paired band; a `ledger` of decisions becomes the ladder history.
`enrich(store, report)` adds both from the ladder folder a ladder-scored run names
(called by `benchwarden report`).

Invariants:
- A view only formats: every number is a field of the typed report printed through
  `benchwarden.core.formatting`; every whisker is the report's own Student t interval
  over seeds (`summary`, from `core.stats.mean_se`), never one drawn here.
- Strategy names, questions, grading reasons and failure reasons (all of which can come
  from a strategy's code or output) reach the page only through the escaping helpers of
  `benchwarden.core.html`. A version-1 report is read with the guards at 1.0 and the
  guarded composite falling back to the composite, and says so.
- The page stays small whatever the run: it draws and embeds the first `SEEDS_DRAWN`
  seeds of each strategy (its copy says `seeds_left_out`) and `FAILED_CASES_DRAWN`
  failed cases, and says what it leaves out; every number over seeds counts every seed.
  Of each strategy it draws and embeds at most `CATEGORIES_SHOWN` categories and
  `TEMPLATES_SHOWN` paraphrase templates, the same in its summary and in every seed
  (`report.names_shown`: those of lowest mean), and says how many it has (`page_cut`).
  Of a ladder's ledger it draws and embeds the newest `LEDGER_ENTRIES_DRAWN` entries,
  each per-seed list in them cut to its first `SEEDS_DRAWN` values, and names the
  command that lists them all.
- What the page draws and embeds is `page_copy(report)`. A name or free text longer
  than `core.html.NAME_LIMIT` (strategy names, run ids, case ids, categories, templates,
  sources, stamps, questions, reasons: a store written by another tool can hold any) is
  clipped wherever the copy holds it, the same clipped name everywhere, distinct from
  every other; the copy's `page_cut` counts what it clipped and cut and names the
  command that writes the whole report, and the commands the page shows stay whole. A
  report within every bound is drawn and embedded as before, byte for byte.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import msgspec

from benchwarden.core import formatting as fmt
from benchwarden.core import html as h
from benchwarden.core.reports import EstimateBlock
from benchwarden.suites.retrieval.corpus import CATEGORIES
from benchwarden.suites.retrieval.report import (
    CATEGORIES_SHOWN,
    FAILED_CASES_LISTED,
    TEMPLATES_SHOWN,
    Comparison,
    PageCut,
    RetrievalReport,
    SeedBlock,
    Summary,
    as_report,
    comparison,
    first_items,
    names_shown,
)

# Failed cases one strategy's report draws and embeds in the page: about twenty per seed
# fail, so without a cap the page grew by about 8 KB per seed (20 MB at 2,500 seeds).
FAILED_CASES_DRAWN = FAILED_CASES_LISTED
# Seeds whose own bars and rows the page draws and whose blocks it embeds (the charts over
# seeds count every one): a run of 17,700 seeds made a 28 MB page of them.
SEEDS_DRAWN = 300
# Ledger entries the page draws and embeds, the newest: a ladder appends one per
# challenge for ever, and 200 entries naming strategies of 20,000 characters made a
# 52 MB page.
LEDGER_ENTRIES_DRAWN = 200

COMPOSITE = "#0072B2"
GUARDED = "#009E73"
GUARD_COLORS = {"efficiency": "#56B4E9", "consistency": "#CC79A7", "canary": "#E69F00"}
STRATEGY_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9")
_NOTHING = EstimateBlock()


class _Strategy:
    """One strategy's typed report and the name it is drawn under."""

    def __init__(self, report: RetrievalReport, fallback_name: str) -> None:
        self.name = report.name or fallback_name
        self.report = report
        self.blocks = report.seeds
        self.seed_count = len(report.seeds) + report.seeds_left_out
        self.failure = report.failure
        self.summary: Summary = report.summary or Summary()

    def estimate(self, key: str) -> EstimateBlock:
        """composite or composite_guarded over seeds."""
        return getattr(self.summary, key)  # type: ignore[no-any-return]

    def guard(self, key: str) -> EstimateBlock:
        return getattr(self.summary.guards, key)  # type: ignore[no-any-return]

    def categories(self) -> dict[str, EstimateBlock]:
        return self.summary.category_means

    @property
    def legacy(self) -> bool:
        return self.report.legacy_guards


def _bar(label: str, estimate: EstimateBlock, **options: Any) -> h.Bar:
    """A bar of an estimate over seeds, its whisker the estimate's own interval."""
    return h.Bar(label, estimate.mean, estimate.low, estimate.high, **options)


# ---------------------------------------------------------------------------- sections

def _names_clipped_note(cut: PageCut | None) -> str:
    """What the page clipped, and the command that writes it whole; "" when nothing."""
    if cut is None or not cut.names:
        return ""
    return (f'<p class="note">{h.escape(fmt.count(cut.names))} names and texts longer than '
            f"{h.NAME_LIMIT} characters (strategy names, run ids, case ids, categories, "
            "templates, sources, questions, reasons) are clipped on this page: their start, "
            "an ellipsis and the start of their SHA-256, one name everywhere; "
            f"<code>{h.escape(cut.command)}</code> writes them whole.</p>")


def _widths_note(kind: str, drawn: int, cut: PageCut | None) -> str:
    """What the page leaves out of a strategy's `kind` (`categories` or `templates`, as
    `PageCut` counts them) and the command that writes them all; "" when it leaves out
    none."""
    total = getattr(cut, kind) if cut is not None else None
    if cut is None or not total:
        return ""
    return (f'<p class="note">Of {fmt.count(total)} {kind}, the {fmt.count(drawn)} with the '
            "lowest mean over seeds of each strategy are drawn and embedded here; "
            f"<code>{h.escape(cut.command)}</code> writes every one.</p>")


def _summary_section(main: _Strategy, page_cut: PageCut | None = None) -> str:
    tiles = h.stat_tiles([
        ("composite", fmt.estimate(main.estimate("composite"), 4), COMPOSITE),
        ("composite guarded", fmt.estimate(main.estimate("composite_guarded"), 4), GUARDED),
        ("seeds", fmt.count(main.seed_count), h.MUTED),
        ("efficiency", fmt.estimate(main.guard("efficiency"), 3), GUARD_COLORS["efficiency"]),
        ("consistency", fmt.estimate(main.guard("consistency"), 3), GUARD_COLORS["consistency"]),
        ("canary multiplier", fmt.estimate(main.guard("canary"), 2), GUARD_COLORS["canary"]),
    ])
    notes = []
    if main.failure:
        notes.append(f'<p class="alert"><strong>The strategy failed</strong> on seed '
                     f'{h.escape(fmt.text(main.failure.get("seed")))}: '
                     f'{h.escape(main.failure.get("reason", ""))}</p>')
    notes.extend(f'<p class="note">{h.escape(warning)}</p>' for warning in main.report.warnings)
    notes.append(_names_clipped_note(page_cut))
    if main.legacy:
        notes.append('<p class="note">A version-1 report without guard blocks: guards read as 1.0 '
                     "and the guarded composite falls back to the composite. Never compare it "
                     "with a newer version's numbers.</p>")
    return h.section("summary", f"Strategy {main.name}", "".join(notes) + tiles,
                     intro="The composite is the mean of the non-empty category means; the guards "
                           "sit beside it and only multiply into the guarded composite. "
                           "± is the standard error over seeds.")


def _strategy_series(strategies: Sequence[_Strategy]) -> list[h.Series]:
    """One chart series per strategy, coloured in turn."""
    return [h.Series(strategy.name, STRATEGY_COLORS[index % len(STRATEGY_COLORS)])
            for index, strategy in enumerate(strategies)]


def _category_section(strategies: Sequence[_Strategy], page_cut: PageCut | None = None) -> str:
    if not any(s.blocks for s in strategies):
        return h.section("categories", "Per category", h.empty_note("no seed was scored"))
    if len(strategies) == 1:
        only = strategies[0]
        bars = [_bar(name.replace("_", " "), est,
                     color=COMPOSITE if est.mean is not None and est.mean >= 0.5 else h.WARN,
                     value_text=fmt.estimate(est, 2),
                     note=f"{name}: {fmt.estimate(est, 4)} over seeds")
                for name, est in only.categories().items()]
        chart = h.bar_chart(bars, label=f"per-category mean of {only.name}", max_value=1.0,
                            width=900, unit="mean score (whiskers: 95 % t interval over seeds)")
    else:
        names: list[str] = []
        for strategy in strategies:
            names += [n for n in strategy.categories() if n not in names]
        series = _strategy_series(strategies)
        values = {}
        for strategy in strategies:
            for name, est in strategy.categories().items():
                if est.mean is not None:
                    values[(name.replace("_", " "), strategy.name)] = _bar(
                        strategy.name, est, value_text=fmt.number(est.mean, 2),
                        note=fmt.estimate(est, 4))
        chart = h.grouped_bars([n.replace("_", " ") for n in names], series, values,
                               label="per-category mean per strategy", max_value=1.0, width=1150,
                               height=340, unit="mean score")
    note = _widths_note("categories", CATEGORIES_SHOWN, page_cut)
    return h.section("categories", "Per category", note + chart,
                     intro="One case per category per seed; a category with no case is left out "
                           "of the composite, never counted as zero.")


def _composite_section(strategies: Sequence[_Strategy]) -> str:
    series = [h.Series("composite", COMPOSITE), h.Series("composite guarded", GUARDED)]
    values = {}
    for strategy in strategies:
        for key, name in (("composite", "composite"), ("composite_guarded", "composite guarded")):
            est = strategy.estimate(key)
            if est.mean is not None:
                values[(strategy.name, name)] = _bar(name, est, value_text=fmt.number(est.mean, 3),
                                                     note=fmt.estimate(est, 4))
    chart = h.grouped_bars([s.name for s in strategies], series, values,
                           label="composite against composite guarded", max_value=1.0,
                           width=max(420, 260 * len(strategies)), height=300, unit="score")
    return h.section("composite", "Composite and guarded composite", chart,
                     intro="composite_guarded = composite × efficiency × consistency × canary. "
                           "A large gap means the guards caught something: dumping the corpus, "
                           "brittleness under paraphrase, or a surfaced canary.")


def _guard_section(strategies: Sequence[_Strategy], page_cut: PageCut | None = None) -> str:
    parts = []
    names = ("efficiency", "consistency", "canary")
    if len(strategies) == 1:
        only = strategies[0]
        bars = [_bar(name, only.guard(name), color=GUARD_COLORS[name],
                     value_text=fmt.estimate(only.guard(name), 3)) for name in names]
        parts.append(h.bar_chart(bars, label="guards", max_value=1.0, width=760, unit="multiplier"))
    else:
        series = _strategy_series(strategies)
        values = {(name, s.name): _bar(s.name, s.guard(name),
                                      value_text=fmt.number(s.guard(name).mean, 3))
                  for s in strategies for name in names if s.guard(name).mean is not None}
        parts.append(h.grouped_bars(list(names), series, values, label="guards per strategy",
                                    max_value=1.0, height=280, unit="multiplier"))
    parts.append(_seeds_left_out_note(strategies))
    rows = []
    for strategy in strategies:
        for block in strategy.blocks:
            guards = block.guards
            rows.append((strategy.name, str(block.seed), fmt.number(guards.efficiency, 3),
                         fmt.number(guards.mean_used_chars, 0), fmt.number(guards.consistency, 3),
                         fmt.number(guards.canary, 2), fmt.number(guards.canary_tripped),
                         fmt.number(guards.canary_leak_rate, 3), fmt.number(block.composite, 4),
                         fmt.number(block.composite_guarded, 4)))
    parts.append(h.table(("strategy", "seed", "efficiency", "mean chars used", "consistency",
                          "canary", "tripped", "leak rate", "composite", "guarded"), rows,
                         numeric=(2, 3, 4, 5, 7, 8, 9)))
    templates = [(strategy.name, template, estimate,
                  strategy.summary.guards.disagreements_per_template.get(template))
                 for strategy in strategies
                 for template, estimate in strategy.summary.guards.consistency_per_template.items()]
    if templates:
        parts.append("<h3>Paraphrase agreement per template</h3>" + _widths_note(
            "templates", TEMPLATES_SHOWN, page_cut) + h.table(
            ("strategy", "template", "agreement", "cases it moved"),
            ((name, template, fmt.number(estimate.mean, 3),
              f"{moved[0]} of {moved[1]}" if moved else fmt.DASH)
             for name, template, estimate, moved in templates),
            numeric=(2, 3)))
    key = h.legend([(GUARD_COLORS["efficiency"], "efficiency",
                     "0.5 + 0.5 × (1 − min(1, mean chars used / budget))"),
                    (GUARD_COLORS["consistency"], "consistency",
                     "share of cases whose paraphrase grades the same"),
                    (GUARD_COLORS["canary"], "canary",
                     "0.5 when any pack surfaced the planted canary, else 1")])
    return h.section("guards", "The three guards", key + "".join(parts),
                     intro="Reported beside the composite, never folded into it.")


def _seeds_left_out_note(strategies: Sequence[_Strategy]) -> str:
    """A note when the page draws only the first `SEEDS_DRAWN` seeds of a strategy."""
    cut = [s for s in strategies if s.report.seeds_left_out]
    if not cut:
        return ""
    counts = " and ".join(f"{fmt.count(s.seed_count)} of {h.escape(s.name)}" for s in cut)
    return (f'<p class="note">Per seed, the first {fmt.count(SEEDS_DRAWN)} seeds are drawn '
            f"here, of {counts}; every number and chart over seeds counts all of them, and "
            "the JSON report holds each seed's scores.</p>")


def _seed_section(strategies: Sequence[_Strategy], compared: Comparison | None) -> str:
    parts = [_seeds_left_out_note(strategies)]
    if compared is not None:
        champion, challenger = strategies[0], strategies[1]
        decision = compared.decision
        decide_on = decision.decide_on
        series = [h.Series(f"champion {champion.name}", STRATEGY_COLORS[0]),
                  h.Series(f"challenger {challenger.name}", STRATEGY_COLORS[1])]
        values = {}
        for pair in compared.pairs:
            values[(str(pair.seed), series[0].name)] = h.Bar(
                str(pair.seed), pair.champion, value_text=fmt.number(pair.champion, 3))
            values[(str(pair.seed), series[1].name)] = h.Bar(
                str(pair.seed), pair.challenger, value_text=fmt.number(pair.challenger, 3))
        parts.append(f"<h3>{h.escape(decide_on.replace('_', ' '))} per seed</h3>" + h.grouped_bars(
            [str(p.seed) for p in compared.pairs], series, values,
            label="per-seed scores of champion and challenger",
            max_value=1.0, width=1000, height=300, unit=decide_on.replace("_", " ")))
        verdict = decision.verdict
        band = verdict.band if verdict is not None else None
        mean_diff = verdict.mean_diff if verdict is not None else None
        diffs = [h.Bar(f"seed {p.seed}", p.difference, color=h.GOOD if p.difference >= 0 else h.BAD,
                       value_text=fmt.signed(p.difference, 4),
                       note=f"seed {p.seed}: challenger {fmt.number(p.challenger, 4)} − "
                            f"champion {fmt.number(p.champion, 4)}")
                 for p in compared.pairs]
        rules = []
        if mean_diff is not None:
            rules.append(h.Rule(mean_diff, f"mean {fmt.signed(mean_diff, 4)}", h.ACCENT,
                                dashed=False))
        if band is not None:
            rules.append(h.Rule(band, f"band {fmt.number(band, 4)}", h.BAD))
        parts.append("<h3>Challenger − champion per seed, against the paired band</h3>"
                     + h.diverging_bars(
            diffs, label="per-seed differences and the paired band", rules=rules,
            shade=(-band, band) if band is not None else None,
            shade_label="within ±band: not a win", width=1000, unit="difference"))
        if decision.dethroned is not None:
            outcome = decision.dethroned
            badge = h.badge("dethroned" if outcome else "champion holds",
                            h.GOOD if outcome else h.MUTED)
            parts.append(f'<p>{badge} '
                         f"{h.escape(decision.reason or '')}</p>")
        parts.append('<p class="note">band = max(0.007, 1.96 × standard error of the per-seed '
                     "differences); the challenger dethrones the champion only when the mean "
                     "difference reaches the band.</p>")
    else:
        only = strategies[0]
        series = [h.Series("composite", COMPOSITE), h.Series("composite guarded", GUARDED)]
        values = {}
        for block in only.blocks:
            for key, name in (("composite", "composite"),
                              ("composite_guarded", "composite guarded")):
                score = getattr(block, key)
                values[(str(block.seed), name)] = h.Bar(name, score,
                                                        value_text=fmt.number(score, 3))
        parts.append(h.grouped_bars([str(b.seed) for b in only.blocks], series, values,
                                    label="per-seed scores", max_value=1.0, width=1000, height=280,
                                    unit="score"))
        parts.append('<p class="note">No champion/challenger comparison in this report: '
                     "the paired band is drawn when the ladder compares two strategies.</p>")
    return h.section("seeds", "Per seed", "".join(parts))


def _ledger_number(value: Any) -> str:
    return fmt.number(value, 4) if isinstance(value, (int, float)) else fmt.text(value)


def _merged(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A ledger entry's fields with its decision's and verdict's (older ledgers nest them)."""
    verdict, decision = entry.get("verdict"), entry.get("decision")
    return {**(decision if isinstance(decision, Mapping) else {}),
            **(verdict if isinstance(verdict, Mapping) else {}), **entry}


def _ledger_seed_count(merged: Mapping[str, Any]) -> Any:
    return (merged.get("n") if merged.get("n") is not None
            else len(merged.get("seeds") or []) or "—")


def _ledger_notes(report: RetrievalReport) -> str:
    """What the page leaves out of the ledger, and where all of it is."""
    cut = report.page_cut
    if cut is None or not (cut.ledger_entries or cut.ledger_lists):
        return ""
    where = (f"<code>{h.escape(cut.ledger_command)}</code> lists every entry"
             if cut.ledger_command else "the ladder's ledger file holds every entry")
    notes = ""
    if cut.ledger_entries:
        notes += (f'<p class="note">The newest {fmt.count(len(report.ledger or []))} of '
                  f"{fmt.count(cut.ledger_entries)} ledger entries are drawn and embedded "
                  f"here; {where}.</p>")
    if cut.ledger_lists:
        notes += (f'<p class="note">{fmt.count(cut.ledger_lists)} per-seed lists of the '
                  f"entries embedded here are cut to their first {fmt.count(SEEDS_DRAWN)} "
                  "values (the seeds column counts them all); the ledger file holds them "
                  "whole.</p>")
    return notes


def _ledger_section(report: RetrievalReport) -> str:
    """The ledger's entries as the ladder wrote them (its own format, not a statistic)."""
    entries = report.ledger
    if not entries:
        return ""
    rows = []
    for entry in entries:
        if not isinstance(entry, Mapping):
            continue
        merged = _merged(entry)

        def name(side: str, merged: dict[str, Any] = merged) -> str:
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
        decided = merged.get("decided_at") or merged.get("at") or merged.get("timestamp")
        seed_count = _ledger_seed_count(merged)
        rows.append((h.escape(fmt.when(decided)),
                     h.escape(name("champion")), h.escape(name("challenger")), outcome,
                     h.escape(_ledger_number(merged.get("mean_diff"))),
                     h.escape(_ledger_number(merged.get("band"))),
                     h.escape(seed_count),
                     h.escape(source or "—"),
                     h.escape(merged.get("reason") or "")))
    problem = report.ledger_problem
    warning = f'<p class="alert">{h.escape(problem)}</p>' if problem else ""
    return h.section("ladder", "Ladder history", warning + _ledger_notes(report) + h.table(
        ("decided", "champion", "challenger", "outcome", "mean diff", "band", "seeds",
         "seeds from", "reason"),
        rows, numeric=(4, 5, 6), row_html=True),
        intro="Every decision appended to the ledger, oldest first, with its numbers.")


def enrich(store: Any, report: RetrievalReport | Mapping[str, Any]) -> RetrievalReport:
    """For a run a ladder scored: the ledger, and the decision it took part in with both
    sides' reports (read from the ladder folder named in the run's configuration and
    from the store). Any other report is returned as it is."""
    import msgspec

    typed = as_report(report)
    run = typed.run
    directory = run.config.get("ladder") if run is not None else None
    if not directory or typed.ledger is not None or run is None:
        return typed
    from benchwarden.core.store import StoreError
    from benchwarden.suites.retrieval.ladder import Ladder, LedgerError
    from benchwarden.suites.retrieval.report import build_report

    try:
        entries = Ladder(directory).entries()
    except (LedgerError, OSError) as error:
        return msgspec.structs.replace(typed, ledger_problem=f"ladder history unavailable: {error}")
    changes: dict[str, Any] = {"ledger": [dict(e) for e in entries]}
    for entry in reversed(entries):
        sides = entry.get("champion"), entry.get("challenger")
        champion: Mapping[str, Any] = sides[0] if isinstance(sides[0], Mapping) else {}
        challenger: Mapping[str, Any] = sides[1] if isinstance(sides[1], Mapping) else {}
        if entry.get("kind") != "decision" or run.id not in (champion.get("run_id"),
                                                             challenger.get("run_id")):
            continue
        try:
            changes["comparison"] = comparison(
                build_report(store, str(champion.get("run_id"))),
                build_report(store, str(challenger.get("run_id"))),
                {"dethroned": entry.get("outcome") == "dethroned", "reason": entry.get("reason"),
                 "verdict": entry.get("verdict"), "decide_on": entry.get("decide_on", "composite")})
        except (StoreError, ValueError) as error:
            changes["ledger_problem"] = ("the other side of this decision is not in the store: "
                                         f"{error}")
        break
    return msgspec.structs.replace(typed, **changes)


def _page_side(report: RetrievalReport) -> tuple[RetrievalReport, int]:
    """One strategy's report as the page draws and embeds it: at most `FAILED_CASES_DRAWN`
    failed cases in all (the first seeds' first) and the first `SEEDS_DRAWN` seeds
    (`seeds_left_out` says how many more), every number over seeds as it is; and how many
    of its failed cases the page leaves out."""
    total = sum(len(block.failed_cases) + block.failed_cases_left_out for block in report.seeds)
    drawn_blocks = report.seeds[:SEEDS_DRAWN]
    seeds = [block if len(kept) == len(block.failed_cases)
             else msgspec.structs.replace(block, failed_cases=kept)
             for block, kept in zip(drawn_blocks, first_items(
                 (block.failed_cases for block in drawn_blocks), FAILED_CASES_DRAWN),
                 strict=True)]
    drawn = sum(len(block.failed_cases) for block in seeds)
    left_out = len(report.seeds) - len(seeds)
    if drawn == sum(len(block.failed_cases) for block in report.seeds) and not left_out:
        return report, total - drawn
    return msgspec.structs.replace(report, seeds=seeds,
                                   seeds_left_out=report.seeds_left_out + left_out), total - drawn


def _page_report(report: RetrievalReport) -> tuple[RetrievalReport, int]:
    """What the page draws and embeds: each strategy's report (a comparison holds two, and
    its per-seed pairs are cut to `SEEDS_DRAWN` too) as `_page_side` cuts it, and how many
    failed cases the failed-case section leaves out (of the comparison's two sides when
    there is one: those are the ones drawn)."""
    report, left_out = _page_side(report)
    compared = report.comparison
    if compared is None:
        return report, left_out
    champion, champion_left_out = _page_side(compared.champion)
    challenger, challenger_left_out = _page_side(compared.challenger)
    report = msgspec.structs.replace(report, comparison=msgspec.structs.replace(
        compared, champion=champion, challenger=challenger,
        pairs=compared.pairs[:SEEDS_DRAWN]))
    return report, champion_left_out + challenger_left_out


def _failed_section(strategies: Sequence[_Strategy], left_out: int = 0,
                    run_id: str | None = None) -> str:
    blocks = []
    total = 0
    for strategy in strategies:
        for block in strategy.blocks:
            cases = block.failed_cases
            if not cases:
                continue
            total += len(cases)
            table = h.table(("case", "category", "question", "score", "reason"),
                            ((c.case, c.category, c.question, fmt.number(c.score, 2),
                              c.reason or "") for c in cases),
                            numeric=(3,))
            blocks.append(h.details(f"<strong>{h.escape(strategy.name)}</strong>"
                                    f'<span class="muted">seed {h.escape(block.seed)} · '
                                    f"{len(cases)} cases below 1.0</span>", table))
    if not blocks and not left_out:
        return h.section("failed", "Failed cases", '<p class="note">Every case scored 1.0.</p>')
    note = ""
    if left_out:
        run = f" --run {run_id}" if run_id else ""
        note = (f'<p class="note">{fmt.count(left_out)} more failed cases are neither drawn '
                f"nor embedded in this page (it keeps the first {fmt.count(FAILED_CASES_DRAWN)} "
                "of each strategy, of the seeds it draws): each is a record, and "
                f"<code>benchwarden export --suite retrieval{h.escape(run)} --out cases.jsonl"
                "</code> writes every one.</p>")
    return h.section("failed", f"Failed cases ({total}{' drawn' if left_out else ''})",
                     note + "".join(blocks),
                     intro="Cases that scored below 1.0, with the grader's reason.")


def _run_section(report: RetrievalReport, plain: Mapping[str, Any]) -> str:
    items = [(f"strategy {k}", fmt.number(v) if isinstance(v, (int, float)) else fmt.text(v))
             for k, v in report.strategy.items()]
    items += [(k.replace("_", " "), fmt.number(v) if isinstance(v, (int, float)) else fmt.text(v))
              for k, v in report.settings.items()]
    settings = "<h3>Strategy and settings</h3>" + h.facts(items) if items else ""
    return h.section("run", "Run", h.run_facts(plain) + settings)


def _names_in(report: RetrievalReport) -> Iterator[str]:
    """Every name and free text a report holds, its comparison's sides' included: the
    strategy's description and settings, the run's identity and stamps, the store head,
    the failure, each seed's categories, templates and failed cases (case id, category,
    question, reason), and every string of each ledger entry but its reason (a sentence
    made of these names, clipped inside it)."""
    yield from h.names_in(report.strategy)
    yield from h.names_in(report.settings)
    yield from h.names_in(report.failure)
    for block in (report.run, report.store_head):
        if block is not None:
            yield from h.names_in(msgspec.to_builtins(block))
    for seed in report.seeds:
        yield from seed.category_means
        yield from seed.guards.consistency_per_template
        yield from seed.guards.disagreements_per_template
        for case in seed.failed_cases:
            yield from (case.case, case.category, case.question)
            if case.reason is not None:
                yield case.reason
    if report.summary is not None:
        yield from report.summary.category_means
        yield from report.summary.guards.consistency_per_template
        yield from report.summary.guards.disagreements_per_template
    if report.comparison is not None:
        yield from _names_in(report.comparison.champion)
        yield from _names_in(report.comparison.challenger)
    for entry in report.ledger or ():
        yield from h.names_in({key: value for key, value in entry.items() if key != "reason"})


def _names_clipped(report: RetrievalReport, command: str) -> RetrievalReport:
    """`report` with every name and free text longer than `h.NAME_LIMIT` clipped wherever
    it holds it (as a whole value, a key, or inside a sentence), counted in
    `page_cut.names`; `command` writes them whole."""
    names = list(_names_in(report))
    if max(map(len, names), default=0) <= h.NAME_LIMIT:
        return report
    tree, clipped, _ = h.clip_long_names(report.to_json(), names)
    cut = report.page_cut if report.page_cut is not None else PageCut(command=command)
    # read back field by field (not `from_json`, which would rebuild the comparison's
    # pairs from its decision, uncut)
    typed: RetrievalReport = msgspec.convert(tree, RetrievalReport)
    return msgspec.structs.replace(typed, page_cut=msgspec.structs.replace(cut, names=clipped))


def _lists_cut(tree: Any) -> tuple[Any, int]:
    """`tree` with every list longer than `SEEDS_DRAWN` cut to its first `SEEDS_DRAWN`
    items, and how many lists were cut."""
    if isinstance(tree, Mapping):
        items = {key: _lists_cut(value) for key, value in tree.items()}
        return ({key: value for key, (value, _) in items.items()},
                sum(count for _, count in items.values()))
    if isinstance(tree, list):
        parts = [_lists_cut(item) for item in tree[:SEEDS_DRAWN]]
        return ([item for item, _ in parts],
                sum(count for _, count in parts) + (len(tree) > SEEDS_DRAWN))
    return tree, 0


def _ledger_cut(report: RetrievalReport, command: str) -> RetrievalReport:
    """`report` with its ledger cut to the newest `LEDGER_ENTRIES_DRAWN` entries and
    their per-seed lists to their first `SEEDS_DRAWN` values (an entry whose seeds are
    cut keeps their count as `n`), said in `page_cut`."""
    entries = report.ledger
    if not entries:
        return report
    kept, lists = [], 0
    for entry in entries[-LEDGER_ENTRIES_DRAWN:]:
        cut_entry, count = _lists_cut(entry)
        if count:
            lists += count
            seeds = _ledger_seed_count(_merged(entry))
            if _ledger_seed_count(_merged(cut_entry)) != seeds:
                cut_entry["n"] = seeds
        kept.append(cut_entry)
    if len(kept) == len(entries) and not lists:
        return report
    directory = report.run.config.get("ladder") if report.run is not None else None
    before = report.page_cut if report.page_cut is not None else PageCut(command=command)
    cut = msgspec.structs.replace(
        before, ledger_entries=len(entries) if len(kept) < len(entries) else None,
        ledger_lists=lists or None,
        ledger_command=(f"benchwarden ladder show --ladder {shlex.quote(str(directory))}"
                        if directory else None))
    return msgspec.structs.replace(report, ledger=kept, page_cut=cut)


def _seed_widths_cut(block: SeedBlock, categories: set[str], templates: set[str]) -> SeedBlock:
    """`block` with only the `categories` and `templates` the page keeps."""
    guards = block.guards
    return msgspec.structs.replace(
        block, category_means={k: v for k, v in block.category_means.items() if k in categories},
        guards=msgspec.structs.replace(
            guards, consistency_per_template={
                k: v for k, v in guards.consistency_per_template.items() if k in templates},
            disagreements_per_template={
                k: v for k, v in guards.disagreements_per_template.items() if k in templates}))


def _side_widths_cut(report: RetrievalReport) -> tuple[RetrievalReport, int, int]:
    """One strategy's report with at most `CATEGORIES_SHOWN` categories and
    `TEMPLATES_SHOWN` templates (those `names_shown` picks from its summary), in its
    summary and in each seed; and how many categories and templates it has when it is
    cut (0 when not). A category is one the summary measured or a seed names beyond the
    suite's own `CATEGORIES` (each seed lists those, empty when it has no case of them)."""
    summary = report.summary
    if summary is None:
        return report, 0, 0
    guards = summary.guards
    every_category = set(summary.category_means)
    every_template = set(guards.consistency_per_template) | set(
        guards.disagreements_per_template)
    for block in report.seeds:
        every_category.update(name for name in block.category_means if name not in CATEGORIES)
        every_template.update(block.guards.consistency_per_template)
        every_template.update(block.guards.disagreements_per_template)
    if len(every_category) <= CATEGORIES_SHOWN and len(every_template) <= TEMPLATES_SHOWN:
        return report, 0, 0
    categories = set(names_shown(summary.category_means, CATEGORIES_SHOWN))
    templates = set(names_shown(guards.consistency_per_template, TEMPLATES_SHOWN))
    summary = msgspec.structs.replace(
        summary, category_means={k: v for k, v in summary.category_means.items()
                                 if k in categories},
        guards=msgspec.structs.replace(
            guards, consistency_per_template={
                k: v for k, v in guards.consistency_per_template.items() if k in templates},
            disagreements_per_template={
                k: v for k, v in guards.disagreements_per_template.items() if k in templates}))
    seeds = [_seed_widths_cut(block, categories, templates) for block in report.seeds]
    return (msgspec.structs.replace(report, summary=summary, seeds=seeds),
            len(every_category) if len(every_category) > CATEGORIES_SHOWN else 0,
            len(every_template) if len(every_template) > TEMPLATES_SHOWN else 0)


def _widths_cut(report: RetrievalReport, command: str) -> RetrievalReport:
    """`report` and its comparison's sides each cut by `_side_widths_cut`, said in
    `page_cut` (the most categories and templates of a strategy cut)."""
    report, categories, templates = _side_widths_cut(report)
    compared = report.comparison
    if compared is not None:
        champion, *champion_counts = _side_widths_cut(compared.champion)
        challenger, *challenger_counts = _side_widths_cut(compared.challenger)
        report = msgspec.structs.replace(report, comparison=msgspec.structs.replace(
            compared, champion=champion, challenger=challenger))
        categories = max(categories, champion_counts[0], challenger_counts[0])
        templates = max(templates, champion_counts[1], challenger_counts[1])
    if not categories and not templates:
        return report
    before = report.page_cut if report.page_cut is not None else PageCut(command=command)
    return msgspec.structs.replace(report, page_cut=msgspec.structs.replace(
        before, categories=categories or None, templates=templates or None))


def whole_report_command(report: RetrievalReport) -> str:
    """The command that writes the whole report as JSON, for the page that shows part of
    it (its names quoted for a shell, whole)."""
    if report.run is not None and report.run.id:
        return (f"benchwarden show {shlex.quote(report.run.id)} --json FILE "
                "(with this page's --store)")
    return "the command that wrote this page, with --json FILE"


def _page_parts(whole: RetrievalReport) -> tuple[RetrievalReport, int]:
    """`page_copy(whole)`, and how many failed cases the failed-case section leaves out."""
    command = whole_report_command(whole)
    report, left_out = _page_report(whole)
    report = _widths_cut(_ledger_cut(report, command), command)
    return _names_clipped(report, command), left_out


def page_copy(report: RetrievalReport | Mapping[str, Any]) -> RetrievalReport:
    """What the page draws and embeds: the report cut to the seeds, failed cases, ledger
    entries, categories and templates the page draws (`_page_report`, `_ledger_cut`,
    `_widths_cut`), every long name and text clipped (`_names_clipped`)."""
    return _page_parts(as_report(report))[0]


def render_html(report: RetrievalReport | Mapping[str, Any]) -> str:
    whole = as_report(report)
    report, left_out = _page_parts(whole)
    compared = report.comparison
    if compared is not None:
        strategies = [_Strategy(compared.champion, "champion"),
                      _Strategy(compared.challenger, "challenger")]
        main = _Strategy(report, strategies[1].name) if report.seeds else strategies[1]
    else:
        main = _Strategy(report, "strategy")
        strategies = [main]
    plain = report.to_json()
    subtitle = " · ".join(x for x in (
        " vs ".join(s.name for s in strategies), f"bench {report.bench_version or fmt.DASH}",
        report.run.id if report.run is not None else "") if x)
    sections = [
        ("summary", "summary", _summary_section(main, report.page_cut)),
        ("categories", "categories", _category_section(strategies, report.page_cut)),
        ("composite", "composite", _composite_section(strategies)),
        ("guards", "guards", _guard_section(strategies, report.page_cut)),
        ("seeds", "per seed", _seed_section(strategies, compared)),
    ]
    ledger = _ledger_section(report)
    if ledger:
        sections.append(("ladder", "ladder", ledger))
    sections.append(("failed", "failed cases", _failed_section(
        strategies, left_out, whole.run.id if whole.run is not None else None)))
    sections.append(("run", "run", _run_section(report, plain)))
    return h.page(title="retrieval report", subtitle=subtitle, report=plain, sections=sections)
