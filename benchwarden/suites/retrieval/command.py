"""`benchwarden retrieval`: generate the corpus, score a strategy, compare two.

Thin: options are parsed here, the work is done by `benchwarden.suites.retrieval`.
`--sandbox` runs strategies in a child process inside the isolation `--isolation`
names: `bwrap` (the default; a missing bubblewrap is a one-line exit-2 error, never a
silent fallback) or `none` (no boundary at all: unsafe, for machines without bwrap).
A signal stops `run` with exit 130 and the `--resume` command; the stopped run keeps
no run end (retrieval resumes a run in place, and a run has one end), so `runs` lists
it as incomplete until it is resumed.
"""

from __future__ import annotations

import json
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape
from rich.table import Table

from benchwarden.core.commandline import (
    ConfigError,
    config_errors,
    executor_option,
    executor_or_exit,
    html_option,
    isolation_option,
    json_report_option,
    open_store_or_exit,
    print_traceback,
    release_executor,
    require_isolation,
    store_option,
    traceback_option,
    write_html_report,
)
from benchwarden.core.errors import RunInterrupted
from benchwarden.core.provenance import new_run_id
from benchwarden.core.reports import console, read_json, write_json
from benchwarden.suites.retrieval.config import LARGEST_SEED, MAX_SEEDS
from benchwarden.suites.retrieval.corpus import CASES_PER_SEED, generate
from benchwarden.suites.retrieval.driver import RunSettings, resume_run, run_strategy, start_seeds
from benchwarden.suites.retrieval.sandbox import SandboxLimits
from benchwarden.suites.retrieval.scoring import DECIDE_ON, decide
from benchwarden.suites.retrieval.strategies import (
    StrategyLoadError,
    libraries_to_preload,
    parse_strategy,
)

if TYPE_CHECKING:
    from benchwarden.suites.retrieval.report import RetrievalReport

MIN_PAIRED_SEEDS = 2  # a paired verdict's standard error needs two differences


def parse_seeds(text: str) -> list[int]:
    """`1-6`, `1,2,3` or a mix (`1-3,9`); each seed a non-negative integer, no repeats."""
    seeds: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        low, dash, high = part.partition("-")
        try:
            if dash:
                first, last = int(low), int(high)
                if first > last:
                    raise ValueError
                span = range(first, last + 1)
            else:
                span = range(int(part), int(part) + 1)
        except ValueError:
            raise ConfigError(f"seeds {text!r}: {part!r} is not N or N-M with N <= M") from None
        if len(span) + len(seeds) > MAX_SEEDS:
            raise ConfigError(f"seeds {text!r}: more than {MAX_SEEDS} seeds")
        for seed in span:
            if seed < 0:
                raise ConfigError(f"seeds {text!r}: seeds are non-negative")
            if seed > LARGEST_SEED:
                raise ConfigError(f"seeds {text!r}: seeds are at most {LARGEST_SEED} (the "
                                  "store keeps each as a 64-bit integer)")
            if seed in seeds:
                raise ConfigError(f"seeds {text!r}: seed {seed} is listed twice")
            seeds.append(seed)
    if not seeds:
        raise ConfigError("no seeds given (use e.g. --seeds 1-6 or --seeds 1,2,3)")
    return seeds


def _settings(limit: int, budget_chars: int, sandbox: bool,
              isolation: str | None = None) -> RunSettings:
    if isolation is not None and not sandbox:
        raise ConfigError("--isolation applies to sandboxed runs: add --sandbox")
    mode = require_isolation(isolation or "bwrap") if sandbox else "bwrap"
    if sandbox and mode == "none":
        console(stderr=True).print("warning: --isolation none: the strategy runs WITHOUT a "
                                   "boundary (unsafe)", markup=False)
    settings = RunSettings(limit=limit, budget_chars=budget_chars, sandbox=sandbox,
                           sandbox_limits=SandboxLimits(), isolation=mode)
    settings.validate()  # the same check the Python API (run_strategy) makes
    return settings


def _parse_or_exit(strategy_text: str) -> Any:
    try:
        return parse_strategy(strategy_text)
    except StrategyLoadError as error:
        raise ConfigError(str(error)) from None


