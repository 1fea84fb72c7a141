"""Writing a file so that a reader never sees half of it.

Every file benchwarden hands to a person or another tool (reports, exports, pages,
signatures, the engine's manifest and binaries) is written to a temporary file beside
its target and renamed over it only when complete; on any failure the temporary file
is removed and the old target, if any, is left untouched.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def replaced_atomically(target: Path, mode: int | None = None) -> Iterator[Path]:
    """Yield a temporary path beside `target`; rename it over `target` when the block
    ends normally. `mode` sets its permissions first (None keeps the temporary file's
    owner-only 0600)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    os.close(handle)
    try:
        yield Path(temporary)
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_text_atomically(target: Path, text: str, *, mode: int | None = None,
                          encoding: str = "utf-8") -> Path:
    with replaced_atomically(target, mode) as temporary:
        temporary.write_text(text, encoding=encoding)
    return target
