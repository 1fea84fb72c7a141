"""`core.sandbox.start_with_retries`: the one retry loop both sandboxes (arms' trial
boundary, retrieval's strategy child) use when bwrap refused to start only because a
mount point vanished between listing and mounting. Pure control flow, tested in memory
with a path that surely does not exist (and one that does)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchwarden.core.sandbox import START_ATTEMPTS, start_with_retries


class Refused(Exception):
    pass


def _starter(failures: list[str]):
    calls: list[int] = []

    def start_once() -> str:
        calls.append(1)
        if len(calls) <= len(failures):
            raise Refused(failures[len(calls) - 1])
        return "started"

    return start_once, calls


def test_a_vanished_mount_point_is_retried_after_a_reset(tmp_path: Path):
    gone = tmp_path / "gone.sock"
    start_once, calls = _starter([f"bwrap: Can't create file at {gone}: No such file"])
    resets: list[int] = []
    assert start_with_retries(start_once, Refused, reset=lambda: resets.append(1)) == "started"
    assert len(calls) == 2 and len(resets) == 1


def test_any_other_refusal_is_raised_at_once(tmp_path: Path):
    start_once, calls = _starter(["bwrap: No permissions to create new namespace"])
    with pytest.raises(Refused, match="namespace"):
        start_with_retries(start_once, Refused)
    assert len(calls) == 1


def test_a_path_that_still_exists_is_not_a_vanished_one(tmp_path: Path):
    start_once, calls = _starter([f"bwrap: Can't create file at {tmp_path}: Is a directory"])
    with pytest.raises(Refused):
        start_with_retries(start_once, Refused)
    assert len(calls) == 1


def test_the_attempts_are_bounded_and_the_last_failure_raised(tmp_path: Path):
    gone = tmp_path / "gone.sock"
    said = [f"bwrap: Can't mkdir parents for {gone}: attempt {n}" for n in range(10)]
    start_once, calls = _starter(said)
    with pytest.raises(Refused, match=f"attempt {START_ATTEMPTS - 1}"):
        start_with_retries(start_once, Refused)
    assert len(calls) == START_ATTEMPTS


def test_error_text_reads_what_bwrap_said_beyond_the_exception(tmp_path: Path):
    gone = tmp_path / "gone.sock"
    start_once, calls = _starter(["the child exited"])
    assert start_with_retries(
        start_once, Refused,
        error_text=lambda failure: f"{failure} bwrap: Can't find source path {gone}: x",
    ) == "started"
    assert len(calls) == 2


def test_other_exceptions_pass_through_untouched():
    def start_once() -> None:
        raise KeyError("not a refusal")

    with pytest.raises(KeyError):
        start_with_retries(start_once, Refused)
