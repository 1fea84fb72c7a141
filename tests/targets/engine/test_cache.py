"""engine/cache.py: the reuse decisions (pure), the manifest, the lock, and reading the cache."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from benchwarden.core.errors import BenchwardenError
from benchwarden.targets import engine as eng
from benchwarden.targets.engine import cache
from tests.fakes.engine_parts import TINY


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


@pytest.mark.parametrize(
    "field, other",
    [
        ("package", "llm-other"),
        ("version", "0.1.3"),
        ("member", "x/other.gguf"),
        ("size", 4095),
        ("sha256", "ee" * 32),
    ],
)
def test_model_entry_current_rejects_any_mismatch(field, other):
    entry = {"package": TINY.package, "version": TINY.version, "member": TINY.member,
             "size": TINY.size, "sha256": "ff" * 32}
    assert eng.model_entry_current(entry, "ff" * 32, TINY)
    assert not eng.model_entry_current({**entry, field: other}, "ff" * 32, TINY)
    assert not eng.model_entry_current(entry, None, TINY)


@pytest.mark.parametrize(
    "content", ["", "{not json", "[]", json.dumps({"format": 99, "engine": {}})]
)
def test_a_missing_damaged_or_foreign_manifest_reads_as_empty(layout, content):
    if content:
        layout.root.mkdir(parents=True)
        layout.manifest.write_text(content)
    assert eng.read_manifest(layout) == {}
    assert eng.installed_engine(layout, TINY) is None


def test_update_manifest_keeps_the_other_entries(layout):
    cache.update_manifest(layout, "model", {"sha256": "aa"})
    cache.update_manifest(layout, "engine", {"sha256": "bb"})
    manifest = eng.read_manifest(layout)
    assert manifest["format"] == eng.MANIFEST_FORMAT
    assert manifest["model"] == {"sha256": "aa"} and manifest["engine"] == {"sha256": "bb"}


def test_installed_engine_needs_both_entries_and_unchanged_files(layout):
    layout.binary.parent.mkdir(parents=True)
    layout.binary.write_bytes(b"binary")
    layout.model(TINY).parent.mkdir(parents=True)
    layout.model(TINY).write_bytes(b"m" * TINY.size)
    cache.update_manifest(layout, "engine", good_engine_entry(eng.sha256_of(layout.binary)))
    assert eng.installed_engine(layout, TINY) is None  # no model entry yet
    cache.update_manifest(layout, "model", {"package": TINY.package, "version": TINY.version,
                                            "member": TINY.member, "size": TINY.size,
                                            "sha256": eng.sha256_of(layout.model(TINY))})
    found = eng.installed_engine(layout, TINY)
    assert found is not None and (found.binary, found.model) == (layout.binary, layout.model(TINY))
    layout.binary.write_bytes(b"tampered")
    assert eng.installed_engine(layout, TINY) is None


def hold_the_lock(root: str, locked, release) -> None:
    with eng.cache_lock(eng.EngineLayout(Path(root))):
        locked.set()
        release.wait(30)


def test_a_second_process_waits_for_the_lock_and_is_told_why(layout):
    context = multiprocessing.get_context("fork")
    locked, release = context.Event(), context.Event()
    holder = context.Process(target=hold_the_lock, args=(str(layout.root), locked, release))
    holder.start()
    try:
        assert locked.wait(30)
        said: list[str] = []

        def progress(message: str) -> None:
            said.append(message)
            release.set()  # let the holder go only once we are known to be waiting

        with eng.cache_lock(layout, progress):
            assert release.is_set()  # the lock was ours only after the holder was let go
        assert said and "another process is preparing the engine" in said[0]
    finally:
        release.set()
        holder.join(30)


def test_engine_errors_are_one_line_benchwarden_errors():
    error = eng.EngineError("cannot build\n  llama-server:\tcmake missing")
    assert isinstance(error, BenchwardenError)
    assert str(error) == "cannot build llama-server: cmake missing"


def test_log_tail_joins_the_last_lines(tmp_path):
    log = tmp_path / "log"
    assert cache.log_tail(log) == ""
    log.write_text("one\n\ntwo\nthree\n")
    assert cache.log_tail(log, 2) == "two | three"
