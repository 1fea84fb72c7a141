"""The arms report: recomputed from the store alone, rendered for a terminal or as JSON.

A report covers a suite's scope (every record of every run of that suite, because
cells deepen across runs), not only one run; the run it is built for contributes its
tally (recorded, invalid, harness errors, samples before → after per cell).
Empty groups print as a dash, never as 0.
"""

from __future__ import annotations

from typing import Any, Mapping

from rich.console import Console
from rich.table import Table

from benchwarden.core.records import DEFAULT_WEIGHTS, TokenWeights
from benchwarden.core.reports import dash_if_empty, envelope, store_head_block, verdict_text
from benchwarden.core.store import Store, StoreUsageError
from benchwarden.core.verdicts import Verdict
from benchwarden.suites.arms.model import FLOOR
from benchwarden.suites.arms.trial import SUITE_NAME

DASH = "—"


def build_report(store: Store, run_id: str, weights: TokenWeights = DEFAULT_WEIGHTS,
                 floor: int = FLOOR) -> dict[str, Any]:
    """The report of the scope a run belongs to, with that run's tally."""
    info = store.run_info(run_id)
    if info.run.suite != SUITE_NAME:
        raise ValueError(f"run {run_id} is a {info.run.suite} run, not an arms run")
    return _report(store, str(info.run.config.get("scope", "")), info, weights, floor)


def build_scope_report(store: Store, scope: str | None = None,
                       weights: TokenWeights = DEFAULT_WEIGHTS,
                       floor: int = FLOOR) -> dict[str, Any]:
    """The report of a suite's scope (default: the scope of the latest arms run)."""
    runs = store.runs(SUITE_NAME)
    if scope is None:
        if not runs:
            raise StoreUsageError(f"no arms runs in {store.location}")
        scope = str(runs[-1].run.config.get("scope", ""))
    mine = [info for info in runs if info.run.config.get("scope") == scope]
    if not mine and not store.records(suite=SUITE_NAME, scope=scope):
        known = sorted({str(i.run.config.get("scope")) for i in runs})
        raise StoreUsageError(f"no arms records for suite {scope!r} in {store.location}"
                         + (f" (suites: {', '.join(known)})" if known else ""))
    return _report(store, scope, mine[-1] if mine else None, weights, floor)


def _report(store: Store, scope: str, info: Any, weights: TokenWeights,
            floor: int) -> dict[str, Any]:
    from benchwarden.suites.arms import views  # scipy: only when a report is built

    records = store.records(suite=SUITE_NAME, scope=scope)
    configs = [i.run.config for i in store.runs(SUITE_NAME) if i.run.config.get("scope") == scope]
    arms, tasks, tiers = views.arms_and_tasks(records, configs)
    counts = views.coverage(records, arms, tasks, floor)
    covered = sum(row["covered"] for row in counts.values())
    cells = sum(row["cells"] for row in counts.values())
    versions = sorted({str(r.payload.get("bench_version")) for r in records
                       if r.payload.get("bench_version")})
    if not records:
        verdict = Verdict.nothing_measured(f"no samples recorded for suite {scope!r}")
    else:
        verdict = Verdict.info(
            f"{len(records)} samples over {len(arms)} arms × {len(tasks)} tasks; "
            f"{covered} of {cells} cells covered (≥ {floor} samples)"
            + (f"; mixed bench versions {versions}: compare with care" if len(versions) > 1 else ""))
    bench_version = info.run.bench_version if info is not None else (versions[-1] if versions else "")
    body = {
        "scope": scope,
        "floor": floor,
        "weights": {"fresh_input": weights.fresh_input, "cache_creation": weights.cache_creation,
                    "cache_read": weights.cache_read, "output": weights.output},
        "arms": arms,
        "tasks": tasks,
        "tiers": tiers,
        "samples": len(records),
        "headline": views.headline(records, arms, tasks, weights, floor),
        "coverage": counts,
        "per_tier": views.per_tier(records, arms, tiers, weights),
        "per_component": views.per_component(records, arms, weights),
        "failure_tags": views.failure_tags(records, arms),
        "comparisons": [views.compare(records, a, b, weights, floor)
                        for a, b in views.all_pairs(arms)],
        "tally": dict(info.end.summary) if info is not None and info.end is not None else None,
        "runs": [i.run.run_id for i in store.runs(SUITE_NAME)
                 if i.run.config.get("scope") == scope],
    }
    return envelope(suite=SUITE_NAME, bench_version=bench_version,
                    run=info.run if info is not None else None,
                    end=info.end if info is not None else None, verdict=verdict, body=body,
                    store_head=store_head_block(store))


