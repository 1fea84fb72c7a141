"""Writing a file so that a reader never sees half of it.

Every file benchwarden hands to a person or another tool (reports, exports, pages,
signatures, the engine's manifest and binaries) is written to a temporary file beside
its target and renamed over it only when complete; on any failure the temporary file
is removed and the old target, if any, is left untouched.

Two kinds of target are not a file to replace:
- a device, FIFO or socket (`--out /dev/null`, `/dev/stdout`, a named pipe): a rename
  would put a regular file in its place (run as root, `/dev/null` itself, for every
  program on the machine). It is written straight, as a shell redirection writes it;
  nothing about it is changed or removed, even on failure.
- a symbolic link: the file it points to is replaced, beside that file; the link stays.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchwarden.core.errors import EnvironmentFailure


@contextmanager
def replaced_atomically(target: Path, mode: int | None = None) -> Iterator[Path]:
    """Yield a temporary path beside `target`; rename it over `target` when the block
    ends normally. `mode` sets its permissions first (None keeps the temporary file's
    owner-only 0600). A device, FIFO or socket is yielded itself, to be written
    straight; a symbolic link's file is the one replaced (see the module's comment)."""
    if _is_special(target):
        yield target
        return
    if target.is_symlink():
        target = Path(os.path.realpath(target))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        # a file where a folder of the path should be: say which, not "[Errno 17] File
        # exists: 'report'" about a path the user did not type
        raise EnvironmentFailure(
            f"cannot write {target}: {_file_in_the_way(target.parent)} is a file, not a "
            "folder") from None
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


def _file_in_the_way(folder: Path) -> Path:
    """The first part of `folder` that exists and is not a folder (else `folder`)."""
    for part in reversed((folder, *folder.parents)):
        if part.exists() and not part.is_dir():
            return part
    return folder


def _is_special(target: Path) -> bool:
    """True when `target` (followed through symbolic links) exists and is neither a
    regular file nor a folder."""
    try:
        found = os.stat(target)
    except OSError:
        return False
    return not (stat.S_ISREG(found.st_mode) or stat.S_ISDIR(found.st_mode))


def write_text_atomically(target: Path, text: str, *, mode: int | None = None,
                          encoding: str = "utf-8") -> Path:
    with replaced_atomically(target, mode) as temporary:
        temporary.write_text(text, encoding=encoding)
    return target
