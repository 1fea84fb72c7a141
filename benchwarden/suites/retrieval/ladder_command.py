"""`benchwarden ladder`: challenge the champion on public seeds; show the leaderboard.

Exit codes of `challenge`: 0 the challenger dethroned the champion, 3 the champion
held (including a challenger that failed in the sandbox), 1 an error (the champion
could not be scored), 2 bad options (including `--isolation bwrap` where bubblewrap
is missing: never a silent fallback).
"""

from __future__ import annotations

import datetime as dt
import re

import click
from rich.progress import BarColumn, MofNCompleteColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from benchwarden.core import formatting
from benchwarden.core.commandline import (
    STORE_METAVAR,
    ConfigError,
    config_errors,
    isolation_option,
    open_store_or_exit,
    print_traceback,
    require_isolation,
    traceback_option,
)
from benchwarden.core.progress import progress_bar
from benchwarden.core.reports import console
from benchwarden.suites.retrieval import report as retrieval_report
from benchwarden.suites.retrieval.config import MAX_SEEDS, RunSettings
from benchwarden.suites.retrieval.corpus import CASES_PER_SEED
from benchwarden.suites.retrieval.ladder import (
    DEFAULT_CHAMPION,
    DEFAULT_SEED_COUNT,
    Ladder,
    LedgerError,
    default_base,
    derive_seeds,
    leaderboard,
)
from benchwarden.suites.retrieval.ladder import challenge as run_challenge
from benchwarden.suites.retrieval.sandbox import SandboxLimits
from benchwarden.suites.retrieval.scoring import DECIDE_ON
from benchwarden.suites.retrieval.strategies import StrategyLoadError, parse_strategy

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _is_calendar_date(text: str) -> bool:
    try:
        dt.date.fromisoformat(text)
    except ValueError:
        return False
    return True


@click.group()
def ladder() -> None:
    """King of the hill: challengers against the champion, every decision in a ledger."""


@ladder.command()
@click.option("--challenger", required=True, help="path/to/file.py:object (or a built-in name).")
@click.option("--ladder", "ladder_dir", default="ladder", show_default=True,
              type=click.Path(file_okay=False), help="Folder of the ledger and champions.")
@click.option("--base", default=None,
              help="Public value the seeds derive from (default: HEAD sha).")
@click.option("--date", default=None, help="YYYY-MM-DD (default: today, UTC).")
@click.option("--seeds", "seed_count", type=int, default=DEFAULT_SEED_COUNT, show_default=True,
              help="How many seeds to derive.")
@click.option("--decide-on", type=click.Choice(DECIDE_ON), default="composite", show_default=True,
              help="The score that decides: composite, or composite_guarded "
                   "(composite times the guards).")
@click.option("--initial-champion", default=DEFAULT_CHAMPION, show_default=True,
              help="Champion of a new ladder (a built-in or file.py:object).")
@click.option("--store", "store_location", default=None, metavar=STORE_METAVAR,
              help="SQLite file path or postgresql:// URL of the store for the runs "
                   "[default: store.sqlite inside the ladder folder].")
@click.option("--wall-seconds", type=float, default=SandboxLimits.wall_seconds, show_default=True,
              help="Wall-clock seconds a strategy may take on one seed.")
@click.option("--cpu-seconds", type=int, default=SandboxLimits.cpu_seconds, show_default=True,
              help="CPU seconds a strategy may use on one seed.")
@click.option("--memory-mb", type=int, default=SandboxLimits.memory_mb, show_default=True,
              help="Address space a strategy may use, in MiB.")
@click.option("--open-files", type=int, default=SandboxLimits.open_files, show_default=True,
              help="Files a strategy may hold open at once.")
@click.option("--file-size-mb", type=int, default=SandboxLimits.file_size_mb, show_default=True,
              help="Largest file a strategy may write in its scratch folder.")
