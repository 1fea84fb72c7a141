"""The harness's side of an mcp arm: the sandbox's line channel to a long-lived
process, the MCP sessions over it (real SDK, real server processes under the trial's
supervisor), the toolbox's gating and transcript entries, the audit and the command
driver's contract for `{"kind": "mcp", ...}` entries."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchwarden.suites.arms.agents import (
    HarnessError,
    Toolbox,
    mcp_servers_json,
    parse_command_result,
)
from benchwarden.suites.arms.boundary import TrialSandbox
from benchwarden.suites.arms.isolation import (
    BASE_UTILITIES,
    audit_transcript,
    check_mcp_call,
)
from benchwarden.suites.arms.mcp_client import McpSessions, tool_text
from benchwarden.suites.arms.tasks import Arm, McpServer
from benchwarden.suites.arms.tracker.suite import SUITE

pytest.importorskip("mcp")

MCP = Arm("mcp", "mcp", "")
CLI = Arm("cli", "shell", "", allowed_commands=BASE_UTILITIES | {"tracker"})
TOOLS = Arm("tools", "functions", "")
PROBE = Path(__file__).resolve().with_name("probe_mcp_server.py")
PATH = {"PATH": "/usr/bin:/bin"}


@pytest.fixture()
def sandbox(tmp_path: Path):
    """The supervisor a trial uses, without the boundary (test_mcp_arm.py proves the
    boundary holds an MCP server): these tests are about the channel and the client."""
    with TrialSandbox("none", tmp_path) as running:
        running.start()
        yield running


def probe_server(name: str = "probe") -> McpServer:
    return McpServer(name, [sys.executable, str(PROBE)], env=PATH)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


# -- the line channel ----------------------------------------------------------------

def test_an_opened_process_answers_line_by_line_and_its_end_is_heard_once(tmp_path, sandbox):
    heard: list[str | None] = []
    script = "import sys\nfor line in sys.stdin:\n    print(line.strip().upper(), flush=True)\n"
    identifier = sandbox.open_stream(argv=[sys.executable, "-c", script], env=PATH,
                                     cwd=tmp_path, listener=heard.append)
    sandbox.write_line(identifier, "one")
    sandbox.write_line(identifier, "two")
    for _ in range(600):
        if len(heard) >= 2:
            break
        time.sleep(0.05)
    assert heard[:2] == ["ONE", "TWO"]
    sandbox.kill(identifier)
    for _ in range(600):
        if len(heard) == 3:
            break
        time.sleep(0.05)
    assert heard == ["ONE", "TWO", None]


def test_a_process_that_cannot_start_ends_with_the_reason(tmp_path, sandbox):
    heard: list[str | None] = []
    identifier = sandbox.open_stream(argv=["/nonexistent/server"], env=PATH, cwd=tmp_path,
                                     listener=heard.append)
    for _ in range(600):
        if heard:
            break
        time.sleep(0.05)
    assert heard == [None]
    assert "cannot start" in sandbox.stream_problem(identifier)


def test_closing_the_sandbox_ends_every_opened_process_and_tells_its_listener(tmp_path):
    heard: list[str | None] = []
    with TrialSandbox("none", tmp_path) as sandbox:
        sandbox.start()
        sandbox.open_stream(argv=["sleep", "600"], env=PATH, cwd=tmp_path, listener=heard.append)
    assert heard[-1:] == [None]


# -- sessions ------------------------------------------------------------------------

def test_sessions_list_and_relay_and_closing_kills_the_server(tmp_path, sandbox):
    async def episode() -> tuple[list[dict], str, int]:
        sessions = McpSessions(sandbox, [probe_server()], tmp_path)
        try:
            await sessions.open(60)
            specs = sessions.specs()
            answer = await sessions.call("probe", "probe", {"write": "inside.txt"}, 60)
        finally:
            await sessions.close()
        pid = int(answer.text.split()[1])
        return specs, answer.text, pid

    specs, text, pid = asyncio.run(episode())
    assert [spec["function"]["name"] for spec in specs] == ["probe"]
    assert specs[0]["function"]["parameters"]["properties"]["write"] == {"type": "string"}
    assert "write: done" in text
    assert (tmp_path / "inside.txt").read_text() == "escaped by the MCP server\n"
    for _ in range(600):
        if gone(pid):
            break
        time.sleep(0.05)
    assert gone(pid)


def test_a_cancelled_episode_still_closes_its_sessions_and_kills_the_server(tmp_path, sandbox):
    """What the wall clock does: the episode's task is cancelled mid-way."""
    pids: list[int] = []
    toolbox = Toolbox(MCP, tmp_path, {}, (), None, runner=sandbox, mcp_servers=[probe_server()])

    async def episode() -> None:
        async with toolbox.opened():
            answer = await toolbox.call("probe", "{}", time.monotonic() + 60)
            pids.append(int(answer.split()[1]))
            await asyncio.sleep(3600)  # a model that never answers

    async def with_wall_clock() -> None:
        task = asyncio.ensure_future(episode())
        while not pids:
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(with_wall_clock())
    for _ in range(600):
        if gone(pids[0]):
            break
        time.sleep(0.05)
    assert gone(pids[0])


