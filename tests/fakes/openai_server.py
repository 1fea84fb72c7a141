"""`FakeOpenAIServer`: a fault-injecting OpenAI-compatible server on a loopback port.

It serves `GET /v1/models` and streaming `POST /v1/chat/completions` from a background
thread (its own event loop), so a test can run the real CLI against it in the main
thread. Replies are deterministic functions of the prompt: the canary found in the
prompt on its own line, then `words` words drawn from the prompt's topic and a fixed
vocabulary (seeded by the prompt's hash), then the canary again. Each word is one SSE
delta with a small await between deltas, so concurrent streams really overlap.

A request counts as "concurrent" when another chat request is active after a short
settle delay (requests of one rung arrive within milliseconds). Behaviours:

- `clean`: always the deterministic reply.
- `leak`: a concurrent reply carries another active request's canary.
- `drift`: a concurrent reply has one word changed.
- `persistent`: once a request that overlapped another has finished, every later reply
  has one word changed (state left behind by a concurrent batch).
- `unstable`: every other distinct prompt (in order of first arrival) changes on every
  call, even alone.
- `serialising`: one request at a time (a lock held until a little after the last byte).
- `truncated`: a concurrent reply stops half-way with neither `finish_reason` nor `[DONE]`.
- `usage_mismatch`: a concurrent reply reports one completion token more than it streamed.
- `http500`: every chat request is answered with HTTP 500.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

BEHAVIOURS = ("clean", "leak", "drift", "persistent", "unstable", "serialising", "truncated",
              "usage_mismatch", "http500")

_CANARY = re.compile(r"\b[A-Z]{2}-[A-Z]+-[A-Z]+-\d{2}\b")
_TOPIC = re.compile(r"(?im)^topic: (.+)$")
_VOCABULARY = ("steady", "river", "stone", "light", "harbour", "field", "morning", "craft",
               "season", "careful", "patient", "signal", "shelter", "journey", "work",
               "village", "water", "evening", "simple", "useful", "bright", "quiet")


@dataclass(eq=False)
class _Active:
    canary: str
    overlapped: int = 1  # largest number of chat requests active during this one


@dataclass
class _State:
    active: list[_Active] = field(default_factory=list)
    poisoned: bool = False
    first_seen: dict[str, int] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)


def reply_words(prompt: str, count: int) -> list[str]:
    """The deterministic body words of the reply to `prompt`."""
    topic_match = _TOPIC.search(prompt)
    topic_words = [w for w in (topic_match.group(1) if topic_match else "").split() if len(w) > 2]
    rng = random.Random(hashlib.sha256(prompt.encode()).digest())
    pool = topic_words + list(_VOCABULARY)
    return [rng.choice(pool) for _ in range(count)]


class FakeOpenAIServer:
    """See the module docstring. Use as a context manager; `url` is the base URL."""

    def __init__(self, behaviour: str = "clean", *, model: str = "fake-model", words: int = 24,
                 delta_delay: float = 0.002, settle: float = 0.03) -> None:
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"unknown behaviour {behaviour!r}")
        self.behaviour = behaviour
        self.model = model
        self.words = words
        self.delta_delay = delta_delay
        self.settle = settle
        self.chat_requests = 0
        self.authorizations: set[str] = set()  # Authorization headers seen (for key tests)
        self.peak_active = 0
        self._state = _State()
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    # -- lifecycle --------------------------------------------------------------------
    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("FakeOpenAIServer is not started")
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeOpenAIServer:
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._start())
            except BaseException as error:  # report to the starting thread
                failure.append(error)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup() if self._runner else asyncio.sleep(0))
            loop.close()

        self._thread = threading.Thread(target=serve, name="FakeOpenAIServer", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self

    async def _start(self) -> None:
        self._lock = asyncio.Lock()
        app = web.Application()
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/chat/completions", self._chat)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop = self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- handlers ---------------------------------------------------------------------
    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list",
                                  "data": [{"id": self.model, "object": "model"}]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.chat_requests += 1
        if "Authorization" in request.headers:
            self.authorizations.add(request.headers["Authorization"])
        if self.behaviour == "http500":
            return web.json_response({"error": {"message": "fake internal error",
                                                 "type": "server_error"}}, status=500)
        if self.behaviour == "serialising":
            assert self._lock is not None
            async with self._lock:
                response = await self._serve(request, body)
                await asyncio.sleep(0.03)  # the next reply starts well after this one's end
                return response
        return await self._serve(request, body)

    async def _serve(self, request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        state = self._state
        prompt = str(body["messages"][-1]["content"])
        canary_match = _CANARY.search(prompt)
        canary = canary_match.group(0) if canary_match else "NO-CANARY"
        poisoned_at_arrival = state.poisoned
        me = _Active(canary)
        state.active.append(me)
        for entry in state.active:
            entry.overlapped = max(entry.overlapped, len(state.active))
        self.peak_active = max(self.peak_active, len(state.active))
        try:
            await asyncio.sleep(self.settle)
            concurrent = len(state.active) > 1
            others = sorted({entry.canary for entry in state.active} - {canary})
            words = reply_words(prompt, self.words)
            if self.behaviour == "leak" and concurrent and others:
                words[5] = others[0]
            elif self.behaviour == "drift" and concurrent:
                words[8] = "different"
            elif self.behaviour == "persistent" and poisoned_at_arrival:
                words[3] = "stale"
            elif self.behaviour == "unstable":
                order = state.first_seen.setdefault(prompt, len(state.first_seen))
                state.calls[prompt] = state.calls.get(prompt, 0) + 1
                if order % 2 == 0:
                    words[6] = f"variant{state.calls[prompt]}"
            deltas = [canary + "\n"] + [word + " " for word in words] + ["\n" + canary]
            return await self._stream(request, body, deltas, concurrent)
        finally:
            state.active.remove(me)
            if self.behaviour == "persistent" and me.overlapped > 1:
                state.poisoned = True

    def choice_fields(self, body: dict[str, Any], index: int, text: str) -> dict[str, Any]:
        """Extra fields of the choice that carries content delta `index` (a subclass adds
        `logprobs` here)."""
        return {}

    async def _stream(self, request: web.Request, body: dict[str, Any], deltas: list[str],
                      concurrent: bool) -> web.StreamResponse:
        max_tokens = int(body.get("max_tokens") or 10**6)
        finish = "stop"
        if len(deltas) > max_tokens:
            deltas, finish = deltas[:max_tokens], "length"
        truncate = self.behaviour == "truncated" and concurrent
        if truncate:
            deltas = deltas[: len(deltas) // 2]
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        await response.prepare(request)
        created = int(time.time())

        def chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
            data = {"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                    "created": created, "model": body.get("model", self.model),
                    "choices": choices, **extra}
            return f"data: {json.dumps(data)}\n\n".encode()

        try:
            await response.write(chunk([{"index": 0, "delta": {"role": "assistant", "content": ""},
                                         "finish_reason": None}]))
            for index, text in enumerate(deltas):
                await response.write(chunk([{"index": 0, "delta": {"content": text},
                                             "finish_reason": None,
                                             **self.choice_fields(body, index, text)}]))
                await asyncio.sleep(self.delta_delay)
            if truncate:
                return response  # ends with neither finish_reason nor [DONE]
            await response.write(chunk([{"index": 0, "delta": {}, "finish_reason": finish}]))
            reported = len(deltas) + (1 if self.behaviour == "usage_mismatch" and concurrent else 0)
            prompt_tokens = len(str(body["messages"][-1]["content"]).split())
            if (body.get("stream_options") or {}).get("include_usage"):
                await response.write(chunk([], usage={
                    "prompt_tokens": prompt_tokens, "completion_tokens": reported,
                    "total_tokens": prompt_tokens + reported}))
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except ConnectionError:
            pass  # the client cancelled mid-stream (the cancel scenario)
        return response
