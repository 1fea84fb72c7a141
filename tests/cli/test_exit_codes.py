"""One exit-code table for every command, and signals that end a run cleanly (issue 8, §5).

The mapping itself is tested in memory on a throwaway click group; the rest runs the
real CLI in a child process against loopback fake servers. Children are started with
SIGINT *ignored* where a signal is sent, as a shell does for a background job: the
program must install its own handlers rather than rely on what it inherited.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

from benchwarden.cli.main import run_command
from benchwarden.core.errors import (
    EXIT_CODES,
    ConfigurationError,
    EnvironmentFailure,
    RunInterrupted,
    TargetUnreachableError,
)
from benchwarden.core.store import SQLiteStore
from tests.fakes import FakeOpenAIServer

SMALL_RUN = ["--probes", "2", "--concurrency", "2,4", "--max-tokens", "64", "--seed", "5",
             "--no-progress"]


# -- the mapping, in memory -----------------------------------------------------------------
def _failing_group() -> click.Group:
    @click.group()
    @click.option("--traceback", is_flag=True)
    def group(traceback: bool) -> None:
        pass

    raising = {
        "config": ConfigurationError("--probes must be at least 2"),
        "unreachable": TargetUnreachableError("no answer from http://h:1"),
        "environment": EnvironmentFailure("disk full\nwhile writing"),
        "interrupted": RunInterrupted("run r stopped; resume with `x --resume r`"),
        "oserror": PermissionError(13, "Permission denied", "/root/x"),
        "database": sqlite3.OperationalError("database is locked"),
        "bug": ZeroDivisionError("division by zero"),
        "ctrl-c": KeyboardInterrupt(),
    }
    for name, error in raising.items():
        def command(error: BaseException = error) -> None:
            raise error
        group.command(name)(command)

    @group.command("verdict")
    def verdict() -> None:
        raise SystemExit(1)

    @group.command("held")
    @click.pass_context
    def held(ctx: click.Context) -> None:
        ctx.exit(3)

    @group.command("ok")
    def ok() -> None:
        click.echo("fine")
    return group


@pytest.mark.parametrize("args, code, line", [
    (["config"], 2, "benchwarden: error: --probes must be at least 2"),
    (["unreachable"], 2, "benchwarden: error: no answer from http://h:1"),
    (["environment"], 4, "benchwarden: error: disk full while writing"),
    (["interrupted"], 130, "benchwarden: interrupted by SIGINT: run r stopped; resume with"),
    (["ctrl-c"], 130, "benchwarden: interrupted by SIGINT"),
    (["oserror"], 4, "benchwarden: error: PermissionError: [Errno 13] Permission denied"),
    (["database"], 4, "benchwarden: error: OperationalError: database is locked"),
    (["bug"], 1, "benchwarden: error: unexpected ZeroDivisionError: division by zero (rerun "
                 "with --traceback or BENCHWARDEN_TRACEBACK=1"),
    (["verdict"], 1, None),
    (["held"], 3, None),
    (["ok"], 0, None),
    (["--nope"], 2, "No such option"),
    (["missing-command"], 2, "No such command"),
])
def test_every_error_maps_to_one_code_and_one_line(capsys, args, code, line):
    assert run_command(_failing_group(), args, "benchwarden") == code
    assert code in EXIT_CODES
    err = capsys.readouterr().err.strip()
    if line is None:
        assert "error" not in err
    else:
        assert line in err
        if code != 2:
            assert len(err.splitlines()) == 1, err
            assert "Traceback" not in err


def test_traceback_on_request(capsys, monkeypatch):
    assert run_command(_failing_group(), ["--traceback", "bug"], "benchwarden") == 1
    assert "Traceback" in capsys.readouterr().err
    monkeypatch.setenv("BENCHWARDEN_TRACEBACK", "1")
    assert run_command(_failing_group(), ["bug"], "benchwarden") == 1
    assert "ZeroDivisionError" in capsys.readouterr().err


# -- the real CLI ---------------------------------------------------------------------------
def benchwarden(*args: str, **options) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benchwarden", *args], capture_output=True,
                          text=True, env={**os.environ, "COLUMNS": "200"}, timeout=180,
                          **options)


def test_pass_fail_usage_and_unreachable_through_the_cli(tmp_path):
    with FakeOpenAIServer("clean") as clean, FakeOpenAIServer("drift") as drift:
        passed = benchwarden("contamination", "--url", clean.url, *SMALL_RUN,
                             "--store", str(tmp_path / "a.sqlite"))
        failed = benchwarden("contamination", "--url", drift.url, *SMALL_RUN,
                             "--store", str(tmp_path / "b.sqlite"))
    usage = benchwarden("contamination", "--probes", "two")
    config = benchwarden("contamination", "--url", "http://127.0.0.1:9", "--probes", "1",
                         "--store", str(tmp_path / "c.sqlite"))
    unreachable = benchwarden("contamination", "--url", "http://127.0.0.1:9", *SMALL_RUN,
                              "--store", str(tmp_path / "d.sqlite"))
    assert passed.returncode == 0, passed.stderr
    assert failed.returncode == 1, failed.stderr
    assert usage.returncode == 2 and usage.stderr.startswith("benchwarden: error: ")
    assert "--probes" in usage.stderr and usage.stderr.count("\n") == 1
    for done in (config, unreachable):
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("benchwarden: error:")
        assert len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in unreachable.stderr + config.stderr


def ignore_sigint() -> None:
    """What a shell does to a background job (`make test &`): SIGINT inherited ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def stored_records(path: Path, kind: str = "record") -> int:
    """Entries of `kind` in the store at `path`, read without writing anything."""
    if not path.exists():
        return 0
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)
    try:
        return connection.execute("SELECT COUNT(*) FROM entries WHERE kind = ?",
                                  (kind,)).fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        connection.close()


