"""`benchwarden arms run | report | compare` (the arms suite's commands): a thin layer over
benchwarden.suites.arms.

Exit codes: 0 when the run completed without harness errors, 1 when any trial hit a
harness error (driver, server or environment failure; never an agent outcome), 2 on
a usage or configuration error (a --url with user:key@ included, or `--isolation bwrap`,
the default, on a machine where bubblewrap is missing or cannot create a sandbox), 130
interrupted (the run ends "interrupted"; the same command again runs only the missing trials).
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

from benchwarden.core import secrets
from benchwarden.core.commandline import (
    ConfigError,
    any_model_option,
    api_key_env_option,
    config_errors,
    executor_option,
    executor_or_exit,
    html_option,
    isolation_option,
    json_report_option,
    model_option,
    open_store_or_exit,
    refuse_url_with_credentials,
    release_executor,
    store_option,
    write_html_report,
)
from benchwarden.core.errors import EXIT_FAIL, RunInterrupted
from benchwarden.core.interrupts import asyncio_handles_sigint
from benchwarden.core.progress import progress_bar
from benchwarden.core.records import DEFAULT_WEIGHTS, TokenWeights
from benchwarden.core.reports import console, write_json
from benchwarden.suites.arms.tasks import ALL_PAIRS_UP_TO_ARMS


def _weights(text: str | None) -> TokenWeights:
    if not text:
        return DEFAULT_WEIGHTS
    try:
        return TokenWeights.parse(text)
    except ValueError as error:
        raise ConfigError(str(error)) from None


def weights_option(function: Any) -> Any:
    """`--weights`: one wording in `arms report` and `arms compare`."""
    return click.option(
        "--weights", default=None, metavar="WEIGHTS",
        help="Cost-equivalent token weights, e.g. "
             "fresh=1,cache_creation=1.25,cache_read=0.1,output=5 [default: those].")(function)


@click.group()
def arms() -> None:
    """Compare agent conditions (tool interfaces, prompts, models) on a task suite."""


def _checked_model(url: str, model: str | None, any_model: bool, api_key_env: str | None) -> str:
    """The model the openai driver sends: `--model` when the server lists it (or
    `--any-model`), else the first listed; refused before anything is written."""
    from benchwarden.targets.models import choose_model, listing_failed
    from benchwarden.targets.openai_client import ChatClient, normalise_base_url

    try:  # before anything runs: each trial failed on it as a harness error
        normalise_base_url(url)
    except ValueError as error:
        raise ConfigError(f"--url: {error}") from None
    if model is not None and any_model:
        return model  # nothing to check: the user vouched for it

    async def listed() -> list[str]:
        key = os.environ.get(api_key_env) if api_key_env else None
        async with ChatClient(url, api_key=key) as client:
            return await client.list_models()

    try:
        with asyncio_handles_sigint():
            models = asyncio.run(listed())
    except Exception as error:  # unreachable server, bad answer
        raise listing_failed(url, str(error)) from None
    return choose_model(models, model, any_model=any_model, url=url)


@arms.command()
@click.option("--suite", "suite_spec", default="tracker", show_default=True,
              help="A built-in suite (tracker) or package.module:attribute.")
@click.option("--arm", "arm_names", required=True, help="Arm names, comma-separated, or all.")
@click.option("--task", "task_names", required=True, help="Task ids, comma-separated, or all.")
@click.option("--trials", type=int, default=3, show_default=True,
              help="Samples wanted per cell; only the missing ones run (deepen with a larger N).")
@click.option("--driver", type=click.Choice(["openai", "command"]), required=True,
              help="openai: a tool-calling loop against --url; command: your agent program.")
@click.option("--url", default=None, callback=refuse_url_with_credentials,
              help="OpenAI-compatible base URL (openai driver); never with user:key@.")
@model_option
@any_model_option
@api_key_env_option
@click.option("--command", "agent_command", default=None,
              help="The external agent program and its arguments (command driver).")
@click.option("--turn-cap", type=int, default=40, show_default=True,
              help="Model turns before an episode is stopped and recorded as confused.")
@click.option("--wall-clock", type=float, default=300.0, show_default=True,
              help="Seconds before an episode is killed and recorded as hung.")
@click.option("--command-timeout", type=float, default=60.0, show_default=True,
              help="Seconds one shell command may run.")
@click.option("--max-tokens", type=click.IntRange(min=1), default=1024, show_default=True,
              help="max_tokens of each model call (openai driver).")
@click.option("--seed", type=int, default=None, help="Sent to the model; also orders trials.")
@executor_option
@isolation_option
@json_report_option
@html_option
@store_option
@config_errors
def run(suite_spec: str, arm_names: str, task_names: str, trials: int, driver: str,
        url: str | None, model: str | None, any_model: bool, api_key_env: str | None,
        agent_command: str | None,
        turn_cap: int, wall_clock: float, command_timeout: float, max_tokens: int,
        seed: int | None, executor_spec: str | None, isolation: str | None, json_path: str | None,
        html_path: str | None, store_location: str) -> None:
    """Run the missing trials of each (arm, task) cell and append their records."""
    from benchwarden.suites.arms.agents import CommandDriver, Limits, OpenAIDriver
    from benchwarden.suites.arms.config import select, validate_run
    from benchwarden.suites.arms.driver import run_arms
    from benchwarden.suites.arms.report import build_report, render_tally
    from benchwarden.suites.arms.tasks import load_suite

    try:
        suite = load_suite(suite_spec)
        arm_list = select(arm_names, [a.name for a in suite.arms], "arms")
        task_list = select(task_names, [t.id for t in suite.tasks], "tasks")
    except ValueError as error:
        raise ConfigError(str(error)) from None
    isolation = isolation or "bwrap"
    try:  # the same check run_arms makes, before anything is started or written
        validate_run(trials, Limits(turn_cap=turn_cap, wall_clock=wall_clock,
                                    command_timeout=command_timeout), isolation)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    if api_key_env and api_key_env not in os.environ:
        raise ConfigError(f"--api-key-env {api_key_env}: that environment variable is not set")
    if api_key_env:
        # records are written here, whichever process ran the trial: scrub here
        secrets.remember(os.environ[api_key_env],
                         source=f"the key in {api_key_env} (--api-key-env)")
    agent_driver: Any
    if driver == "openai":
        if not url:
            raise ConfigError("the openai driver needs --url")
        if agent_command:
            raise ConfigError("--command belongs to the command driver")
        agent_driver = OpenAIDriver(url, _checked_model(url, model, any_model, api_key_env),
                                    api_key_env=api_key_env, max_tokens=max_tokens)
    else:
        if not agent_command:
            raise ConfigError("the command driver needs --command '...'")
        if url or model or any_model:
            raise ConfigError("--url/--model/--any-model belong to the openai driver")
        function_arms = [a for a in arm_list if suite.arm(a).channel == "functions"]
        if function_arms:
            raise ConfigError(f"the command driver runs shell and mcp arms only; "
                              f"{', '.join(function_arms)} uses function tools")
        agent_driver = CommandDriver(agent_command)
    executor = executor_or_exit(executor_spec)

    out = console()
    if isolation == "none":
        click.echo("warning: --isolation none: agent commands and the trial's server run "
                   "WITHOUT a boundary (they can write, read and connect wherever you can)",
                   err=True)
    limits = Limits(turn_cap=turn_cap, wall_clock=wall_clock, command_timeout=command_timeout)
    with open_store_or_exit(store_location, create=True) as store, progress_bar(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[outcomes]}"), TimeElapsedColumn(),
            console=console(stderr=True), transient=False) as progress:
        bars: dict[tuple[str, str], Any] = {}
        counts: dict[tuple[str, str], dict[str, int]] = {}

        def on_start(plans: list[Any]) -> None:
            for plan in plans:
                key = (plan.arm, plan.task)
                counts[key] = {}
                bars[key] = progress.add_task(
                    f"{plan.arm}/{plan.task} (had {plan.before})", total=len(plan.trials),
                    outcomes="" if plan.trials else "already deep enough")

        def on_result(result: Any) -> None:
            key = (result.arm, result.task)
            word = result.kind if result.record is None else (
                result.record.outcome if result.record.outcome == "pass"
                else result.record.payload.get("failure") or "fail")
            counts[key][word] = counts[key].get(word, 0) + 1
            progress.update(bars[key], advance=1,
                            outcomes=" ".join(f"{k} {v}" for k, v in sorted(counts[key].items())))

        interrupted = False
        try:
            tally = run_arms(store, suite, suite_spec, arms=arm_list, tasks=task_list,
                             trials=trials, driver=agent_driver, limits=limits, seed=seed,
                             executor=executor, on_start=on_start, on_result=on_result,
                             isolation=isolation)
        except (RunInterrupted, KeyboardInterrupt):
            interrupted = True
            raise
        finally:
            release_executor(executor, interrupted=interrupted)
        progress.stop()
        render_tally(tally.to_json_dict(), out,
                     where=f"benchwarden show {shlex.quote(tally.run_id)} --json FILE "
                           f"--store {shlex.quote(str(store_location))}")
        out.print(f"run {tally.run_id} recorded in {store_location}; "
                  f"`benchwarden arms report --store {store_location}` shows the views")
        if json_path or html_path:
            report = build_report(store, tally.run_id)
        if json_path:
            out.print(f"report written to {write_json(json_path, report)}")
    if html_path:
        write_html_report(store_location, report, html_path)
    if tally.harness_errors:
        sys.exit(EXIT_FAIL)


@arms.command()
@store_option
@click.option("--suite", "scope", default=None,
              help="Which suite's records (default: the suite of the latest arms run).")
@weights_option
@click.option("--floor", type=click.IntRange(min=1), default=3, show_default=True,
              help="Samples that make a cell covered.")
@click.option("--baseline", default=None, metavar="ARM",
              help="Compare every arm with ARM, its pairs first (by default every pair "
                   f"up to {ALL_PAIRS_UP_TO_ARMS} arms, past that each arm with the first "
                   "listed).")
@json_report_option
@config_errors
def report(store_location: str, scope: str | None, weights: str | None, floor: int,
           baseline: str | None, json_path: str | None) -> None:
    """Render the views from the store alone (no server)."""
    from benchwarden.suites.arms.report import build_scope_report, render_terminal

    table = _weights(weights)
    with open_store_or_exit(store_location, create=False) as store:
        built = build_scope_report(store, scope, table, floor, baseline)
    render_terminal(built, console())
    if json_path:
        click.echo(f"report written to {write_json(json_path, built)}")


@arms.command()
@click.argument("arm_a")
@click.argument("arm_b")
@store_option
@click.option("--suite", "scope", default=None,
              help="Which suite's records (default: the suite of the latest arms run).")
@weights_option
@click.option("--floor", type=click.IntRange(min=1), default=3, show_default=True,
              help="Samples each arm needs in a task for the task to be paired.")
@json_report_option
@config_errors
def compare(arm_a: str, arm_b: str, store_location: str, scope: str | None,
            weights: str | None, floor: int, json_path: str | None) -> None:
    """Paired comparison of ARM_B − ARM_A over the tasks both covered."""
    from benchwarden.suites.arms.report import compare_in_scope, render_comparison

    if arm_a == arm_b:
        raise ConfigError("compare two different arms")
    table = _weights(weights)
    with open_store_or_exit(store_location, create=False) as store:
        found_scope, known, result = compare_in_scope(store, scope, arm_a, arm_b, table, floor)
    for name in (arm_a, arm_b):
        if name not in known:
            raise ConfigError(f"arm {name!r} has no records in suite {found_scope!r}; "
                              f"arms: {', '.join(known) or 'none'}")
    render_comparison(result, console())
    if json_path:
        click.echo(f"comparison written to {write_json(json_path, result)}")
