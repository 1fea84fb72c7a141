"""`core.files`: a target replaced whole or not at all; a device, FIFO or socket written
straight (never replaced by a regular file); a symbolic link's file replaced, the link
kept."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from benchwarden.core.files import replaced_atomically, write_text_atomically


def test_a_file_is_replaced_whole_and_nothing_is_left_beside_it(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("old")
    write_text_atomically(target, "new", mode=0o644)
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o644
    assert sorted(path.name for path in tmp_path.iterdir()) == ["report.json"]


def test_a_failure_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), replaced_atomically(target) as temporary:
        temporary.write_text("half")
        raise RuntimeError("stopped")
    assert target.read_text() == "old"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["report.json"]


def test_dev_null_is_written_straight_never_replaced():
    """Run as root, a rename over /dev/null put a regular file there for every program
    on the machine (`export --out /dev/null` did). The check raises inside the block,
    so a regression fails here without renaming anything over it."""
    with replaced_atomically(Path("/dev/null")) as path:
        if path != Path("/dev/null"):
            raise AssertionError(f"a temporary file {path} was made for /dev/null")
        path.write_text("dropped")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_named_pipe_is_written_straight_and_stays_a_pipe(tmp_path):
    pipe = tmp_path / "feed"
    os.mkfifo(pipe)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_text()), daemon=True)
    reader.start()
    write_text_atomically(pipe, "through the pipe", mode=0o600)
    reader.join(timeout=30)
    assert received == ["through the pipe"]
    assert stat.S_ISFIFO(os.stat(pipe).st_mode)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["feed"]


def test_a_failure_while_writing_a_pipe_leaves_the_pipe(tmp_path):
    pipe = tmp_path / "feed"
    os.mkfifo(pipe)
    with pytest.raises(RuntimeError), replaced_atomically(pipe):
        raise RuntimeError("stopped before writing")
    assert stat.S_ISFIFO(os.stat(pipe).st_mode)


def test_a_symbolic_link_keeps_pointing_at_its_file_which_is_replaced(tmp_path):
    folder = tmp_path / "real"
    folder.mkdir()
    real = folder / "report.html"
    real.write_text("old")
    link = tmp_path / "latest.html"
    link.symlink_to(real)
    write_text_atomically(link, "new")
    assert link.is_symlink() and link.resolve() == real
    assert real.read_text() == "new"
    assert sorted(path.name for path in folder.iterdir()) == ["report.html"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["latest.html", "real"]


@pytest.mark.parametrize("under", ["afile/x.json", "afile/deeper/x.json"])
def test_a_file_where_a_folder_should_be_is_named_in_one_line(tmp_path, under):
    # was "[Errno 17] File exists: '.../afile'" (or NotADirectoryError) about a path the
    # user did not type; nothing is left behind
    from benchwarden.core.errors import EnvironmentFailure
    from benchwarden.core.files import write_text_atomically

    (tmp_path / "afile").write_text("kept")
    target = tmp_path / under
    with pytest.raises(EnvironmentFailure) as caught:
        write_text_atomically(target, "report")
    message = str(caught.value)
    assert f"cannot write {target}" in message and f"{tmp_path / 'afile'} is a file" in message
    assert (tmp_path / "afile").read_text() == "kept"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["afile"]
