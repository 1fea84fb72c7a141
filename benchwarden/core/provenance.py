"""Stamping a run: who, where, what code. This is shell code (it reads the clock,
the host and git); scoring never calls it.

Invariant: nothing stamped here holds a credential; the target description names
a URL and a model, and at most the name of the environment variable a key came from.
"""

from __future__ import annotations

import os
import platform
import secrets
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchwarden.core.records import Run
from benchwarden.core.version import __version__

PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # the benchwarden package folder


def new_run_id(suite: str) -> str:
    """Sortable by start time, unique without coordination: `<suite>-<utc>-<random>`."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return f"{suite}-{stamp}-{secrets.token_hex(3)}"


def git_sha(directory: Path = PACKAGE_ROOT) -> str | None:
    """The commit of the working tree holding the code, `+dirty` when modified."""
    try:
        sha = subprocess.run(["git", "-C", str(directory), "rev-parse", "HEAD"],
                             capture_output=True, text=True, timeout=5)
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(directory), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               timeout=5)
        return sha.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def host_fingerprint() -> dict[str, Any]:
    return {
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "cpu_count": os.cpu_count(),
    }


def stamp_run(*, suite: str, bench_version: str, config: Mapping[str, Any],
              seeds: Sequence[int] = (), target: Mapping[str, Any] | None = None,
              run_id: str | None = None, resumed_from: str | None = None) -> Run:
    return Run(
        run_id=run_id or new_run_id(suite),
        suite=suite,
        bench_version=bench_version,
        config=dict(config),
        seeds=tuple(int(seed) for seed in seeds),
        target=dict(target or {}),
        package_version=__version__,
        git_sha=git_sha(),
        host=host_fingerprint(),
        started_at=time.time(),
        resumed_from=resumed_from,
    )