def test_a_server_that_dies_at_start_is_a_harness_error_with_its_reason(tmp_path, sandbox):
    crashing = McpServer("broken", [sys.executable, "-c", "import sys; "
                                    "sys.exit('the server refuses to start')"], env=PATH)
    toolbox = Toolbox(MCP, tmp_path, {}, (), None, runner=sandbox, mcp_servers=[crashing])

    async def episode() -> None:
        async with toolbox.opened(start_timeout=60):
            pass

    with pytest.raises(HarnessError, match="MCP server broken failed.*refuses to start"):
        asyncio.run(episode())


def test_an_mcp_arm_without_servers_is_a_harness_error(tmp_path, sandbox):
    toolbox = Toolbox(MCP, tmp_path, {}, (), None, runner=sandbox)

    async def episode() -> None:
        async with toolbox.opened():
            pass

    with pytest.raises(HarnessError, match="names no MCP servers"):
        asyncio.run(episode())


def test_two_servers_with_the_same_name_are_refused(tmp_path, sandbox):
    toolbox = Toolbox(MCP, tmp_path, {}, (), None, runner=sandbox,
                      mcp_servers=[probe_server(), probe_server()])

    async def episode() -> None:
        async with toolbox.opened():
            pass

    with pytest.raises(HarnessError, match="unique"):
        asyncio.run(episode())


# -- the toolbox: gate and transcript ------------------------------------------------

def tracker_toolbox(tmp_path: Path, sandbox: TrialSandbox):
    environment = SUITE.environment(SUITE.arm("mcp"), tmp_path / "environment")
    environment.seed()
    toolbox = Toolbox(SUITE.arm("mcp"), tmp_path, environment.agent_env(),
                      environment.functions(), environment.call_function, runner=sandbox,
                      mcp_servers=environment.mcp_servers())
    return environment, toolbox


def test_mcp_calls_are_gated_and_recorded_with_server_tool_and_arguments(tmp_path, sandbox):
    environment, toolbox = tracker_toolbox(tmp_path, sandbox)

    async def episode() -> tuple[list[str], list[str]]:
        async with toolbox.opened():
            names = [spec["function"]["name"] for spec in toolbox.tool_specs()]
            deadline = time.monotonic() + 60
            answers = [await toolbox.call("close_issue", '{"number": 2}', deadline),
                       await toolbox.call("close_issue", '{"number": 99}', deadline),
                       await toolbox.call("shell", '{"command": "ls"}', deadline),
                       await toolbox.call("drop_database", "{}", deadline),
                       await toolbox.call("close_issue", "{not json", deadline)]
        return names, answers

    names, answers = asyncio.run(episode())
    assert names == [tool.name for tool in SUITE.environment(
        SUITE.arm("tools"), tmp_path / "other").functions()]
    assert json.loads(answers[0])["state"] == "closed"
    assert answers[1] == "error: there is no issue or pull request #99"
    assert answers[2].startswith("refused") and answers[3].startswith("refused")
    assert answers[4].startswith("error: the arguments are not valid JSON")
    assert toolbox.transcript[:2] == [
        {"kind": "mcp", "server": "tracker", "tool": "close_issue", "arguments": '{"number": 2}'},
        {"kind": "mcp", "server": "tracker", "tool": "close_issue", "arguments": '{"number": 99}'}]
    assert [(e["kind"], e.get("denied")) for e in toolbox.transcript[2:]] == [
        ("function", True), ("function", True), ("invalid", True)]
    assert environment.capture_state()["issues"]["2"]["state"] == "closed"
    # what ran is in the channel; the denied calls reached nothing
    assert audit_transcript(toolbox.transcript, MCP, (), mcp_servers=["tracker"]) == []


def test_the_gate_allows_only_listed_tools_of_the_arms_own_servers():
    listed = {"tracker": ("close_issue", "list_issues")}
    assert check_mcp_call("tracker", "close_issue", MCP, listed).allowed
    assert "lists no tool" in check_mcp_call("tracker", "drop", MCP, listed).message
    assert "not one of arm mcp's MCP servers" in check_mcp_call(
        "other", "close_issue", MCP, listed).message
    assert "has no MCP servers" in check_mcp_call("tracker", "close_issue", CLI, listed).message
    assert "has no MCP servers" in check_mcp_call("tracker", "close_issue", TOOLS, listed).message


