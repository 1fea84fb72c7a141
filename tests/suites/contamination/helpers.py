"""In-memory outcomes for the contamination scoring tests."""

from __future__ import annotations

import dataclasses

from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import Run
from benchwarden.suites.contamination import scoring
from benchwarden.suites.contamination.driver import SUITE, Plan
from benchwarden.targets.replies import Reply, RequestOutcome, Timings, ToolCall

CANARIES = ("XK-AZURE-HERON-41", "QJ-CRIMSON-OTTER-77", "BM-JADE-LYNX-23")


def reply_text(probe: int, words: int = 20) -> str:
    canary = CANARIES[probe]
    return f"{canary}\n" + " ".join(f"w{probe}x{i}" for i in range(words)) + f"\n{canary}"


def ok(text: str, *, tokens: int = 32, reasoning: str = "", finish: str | None = "stop",
       tools: tuple[ToolCall, ...] = (), start: float = 0.0, end: float = 1.0) -> RequestOutcome:
    reply = Reply(reasoning=reasoning, text=text, tool_calls=tools, finish_reason=finish,
                  completion_tokens=tokens, usage_reported=True)
    return RequestOutcome(Timings(sent_at=start, first_byte_at=start, first_content_at=start,
                                  last_byte_at=end), reply=reply)


def failed(message: str = "connection refused", at: float = 0.0,
           status: int | None = None) -> RequestOutcome:
    return RequestOutcome(Timings(sent_at=at), error=message, status=status)


def http_error(status: int = 500) -> RequestOutcome:
    """What the client records for a non-200 answer."""
    return failed(f"HTTP {status} from POST http://127.0.0.1:1/v1/chat/completions: "
                  "fake internal error (server_error)", status=status)


def too_many_files() -> RequestOutcome:
    """What the client records when the process is out of file descriptors."""
    return failed("POST http://127.0.0.1:1/v1/chat/completions failed: cannot connect "
                  "(Too many open files)")


def cancelled_by_client(probe: int, deltas: int = 4) -> RequestOutcome:
    """A ballast request the client cut after `deltas` content deltas (cancel scenario)."""
    return RequestOutcome(Timings(sent_at=0.0, first_byte_at=0.0, first_content_at=0.0,
                                  last_byte_at=0.5),
                          error=f"cancelled by client after {deltas} deltas",
                          extra={"cancelled": True})


def good(probe: int, **kwargs) -> RequestOutcome:
    return ok(reply_text(probe), **kwargs)


# -- running the real CLI against a fake server -----------------------------------------------
def invoke(args: list[str], env: dict[str, str] | None = None):
    """Run `benchwarden ARGS` in-process through click; returns click's Result."""
    from click.testing import CliRunner

    from benchwarden.cli.main import cli

    # wide enough that table cells are not wrapped, so assertions can read them
    return CliRunner().invoke(cli, args, env={"COLUMNS": "240", **(env or {})},
                              catch_exceptions=False)


def contamination_args(url: str, store, json_path=None, *extra: str) -> list[str]:
    """A small, fast run: 2 probes, rungs 2 and 4, 64 tokens, a fixed seed."""
    args = ["contamination", "--url", url, "--probes", "2", "--concurrency", "2,4",
            "--max-tokens", "64", "--seed", "11", "--store", str(store), "--no-progress"]
    if json_path is not None:
        args += ["--json", str(json_path)]
    return args + list(extra)


def alternating_rungs_run(rungs: int, probes: int = 2) -> tuple[Run, Plan]:
    """The start and plan of a run of `probes` probes over rungs c2 and c4 alternating,
    repeated to fill `rungs` rungs (the shape the drawn-run tests write into)."""
    probe_set = [{"index": i, "canary": CANARIES[i], "topic": f"topic {i}"}
                 for i in range(probes)]
    bodies = [{"messages": [{"role": "user", "content": f"probe {i}"}]} for i in range(probes)]
    repeat = (rungs + 1) // 2
    config = {"probe_set": probe_set, "concurrency": [2, 4], "repeat": repeat,
              "min_completion_tokens": 4, "request_bodies": bodies,
              "scenario": "shared-prefix"}
    run = stamp_run(suite=SUITE, bench_version=scoring.BENCH_VERSION, config=config)
    run = dataclasses.replace(run, config={**config, "scope": run.run_id})
    return run, Plan(run.run_id, run.run_id, tuple(bodies), (2, 4), repeat, "shared-prefix")
