"""The tracker environment: the seed plan, and three interfaces over one implementation."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request

import pytest

from benchwarden.suites.arms.boundary import TrialSandbox
from benchwarden.suites.arms.tasks import DEFAULT_TIERS
from benchwarden.suites.arms.tracker import functions
from benchwarden.suites.arms.tracker.operations import Tracker, TrackerError
from benchwarden.suites.arms.tracker.suite import SUITE, make_environment


@pytest.fixture
def seeded(tmp_path):
    """Fresh seeded environments; the http arm's REST server is started the way a trial
    starts it (a service of the trial's supervisor; no boundary here, so the test, on
    the host, can reach it)."""
    environments = []
    sandboxes = []

    def make(arm_name: str):
        folder = tmp_path / f"{arm_name}-{len(environments)}"
        environment = make_environment(SUITE.arm(arm_name), folder)
        environment.seed()
        environments.append(environment)
        if environment.services():
            sandbox = TrialSandbox("none", folder)
            sandboxes.append(sandbox)
            sandbox.start(environment.services())
        return environment

    yield make
    for sandbox in sandboxes:
        sandbox.close()
    for environment in environments:
        environment.destroy()


def test_seed_plan_matches_the_description(seeded):
    state = seeded("tools").capture_state()
    assert sorted(state["labels"]) == ["bug", "documentation", "enhancement", "priority"]
    issues = state["issues"]
    assert len(issues) == 8
    assert sorted(i["state"] for i in issues.values()) == ["closed"] * 3 + ["open"] * 5
    assert [n for n, i in issues.items() if i["state"] == "closed" and not i["labels"]] == ["7"]
    pulls = state["pulls"]
    assert sorted(pulls) == ["10", "11", "9"]
    assert pulls["9"]["labels"] == ["bug"]
    assert pulls["10"]["reviews"][0][:2] == ["alice", "comment"]
    assert pulls["10"]["reviews"][0][3] == [["src/settings.py", 42, "Persist this value."]]
    assert pulls["11"]["comments"] == [["alice", "Benchmarks would help here."]]
    assert all(i["author"] != "agent" for i in [*issues.values(), *pulls.values()])


def test_suite_has_about_twenty_tasks_over_the_four_tiers():
    assert 18 <= len(SUITE.tasks) <= 24
    assert {t.tier for t in SUITE.tasks} == set(DEFAULT_TIERS)
    assert [a.name for a in SUITE.arms] == ["cli", "http", "tools", "mcp"]


def test_fresh_environments_are_independent(seeded):
    first, second = seeded("tools"), seeded("tools")
    first.call_function("close_issue", {"number": 2})
    assert first.capture_state()["issues"]["2"]["state"] == "closed"
    assert second.capture_state()["issues"]["2"]["state"] == "open"


def test_the_three_interfaces_reach_the_same_operations(seeded):
    cli, http, tools = seeded("cli"), seeded("http"), seeded("tools")
    env = cli.agent_env()
    run = subprocess.run(["tracker", "issue", "label", "4", "--add", "bug"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    url = http.agent_env()["TRACKER_URL"]
    request = urllib.request.Request(f"{url}/issues/4/labels", method="POST",
                                     data=json.dumps({"labels": ["bug"]}).encode())
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert json.load(answer)["labels"] == ["bug"]
    tools.call_function("add_labels", {"number": 4, "labels": ["bug"]})
    states = [e.capture_state() for e in (cli, http, tools)]
    assert states[0] == states[1] == states[2]
    assert states[0]["issues"]["4"]["labels"] == ["bug"]


def test_refusals_are_one_line_answers_on_every_interface(seeded):
    cli, http, tools = seeded("cli"), seeded("http"), seeded("tools")
    run = subprocess.run(["tracker", "issue", "close", "99"], env=cli.agent_env(),
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "no issue or pull request #99" in run.stderr
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(http.agent_env()["TRACKER_URL"] + "/issues/99", timeout=10)
    assert error.value.code == 404 and "no issue #99" in json.load(error.value)["error"]
    with pytest.raises(ValueError, match="no label 'nope'"):
        tools.call_function("add_labels", {"number": 1, "labels": ["nope"]})
    with pytest.raises(ValueError, match="unknown arguments"):
        tools.call_function("close_issue", {"number": 1, "force": True})
    with pytest.raises(ValueError, match="labels must be a list of strings"):
        tools.call_function("add_labels", {"number": 1, "labels": "bug"})
    with pytest.raises(ValueError, match="kind must be one of"):
        tools.call_function("review_pull", {"number": 9, "kind": "lgtm"})
    assert json.loads(tools.call_function("show_issue", {"number": "2"}))["number"] == 2


def test_operations_enforce_their_rules(tmp_path):
    tracker = Tracker.create(tmp_path / "t.sqlite")
    tracker.create_label("bug", "#D73A4A")
    assert tracker.capture_state()["labels"]["bug"]["color"] == "d73a4a"
    with pytest.raises(TrackerError, match="already exists"):
        tracker.create_label("bug", "#000000")
    with pytest.raises(TrackerError, match="six hex digits"):
        tracker.create_label("x", "red")
    pull = tracker.create_pull("Fix", "fix-branch")["number"]
    tracker.merge_pull(pull)
    with pytest.raises(TrackerError, match="merged"):
        tracker.set_state(pull, "open")
    with pytest.raises(TrackerError, match="no user"):
        tracker.assign(pull, "mallory")
    assert tracker.assign(pull, "@me")["assignees"] == ["agent"]


def test_function_tool_schemas_name_real_operations():
    for tool in functions.FUNCTIONS:
        assert hasattr(Tracker, tool.name), tool.name
        assert set(tool.parameters["required"]) <= set(tool.parameters["properties"])