def test_the_audit_finds_mcp_calls_outside_the_channel_and_other_calls_on_an_mcp_arm():
    mcp_call = {"kind": "mcp", "server": "tracker", "tool": "close_issue", "arguments": "{}"}
    assert audit_transcript([mcp_call], MCP, (), mcp_servers=["tracker"]) == []
    assert audit_transcript([{**mcp_call, "denied": True}], CLI, ()) == []  # it never ran
    for arm in (CLI, TOOLS):
        (finding,) = audit_transcript([mcp_call], arm, ("close_issue",))
        assert "has no MCP servers" in finding.reason
    (finding,) = audit_transcript([{**mcp_call, "server": "elsewhere"}], MCP, (),
                                  mcp_servers=["tracker"])
    assert "'elsewhere' is not one of arm mcp's MCP servers" in finding.reason
    leaks = [{"kind": "shell", "command": "ls"},
             {"kind": "function", "name": "close_issue", "arguments": "{}"},
             {"kind": "other", "name": "WebFetch"}]
    assert [f.index for f in audit_transcript(leaks, MCP, (), mcp_servers=["tracker"])] == [0, 1, 2]


NAMES = st.text(alphabet="abcdefgh_", min_size=1, max_size=4)


@given(server=NAMES, tool=NAMES, listed=st.dictionaries(NAMES, st.lists(NAMES, max_size=4),
                                                        max_size=3),
       arm=st.sampled_from([MCP, CLI, TOOLS]))
def test_gate_and_audit_agree_on_any_mcp_call(server, tool, listed, arm):
    decision = check_mcp_call(server, tool, arm, listed)
    assert decision.allowed == (arm.channel == "mcp" and tool in listed.get(server, ())
                                and server in listed)
    # the audit knows the servers, not what they listed: it admits whatever the gate
    # admitted, and finds a leak wherever the server is not the arm's
    findings = audit_transcript([{"kind": "mcp", "server": server, "tool": tool}], arm, (),
                                mcp_servers=listed)
    if decision.allowed:
        assert findings == []
    assert (findings == []) == (arm.channel == "mcp" and server in listed)


def test_a_tool_result_becomes_the_text_the_model_reads():
    from mcp import types

    def result(*blocks, error=False, structured=None):
        return types.CallToolResult(content=list(blocks), isError=error,
                                    structuredContent=structured)

    text = types.TextContent(type="text", text="hello")
    image = types.ImageContent(type="image", data="AA==", mimeType="image/png")
    assert tool_text(result(text)) == "hello"
    assert tool_text(result(text, image)) == "hello\n[image content]"
    assert tool_text(result(text, error=True)) == "error: hello"
    assert tool_text(result(structured={"n": 1})) == '{"n": 1}'


# -- the command driver's contract ---------------------------------------------------

def result_with(*entries: dict) -> bytes:
    return json.dumps({"final_report": "ok", "turns": 1, "tokens": {},
                       "transcript": list(entries)}).encode()


def test_the_contract_takes_mcp_entries_with_text_or_object_arguments():
    parsed = parse_command_result(result_with(
        {"kind": "mcp", "server": "tracker", "tool": "close_issue", "arguments": {"number": 2}},
        {"kind": "mcp", "server": "tracker", "tool": "list_issues", "arguments": "{}",
         "denied": True},
        {"kind": "shell", "command": "ls"}))
    first, second, third = parsed.transcript
    assert (first.server, first.tool, first.arguments) == ("tracker", "close_issue", {"number": 2})
    assert second.denied and second.arguments == "{}"
    assert third.command == "ls" and third.server is None


@pytest.mark.parametrize("entry", [
    {"kind": "mcp", "server": "tracker"},
    {"kind": "mcp", "tool": "close_issue"},
    {"kind": "mcp", "server": "", "tool": "close_issue"},
])
def test_the_contract_refuses_an_mcp_entry_without_server_or_tool(entry):
    with pytest.raises(HarnessError, match="entry 2 is an mcp call without a server and a tool"):
        parse_command_result(result_with({"kind": "shell", "command": "ls"}, entry))


def test_the_contract_refuses_mcp_entries_of_the_wrong_types():
    with pytest.raises(HarnessError, match="not a valid result"):
        parse_command_result(result_with({"kind": "mcp", "server": 3, "tool": "x"}))
    with pytest.raises(HarnessError, match="not a valid result"):
        parse_command_result(result_with({"kind": "mcp", "server": "s", "tool": "x",
                                          "arguments": [1]}))


def test_an_external_agent_gets_the_servers_in_the_usual_mcp_servers_shape():
    server = McpServer("tracker", ["/usr/bin/python3", "-m", "srv", "--database", "db"],
                       env={"A": "1"}, cwd="/trial")
    assert json.loads(mcp_servers_json([server])) == {"mcpServers": {"tracker": {
        "command": "/usr/bin/python3", "args": ["-m", "srv", "--database", "db"],
        "env": {"A": "1"}, "cwd": "/trial"}}}
