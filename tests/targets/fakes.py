"""Fake OpenAI-compatible servers for the client tests (loopback, free port).

`ScriptedOpenAIServer` (a fake: the handlers are scripted per test) answers
`POST /v1/chat/completions` and `GET /v1/models` with handlers a test supplies, and records
every request it received, so a test can check what the client sent. The helpers below
build the reply shapes of real servers.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.fakes.raw_http_server import read_request

Handler = Callable[["ScriptedOpenAIServer", web.Request], Awaitable[web.StreamResponse]]


@dataclass
class SeenRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class ScriptedOpenAIServer:
    def __init__(self, chat: Handler | None = None, models: Handler | None = None) -> None:
        self._chat = chat
        self._models = models or models_listing(["fake-model"])
        self.requests: list[SeenRequest] = []
        self.release = asyncio.Event()  # stalling handlers wait on this
        self.client_went_away = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> ScriptedOpenAIServer:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle_chat)
        app.router.add_get("/v1/models", self._handle_models)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.release.set()
        assert self._runner is not None
        await self._runner.cleanup()

    async def _record(self, request: web.Request) -> None:
        self.requests.append(SeenRequest(request.method, request.path,
                                         dict(request.headers), await request.read()))

    async def _handle_chat(self, request: web.Request) -> web.StreamResponse:
        await self._record(request)
        assert self._chat is not None, "this fake has no chat handler"
        return await self._chat(self, request)

    async def _handle_models(self, request: web.Request) -> web.StreamResponse:
        await self._record(request)
        return await self._models(self, request)


def free_port_nobody_listens_on() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- reply shapes ---

def chunk(content: str | None = None, *, reasoning_content: str | None = None,
          reasoning: str | None = None, tool_calls: list[dict] | None = None,
          finish_reason: str | None = None, usage: dict | None = None,
          role: str | None = None, **extra: Any) -> dict:
    """One chat.completion.chunk with a single choice."""
    delta: dict[str, Any] = {}
    if role is not None:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    if reasoning_content is not None:
        delta["reasoning_content"] = reasoning_content
    if reasoning is not None:
        delta["reasoning"] = reasoning
    if tool_calls is not None:
        delta["tool_calls"] = tool_calls
    body: dict[str, Any] = {
        "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1,
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        **extra,
    }
    if usage is not None:
        body["usage"] = usage
    return body


def usage_chunk(usage: dict) -> dict:
    """The extra chunk `stream_options.include_usage` adds: no choices, only usage."""
    return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1,
            "model": "fake-model", "choices": [], "usage": usage}


def sse_body(frames: list[dict | str], *, done: bool = True, line_ending: str = "\n",
             space_after_colon: bool = True) -> bytes:
    """Frames as SSE: a dict is JSON in a `data` field; a str is written verbatim."""
    sep = " " if space_after_colon else ""
    out = []
    for frame in frames:
        if isinstance(frame, str):
            out.append(frame)
        else:
            out.append(f"data:{sep}{json.dumps(frame)}{line_ending}{line_ending}")
    if done:
        out.append(f"data:{sep}[DONE]{line_ending}{line_ending}")
    return "".join(out).encode()


def streaming(raw: bytes, *, bytewise: bool = False,
              then: str = "finish") -> Handler:
    """A chat handler writing `raw` as an event stream: in one write, or byte by byte
    (each write drained and the loop yielded, so the client reads many small pieces).
    `then` is "finish" (end the body properly), "drop" (close the socket mid-body) or
    "stall" (keep the response open until the test ends)."""

    async def handler(server: ScriptedOpenAIServer, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if bytewise:
            for position in range(len(raw)):
                await response.write(raw[position:position + 1])
                await asyncio.sleep(0)
        elif raw:
            await response.write(raw)
        if then == "drop":
            assert request.transport is not None
            request.transport.close()
            return response
        if then == "stall":
            await server.release.wait()
        await response.write_eof()
        return response

    return handler


def stream_outcome(handler: Handler, body: dict, **client_options: Any) -> Any:
    """The `RequestOutcome` of one `stream_chat(body)` against a scripted server."""
    from benchwarden.targets.openai_client import ChatClient

    async def scenario() -> Any:
        async with ScriptedOpenAIServer(chat=handler) as server:
            async with ChatClient(server.url, **client_options) as client:
                return await client.stream_chat(body)

    return asyncio.run(scenario())


def endless_deltas() -> Handler:
    """Content deltas until the client goes away (which the server then records)."""

    async def handler(server: ScriptedOpenAIServer, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            for number in range(100_000):
                await response.write(sse_body([chunk(f"t{number} ")], done=False))
                await asyncio.sleep(0.001)
        except (ConnectionResetError, ConnectionError):
            server.client_went_away.set()
            return response
        await response.write_eof()
        return response

    return handler


def answering(status: int, body: bytes | str,
              content_type: str = "application/json") -> Handler:
    async def handler(server: ScriptedOpenAIServer, request: web.Request) -> web.StreamResponse:
        return web.Response(status=status,
                            body=body.encode() if isinstance(body, str) else body,
                            headers={"Content-Type": content_type})

    return handler


def stalling() -> Handler:
    """Accepts the request and answers nothing until the test ends."""

    async def handler(server: ScriptedOpenAIServer, request: web.Request) -> web.StreamResponse:
        await server.release.wait()
        return web.Response(status=503)

    return handler


def models_listing(ids: list[str]) -> Handler:
    payload = {"object": "list", "data": [{"id": i, "object": "model"} for i in ids]}
    return answering(200, json.dumps(payload))


class FakeOneShotKeepAliveServer:
    """Announces keep-alive but answers only the first request of each connection: a
    later request on the same connection is read and the connection closed unanswered,
    as when a server has closed an idle keep-alive connection the client reuses.
    With `answer_nothing`, no request is ever answered."""

    def __init__(self, body: bytes, *, answer_nothing: bool = False) -> None:
        self._body = body
        self._answer_nothing = answer_nothing
        self.requests_seen = 0
        self.requests_answered = 0
        self._server: asyncio.AbstractServer | None = None
        self.url = ""

    async def __aenter__(self) -> FakeOneShotKeepAliveServer:
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        answered_here = 0
        try:
            while True:
                await read_request(reader)
                self.requests_seen += 1
                if self._answer_nothing or answered_here:
                    break  # close without a response
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                             b"Connection: keep-alive\r\n"
                             b"Content-Length: %d\r\n\r\n" % len(self._body) + self._body)
                await writer.drain()
                answered_here += 1
                self.requests_answered += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
