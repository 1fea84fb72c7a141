"""`benchwarden contamination`: options in, `run_contamination` called, verdict out.

Exit codes: 0 pass, 1 fail, 2 a usage or configuration error or an unreachable server
(one line naming what to fix), 130 interrupted (the run end says how to resume).

`--resume RUN` continues a run with its stored configuration: only the options in
`RESUME_MAY_CHANGE` (where the server is, its key, the client's limits, where reports
go) may be given, and those given apply (the client's limits not given stay the stored
ones); any other option given with a value other than the stored one is refused, naming
it, rather than silently ignored.
"""

from __future__ import annotations

import json
import re
from typing import Any

import click
from click.core import ParameterSource

from benchwarden.core.commandline import (
    ConfigError,
    any_model_option,
    api_key_env_option,
    canary_seed_option,
    concurrency_option,
    config_errors,
    html_option,
    json_report_option,
    max_tokens_option,
    min_completion_tokens_option,
    model_option,
    open_store_or_exit,
    probes_option,
    refuse_url_with_credentials,
    store_option,
    write_html_report,
)
from benchwarden.core.errors import EXIT_FAIL, EXIT_OK
from benchwarden.core.reports import console as make_console
from benchwarden.core.reports import write_json
from benchwarden.suites.contamination.presets import PRESETS
from benchwarden.suites.contamination.probes import SCENARIOS

# Options a resumed run may take afresh: where the server is now, its key, the client's
# limits and timeouts, where the reports go. Everything else is the stored configuration.
CLIENT_LIMITS = ("request_timeout", "max_reply_bytes", "max_chunks_per_token", "stall_timeout",
                 "retry_429_max_wait")
RESUME_MAY_CHANGE = frozenset({"url", "api_key_env", "store_location", "json_path",
                               "html_path", "resume", "no_progress", "repro_dir", "repro_of",
                               "any_model",
                               *CLIENT_LIMITS})


