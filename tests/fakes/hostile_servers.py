"""`HostileServer`: faults a real engine cannot produce on demand, on a loopback port.

A fake, named as such: `FakeOpenAIServer` (the deterministic canary replies) with one
hostile behaviour switched on. It runs in its own thread and event loop, so a test can
drive the real CLI, or a `ChatClient` in the main thread, against it. Every behaviour is
bounded in count and time (a stream stops by itself after `limit_seconds`), so a client
that fails to defend itself makes a test fail rather than hang.

Chat behaviours:
- `endless`: content deltas as fast as the socket takes them, never finishing.
- `slowloris`: a normal reply, one byte every `byte_interval` seconds.
- `huge_line`: one `data:` line of `reply_bytes` bytes (no line ending until the end).
- `huge_reply`: a well-formed reply of `reply_bytes` bytes of content deltas.
- `overchunked`: `chunks_per_token` times `max_tokens` content chunks, then a proper end.
- `overloaded`: the first `overloaded_requests` chat requests get HTTP 429 with
  `Retry-After: retry_after` (None: no header); later ones the normal reply.
- `gzip_bomb`: `Content-Encoding: gzip` (although the client asks for identity): about
  200 KB on the wire that inflate to a `reply_bytes` line of zeros.
- `invalid_bytes`: the normal reply with one content delta holding the raw byte `\\xff`
  when the request runs alone and `\\xfe` when another overlaps it (issue 8, section 1).

`TricklingServer` trickles the whole chat answer, status line and headers included.

Model-list behaviours (`models=`): `nested` (an entry holding JSON nested 100,000 deep,
past msgspec's recursion limit), `huge` (a
64 MiB body), `not_list` (`data` is a string), `overloaded` (429 as above).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import zlib
from typing import Any

from aiohttp import web

from tests.fakes.openai_server import _CANARY, FakeOpenAIServer
from tests.fakes.raw_http_server import read_request

CHAT_BEHAVIOURS = ("clean", "endless", "slowloris", "huge_line", "huge_reply", "overchunked",
                   "overloaded", "invalid_bytes", "gzip_bomb")
MODEL_BEHAVIOURS = ("clean", "nested", "huge", "not_list", "overloaded")


def _frame(content: str | None = None, finish: str | None = None, **extra: Any) -> bytes:
    delta = {} if content is None else {"content": content}
    chunk = {"id": "chatcmpl-hostile", "object": "chat.completion.chunk", "created": 1,
             "model": "fake-model",
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
    return f"data: {json.dumps(chunk)}\n\n".encode()


def _gzip_bomb(size: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: the gzip container
    parts = [packer.compress(b'data: {"choices": [{"index": 0, "delta": {"content": "')]
    block = b"0" * (1024 * 1024)
    for _ in range(size // len(block)):
        parts.append(packer.compress(block))
    parts.append(packer.compress(b'"}}]}\n\ndata: [DONE]\n\n'))
    parts.append(packer.flush())
    return b"".join(parts)


class HostileServer(FakeOpenAIServer):
    """See the module docstring. Use as a context manager; `url` is the base URL."""

    def __init__(self, chat: str = "clean", *, models: str = "clean", byte_interval: float = 0.2,
                 reply_bytes: int = 1024 * 1024, chunks_per_token: int = 10,
                 overloaded_requests: int = 1, retry_after: str | None = "1",
                 limit_seconds: float = 60.0, **fake_options: Any) -> None:
        if chat not in CHAT_BEHAVIOURS:
            raise ValueError(f"unknown chat behaviour {chat!r}")
        if models not in MODEL_BEHAVIOURS:
            raise ValueError(f"unknown models behaviour {models!r}")
        super().__init__("clean", **fake_options)
        self.chat_behaviour = chat
        self.models_behaviour = models
        self.byte_interval = byte_interval
        self.reply_bytes = reply_bytes
        self.chunks_per_token = chunks_per_token
        self.overloaded_requests = overloaded_requests
        self.retry_after = retry_after
        self.limit_seconds = limit_seconds
        self.requests_429 = 0
        self.models_requests = 0
        self.bytes_sent = 0  # body bytes written by the hostile chat behaviours
        self.client_went_away = 0  # hostile streams ended by the client closing
        self.request_times: list[float] = []  # time.monotonic() of each chat request
        self._active_hostile = 0

    # -- models ----------------------------------------------------------------------
    async def _models(self, request: web.Request) -> web.StreamResponse:
        self.models_requests += 1
        behaviour = self.models_behaviour
        if behaviour == "nested":
            depth = 100_000
            body = (b'{"object": "list", "data": [{"id": "fake-model", "meta": '
                    + b"[" * depth + b"]" * depth + b"}]}")
            return web.Response(body=body, content_type="application/json")
        if behaviour == "huge":
            response = web.StreamResponse(headers={"Content-Type": "application/json"})
            await response.prepare(request)
            try:
                await response.write(b'{"object": "list", "data": [{"id": "')
                block = b"x" * (1024 * 1024)
                for _ in range(64):
                    await response.write(block)
                await response.write(b'"}]}')
                await response.write_eof()
            except ConnectionError:
                pass
            return response
        if behaviour == "not_list":
            return web.json_response({"object": "list", "data": "fake-model"})
        if behaviour == "overloaded" and self.requests_429 < self.overloaded_requests:
            return self._too_many_requests()
        return await super()._models(request)

    def _too_many_requests(self) -> web.Response:
        self.requests_429 += 1
        headers = {} if self.retry_after is None else {"Retry-After": self.retry_after}
        return web.json_response({"error": {"message": "fake overload: too many requests",
                                             "type": "rate_limit"}},
                                 status=429, headers=headers)

    # -- chat ------------------------------------------------------------------------
    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.request_times.append(time.monotonic())
        behaviour = self.chat_behaviour
        if behaviour == "overloaded" and self.requests_429 < self.overloaded_requests:
            await request.read()
            return self._too_many_requests()
        if behaviour in ("clean", "overloaded"):
            return await super()._chat(request)
        if behaviour == "invalid_bytes":
            return await self._invalid_bytes(request)
        body = await request.json()
        self.chat_requests += 1
        headers = {"Content-Type": "text/event-stream"}
        if behaviour == "gzip_bomb":
            headers["Content-Encoding"] = "gzip"
        response = web.StreamResponse(headers=headers)
        await response.prepare(request)
        deadline = time.monotonic() + self.limit_seconds
        try:
            if behaviour == "endless":
                frame = _frame("token ")
                batch = frame * 64
                while time.monotonic() < deadline:
                    await self._write(response, batch)
            elif behaviour == "slowloris":
                raw = b"".join([_frame("slow "), _frame(None, "stop"), b"data: [DONE]\n\n"])
                for position in range(len(raw)):
                    if time.monotonic() >= deadline:
                        break
                    await self._write(response, raw[position:position + 1])
                    await asyncio.sleep(self.byte_interval)
            elif behaviour == "huge_line":
                await self._write(response, b'data: {"choices": [{"index": 0, "delta": '
                                            b'{"content": "')
                await self._write_filler(response, self.reply_bytes, deadline)
                await self._write(response, b'"}}]}\n\n')
            elif behaviour == "huge_reply":
                frame = _frame("x" * 1000)
                written = 0
                while written < self.reply_bytes and time.monotonic() < deadline:
                    await self._write(response, frame * 16)
                    written += 16 * len(frame)
                await self._write(response, _frame(None, "stop") + b"data: [DONE]\n\n")
            elif behaviour == "gzip_bomb":
                await self._write(response, _gzip_bomb(self.reply_bytes))
            elif behaviour == "overchunked":
                tokens = int(body.get("max_tokens") or 16)
                for _ in range(tokens * self.chunks_per_token // 16):
                    await self._write(response, _frame("t") * 16)
                await self._write(response, _frame(None, "length") + b"data: [DONE]\n\n")
            await response.write_eof()
        except ConnectionError:
            self.client_went_away += 1
        return response

    async def _write(self, response: web.StreamResponse, data: bytes) -> None:
        await response.write(data)
        self.bytes_sent += len(data)

    async def _write_filler(self, response: web.StreamResponse, size: int,
                            deadline: float) -> None:
        block = b"y" * (256 * 1024)
        written = 0
        while written < size and time.monotonic() < deadline:
            piece = block[: size - written]
            await self._write(response, piece)
            written += len(piece)

    async def _invalid_bytes(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.chat_requests += 1
        self._active_hostile += 1
        try:
            await asyncio.sleep(self.settle)
            concurrent = self._active_hostile > 1
            prompt = str(body["messages"][-1]["content"])
            found = _CANARY.search(prompt)
            canary = found.group(0) if found else "NO-CANARY"
            words = [f"word{number} " for number in range(24)]
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            odd = b"\xfe" if concurrent else b"\xff"
            try:
                await response.write(_frame(canary + "\n"))
                for number, word in enumerate(words):
                    if number == 5:
                        raw = (b'data: {"choices": [{"index": 0, "delta": {"content": "odd'
                               + odd + b' "}, "finish_reason": null}]}\n\n')
                        await response.write(raw)
                    await response.write(_frame(word))
                    await asyncio.sleep(self.delta_delay)
                await response.write(_frame("\n" + canary))
                await response.write(_frame(None, "stop"))
                await response.write(b"data: [DONE]\n\n")
                await response.write_eof()
            except ConnectionError:
                pass
            return response
        finally:
            self._active_hostile -= 1


class TricklingServer:
    """A raw HTTP server (its own thread) whose chat answer, status line and headers
    included, arrives one byte every `byte_interval` seconds: a slowloris that a
    client watching only the body cannot see. `GET /v1/models` is answered at once.
    Each trickle stops by itself after `limit_seconds`."""

    def __init__(self, *, byte_interval: float = 0.2, limit_seconds: float = 60.0) -> None:
        self.byte_interval = byte_interval
        self.limit_seconds = limit_seconds
        self.chat_requests = 0
        self.bytes_sent = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _shutdown(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await asyncio.sleep(0)
        for task in asyncio.all_tasks():
            if task is not asyncio.current_task():
                task.cancel()

    def __enter__(self) -> TricklingServer:
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop

            async def start() -> None:
                self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
                self.port = self._server.sockets[0].getsockname()[1]

            loop.run_until_complete(start())
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=serve, name="TricklingServer", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._thread is not None
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                head = await read_request(reader)
                if head.startswith(b"GET /v1/models"):
                    body = json.dumps({"object": "list",
                                       "data": [{"id": "fake-model"}]}).encode()
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 b"Content-Length: %d\r\n\r\n" % len(body) + body)
                    await writer.drain()
                    continue
                self.chat_requests += 1
                body = _frame("slow ") + _frame(None, "stop") + b"data: [DONE]\n\n"
                answer = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                          b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
                deadline = time.monotonic() + self.limit_seconds
                for position in range(len(answer)):
                    if time.monotonic() >= deadline:
                        break
                    writer.write(answer[position:position + 1])
                    await writer.drain()
                    self.bytes_sent += 1
                    await asyncio.sleep(self.byte_interval)
                break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()
