"""Where benchwarden keeps things on this machine unless told otherwise.

`BENCHWARDEN_HOME` (default `~/.benchwarden`) holds the default store and reports;
`BENCHWARDEN_CACHE` (default `~/.cache/benchwarden`) holds the engine build and model,
which are expensive to make and safe to share between checkouts.
"""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    return Path(os.environ.get("BENCHWARDEN_HOME", "~/.benchwarden")).expanduser()


def cache() -> Path:
    return Path(os.environ.get("BENCHWARDEN_CACHE", "~/.cache/benchwarden")).expanduser()


def default_store() -> str:
    return os.environ.get("BENCHWARDEN_STORE") or str(home() / "store.sqlite")


def reports_dir() -> Path:
    return home() / "reports"