# -- terminal ------------------------------------------------------------------

def _rate(estimate: Mapping[str, Any] | None) -> str:
    if not estimate or estimate.get("mean") is None:
        return DASH
    text = f"{100 * estimate['mean']:.0f}%"
    if estimate.get("low") is not None:
        text += f" [{100 * estimate['low']:.0f}–{100 * estimate['high']:.0f}]"
    return text


def _mean(estimate: Mapping[str, Any] | None, digits: int = 0) -> str:
    if not estimate or estimate.get("mean") is None:
        return DASH
    text = f"{estimate['mean']:,.{digits}f}"
    if estimate.get("se") is not None:
        text += f" ± {estimate['se']:,.{digits}f}"
    return text


def _bootstrap(estimate: Mapping[str, Any] | None) -> str:
    if not estimate or estimate.get("mean") is None:
        return DASH
    text = f"{estimate['mean']:,.0f}"
    if estimate.get("low") is not None:
        text += f" [{estimate['low']:,.0f}–{estimate['high']:,.0f}]"
    return text


def _signed(value: float | None, digits: int, percent: bool = False) -> str:
    if value is None:
        return DASH
    scale = 100 if percent else 1
    suffix = " pp" if percent else ""
    return f"{scale * value:+,.{digits}f}{suffix}"


def _interval(row: Mapping[str, Any], digits: int, percent: bool = False) -> str:
    if row.get("low") is None:
        return DASH
    scale = 100 if percent else 1
    return f"[{scale * row['low']:+,.{digits}f}, {scale * row['high']:+,.{digits}f}]"


COMPONENTS = ("fresh_input", "cache_creation", "cache_read", "output")


def render_terminal(report: Mapping[str, Any], console: Console) -> None:
    verdict = report.get("verdict")
    console.print(f"[bold]arms[/bold] suite [bold]{report.get('scope')}[/bold] "
                  f"({report.get('bench_version')}), floor {report.get('floor')} samples per cell")
    if verdict:
        console.print(verdict_text(Verdict(verdict["kind"], verdict["reason"])))
    weights = report.get("weights", {})
    console.print("cost-equivalent weights: " + ", ".join(f"{k}={v:g}" for k, v in weights.items()))

    table = Table(title="headline per arm (mean ± SE clustered by task; success with Wilson 95 % CI)")
    for column in ("arm", "samples", "success", "cost-eq tokens", "per task [BCa 95 %]",
                   "raw tokens", "turns",
                   "duration s", "covered/partial/missing", "imputed $"):
        table.add_column(column, justify="left" if column == "arm" else "right")
    for row in report.get("headline", []):
        cov = row["coverage"]
        table.add_row(row["arm"], str(row["samples"]), _rate(row["success"]),
                      _mean(row["cost_equivalent"]), _bootstrap(row.get("cost_equivalent_per_task")),
                      _mean(row["raw_tokens"]),
                      _mean(row["turns"], 1), _mean(row["duration_s"], 1),
                      f"{cov['covered']}/{cov['partial']}/{cov['missing']} of {cov['cells']}",
                      _mean(row["imputed_cost_usd"], 4))
    console.print(table)

    tiers = Table(title="per tier")
    for column in ("arm", "tier", "samples", "success", "cost-eq tokens"):
        tiers.add_column(column, justify="left" if column in ("arm", "tier") else "right")
    for row in report.get("per_tier", []):
        tiers.add_row(row["arm"], row["tier"], str(row["samples"]) if row["samples"] else DASH,
                      _rate(row["success"]), _mean(row["cost_equivalent"]))
    console.print(tiers)

    components = Table(title="per token component (mean per sample ± SE; weighted mean)")
    components.add_column("arm")
    for name in COMPONENTS:
        components.add_column(name.replace("_", " "), justify="right")
    for row in report.get("per_component", []):
        cells = []
        for name in COMPONENTS:
            weighted = row.get(f"{name}_weighted")
            cells.append(_mean(row[name]) + ("" if weighted is None else f" ({weighted:,.0f})"))
        components.add_row(row["arm"], *cells)
    console.print(components)

    tags = Table(title="outcomes and failure tags")
    for column in ("arm", "samples", "pass", "incorrect", "confused", "hung", "denied calls"):
        tags.add_column(column, justify="left" if column == "arm" else "right")
    for row in report.get("failure_tags", []):
        tags.add_row(row["arm"], str(row["samples"]) if row["samples"] else DASH,
                     *(dash_if_empty(row[k]) for k in ("pass", "incorrect", "confused", "hung",
                                                       "denied_calls")))
    console.print(tags)

    for comparison in report.get("comparisons", []):
        render_comparison(comparison, console)

    tally = report.get("tally")
    if tally:
        render_tally(tally, console)


