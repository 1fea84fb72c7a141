"""The retrieval report: rebuilt from the store alone, rendered for a terminal.

`build_report(store, run_id)` regroups a run's records by seed and scores them with
`scoring` (pure), so a report can always be recomputed from what was recorded.
Its JSON carries `bench_version` "2", one block per seed (category means, composite,
guards, guarded composite, failed cases) and a summary (mean and SE over seeds).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Mapping

from rich.console import Console
from rich.table import Table

from benchwarden.core.reports import envelope, store_head_block, verdict_text
from benchwarden.core.store import Store
from benchwarden.core.verdicts import Verdict
from benchwarden.suites.retrieval.corpus import CATEGORIES
from benchwarden.suites.retrieval.driver import FAILURE_TASK, SUITE
from benchwarden.suites.retrieval.scoring import (
    BENCH_VERSION, CaseOutcome, normalise_report, run_seeds, score_seed)


def build_report(store: Store, run_id: str) -> dict[str, Any]:
    info = store.run_info(run_id)
    run = info.run
    if run.suite != SUITE:
        raise ValueError(f"run {run_id} is a {run.suite} run, not retrieval")
    settings = dict(run.config.get("settings") or {})
    budget = int(settings.get("budget_chars", 2000))
    by_seed: dict[int, list[CaseOutcome]] = defaultdict(list)
    failure: dict[str, Any] | None = None
    for record in store.records(run_id=run.run_id):
        if record.task == FAILURE_TASK:
            failure = failure or dict(record.payload)
            continue
        by_seed[record.trial].append(CaseOutcome.from_payload(record.trial, record.task,
                                                              record.payload))
    if failure is None and info.end is not None and info.end.summary.get("failure"):
        failure = dict(info.end.summary["failure"])
    blocks = [score_seed(seed, by_seed[seed], budget) for seed in sorted(by_seed)]
    summary = run_seeds(blocks) if blocks else None
    if failure:
        verdict = Verdict.failed(f"strategy {run.config.get('strategy', {}).get('name')} "
                                 f"failed on seed {failure.get('seed')}: {failure.get('reason')}")
    elif not blocks:
        verdict = Verdict.nothing_measured("no seed was scored")
    else:
        composite = summary["composite"]["mean"]  # type: ignore[index]
        guarded = summary["composite_guarded"]["mean"]  # type: ignore[index]
        verdict = Verdict.info(f"composite {composite:.4f}, guarded {guarded:.4f} "
                               f"over {len(blocks)} seed(s)")
    return envelope(suite=SUITE, bench_version=run.bench_version, run=run, end=info.end,
                    verdict=verdict, store_head=store_head_block(store), body={
                        "strategy": dict(run.config.get("strategy") or {}),
                        "settings": settings,
                        "seeds": blocks,
                        "summary": summary,
                        "failure": failure,
                    })


def _number(value: Any, digits: int = 4) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{float(value):.{digits}f}"


def _estimate(estimate: Mapping[str, Any] | None) -> str:
    if not estimate or estimate.get("mean") is None:
        return "—"
    if estimate.get("se") is None:
        return _number(estimate["mean"])
    return f"{estimate['mean']:.4f} ± {estimate['se']:.4f}"


def render_terminal(report: Mapping[str, Any], console: Console) -> None:
    report = normalise_report(report)
    strategy = (report.get("strategy") or {}).get("name", "?")
    settings = report.get("settings") or {}
    console.print(f"[bold]retrieval[/bold] · strategy [bold]{strategy}[/bold] · "
                  f"bench_version {report['bench_version']} · limit {settings.get('limit', '—')} · "
                  f"budget {settings.get('budget_chars', '—')} chars")
    blocks = report["seeds"]
    if report.get("legacy_guards"):
        console.print("[yellow]version-1 report: no guard block; guards read as 1.0 and the "
                      "guarded composite falls back to the composite[/yellow]")
    if blocks:
        categories = Table(title="per-category means", title_justify="left")
        categories.add_column("category")
        shown = blocks if len(blocks) <= 6 else []
        for block in shown:
            categories.add_column(f"s{block['seed']}" if len(str(block["seed"])) < 6
                                  else f"#{blocks.index(block) + 1}", justify="right")
        categories.add_column("mean", justify="right")
        names = [n for n in CATEGORIES if any(n in b["category_means"] for b in blocks)]
        for name in names:
            values = [b["category_means"].get(name) for b in blocks]
            present = [v for v in values if v is not None]
            mean = sum(present) / len(present) if present else None
            categories.add_row(name, *(_number(b["category_means"].get(name), 2) for b in shown),
                               _number(mean, 2))
        console.print(categories)

        scores = Table(title="composite and guards", title_justify="left")
        for column in ("seed", "composite", "effic.", "consist.", "canary", "trip",
                       "leak", "guarded"):
            scores.add_column(column, justify="right")
        for block in blocks:
            guards = block["guards"]
            scores.add_row(str(block["seed"]), _number(block["composite"]),
                           _number(guards["efficiency"]), _number(guards["consistency"]),
                           _number(guards["canary"], 1), _number(guards["canary_tripped"]),
                           _number(guards["canary_leak_rate"]), _number(block["composite_guarded"]))
        console.print(scores)
        summary = report.get("summary")
        if summary and len(blocks) > 1:
            overall = Table(title=f"over {len(blocks)} seeds", title_justify="left")
            for column in ("measure", "mean", "SE", "95% interval"):
                overall.add_column(column, justify="right" if column != "measure" else "left")
            guards = summary["guards"]
            for label, estimate in (("composite", summary["composite"]),
                                    ("composite_guarded", summary["composite_guarded"]),
                                    ("efficiency", guards["efficiency"]),
                                    ("consistency", guards["consistency"]),
                                    ("canary", guards["canary"]),
                                    ("canary_leak_rate", guards["canary_leak_rate"])):
                interval = ("—" if estimate.get("low") is None
                            else f"{estimate['low']:.4f} – {estimate['high']:.4f}")
                overall.add_row(label, _number(estimate.get("mean")), _number(estimate.get("se")),
                                interval, style="bold" if label.startswith("composite") else None)
            overall.add_row("canary tripped", f"{guards['canary_tripped_seeds']} of {len(blocks)} seeds",
                            "", "")
            console.print(overall)

        templates: dict[str, list[float]] = defaultdict(list)
        for block in blocks:
            for template, value in (block["guards"].get("consistency_per_template") or {}).items():
                if value is not None:
                    templates[template].append(value)
        if templates:
            agreement = Table(title="paraphrase agreement per template", title_justify="left")
            agreement.add_column("template")
            agreement.add_column("agreement", justify="right")
            for template, values in templates.items():
                agreement.add_row(template, _number(sum(values) / len(values)))
            console.print(agreement)

        failed = [(b["seed"], case) for b in blocks for case in b["failed_cases"]]
        if failed:
            table = Table(title=f"failed cases ({len(failed)})", title_justify="left")
            for column in ("seed", "case", "score", "reason"):
                table.add_column(column)
            for seed, case in failed:
                table.add_row(str(seed), case["case"], _number(case["score"], 2),
                              str(case.get("reason") or ""))
            console.print(table)
    if report.get("failure"):
        failure = report["failure"]
        console.print(f"[bold red]run failed[/bold red] on seed {failure.get('seed')}: "
                      f"{failure.get('reason')}")
    if report.get("verdict"):
        console.print(verdict_text(Verdict(report["verdict"]["kind"], report["verdict"]["reason"])))


__all__ = ["BENCH_VERSION", "build_report", "render_terminal"]
