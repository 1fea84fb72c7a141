"""bench/_checkout.py: a bench's child imports the checkout it names, wherever the bench
was started (a child started in one checkout used to import that checkout's package
whatever PYTHONPATH said, so an A/B compared a checkout with itself)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.bench.test_bench_contract import load

checkout = load("_checkout")


def _fake_checkout(root: Path, name: str) -> Path:
    package = root / name / "benchwarden"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f"WHICH = {name!r}\n")
    return root / name


def _imported(environment: dict[str, str], folder: str) -> str:
    done = subprocess.run([sys.executable, "-c", "import benchwarden; print(benchwarden.WHICH)"],
                          env=environment, cwd=folder, capture_output=True, text=True,
                          check=True)
    return done.stdout.strip()


def test_a_child_imports_the_checkout_it_names_not_the_folder_it_starts_in(tmp_path):
    named = _fake_checkout(tmp_path, "older")
    started_in = _fake_checkout(tmp_path, "newer")
    # what the benches did: PYTHONPATH named, the working folder another checkout's root
    assert _imported({"PATH": "", "PYTHONPATH": str(named)}, str(started_in)) == "newer"
    assert _imported(checkout.child_environment(str(named)), checkout.NEUTRAL_FOLDER) == "older"


def test_by_default_a_child_imports_the_benchs_own_checkout():
    root = Path(__file__).resolve().parents[2]
    assert checkout.THIS_CHECKOUT == str(root)
    assert checkout.child_environment()["PYTHONPATH"] == str(root)
    assert not (Path(checkout.NEUTRAL_FOLDER) / "benchwarden").exists()


def test_a_childs_checkout_is_compiled_before_it_starts(tmp_path):
    """Every side of an A/B imports from bytecode: a fresh checkout would otherwise
    compile every module in every child under PYTHONDONTWRITEBYTECODE."""
    named = _fake_checkout(tmp_path, "fresh")
    (named / "benchwarden" / "report.py").write_text("X = 1\n")
    cache = named / "benchwarden" / "__pycache__"
    assert not cache.exists()
    checkout.child_environment(str(named))
    assert sorted(path.name.split(".")[0] for path in cache.iterdir()) == ["__init__", "report"]
