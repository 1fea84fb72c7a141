"""The arms suite's escape corpus: each escape is proven absent by a marker file, a
listener that must stay silent, or the database the checker reads.

Two walls, tested separately:
- the command gate (pure, in memory): the issue's escapes and the forms around them are
  denied with a reason, gate and audit alike; a property test runs what the gate allows
  in a real bash whose PATH holds only logging stubs and checks that every program bash
  really started was one the gate had named and permitted;
- the OS boundary (real bubblewrap, through the real CLI and the openai driver with the
  scripted fake model): commands the gate allows but that try to escape. Every one is
  also run with `--isolation none` as a positive control, proving the marker or the
  listener would have seen the escape had the boundary not been there.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.cli.main import cli
from benchwarden.core.store import open_store
from benchwarden.suites.arms.isolation import (
    BASE_UTILITIES,
    NetworkChannel,
    audit_transcript,
    check_command,
    permitted_names,
)
from benchwarden.suites.arms.tasks import Arm
from tests.conftest import bwrap_or_skip
from tests.suites.arms.fake_model import FakeToolCallingModel

CLI = Arm("cli", "shell", "", allowed_commands=BASE_UTILITIES | {"tracker"})
HTTP = Arm("http", "shell", "", allowed_commands=BASE_UTILITIES | {"curl"},
           network_commands=frozenset({"curl"}))
ORIGIN = "http://127.0.0.1:43117"
CHANNEL = NetworkChannel.of([ORIGIN], {"TRACKER_URL": ORIGIN})

# -- the gate ----------------------------------------------------------------------------

GATE_ESCAPES = [
    # the escape 1 and its relatives: substitutions inside parameter expansions
    ("echo ${x:-$(sh -c 'echo ran > M')}", "'sh' is never allowed"),
    ("echo ${x:=$(sh -c 'echo ran > M')}", "'sh' is never allowed"),
    ("echo ${x:+$(sh)} ${x:?$(sh)}", "'sh' is never allowed"),
    ("echo ${x/$(sh)/}", "'sh' is never allowed"),
    ("echo ${x//a/$(sh)}", "'sh' is never allowed"),
    ("echo ${x#$(sh)} ${x%%$(sh)}", "'sh' is never allowed"),
    ("echo ${x:-`sh`}", "'sh' is never allowed"),
    ("echo \"${x:-$(sh)}\"", "'sh' is never allowed"),
    ("echo \"${x:-'$(sh)'}\"", "'sh' is never allowed"),  # bash runs it inside double quotes
    ("echo ${x:-\"$(python3 -c 1)\"}", "'python3' is never allowed"),
    ("echo ${x:-<(sh)}", "'sh' is never allowed"),
    ("echo ${x:-#$(sh)}", "'sh' is never allowed"),  # `#` is not a comment inside ${...}
    ("echo ${x:- #$(sh)}", "'sh' is never allowed"),
    ("echo ${x:-${y:-$(sh)}}", "cannot be read"),
    ("echo ${x:-$(echo $(sh))}", "'sh' is never allowed"),
    ("tracker issue list ${x:-$(tracker issue close 2 | sh)}", "'sh' is never allowed"),
    # bashlex keeps a tilde prefix whole; bash still runs what follows the ~
    ("echo ~$(sh -c 'echo ran > M')", "'sh' is never allowed"),
    ("echo ~`sh`", "'sh' is never allowed"),
    ("echo ~${x:-$(sh)}", "'sh' is never allowed"),
    # arithmetic: bashlex cannot read it, so it is refused with the reason
    ("echo $(( $(sh) + 1 ))", "$((...)) and $[...] cannot be checked"),
    ("echo $((1 + 2))", "cannot be checked"),
    ("echo $[1 + $(sh)]", "cannot be checked"),
    # forms whose effect cannot be read statically
    ("echo ${!x}", "indirect expansion"),
    ("echo ${!prefix*}", "indirect expansion"),
    ("echo ${x@P}", "transformation"),
    ("echo ${arr[$(sh)]}", "array subscript"),
    ("for i in 'a[$(touch M)]'; do echo ${arr[i]}; done", "array subscript"),
    ("echo ${x:$(sh):1}", "substring offsets"),
    ("echo ${x:i}", "substring offsets"),
    ("printf -v 'a[$(touch M)]' %s 1", "printf -v is not allowed"),
    ("test -v 'a[$(touch M)]'", "test -v is not allowed"),
    ("[ -v 'a[$(touch M)]' ]", "[ -v is not allowed"),
    ("printf -vx 'a[$(touch M)]' 1", "printf -vx is not allowed"),
    # allowed programs that run another program
    ("tracker issue list | sort -S 1K --compress-program=sh", "sort --compress-program runs"),
    ("sort -S 1K --compress-prog=sh f", "sort --compress-program runs"),
    ("sort --co=sh f", "sort --compress-program runs"),
    ("sort --{compress-program,x}=sh f", "expands to other words"),
    ("sort --c* f", "expands to other words"),
    ("for o in --compress-program=sh; do sort $o f; done", "is computed"),
    # here-documents and here-strings
    ("cat <<EOF\n$(sh -c 'echo ran > M')\nEOF", "'sh' is never allowed"),
    ("cat <<EOF\n${x:-$(sh)}\nEOF", "'sh' is never allowed"),
    ("cat <<EOF\n`sh`\nEOF", "'sh' is never allowed"),
    ("cat <<< \"$(sh)\"", "'sh' is never allowed"),
    ("cat <<< ${x:-$(sh)}", "'sh' is never allowed"),
    # the earlier forms stay refused
    ("tracker issue list | sh", "'sh' is never allowed"),
    ("$(echo sh) -c ls", "computed"),
    ("$'\\x73\\x68' -c ls", "computed"),
    ("echo hi > /dev/tcp/127.0.0.1/80", "/dev/tcp"),
    ("PATH=. tracker", "environment assignment"),
    ("x=sh; $x", "environment assignment"),
    ("f() { sh; }; f", "function definitions"),
    ("[[ -n $(sh) ]]", "cannot read"),
]


@pytest.mark.parametrize("command, fragment", GATE_ESCAPES)
def test_the_gate_and_the_audit_refuse_every_escape_with_a_reason(command, fragment):
    decision = check_command(command, CLI)
    assert not decision.allowed, command
    assert fragment in decision.message, decision.message
    # the audit applies the same check to a call that claims it ran
    findings = audit_transcript([{"kind": "shell", "command": command}], CLI, ())
    assert len(findings) == 1 and findings[0].reason == decision.message


def test_sorts_compress_program_really_runs_code_and_the_gate_refuses_it(tmp_path):
    """Why sort's option is on the list: in a plain bash it runs the data as commands."""
    marker = tmp_path / "sorted-and-ran"
    command = (f"seq 1 30000 | sed 's|.*|touch {marker}|' | sort -S 64K "
               "--compress-program=sh > /dev/null")
    subprocess.run(["/bin/bash", "-c", command], cwd=tmp_path, capture_output=True, timeout=60)
    assert marker.exists()
    gated = command.replace(f"sed 's|.*|touch {marker}|'", "tracker issue list")
    assert not check_command(gated, CLI).allowed


