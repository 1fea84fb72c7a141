"""ruff and mypy, as configured in pyproject.toml, gate at zero findings.

The configuration (ruff: E, F, I, B, UP at 100 columns; mypy: strict on core/ and
targets/) covers `benchwarden/`, `tests/` and `bench/`. Every finding fails the test,
with its file and code: there is no baseline and no exempt file (the last ones, the
store and arms-report modules, reached zero in issue 12's work).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUFF_PATHS = ("benchwarden", "tests", "bench")
MYPY_LINE = re.compile(r"^(?P<file>[^:]+):\d+: error: .*\[(?P<code>[a-z0-9-]+)\]$")


def ruff_findings() -> dict[str, dict[str, int]]:
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "json",
                           "--no-cache", *RUFF_PATHS], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode in (0, 1), done.stderr
    counts: dict[str, Counter[str]] = {}
    for finding in json.loads(done.stdout or "[]"):
        path = Path(finding["filename"]).resolve().relative_to(ROOT).as_posix()
        counts.setdefault(path, Counter())[finding["code"] or "syntax"] += 1
    return {path: dict(sorted(codes.items())) for path, codes in sorted(counts.items())}


def mypy_findings() -> dict[str, dict[str, int]]:
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary",
                           "--show-error-codes", "--no-pretty"], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    counts: dict[str, Counter[str]] = {}
    for line in done.stdout.splitlines():
        match = MYPY_LINE.match(line.strip())
        if match:
            counts.setdefault(match["file"], Counter())[match["code"]] += 1
    assert done.returncode == 0 or counts, f"mypy failed without findings: {done.stdout[-2000:]}"
    return {path: dict(sorted(codes.items())) for path, codes in sorted(counts.items())}


def listed(found: dict[str, dict[str, int]]) -> list[str]:
    """Findings, one line per file and code."""
    return [f"{path}: {code} {count}" for path, codes in sorted(found.items())
            for code, count in sorted(codes.items())]


@pytest.mark.parametrize("name, run", [("ruff", ruff_findings), ("mypy", mypy_findings)])
def test_no_file_has_a_finding(name, run):
    assert listed(run()) == [], f"{name} findings (fix them; there is no baseline)"


def test_findings_are_listed_per_file_and_code():
    found = {"benchwarden/core/stats.py": {"B905": 1}, "tests/x.py": {"F401": 2, "E501": 1}}
    assert listed(found) == ["benchwarden/core/stats.py: B905 1", "tests/x.py: E501 1",
                             "tests/x.py: F401 2"]


def test_a_finding_fails_the_gate(tmp_path):
    """The gate sees a real finding: ruff run the same way over a file with an unused
    import reports it (so an empty result above means clean, not a broken run)."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "json",
                           "--no-cache", "--select", "F", str(bad)], capture_output=True,
                          text=True, timeout=300)
    assert [finding["code"] for finding in json.loads(done.stdout)] == ["F401"]
