"""A named pipe (FIFO) given where a file is read — the FILE to sign or verify, its
`.sig`, a signing key, a `*.pub` in the trusted folder, a `--witness` — is refused in
one line; a plain read of it waits forever for a writer, and `sign`/`verify` hung.
Run in a child process with a deadline, so the old behaviour fails instead of hanging."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHA = "0123456789abcdef0123456789abcdef01234567"


def bw(tmp_path, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "BENCHWARDEN_HOME": str(tmp_path / "home"),
                   "PYTHONPATH": os.pathsep.join(
                       filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))}
    return subprocess.run([sys.executable, "-m", "benchwarden", *args], cwd=tmp_path,
                          env=environment, capture_output=True, text=True, timeout=30)


@pytest.fixture()
def signed(tmp_path):
    (tmp_path / "result.json").write_text('{"a": 1}\n')
    done = bw(tmp_path, "sign", "result.json", "--sha", SHA)
    assert done.returncode == 0, done.stderr
    return tmp_path


@pytest.mark.parametrize("case", ["sign FILE", "sign --key", "verify FILE", "verify .sig",
                                  "trusted key", "witness"])
def test_a_named_pipe_is_refused_not_waited_on(signed, case):
    tmp_path = signed
    os.mkfifo(tmp_path / "pipe")
    if case == "sign FILE":
        done = bw(tmp_path, "sign", "pipe", "--sha", SHA)
    elif case == "sign --key":
        done = bw(tmp_path, "sign", "result.json", "--key", "pipe", "--sha", SHA)
    elif case == "verify FILE":
        done = bw(tmp_path, "verify", "pipe")
    elif case == "verify .sig":
        shutil.copy(tmp_path / "result.json", tmp_path / "other.json")
        os.mkfifo(tmp_path / "other.json.sig")
        done = bw(tmp_path, "verify", "other.json")
    elif case == "trusted key":
        (tmp_path / "keys").mkdir()
        os.mkfifo(tmp_path / "keys" / "a.pub")
        done = bw(tmp_path, "verify", "result.json", "--trusted-keys", "keys")
    else:
        bw(tmp_path, "runs", "--store", "s.sqlite")
        done = bw(tmp_path, "verify", "--store", str(tmp_path / "nostore.sqlite"),
                  "--witness", "pipe")
    output = done.stdout + done.stderr
    assert done.returncode != 0 or case == "trusted key", output
    assert "not a regular file" in output or case in ("trusted key", "witness"), output
    assert "unexpected" not in output and "Traceback" not in output, output
