"""Running a strategy in a child interpreter inside the OS boundary (bubblewrap).

`SandboxedStrategy` looks like any strategy (`index`, `pack`, `close`) but each call
is a JSON line (msgspec) sent to a `python -I sandbox_child.py` process. With
isolation "bwrap" (the default) that process runs inside `core.sandbox.Boundary`:

- the whole file system read-only (so interpreters, C extensions such as PyYAML's
  `_yaml` or `pydantic_core`, and shared libraries load as they do outside);
- one private writable scratch folder, fresh for each child (one child per seed) and
  removed afterwards: it is the working directory, HOME, TMPDIR and
  `BENCHWARDEN_SCRATCH`; /tmp is a private empty tmpfs;
- the ledger and the store hidden (`hidden`), and the user's credentials in HOME;
- no network but its own loopback, its own pid namespace (every process the
  strategy starts dies with it), no capabilities, an environment holding only the
  variables above;
- CPU seconds, address space, open files and file size capped by rlimits; this side
  enforces the wall clock.

The corpus reaches the strategy only as the `index` request's copy of the sessions,
so nothing the strategy does can change what the grader compares against.

Isolation "none" runs the same child without the boundary (same limits, same
scratch folder, cleared environment): the strategy can then read and write anything
the harness can. It is for machines without bwrap and is documented as unsafe.

Invariant: whatever the child does (crash, hang, exhaust a limit, write garbage),
the harness sees one `SandboxFailure` with a `kind`, a one-line detail and, when the
strategy raised, its traceback; the child and everything it started are gone.
Nothing the child does can raise anything else here.
"""

from __future__ import annotations

import collections
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import msgspec

from benchwarden.core import sandbox as boundary_module
from benchwarden.core.errors import IsolationUnavailable
from benchwarden.core.sandbox import Boundary, Limits, start_with_retries
from benchwarden.core.verdicts import one_line
from benchwarden.suites.retrieval.api import Item, Session, coerce_pack

CHILD_SCRIPT = Path(__file__).with_name("sandbox_child.py")
MAX_REPLY_BYTES = 8 * 1024 * 1024
CLOSE_SECONDS = 5.0
MAX_STDERR_LINE = 4096
ISOLATION_MODES = boundary_module.ISOLATION_MODES
_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()

FAILURE_KINDS = ("wall_clock", "cpu", "memory", "open_files", "crash", "protocol",
                 "load_error", "strategy_error", "isolation")
_LABELS = {
    "wall_clock": "wall-clock limit", "cpu": "CPU limit", "memory": "address-space cap",
    "open_files": "open-file cap", "crash": "crashed", "protocol": "broke the protocol",
    "load_error": "could not be loaded", "strategy_error": "raised an error",
    "isolation": "no boundary",
}


@dataclass(frozen=True)
class SandboxLimits:
    """Per child (one child per seed)."""

    wall_seconds: float = 60.0
    cpu_seconds: int = 15
    memory_mb: int = 2048
    open_files: int = 64
    file_size_mb: int = 512

    def to_json_dict(self) -> dict[str, Any]:
        return asdict(self)

    def rlimits(self) -> Limits:
        return Limits(cpu_seconds=max(1, int(self.cpu_seconds)),
                      address_space_bytes=int(self.memory_mb) * 1024 * 1024,
                      open_files=int(self.open_files),
                      file_size_bytes=int(self.file_size_mb) * 1024 * 1024)


class SandboxFailure(Exception):
    """The sandboxed strategy's run is over; `kind` says why (see FAILURE_KINDS)."""

    def __init__(self, kind: str, detail: str, traceback_text: str = "") -> None:
        self.kind = kind
        self.detail = one_line(detail, 300)
        self.traceback_text = traceback_text
        super().__init__(self.reason)

    @property
    def reason(self) -> str:
        return f"sandbox: {_LABELS.get(self.kind, self.kind)}: {self.detail}"


