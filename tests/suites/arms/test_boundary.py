"""The trial's sandbox (host side + supervisor), for real: services start before the
agent, commands run in their own process groups, cancellation kills, failures are
harness errors with a reason."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from benchwarden.core.errors import IsolationUnavailable
from benchwarden.core.sandbox import Limits, require_bubblewrap
from benchwarden.suites.arms.boundary import SandboxFailure, TrialSandbox, hidden_store_paths
from benchwarden.suites.arms.tasks import Service
from tests.targets.fakes import free_port_nobody_listens_on

PATH = {"PATH": "/usr/bin:/bin"}


def _modes() -> list[str]:
    try:
        require_bubblewrap()
    except IsolationUnavailable:
        if os.environ.get("CI"):
            raise
        return ["none"]
    return ["bwrap", "none"]


@pytest.fixture(params=_modes())
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


def test_a_command_runs_in_the_trial_folder_with_exactly_its_environment(tmp_path, mode):
    with TrialSandbox(mode, tmp_path) as sandbox:
        sandbox.start()
        outcome = sandbox.run(command="pwd; echo $ONLY; env | wc -l; echo made > made.txt",
                              env={**PATH, "ONLY": "this"}, cwd=tmp_path, timeout=30)
    lines = outcome.output.split()
    assert outcome.exit_status == 0
    assert lines[:2] == [str(tmp_path), "this"]
    assert int(lines[2]) <= 6  # PATH, ONLY, and what bash itself sets (PWD, SHLVL, _)
    assert (tmp_path / "made.txt").read_text() == "made\n"


def test_a_service_is_ready_before_the_first_command(tmp_path, mode):
    # a port free now, not one picked from the pid: that one could be an ephemeral port
    # in use on the host (the "none" mode shares its network), and the service then
    # exited with status 1 before it was ready
    port = free_port_nobody_listens_on()
    server = Service("web", [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                     env=PATH, cwd=str(tmp_path), ready_port=port)
    (tmp_path / "hello.txt").write_text("hello from the service")
    with TrialSandbox(mode, tmp_path) as sandbox:
        sandbox.start([server])
        outcome = sandbox.run(command=f"curl -s http://127.0.0.1:{port}/hello.txt", env=PATH,
                              cwd=tmp_path, timeout=30)
    assert outcome.output == "hello from the service"


def test_a_service_that_dies_is_a_sandbox_failure_with_the_reason(tmp_path, mode):
    broken = Service("broken", ["/bin/sh", "-c", "exit 3"], env=PATH, ready_port=9)
    with TrialSandbox(mode, tmp_path) as sandbox:
        with pytest.raises(SandboxFailure, match="broken exited with status 3"):
            sandbox.start([broken])


def test_cancelling_a_command_kills_it(tmp_path, mode):
    with TrialSandbox(mode, tmp_path) as sandbox:
        sandbox.start()

        async def cancelled() -> None:
            task = asyncio.ensure_future(sandbox.run_async(
                command="sleep 2; echo late > late.txt", env=PATH, cwd=tmp_path, timeout=30))
            await asyncio.sleep(0.5)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(cancelled())
        time.sleep(2.5)
        assert not (tmp_path / "late.txt").exists()
        # the sandbox still serves the next command
        next_run = sandbox.run(command="echo next", env=PATH, cwd=tmp_path, timeout=30)
        assert next_run.output == "next\n"


def test_a_command_over_its_timeout_is_killed_and_said_so(tmp_path, mode):
    with TrialSandbox(mode, tmp_path) as sandbox:
        sandbox.start()
        outcome = sandbox.run(command="sleep 30", env=PATH, cwd=tmp_path, timeout=0.5)
    assert outcome.timed_out and outcome.exit_status is None


def test_limits_reach_every_command(tmp_path, mode):
    limits = Limits(cpu_seconds=77, open_files=99, file_size_bytes=1024 * 1024)
    with TrialSandbox(mode, tmp_path, limits=limits) as sandbox:
        sandbox.start()
        outcome = sandbox.run(command="ulimit -t; ulimit -n; head -c 2000000 /dev/zero > big; "
                                      "wc -c < big", env=PATH, cwd=tmp_path, timeout=30)
    words = outcome.output.split()
    assert words[:2] == ["77", "99"]
    assert words[-1] == "1048576"  # the write stopped at the file size limit


def test_after_close_nothing_runs_and_close_is_idempotent(tmp_path, mode):
    sandbox = TrialSandbox(mode, tmp_path)
    sandbox.start()
    sandbox.close()
    sandbox.close()
    with pytest.raises(SandboxFailure, match="not running"):
        sandbox.run(command="true", env=PATH, cwd=tmp_path, timeout=5)


def test_the_store_and_its_companions_are_what_gets_hidden(tmp_path):
    store = tmp_path / "s.sqlite"
    assert hidden_store_paths(str(store)) == []  # nothing to hide yet
    store.write_text("")
    assert hidden_store_paths(str(store))[0] == store
    assert {p.name for p in hidden_store_paths(str(store))} == {
        "s.sqlite", "s.sqlite-wal", "s.sqlite-shm", "s.sqlite-journal"}
    assert hidden_store_paths("postgresql://u@h/db") == []
    assert hidden_store_paths(None) == []


def test_a_command_cannot_forge_answers_on_the_pipe_to_the_host(tmp_path):
    """The supervisor is pid 1 of the sandbox (no bwrap reaper holding the host's pipes)
    and not dumpable: no process inside can open its stdout through /proc."""
    if "bwrap" not in _modes():
        pytest.skip("bubblewrap is not available here")
    forged = '{"id": 1, "exit_status": 0, "output": "forged"}'
    with TrialSandbox("bwrap", tmp_path) as sandbox:
        sandbox.start()
        outcome = sandbox.run(command=f"for pid in 1 2; do echo '{forged}' > /proc/$pid/fd/1 "
                                      "&& echo wrote $pid; done; echo done",
                              env=PATH, cwd=tmp_path, timeout=10)
    assert outcome.output != "forged"  # the host took no forged answer for this command
    assert "wrote" not in outcome.output and outcome.output.endswith("done\n")


def test_unix_sockets_in_run_are_out_of_reach(tmp_path):
    """A network namespace does not cut unix sockets that live in the file system: the
    boundary hides /run, where services keep them (PostgreSQL, Docker, D-Bus)."""
    import socket
    import uuid

    path = Path("/run") / f"benchwarden-test-{uuid.uuid4().hex[:8]}.sock"
    try:
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(path))
    except OSError as error:
        pytest.skip(f"cannot create a socket in /run here: {error}")
    listener.listen()
    probe = (f"{sys.executable} -c \"import socket; s = socket.socket(socket.AF_UNIX); "
             f"s.connect('{path}'); print('connected')\"")
    try:
        for mode in _modes():
            with TrialSandbox(mode, tmp_path) as sandbox:
                sandbox.start()
                outcome = sandbox.run(command=probe, env=PATH, cwd=tmp_path, timeout=30)
            if mode == "bwrap":
                assert "connected" not in outcome.output
            else:  # control: without the boundary the socket answers
                assert "connected" in outcome.output
    finally:
        listener.close()
        path.unlink()


def test_a_host_socket_that_vanishes_while_the_sandbox_starts_is_retried(tmp_path, monkeypatch):
    if "bwrap" not in _modes():
        pytest.skip("needs bubblewrap")
    from benchwarden.core import sandbox as sandbox_module

    gone = Path("/var/tmp") / f"benchwarden-vanished-{os.getpid()}" / "service.sock"
    listings: list[int] = []
    real = sandbox_module.listening_unix_sockets

    def first_listing_names_a_vanished_socket() -> list[Path]:
        listings.append(1)
        return [gone] if len(listings) == 1 else real()

    monkeypatch.setattr(sandbox_module, "listening_unix_sockets",
                        first_listing_names_a_vanished_socket)
    with TrialSandbox("bwrap", tmp_path) as trial:
        trial.start()
        outcome = trial.run(command="echo started", env=PATH, cwd=tmp_path, timeout=30)
    assert outcome.output.strip() == "started"
    assert len(listings) >= 2  # the first start was refused by bwrap, the second listing used
