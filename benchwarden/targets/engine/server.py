"""Running llama-server: start it, wait until it is ready, find it again, stop it.

`start_engine()` runs the server as a child in its own session on a loopback port and
returns once `GET /health` answers 200 (it accepts connections while still loading the
model and drops requests sent then). `engine status|stop` find a server that
`engine start` left running through a state file, `paths.home()/engine/state.json`.

Invariants:
- A started engine runs in its own session, so a Ctrl-C at the terminal does not reach
  it unannounced; whoever starts it stops it: SIGTERM to the group, then SIGKILL after a
  grace period, and then anything left in the group.
- Its output goes to a log file, never a pipe: a server that outlives us must not die of
  SIGPIPE, and a caller capturing our output must not wait for it.
- A recorded pid is trusted only while it is alive and still runs the recorded binary
  (pids are recycled); a stale state file is removed.
- Health checks never go through an HTTP proxy (the server is on loopback).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchwarden.core import paths
from benchwarden.targets.engine.build import ensure_engine
from benchwarden.targets.engine.cache import (
    EngineError,
    EngineInstall,
    Progress,
    log_tail,
    write_json_atomically,
)

DEFAULT_ALIAS = "smollm2-135m"


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def process_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie child of ours is reaped and counts as gone)."""
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        if reaped == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rpartition(")")[2].split()[0] != "Z"
    except (FileNotFoundError, IndexError, OSError):
        return True


def stop_process_group(pid: int, grace: float = 10.0) -> bool:
    """SIGTERM the group led by `pid`, SIGKILL it after `grace` s; True if it was running."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        process_alive(pid)  # reaps it if it is our zombie child
        return False
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not process_alive(pid):
            break
        time.sleep(0.05)
    else:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        while process_alive(pid) and time.monotonic() < deadline + 5:
            time.sleep(0.05)
    # The leader is gone; anything left in its group goes too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    return True


# The engine is on loopback: never route a health check through an HTTP proxy.
_LOOPBACK_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def health_status(base_url: str, timeout: float = 2.0) -> int | None:
    """HTTP status of GET /health (503 while loading), or None if nothing answers."""
    try:
        with _LOOPBACK_OPENER.open(f"{base_url}/health", timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except (urllib.error.URLError, OSError, ValueError):
        return None


@dataclass
class EngineProcess:
    """A running llama-server. `base_url` has no `/v1`; OpenAI clients want `api_url`."""

    pid: int
    port: int
    base_url: str
    model: str
    model_path: str
    binary: str
    log_path: str
    started_at: float
    slots: int
    context: int
    threads: int
    _child: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/v1"

    def alive(self) -> bool:
        if self._child is not None:
            return self._child.poll() is None
        return process_alive(self.pid)

    def stop(self, grace: float = 10.0) -> None:
        if self._child is not None and self._child.poll() is not None:
            return
        stop_process_group(self.pid, grace)
        if self._child is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._child.wait(timeout=5)

    def __enter__(self) -> EngineProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def state(self) -> dict[str, Any]:
        return {
            name: getattr(self, name)
            for name in self.__dataclass_fields__
            if not name.startswith("_")
        }


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def default_threads() -> int:
    """CPU threads for llama-server: every core but one, which the measuring client needs.

    ggml's worker threads wait for each other at every operation; when one of them is
    descheduled (the client, or anything else, wants the core) all of them stall.
    Measured on 2 busy cores: `-t 2` decoded 1.3–2.3 tokens/s, `-t 1` 23–28 tokens/s.
    """
    return max(1, min(4, (os.cpu_count() or 2) - 1))


def start_engine(install: EngineInstall | None = None, *, slots: int = 4, context: int = 8192,
                 threads: int | None = None, port: int | None = None, alias: str = DEFAULT_ALIAS,
                 ready_timeout: float = 120.0, log_path: Path | None = None,
                 extra_args: Sequence[str] = (), die_with_parent: bool = False,
                 progress: Progress | None = None) -> EngineProcess:
    """Start llama-server on loopback and return once `/health` answers 200.

    Without `install`, the engine is made (or found) first with `build.ensure_engine`.
    `die_with_parent` (Linux) also stops the server if this process is killed outright;
    `engine start` leaves it off so the server outlives the command.
    """
    threads = threads or default_threads()
    if slots < 1 or context < slots or threads < 1:
        raise EngineError(f"need slots ≥ 1, context ≥ slots and threads ≥ 1 (got {slots}, "
                          f"{context}, {threads})")
    install = install or ensure_engine(progress)
    attempts = 1 if port is not None else 3  # an auto-picked port can be taken meanwhile
    last_error: EngineError | None = None
    for _ in range(attempts):
        chosen = port if port is not None else free_loopback_port()
        try:
            return _launch(install, chosen, slots, context, threads, alias, ready_timeout,
                           log_path, extra_args, die_with_parent)
        except _PortTaken as error:
            last_error = EngineError(str(error))
    assert last_error is not None
    raise last_error


class _PortTaken(EngineError):
    pass


def _launch(install: EngineInstall, port: int, slots: int, context: int, threads: int, alias: str,
            ready_timeout: float, log_path: Path | None, extra_args: Sequence[str],
            die_with_parent: bool) -> EngineProcess:
    log = log_path or paths.home() / "engine" / f"server-{port}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [
        str(install.binary),
        "-m",
        str(install.model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-np",
        str(slots),
        "-c",
        str(context),
        "-t",
        str(threads),
        "--alias",
        alias,
        *extra_args,
    ]
    with open(log, "wb") as out:
        child = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            preexec_fn=_die_with_parent if die_with_parent else None,
        )
    engine = EngineProcess(
        pid=child.pid,
        port=port,
        base_url=f"http://127.0.0.1:{port}",
        model=alias,
        model_path=str(install.model),
        binary=str(install.binary),
        log_path=str(log),
        started_at=time.time(),
        slots=slots,
        context=context,
        threads=threads,
        _child=child,
    )
    deadline = time.monotonic() + ready_timeout
    try:
        while True:
            code = child.poll()
            if code is not None:
                tail = log_tail(log)
                if re.search(r"bind|address already in use", tail, re.IGNORECASE):
                    raise _PortTaken(f"llama-server could not listen on 127.0.0.1:{port}: {tail}")
                raise EngineError(f"llama-server exited with code {code} before it was ready: "
                                  f"{tail}")
            if health_status(engine.base_url, timeout=1.0) == 200:
                return engine
            if time.monotonic() > deadline:
                raise EngineError(f"llama-server was not ready within {ready_timeout:.0f} s "
                                  f"(GET /health never answered 200): {log_tail(log)}")
            time.sleep(0.1)
    except BaseException:
        engine.stop(grace=5)
        raise


# ---------------------------------------------------------------------------------
# The state file behind `engine status|stop`


def state_path() -> Path:
    return paths.home() / "engine" / "state.json"


def write_state(engine: EngineProcess, path: Path | None = None) -> Path:
    target = path or state_path()
    write_json_atomically(target, engine.state())
    return target


def _looks_like_server(pid: int, binary: str) -> bool:
    """Guard against a recycled pid: the process must be the binary we started."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2]  # [interpreter,] program
    except OSError:
        return True  # no /proc: trust the pid
    return any(Path(word.decode(errors="replace")).name == Path(binary).name for word in words)


