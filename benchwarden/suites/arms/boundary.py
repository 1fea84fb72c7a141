"""The host's side of one trial's boundary: start the supervisor, send it commands.

One `TrialSandbox` per trial. Under isolation "bwrap" it starts ONE bubblewrap sandbox
(`benchwarden.core.sandbox.Boundary`) whose first process is the supervisor
(`supervisor.py`); the supervisor starts the environment's services (the trial's own
tool/HTTP server) and then runs every shell command of the trial. So the server and
the commands share one network namespace that holds nothing but them: the arm's
channel is the only thing a command can reach. Under isolation "none" (explicit,
documented as unsafe) the same supervisor runs directly on the host, so both modes
take the same code path and differ only by the boundary.

What the boundary holds for a trial (see `trial_boundary`):
- writable: the trial's folder only (its data, the agent's working directory);
- read-only: the environment's `read_only_paths()` (the arm's own program and its
  configuration) and the agent's HOME, an empty folder (a written ~/.curlrc, .wgetrc or
  .netrc cannot exist);
- hidden: the store the run writes, core.sandbox's defaults in the user's home
  (~/.benchwarden, ~/.ssh, ...), and /run, where services keep their unix sockets (a
  network namespace does not separate those);
- network: loopback of its own (none of the host's listeners), except when a caller
  asks for the host network (the command driver's agent needs its model endpoint);
- rlimits on CPU, address space, open files and file size, inherited by everything.

Invariants:
- Never a silent fallback: "bwrap" without a working bwrap raises IsolationUnavailable.
- `close()` is idempotent and always ends every process of the trial (stop request,
  then SIGKILL of the sandbox; bwrap's pid namespace takes everything inside with it).
- A supervisor that dies or answers nonsense is a `SandboxFailure` (a harness error),
  never an agent outcome.
- A long-lived process opened with `open_stream` (an MCP server on stdio) lives inside
  the same boundary as the trial's commands; its listener hears `None` exactly once when
  it ends, is killed or the sandbox goes away, so no reader waits forever.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchwarden.core.sandbox import (
    Boundary,
    Limits,
    check_isolation_mode,
    require_bubblewrap,
    start_with_retries,
)
from benchwarden.suites.arms.tasks import Service

SUPERVISOR = Path(__file__).resolve().with_name("supervisor.py")
DEFAULT_OUTPUT_LIMIT = 256 * 1024
SOCKET_FOLDERS = ("/run", "/var/run")


class SandboxFailure(Exception):
    """The trial's supervisor or boundary failed (a harness error). One line."""


@dataclass(frozen=True)
class RunOutcome:
    exit_status: int | None
    output: str
    stderr: str = ""
    timed_out: bool = False
    truncated: bool = False
    killed: bool = False


def trial_limits(wall_clock: float) -> Limits:
    """Per-trial rlimits: CPU a little beyond the wall clock (a process cannot outspend
    the trial), 4 GiB of address space, 256 open files, 256 MiB per file written."""
    return Limits(cpu_seconds=int(wall_clock) + 60, address_space_bytes=4 * 1024 ** 3,
                  open_files=256, file_size_bytes=256 * 1024 ** 2)


def hidden_store_paths(location: str | None) -> list[Path]:
    """The store file and its SQLite companions, when the store is a local file."""
    if not location:
        return []
    path = Path(location)
    if not path.exists():
        return []
    return [path] + [Path(str(path) + suffix) for suffix in ("-wal", "-shm", "-journal")]


