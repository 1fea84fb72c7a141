"""Running a challenger's strategy in an isolated child interpreter.

`SandboxedStrategy` looks like any strategy (`index`, `pack`) but each call is a JSON
line (msgspec) sent to a `python -I sandbox_child.py` process, which runs the user's
code under CPU, address-space and open-file limits and an audit hook (see
`sandbox_child.py`). This side enforces the wall clock.

Invariant: whatever the child does (crash, hang, exhaust a limit, trip the audit hook,
write garbage), the harness sees one `SandboxFailure` with a `kind` and a one-line
detail, and the child is gone. Nothing the child does can raise anything else here.
"""

from __future__ import annotations

import collections
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import msgspec

from benchwarden.core.verdicts import one_line
from benchwarden.suites.retrieval.api import Item, Session, coerce_pack

CHILD_SCRIPT = Path(__file__).with_name("sandbox_child.py")
MAX_REPLY_BYTES = 8 * 1024 * 1024
_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()

FAILURE_KINDS = ("wall_clock", "cpu", "memory", "open_files", "network", "subprocess",
                 "native_code", "file_write", "file_read", "limits", "crash", "protocol", "load_error",
                 "strategy_error")


@dataclass(frozen=True)
class SandboxLimits:
    """Per child (one child per seed)."""

    wall_seconds: float = 20.0
    cpu_seconds: int = 15
    memory_mb: int = 2048
    open_files: int = 64

    def to_json_dict(self) -> dict[str, Any]:
        return asdict(self)


class SandboxFailure(Exception):
    """The sandboxed strategy's run is over; `kind` says why (see FAILURE_KINDS)."""

    def __init__(self, kind: str, detail: str) -> None:
        self.kind = kind
        self.detail = one_line(detail, 300)
        super().__init__(self.reason)

    @property
    def reason(self) -> str:
        labels = {
            "wall_clock": "wall-clock limit", "cpu": "CPU limit", "memory": "address-space cap",
            "open_files": "open-file cap", "network": "refused network access",
            "subprocess": "refused a subprocess", "native_code": "refused native code",
            "file_write": "refused a file write", "file_read": "refused a file read",
            "limits": "refused a limit change",
            "crash": "crashed", "protocol": "broke the protocol",
            "load_error": "could not be loaded", "strategy_error": "raised an error",
        }
        return f"sandbox: {labels.get(self.kind, self.kind)}: {self.detail}"


def _child_environment() -> dict[str, str]:
    """Nothing of the harness's environment (API keys live there) reaches the child."""
    return {"PATH": os.defpath, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}


