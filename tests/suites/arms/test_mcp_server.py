"""The tracker's MCP server (tracker/mcp_server.py) against a fresh tracker, in memory
through the official SDK's connected client and server sessions: it offers exactly the
`tools` arm's functions and answers like them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from benchwarden.suites.arms.tracker import functions
from benchwarden.suites.arms.tracker.mcp_server import build_server
from benchwarden.suites.arms.tracker.operations import Tracker
from benchwarden.suites.arms.tracker.seed import seed
from benchwarden.suites.arms.tracker.tasks import AGENT

pytest.importorskip("mcp")


def fresh(folder: Path) -> Tracker:
    folder.mkdir(parents=True, exist_ok=True)
    tracker = Tracker.create(folder / "tracker.sqlite", user=AGENT)
    seed(tracker)
    return tracker


def over_mcp(tracker: Tracker,
             calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[Any], list[Any]]:
    """(the tools the server lists, the result of each call), through a real session."""
    from mcp.shared.memory import create_connected_server_and_client_session

    async def session() -> tuple[list[Any], list[Any]]:
        server = build_server(str(tracker.path), tracker.user)
        async with create_connected_server_and_client_session(server) as client:
            listed = (await client.list_tools()).tools
            results = [await client.call_tool(name, arguments) for name, arguments in calls]
        return listed, results

    return anyio.run(session)


def test_the_server_lists_the_tools_arms_functions_with_their_schemas(tmp_path):
    listed, _ = over_mcp(fresh(tmp_path), [])
    assert [tool.name for tool in listed] == [tool.name for tool in functions.FUNCTIONS]
    for offered, function in zip(listed, functions.FUNCTIONS, strict=True):
        assert offered.description == function.description
        assert offered.inputSchema == dict(function.parameters)


def test_a_mutation_over_mcp_changes_the_tracker_like_the_function_does(tmp_path):
    over = fresh(tmp_path / "mcp")
    direct = fresh(tmp_path / "direct")
    calls = [("close_issue", {"number": 2}), ("add_labels", {"number": 5, "labels": ["bug"]}),
             ("comment", {"number": 5, "body": "Seen."}), ("assign", {"number": 5, "user": "@me"})]
    _, results = over_mcp(over, calls)
    for name, arguments in calls:
        functions.call(direct, name, arguments)
    assert not any(result.isError for result in results)
    assert over.capture_state() == direct.capture_state()
    assert over.capture_state()["issues"]["2"]["state"] == "closed"


def test_reads_answer_the_same_text_as_the_function(tmp_path):
    tracker = fresh(tmp_path)
    calls = [("list_issues", {"state": "open"}), ("show_pull", {"number": 9}),
             ("list_labels", {}), ("whoami", {})]
    _, results = over_mcp(tracker, calls)
    for (name, arguments), result in zip(calls, results, strict=True):
        assert result.content[0].text == functions.call(tracker, name, arguments)
    assert len(json.loads(results[0].content[0].text)) == 5


@pytest.mark.parametrize("name, arguments, message", [
    ("close_issue", {"number": 99}, "there is no issue or pull request #99"),
    ("close_issue", {}, "missing arguments ['number']"),
    ("close_issue", {"number": 2, "why": "x"}, "unknown arguments ['why']"),
    ("list_issues", {"state": "sideways"}, "state must be one of open, closed, all"),
    ("drop_database", {}, "unknown function 'drop_database'"),
])
def test_a_bad_call_is_a_tool_error_with_the_functions_message(tmp_path, name, arguments, message):
    tracker = fresh(tmp_path)
    before = tracker.capture_state()
    _, (result,) = over_mcp(tracker, [(name, arguments)])
    assert result.isError
    assert message in result.content[0].text
    with pytest.raises(ValueError) as refused:
        functions.call(tracker, name, arguments)
    assert result.content[0].text == str(refused.value)
    assert tracker.capture_state() == before


def test_an_integer_sent_as_text_is_accepted_as_on_the_tools_arm(tmp_path):
    tracker = fresh(tmp_path)
    _, (result,) = over_mcp(tracker, [("close_issue", {"number": "2"})])
    assert not result.isError
    assert tracker.capture_state()["issues"]["2"]["state"] == "closed"
