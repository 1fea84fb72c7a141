"""The bubblewrap boundary, exercised for real: each escape is proven absent by a marker
file or a listener that must stay untouched."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from benchwarden.core import sandbox
from benchwarden.core.errors import IsolationUnavailable
from benchwarden.core.sandbox import Boundary, Limits, require_bubblewrap
from tests.conftest import bwrap_or_skip


def _run(boundary: Boundary, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(boundary.argv(["sh", "-c", script]), preexec_fn=boundary.preexec(),
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture()
def trial(tmp_path: Path) -> Path:
    bwrap_or_skip()
    folder = tmp_path / "trial"
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "program").write_text("original\n")
    return folder


def test_only_the_writable_folder_is_written(trial: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside-marker"
    boundary = Boundary(writable=[trial], working_directory=trial,
                        environment={"PATH": "/usr/bin:/bin"})
    result = _run(boundary, f"echo inside > made.txt; echo escaped > {outside}; "
                            f"echo escaped > {Path.home()}/benchwarden-marker")
    assert (trial / "made.txt").read_text() == "inside\n"
    assert not outside.exists()
    assert not (Path.home() / "benchwarden-marker").exists()
    assert "Read-only file system" in result.stderr


def test_a_read_only_path_inside_a_writable_one_stays_read_only(trial: Path) -> None:
    boundary = Boundary(writable=[trial], read_only=[trial / "bin"], working_directory=trial,
                        environment={"PATH": "/usr/bin:/bin"})
    _run(boundary, "printf tampered > bin/program; rm -f bin/program; echo x > bin/new")
    assert (trial / "bin" / "program").read_text() == "original\n"
    assert not (trial / "bin" / "new").exists()


def test_a_listener_outside_is_unreachable(trial: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    accepted: list[object] = []

    def accept() -> None:
        try:
            accepted.append(listener.accept())
        except OSError:
            pass

    thread = threading.Thread(target=accept)
    thread.start()
    boundary = Boundary(writable=[trial], environment={"PATH": "/usr/bin:/bin"})
    script = (f"{sys.executable} -c "
              f"\"import socket; socket.create_connection(('127.0.0.1', {port}), 3)\""
              " && echo connected")
    result = _run(boundary, script)
    thread.join()
    listener.close()
    assert "connected" not in result.stdout
    assert accepted == []


def test_the_environment_is_exactly_what_was_given(trial: Path) -> None:
    os.environ["BENCHWARDEN_TEST_LEAK"] = "must-not-appear"
    try:
        boundary = Boundary(writable=[trial], environment={"PATH": "/usr/bin:/bin", "ONLY": "this"})
        result = _run(boundary, "env")
    finally:
        del os.environ["BENCHWARDEN_TEST_LEAK"]
    names = {line.split("=", 1)[0] for line in result.stdout.splitlines()}
    assert "must-not-appear" not in result.stdout
    assert {"PATH", "ONLY"} <= names


def test_hidden_paths_are_empty_inside(trial: Path, tmp_path: Path) -> None:
    secret_dir = tmp_path / "store-dir"
    secret_dir.mkdir()
    (secret_dir / "store.sqlite").write_text("secret")
    boundary = Boundary(writable=[trial], hidden=[secret_dir],
                        environment={"PATH": "/usr/bin:/bin"})
    result = _run(boundary, f"ls -A {secret_dir}; cat {secret_dir}/store.sqlite")
    assert "secret" not in result.stdout
    assert "store.sqlite" not in result.stdout


def test_processes_outside_are_invisible(trial: Path) -> None:
    boundary = Boundary(writable=[trial], environment={"PATH": "/usr/bin:/bin"})
    result = _run(boundary, "ls /proc | grep -c '^[0-9]'")
    assert int(result.stdout.strip()) <= 5  # bwrap's init, sh, ls, grep: nothing from outside


def test_limits_reach_the_code_inside(trial: Path) -> None:
    boundary = Boundary(writable=[trial], environment={"PATH": "/usr/bin:/bin"},
                        limits=Limits(cpu_seconds=7, open_files=64))
    result = _run(boundary, "ulimit -t; ulimit -n")
    assert result.stdout.split() == ["7", "64"]


def test_a_missing_bwrap_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCHWARDEN_BWRAP", "")
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    with pytest.raises(IsolationUnavailable, match="apt-get install bubblewrap"):
        require_bubblewrap()


def test_an_unknown_isolation_mode_is_refused() -> None:
    with pytest.raises(IsolationUnavailable, match="--isolation must be one of"):
        sandbox.check_isolation_mode("docker")


def test_a_unix_socket_bound_outside_is_not_connectable(trial: Path) -> None:
    folder = Path(tempfile.mkdtemp(dir="/var/tmp"))  # not /tmp: that is private inside anyway
    path = folder / "service.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen()
    listener.settimeout(0.5)
    accepted: list[object] = []

    def accept() -> None:
        try:
            accepted.append(listener.accept())
        except OSError:
            pass

    thread = threading.Thread(target=accept)
    thread.start()
    try:
        assert path in sandbox.listening_unix_sockets()
        boundary = Boundary(writable=[trial], environment={"PATH": "/usr/bin:/bin"})
        script = (f"{sys.executable} -c \"import socket; "
                  f"socket.socket(socket.AF_UNIX).connect('{path}')\" && echo connected")
        result = _run(boundary, script)
    finally:
        thread.join()
        listener.close()
        shutil.rmtree(folder)
    assert "connected" not in result.stdout
    assert accepted == []


def test_hidden_folders_cannot_be_written_and_tmp_can_be_capped(trial: Path,
                                                                tmp_path: Path) -> None:
    secret_dir = Path(tempfile.mkdtemp(dir="/var/tmp"))
    try:
        boundary = Boundary(writable=[trial], hidden=[secret_dir], tmp_size_bytes=1024 * 1024,
                            environment={"PATH": "/usr/bin:/bin"})
        result = _run(boundary, f"echo x > {secret_dir}/planted && echo wrote-hidden; "
                                "echo small > /tmp/small && echo wrote-small; "
                                "head -c 4000000 /dev/zero > /tmp/big && echo wrote-big")
    finally:
        shutil.rmtree(secret_dir)
    assert "wrote-hidden" not in result.stdout
    if sandbox._supports_size(require_bubblewrap()):
        assert "wrote-big" not in result.stdout
    assert "wrote-small" in result.stdout


def test_a_hidden_file_reads_as_empty(trial: Path) -> None:
    secret = Path.home() / ".cache" / "benchwarden-hidden-file-test.sqlite"
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_text("SQLite format 3 secret rows")
    try:
        boundary = Boundary(writable=[trial], hidden=[secret],
                            environment={"PATH": "/usr/bin:/bin"})
        result = _run(boundary, f"cat {secret}; echo tampered > {secret}")
        assert "secret rows" not in result.stdout
        assert secret.read_text() == "SQLite format 3 secret rows"
    finally:
        secret.unlink()


def test_a_vanished_mount_point_is_recognised_only_when_really_gone(tmp_path: Path) -> None:
    gone = tmp_path / "gone.sock"
    present = tmp_path / "present.sock"
    present.write_text("")
    assert sandbox.vanished_mount_point(
        f"bwrap: Can't mkdir parents for {gone}: Read-only file system")
    assert sandbox.vanished_mount_point(
        f"bwrap: Can't create file at {gone}: Read-only file system")
    assert not sandbox.vanished_mount_point(
        f"bwrap: Can't mkdir parents for {present}: Read-only file system")
    assert not sandbox.vanished_mount_point("bwrap: No permissions to create new namespace")