def wait_for(condition, process: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            raise AssertionError(f"exited {process.returncode} early: {process.stderr.read()}")
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP],
                         ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_ends_the_run_interrupted_with_a_resume_line_and_exit_130(tmp_path, signum):
    store = tmp_path / "s.sqlite"
    # slow replies, so the signal lands mid-run
    with FakeOpenAIServer("clean", delta_delay=0.02) as server:
        process = subprocess.Popen(
            [sys.executable, "-m", "benchwarden", "contamination", "--url", server.url,
             *SMALL_RUN, "--store", str(store)], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "200"},
            preexec_fn=ignore_sigint)
        try:
            wait_for(lambda: stored_records(store) >= 2, process)
            process.send_signal(signum)
            out, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == 130, err
        name = signal.Signals(signum).name
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"benchwarden: interrupted by {name}:"), err
        with SQLiteStore(store) as opened:
            (info,) = opened.runs()
        assert info.end is not None and info.end.status == "interrupted"
        assert f"benchwarden contamination --resume {info.run.run_id}" in lines[0]
        assert info.end.summary["resume"] == f"benchwarden contamination --resume {info.run.run_id}"

        resumed = benchwarden("contamination", "--resume", info.run.run_id, "--store", str(store),
                              "--no-progress", "--json", str(tmp_path / "r.json"))
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["verdict"]["kind"] == "pass" and report["run"]["resumed_from"] == info.run.run_id


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("pause", [0.0, 0.05, 0.2])
def test_a_second_signal_while_stopping_still_ends_the_run_once_with_exit_130(tmp_path, pause,
                                                                              second):
    store = tmp_path / "s.sqlite"
    with FakeOpenAIServer("clean", delta_delay=0.02) as server:
        process = subprocess.Popen(
            [sys.executable, "-m", "benchwarden", "contamination", "--url", server.url,
             *SMALL_RUN, "--store", str(store)], stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True, preexec_fn=ignore_sigint)
        try:
            wait_for(lambda: stored_records(store) >= 1, process)
            process.send_signal(signal.SIGINT)
            time.sleep(pause)  # the second lands while stopping, or on the way out
            process.send_signal(second)
            _, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 130, err
    assert "benchwarden: interrupted by SIG" in err and "Traceback" not in err
    assert stored_records(store, "run_end") == 1


def test_resume_refuses_a_completed_run_and_adds_nothing(tmp_path):
    store = tmp_path / "s.sqlite"
    with FakeOpenAIServer("clean") as server:
        first = benchwarden("contamination", "--url", server.url, *SMALL_RUN,
                            "--store", str(store), "--json", str(tmp_path / "r.json"))
        assert first.returncode == 0, first.stderr
        run_id = json.loads((tmp_path / "r.json").read_text())["run"]["id"]
        sent = server.chat_requests
        again = benchwarden("contamination", "--resume", run_id, "--store", str(store))
        assert server.chat_requests == sent
    assert again.returncode == 2
    assert f"run {run_id} is already complete" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1
    with SQLiteStore(store) as opened:
        assert len(opened.runs()) == 1


