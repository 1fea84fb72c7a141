"""engine/server.py: starting, finding and stopping llama-server.

The first part drives `start_engine` with a `FakeLlamaServer` script (tests/fakes/
engine_parts.py): it can crash at start or ignore SIGTERM, faults the real server does
not show on demand. The last part runs the real cached engine (one per module) and the
`engine` CLI, and needs `make engine`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request

import pytest

from benchwarden.targets import engine as eng
from tests.conftest import require
from tests.fakes.engine_parts import fake_llama_server


def test_start_waits_for_health_and_stop_ends_the_process(tmp_path):
    engine = eng.start_engine(
        fake_llama_server(tmp_path), ready_timeout=30, log_path=tmp_path / "log"
    )
    try:
        assert eng.health_status(engine.base_url) == 200
        assert engine.alive()
    finally:
        engine.stop(grace=5)
    assert not eng.process_alive(engine.pid)
    assert eng.health_status(engine.base_url, timeout=0.5) is None


def test_a_server_that_dies_reports_its_log_tail(tmp_path):
    with pytest.raises(eng.EngineError, match="exited with code 3 .*failed to load model"):
        eng.start_engine(
            fake_llama_server(tmp_path, "crash"), ready_timeout=30, log_path=tmp_path / "log"
        )


def test_stop_kills_a_server_that_ignores_sigterm(tmp_path):
    engine = eng.start_engine(fake_llama_server(tmp_path, "stubborn"), ready_timeout=30,
                              log_path=tmp_path / "log")
    engine.stop(grace=0.5)
    assert not eng.process_alive(engine.pid)


def test_state_file_round_trip_and_stale_pid(tmp_path):
    engine = eng.start_engine(
        fake_llama_server(tmp_path), ready_timeout=30, log_path=tmp_path / "log"
    )
    state = tmp_path / "state.json"
    try:
        eng.write_state(engine, state)
        found = eng.running_engine(state)
        assert found is not None and (found.pid, found.base_url) == (engine.pid, engine.base_url)
    finally:
        engine.stop(grace=5)
    assert eng.running_engine(state) is None  # pid gone: stale
    assert not state.exists()


def test_a_recycled_pid_is_not_mistaken_for_the_engine(tmp_path):
    state = tmp_path / "state.json"
    data = {
        "pid": os.getpid(),
        "port": 1,
        "base_url": "http://127.0.0.1:1",
        "model": "m",
        "model_path": "m",
        "binary": "/somewhere/llama-server-0.3.36",
        "log_path": "l",
        "started_at": 0.0,
        "slots": 1,
        "context": 8,
        "threads": 1,
    }
    state.write_text(json.dumps(data))
    assert eng.running_engine(state) is None  # our own pid is alive, but it is not llama-server
    assert not state.exists()


# --- the real engine -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_install() -> eng.EngineInstall:
    install = eng.installed_engine()
    require(install is not None, "the llama.cpp engine in the cache",
            "run `make engine` or `benchwarden engine build`")
    return install


@pytest.fixture(scope="module")
def real_engine(real_install, tmp_path_factory):
    log = tmp_path_factory.mktemp("engine") / "server.log"
    with eng.start_engine(real_install, slots=4, context=8192, log_path=log,
                          die_with_parent=True) as engine:
        yield engine


@pytest.mark.engine
def test_real_engine_is_healthy_and_serves_the_alias(real_engine):
    assert eng.health_status(real_engine.base_url) == 200
    with urllib.request.urlopen(f"{real_engine.api_url}/models", timeout=10) as response:
        models = json.load(response)
    assert eng.DEFAULT_ALIAS in [model["id"] for model in models["data"]]


@pytest.mark.engine
def test_real_engine_streams_a_chat_completion(real_engine):
    body = json.dumps(
        {
            "model": real_engine.model,
            "temperature": 0,
            "max_tokens": 24,
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "Name three colours."}],
        }
    ).encode()
    request = urllib.request.Request(f"{real_engine.api_url}/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    events = []
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.headers.get_content_type() == "text/event-stream"
        for raw in response:
            line = raw.decode().strip()
            if line.startswith("data:"):
                events.append(line[5:].strip())
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    text = "".join(
        choice["delta"].get("content") or "" for chunk in chunks for choice in chunk["choices"]
    )
    finishes = [choice["finish_reason"] for chunk in chunks for choice in chunk["choices"]
                if choice.get("finish_reason")]
    usage = [chunk["usage"] for chunk in chunks if chunk.get("usage")]
    assert text.strip()
    assert finishes in (["stop"], ["length"])
    assert usage and 0 < usage[-1]["completion_tokens"] <= 24


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchwarden", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.mark.engine
def test_cli_start_status_stop_round_trip(real_install, tmp_path):
    env = {**os.environ, "BENCHWARDEN_HOME": str(tmp_path / "home")}
    started = run_cli("engine", "start", "--slots", "2", "--context", "2048", env=env)
    assert started.returncode == 0, started.stderr
    url = started.stdout.strip().splitlines()[-1]
    state = json.loads((tmp_path / "home" / "engine" / "state.json").read_text())
    pid = state["pid"]
    try:
        assert url.startswith("http://127.0.0.1:") and eng.health_status(url) == 200
        status = run_cli("engine", "status", env=env)
        assert status.returncode == 0
        assert (
            status.stdout.startswith("running")
            and url in status.stdout
            and str(pid) in status.stdout
        )
        again = run_cli("engine", "start", env=env)  # a second start reuses the first
        assert again.stdout.strip() == url and "already running" in again.stderr
        stopped = run_cli("engine", "stop", env=env)
        assert stopped.returncode == 0 and stopped.stdout.strip() == f"stopped engine pid {pid}"
        assert not eng.process_alive(pid)
        assert eng.health_status(url, timeout=0.5) is None
        assert run_cli("engine", "status", env=env).stdout.strip() == "not running"
    finally:
        if eng.process_alive(pid):
            os.killpg(pid, signal.SIGKILL)


@pytest.mark.engine
def test_cli_build_reuses_the_cache(real_install):
    result = run_cli("engine", "build", env=dict(os.environ))
    assert result.returncode == 0, result.stderr
    assert f"binary {real_install.binary}" in result.stdout
    assert "building" not in result.stderr  # nothing was rebuilt


@pytest.mark.parametrize("state_text", [
    # os.killpg(0, ...) is the caller's own process group, and /proc/0 does not exist,
    # so the recycled-pid check trusted it: `engine stop` would have SIGTERMed itself
    json.dumps({"pid": 0, "port": 1, "base_url": "http://127.0.0.1:1", "model": "m",
                "model_path": "m", "binary": "llama-server", "log_path": "l",
                "started_at": 0.0, "slots": 1, "context": 8, "threads": 1}),
    json.dumps({"pid": -1, "port": 1, "base_url": "http://127.0.0.1:1", "model": "m",
                "model_path": "m", "binary": "llama-server", "log_path": "l",
                "started_at": 0.0, "slots": 1, "context": 8, "threads": 1}),
    json.dumps({"pid": True, "port": 1, "base_url": "http://127.0.0.1:1", "model": "m",
                "model_path": "m", "binary": "llama-server", "log_path": "l",
                "started_at": 0.0, "slots": 1, "context": 8, "threads": 1}),
    "[]",  # a list has no .items(): it was "unexpected AttributeError" from engine status
    "5",
])
def test_a_state_file_naming_no_process_of_ours_is_stale(tmp_path, state_text):
    state = tmp_path / "state.json"
    state.write_text(state_text)
    assert eng.running_engine(state) is None
    assert not state.exists()
