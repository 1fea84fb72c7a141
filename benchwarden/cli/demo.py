"""`benchwarden demo`: the contamination suite against a real engine, with no server of your own.

It makes (first use) or reuses the local llama.cpp engine, starts it on a free loopback
port with several parallel slots, runs the contamination suite against it, prints the
report, writes the JSON to `~/.benchwarden/reports/demo-latest.json` (or `--json`) and the
HTML page beside it (same name, `.html`), and exits with the verdict's code.

The suite is reached through the registry (`get_suite("contamination").command()`), run
with the same arguments a user would type: `cli/` imports no suite, and the demo's
options are the shared ones of `core.commandline`, so they read as the suite's do.

Invariant: the server this command starts is stopped before it returns, whatever
happens (verdict, error, Ctrl-C, SIGTERM or SIGHUP: `cli.main` turns each into an
interrupt that unwinds through the `finally` below); if this process is killed
outright, the server is told to stop by the kernel (parent-death signal).
"""

from __future__ import annotations

from pathlib import Path

import click

from benchwarden.cli.common import ConfigError, store_option
from benchwarden.cli.engine import echo_progress, slots_option
from benchwarden.core.commandline import (
    canary_seed_option,
    concurrency_option,
    max_tokens_option,
    min_completion_tokens_option,
    probes_option,
)
from benchwarden.core.paths import reports_dir
from benchwarden.core.suite import get_suite
from benchwarden.targets import engine as local_engine

DEMO_REPORT_NAME = "demo-latest.json"
DEMO_SUITE = "contamination"
# SmolLM2-135M often answers in one short sentence: the suite's 16-token floor would
# leave most of its replies unmeasured.
DEMO_MIN_COMPLETION_TOKENS = 8


def suite_arguments(*, url: str, model: str, concurrency: tuple[int, ...], probes: int,
                    max_tokens: int, min_completion_tokens: int, seed: int | None,
                    store_location: str, json_path: Path) -> list[str]:
    """The command line of the suite's own command for this demo (as a user types it)."""
    arguments = ["--url", url, "--model", model, "--preset", "llamacpp",
                 "--concurrency", ",".join(str(level) for level in concurrency),
                 "--probes", str(probes), "--max-tokens", str(max_tokens),
                 "--min-completion-tokens", str(min_completion_tokens),
                 "--store", store_location, "--json", str(json_path),
                 "--html", str(json_path.with_suffix(".html"))]
    if seed is not None:
        arguments += ["--seed", str(seed)]
    return arguments


@click.command()
@probes_option()
@concurrency_option()
@max_tokens_option(default=64)
@min_completion_tokens_option(default=DEMO_MIN_COMPLETION_TOKENS)
@slots_option
@canary_seed_option
@store_option
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              metavar="FILE",
              help=f"Where to write the JSON report [default: ~/.benchwarden/reports/"
                   f"{DEMO_REPORT_NAME}].")
def demo(probes: int, concurrency: tuple[int, ...], max_tokens: int,
         min_completion_tokens: int, slots: int, seed: int | None, store_location: str,
         json_path: str | None) -> None:
    """Run the contamination suite against a local llama.cpp engine (built on first use).

    Fewer tokens (64) and a lower --min-completion-tokens (8) than the suite's defaults:
    the small model often answers in one short sentence.
    """
    command = get_suite(DEMO_SUITE).command(DEMO_SUITE)  # a one-line error if unavailable
    target = Path(json_path).expanduser() if json_path else reports_dir() / DEMO_REPORT_NAME
    engine: local_engine.EngineProcess | None = None
    try:
        try:
            install = local_engine.ensure_engine(echo_progress)
            engine = local_engine.start_engine(
                install, slots=slots, context=2048 * slots, die_with_parent=True,
                log_path=local_engine.state_path().parent / "demo-server.log")
        except local_engine.EngineError as error:
            raise ConfigError(str(error)) from None
        echo_progress(f"llama-server ready at {engine.api_url} (pid {engine.pid}, slots {slots}, "
                      f"threads {engine.threads}, model {engine.model})")
        arguments = suite_arguments(
            url=engine.api_url, model=engine.model, concurrency=concurrency, probes=probes,
            max_tokens=max_tokens, min_completion_tokens=min_completion_tokens, seed=seed,
            store_location=store_location, json_path=target)
        # the suite's command ends with SystemExit(verdict code), which unwinds through
        # the `finally` below and reaches cli.main as the exit code
        command.main(args=arguments, prog_name="benchwarden demo", standalone_mode=False)
    finally:
        if engine is not None:
            engine.stop()
            echo_progress(f"llama-server stopped (pid {engine.pid})")
