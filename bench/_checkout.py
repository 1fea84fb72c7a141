"""Which checkout's package a bench's child processes import.

`python -m benchwarden` puts its working folder first on `sys.path`, ahead of
PYTHONPATH, and the package is installed editable from one checkout: a child started
in (or without naming) a checkout could import another checkout's code than the bench
means, which made an A/B compare a checkout with itself. Children get PYTHONPATH naming
their checkout and a neutral working folder, so they run the code named.

Each checkout's package is compiled to bytecode before its first child starts: with
PYTHONDONTWRITEBYTECODE set (as here), a checkout that had bytecode from an earlier
install ran from it while a fresh worktree compiled every module in every child, about
0.1 s a command charged to the older side of an A/B.
"""

from __future__ import annotations

import compileall
import functools
import os
import tempfile
from pathlib import Path

THIS_CHECKOUT = str(Path(__file__).resolve().parents[1])
"""The checkout this bench script belongs to."""
NEUTRAL_FOLDER = tempfile.gettempdir()
"""A working folder that holds no checkout."""


def child_environment(checkout: str | None = None) -> dict[str, str]:
    """The environment of a child that must import `checkout`'s package (default: this
    bench's own checkout), the package compiled first (`compiled`)."""
    compiled(checkout or THIS_CHECKOUT)
    return {**os.environ, "PYTHONPATH": checkout or THIS_CHECKOUT}


@functools.cache
def compiled(checkout: str) -> bool:
    """Compile `checkout`'s package to bytecode beside its sources, once per process (a
    module whose bytecode is current is left as it is), so every side of an A/B imports
    from bytecode; whether every module compiled."""
    package = Path(checkout) / "benchwarden"
    return not package.is_dir() or bool(compileall.compile_dir(str(package), quiet=2))
