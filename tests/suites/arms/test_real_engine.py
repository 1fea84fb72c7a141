"""The tracker suite through the openai driver against the real llama.cpp engine.

SmolLM2-135M is far too weak to solve tasks, and its chat template does not render
tool definitions, so this does not assert what the model achieves: it asserts that
the run completes, that every trial ends as an honest record (or is counted in the
tally), and that token usage came from the server. What the model did is printed.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from benchwarden.cli.main import cli
from benchwarden.core.store import open_store
from benchwarden.suites.arms.tasks import FAILURE_TAGS
from tests.conftest import running_real_engine

CELLS = (("cli", "open-issue-count"), ("tools", "close-issue"))


@pytest.fixture(scope="module")
def real_engine(tmp_path_factory):
    # --jinja: tool calling needs the Jinja chat templates (this build's default; said
    # explicitly so a build with another default still accepts `tools`).
    with running_real_engine(tmp_path_factory, slots=1, context=4096, threads=2,
                             extra_args=["--jinja"]) as engine:
        yield engine


@pytest.mark.engine
def test_tracker_suite_runs_against_llama_server(real_engine, tmp_path, output_dir):
    store = tmp_path / "store.sqlite"
    attempted = 0
    for arm, task in CELLS:
        result = CliRunner().invoke(cli, [
            "arms", "run", "--arm", arm, "--task", task, "--trials", "1", "--driver", "openai",
            "--url", real_engine.base_url, "--model", real_engine.model, "--turn-cap", "2",
            "--wall-clock", "45", "--max-tokens", "48", "--seed", "7", "--store", str(store)],
            catch_exceptions=False, env={"COLUMNS": "160"})
        print(result.output)
        assert result.exit_code in (0, 1), result.output
        attempted += 1
    with open_store(store) as opened:
        records = opened.records(suite="arms")
        ends = [info.end for info in opened.runs("arms")]
    assert all(end is not None and end.status == "completed" for end in ends)
    tallies = [end.summary for end in ends]
    assert sum(t["attempted"] for t in tallies) == attempted
    assert sum(t["recorded"] for t in tallies) == len(records)
    assert all(t["recorded"] + t["invalid"] + t["harness_errors"] == t["attempted"]
               for t in tallies)
    assert records, f"nothing recorded: {[t['problems'] for t in tallies]}"
    what_it_did = []
    for record in records:
        payload = record.payload
        assert record.outcome in ("pass", "fail")
        assert (record.outcome == "pass") == (payload["failure"] is None)
        assert payload["failure"] in (None, *FAILURE_TAGS)
        if payload["stopped"] != "wall_clock":
            assert payload["turns"] >= 1
            assert record.tokens.fresh_input + record.tokens.cache_read > 0
            assert record.tokens.output > 0
        assert payload["model"] == real_engine.model
        what_it_did.append({"arm": record.arm, "task": record.task, "outcome": record.outcome,
                            "failure": payload["failure"], "turns": payload["turns"],
                            "tokens": record.tokens.raw_total,
                            "tool_calls": [e.get("command") or e.get("name")
                                           for e in payload["transcript"]],
                            "final_report": payload["final_report"][:200],
                            "reasons": payload["reasons"][:2]})
    (output_dir / "arms-llama-server.json").write_text(json.dumps(what_it_did, indent=2))
    print("WHAT SMOLLM2 DID:", json.dumps(what_it_did, indent=2))
