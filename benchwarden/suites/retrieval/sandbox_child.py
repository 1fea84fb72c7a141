"""The interpreter that runs one strategy for the harness, inside the boundary (see `sandbox.py`).

Started as `python -I sandbox_child.py KIND TARGET OBJECT`, where KIND is `file`
(TARGET is the strategy file) or `builtin` (TARGET is a built-in's name). The OS
boundary around this process (bubblewrap: read-only file system, private scratch,
no network, own pid namespace, rlimits) is what contains the strategy; this script
only speaks the protocol:

1. keep private copies of stdin/stdout for the protocol and point the strategy's
   stdout at stderr, so a stray print cannot corrupt the protocol;
2. put the strategy file's own folder first on the import path, so it can import
   helper modules kept beside it;
3. answer `index` and `pack` requests, one JSON line each.

Every failure becomes one `{"ok": false}` reply naming its kind, a one-line error,
where it happened (innermost file and line) and the formatted traceback, which the
harness shows with `--traceback`. Nothing here stops a strategy from doing anything:
that is the boundary's job, and the tests prove it against hostile strategies.
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
sys.dont_write_bytecode = True  # the package folders are read-only inside the boundary

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import errno  # noqa: E402
import importlib.util  # noqa: E402
import traceback  # noqa: E402

import msgspec  # noqa: E402

from benchwarden.suites.retrieval.api import PackError, Session, coerce_pack  # noqa: E402

MAX_TRACEBACK_CHARS = 6000
_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()
_pending = bytearray()


def _send(message):
    data = _encoder.encode(message) + b"\n"
    while data:
        written = os.write(_PROTOCOL_OUT, data)
        data = data[written:]


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


def _where(error):
    frames = traceback.extract_tb(error.__traceback__) if error.__traceback__ else []
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else ""


def _failure(error):
    """The reply for a failure; never raises (even with the address space nearly full)."""
    try:
        return _describe_failure(error)
    except BaseException:  # noqa: BLE001 - a reply must go out whatever happened
        kind = "memory" if isinstance(error, MemoryError) else "strategy_error"
        return {"ok": False, "kind": kind, "error": type(error).__name__, "where": "",
                "traceback": ""}


def _describe_failure(error):
    if isinstance(error, MemoryError) and error.__traceback__ is not None:
        # Free what the failing frames hold (the hoard that filled the address space)
        # before formatting anything; file names and line numbers survive.
        traceback.clear_frames(error.__traceback__)
    if isinstance(error, MemoryError):
        kind, message = "memory", "MemoryError: address-space cap reached"
    elif isinstance(error, PackError):
        kind, message = "protocol", f"unreadable pack: {error}"
    elif isinstance(error, RecursionError):
        kind, message = "crash", "RecursionError"
    elif isinstance(error, OSError) and error.errno == errno.EMFILE:
        kind, message = "open_files", f"too many open files: {error}"
    else:
        kind, message = "strategy_error", f"{type(error).__name__}: {error}"
    where = _where(error)
    if where:
        message = f"{message} at {os.path.basename(where.split(':')[0])}:{where.rsplit(':', 1)[1]}"
    try:
        text = "".join(traceback.format_exception(error))[-MAX_TRACEBACK_CHARS:]
    except Exception:  # a traceback that cannot even be formatted still gets a reply
        text = ""
    return {"ok": False, "kind": kind, "error": message[:300], "where": where,
            "traceback": text}


def _instantiate(candidate):
    strategy = candidate
    if isinstance(candidate, type) or (callable(candidate) and not hasattr(candidate, "pack")):
        strategy = candidate()
    for name in ("index", "pack"):
        if not callable(getattr(strategy, name, None)):
            raise TypeError(f"strategy has no callable {name}()")
    return strategy


def _load(kind, target, attribute):
    if kind == "builtin":
        from benchwarden.suites.retrieval.strategies import BUILTIN_STRATEGIES

        return _instantiate(BUILTIN_STRATEGIES[target])
    folder = os.path.dirname(os.path.abspath(target))
    if folder not in sys.path:
        sys.path.insert(0, folder)  # the strategy's own folder, for its helper modules
    spec = importlib.util.spec_from_file_location("challenger_strategy", target)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {target}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["challenger_strategy"] = module
    spec.loader.exec_module(module)
    if not hasattr(module, attribute):
        raise AttributeError(f"{os.path.basename(target)} defines no {attribute!r}")
    return _instantiate(getattr(module, attribute))


def _serve(strategy):
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
            elif message.get("op") == "close":
                close = getattr(strategy, "close", None)
                if callable(close):
                    close()
                _send({"ok": True})
                return 0
            else:
                _send({"ok": False, "kind": "protocol",
                       "error": f"unknown op {message.get('op')!r}"})
                return 1
        except BaseException as error:  # noqa: BLE001 - every failure is reported
            if isinstance(error, (KeyboardInterrupt, SystemExit)):
                _send({"ok": False, "kind": "crash", "error": f"{type(error).__name__}"})
                return 1
            _send(_failure(error))


def main(argv):
    kind, target, attribute = argv[1], argv[2], argv[3]
    try:
        strategy = _load(kind, target, attribute)
    except BaseException as error:  # noqa: BLE001 - every failure is reported, none escapes
        reply = _failure(error)
        if reply["kind"] == "strategy_error":
            reply["kind"] = "load_error"
        _send(reply)
        return 1
    _send({"ok": True, "ready": True})
    return _serve(strategy)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
