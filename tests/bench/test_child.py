"""bench/_child.py: a measured command's peak RSS is its own, not its parent's (Linux
keeps a process's peak across `exec`, so a child started directly by a bench that had
grown inherited the bench's peak)."""

from __future__ import annotations

import subprocess
import sys

from tests.bench.test_bench_contract import load

child = load("_child")

# a child that grows to about 120 MiB, then exits with a code of its own
GROWS = ("import sys; block = bytearray(120 * 2**20); block[::4096] = b'x' * len(block[::4096]);"
         " print('said', file=sys.stderr); sys.exit(3)")


def test_a_small_command_under_a_large_parent_measures_small():
    ballast = bytearray(300 * 2**20)
    ballast[::4096] = b"x" * len(ballast[::4096])  # touched: resident in this process
    measured = child.run_measured([sys.executable, "-c", "pass"])
    assert measured.returncode == 0
    assert measured.peak_mib < 100  # the parent is over 300 MiB
    del ballast


def test_the_commands_own_peak_exit_code_and_stderr_are_reported():
    measured = child.run_measured([sys.executable, "-c", GROWS], stdout=subprocess.DEVNULL)
    assert measured.returncode == 3 and b"said" in measured.stderr
    assert 120 <= measured.peak_mib < 300
    assert measured.seconds > 0
