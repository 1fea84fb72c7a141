"""`benchwarden demo`, end to end on the cached real engine, and its clean-up on Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

from benchwarden.core.commandline import parse_levels as parse_concurrency
from benchwarden.targets import engine as eng
from tests.conftest import require

QUICK = ["--probes", "2", "--concurrency", "2,4", "--max-tokens", "32"]


@pytest.mark.parametrize(
    "text, expected", [("2,4,8", (2, 4, 8)), ("16", (16,)), (" 2, 3 ", (2, 3))]
)
def test_concurrency_levels_parse(text, expected):
    assert parse_concurrency(None, None, text) == expected


@pytest.mark.parametrize("text", ["1,2", "two", "", "2,,0"])
def test_concurrency_levels_below_two_or_not_numbers_are_refused(text):
    with pytest.raises(click.BadParameter):
        parse_concurrency(None, None, text)


@pytest.fixture
def cached_engine() -> eng.EngineInstall:
    install = eng.installed_engine()
    require(install is not None, "the llama.cpp engine in the cache",
            "run `make engine` or `benchwarden engine build`")
    return install


def demo_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "BENCHWARDEN_HOME": str(tmp_path / "home"), "COLUMNS": "160"}


def engine_pids(stderr: str) -> list[int]:
    return [int(pid) for pid in re.findall(r"ready at \S+ \(pid (\d+)", stderr)]


@pytest.mark.engine
def test_demo_writes_the_report_and_leaves_no_engine_behind(cached_engine, tmp_path):
    result = subprocess.run([sys.executable, "-m", "benchwarden", "demo", *QUICK],
                            capture_output=True, text=True, env=demo_env(tmp_path), timeout=300)
    print(result.stdout[-3000:], result.stderr[-2000:])
    report_path = tmp_path / "home" / "reports" / "demo-latest.json"
    assert result.returncode in (0, 1), result.stderr
    assert f"report written to {report_path}" in result.stdout
    report = json.loads(report_path.read_text())
    assert result.returncode == (1 if report["verdict"]["kind"] == "fail" else 0)
    assert report["score"]["prompts"] == 2
    assert [rung["concurrency"] for rung in report["rungs"]] == [2, 4]
    page = report_path.with_suffix(".html")
    assert f"HTML report written to {page}" in result.stdout
    assert report["run"]["id"] in page.read_text(encoding="utf-8")
    assert "building" not in result.stderr  # the cached engine was reused
    pids = engine_pids(result.stderr)
    assert len(pids) == 1
    assert not eng.process_alive(pids[0])
    assert f"llama-server stopped (pid {pids[0]})" in result.stderr


def sigint_as_if_ignored_by_the_shell() -> None:
    """A background job's shell hands SIGINT down ignored: the program must not care."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.engine
@pytest.mark.parametrize("inherited", [sigint_default, sigint_as_if_ignored_by_the_shell],
                         ids=["sigint-default", "sigint-inherited-ignored"])
def test_demo_stops_the_engine_on_ctrl_c(cached_engine, tmp_path, inherited):
    # The child's SIGINT disposition is set explicitly (never inherited from pytest,
    # which may itself have been started with SIGINT ignored); the program installs
    # its own handler either way.
    demo = subprocess.Popen([sys.executable, "-m", "benchwarden", "demo", *QUICK],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=demo_env(tmp_path), preexec_fn=inherited)
    assert demo.stderr is not None
    seen = ""
    try:
        for line in demo.stderr:  # wait until the engine is up and the suite has begun
            seen += line
            if "ready at" in line:
                break
        pids = engine_pids(seen)
        assert len(pids) == 1, seen
        assert eng.process_alive(pids[0])
        time.sleep(0.5)
        demo.send_signal(signal.SIGINT)
        rest = demo.stderr.read()
        code = demo.wait(timeout=60)
    finally:
        if demo.poll() is None:
            demo.kill()
    assert code == 130, rest
    assert "interrupted by SIGINT" in rest
    assert f"llama-server stopped (pid {pids[0]})" in rest
    assert not eng.process_alive(pids[0])
    assert not (tmp_path / "home" / "reports" / "demo-latest.json").exists()
