"""Where benchwarden keeps things on this machine unless told otherwise.

`BENCHWARDEN_HOME` (default `~/.benchwarden`) holds the default store and reports;
`BENCHWARDEN_CACHE` (default `~/.cache/benchwarden`) holds the engine build and model,
which are expensive to make and safe to share between checkouts.

Only the default locations are ever created for the user: a path someone typed
(`--store`, `BENCHWARDEN_STORE`) must already have its folder, so a typo never
quietly grows a directory tree.
"""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    return Path(os.environ.get("BENCHWARDEN_HOME", "~/.benchwarden")).expanduser()


def cache() -> Path:
    return Path(os.environ.get("BENCHWARDEN_CACHE", "~/.cache/benchwarden")).expanduser()


def home_store() -> Path:
    """The built-in default store, inside `home()`: the one store whose folder is created."""
    return home() / "store.sqlite"


def default_store() -> str:
    """The store every command uses without `--store`: BENCHWARDEN_STORE, else `home_store()`."""
    return os.environ.get("BENCHWARDEN_STORE") or str(home_store())


def is_home_store(location: str | Path) -> bool:
    """True when `location` is the built-in default store (so its folder may be created)."""
    text = str(location)
    if "://" in text:
        return False
    return Path(text).expanduser().absolute() == home_store().absolute()


def reports_dir() -> Path:
    return home() / "reports"