@pytest.mark.parametrize("command", [
    "curl --engine ./evil.so \"$TRACKER_URL/\"",
    "curl --{config,x}=cfg \"$TRACKER_URL/\"",
    "curl --conf* \"$TRACKER_URL/\"",
])
def test_curl_options_that_load_code_or_expand_into_options_are_refused(command):
    assert not check_command(command, HTTP, CHANNEL).allowed


@pytest.mark.parametrize("command", [
    "echo ${x:-$(curl -s http://example.com/)}",
    "cat <<EOF\n$(curl -s http://127.0.0.1:9/)\nEOF",
    "echo ${x:-\"$(curl http://example.com)\"}",
])
def test_a_network_tool_hidden_in_an_expansion_is_held_to_the_channel(command):
    decision = check_command(command, HTTP, CHANNEL)
    assert not decision.allowed and "curl may reach only" in decision.message


@pytest.mark.parametrize("command", [
    "echo ${HOME} ${#x} ${x:-default} ${x:1:2} ${x: -3} ${x%%.txt} ${x/a/b}",
    "echo ${x:-$(tracker issue list | wc -l)}",
    "cat <<EOF\nplain text and $HOME\nEOF",
    "tracker issue comment 2 --body \"see ${x:-the log}\"",
])
def test_ordinary_expansions_still_pass(command):
    decision = check_command(command, CLI)
    assert decision.allowed, decision.message


_OPERATORS = [":-", ":=", ":+", "-", "=", "+", "#", "##", "%", "%%", "/", "//", "^", ","]
_ALLOWED_STUBS = ["cat", "wc", "head", "sort"]
_FORBIDDEN_STUBS = ["sh", "python3", "perl", "node"]
_STUBS = _ALLOWED_STUBS + _FORBIDDEN_STUBS