CONFLICTS = [
    ("--probes", "3", "--probes 3 (the run was made with 2)"),
    ("--concurrency", "2,8", "--concurrency [2, 8] (the run was made with [2, 4])"),
    ("--seed", "6", "--seed 6 (the run was made with 5)"),
    ("--extra-body", '{"seed": 1}', "--extra-body"),
    ("--scenario", "cancel", "--scenario"),
    ("--max-tokens", "32", "--max-tokens 32 (the run was made with 64)"),
]


def test_resume_refuses_options_that_conflict_with_the_stored_run(tmp_path):
    store = tmp_path / "s.sqlite"
    with FakeOpenAIServer("clean", delta_delay=0.02) as server:
        process = subprocess.Popen(
            [sys.executable, "-m", "benchwarden", "contamination", "--url", server.url,
             *SMALL_RUN, "--stall-timeout", "45", "--store", str(store)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: stored_records(store) >= 1, process)
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
        with SQLiteStore(store) as opened:
            run_id = opened.runs()[0].run.run_id
        sent = server.chat_requests
        for option, value, named in CONFLICTS:
            refused = benchwarden("contamination", "--resume", run_id, "--store", str(store),
                                  option, value)
            assert refused.returncode == 2, (option, refused.stderr)
            assert named in refused.stderr, refused.stderr
            assert len(refused.stderr.strip().splitlines()) == 1
        assert server.chat_requests == sent
        with SQLiteStore(store) as opened:
            assert len(opened.runs()) == 1  # nothing was added by the refusals
        same = benchwarden("contamination", "--resume", run_id, "--store", str(store),
                           "--probes", "2", "--url", server.url, "--request-timeout", "60",
                           "--no-progress")
    assert same.returncode == 0, same.stderr  # the same value, or a client option: fine
    assert server.chat_requests > sent
    with SQLiteStore(store) as opened:
        resumed = opened.runs()[-1].run
    # a client limit given again applies; one not given stays the stored one
    assert resumed.config["request_timeout"] == 60 and resumed.config["stall_timeout"] == 45


@pytest.mark.parametrize("option", [["--seeds", "1-3"], ["--limit", "3"], ["--sandbox"],
                                    ["--strategy", "bm25"]])
def test_retrieval_resume_refuses_options_it_would_ignore(tmp_path, option):
    from click.testing import CliRunner

    from benchwarden.cli.main import cli

    done = CliRunner().invoke(cli, ["retrieval", "run", "--resume", "some-run", *option,
                                    "--store", str(tmp_path / "s.sqlite")])
    assert done.exit_code == 2
    assert f"drop {option[0]}" in done.output and len(done.output.strip().splitlines()) == 1


def test_an_arms_run_ends_interrupted_on_sigterm(tmp_path):
    store = tmp_path / "s.sqlite"
    with FakeOpenAIServer("clean", delta_delay=0.5) as server:
        process = subprocess.Popen(
            [sys.executable, "-m", "benchwarden", "arms", "run", "--arm", "all", "--task", "all",
             "--trials", "1", "--driver", "openai", "--url", server.url, "--model", "fake-model",
             "--store", str(store)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, env={**os.environ, "COLUMNS": "200"}, preexec_fn=ignore_sigint)
        try:
            wait_for(lambda: server.chat_requests >= 1, process)
            process.send_signal(signal.SIGTERM)
            _, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 130, err
    assert "benchwarden: interrupted by SIGTERM:" in err and "arms run" in err
    assert "Traceback" not in err
    with SQLiteStore(store) as opened:
        (info,) = opened.runs()
    assert info.end is not None and info.end.status == "interrupted"


def test_an_arms_run_on_worker_processes_does_not_wait_for_its_trials_after_sigterm(tmp_path):
    store = tmp_path / "s.sqlite"
    # replies that never end within the test: closing the pool politely would hang
    with FakeOpenAIServer("clean", delta_delay=1000) as server:
        process = subprocess.Popen(
            [sys.executable, "-m", "benchwarden", "arms", "run", "--arm", "all", "--task",
             "open-issue-count", "--trials", "2", "--driver", "openai", "--url", server.url,
             "--model", "fake-model", "--executor", "local:2", "--wall-clock", "900",
             "--store", str(store)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, preexec_fn=ignore_sigint)
        try:
            wait_for(lambda: server.chat_requests >= 2, process)
            process.send_signal(signal.SIGTERM)
            _, err = process.communicate(timeout=90)  # a hang detector, not a timing
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 130, err
    assert len(err.strip().splitlines()) == 1 and "interrupted by SIGTERM" in err
    with SQLiteStore(store) as opened:
        (info,) = opened.runs()
    assert info.end is not None and info.end.status == "interrupted"


SLOW_STRATEGY = '''
import os, time

class Slow:
    def index(self, sessions):
        pass

    def pack(self, question, limit, budget_chars):
        if os.environ.get("BW_SLOW_STRATEGY"):
            time.sleep(0.2)
        return []
'''


def test_a_retrieval_run_stops_on_sighup_and_resumes(tmp_path):
    store = tmp_path / "s.sqlite"
    strategy = tmp_path / "slow.py"
    strategy.write_text(SLOW_STRATEGY)
    process = subprocess.Popen(
        [sys.executable, "-m", "benchwarden", "retrieval", "run", "--strategy",
         f"{strategy}:Slow", "--seeds", "1-4", "--store", str(store)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "BW_SLOW_STRATEGY": "1"}, preexec_fn=ignore_sigint)
    try:
        wait_for(lambda: stored_records(store, "run") >= 1, process)
        process.send_signal(signal.SIGHUP)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err
    with SQLiteStore(store) as opened:
        (info,) = opened.runs()
    assert f"benchwarden retrieval run --resume {info.run.run_id}" in err
    assert len(err.strip().splitlines()) == 1
    resumed = benchwarden("retrieval", "run", "--resume", info.run.run_id, "--store", str(store))
    assert resumed.returncode in (0, 1), resumed.stderr
    with SQLiteStore(store) as opened:
        assert opened.run_info(info.run.run_id).end is not None


# -- signals that land where the program is already on its way out ---------------------------
_LATE_SIGNAL_PROGRAM = """
import os, signal, sys
import click
from benchwarden.cli import main as cli_main
from benchwarden.core import secrets

def deliver(signum):
    os.kill(os.getpid(), signum)
    for _ in range(100_000):  # the handler runs between bytecodes of the main thread
        pass

@click.command()
def interrupted():
    raise KeyboardInterrupt  # a suite's command interrupted by the first signal

@click.command()
def nested():
    # as `demo` runs a suite's command: click turns the interrupt into `Abort`
    interrupted.main(args=[], standalone_mode=False)

@click.command()
def fine():
    click.echo("done")

COMMANDS = {"nested": nested, "fine": fine}

class Group(cli_main.LazyGroup):
    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        return COMMANDS.get(name)

where = sys.argv[1]
if where == "while-saying-interrupted":  # a second signal while the one line is printed
    said = cli_main._say
    def say_after_a_signal(message):
        deliver(signal.SIGINT)
        said(message)
    cli_main._say = say_after_a_signal
elif where == "after-the-code":  # the code decided, the credentials being forgotten
    forget = secrets.forget_all
    def forget_after_a_signal():
        deliver(signal.SIGTERM)
        deliver(signal.SIGINT)
        forget()
    secrets.forget_all = forget_after_a_signal
sys.argv = ["benchwarden", sys.argv[2]]
Group(name="benchwarden").main()
"""


@pytest.mark.parametrize("where, command, code, said", [
    ("while-saying-interrupted", "nested", 130, "benchwarden: interrupted by SIGINT"),
    ("after-the-code", "fine", 0, ""),
    ("after-the-code", "nested", 130, "benchwarden: interrupted by SIGINT"),
])
def test_a_signal_on_the_way_out_leaves_the_decided_code_not_a_death_by_signal(where, command,
                                                                               code, said):
    """A process killed by the signal (exit -2, what an uncaught `KeyboardInterrupt` ends
    as) or a traceback where the program had already decided how it ends."""
    done = subprocess.run([sys.executable, "-c", _LATE_SIGNAL_PROGRAM, where, command],
                          capture_output=True, text=True, timeout=60, preexec_fn=ignore_sigint)
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == ([] if not said else [lines[0]]), done.stderr
    assert said in done.stderr
    assert ("done" in done.stdout) == (command == "fine")
