"""One command in a child process, measured: its wall time, its own peak RSS, its exit.

Why a launcher between the bench and the command: Linux keeps a process's peak RSS
across `exec`, and Python starts children with `vfork` (or `fork`), so a child's
`ru_maxrss` starts from its PARENT's peak. A bench that built a store in-process (a
few hundred MB) made every command it measured look at least that large, and a ratio
between two sizes look flatter than it is. The command is therefore started by a
small Python launcher (about 10 MB) that times it and reads its rusage from `wait4`;
only the launcher's own small peak can leak into the figure.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

_LAUNCHER = """
import os, sys, time
started = time.perf_counter()
pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
elapsed = time.perf_counter() - started
with open(sys.argv[1], "w") as out:
    out.write(f"{elapsed!r} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}")
"""


@dataclass(frozen=True)
class Measured:
    seconds: float
    """Wall time from the command's start to its exit (the launcher's own start excluded)."""
    peak_mib: float
    """The command's peak resident set, MiB."""
    returncode: int
    stderr: bytes


def run_measured(arguments: list[str], **popen: Any) -> Measured:
    """Run `arguments` (argv, its first item a program on PATH or a path) in a child
    process started by the launcher; `popen` goes to `subprocess.Popen` (env, cwd,
    stdout; stderr is captured)."""
    with tempfile.NamedTemporaryFile("r", prefix="bw-measured-", suffix=".txt") as result:
        launcher = subprocess.Popen([sys.executable, "-c", _LAUNCHER, result.name, *arguments],
                                    stderr=subprocess.PIPE, **popen)
        _, stderr = launcher.communicate()
        figures = result.read().split()
    if launcher.returncode != 0 or len(figures) != 3:
        raise RuntimeError(f"could not measure {arguments[:3]}: launcher exited "
                           f"{launcher.returncode}: {stderr[-300:]!r}")
    seconds, peak_kib, code = float(figures[0]), int(figures[1]), int(figures[2])
    return Measured(seconds, peak_kib / 1024.0, code, stderr)  # ru_maxrss is in KiB


if __name__ == "__main__":  # a check by hand: a tiny command under a large parent
    ballast = bytearray(300 * 2**20)
    ballast[::4096] = b"x" * len(ballast[::4096])
    direct = subprocess.Popen([sys.executable, "-c", "pass"])
    _, _, usage = os.wait4(direct.pid, 0)
    print(f"`python -c pass` under a 300 MiB parent: started directly {usage.ru_maxrss / 1024:.0f}"
          f" MiB, through the launcher {run_measured([sys.executable, '-c', 'pass']).peak_mib:.0f}"
          " MiB")
