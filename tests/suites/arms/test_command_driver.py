"""The command driver with a scripted agent program, through the real CLI; trial
numbering with gaps; and the worked example of docs/arms.md, run exactly as written."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchwarden.cli.main import cli
from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import Record
from benchwarden.core.store import SQLiteStore, open_store
from benchwarden.suites.arms.agents import HarnessError, parse_command_result
from benchwarden.suites.arms.driver import plan_cells
from benchwarden.suites.arms.tracker.suite import SUITE

AGENT = Path(__file__).with_name("scripted_agent.py")
DOCS = Path(__file__).resolve().parents[3] / "docs" / "arms.md"


def arms(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["arms", *args], catch_exceptions=False,
                                env={"COLUMNS": "200"})
    return result.exit_code, result.output


def run_agent(store: Path, mode: str, task: str = "close-issue", *extra: str,
              suite: str = "tracker", arm: str = "cli") -> tuple[int, str]:
    return arms("run", "--suite", suite, "--arm", arm, "--task", task, "--driver", "command",
                "--command", f"{sys.executable} {AGENT} {mode}", "--store", str(store), *extra)


def records(store: Path) -> list[Record]:
    with open_store(store) as opened:
        return opened.records(suite="arms")


def summary(store: Path) -> dict:
    with open_store(store) as opened:
        return dict(opened.runs("arms")[-1].end.summary)


def test_a_scripted_agent_that_solves_passes_with_its_reported_tokens(tmp_path):
    store = tmp_path / "s.sqlite"
    code, output = run_agent(store, "solve", "close-issue,open-issue-count", "--trials", "1")
    assert code == 0, output
    found = {r.task: r for r in records(store)}
    assert found["close-issue"].outcome == "pass"
    assert found["open-issue-count"].outcome == "pass"
    assert found["open-issue-count"].payload["final_report"] == "There are 5 open issues."
    assert found["close-issue"].tokens.fresh_input == 100
    assert found["close-issue"].tokens.cache_read == 50
    assert found["close-issue"].payload["turns"] == 2
    assert found["close-issue"].payload["driver"] == "command"


def test_a_leak_makes_the_trial_invalid_and_leaves_a_gap_that_is_never_reused(tmp_path):
    store = tmp_path / "s.sqlite"
    code, output = run_agent(store, "leak-first", "close-issue", "--trials", "2")
    assert code == 0, output
    assert [r.trial for r in records(store)] == [2]
    tally = summary(store)
    assert tally["invalid"] == 1 and tally["recorded"] == 1
    assert "isolation leak" in tally["problems"][0] and "python3" in tally["problems"][0]
    code, output = run_agent(store, "leak-first", "close-issue", "--trials", "2")
    assert code == 0, output
    assert sorted(r.trial for r in records(store)) == [2, 3]
    assert summary(store)["cells"][0]["before"] == 1


def test_agent_failures_are_harness_errors_and_record_nothing(tmp_path):
    store = tmp_path / "s.sqlite"
    code, output = run_agent(store, "crash", "close-issue", "--trials", "1")
    assert code == 1
    assert "exited with status 3: scripted crash" in summary(store)["problems"][0]
    code, output = run_agent(store, "garbage", "close-issue", "--trials", "1")
    assert code == 1
    assert "not a valid result" in summary(store)["problems"][0]
    assert records(store) == []


def test_a_sleeping_agent_is_killed_and_hung_and_a_capped_one_confused(tmp_path):
    store = tmp_path / "s.sqlite"
    code, output = run_agent(store, "sleep", "close-issue", "--trials", "1", "--wall-clock", "1")
    assert code == 0, output
    (hung,) = records(store)
    assert hung.payload["failure"] == "hung" and hung.payload["tokens_reported"] is False
    code, output = run_agent(store, "turncap", "open-issue-count", "--trials", "1")
    assert code == 0, output
    confused = [r for r in records(store) if r.task == "open-issue-count"][0]
    assert confused.payload["failure"] == "confused" and confused.tokens.output == 20


def test_the_result_contract_refuses_malformed_output():
    good = (b'{"final_report": "x", "turns": 1, "tokens": {"fresh_input": 1}, '
            b'"transcript": [{"kind": "shell", "command": "ls"}]}')
    assert parse_command_result(good).tokens.fresh_input == 1
    for bad in (b"", b"[]", b'{"final_report": "x"}', good.replace(b'"turns": 1', b'"turns": -1'),
                good[:-1] + b', "surprise": 1}'):
        with pytest.raises(HarnessError):
            parse_command_result(bad)


def test_trial_numbers_continue_after_the_highest_ever_used(tmp_path):
    with SQLiteStore(tmp_path / "s.sqlite") as store:
        store.begin_run(stamp_run(suite="arms", bench_version="x", config={}, run_id="r1"))
        for trial in (1, 2, 5):
            store.append([Record(suite="arms", scope="tracker", arm="cli", task="close-issue",
                                 trial=trial, run_id="r1", outcome="pass", started_at=0,
                                 ended_at=1)])
        plans = {(p.arm, p.task): p for p in plan_cells(store, SUITE, ["cli", "http"],
                                                        ["close-issue"], 5)}
    assert plans[("cli", "close-issue")].before == 3
    assert plans[("cli", "close-issue")].trials == (6, 7)
    assert plans[("http", "close-issue")].trials == (1, 2, 3, 4, 5)


def test_the_documented_example_suite_runs_as_written(tmp_path, monkeypatch):
    text = DOCS.read_text()
    match = re.search(r"<!-- example: notes_example.py -->\s*```python\n(.*?)```", text, re.S)
    assert match, "docs/arms.md lost its worked example"
    (tmp_path / "notes_example.py").write_text(match.group(1))
    monkeypatch.syspath_prepend(str(tmp_path))
    store = tmp_path / "s.sqlite"
    code, output = run_agent(store, "solve", "all", "--trials", "1",
                             suite="notes_example:SUITE", arm="shell")
    assert code == 0, output
    found = {r.task: r for r in records(store)}
    assert found["shopping-list"].outcome == "pass", found["shopping-list"].payload["reasons"]
    assert found["add-todo"].outcome == "pass", found["add-todo"].payload["reasons"]
    assert all(r.scope == "notes" for r in found.values())
    from notes_example import SUITE as NOTES
    from notes_example import NotesEnvironment
    environment = NotesEnvironment(NOTES.arm("functions"), tmp_path / "direct")
    environment.seed()
    environment.call_function("write_note", {"name": "todo.txt", "text": "call the plumber"})
    assert NOTES.task("add-todo").checker.check(
        report="", seeded={"notes": {n: {"text": t.strip()} for n, t in
                                     {"shopping.txt": "eggs\nflour\n",
                                      "ideas.txt": "a tracker in SQLite\n"}.items()}},
        final=environment.capture_state()).passed


def test_a_concurrent_run_taking_a_trial_number_gets_the_sample_renumbered(tmp_path):
    from benchwarden.suites.arms.agents import CommandDriver, Limits
    from benchwarden.suites.arms.driver import run_arms

    with SQLiteStore(tmp_path / "s.sqlite") as store:
        def another_run_takes_trial_1(plans):
            assert plans[0].trials == (1,)
            store.begin_run(stamp_run(suite="arms", bench_version="x", config={}, run_id="other"))
            store.append([Record(suite="arms", scope="tracker", arm="cli", task="close-issue",
                                 trial=1, run_id="other", outcome="fail", started_at=0,
                                 ended_at=1)])

        tally = run_arms(store, SUITE, "tracker", arms=["cli"], tasks=["close-issue"], trials=1,
                         driver=CommandDriver(f"{sys.executable} {AGENT} solve"),
                         limits=Limits(wall_clock=120), on_start=another_run_takes_trial_1)
        mine = store.records(run_id=tally.run_id)
    assert tally.recorded == 1
    assert [(r.trial, r.outcome) for r in mine] == [(2, "pass")]
