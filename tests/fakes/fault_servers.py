"""Fault-injecting servers for the contamination verdict's edge cases (fakes: a real
engine cannot produce these faults on demand).

All extend `FakeOpenAIServer` (same deterministic replies, same loopback thread):

- `CapacityServer(capacity)`: serves at most `capacity` chat requests at once and
  answers HTTP 500 to every request beyond that, as an overloaded server without a
  queue does. `refused` counts the 500s, `peak_served` the most it streamed at once.
- `ByteServer`: puts one raw byte that is not UTF-8 into every reply, inside the JSON
  string of a content delta: `\\xff` when the request was alone, `\\xfe` when other
  chat requests were in flight. Both bytes decode to U+FFFD under a lossy decode, so
  only a byte-exact comparison can tell them apart.
- `ModelListingServer(listed, status=...)`: a GET /v1/models that lists other
  models, none, or fails (for the `--model` check; a real engine lists its own).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from aiohttp import web

from tests.fakes.openai_server import FakeOpenAIServer


class CapacityServer(FakeOpenAIServer):
    def __init__(self, capacity: int, *, delta_delay: float = 0.01, **options: Any) -> None:
        super().__init__("clean", delta_delay=delta_delay, **options)
        self.capacity = capacity
        self.in_flight = 0
        self.peak_served = 0
        self.refused = 0

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        if self.in_flight >= self.capacity:
            self.refused += 1
            await request.read()
            return web.json_response({"error": {"message": "server at capacity",
                                                 "type": "server_error"}}, status=500)
        self.in_flight += 1
        self.peak_served = max(self.peak_served, self.in_flight)
        try:
            return await super()._chat(request)
        finally:
            self.in_flight -= 1


_RAW = "@@RAW-BYTE@@"  # replaced by the raw byte after JSON encoding


class ByteServer(FakeOpenAIServer):
    ALONE = b"\xff"
    TOGETHER = b"\xfe"

    def __init__(self, *, settle: float = 0.1, **options: Any) -> None:
        # a longer settle than the base server's, so a rung's requests surely meet
        super().__init__("clean", settle=settle, **options)
        self.bytes_sent: list[bytes] = []

    async def _stream(self, request: web.Request, body: dict[str, Any], deltas: list[str],
                      concurrent: bool) -> web.StreamResponse:
        raw = self.TOGETHER if concurrent else self.ALONE
        self.bytes_sent.append(raw)
        deltas = list(deltas)
        deltas.insert(2, f"byte {_RAW} here ")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        created = int(time.time())

        def chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
            data = {"id": "chatcmpl-bytes", "object": "chat.completion.chunk",
                    "created": created, "model": body.get("model", self.model),
                    "choices": choices, **extra}
            return f"data: {json.dumps(data)}\n\n".encode().replace(_RAW.encode(), raw)

        try:
            for text in deltas:
                await response.write(chunk([{"index": 0, "delta": {"content": text},
                                             "finish_reason": None}]))
                await asyncio.sleep(self.delta_delay)
            await response.write(chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}]))
            await response.write(chunk([], usage={"prompt_tokens": 10,
                                                  "completion_tokens": len(deltas),
                                                  "total_tokens": 10 + len(deltas)}))
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except ConnectionError:
            pass
        return response


class ModelListingServer(FakeOpenAIServer):
    """Answers GET /v1/models with `listed` (an empty list: a server listing nothing), or
    with HTTP `status` and an error body when `status` is not 200 (a broken listing);
    chat replies as the base server's. A real engine always lists its one model."""

    def __init__(self, listed: list[str], *, status: int = 200, **options: Any) -> None:
        super().__init__("clean", **options)
        self.listed = listed
        self.status = status

    async def _models(self, request: web.Request) -> web.Response:
        if self.status != 200:
            return web.json_response({"error": {"message": "listing is broken"}},
                                     status=self.status)
        return web.json_response({"object": "list", "data": [
            {"id": name, "object": "model"} for name in self.listed]})
