"""The trial supervisor's kills, in-process: a kill that arrives before its run's process
exists (the run is started on its own thread) is never lost. Driven through the
module's own functions so the orders of events a loaded machine produces by chance are
produced on purpose."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from benchwarden.suites.arms import supervisor


@pytest.fixture
def answers(monkeypatch):
    sent: list[dict] = []
    monkeypatch.setattr(supervisor, "_send", sent.append)
    yield sent
    supervisor._starting.clear()
    supervisor._killed_before_start.clear()
    supervisor._running.clear()


def _request(identifier: int, tmp_path, seconds: float = 1.0) -> dict:
    return {"op": "run", "id": identifier, "command": f"sleep {seconds}; echo late > late.txt",
            "env": {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, "cwd": str(tmp_path),
            "timeout": 30}


def test_a_run_killed_before_its_thread_started_never_runs(tmp_path, answers):
    request = _request(1, tmp_path)
    with supervisor._running_lock:  # what dispatching does before the thread starts
        supervisor._starting.add(1)
    supervisor._kill(1)
    supervisor._run(request)  # the run's thread, getting to work only now
    assert not (tmp_path / "late.txt").exists()
    assert answers == [{"id": 1, "exit_status": None, "output": "", "stderr": "",
                        "timed_out": False, "killed": True, "truncated": False}]
    assert not supervisor._starting and not supervisor._killed_before_start


def test_a_run_killed_while_its_process_was_being_started_is_killed(tmp_path, answers,
                                                                    monkeypatch):
    real_popen = subprocess.Popen

    def popen_then_kill(*args, **kwargs):
        process = real_popen(*args, **kwargs)
        supervisor._kill(2)  # the kill lands between the process's start and its record
        return process

    monkeypatch.setattr(supervisor.subprocess, "Popen", popen_then_kill)
    with supervisor._running_lock:
        supervisor._starting.add(2)
    supervisor._run(_request(2, tmp_path))
    assert not (tmp_path / "late.txt").exists()
    assert len(answers) == 1 and answers[0]["killed"] is True
    assert answers[0]["exit_status"] is None
    assert 2 not in supervisor._running


def test_a_kill_of_a_finished_run_is_not_kept(tmp_path, answers):
    request = _request(3, tmp_path, seconds=0)
    with supervisor._running_lock:
        supervisor._starting.add(3)
    supervisor._run(request)
    assert (tmp_path / "late.txt").read_text() == "late\n"
    assert answers[0]["exit_status"] == 0 and answers[0]["killed"] is False
    supervisor._kill(3)
    assert not supervisor._killed_before_start and not supervisor._starting


def test_a_dispatched_run_killed_at_once_does_not_run(tmp_path, answers):
    supervisor._dispatch_run(_request(4, tmp_path))
    supervisor._kill(4)  # before or after its thread registers the process: either way
    for _ in range(3000):
        if answers:
            break
        time.sleep(0.01)
    assert answers and answers[0]["killed"] is True
    assert not (tmp_path / "late.txt").exists()
