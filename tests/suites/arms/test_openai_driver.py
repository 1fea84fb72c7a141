"""The openai driver through the real CLI, the real tracker and a scripted fake model.

Each scenario is chosen by the model name the CLI sends (see `FakeToolCallingModel`).
Results are checked through the store (the Python API), never by parsing the terminal.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchwarden.cli.main import cli
from benchwarden.core.store import open_store
from tests.suites.arms.fake_model import COMPLETION_TOKENS, FakeToolCallingModel


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    marker = tmp_path_factory.mktemp("marker") / "leaked.txt"
    with FakeToolCallingModel(marker=str(marker)) as server:
        yield server


def arms(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["arms", *args], catch_exceptions=False,
                                env={"COLUMNS": "200"})
    return result.exit_code, result.output


def run(fake, store, model: str, arm: str, task: str, *extra: str) -> tuple[int, str]:
    return arms("run", "--arm", arm, "--task", task, "--trials", "1", "--driver", "openai",
                "--url", fake.url, "--model", model, "--store", str(store), *extra)


def records(store):
    with open_store(store) as opened:
        return opened.records(suite="arms")


def last_run_end(store):
    with open_store(store) as opened:
        return opened.runs("arms")[-1].end


def test_correct_solutions_pass_on_every_arm_and_tokens_are_summed(fake, tmp_path):
    store = tmp_path / "store.sqlite"
    before = len(fake.usage_log)
    code, output = run(fake, store, "solve", "all",
                       "close-issue,open-issue-count,triage-slow-search")
    assert code == 0, output
    found = records(store)
    assert len(found) == 12
    assert {(r.arm, r.task, r.trial) for r in found} == {
        (a, t, 1) for a in ("cli", "http", "tools", "mcp")
        for t in ("close-issue", "open-issue-count", "triage-slow-search")}
    failures = [(r.arm, r.task, r.payload["reasons"]) for r in found if r.outcome != "pass"]
    assert failures == []
    # the read answer came from a tool that really ran against the seeded tracker
    assert all("5 open issues" in r.payload["final_report"] for r in found
               if r.task == "open-issue-count")
    # tokens: every usage the server sent is in exactly one record
    sent = fake.usage_log[before:]
    assert sum(r.tokens.fresh_input + r.tokens.cache_read for r in found) == \
        sum(u["prompt"] for u in sent)
    assert sum(r.tokens.cache_read for r in found) == sum(u["cached"] for u in sent)
    assert sum(r.tokens.output for r in found) == COMPLETION_TOKENS * len(sent)
    assert sum(r.payload["turns"] for r in found) == len(sent)
    shell = [e for r in found if r.arm == "http" for e in r.payload["transcript"]]
    assert shell and all(e["kind"] == "shell" and e["exit_status"] == 0 for e in shell)
    end = last_run_end(store)
    assert end.status == "completed"
    assert end.summary["recorded"] == 12 and end.summary["invalid"] == 0

    # a rerun deepens cells: numbers continue after the highest, and a cell that is
    # already deep enough runs nothing
    code, output = arms("run", "--arm", "cli,tools", "--task", "close-issue", "--trials", "2",
                        "--driver", "openai", "--url", fake.url, "--model", "solve",
                        "--store", str(store))
    assert code == 0, output
    deeper = [r for r in records(store) if r.task == "close-issue"]
    assert sorted((r.arm, r.trial) for r in deeper) == [
        ("cli", 1), ("cli", 2), ("http", 1), ("mcp", 1), ("tools", 1), ("tools", 2)]
    summary = last_run_end(store).summary
    assert {(c["arm"], c["before"], c["after"]) for c in summary["cells"]} == {
        ("cli", 1, 2), ("tools", 1, 2)}
    assert summary["floor_reached"] is False
    code, output = arms("run", "--arm", "cli", "--task", "close-issue", "--trials", "2",
                        "--driver", "openai", "--url", fake.url, "--model", "solve",
                        "--store", str(store))
    assert code == 0 and last_run_end(store).summary["attempted"] == 0

    # the report renders from the store alone, with JSON
    report_path = tmp_path / "report.json"
    code, output = arms("report", "--store", str(store), "--json", str(report_path))
    assert code == 0, output
    report = json.loads(report_path.read_text())
    assert report["suite"] == "arms" and report["scope"] == "tracker"
    head = {row["arm"]: row for row in report["headline"]}
    assert head["cli"]["samples"] == 4 and head["cli"]["success"]["mean"] == 1.0
    assert "headline per arm" in output and "paired" in output
    code, output = arms("compare", "cli", "tools", "--store", str(store), "--floor", "1")
    assert code == 0 and "over 3 tasks both covered" in output
    # `benchwarden show` re-renders an arms run through the suite registry
    shown = CliRunner().invoke(cli, ["show", "--latest", "--store", str(store)],
                               catch_exceptions=False, env={"COLUMNS": "200"})
    assert shown.exit_code == 0 and "run tally" in shown.output


def test_trials_fan_out_over_worker_processes(fake, tmp_path):
    store = tmp_path / "store.sqlite"
    code, output = run(fake, store, "solve", "cli,tools", "close-issue", "--executor", "local:2")
    assert code == 0, output
    found = records(store)
    assert sorted((r.arm, r.outcome) for r in found) == [("cli", "pass"), ("tools", "pass")]
    with open_store(store) as opened:
        assert "LocalExecutor(workers=2)" in opened.runs("arms")[-1].run.config["executor"]


def test_a_wrong_solution_is_incorrect_with_the_reasons(fake, tmp_path):
    store = tmp_path / "store.sqlite"
    code, output = run(fake, store, "wrong", "cli,tools", "close-issue")
    assert code == 0, output
    for record in records(store):
        assert record.outcome == "fail" and record.payload["failure"] == "incorrect"
        reasons = record.payload["reasons"]
        assert "missing change: issues 2 state: expected 'closed', found 'open'" in reasons
        assert "collateral damage: issues 3 state: expected 'open', found 'closed'" in reasons


def test_an_endless_loop_is_confused_at_the_turn_cap_with_tokens_kept(fake, tmp_path):
    store = tmp_path / "store.sqlite"
    code, output = run(fake, store, "loop", "http,tools", "close-issue", "--turn-cap", "3")
    assert code == 0, output
    found = records(store)
    assert len(found) == 2
    for record in found:
        assert record.payload["failure"] == "confused" and record.payload["turns"] == 3
        assert record.tokens.output == 3 * COMPLETION_TOKENS
        assert record.payload["stopped"] == "turn_cap"


def test_a_stalled_model_is_hung_and_the_environment_is_still_torn_down(fake, tmp_path):
    store = tmp_path / "store.sqlite"
    code, output = run(fake, store, "stall", "http", "close-issue", "--wall-clock", "1")
    assert code == 0, output
    (record,) = records(store)
    assert record.outcome == "fail" and record.payload["failure"] == "hung"
    assert record.payload["turns"] == 0 and record.tokens.raw_total == 0


def test_forbidden_commands_are_denied_and_never_run(fake, tmp_path):
    store = tmp_path / "store.sqlite"
    code, output = run(fake, store, "forbidden", "cli", "close-issue")
    assert code == 0, output
    (record,) = records(store)
    transcript = record.payload["transcript"]
    assert len(transcript) == 4 and all(entry["denied"] for entry in transcript)
    assert record.payload["denied_calls"] == 4
    assert "never allowed" in transcript[0]["reason"] and "names a path" in transcript[3]["reason"]
    assert not Path(fake.marker).exists()
    # the denials were answered to the model, which saw them as tool results
    answers = [m["content"] for m in fake.requests[-1]["messages"] if m["role"] == "tool"]
    assert len(answers) == 4 and all(a.startswith("refused (not run)") for a in answers)
    assert record.payload["failure"] == "incorrect"  # it never closed the issue


def test_the_http_arms_curl_reaches_only_its_own_trial_server(fake, tmp_path):
    store = tmp_path / "store.sqlite"
    code, output = run(fake, store, "forbidden", "http", "close-issue")
    assert code == 0, output
    (record,) = records(store)
    transcript = record.payload["transcript"]
    assert all(entry["denied"] for entry in transcript)
    curl = [entry for entry in transcript if entry["command"].startswith("curl")]
    assert len(curl) == 1
    assert "curl may reach only http://127.0.0.1:" in curl[0]["reason"]
    assert "not 'http://127.0.0.1:9/'" in curl[0]["reason"]
    assert not Path(fake.marker).exists()


def test_a_failing_model_server_is_a_harness_error_not_a_sample(fake, tmp_path):
    store = tmp_path / "store.sqlite"
    code, output = run(fake, store, "http500", "tools", "close-issue")
    assert code == 1
    assert records(store) == []
    summary = last_run_end(store).summary
    assert summary["harness_errors"] == 1 and summary["recorded"] == 0
    assert "HTTP 500" in summary["problems"][0]
    assert "harness error" in output


def test_configuration_errors_are_one_line_and_exit_2(fake, tmp_path):
    store = str(tmp_path / "store.sqlite")
    code, output = arms("run", "--arm", "cli", "--task", "nope", "--driver", "openai",
                        "--url", fake.url, "--model", "solve", "--store", store)
    assert code == 2 and "unknown tasks nope" in output
    code, output = arms("run", "--arm", "cli", "--task", "all", "--driver", "openai",
                        "--store", store)
    assert code == 2 and "needs --url" in output
    code, output = arms("run", "--arm", "tools", "--task", "all", "--driver", "command",
                        "--command", "true", "--store", store)
    assert code == 2 and "shell and mcp arms only" in output
    code, output = arms("report", "--store", store, "--weights", "output=lots")
    assert code == 2 and "not a number" in output


def test_every_arms_command_has_help():
    group = cli.get_command(None, "arms")
    for name in ("run", "report", "compare"):
        command = group.get_command(None, name)
        assert command.help and command.help.strip()
        assert all(option.help for option in command.params
                   if hasattr(option, "help") and option.param_type_name == "option"), name