def _as_stored(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def resume_conflicts(ctx: click.Context, stored: dict[str, Any]) -> list[str]:
    """The options given explicitly with `--resume` that disagree with the stored run."""
    conflicts = []
    for param in ctx.command.params:
        name = param.name or ""
        if name in RESUME_MAY_CHANGE:
            continue
        if ctx.get_parameter_source(name) not in (ParameterSource.COMMANDLINE,
                                                  ParameterSource.ENVIRONMENT):
            continue
        given = _as_stored(ctx.params.get(name))
        option = param.opts[0] if param.opts else name
        if name not in stored:
            conflicts.append(f"{option} (not part of a resumable configuration)")
        elif given != stored[name]:
            conflicts.append(f"{option} {json.dumps(given)} (the run was made with "
                             f"{json.dumps(stored[name])})")
    return conflicts


def _extra_body(ctx: click.Context, param: click.Parameter, value: str | None) -> dict:
    if value is None:
        return {}
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as error:
        raise ConfigError(f"--extra-body is not valid JSON ({error.msg} at char {error.pos}); "
                          "give an object like '{\"seed\": 7}'") from None
    if not isinstance(parsed, dict):
        raise ConfigError("--extra-body must be a JSON object like '{\"seed\": 7}'")
    return parsed


def _bisect_range(ctx: click.Context, param: click.Parameter,
                  value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    low, dash, high = value.partition("-")
    try:
        if not dash:
            raise ValueError
        return int(low), int(high)
    except ValueError:
        raise ConfigError(f"--bisect expects a range like 2-16, not {value!r}") from None


_SIZE = re.compile(r"(?i)\s*(\d+)\s*(b|kib|k|mib|m|gib|g)?\s*")
_UNITS = {None: 1, "b": 1, "k": 1024, "kib": 1024, "m": 1024**2, "mib": 1024**2,
          "g": 1024**3, "gib": 1024**3}


def _byte_size(ctx: click.Context, param: click.Parameter, value: str) -> int:
    match = _SIZE.fullmatch(value)
    if not match:
        raise ConfigError(f"--max-reply-bytes expects a size like 16MiB, 512KiB or 1048576, "
                          f"not {value!r}")
    return int(match.group(1)) * _UNITS[(match.group(2) or "").lower() or None]


@click.command()
@click.option("--url", default=None, callback=refuse_url_with_credentials,
              help="Base URL of the OpenAI-compatible server (with or without /v1). "
                   "Required unless --resume. Never with user:key@: use --api-key-env.")
@model_option
@any_model_option
@api_key_env_option
@concurrency_option()
@probes_option()
@max_tokens_option()
@min_completion_tokens_option()
@canary_seed_option
@click.option("--scenario", default="shared-prefix", show_default=True,
              help=f"Cache scenario ({' | '.join(SCENARIOS)}): one shared preamble, a "
                   "different preamble per probe, or shared with half the ballast of every "
                   "rung cancelled mid-stream.")
@click.option("--repeat", default=1, show_default=True, type=int,
              help="Run the rungs this many times to catch rare races.")
@click.option("--request-timeout", default=300.0, show_default=True, type=float,
              help="Seconds allowed for one whole request.")
@click.option("--max-reply-bytes", default="16MiB", show_default=True, callback=_byte_size,
              metavar="SIZE", help="Cut off a reply whose body exceeds this (KiB/MiB/GiB or "
              "bytes); its record keeps the first 4 KiB, the length and the SHA-256.")
@click.option("--max-chunks-per-token", default=4.0, show_default=True, type=float,
              help="Cut off a reply that streams more than this many chunks per requested "
                   "token (+64 for role, finish and usage chunks).")
@click.option("--stall-timeout", default=60.0, show_default=True, type=float,
              metavar="SECONDS", help="Fail a reply whose body, once begun, completes no "
                                      "line for this long (0: off; --request-timeout still "
                                      "bounds the whole request).")
@click.option("--retry-429-max-wait", default=30.0, show_default=True, type=float,
              metavar="SECONDS", help="Honour HTTP 429 Retry-After by resending a request "
                                      "while its waits stay within this bound; beyond it "
                                      "the request fails as overloaded (0: never retry).")
@click.option("--preset", default="none", show_default=True,
              help=f"Engine preset ({' | '.join(PRESETS)}): the explicit sampling fields "
                   "that make temperature 0 greedy on that engine.")
@click.option("--extra-body", default=None, callback=_extra_body, metavar="JSON",
              help="Extra request fields as a JSON object (added after the preset).")
@click.option("--logprobs", default=None, type=int, metavar="N",
              help="Ask for the top N candidates of every token (0: off) to classify "
                   "divergences as near-tie or substantive [default: 5 for the llamacpp, "
                   "vllm, sglang and openai presets, else 0].")
@click.option("--near-tie-nats", default=0.5, show_default=True, type=float,
              help="A divergence whose reference preferred its token by less than this "
                   "many nats is a near-tie flip (the verdict still fails).")
@click.option("--bisect", default=None, callback=_bisect_range, metavar="LO-HI",
              help="Instead of fixed rungs, find the smallest concurrency in LO-HI at "
                   "which a probe diverges (a binary search over rungs).")
@click.option("--repro", "repro_dir", default=None, metavar="DIR",
              help="Write DIR/repro.py (Python stdlib only) and DIR/README.txt replaying "
                   "the first failing probe solo and in its rung, for a bug report.")
@click.option("--repro-of", default=None, metavar="RUN",
              help="With --repro: write the replay of a stored run instead of running.")
@store_option
@json_report_option
@html_option
@click.option("--resume", default=None, metavar="RUN",
              help="Continue a killed run: only missing requests are sent, with its stored "
                   "configuration (--url, --api-key-env and the timeouts may change; other "
                   "options that differ from the stored run are refused).")
@click.option("--no-progress", is_flag=True,
              help="No progress: no bar on a terminal, no progress lines in a log.")
@config_errors
@click.pass_context
def contamination(ctx: click.Context, url: str | None, model: str | None, any_model: bool,
                  api_key_env: str | None,
                  concurrency: tuple[int, ...], probes: int, max_tokens: int,
                  min_completion_tokens: int, seed: int | None, scenario: str, repeat: int,
                  request_timeout: float, max_reply_bytes: int, max_chunks_per_token: float,
                  stall_timeout: float, retry_429_max_wait: float, preset: str,
                  extra_body: dict, logprobs: int | None, near_tie_nats: float,
                  bisect: tuple[int, int] | None, repro_dir: str | None,
                  repro_of: str | None, store_location: str,
                  json_path: str | None, html_path: str | None, resume: str | None,
                  no_progress: bool) -> None:
    """Does concurrency change what an OpenAI-compatible server answers, or leak one
    request into another? Exit 0 on pass, 1 on fail, 2 on a usage error."""
    from benchwarden.suites.contamination.driver import (
        ContaminationConfig,
        TargetUnreachable,
        config_from_run,
        run_contamination,
    )
    from benchwarden.suites.contamination.terminal import render_terminal

    if repro_of is not None:
        _write_repro_of_stored_run(store_location, repro_of, repro_dir)
        return
    given = ctx.get_parameter_source("concurrency")
    if bisect is not None and given is ParameterSource.COMMANDLINE:
        raise ConfigError("--bisect chooses the rungs itself: drop --concurrency")

    def make_config() -> ContaminationConfig:  # reads the options as they are when called
        if not url:
            raise ConfigError("--url is required: the base URL of an OpenAI-compatible server")
        return ContaminationConfig(
            url=url, model=model, api_key_env=api_key_env, concurrency=concurrency,
            probes=probes, max_tokens=max_tokens, min_completion_tokens=min_completion_tokens,
            seed=seed, scenario=scenario, repeat=repeat, request_timeout=request_timeout,
            preset=preset, extra_body=extra_body,
            max_reply_bytes=max_reply_bytes, max_chunks_per_token=max_chunks_per_token,
            stall_timeout=stall_timeout, retry_429_max_wait=retry_429_max_wait,
            logprobs=logprobs, near_tie_nats=near_tie_nats, bisect=bisect,
            any_model=any_model)

    if resume is None:
        make_config().validate()  # refused before the store is opened or created
    # a resumed run's store must already exist: a typo must not make an empty one
    with open_store_or_exit(store_location, create=resume is None, read_only=False) as store:
        if resume is not None:
            stored_run = store.run_info(resume).run
            conflicts = resume_conflicts(ctx, dict(stored_run.config))
            if conflicts:
                raise ConfigError(f"--resume continues run {stored_run.run_id} as it was "
                                  f"configured; drop or match {'; '.join(conflicts)}")
            stored = config_from_run(stored_run, store.location)
            url = url or stored.url
            api_key_env = api_key_env or stored.api_key_env
            # the client's limits: the stored ones, unless given again now
            limits = {name: getattr(stored, name) for name in CLIENT_LIMITS
                      if ctx.get_parameter_source(name) is not ParameterSource.COMMANDLINE}
            request_timeout = limits.get("request_timeout", request_timeout)
            max_reply_bytes = limits.get("max_reply_bytes", max_reply_bytes)
            max_chunks_per_token = limits.get("max_chunks_per_token", max_chunks_per_token)
            stall_timeout = limits.get("stall_timeout", stall_timeout)
            retry_429_max_wait = limits.get("retry_429_max_wait", retry_429_max_wait)
        try:
            config = make_config()
            if repro_dir is not None:
                from benchwarden.suites.contamination.repro import prepare_repro_dir

                prepare_repro_dir(repro_dir)  # refused before the run, not after it
            report = run_contamination(config, store, progress=not no_progress, resume=resume,
                                       console=make_console(stderr=True))
        except ValueError as error:
            raise ConfigError(str(error)) from None
        except TargetUnreachable as error:
            raise ConfigError(f"server unreachable: {error}") from None
    render_terminal(report, make_console())
    if json_path:
        click.echo(f"report written to {write_json(json_path, report)}")
    if html_path:
        write_html_report(store_location, report, html_path)
    if repro_dir is not None:
        click.echo(_repro_line(report, repro_dir))
    failed = report.verdict is not None and report.verdict.kind == "fail"
    raise SystemExit(EXIT_FAIL if failed else EXIT_OK)


def _repro_line(report: Any, repro_dir: str) -> str:
    from benchwarden.suites.contamination.repro import write_repro

    written = write_repro(report, repro_dir)
    if written is None:
        return "no failing probe to replay: nothing written to --repro"
    return f"replay written to {written} (run: python {written} --url URL)"


def _write_repro_of_stored_run(store_location: str, run_id: str, repro_dir: str | None) -> None:
    from benchwarden.suites.contamination.report import build_report
    from benchwarden.suites.contamination.repro import prepare_repro_dir

    if repro_dir is None:
        raise ConfigError("--repro-of RUN needs --repro DIR: where to write the replay")
    prepare_repro_dir(repro_dir)
    with open_store_or_exit(store_location, create=False, read_only=True) as store:
        try:
            report = build_report(store, run_id)
        except ValueError as error:
            raise ConfigError(str(error)) from None
    click.echo(_repro_line(report, repro_dir))
