"""The toolbox every driver's calls go through: gate first, then run; the agent's
mistakes are answered, never raised."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchwarden.suites.arms.agents import Toolbox, _Progress
from benchwarden.suites.arms.boundary import TrialSandbox
from benchwarden.suites.arms.isolation import BASE_UTILITIES
from benchwarden.suites.arms.tasks import Arm, FunctionTool

SHELL = Arm("shell", "shell", "", allowed_commands=BASE_UTILITIES)
FUNCTIONS = Arm("functions", "functions", "")
ECHO = FunctionTool("echo", "echo", {"type": "object", "properties": {}})


def call(toolbox: Toolbox, name: str, arguments: str) -> str:
    return asyncio.run(toolbox.call(name, arguments, time.monotonic() + 30))


@pytest.fixture()
def sandbox(tmp_path: Path):
    """The same supervisor a trial uses, without the boundary (the boundary has its own
    tests in test_escapes.py): these tests are about the toolbox."""
    with TrialSandbox("none", tmp_path) as running:
        running.start()
        yield running


def test_shell_calls_run_in_the_workdir_with_the_minimal_environment(tmp_path, sandbox):
    home = tmp_path / "home"
    home.mkdir()
    toolbox = Toolbox(SHELL, tmp_path, {"GREETING": "hello", "HOME": "/elsewhere"}, (), None,
                      runner=sandbox, home=home)
    answer = call(toolbox, "shell", '{"command": "echo $GREETING $HOME $CURL_HOME | tee out.txt"}')
    assert answer.startswith(f"hello {home} {home}") and "[exit status 0]" in answer
    assert (tmp_path / "out.txt").read_text().strip() == f"hello {home} {home}"
    assert toolbox.transcript == [{"kind": "shell",
                                   "command": "echo $GREETING $HOME $CURL_HOME | tee out.txt",
                                   "exit_status": 0}]


def test_denied_and_malformed_calls_are_answered_and_not_run(tmp_path, sandbox):
    toolbox = Toolbox(SHELL, tmp_path, {}, (), None, runner=sandbox)
    assert call(toolbox, "shell", '{"command": "touch made && python3 -c 1"}').startswith("refused")
    assert not (tmp_path / "made").exists()
    assert call(toolbox, "shell", "{not json").startswith("error: the arguments are not valid JSON")
    assert call(toolbox, "read_file", '{"path": "/etc/passwd"}').startswith("refused")
    assert "[exit status 0]" in call(toolbox, "shell", '"echo bare"')  # a bare command string
    assert [entry.get("denied", False) for entry in toolbox.transcript] == [True, True, True, False]


def test_a_slow_command_is_killed_at_its_timeout(tmp_path, sandbox):
    toolbox = Toolbox(SHELL, tmp_path, {}, (), None, command_timeout=0.5, runner=sandbox)
    assert call(toolbox, "shell", '{"command": "sleep 30"}').startswith("[command killed")
    assert toolbox.transcript[0]["timed_out"] is True


def test_background_jobs_die_with_their_command(tmp_path, sandbox):
    toolbox = Toolbox(SHELL, tmp_path, {}, (), None, command_timeout=10, runner=sandbox)
    answer = call(toolbox, "shell", '{"command": "(sleep 2; touch late) & echo started"}')
    assert answer.startswith("started") and "[exit status 0]" in answer
    time.sleep(3)
    assert not (tmp_path / "late").exists()


def test_output_beyond_the_limit_is_cut_and_said_so(tmp_path, sandbox):
    toolbox = Toolbox(SHELL, tmp_path, {}, (), None, runner=sandbox)
    answer = call(toolbox, "shell", '{"command": "seq 1 100000"}')
    assert "[output cut at" in answer and len(answer) < 17_000


def test_without_a_sandbox_no_command_runs(tmp_path):
    toolbox = Toolbox(SHELL, tmp_path, {}, (), None)
    with pytest.raises(Exception, match="no sandbox"):
        call(toolbox, "shell", '{"command": "touch made"}')
    assert not (tmp_path / "made").exists()


def test_function_calls_reach_the_environment_and_errors_are_answered(tmp_path):
    def environment_call(name, arguments):
        if arguments.get("fail"):
            raise ValueError("no such thing")
        return f"called {name}"

    toolbox = Toolbox(FUNCTIONS, tmp_path, {}, (ECHO,), environment_call)
    assert call(toolbox, "echo", "{}") == "called echo"
    assert call(toolbox, "echo", '{"fail": true}') == "error: no such thing"
    assert call(toolbox, "shell", '{"command": "ls"}').startswith("refused")
    assert [t["function"]["name"] for t in toolbox.tool_specs()] == ["echo"]


def test_usage_is_split_into_fresh_and_cached_input():
    progress = _Progress()
    progress.add_usage(SimpleNamespace(prompt_tokens=100, cached_prompt_tokens=60,
                                       completion_tokens=7, reasoning_tokens=None))
    progress.add_usage(SimpleNamespace(prompt_tokens=50, cached_prompt_tokens=None,
                                       completion_tokens=3, reasoning_tokens=2))
    tokens = progress.tokens
    assert (tokens.fresh_input, tokens.cache_read, tokens.output,
            tokens.reasoning) == (90, 60, 10, 2)
