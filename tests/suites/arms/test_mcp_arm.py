"""The tracker's `mcp` arm end to end, through the real CLI (`python -m benchwarden arms
...` in a child process), the real bubblewrap boundary, the real MCP servers (official
SDK, stdio) and the scripted tool-calling fake model: every outcome, a paired
comparison with the `tools` arm, the command driver as MCP client, and proof that an
MCP server is held by the trial's boundary (each escape also run with `--isolation
none` as the positive control)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from benchwarden.core.store import open_store
from tests.conftest import bwrap_or_skip
from tests.suites.arms.fake_model import FakeToolCallingModel

pytest.importorskip("mcp")

ROOT = Path(__file__).resolve().parents[3]
AGENT = Path(__file__).with_name("scripted_agent.py")
PROBE_SUITE = "tests.suites.arms.mcp_probe_suite:SUITE"


@pytest.fixture(scope="module")
def fake():
    with FakeToolCallingModel() as server:
        yield server


@pytest.fixture(autouse=True)
def boundary():
    bwrap_or_skip()


def arms(*args: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The real command line in a child process, importing this checkout."""
    env = dict(os.environ, COLUMNS="200",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                          if p))
    if home is not None:
        env["HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "benchwarden", "arms", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=900)


def run(fake: FakeToolCallingModel, store: Path, model: str, arm: str, task: str,
        *extra: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    return arms("run", "--arm", arm, "--task", task, "--trials", "1", "--driver", "openai",
                "--url", fake.url, "--model", model, "--store", str(store), *extra, home=home)


def records(store: Path, model: str | None = None) -> list[Any]:
    with open_store(store) as opened:
        found = opened.records(suite="arms")
    return [r for r in found if model is None or r.payload["model"] == model]


def summary(store: Path) -> dict[str, Any]:
    with open_store(store) as opened:
        return dict(opened.runs("arms")[-1].end.summary)


def test_correct_mcp_solutions_pass_and_compare_with_the_tools_arm(fake, tmp_path):
    store = tmp_path / "store.sqlite"
    tasks = "close-issue,open-issue-count,triage-slow-search"
    done = run(fake, store, "solve", "mcp,tools", tasks, "--html", str(tmp_path / "run.html"))
    assert done.returncode == 0, done.stdout + done.stderr
    found = records(store)
    assert sorted((r.arm, r.task, r.outcome) for r in found) == sorted(
        (arm, task, "pass") for arm in ("mcp", "tools") for task in tasks.split(","))
    mcp = {r.task: r for r in found if r.arm == "mcp"}
    # the read answer came from the MCP server, which really read the seeded tracker
    assert "5 open issues" in mcp["open-issue-count"].payload["final_report"]
    assert mcp["close-issue"].payload["transcript"] == [
        {"kind": "mcp", "server": "tracker", "tool": "close_issue", "arguments": '{"number": 2}'}]
    triage = mcp["triage-slow-search"].payload["transcript"]
    assert [(e["kind"], e["server"], e["tool"]) for e in triage] == [
        ("mcp", "tracker", "list_issues"), ("mcp", "tracker", "add_labels"),
        ("mcp", "tracker", "assign"), ("mcp", "tracker", "comment")]
    assert mcp["close-issue"].payload["isolation"] == "bwrap"
    assert all(r.tokens.output > 0 for r in mcp.values())
    assert mcp["close-issue"].payload["turns"] == 2  # one call, then the report
    # the model was offered the server's tools: the tools arm's names and schemas
    offered = [body for body in fake.requests if "MCP server" in body["messages"][0]["content"]]
    tools = [body for body in fake.requests if body["model"] == "solve"
             and "MCP server" not in body["messages"][0]["content"]
             and body["tools"][0]["function"]["name"] != "shell"]
    assert offered and tools and offered[0]["tools"] == tools[0]["tools"]

    compared = arms("compare", "mcp", "tools", "--store", str(store), "--floor", "1",
                    "--json", str(tmp_path / "compare.json"))
    assert compared.returncode == 0, compared.stdout + compared.stderr
    assert "over 3 tasks both covered" in compared.stdout
    comparison = json.loads((tmp_path / "compare.json").read_text())
    assert (comparison["a"], comparison["b"]) == ("mcp", "tools")
    assert sorted(comparison["tasks"]) == sorted(tasks.split(","))
    success = comparison["success_difference"]
    assert success["n"] == 3 and success["mean_diff"] == 0.0
    # the arms differ only by the bootstrap: the paired cost difference is measured,
    # with its interval and p value (the fake model counts prompt characters)
    cost = comparison["cost_equivalent_difference"]
    assert cost["n"] == 3 and cost["low"] <= cost["mean_diff"] <= cost["high"]
    assert cost["p_value"] is not None and cost["mde"] is not None
    assert ">mcp<" in (tmp_path / "run.html").read_text()  # the page renders the new arm
    reported = arms("report", "--store", str(store), "--json", str(tmp_path / "report.json"))
    assert reported.returncode == 0, reported.stdout + reported.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    head = {row["arm"]: row for row in report["headline"]}
    assert head["mcp"]["samples"] == 3 and head["mcp"]["success"]["mean"] == 1.0
    # the shown trials keep which MCP server and tool each call reached, in JSON and HTML
    mcp_calls = [entry for trial in report["trials"] if trial["arm"] == "mcp"
                 for entry in trial["transcript"] if entry["kind"] == "mcp"]
    assert mcp_calls and all(entry["server"] == "tracker" and entry["tool"]
                             for entry in mcp_calls)
    assert f"tracker.{mcp_calls[0]['tool']}(" in (tmp_path / "run.html").read_text()


def test_a_wrong_mcp_call_is_incorrect(fake, tmp_path):
    store = tmp_path / "store.sqlite"
    done = run(fake, store, "wrong", "mcp", "close-issue")
    assert done.returncode == 0, done.stdout + done.stderr
    (record,) = records(store)
    assert record.outcome == "fail" and record.payload["failure"] == "incorrect"
    assert any("issues 3 state" in reason for reason in record.payload["reasons"])
    assert record.payload["transcript"][0]["arguments"] == '{"number": 3}'


def test_an_mcp_agent_stopped_by_the_turn_cap_is_confused_with_its_calls_kept(fake, tmp_path):
    store = tmp_path / "store.sqlite"
    done = run(fake, store, "loop", "mcp", "close-issue", "--turn-cap", "3")
    assert done.returncode == 0, done.stdout + done.stderr
    (record,) = records(store)
    assert record.payload["failure"] == "confused" and record.payload["turns"] == 3
    assert [e["tool"] for e in record.payload["transcript"]] == ["list_issues"] * 3
    assert record.tokens.output > 0


def test_an_mcp_agent_stopped_by_the_wall_clock_is_hung(fake, tmp_path):
    store = tmp_path / "store.sqlite"
    done = run(fake, store, "stall", "mcp", "close-issue", "--wall-clock", "3")
    assert done.returncode == 0, done.stdout + done.stderr
    (record,) = records(store)
    assert record.payload["failure"] == "hung" and record.payload["stopped"] == "wall_clock"
    assert summary(store)["recorded"] == 1


# -- the command driver as MCP client ------------------------------------------------

def run_agent(store: Path, mode: str, arm: str, task: str = "close-issue"):
    return arms("run", "--arm", arm, "--task", task, "--trials", "1", "--driver", "command",
                "--command", f"{sys.executable} {AGENT} {mode}", "--store", str(store))


def test_an_external_agent_reaches_the_mcp_arms_server_it_starts_itself(tmp_path):
    store = tmp_path / "store.sqlite"
    done = run_agent(store, "mcp", "mcp", "close-issue,open-issue-count")
    assert done.returncode == 0, done.stdout + done.stderr
    found = {r.task: r for r in records(store)}
    assert {task: r.outcome for task, r in found.items()} == {
        "close-issue": "pass", "open-issue-count": "pass"}
    assert found["close-issue"].payload["transcript"] == [
        {"kind": "mcp", "server": "tracker", "tool": "close_issue", "arguments": {"number": 2}}]
    assert found["open-issue-count"].payload["final_report"] == "There are 5 open issues."


def test_a_reported_mcp_call_on_a_shell_arm_is_a_leak_and_a_malformed_one_an_error(tmp_path):
    store = tmp_path / "store.sqlite"
    done = run_agent(store, "mcp-claim", "cli")
    assert done.returncode == 0, done.stdout + done.stderr
    assert records(store) == [] and summary(store)["invalid"] == 1
    malformed = run_agent(tmp_path / "other.sqlite", "mcp-malformed", "mcp")
    assert malformed.returncode == 1
    assert "is an mcp call without a server and a tool" in malformed.stdout + malformed.stderr
    assert records(tmp_path / "other.sqlite") == []


# -- the boundary holds the MCP server -------------------------------------------------

@pytest.fixture()
def outside():
    """A folder outside /tmp (the boundary's /tmp is private, so a marker there would
    prove nothing): under the invoking user's ~/.cache, removed afterwards."""
    folder = Path.home() / ".cache" / f"benchwarden-mcp-escape-{uuid.uuid4().hex[:12]}"
    folder.mkdir(parents=True)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture()
def host_listener():
    """A socket listening on the host's loopback: the MCP server must not reach it."""
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(8)
        yield listening.getsockname()[1]


@pytest.mark.parametrize("isolation", ["bwrap", "none"])
def test_the_mcp_server_runs_inside_the_trials_boundary(fake, outside, host_listener, isolation):
    marker = outside / "escaped"
    home = outside / "home"
    (home / ".benchwarden").mkdir(parents=True)
    (home / ".benchwarden" / "secret.txt").write_text("TOPSECRET")
    store = outside / "store.sqlite"
    name = uuid.uuid4().hex
    fake.call_scripts[name] = [
        [("probe", {"write": str(marker), "read": str(store), "port": host_listener})],
        [("probe", {"read": str(home / ".benchwarden" / "secret.txt")})],
        [("probe", {"write": "inside.txt"})]]
    done = run(fake, store, f"calls:{name}", "mcp", "close-issue", "--suite", PROBE_SUITE,
               "--isolation", isolation, home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    (record,) = records(store, f"calls:{name}")
    assert record.payload["isolation"] == isolation
    assert [e["server"] for e in record.payload["transcript"]] == ["probe"] * 3
    last = [body for body in fake.requests if body["model"] == f"calls:{name}"][-1]
    answers = [m["content"] for m in last["messages"] if m["role"] == "tool"]
    assert "write: done" in answers[2]  # the trial's own folder is writable
    if isolation == "bwrap":
        assert not marker.exists()
        assert "write: failed (Read-only file system)" in answers[0]
        assert "SQLite format" not in answers[0]  # the store is hidden
        assert "connect: failed" in answers[0]  # the host's loopback is another network
        assert "TOPSECRET" not in answers[1]
    else:  # control: without the boundary every attempt succeeds
        assert marker.read_text() == "escaped by the MCP server\n"
        assert "read: SQLite format" in answers[0]
        assert "connect: done" in answers[0]
        assert "read: TOPSECRET" in answers[1]
