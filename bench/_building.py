"""Cached bench stores built safely: at a temporary path beside the final one, moved into
place whole (the store and its head witness), so a build stopped halfway leaves no half
store under the name later runs look for; the building done by a child of this checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from _checkout import NEUTRAL_FOLDER, child_environment


def built_in_place(store: Path, build: Callable[[Path], None]) -> None:
    """`build(partial)` writes the store at `partial`; then it and its `.head` witness
    are moved to `store`."""
    store.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".building-", dir=store.parent) as building:
        partial = Path(building, store.name)
        build(partial)
        for suffix in ("", ".head"):
            if Path(f"{partial}{suffix}").exists():
                shutil.move(f"{partial}{suffix}", f"{store}{suffix}")


def child_output(arguments: list[str], what: str) -> str:
    """The standard output of `python ARGUMENTS` run with this checkout's package from a
    neutral folder; exits naming `what` when it fails."""
    done = subprocess.run([sys.executable, *arguments], capture_output=True, text=True,
                          env=child_environment(), cwd=NEUTRAL_FOLDER)
    if done.returncode != 0:
        raise SystemExit(f"{what} failed: {done.stderr.strip()[-400:]}")
    return done.stdout
