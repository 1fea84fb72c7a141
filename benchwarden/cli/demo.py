"""`benchwarden demo`: the contamination suite against a real engine, with no server of your own.

It makes (first use) or reuses the local llama.cpp engine, starts it on a free loopback
port with several parallel slots, runs the contamination suite against it, prints the
report, writes the JSON to `~/.benchwarden/reports/demo-latest.json` (or `--json`) and the
HTML page beside it (same name, `.html`), and exits with the verdict's code.

Invariant: the server this command starts is stopped before it returns, whatever
happens (verdict, error, Ctrl-C, SIGTERM or SIGHUP: `cli.main` turns each into an
interrupt that unwinds through the `finally` below); if this process is killed
outright, the server is told to stop by the kernel (parent-death signal).
"""

from __future__ import annotations

from pathlib import Path

import click

from benchwarden.cli.common import (EXIT_FAIL, EXIT_OK, ConfigError, open_store_or_exit,
                                    store_option, write_html_report)
from benchwarden.cli.engine import echo_progress
from benchwarden.core.paths import reports_dir
from benchwarden.core.reports import console as make_console
from benchwarden.core.reports import write_json
from benchwarden.targets import engine as local_engine

DEMO_REPORT_NAME = "demo-latest.json"


def parse_concurrency(ctx: click.Context, param: click.Parameter, value: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(part) for part in value.split(",") if part.strip())
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers like 2,4,8, got {value!r}") from None
    if not levels or any(level < 2 for level in levels):
        raise click.BadParameter("each concurrency level must be at least 2 (a rung needs company)")
    return levels


@click.command()
@click.option("--probes", default=4, show_default=True, type=click.IntRange(min=2),
              help="Probe prompts per leg.")
@click.option("--concurrency", default="2,4,8", show_default=True, callback=parse_concurrency,
              help="Concurrency rungs, comma-separated.")
@click.option("--max-tokens", default=64, show_default=True, type=click.IntRange(min=2),
              help="Tokens per reply (more tokens, more chances to diverge, longer run).")
@click.option("--min-completion-tokens", default=8, show_default=True, type=click.IntRange(min=1),
              help="Replies shorter than this are unmeasured. Lower than the suite's 16 because "
                   "SmolLM2-135M often answers in one short sentence.")
@click.option("--slots", default=4, show_default=True, type=click.IntRange(min=1),
              help="Parallel slots of the engine (-np).")
@click.option("--seed", default=None, type=int, help="Seed for the canaries [default: random, recorded].")
@store_option
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              help=f"Where to write the JSON report [default: ~/.benchwarden/reports/{DEMO_REPORT_NAME}].")
@click.pass_context
def demo(ctx: click.Context, probes: int, concurrency: tuple[int, ...], max_tokens: int,
         min_completion_tokens: int, slots: int,
         seed: int | None, store_location: str, json_path: str | None) -> None:
    """Run the contamination suite against a local llama.cpp engine (built on first use)."""
    try:
        from benchwarden.suites.contamination.driver import (ContaminationConfig, TargetUnreachable,
                                                             run_contamination)
        from benchwarden.suites.contamination.report import render_terminal
    except ImportError as error:
        raise ConfigError(f"the contamination suite is not available: {error}") from None
    target = Path(json_path).expanduser() if json_path else reports_dir() / DEMO_REPORT_NAME
    engine: local_engine.EngineProcess | None = None
    try:
        install = local_engine.ensure_engine(echo_progress)
        engine = local_engine.start_engine(install, slots=slots, context=2048 * slots, die_with_parent=True,
                                           log_path=local_engine.state_path().parent / "demo-server.log")
        echo_progress(f"llama-server ready at {engine.api_url} (pid {engine.pid}, slots {slots}, "
                      f"threads {engine.threads}, model {engine.model})")
        config = ContaminationConfig(url=engine.api_url, model=engine.model, concurrency=concurrency,
                                     probes=probes, max_tokens=max_tokens,
                                     min_completion_tokens=min_completion_tokens, seed=seed, preset="llamacpp")
        with open_store_or_exit(store_location, create=True) as store:
            report = run_contamination(config, store, progress=True, console=make_console(stderr=True))
    except (local_engine.EngineError, ValueError) as error:
        raise ConfigError(str(error)) from None
    except TargetUnreachable as error:
        raise ConfigError(f"the local engine did not answer: {error}") from None
    finally:
        if engine is not None:
            engine.stop()
            echo_progress(f"llama-server stopped (pid {engine.pid})")
    render_terminal(report, make_console())
    written = write_json(target, report)
    click.echo(f"report written to {written}")
    write_html_report(store_location, report, str(written.with_suffix(".html")))
    ctx.exit(EXIT_FAIL if report.get("verdict", {}).get("kind") == "fail" else EXIT_OK)
