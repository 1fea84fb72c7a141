"""The per-trial supervisor: runs INSIDE the trial's boundary and executes what the host asks.

Started once per trial (`python -I -S supervisor.py`, standard library only, so it
needs nothing from the harness's import path) as pid 1 of the trial's bubblewrap
sandbox (`--as-pid-1`: no bwrap reaper holds the pipes to the host; orphans it does
not reap stay zombies until the trial ends, when the namespace dies with it), or directly
on the host under `--isolation none`. It speaks JSON lines: requests on stdin, answers on
stdout.

1. The first line is the trial's configuration: `{"services": [{"name", "argv", "env",
   "cwd", "ready_port"}]}`. Each service (e.g. the tracker's REST server) is started as a
   child in its own process group; the supervisor waits until each `ready_port` accepts
   a connection on 127.0.0.1 (inside the sandbox's own network namespace), then answers
   `{"ready": true}` or `{"ready": false, "error": "..."}`.
2. Then, any number of `{"op": "run", "id", "command" | "argv", "env", "cwd", "timeout",
   "limit", "merge"}`: each runs in its own process group (shell commands with
   `bash --noprofile --norc -c`), concurrently, answered with `{"id", "exit_status",
   "output", "stderr", "timed_out", "truncated"}`. `{"op": "kill", "id"}` kills one
   run's process group; `{"op": "stop"}` or the end of stdin kills everything and exits.
3. `{"op": "open", "id", "argv", "env", "cwd"}` starts a long-lived process whose
   stdin and stdout are a line channel (an MCP server on its stdio transport): every
   line it prints comes back as `{"id", "line"}`, `{"op": "write", "id", "data"}` writes
   to its stdin, and its end is answered `{"id", "closed": true, "exit_status"}`.
   `{"op": "kill", "id"}` ends it like a run.

Invariants:
- A kill is never lost: a run is started on its own thread, so a kill can arrive before
  its process exists; such a run is marked and either never started or killed the
  moment it is (a cancelled command that went on running inside the trial was what a
  loaded machine showed).
- Whatever a command leaves behind in its process group (background jobs) is killed
  when it ends or times out; at the end every service and command is killed. Under
  bubblewrap the pid namespace dies with this process, so nothing survives the trial.
- Output is read in full (a child never blocks on a full pipe) but at most `limit`
  bytes are kept; the rest is counted as truncated.
- Environment variables arrive over the pipe, never on a command line (so secrets a
  command driver passes are not visible in the host's process list).
- This process is made non-dumpable, so commands (same user) cannot reach its pipes
  through /proc. They can still signal it; a supervisor that dies ends the trial as a
  harness error, never as an agent outcome.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time

READY_TIMEOUT = 30.0
_write_lock = threading.Lock()
# Keyed by each request's JSON "id", as the host sent it.
_running: dict[object, subprocess.Popen[bytes]] = {}
_running_lock = threading.Lock()
# Runs dispatched to their thread whose process is not registered in `_running` yet, and
# those of them a kill arrived for (under `_running_lock`).
_starting: set[object] = set()
_killed_before_start: set[object] = set()
_services: list[subprocess.Popen] = []
_inputs: dict[object, queue.Queue[bytes | None]] = {}
LINE_LIMIT = 16 * 1024 * 1024
"""Longest line an opened process may print; a longer one ends it (the host would have
to hold it whole)."""


def _send(message: dict) -> None:
    data = (json.dumps(message) + "\n").encode("utf-8")
    with _write_lock:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        process.kill()
    except ProcessLookupError:
        pass


def _start_services(services: list) -> str | None:
    """Start every service; None when all are ready, else why not."""
    for service in services:
        name = service.get("name", "service")
        try:
            process = subprocess.Popen(
                service["argv"], env=service.get("env") or {}, cwd=service.get("cwd") or None,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=sys.stderr,
                start_new_session=True)
        except OSError as error:
            return f"cannot start {name}: {error}"
        _services.append(process)
        port = service.get("ready_port")
        if port is None:
            continue
        deadline = time.monotonic() + float(service.get("ready_timeout", READY_TIMEOUT))
        while True:
            if process.poll() is not None:
                return f"{name} exited with status {process.returncode} before it was ready"
            try:
                socket.create_connection(("127.0.0.1", int(port)), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    return f"{name} did not listen on port {port} within the time allowed"
                time.sleep(0.02)
    return None


class _Collector(threading.Thread):
    """Reads one pipe to its end; keeps at most `limit` bytes."""

    def __init__(self, pipe, limit: int) -> None:
        super().__init__(daemon=True)
        self.pipe = pipe
        self.limit = limit
        self.kept = bytearray()
        self.dropped = 0

    def run(self) -> None:
        while True:
            chunk = self.pipe.read1(65536) if hasattr(self.pipe, "read1") else self.pipe.read(65536)
            if not chunk:
                break
            room = self.limit - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]
            self.dropped += max(0, len(chunk) - max(room, 0))
        self.pipe.close()


def _run(request: dict) -> None:
    identifier = request.get("id")
    limit = int(request.get("limit", 65536))
    merge = bool(request.get("merge", True))
    if request.get("command") is not None:
        argv = ["/bin/bash", "--noprofile", "--norc", "-c", str(request["command"])]
    else:
        argv = [str(word) for word in request.get("argv") or []]
    with _running_lock:
        if identifier in _killed_before_start:  # killed before it could start: never run
            _starting.discard(identifier)
            _killed_before_start.discard(identifier)
            _send({"id": identifier, "exit_status": None, "output": "", "stderr": "",
                   "timed_out": False, "killed": True, "truncated": False})
            return
    try:
        process = subprocess.Popen(
            argv, env=request.get("env") or {}, cwd=request.get("cwd") or None,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge else subprocess.PIPE, start_new_session=True)
    except OSError as error:
        with _running_lock:
            _starting.discard(identifier)
            _killed_before_start.discard(identifier)
        _send({"id": identifier, "exit_status": None, "output": "", "stderr": "",
               "timed_out": False, "truncated": False, "error": f"cannot start: {error}"})
        return
    with _running_lock:
        _starting.discard(identifier)
        if identifier in _killed_before_start:  # killed while it was being started
            _killed_before_start.discard(identifier)
            _kill_group(process)  # not registered: reported as killed below
        else:
            _running[identifier] = process
    readers = [_Collector(process.stdout, limit)]
    if not merge:
        readers.append(_Collector(process.stderr, limit))
    for reader in readers:
        reader.start()
    timed_out = False
    try:
        process.wait(timeout=max(0.05, float(request.get("timeout", 60))))
    except subprocess.TimeoutExpired:
        timed_out = True
    # Background jobs left in the command's group would hold the pipes open: end them too.
    _kill_group(process)
    process.wait()
    for reader in readers:
        reader.join(5)
    with _running_lock:
        killed = _running.pop(identifier, None) is None
    _send({"id": identifier, "exit_status": None if timed_out or killed else process.returncode,
           "output": readers[0].kept.decode("utf-8", "replace"),
           "stderr": readers[1].kept.decode("utf-8", "replace") if not merge else "",
           "timed_out": timed_out, "killed": killed,
           "truncated": any(reader.dropped for reader in readers)})


def _open(request: dict) -> None:
    """Start a process whose stdout lines go to the host and whose stdin takes the
    host's writes, each through its own thread, so a child that stops reading its input
    never blocks this supervisor."""
    identifier = request.get("id")
    try:
        process = subprocess.Popen(
            [str(word) for word in request.get("argv") or []], env=request.get("env") or {},
            cwd=request.get("cwd") or None, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=sys.stderr, start_new_session=True)
    except OSError as error:
        _send({"id": identifier, "closed": True, "exit_status": None,
               "error": f"cannot start: {error}"})
        return
    inputs: queue.Queue[bytes | None] = queue.Queue()
    with _running_lock:
        _running[identifier] = process
        _inputs[identifier] = inputs

    def write() -> None:
        assert process.stdin is not None
        while True:
            data = inputs.get()
            if data is None:
                break
            try:
                process.stdin.write(data)
                process.stdin.flush()
            except (OSError, ValueError):
                break
        try:
            process.stdin.close()
        except OSError:
            pass

    def read() -> None:
        assert process.stdout is not None
        problem = None
        while True:
            line = process.stdout.readline(LINE_LIMIT + 1)
            if not line:
                break
            if len(line) > LINE_LIMIT:
                problem = f"it printed a line longer than {LINE_LIMIT} bytes"
                _kill_group(process)
                break
            _send({"id": identifier, "line": line.decode("utf-8", "replace").rstrip("\n")})
        _kill_group(process)  # whatever it left in its group ends with it
        process.wait()
        inputs.put(None)
        with _running_lock:
            _running.pop(identifier, None)
            _inputs.pop(identifier, None)
        answer = {"id": identifier, "closed": True, "exit_status": process.returncode}
        if problem:
            answer["error"] = problem
        _send(answer)

    threading.Thread(target=write, daemon=True).start()
    threading.Thread(target=read, daemon=True).start()


def _write(identifier: object, data: object) -> None:
    with _running_lock:
        inputs = _inputs.get(identifier)
    if inputs is not None:
        inputs.put(str(data).encode("utf-8"))


def _dispatch_run(request: dict) -> None:
    """Start a run on its own thread, noted as starting first, so that a kill arriving
    before its process exists is kept (`_kill`)."""
    with _running_lock:
        _starting.add(request.get("id"))
    threading.Thread(target=_run, args=(request,), daemon=True).start()


def _kill(identifier: object) -> None:
    with _running_lock:
        process = _running.pop(identifier, None)
        if process is None and identifier in _starting:
            _killed_before_start.add(identifier)
    if process is not None:
        _kill_group(process)


def _stop_everything() -> None:
    with _running_lock:
        processes = list(_running.values()) + list(_services)
    for process in processes:
        _kill_group(process)


def _not_dumpable() -> None:
    """PR_SET_DUMPABLE 0: a command of the same user cannot open /proc/<this pid>/fd/* and
    forge answers on the pipe to the host (commands start dumpable again at exec)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def main() -> int:
    _not_dumpable()
    # Under bwrap this is pid 1 of the sandbox: only signals it handles reach it from
    # inside, so it handles none (Python's SIGINT handler would let a command stop it).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    first = sys.stdin.buffer.readline()
    try:
        config = json.loads(first or b"{}")
    except ValueError as error:
        _send({"ready": False, "error": f"bad configuration line: {error}"})
        return 2
    problem = _start_services(config.get("services") or [])
    if problem is not None:
        _send({"ready": False, "error": problem})
        _stop_everything()
        return 1
    _send({"ready": True, "pid": os.getpid()})
    try:
        for line in sys.stdin.buffer:
            try:
                request = json.loads(line)
            except ValueError:
                continue
            op = request.get("op")
            if op == "run":
                _dispatch_run(request)
            elif op == "open":
                _open(request)
            elif op == "write":
                _write(request.get("id"), request.get("data", ""))
            elif op == "kill":
                _kill(request.get("id"))
            elif op == "stop":
                break
    finally:
        _stop_everything()
    return 0


if __name__ == "__main__":
    sys.exit(main())