def render_comparison(comparison: Mapping[str, Any], console: Console) -> None:
    success = comparison["success_difference"]
    cost = comparison["cost_equivalent_difference"]
    table = Table(title=f"paired: {comparison['b']} − {comparison['a']} over "
                        f"{len(comparison['tasks'])} tasks both covered "
                        f"(≥ {comparison['floor']} samples each)")
    for column in ("measure", comparison["a"], comparison["b"], "difference", "95 % CI",
                   "p", "MDE"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    mde_success = success.get("mde")
    if mde_success is None:
        mde_success = success.get("mde_binomial")
    table.add_row("success", _pct(comparison["success_a"]), _pct(comparison["success_b"]),
                  _signed(success["mean_diff"], 1, True), _interval(success, 1, True),
                  DASH if success["p_value"] is None else f"{success['p_value']:.3f}",
                  DASH if mde_success is None else f"{100 * mde_success:.1f} pp")
    table.add_row("cost-eq tokens", dash_if_empty(comparison["cost_a"], "{:,.0f}"),
                  dash_if_empty(comparison["cost_b"], "{:,.0f}"),
                  _signed(cost["mean_diff"], 0), _interval(cost, 0),
                  DASH if cost["p_value"] is None else f"{cost['p_value']:.3f}",
                  DASH if cost["mde"] is None else f"{cost['mde']:,.0f}")
    console.print(table)
    if not comparison["tasks"]:
        console.print(f"  no task is covered by both arms yet; run more trials "
                      f"(--trials {comparison['floor']})")


def _pct(value: float | None) -> str:
    return DASH if value is None else f"{100 * value:.0f}%"


def render_tally(tally: Mapping[str, Any], console: Console) -> None:
    table = Table(title=f"run tally: {tally['recorded']} recorded, {tally['invalid']} invalid "
                        f"(isolation leaks), {tally['harness_errors']} harness errors")
    for column in ("arm", "task", "samples before → after", "pass", "fail", "invalid",
                   "harness errors", "floor"):
        table.add_column(column, justify="left" if column in ("arm", "task") else "right")
    for cell in tally.get("cells", []):
        table.add_row(cell["arm"], cell["task"], f"{cell['before']} → {cell['after']}",
                      str(cell["passed"]), str(cell["failed"]), str(cell["invalid"]),
                      str(cell["harness_errors"]), "reached" if cell["covered"] else "below")
    console.print(table)
    for problem in tally.get("problems", []):
        console.print(f"  [yellow]{problem}[/yellow]")
    if tally.get("floor_reached"):
        console.print(f"every cell reached the floor of {tally['floor']} samples")
    else:
        below = sum(1 for c in tally.get("cells", []) if not c["covered"])
        console.print(f"[bold]{below} cells are below the floor of {tally['floor']} samples[/bold]: "
                      "run again with --trials to deepen them")