@st.composite
def hidden_substitutions(draw: Any) -> str:
    """`echo` with a stub program hidden in a parameter expansion, a here-document or a
    here-string, in any of the substitution syntaxes, nested up to twice."""
    name = draw(st.sampled_from(_STUBS))
    inner = name
    for _ in range(draw(st.integers(1, 2))):
        syntax = draw(st.sampled_from(["$({})", "`{}`", "\"$({})\"", "${{x{op}$({})}}",
                                       "\"${{x{op}$({})}}\"", "${{x{op}'$({})'}}",
                                       "\"${{x{op}'$({})'}}\"", "~$({})", "~`{}`",
                                       "~${{x{op}$({})}}"]))
        operator = draw(st.sampled_from(_OPERATORS))
        inner = syntax.format(inner if inner == name else f"echo {inner}", op=operator)
    # glue quoted or special text around it: bashlex has flattened such words before
    prefix = draw(st.sampled_from(["", "~", "a", "'q'", '"q"', "x=", "--o=", "$'q'", "~/"]))
    suffix = draw(st.sampled_from(["", "a", "'q'", '"q"', "/", "$'q'"]))
    shape = draw(st.sampled_from(["echo {}", "cat <<EOF\n{}\nEOF", "cat <<< {}",
                                  "echo a | cat {}", "echo {} {}", "echo > {}", "cat < {}",
                                  "for i in {}; do echo $i; done", "if echo {}; then echo; fi",
                                  "cat <<-EOF\n\t{}\n\tEOF", "echo \"x {} y\"", "( echo {} )"]))
    return shape.format(prefix + inner + suffix, inner)


