"""The sandboxed interpreter that runs one challenger strategy (see `sandbox.py`).

Started as `python -I sandbox_child.py LIMITS_JSON PATH OBJECT`. Order matters:
1. keep private copies of stdin/stdout for the protocol and point the strategy's
   stdout at stderr, so a stray print cannot corrupt the protocol;
2. import what the harness side needs (msgspec, the strategy API) while that is
   still allowed;
3. set resource limits (CPU seconds, address space, open files);
4. install the audit hook that refuses network, subprocesses, native code loading,
   file writes and limit changes;
5. only then import the strategy file.

A refusal writes one `{"refused": ...}` line and leaves at once with `os._exit`: the
strategy cannot catch its way past it. Every other failure becomes an `{"ok": false}`
reply naming what happened.
"""

import os
import sys

_PROTOCOL_IN = os.dup(0)
_PROTOCOL_OUT = os.dup(1)
os.dup2(2, 1)
_devnull = os.open(os.devnull, os.O_RDONLY)
os.dup2(_devnull, 0)
os.close(_devnull)
sys.stdout = sys.stderr
sys.dont_write_bytecode = True

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import errno  # noqa: E402
import importlib.machinery  # noqa: E402
import importlib.util  # noqa: E402
import resource  # noqa: E402
import sysconfig  # noqa: E402
import traceback  # noqa: E402

import msgspec  # noqa: E402

from benchwarden.suites.retrieval.api import PackError, Session, coerce_pack  # noqa: E402

EXIT_REFUSED = 70
_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()
_pending = bytearray()

_NATIVE_MODULES = frozenset({"ctypes", "_ctypes", "cffi", "_cffi_backend"})
# `subprocess` raises its audit event in Python code; the C helper underneath it does not,
# so the helper itself may not be imported at all.
_PROCESS_MODULES = frozenset({"_posixsubprocess", "subprocess", "multiprocessing"})
_PROCESS_EVENTS = frozenset({
    "subprocess.Popen", "os.system", "os.fork", "os.forkpty", "os.kill", "os.killpg",
    "pty.spawn", "os.startfile", "os.posix_spawn", "os.posix_spawnp",
})
_FILE_EVENTS = frozenset({
    "os.remove", "os.unlink", "os.rename", "os.replace", "os.rmdir", "os.mkdir",
    "os.makedirs", "os.chmod", "os.chown", "os.lchown", "os.truncate", "os.link",
    "os.symlink", "os.utime", "os.mkfifo", "os.mknod", "os.chflags", "os.setxattr",
    "os.removexattr", "shutil.rmtree", "shutil.move", "shutil.copyfile",
    "shutil.copymode", "shutil.copystat", "shutil.chown",
})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_paths = sysconfig.get_paths()
_STDLIB_DIRS = tuple(os.path.realpath(_paths[key]) for key in ("stdlib", "platstdlib"))
_PACKAGE_DIRS = tuple(os.path.realpath(_paths[key]) for key in ("purelib", "platlib"))


def _send(message):
    data = _encoder.encode(message) + b"\n"
    while data:
        written = os.write(_PROTOCOL_OUT, data)
        data = data[written:]


def _refuse(kind, detail):
    try:
        _send({"refused": kind, "detail": str(detail)[:300]})
    finally:
        os._exit(EXIT_REFUSED)


def _under(path, directories):
    return any(path == d or path.startswith(d + os.sep) for d in directories)


def _extension_outside_stdlib(name):
    """True when importing `name` would load native code that the stdlib did not ship."""
    parent_name, _, _ = name.rpartition(".")
    search_path = None
    if parent_name:
        parent = sys.modules.get(parent_name)
        search_path = getattr(parent, "__path__", None)
        if search_path is None:
            return False
    try:
        spec = importlib.machinery.PathFinder.find_spec(name, search_path)
    except Exception:
        return False
    if spec is None or not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
        return False
    origin = os.path.realpath(spec.origin or "")
    return not _under(origin, _STDLIB_DIRS) or _under(origin, _PACKAGE_DIRS)


_READ_ROOTS = []  # filled in by main(): the interpreter, sys.path and the strategy's folder
_READ_FILES = frozenset({"/dev/null", "/dev/urandom", "/dev/random"})


def _readable(path):
    if isinstance(path, int):
        return True  # an already-open descriptor; the cap on those is RLIMIT_NOFILE
    try:
        real = os.path.realpath(os.path.join("/", os.fsdecode(path)))
    except (TypeError, ValueError):
        return False
    return real in _READ_FILES or _under(real, _READ_ROOTS)