def _child_environment(scratch: str) -> dict[str, str]:
    """Nothing of the harness's environment (API keys live there) reaches the child."""
    return {"PATH": os.defpath, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": scratch,
            "TMPDIR": scratch, "BENCHWARDEN_SCRATCH": scratch}


# Files outside HOME that hold secrets readable by root: covered too (the rest of the
# file system is readable, and pack text ends up in the store).
SYSTEM_SECRETS = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-",
                  "/etc/ssh/ssh_host_rsa_key", "/etc/ssh/ssh_host_ecdsa_key",
                  "/etc/ssh/ssh_host_ed25519_key")


class SandboxedStrategy:
    """A strategy run in a child process started on first use.

    `path` is the strategy file (`attribute` names the object in it), or None for a
    built-in (`attribute` is then its registered name). `hidden` are extra paths the
    child must not see (the ledger's folder, the store's file).
    """

    def __init__(self, path: str | None, attribute: str, limits: SandboxLimits = SandboxLimits(),
                 python: str = sys.executable, *, isolation: str = "bwrap",
                 hidden: Sequence[str | Path] = ()) -> None:
        if isolation not in ISOLATION_MODES:
            raise ValueError(f"isolation must be one of {', '.join(ISOLATION_MODES)}, "
                             f"not {isolation!r}")
        self.path = str(Path(path).resolve()) if path is not None else None
        self.attribute = attribute
        self.limits = limits
        self.python = python
        self.isolation = isolation
        self.hidden = [Path(p) for p in hidden]
        self.process: subprocess.Popen[bytes] | None = None
        self.scratch: str | None = None
        self.deadline = 0.0
        self.killed_for_time = False
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=20)
        self._stderr_reader: threading.Thread | None = None
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
        """Let the strategy run its own `close()` (briefly), then end the child and
        remove the scratch folder. Never raises."""
        process = self.process
        if process is not None and process.poll() is None and process.stdin is not None:
            try:
                self.deadline = min(self.deadline, time.monotonic() + CLOSE_SECONDS)
                self._call({"op": "close"})
            except SandboxFailure:
                pass  # already cleaned up by _fail
        self._stop()

    def __enter__(self) -> SandboxedStrategy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing --------------------------------------------------------------
    def _command(self) -> list[str]:
        kind, target = ("builtin", self.attribute) if self.path is None else ("file", self.path)
        return [self.python, "-I", str(CHILD_SCRIPT), kind, target, self.attribute]

    def boundary(self, scratch: str) -> Boundary:
        """The boundary this child runs in (public so tests and benches can inspect it)."""
        read_only: list[Path] = []
        if self.path is not None:
            folder = Path(self.path).resolve().parent
            # The strategy's own folder is shown read-only wherever it is: a promoted
            # champion lives in the (hidden) ladder folder, a user's file may sit under
            # /tmp (private inside). Hidden files stay covered (they are applied last).
            read_only.append(folder)
        hidden = [*self.hidden, *(Path(path) for path in SYSTEM_SECRETS)]
        return Boundary(writable=[Path(scratch)], read_only=read_only, hidden=hidden,
                        working_directory=Path(scratch),
                        environment=_child_environment(scratch), limits=self.limits.rlimits(),
                        tmp_size_bytes=int(self.limits.file_size_mb) * 1024 * 1024)

    def _ensure_started(self) -> None:
        """Start the child; a start that bwrap refused only because a host Unix socket it
        was to cover vanished meanwhile is retried with a fresh listing."""
        if self.process is not None:
            return
        def what_bwrap_said(failure: BaseException) -> str:
            if self._stderr_reader is not None:
                self._stderr_reader.join(timeout=2)
            return f"{failure} {' '.join(self._stderr_tail)}"

        start_with_retries(self._start_once, SandboxFailure, error_text=what_bwrap_said,
                           reset=self._stderr_tail.clear)

    def _start_once(self) -> None:
        self.scratch = tempfile.mkdtemp(prefix="benchwarden-scratch-")
        environment = _child_environment(self.scratch)
        command = self._command()
        limits = self.limits.rlimits()
        try:
            if self.isolation == "bwrap":
                boundary = self.boundary(self.scratch)
                command = boundary.argv(command)
            self.process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                cwd=self.scratch, start_new_session=True, env=environment,
                preexec_fn=limits.apply)
        except IsolationUnavailable as error:
            self._stop()
            raise SandboxFailure("isolation", str(error)) from None
        except OSError as error:
            self._stop()
            raise SandboxFailure("crash", f"could not start the sandbox: {error}") from None
        self.deadline = time.monotonic() + self.limits.wall_seconds
        self._stderr_reader = threading.Thread(target=self._drain_stderr, args=(self.process,),
                                               daemon=True)
        self._stderr_reader.start()
        os.set_blocking(self.process.stdout.fileno(), False)  # type: ignore[union-attr]
        self._expect_reply()  # the "ready" line, or why loading failed

    def _drain_stderr(self, process: subprocess.Popen[bytes]) -> None:
        """Keep the last lines the child wrote to stderr, in bounded memory (a child
        that writes gigabytes without a newline cannot grow the harness)."""
        pending = b""
        try:
            descriptor = process.stderr.fileno()  # type: ignore[union-attr]
            while chunk := os.read(descriptor, 1 << 16):
                *lines, pending = (pending + chunk).split(b"\n")
                pending = pending[-MAX_STDERR_LINE:]
                for raw in lines:
                    self._keep_stderr_line(raw)
            self._keep_stderr_line(pending)
        except (OSError, ValueError):
            pass

    def _keep_stderr_line(self, raw: bytes) -> None:
        text = raw[-MAX_STDERR_LINE:].decode("utf-8", "replace").strip()
        if text:
            self._stderr_tail.append(text)

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
        if not reply.get("ok"):
            self._fail(str(reply.get("kind", "strategy_error")), str(reply.get("error", "")),
                       str(reply.get("traceback") or ""))
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

    def _exit_signal(self, code: int) -> int | None:
        """The signal that ended the child: negative codes directly; under bwrap, its
        pid 1 reports a child killed by signal N as exit status 128 + N."""
        if code < 0:
            return -code
        if self.isolation == "bwrap" and 128 < code < 128 + 65:
            return code - 128
        return None

    def _fail_from_exit(self) -> None:
        assert self.process is not None
        try:
            code = self.process.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            self._fail("crash", "closed its output but did not exit")
        if self._stderr_reader is not None:  # the child's last words, up to its EOF
            self._stderr_reader.join(timeout=2.0)
        last = self._stderr_tail[-1] if self._stderr_tail else "no output"
        number = self._exit_signal(code)
        if number in (signal.SIGXCPU, signal.SIGKILL) and not self.killed_for_time:
            self._fail("cpu", f"killed by {signal.Signals(number).name} after "
                              f"{self.limits.cpu_seconds} s of CPU")
        if "MemoryError" in " ".join(self._stderr_tail):
            self._fail("memory", last)
        if number is not None:
            try:
                name = signal.Signals(number).name
            except ValueError:
                name = f"signal {number}"
            self._fail("crash", f"killed by {name}: {last}")
        self._fail("crash", f"exited with code {code}: {last}")

    def _stop(self) -> None:
        """End the child and everything in its session, close pipes, drop the scratch."""
        process, self.process = self.process, None
        if process is not None:
            if process.poll() is None:
                try:
                    process.stdin.close()  # type: ignore[union-attr]
                except OSError:
                    pass
                try:
                    process.wait(timeout=0.5)
                except subprocess.TimeoutExpired:
                    try:
                        os.killpg(process.pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        process.kill()
                    process.wait()
            for stream in (process.stdin, process.stdout, process.stderr):
                try:
                    if stream:
                        stream.close()
                except OSError:
                    pass
        scratch, self.scratch = self.scratch, None
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)

    def _fail(self, kind: str, detail: str, traceback_text: str = "") -> None:
        process = self.process
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                process.kill()
        self._stop()
        raise SandboxFailure(kind if kind in FAILURE_KINDS else "protocol", detail, traceback_text)