@isolation_option
@traceback_option
@config_errors
def challenge(challenger: str, ladder_dir: str, base: str | None, date: str | None,
              seed_count: int, decide_on: str, initial_champion: str, store_location: str | None,
              wall_seconds: float, cpu_seconds: int, memory_mb: int, open_files: int,
              file_size_mb: int, isolation: str | None, show_traceback: bool) -> None:
    """Score champion and challenger (sandboxed) on derived seeds and decide."""
    isolation = require_isolation(isolation or "bwrap")
    base = base or default_base()
    if not base:
        raise ConfigError("no --base given and no git commit found to derive seeds from")
    date = date or dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    if not _DATE.match(date) or not _is_calendar_date(date):
        raise ConfigError(f"--date {date!r} is not a YYYY-MM-DD date")
    to_load = [("--challenger", challenger)]
    if not Ladder(ladder_dir).ledger_path.exists():  # a new ladder starts with this champion
        to_load.append(("--initial-champion", initial_champion))
    for option, text in to_load:
        try:  # refused before the ladder folder or its store is made
            parse_strategy(text)
        except StrategyLoadError as error:
            raise ConfigError(f"{option}: {error}") from None
    if seed_count < 2:
        raise ConfigError("--seeds must be at least 2: one seed gives no standard error")
    if seed_count > MAX_SEEDS:
        raise ConfigError(f"--seeds {seed_count}: more than {MAX_SEEDS} seeds")
    limits = SandboxLimits(wall_seconds=wall_seconds, cpu_seconds=cpu_seconds,
                           memory_mb=memory_mb, open_files=open_files,
                           file_size_mb=file_size_mb)
    # the check every run makes, here before the ladder folder, its genesis or its store
    # is written (a NaN limit was refused only when the first run's start was stored)
    RunSettings(sandbox=True, sandbox_limits=limits, isolation=isolation).validate()
    board = Ladder(ladder_dir)
    location = store_location or str(board.directory / "store.sqlite")
    progress = progress_bar(TextColumn("[bold]{task.description}[/bold]"), BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(),
                        console=console(stderr=True), transient=True)
    tasks: dict[str, TaskID] = {}

    def advance(role: str, count: int) -> None:
        if role not in tasks:
            tasks[role] = progress.add_task(role, total=seed_count * CASES_PER_SEED)
        progress.advance(tasks[role], count)

    try:
        with open_store_or_exit(location, create=True,
                                own_default=store_location is None) as store, progress:
            result = run_challenge(board, challenger, store=store, base=base, date=date,
                                   seed_count=seed_count, decide_on=decide_on, limits=limits,
                                   initial_champion=initial_champion, isolation=isolation,
                                   on_progress=advance)
    except (StrategyLoadError, LedgerError) as error:
        raise ConfigError(str(error)) from None
    out = console()
    entry = result.entry
    seeds = entry["seeds"]
    if isolation == "none":
        console(stderr=True).print("warning: --isolation none: strategies ran WITHOUT a "
                                   "boundary (unsafe); the ledger records it", markup=False)
    for role, failure in result.failures.items():
        console(stderr=True).print(f"{role} failed on seed {failure.get('seed')}: "
                                   f"{failure.get('reason')}", markup=False)
        if show_traceback:
            print_traceback(failure)
    out.print(f"seeds: {len(seeds)} from sha256('{base}:{date}:i'), deciding on {decide_on}")
    table = Table(title_justify="left", caption_justify="left",
                  caption=retrieval_report.seeds_not_shown(
                      len(seeds), "the verdict below",
                      "the ledger entry holds each side's scores"))
    for column in ("seed", "champion", "challenger"):
        table.add_column(column, justify="right")
    champion_scores = dict(zip(entry["champion"]["scored_seeds"], entry["champion"][decide_on],
                               strict=False))
    challenger_scores = dict(zip(entry["challenger"]["scored_seeds"],
                                 entry["challenger"][decide_on], strict=False))
    for seed in seeds[:retrieval_report.SEEDS_SHOWN]:
        row = [champion_scores.get(seed), challenger_scores.get(seed)]
        table.add_row(str(seed), *("—" if v is None else f"{v:.4f}" for v in row))
    out.print(table)
    verdict = entry.get("verdict")
    if verdict:
        out.print(f"mean_diff {verdict['mean_diff']:+.4f}  se {verdict['se']:.4f}  "
                  f"band {verdict['band']:.4f}  "
                  f"dethroned {'yes' if verdict['dethroned'] else 'no'}")
    style = {"dethroned": "bold green", "held": "bold yellow", "error": "bold red"}[result.outcome]
    out.print(f"[{style}]{result.outcome.upper()}[/{style}] ", end="")
    out.print(result.reason, markup=False)
    if result.outcome == "dethroned":
        promoted = entry["promoted"]
        out.print(f"new champion: {promoted['name']} ({promoted.get('path') or 'built-in'})",
                  markup=False)
    out.print(f"ledger entry {entry['seq']} appended to {board.ledger_path}", markup=False)
    raise SystemExit(result.exit_code)


@ladder.command()
@click.option("--ladder", "ladder_dir", default="ladder", show_default=True,
              type=click.Path(file_okay=False), help="Folder of the ledger and champions.")
@config_errors
def show(ladder_dir: str) -> None:
    """Print the leaderboard and the decisions from the ledger (chain checked)."""
    board = Ladder(ladder_dir)
    try:
        entries = board.entries()
        reign_rows = leaderboard(entries)
    except LedgerError as error:
        raise ConfigError(str(error)) from None
    if not entries:
        raise ConfigError(f"{board.ledger_path} has no entries yet; run `benchwarden ladder "
                          "challenge` first")
    out = console()
    out.print(f"ledger {board.ledger_path}: {len(entries)} entries, chain intact", markup=False)
    reigns = Table(title="leaderboard (latest champion last)", title_justify="left")
    for column in ("#", "champion", "since", "decided on", "mean", "margin", "defences"):
        reigns.add_column(column)
    for number, reign in enumerate(reign_rows, start=1):
        reigns.add_row(str(number), reign["champion"],
                       reign["date"] or formatting.when(reign["since"]),
                       reign["decide_on"] or "initial",
                       "—" if reign["mean"] is None else f"{reign['mean']:.4f}",
                       "—" if reign["margin"] is None else f"{reign['margin']:+.4f}",
                       str(reign["defences"]))
    out.print(reigns)
    decisions = Table(title="decisions", title_justify="left")
    for column in ("seq", "date", "challenger", "champion", "on", "mean_diff", "band", "outcome"):
        decisions.add_column(column)
    for entry in entries:
        if entry.get("kind") != "decision":
            continue
        verdict = entry.get("verdict") or {}
        outcome = entry["outcome"]
        if outcome == "held" and entry["challenger"].get("failure"):
            outcome = "held (challenger failed)"
        decisions.add_row(str(entry["seq"]), entry["date"], entry["challenger"]["name"],
                          entry["champion"]["name"], entry["decide_on"],
                          ("—" if verdict.get("mean_diff") is None
                           else f"{verdict['mean_diff']:+.4f}"),
                          "—" if verdict.get("band") is None else f"{verdict['band']:.4f}", outcome)
    out.print(decisions)


__all__ = ["challenge", "derive_seeds", "ladder", "show"]