def _audit(event, args):
    if event == "open":
        path, mode, flags = (tuple(args) + (None, None, None))[:3]
        if (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                (isinstance(flags, int) and flags & _WRITE_FLAGS):
            _refuse("file_write", f"open {path!r} for writing")
        if not _readable(path):
            _refuse("file_read", f"open {path!r}: only the interpreter's files and the "
                                 "strategy's own folder are readable")
    elif event.startswith("socket."):
        _refuse("network", event)
    elif event in _PROCESS_EVENTS or event.startswith(("os.exec", "os.spawn")):
        _refuse("subprocess", event)
    elif event.startswith(("ctypes.", "cffi.")):
        _refuse("native_code", event)
    elif event == "import":
        name = str(args[0])
        if name.split(".")[0] in _NATIVE_MODULES:
            _refuse("native_code", f"import {name}")
        if name.split(".")[0] in _PROCESS_MODULES:
            _refuse("subprocess", f"import {name}")
        if _extension_outside_stdlib(name):
            _refuse("native_code", f"import of extension module {name} from outside the stdlib")
    elif event in _FILE_EVENTS:
        _refuse("file_write", event)
    elif event == "sqlite3.connect":
        database = args[0] if args else None
        if str(database) not in (":memory:", ""):
            _refuse("file_write", f"sqlite3.connect({database!r}): only :memory: is allowed")
    elif event in ("sqlite3.enable_load_extension", "sqlite3.load_extension"):
        _refuse("native_code", event)
    elif event in ("resource.setrlimit", "resource.prlimit"):
        _refuse("limits", event)


def _apply_limits(limits):
    cpu = max(1, int(limits["cpu_seconds"]))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 2))
    memory = int(limits["memory_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    files = int(limits["open_files"])
    resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))


def _read_message():
    """One request line from the harness, or None when it closed the pipe."""
    while b"\n" not in _pending:
        chunk = os.read(_PROTOCOL_IN, 65536)
        if not chunk:
            return None
        _pending.extend(chunk)
    end = _pending.index(b"\n")
    line = bytes(_pending[:end])
    del _pending[:end + 1]
    return _decoder.decode(line)


def _failure(error):
    if isinstance(error, MemoryError):
        return {"ok": False, "kind": "memory", "error": "MemoryError: address-space cap reached"}
    if isinstance(error, PackError):
        return {"ok": False, "kind": "protocol", "error": f"unreadable pack: {error}"[:300]}
    if isinstance(error, RecursionError):
        return {"ok": False, "kind": "crash", "error": "RecursionError"}
    if isinstance(error, OSError) and error.errno == errno.EMFILE:
        return {"ok": False, "kind": "open_files", "error": f"too many open files: {error}"}
    last = traceback.extract_tb(error.__traceback__)[-1:] if error.__traceback__ else []
    where = f" at {os.path.basename(last[0].filename)}:{last[0].lineno}" if last else ""
    return {"ok": False, "kind": "strategy_error",
            "error": f"{type(error).__name__}: {error}{where}"[:300]}


def _instantiate(candidate):
    strategy = candidate
    if isinstance(candidate, type) or (callable(candidate) and not hasattr(candidate, "pack")):
        strategy = candidate()
    for name in ("index", "pack"):
        if not callable(getattr(strategy, name, None)):
            raise TypeError(f"strategy has no callable {name}()")
    return strategy


def main(argv):
    limits = _decoder.decode(argv[1].encode())
    path, attribute = argv[2], argv[3]
    _apply_limits(limits)
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, _ROOT, os.path.dirname(path),
             *(entry for entry in sys.path if entry)}
    _READ_ROOTS.extend(sorted(os.path.realpath(root) for root in roots))
    for name in list(sys.modules):  # so importing them again raises the import event
        if name.split(".")[0] in _NATIVE_MODULES | _PROCESS_MODULES:
            del sys.modules[name]
    sys.addaudithook(_audit)
    try:
        spec = importlib.util.spec_from_file_location("challenger_strategy", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules["challenger_strategy"] = module
        spec.loader.exec_module(module)
        if not hasattr(module, attribute):
            raise AttributeError(f"{os.path.basename(path)} defines no {attribute!r}")
        strategy = _instantiate(getattr(module, attribute))
    except BaseException as error:  # noqa: BLE001 - every failure is reported, none escapes
        reply = _failure(error)
        if reply["kind"] == "strategy_error":
            reply["kind"] = "load_error"
        _send(reply)
        return 1
    _send({"ok": True, "ready": True})
    while True:
        try:
            message = _read_message()
        except msgspec.DecodeError as error:
            _send({"ok": False, "kind": "protocol", "error": f"bad request: {error}"})
            return 1
        if message is None:
            return 0
        try:
            if message.get("op") == "index":
                sessions = [Session(index=s["index"], title=s["title"], text=s["text"])
                            for s in message["sessions"]]
                strategy.index(sessions)
                _send({"ok": True})
            elif message.get("op") == "pack":
                items = coerce_pack(strategy.pack(message["question"], message["limit"],
                                                  message["budget_chars"]))
                _send({"ok": True, "items": [
                    {"text": item.text, "source": list(item.source) if item.source else None,
                     "status": item.status} for item in items]})
            else:
                _send({"ok": False, "kind": "protocol", "error": f"unknown op {message.get('op')!r}"})
                return 1
        except BaseException as error:  # noqa: BLE001
            if isinstance(error, (KeyboardInterrupt, SystemExit)):
                _send({"ok": False, "kind": "crash", "error": f"{type(error).__name__}"})
                return 1
            _send(_failure(error))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