class SandboxedStrategy:
    """A strategy from `path:attribute`, run in a child process started on first use."""

    def __init__(self, path: str, attribute: str, limits: SandboxLimits = SandboxLimits(),
                 python: str = sys.executable) -> None:
        self.path = str(path)
        self.attribute = attribute
        self.limits = limits
        self.python = python
        self.process: subprocess.Popen[bytes] | None = None
        self.deadline = 0.0
        self.killed_for_time = False
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=20)
        self._buffer = bytearray()

    # -- strategy API --------------------------------------------------------
    def index(self, sessions: Sequence[Session]) -> None:
        self._ensure_started()
        self._call({"op": "index", "sessions": [
            {"index": s.index, "title": s.title, "text": s.text} for s in sessions]})

    def pack(self, question: str, limit: int, budget_chars: int) -> list[Item]:
        self._ensure_started()
        reply = self._call({"op": "pack", "question": question, "limit": limit,
                            "budget_chars": budget_chars})
        try:
            return coerce_pack(reply.get("items"))
        except ValueError as error:
            self._fail("protocol", f"unreadable pack: {error}")
            raise  # unreachable: _fail raises

    def close(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        for stream in (process.stdin,):
            try:
                if stream:
                    stream.close()
            except OSError:
                pass
        try:
            process.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            try:
                if stream:
                    stream.close()
            except OSError:
                pass

    def __enter__(self) -> "SandboxedStrategy":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing --------------------------------------------------------------
    def _ensure_started(self) -> None:
        if self.process is not None:
            return
        command = [self.python, "-I", str(CHILD_SCRIPT),
                   _encoder.encode(self.limits.to_json_dict()).decode(), self.path, self.attribute]
        try:
            self.process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                cwd="/", start_new_session=True, env=_child_environment())
        except OSError as error:
            raise SandboxFailure("crash", f"could not start the sandbox: {error}") from None
        self.deadline = time.monotonic() + self.limits.wall_seconds
        threading.Thread(target=self._drain_stderr, args=(self.process,), daemon=True).start()
        os.set_blocking(self.process.stdout.fileno(), False)  # type: ignore[union-attr]
        self._expect_reply()  # the "ready" line, or why loading failed

    def _drain_stderr(self, process: subprocess.Popen[bytes]) -> None:
        try:
            for raw in iter(process.stderr.readline, b""):  # type: ignore[union-attr]
                text = raw.decode("utf-8", "replace").strip()
                if text:
                    self._stderr_tail.append(text)
        except (OSError, ValueError):
            pass

    def _call(self, message: dict[str, Any]) -> dict[str, Any]:
        assert self.process is not None and self.process.stdin is not None
        try:
            self.process.stdin.write(_encoder.encode(message) + b"\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            self._expect_reply()  # the child is gone; the reply read explains why
        return self._expect_reply()

    def _expect_reply(self) -> dict[str, Any]:
        line = self._read_line()
        try:
            reply = _decoder.decode(line)
        except msgspec.DecodeError:
            self._fail("protocol", f"not a JSON line: {line[:80]!r}")
        if not isinstance(reply, dict):
            self._fail("protocol", f"reply is not an object: {line[:80]!r}")
        if "refused" in reply:
            self._fail(str(reply["refused"]), str(reply.get("detail", "")))
        if not reply.get("ok"):
            self._fail(str(reply.get("kind", "strategy_error")), str(reply.get("error", "")))
        return reply

    def _read_line(self) -> bytes:
        assert self.process is not None and self.process.stdout is not None
        stdout = self.process.stdout
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                remaining = self.deadline - time.monotonic()
                if remaining <= 0:
                    self.killed_for_time = True
                    self._fail("wall_clock", f"no reply within {self.limits.wall_seconds:g} s")
                if not selector.select(timeout=min(remaining, 1.0)):
                    if self.process.poll() is not None:
                        self._fail_from_exit()
                    continue
                try:
                    chunk = os.read(stdout.fileno(), 1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    self._fail_from_exit()
                self._buffer += chunk
                if len(self._buffer) > MAX_REPLY_BYTES:
                    self._fail("protocol", f"reply longer than {MAX_REPLY_BYTES} bytes")
        end = self._buffer.index(b"\n")
        line = bytes(self._buffer[:end])
        del self._buffer[:end + 1]
        return line

    def _fail_from_exit(self) -> None:
        assert self.process is not None
        try:
            code = self.process.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            self._fail("crash", "closed its output but did not exit")
        time.sleep(0.05)  # let the stderr drain catch the last words
        last = self._stderr_tail[-1] if self._stderr_tail else "no output"
        if code in (-signal.SIGXCPU, -signal.SIGKILL) and not self.killed_for_time:
            self._fail("cpu", f"killed by signal {-code} after {self.limits.cpu_seconds} s of CPU")
        if "MemoryError" in " ".join(self._stderr_tail):
            self._fail("memory", last)
        self._fail("crash", f"exited with code {code}: {last}")

    def _fail(self, kind: str, detail: str) -> None:
        process = self.process
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                process.kill()
        self.close()
        raise SandboxFailure(kind if kind in FAILURE_KINDS else "protocol", detail)