def _case_progress(label: str) -> Any:
    """A progress bar over cases. rich's progress machinery, like the report module, is
    imported on use rather than with this command: a `local:N` run forks its workers
    first and imports them while the workers score."""
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    from benchwarden.core.progress import progress_bar

    return progress_bar(TextColumn(f"[bold]{label}[/bold]"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("cases"), TimeElapsedColumn(), console=console(stderr=True),
                        transient=True)


def score_strategy(store_location: str, strategy_text: str, seeds: list[int],
                   settings: RunSettings, executor_spec: str | None = None) -> RetrievalReport:
    """Run one strategy with a progress bar over seeds x cases; return its report.

    With a pool (`--executor local:N`), the seeds are submitted as soon as its workers
    are forked, before this process opens the store, records the run's start and imports
    its report: that one-core work overlaps the workers' scoring instead of preceding
    it. Once every seed is recorded the workers are let go without waiting for them to
    end (they end while the report is built and printed)."""
    spec = _parse_or_exit(strategy_text)
    total = len(seeds) * CASES_PER_SEED
    # a sandboxed strategy imports its library in its own child, never in a worker
    executor = executor_or_exit(
        executor_spec, preload=() if settings.sandbox else libraries_to_preload(spec))
    run_id = new_run_id("retrieval")
    finished = False
    try:
        started = (start_seeds(spec, seeds, settings, executor)
                   if executor is not None and not settings.sandbox else None)
        # imported now, not with this command: a pool's workers are forked and busy
        from benchwarden.suites.retrieval.report import build_report

        with open_store_or_exit(store_location, create=True) as store, \
                _case_progress(spec.name) as progress:
            task = progress.add_task("scoring", total=total)
            run_strategy(store, spec, seeds, settings, executor=executor, run_id=run_id,
                         on_progress=lambda n: progress.advance(task, n), started=started)
            if executor is not None:
                executor.close(wait=False)  # every result is read and recorded
            report = build_report(store, run_id)
        finished = True
        return report
    except KeyboardInterrupt:  # a signal: the run keeps no end, so it stays resumable
        raise RunInterrupted(_resume_line(run_id)) from None
    finally:
        # on any way out but the normal one (a signal, a store that refused, an error),
        # seeds still running are stopped rather than waited for: nobody reads them
        release_executor(executor, interrupted=not finished)


def pack_options(function: Any) -> Any:
    """What every scoring command asks the same way: pack size, and how strategies run."""
    for option in reversed([
        click.option("--limit", type=int, default=10, show_default=True, help="Items per pack."),
        click.option("--budget-chars", type=int, default=2000, show_default=True,
                     help="Characters per pack."),
        click.option("--sandbox/--no-sandbox", default=False, show_default=True,
                     help="Run strategies in a child process inside the boundary (--isolation)."),
        isolation_option]):
        function = option(function)
    return function


@click.group()
def retrieval() -> None:
    """Score retrieval strategies on a seeded knowledge base, with guards."""


@retrieval.command()
@click.option("--seed", type=int, required=True, help="Seed of the corpus (non-negative).")
@click.option("--json", "as_json", is_flag=True, help="Print the corpus and answer key as JSON.")
@config_errors
def gen(seed: int, as_json: bool) -> None:
    """Print the generated sessions and the full answer key for a seed."""
    try:
        corpus = generate(seed)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    if as_json:
        click.echo(json.dumps(corpus.to_json_dict(), indent=2, ensure_ascii=False))
        return
    out = console()
    for session in corpus.sessions:
        out.print(f"[bold]{session.title}[/bold]")
        for line in session.text.split("\n"):
            out.print(f"  {line}", markup=False)
    out.print(f"[bold]answer key, seed {seed}[/bold]")
    for case in corpus.cases:
        out.print(f"  [bold]{case.id}[/bold]  {escape(case.question)}")
        wanted = [("expected", case.expected or "none (the answer is not in the notes)")]
        if case.required:
            wanted = [("required", ", ".join(case.required))]
        for label, values in (*wanted, ("forbidden", ", ".join(case.forbidden)),
                              ("stale", ", ".join(case.stale)), ("payload", case.payload or "")):
            if values:
                out.print(f"      {label}: {escape(values)}")
    out.print(f"[bold]canary[/bold] {escape(corpus.canary)} in "
              f"{corpus.sessions[corpus.canary_line.session].title}: "
              f"{escape(corpus.canary_line.text)}")


@retrieval.command()
@click.option("--strategy", "strategy_text", default=None,
              help="A built-in (substring, fts5, bm25, dump, vouch) or path/to/file.py:object.")
@click.option("--seeds", "seeds_text", default="1-6", show_default=True, help="e.g. 1-6 or 1,2,3.")
@pack_options
@traceback_option
@executor_option
@click.option("--resume", "resume_id", default=None, metavar="RUN",
              help="Finish a killed run (its id): score only the seeds it has no records for.")
@store_option
@json_report_option
@html_option
@config_errors
@click.pass_context
def run(ctx: click.Context, strategy_text: str | None, seeds_text: str, limit: int,
        budget_chars: int, sandbox: bool, isolation: str | None, show_traceback: bool,
        executor_spec: str, resume_id: str | None, store_location: str,
        json_path: str | None, html_path: str | None) -> None:
    """Score one strategy: category means, composite, guards, guarded composite."""
    if resume_id:
        from click.core import ParameterSource

        # what the run measures is stored with it; silently ignoring a new value would
        # let a user believe it applied
        given = [param.opts[0] for param in ctx.command.params
                 if param.name in ("strategy_text", "seeds_text", "limit", "budget_chars",
                                   "sandbox", "isolation")
                 and ctx.get_parameter_source(param.name) is ParameterSource.COMMANDLINE]
        if given:
            raise ConfigError(f"--resume continues a run as it was configured; drop "
                              f"{', '.join(given)}")
        report = _resume(store_location, resume_id, executor_spec)
    else:
        if not strategy_text:
            raise ConfigError("give --strategy NAME|path/to/file.py:object (or --resume RUN)")
        seeds = parse_seeds(seeds_text)
        report = score_strategy(store_location, strategy_text, seeds,
                                _settings(limit, budget_chars, sandbox, isolation), executor_spec)
    from benchwarden.suites.retrieval.report import render_terminal

    render_terminal(report, console())
    if report.run is not None:
        click.echo(f"run {report.run.id} recorded in {store_location}")
    if report.failure and show_traceback:
        print_traceback(report.failure)
    if json_path:
        click.echo(f"report written to {write_json(json_path, report)}")
    if html_path:
        write_html_report(store_location, report, html_path)
    if report.failure or not report.seeds:
        raise SystemExit(1)


def _resume_line(run_id: str) -> str:
    return (f"run {run_id} stopped; the seeds it finished are kept; resume with "
            f"`benchwarden retrieval run --resume {run_id}`")


def _resume(store_location: str, run_id: str, executor_spec: str | None) -> RetrievalReport:
    executor = executor_or_exit(executor_spec)
    interrupted = False
    progress = _case_progress("resuming")
    try:
        with open_store_or_exit(store_location, create=False, read_only=False) as store, progress:
            task = progress.add_task("scoring", total=None)
            try:
                finished, missing = resume_run(store, run_id, executor=executor,
                                               on_progress=lambda n: progress.advance(task, n))
            except (ValueError, StrategyLoadError) as error:
                raise ConfigError(str(error)) from None
            console(stderr=True).print(f"resumed {finished}: scored seeds {missing or 'none'}")
            from benchwarden.suites.retrieval.report import build_report

            return build_report(store, finished)
    except KeyboardInterrupt:
        interrupted = True
        raise RunInterrupted(_resume_line(run_id)) from None
    finally:
        release_executor(executor, interrupted=interrupted)


def _refuse_other_seeds(label: str, report: RetrievalReport, seeds: list[int] | None) -> None:
    have = sorted(block.seed for block in report.seeds)
    if seeds is not None and not report.failure and have != sorted(seeds):
        raise ConfigError(f"refusing to compare: the {label} report covers seeds {have}, "
                          f"not {sorted(seeds)}")


def _read_side(text: str, label: str) -> RetrievalReport:
    try:
        from benchwarden.suites.retrieval.report import RetrievalReport

        return RetrievalReport.from_json(read_json(text), scored=True)
    except ValueError as error:
        raise ConfigError(f"{label} {error}") from None


def _side(text: str, label: str, store_location: str, seeds: list[int] | None,
          settings: RunSettings) -> RetrievalReport:
    if text.endswith(".json"):
        return _read_side(text, label)
    if seeds is None:
        raise ConfigError(f"{label} {text!r} is a strategy: give --seeds to score it on")
    return score_strategy(store_location, text, seeds, settings)  # typed: not normalised again


@retrieval.command()
@click.option("--champion", required=True, help="Strategy name, file.py:object, or report.json.")
@click.option("--challenger", required=True, help="Strategy name, file.py:object, or report.json.")
@click.option("--seeds", "seeds_text", default=None,
              help="Seeds to score strategies on (default 1-6; reports bring their own).")
@click.option("--decide-on", type=click.Choice(DECIDE_ON), default="composite", show_default=True,
              help="The score that decides: composite, or composite_guarded "
                   "(composite times the guards).")
@pack_options
@store_option
@json_report_option
@config_errors
def compare(champion: str, challenger: str, seeds_text: str | None, decide_on: str, limit: int,
            budget_chars: int, sandbox: bool, isolation: str | None, store_location: str,
            json_path: str | None) -> None:
    """Paired verdict, challenger minus champion, over the same seeds."""
    any_strategy = not (champion.endswith(".json") and challenger.endswith(".json"))
    default_seeds = [1, 2, 3, 4, 5, 6] if any_strategy else None
    seeds = parse_seeds(seeds_text) if seeds_text else default_seeds
    if seeds is not None and len(seeds) < MIN_PAIRED_SEEDS:
        # refused before either side is scored: nothing is written to the store
        raise ConfigError(f"--seeds {seeds_text}: a paired verdict needs at least "
                          f"{MIN_PAIRED_SEEDS} seeds (one seed gives no standard error)")
    settings = _settings(limit, budget_chars, sandbox, isolation)
    sides = (("champion", champion), ("challenger", challenger))
    # everything that can be refused is refused before either strategy is scored (a
    # scored side is a run in the store): reports read, strategies loaded
    read = {label: _read_side(text, label) for label, text in sides if text.endswith(".json")}
    for _, text in sides:
        if not text.endswith(".json"):
            _parse_or_exit(text)
    for label, report in read.items():
        _refuse_other_seeds(label, report, seeds)
    old = read.get("champion") or _side(champion, "champion", store_location, seeds, settings)
    new = read.get("challenger") or _side(challenger, "challenger", store_location, seeds,
                                          settings)
    for label, report in (("champion", old), ("challenger", new)):
        _refuse_other_seeds(label, report, seeds)
    try:
        decision = decide(old, new, decide_on)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    out = console()
    for (label, text), side in zip(sides, (old, new), strict=True):
        if side.run is not None and label not in read:
            out.print(f"{label} {text}: run {side.run.id} recorded in {store_location}",
                      markup=False)
    from benchwarden.suites.retrieval import report as retrieval_report

    table = Table(title=f"paired verdict on {decide_on} (challenger − champion)",
                  title_justify="left", caption_justify="left",
                  caption=retrieval_report.seeds_not_shown(
                      len(decision.seeds), "the verdict below",
                      "each side's report (benchwarden show RUN --json FILE) holds their "
                      "scores"))
    for column in ("seed", "champion", "challenger", "difference"):
        table.add_column(column, justify="right")
    for seed, a, b in islice(zip(decision.seeds, decision.champion_scores,
                                 decision.challenger_scores or [None] * len(decision.seeds),
                                 strict=False), retrieval_report.SEEDS_SHOWN):
        table.add_row(str(seed), f"{a:.4f}", "—" if b is None else f"{b:.4f}",
                      "—" if b is None else f"{b - a:+.4f}")
    out.print(table)
    if decision.verdict is not None:
        v = decision.verdict
        out.print(f"mean_diff {v.mean_diff:+.4f}  se {v.se:.4f}  band {v.band:.4f}  "
                  f"dethroned {'yes' if v.dethroned else 'no'}  (n = {v.n})")
    out.print(decision.reason, markup=False)
    if json_path:
        body = {"suite": "retrieval", "bench_version": old.bench_version,
                "champion": old.strategy.get("name", champion),
                "challenger": new.strategy.get("name", challenger),
                **decision.to_json_dict()}
        click.echo(f"decision written to {write_json(Path(json_path), body)}")