@pytest.fixture(scope="module")
def logging_path(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A PATH of stub programs that only log their own name."""
    folder = tmp_path_factory.mktemp("stubs")
    log = folder / "ran.log"
    for name in _STUBS:
        stub = folder / name
        stub.write_text(f"#!/bin/sh\necho {name} >> {log}\n")
        stub.chmod(0o755)
    return folder, log


@settings(max_examples=120, deadline=None)
@given(hidden_substitutions())
def test_whatever_the_gate_allows_runs_only_permitted_programs_in_real_bash(logging_path,
                                                                           command):
    folder, log = logging_path
    log.write_text("")
    arm = Arm("stubs", "shell", "", allowed_commands=frozenset(_ALLOWED_STUBS) | {"echo"})
    decision = check_command(command, arm)
    subprocess.run(["/bin/bash", "--noprofile", "--norc", "-c", command], cwd=folder,
                   env={"PATH": str(folder)}, capture_output=True, timeout=20, check=False)
    ran = set(log.read_text().split())
    if decision.allowed:
        assert ran <= permitted_names(arm), (command, ran)
    # and when bash ran a forbidden stub, the gate had refused the command
    if ran - permitted_names(arm):
        assert not decision.allowed, command


# -- the boundary, for real ----------------------------------------------------------------



class Listener:
    """An HTTP listener on the host's loopback that records every request path."""

    def __init__(self) -> None:
        seen = self.seen = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                seen.append(self.path)
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def fake():
    with FakeToolCallingModel() as server:
        yield server


@pytest.fixture()
def listener():
    running = Listener()
    yield running
    running.close()


@pytest.fixture()
def outside(tmp_path: Path):
    """A folder outside /tmp (the boundary's /tmp is private, so a marker there would
    prove nothing): under the invoking user's ~/.cache, removed afterwards."""
    folder = Path.home() / ".cache" / f"benchwarden-escape-test-{uuid.uuid4().hex[:12]}"
    folder.mkdir(parents=True)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


ISOLATIONS = [pytest.param("bwrap", id="bwrap"), pytest.param("none", id="none-control")]


def run_script(fake: FakeToolCallingModel, store: Path, arm: str, commands: list[str],
               isolation: str, task: str = "close-issue", suite: str = "tracker",
               home: Path | None = None) -> tuple[Any, list[str]]:
    """Run one trial whose model issues `commands`; (its record, the tool answers)."""
    if isolation == "bwrap":
        bwrap_or_skip()
    name = uuid.uuid4().hex
    fake.scripts[name] = commands
    env = {"COLUMNS": "200"}
    if home is not None:
        env["HOME"] = str(home)
    result = CliRunner().invoke(cli, [
        "arms", "run", "--suite", suite, "--arm", arm, "--task", task, "--trials", "1",
        "--driver", "openai", "--url", fake.url, "--model", f"script:{name}",
        "--isolation", isolation, "--store", str(store)], catch_exceptions=False, env=env)
    assert result.exit_code == 0, result.output
    with open_store(store) as opened:
        (record,) = [r for r in opened.records(suite="arms")
                     if r.payload["model"] == f"script:{name}"]
        assert opened.runs("arms")[-1].run.config["isolation"] == isolation
    last = [body for body in fake.requests if body["model"] == f"script:{name}"][-1]
    answers = [m["content"] for m in last["messages"] if m["role"] == "tool"]
    return record, answers


def test_escape_1_param_default_substitution_never_runs(fake, tmp_path, outside):
    marker = outside / "ran"
    command = f"echo ${{x:-$(sh -c 'echo ran > {marker}')}}"
    for arm in ("cli", "http"):
        for isolation in ("bwrap", "none"):  # the gate stops it even without the boundary
            record, answers = run_script(fake, tmp_path / f"{arm}-{isolation}.sqlite", arm,
                                         [command], isolation)
            assert answers[0].startswith("refused (not run)")
            assert record.payload["denied_calls"] == 1
            assert not marker.exists()


TAMPER = ("printf '#!/bin/sh\\ncd \"$(dirname \"$0\")/..\" && sqlite3 tracker.sqlite "
          "\"update items set state=%s where number=2\"\\n' \"'closed'\" > \"$(which tracker)\"")


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_escape_2_overwriting_the_arms_program_cannot_change_the_grade(fake, tmp_path, isolation):
    assert check_command(TAMPER, CLI).allowed  # the gate lets it through: the boundary must hold
    record, answers = run_script(fake, tmp_path / "s.sqlite", "cli",
                                 [TAMPER, "tracker", "cat \"$(which tracker)\""], isolation)
    if isolation == "bwrap":
        assert "Read-only file system" in answers[0]
        assert "benchwarden.suites.arms.tracker.cli" in answers[2]  # the program is intact
        # the outcome is what the database says: issue 2 was never closed
        assert record.outcome == "fail" and record.payload["failure"] == "incorrect"
        assert any("issues 2 state" in reason for reason in record.payload["reasons"])
    else:  # control: without the boundary the tampered program closes the issue itself
        assert "sqlite3 tracker.sqlite" in answers[2]
        assert record.outcome == "pass"


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_escape_3_a_written_curlrc_cannot_reroute_curl(fake, tmp_path, listener, isolation):
    write = f"echo 'url = \"http://127.0.0.1:{listener.port}/marker/curlrc\"' > ~/.curlrc"
    fetch = 'curl -s "$TRACKER_URL/issues" | head -c 40'
    assert check_command(write, HTTP).allowed
    record, answers = run_script(fake, tmp_path / "s.sqlite", "http", [write, fetch], isolation)
    if isolation == "bwrap":
        assert "Read-only file system" in answers[0]
        assert listener.seen == []
        assert answers[1].lstrip().startswith("[")  # the real channel still answers
    else:
        assert listener.seen == ["/marker/curlrc"]


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_an_allowed_curl_cannot_reach_a_host_listener(fake, tmp_path, listener, isolation):
    # this suite's environment names no origins, so the gate checks curl by name only
    command = f"curl -s -m 5 http://127.0.0.1:{listener.port}/marker/host; echo status $?"
    record, answers = run_script(fake, tmp_path / "s.sqlite", "http", [command], isolation,
                                 suite="tests.suites.arms.escape_suite:SUITE")
    assert "refused" not in answers[0]
    if isolation == "bwrap":
        assert listener.seen == [] and "status 7" in answers[0]  # curl: could not connect
    else:
        assert listener.seen == ["/marker/host"]


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_writes_outside_the_trial_folder_fail(fake, tmp_path, outside, isolation):
    marker = outside / "escaped"
    record, answers = run_script(fake, tmp_path / "s.sqlite", "cli",
                                 [f"echo escaped > {marker}", f"mkdir {outside}/made",
                                  "echo fine > inside.txt && cat inside.txt"], isolation)
    assert "fine" in answers[2]  # the trial folder itself is writable
    if isolation == "bwrap":
        assert not marker.exists() and not (outside / "made").exists()
        assert "Read-only file system" in answers[0]
    else:
        assert marker.read_text() == "escaped\n"


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_the_users_benchwarden_folder_and_the_store_are_hidden(fake, outside, isolation):
    home = outside / "home"
    (home / ".benchwarden").mkdir(parents=True)
    (home / ".benchwarden" / "secret.txt").write_text("TOPSECRET")
    store = outside / "store.sqlite"
    record, answers = run_script(fake, store, "cli",
                                 [f"cat {home}/.benchwarden/secret.txt; ls -A {home}/.benchwarden",
                                  f"head -c 15 {store}"], isolation, home=home)
    if isolation == "bwrap":
        assert "TOPSECRET" not in answers[0] and "No such file" in answers[0]
        assert "SQLite format" not in answers[1]
    else:
        assert "TOPSECRET" in answers[0]
        assert "SQLite format" in answers[1]


def test_a_trials_processes_cannot_see_the_host_nor_outlive_their_command(fake, tmp_path):
    record, answers = run_script(fake, tmp_path / "s.sqlite", "cli", [
        "ls /proc | grep -c '^[0-9]'",
        "(sleep 1; echo late > late.txt) & echo started",
        "sleep 2; cat late.txt; echo end"], "bwrap")
    # bwrap's init, the supervisor, this command: none of the host's processes
    assert int(answers[0].split()[0]) < 12
    assert "started" in answers[1]
    assert "No such file" in answers[2]  # the background job died with its command


def test_a_missing_bwrap_is_one_line_exit_2_naming_the_package(fake, tmp_path, monkeypatch):
    from benchwarden.core import sandbox

    monkeypatch.setenv("BENCHWARDEN_BWRAP", "")
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    store = tmp_path / "s.sqlite"
    result = CliRunner().invoke(cli, [
        "arms", "run", "--arm", "cli", "--task", "close-issue", "--trials", "1",
        "--driver", "openai", "--url", fake.url, "--model", "solve", "--store", str(store)],
        env={"COLUMNS": "300"})
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "bubblewrap" in lines[0] and "--isolation none" in lines[0]
    assert not store.exists() or _no_records(store)


def _no_records(store: Path) -> bool:
    with open_store(store) as opened:
        return opened.records(suite="arms") == []


# -- the command driver's agent runs inside the boundary too ---------------------------------

AGENT = Path(__file__).with_name("scripted_agent.py")


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_the_command_drivers_agent_cannot_write_outside_or_tamper(tmp_path, outside, isolation):
    if isolation == "bwrap":
        bwrap_or_skip()
    marker = outside / "agent-escaped"
    store = tmp_path / "s.sqlite"
    result = CliRunner().invoke(cli, [
        "arms", "run", "--arm", "cli", "--task", "close-issue", "--trials", "1",
        "--driver", "command", "--command", f"{sys.executable} {AGENT} escape {marker}",
        "--isolation", isolation, "--store", str(store)], catch_exceptions=False,
        env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    with open_store(store) as opened:
        (record,) = opened.records(suite="arms")
    if isolation == "bwrap":
        assert not marker.exists()
        # its tampered program never ran: the issue is still open, and the grade says so
        assert record.outcome == "fail" and record.payload["failure"] == "incorrect"
    else:
        assert marker.exists()
        assert record.outcome == "pass"  # control: the tampered program closed the issue


def test_isolation_none_is_said_out_loud_and_recorded(fake, tmp_path):
    store = tmp_path / "s.sqlite"
    result = CliRunner().invoke(cli, [
        "arms", "run", "--arm", "cli", "--task", "close-issue", "--trials", "1",
        "--driver", "openai", "--url", fake.url, "--model", "solve", "--isolation", "none",
        "--store", str(store)], catch_exceptions=False, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "WITHOUT a boundary" in result.output
    with open_store(store) as opened:
        (record,) = opened.records(suite="arms")
        assert opened.runs("arms")[-1].run.config["isolation"] == "none"
    assert record.payload["isolation"] == "none" and record.outcome == "pass"


def test_data_the_agent_wrecked_fails_its_trial_with_the_reason(fake, tmp_path):
    record, answers = run_script(fake, tmp_path / "s.sqlite", "cli",
                                 ["echo -n > ../environment/tracker.sqlite",
                                  "tracker issue close 2"], "bwrap")
    assert record.outcome == "fail" and record.payload["failure"] == "incorrect"
    assert any("final state cannot be read" in reason for reason in record.payload["reasons"])
