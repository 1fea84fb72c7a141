"""ruff and mypy, as configured in pyproject.toml, gate at zero findings.

The configuration (ruff: E, F, I, B, UP at 100 columns; mypy: strict on core/ and
targets/) arrived after the code; its findings have since been fixed everywhere except in
the few files of `PENDING`, which another branch was rewriting when the rest reached
zero. Those files' findings are counted per file and per code in tests/static_baseline/:
a test fails when any file gains a finding of any code, and when a file has fewer than
its baseline, so the baseline only ever shrinks (regenerate it with
`python tests/test_static_checks.py --update` after fixing, and say so in the commit).
Any finding in a file outside `PENDING` fails, whatever the baseline says, so regenerating
the baseline cannot let a new finding in. When `PENDING` is empty the gate is zero.
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
BASELINE = ROOT / "tests" / "static_baseline"
RUFF_PATHS = ("benchwarden", "tests", "bench")
MYPY_LINE = re.compile(r"^(?P<file>[^:]+):\d+: error: .*\[(?P<code>[a-z0-9-]+)\]$")
# The only files allowed a baseline: being rewritten on the summary-table branch when the
# rest of the repository reached zero. Remove each once it is clean; never add one.
PENDING = frozenset({
})


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


def compare(found: dict[str, dict[str, int]], baseline: dict[str, dict[str, int]]
            ) -> tuple[list[str], list[str]]:
    """(new findings, fixed findings still in the baseline), one line per file and code."""
    new, fixed = [], []
    for path in sorted(set(found) | set(baseline)):
        now, before = found.get(path, {}), baseline.get(path, {})
        for code in sorted(set(now) | set(before)):
            if now.get(code, 0) > before.get(code, 0):
                new.append(f"{path}: {code} {before.get(code, 0)} -> {now.get(code, 0)}")
            elif now.get(code, 0) < before.get(code, 0):
                fixed.append(f"{path}: {code} {before.get(code, 0)} -> {now.get(code, 0)}")
    return new, fixed


def load(name: str) -> dict[str, dict[str, int]]:
    return json.loads((BASELINE / f"{name}.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name, run", [("ruff", ruff_findings), ("mypy", mypy_findings)])
def test_no_new_findings_and_the_baseline_only_shrinks(name, run):
    new, fixed = compare(run(), load(name))
    assert new == [], f"new {name} findings (fix them): {new}"
    assert fixed == [], (f"{name} findings fixed: shrink the baseline with "
                         f"`python tests/test_static_checks.py --update`: {fixed}")


def outside_pending(found: dict[str, dict[str, int]]) -> list[str]:
    """Findings in files that must be clean, one line per file and code."""
    return [f"{path}: {code} {count}" for path, codes in sorted(found.items())
            if path not in PENDING for code, count in sorted(codes.items())]


@pytest.mark.parametrize("name, run", [("ruff", ruff_findings), ("mypy", mypy_findings)])
def test_every_file_outside_pending_has_no_finding(name, run):
    assert outside_pending(run()) == [], f"{name} findings (fix them, no baseline here)"
    assert set(load(name)) <= PENDING, f"{name} baseline lists a file outside PENDING"


def test_outside_pending_ignores_only_the_pending_files():
    found = {"benchwarden/suites/arms/html.py": {"E501": 3},
             "benchwarden/core/stats.py": {"B905": 1},
             "tests/x.py": {"F401": 2}}
    assert outside_pending(found) == ["benchwarden/core/stats.py: B905 1", "tests/x.py: F401 2"]


def test_the_new_shape_modules_are_clean():
    """The modules of the suite registry carry no baseline at all."""
    clean = ["benchwarden/core/suite.py", "benchwarden/core/commandline.py",
             "benchwarden/core/version.py", "tests/test_static_checks.py"]
    for name in ("ruff", "mypy"):
        assert not set(clean) & set(load(name)), f"{name} baseline lists a module meant clean"


def test_compare_reports_a_new_and_a_fixed_finding():
    new, fixed = compare({"a.py": {"E501": 2}, "b.py": {"F401": 1}},
                         {"a.py": {"E501": 1}, "c.py": {"B008": 1}})
    assert new == ["a.py: E501 1 -> 2", "b.py: F401 0 -> 1"]
    assert fixed == ["c.py: B008 1 -> 0"]


if __name__ == "__main__" and sys.argv[1:] == ["--update"]:
    BASELINE.mkdir(exist_ok=True)
    for baseline_name, findings in (("ruff", ruff_findings()), ("mypy", mypy_findings())):
        (BASELINE / f"{baseline_name}.json").write_text(json.dumps(findings, indent=1) + "\n",
                                                        encoding="utf-8")
        print(baseline_name, sum(sum(codes.values()) for codes in findings.values()), "findings")