class TrialSandbox:
    """One supervisor (inside bwrap, or directly under isolation "none") for one trial."""

    def __init__(self, isolation: str, root: Path, *, read_only: Sequence[Path] = (),
                 hidden: Sequence[Path] = (), limits: Limits = Limits(),
                 host_network: bool = False) -> None:
        self.isolation = check_isolation_mode(isolation)
        self.root = Path(root)
        self.read_only = tuple(Path(p) for p in read_only)
        self.hidden = tuple(Path(p) for p in hidden)
        self.limits = limits
        self.host_network = host_network
        self._process: subprocess.Popen | None = None
        self._log: Any = None
        self._ids = itertools.count(1)
        self._pending: dict[int, Callable[[dict[str, Any] | None], None]] = {}
        self._streams: dict[int, Callable[[str | None], None]] = {}
        self._stream_errors: dict[int, str] = {}
        self._lock = threading.Lock()
        self._reader: threading.Thread | None = None
        self._dead = False
        self._closed = False

    # -- lifecycle -------------------------------------------------------------
    def boundary(self) -> Boundary:
        # A network namespace does not separate unix sockets that live in the file
        # system: hide where services keep theirs (PostgreSQL, Docker, D-Bus, systemd).
        # Not with the host's network, whose name resolution may live in /run.
        system = [] if self.host_network else [Path(p) for p in SOCKET_FOLDERS]
        return Boundary(writable=[self.root], read_only=list(self.read_only),
                        hidden=[*system, *self.hidden], working_directory=self.root,
                        environment={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
                        limits=self.limits, network=self.host_network, as_pid_1=True)

    def argv(self) -> list[str]:
        supervisor = [sys.executable, "-I", "-S", str(SUPERVISOR)]
        if self.isolation == "none":
            return supervisor
        return self.boundary().argv(supervisor, bwrap=require_bubblewrap())

    def start(self, services: Sequence[Service] = ()) -> None:
        """Start the supervisor and the services; returns when every service is ready.

        A host Unix socket that vanishes between the listing of what to cover and bwrap's
        mounting makes bwrap refuse to start; that start is retried with a fresh listing."""
        if self._process is not None:
            raise SandboxFailure("this trial's sandbox was already started")
        def forget_failed_start() -> None:
            self._process, self._closed, self._dead = None, False, False

        start_with_retries(lambda: self._start_once(services), SandboxFailure,
                           reset=forget_failed_start)

    def _start_once(self, services: Sequence[Service]) -> None:
        # The supervisor's stderr: an unnamed file outside the trial folder, so nothing
        # inside can swap it for a link to a host file the harness would then quote.
        self._log = tempfile.TemporaryFile()
        environment = ({"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
                       if self.isolation == "none" else None)
        try:
            self._process = subprocess.Popen(
                self.argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                cwd=str(self.root), env=environment, preexec_fn=self.limits.apply,
                start_new_session=True)
        except OSError as error:
            raise SandboxFailure(f"cannot start the trial's sandbox: {error}") from None
        config = {"services": [{"name": s.name, "argv": list(s.argv), "env": dict(s.env),
                                "cwd": s.cwd, "ready_port": s.ready_port} for s in services]}
        self._write(config)
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        try:
            answer = json.loads(line) if line else None
        except ValueError:
            answer = None
        if not answer or not answer.get("ready"):
            detail = (answer or {}).get("error") or self._log_tail() or "no answer"
            self.close()
            raise SandboxFailure(f"the trial's sandbox did not start ({self.isolation}): {detail}")
        self._reader = threading.Thread(target=self._read_answers, name="trial-sandbox",
                                        daemon=True)
        self._reader.start()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        process = self._process
        if process is not None:
            try:
                self._write({"op": "stop"})
            except SandboxFailure:
                pass
            try:
                process.wait(timeout=3)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(process.pid, 9)
                except (ProcessLookupError, PermissionError):
                    process.kill()
                process.wait()
            for stream in (process.stdin, process.stdout):
                try:
                    if stream is not None:
                        stream.close()
                except OSError:
                    pass
        self._fail_pending()

    def __enter__(self) -> TrialSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- commands --------------------------------------------------------------
    def run(self, *, command: str | None = None, argv: Sequence[str] | None = None,
            env: Mapping[str, str], cwd: Path, timeout: float, merge: bool = True,
            limit: int = DEFAULT_OUTPUT_LIMIT) -> RunOutcome:
        """Run one command inside the boundary and wait for it (blocking)."""
        done = threading.Event()
        box: list[dict[str, Any] | None] = []

        def finish(answer: dict[str, Any] | None) -> None:
            box.append(answer)
            done.set()

        identifier = self._submit(finish, command, argv, env, cwd, timeout, merge, limit)
        try:
            done.wait()
        except BaseException:
            self.kill(identifier)
            raise
        return self._outcome(box[0])

    async def run_async(self, *, command: str | None = None, argv: Sequence[str] | None = None,
                        env: Mapping[str, str], cwd: Path, timeout: float, merge: bool = True,
                        limit: int = DEFAULT_OUTPUT_LIMIT) -> RunOutcome:
        """Run one command inside the boundary; cancelling the await kills it."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any] | None] = loop.create_future()

        def finish(answer: dict[str, Any] | None) -> None:
            def resolve() -> None:
                if not future.done():
                    future.set_result(answer)
            try:
                loop.call_soon_threadsafe(resolve)
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass

        identifier = self._submit(finish, command, argv, env, cwd, timeout, merge, limit)
        try:
            answer = await future
        except BaseException:
            self.kill(identifier)
            raise
        return self._outcome(answer)

    def open_stream(self, *, argv: Sequence[str], env: Mapping[str, str], cwd: Path,
                    listener: Callable[[str | None], None]) -> int:
        """Start a long-lived process inside the boundary whose stdin and stdout are a
        line channel (e.g. an MCP server on its stdio transport). `listener` gets each
        line it prints (without the newline), from the sandbox's reader thread, then
        `None` once when it ends. Returns its id for `write_line` and `kill`."""
        if self._process is None or self._dead or self._closed:
            raise SandboxFailure("the trial's sandbox is not running")
        identifier = next(self._ids)
        with self._lock:
            self._streams[identifier] = listener
        self._write({"op": "open", "id": identifier, "argv": list(argv), "env": dict(env),
                     "cwd": str(cwd)})
        return identifier

    def write_line(self, identifier: int, line: str) -> None:
        """Send one line to an opened process's stdin (the newline is added)."""
        self._write({"op": "write", "id": identifier, "data": line.rstrip("\n") + "\n"})

    def stream_problem(self, identifier: int) -> str:
        """Why an opened process stopped, as far as the sandbox knows: what the
        supervisor said (could not start, overlong line), else the end of its log
        (where the process's stderr goes)."""
        return self._stream_errors.get(identifier) or self._log_tail()

    def kill(self, identifier: int) -> None:
        try:
            self._write({"op": "kill", "id": identifier})
        except SandboxFailure:
            pass

    # -- internals -------------------------------------------------------------
    def _submit(self, finish: Callable[[dict[str, Any] | None], None], command: str | None,
                argv: Sequence[str] | None, env: Mapping[str, str], cwd: Path, timeout: float,
                merge: bool, limit: int) -> int:
        if self._process is None or self._dead or self._closed:
            raise SandboxFailure("the trial's sandbox is not running")
        identifier = next(self._ids)
        with self._lock:
            self._pending[identifier] = finish
        request = {"op": "run", "id": identifier, "env": dict(env), "cwd": str(cwd),
                   "timeout": timeout, "merge": merge, "limit": limit}
        if command is not None:
            request["command"] = command
        else:
            request["argv"] = list(argv or [])
        self._write(request)
        return identifier

    def _outcome(self, answer: dict[str, Any] | None) -> RunOutcome:
        if answer is None:
            raise SandboxFailure("the trial's sandbox stopped while a command ran"
                                 + (f": {self._log_tail()}" if self._log_tail() else ""))
        if answer.get("error"):
            raise SandboxFailure(f"the trial's sandbox could not run a command: {answer['error']}")
        return RunOutcome(answer.get("exit_status"), answer.get("output", ""),
                          answer.get("stderr", ""), bool(answer.get("timed_out")),
                          bool(answer.get("truncated")), bool(answer.get("killed")))

    def _write(self, message: Mapping[str, Any]) -> None:
        process = self._process
        if process is None or process.stdin is None:
            raise SandboxFailure("the trial's sandbox is not running")
        try:
            with self._lock:
                process.stdin.write((json.dumps(message) + "\n").encode("utf-8"))
                process.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            self._dead = True
            raise SandboxFailure("the trial's sandbox is gone") from None

    def _read_answers(self) -> None:
        process = self._process
        assert process is not None and process.stdout is not None
        try:
            for line in process.stdout:
                try:
                    answer = json.loads(line)
                except ValueError:
                    continue
                identifier = answer.get("id")
                with self._lock:
                    listener = self._streams.get(identifier)
                    if listener is not None and answer.get("closed"):
                        del self._streams[identifier]
                    finish = None if listener else self._pending.pop(identifier, None)
                if listener is not None:
                    if answer.get("error"):
                        self._stream_errors[identifier] = str(answer["error"])
                    listener(None if answer.get("closed") else str(answer.get("line", "")))
                elif finish is not None:
                    finish(answer)
        except (OSError, ValueError):
            pass
        self._dead = True
        self._fail_pending()

    def _fail_pending(self) -> None:
        with self._lock:
            pending, self._pending = list(self._pending.values()), {}
            streams, self._streams = list(self._streams.values()), {}
        for finish in pending:
            finish(None)
        for listener in streams:
            listener(None)

    def _log_tail(self) -> str:
        if self._log is None or self._log.closed:
            return ""
        try:
            self._log.seek(0, os.SEEK_END)
            self._log.seek(max(0, self._log.tell() - 400))
            text = self._log.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""
        return " ".join(text.split())[-200:]

    def __del__(self) -> None:
        if self._log is not None:
            try:
                self._log.close()
            except Exception:
                pass


__all__ = ["DEFAULT_OUTPUT_LIMIT", "RunOutcome", "SandboxFailure", "Service", "TrialSandbox",
           "hidden_store_paths", "trial_limits"]