def _signalable(pid: object) -> bool:
    """Only a real process id other than init's may be signalled from a state file: to
    os.killpg, 0 is the caller's own process group (`engine stop` would SIGTERM itself
    and the shell pipeline it runs in), and /proc/0 does not exist, so the recycled-pid
    guard trusted it; 1 is init; negative ids are not a process."""
    return isinstance(pid, int) and not isinstance(pid, bool) and pid > 1


def running_engine(path: Path | None = None) -> EngineProcess | None:
    """The engine recorded by `engine start` if it still runs; a stale state file is removed."""
    target = path or state_path()
    try:
        data = json.loads(target.read_text(encoding="utf-8"))
        if not isinstance(data, dict):  # a list has no .items(): "unexpected AttributeError"
            raise ValueError("the state is not a JSON object")
        engine = EngineProcess(
            **{k: v for k, v in data.items() if k in EngineProcess.__dataclass_fields__}
        )
        if not _signalable(engine.pid) or not isinstance(engine.binary, str):
            raise ValueError("the state names no process of ours")
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, TypeError, ValueError):
        target.unlink(missing_ok=True)
        return None
    if not (process_alive(engine.pid) and _looks_like_server(engine.pid, engine.binary)):
        target.unlink(missing_ok=True)
        return None
    return engine


def stop_recorded_engine(path: Path | None = None, grace: float = 10.0) -> EngineProcess | None:
    """Stop the engine `engine start` recorded; return it, or None if none was running."""
    target = path or state_path()
    engine = running_engine(target)
    if engine is not None:
        engine.stop(grace)
    target.unlink(missing_ok=True)
    return engine
