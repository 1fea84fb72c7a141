"""Which checkout's package a bench's child processes import.

`python -m benchwarden` puts its working folder first on `sys.path`, ahead of
PYTHONPATH, and the package is installed editable from one checkout: a child started
in (or without naming) a checkout could import another checkout's code than the bench
means, which made an A/B compare a checkout with itself. Children get PYTHONPATH naming
their checkout and a neutral working folder, so they run the code named.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

THIS_CHECKOUT = str(Path(__file__).resolve().parents[1])
"""The checkout this bench script belongs to."""
NEUTRAL_FOLDER = tempfile.gettempdir()
"""A working folder that holds no checkout."""


def child_environment(checkout: str | None = None) -> dict[str, str]:
    """The environment of a child that must import `checkout`'s package (default: this
    bench's own checkout)."""
    return {**os.environ, "PYTHONPATH": checkout or THIS_CHECKOUT}
