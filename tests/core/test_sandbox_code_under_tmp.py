"""benchwarden installed under /tmp (CI often clones there) still runs in its own boundary.

The boundary gives every sandbox a private, empty /tmp. Code living under /tmp (the
checkout, a virtualenv, an import path) must be shown again read-only, or the sandboxed
child cannot even start. Found by a clean clone under /tmp: the retrieval child and the
arms supervisor both failed with "can't open file".
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from benchwarden.core.sandbox import Boundary, code_paths_under_tmp
from tests.conftest import bwrap_or_skip

PACKAGE = Path(__file__).resolve().parents[2] / "benchwarden"


@pytest.fixture()
def tree_under_tmp():
    bwrap_or_skip()
    root = Path(tempfile.mkdtemp(prefix="benchwarden-tree-", dir="/tmp"))
    shutil.copytree(PACKAGE, root / "benchwarden",
                    ignore=shutil.ignore_patterns("__pycache__"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _run_from(tree: Path, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(tree), "HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "benchwarden", *args], cwd=tree,
                          env=environment, capture_output=True, text=True, timeout=600)


def test_an_import_path_under_tmp_is_visible_read_only(tmp_path, monkeypatch) -> None:
    bwrap_or_skip()
    code = Path(tempfile.mkdtemp(prefix="benchwarden-code-", dir="/tmp"))
    try:
        (code / "probe_module.py").write_text("VALUE = 'seen'\n")
        monkeypatch.syspath_prepend(str(code))
        assert code.resolve() in code_paths_under_tmp()
        boundary = Boundary(environment={"PYTHONPATH": str(code), "PATH": "/usr/bin:/bin"})
        script = ("import probe_module; print(probe_module.VALUE); "
                  f"open({str(code / 'written.txt')!r}, 'w')")
        result = subprocess.run(boundary.argv([sys.executable, "-c", script]),
                                capture_output=True, text=True, timeout=60)
        assert result.stdout.strip() == "seen"
        assert "Read-only file system" in result.stderr
        assert not (code / "written.txt").exists()
    finally:
        shutil.rmtree(code, ignore_errors=True)


def test_a_sandboxed_retrieval_run_works_from_a_tree_under_tmp(tree_under_tmp, tmp_path) -> None:
    result = _run_from(tree_under_tmp, "retrieval", "run", "--strategy", "substring",
                       "--seeds", "1", "--sandbox", "--store", str(tmp_path / "s.sqlite"),
                       home=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "can't open file" not in result.stdout + result.stderr


def test_an_arms_trial_sandbox_starts_from_a_tree_under_tmp(tree_under_tmp, tmp_path) -> None:
    trial = Path(tempfile.mkdtemp(prefix="benchwarden-trial-", dir="/tmp"))
    script = ("from pathlib import Path\n"
              "from benchwarden.suites.arms.boundary import TrialSandbox\n"
              f"with TrialSandbox('bwrap', Path({str(trial)!r})) as box:\n"
              "    box.start()\n"
              "    print(box.run(command='echo inside', env={'PATH': '/usr/bin:/bin'},\n"
              f"                  cwd=Path({str(trial)!r}), timeout=60).output.strip())\n")
    try:
        result = subprocess.run([sys.executable, "-c", script], cwd=tree_under_tmp,
                                env={**os.environ, "PYTHONPATH": str(tree_under_tmp)},
                                capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(trial, ignore_errors=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "inside"


def test_a_strategy_file_under_tmp_runs_sandboxed(tmp_path) -> None:
    bwrap_or_skip()
    example = Path(__file__).resolve().parents[1] / "suites" / "retrieval" / "strategy_files"
    folder = Path(tempfile.mkdtemp(prefix="benchwarden-strategy-", dir="/tmp"))
    try:
        shutil.copy(example / "entity_first.py", folder / "entity_first.py")
        result = subprocess.run(
            [sys.executable, "-m", "benchwarden", "retrieval", "run", "--strategy",
             f"{folder / 'entity_first.py'}:EntityFirst", "--seeds", "1", "--sandbox",
             "--store", str(tmp_path / "s.sqlite")],
            env={**os.environ, "HOME": str(tmp_path)}, capture_output=True, text=True,
            timeout=600)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert result.returncode == 0, result.stderr[-2000:]
