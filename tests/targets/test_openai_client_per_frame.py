"""The streaming client when the server writes each frame separately (one network read
per token, what real servers do): every token arrives, in order, and every reply,
failure and cap comes out exactly as when the same bytes arrive in one write or byte
by byte. The reads are taken inside the connection's `data_received` (no task step
per read), and a read holding one `data: {...}` block is decoded from bytes: these
tests pin that this shortcut changes nothing a caller can see."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from benchwarden.targets.openai_client import ChatClient
from benchwarden.targets.replies import RequestOutcome

from .fakes import (
    ScriptedOpenAIServer,
    chunk,
    sse_body,
    stream_outcome,
    streaming,
    usage_chunk,
)

# Every test here runs on asyncio's loop and on uvloop (tests/targets/conftest.py).
pytestmark = pytest.mark.usefixtures("on_both_loops")

BODY = {"model": "fake-model", "stream": True, "max_tokens": 400,
        "messages": [{"role": "user", "content": "hi"}],
        "stream_options": {"include_usage": True}}


def frame_by_frame(frames: list[bytes], *, then: str = "finish"):
    """A chat handler writing each frame in its own write, yielding between writes."""

    async def handler(server: ScriptedOpenAIServer, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for frame in frames:
            await response.write(frame)
            await asyncio.sleep(0)
        if then == "drop":
            assert request.transport is not None
            request.transport.close()
            return response
        await response.write_eof()
        return response

    return handler


def frames_of(items: list[dict | str | bytes], *, done: bool = True) -> list[bytes]:
    out = [item if isinstance(item, bytes) else sse_body([item], done=False)
           for item in items]
    return out + ([b"data: [DONE]\n\n"] if done else [])


def outcome_with(handler, body: dict = BODY, **client_options) -> RequestOutcome:
    return stream_outcome(handler, body, **client_options)


def visible(outcome: RequestOutcome) -> tuple:
    """What a caller sees of an outcome, timings aside."""
    return outcome.reply, outcome.error, outcome.status, outcome.extra


def test_every_token_of_many_concurrent_streams_arrives_in_order():
    tokens = 300
    frames = frames_of([chunk(f" w{number}") for number in range(tokens)]
                       + [chunk(finish_reason="length"),
                          usage_chunk({"prompt_tokens": 3, "completion_tokens": tokens})])

    async def scenario() -> list[RequestOutcome]:
        async with ScriptedOpenAIServer(chat=frame_by_frame(frames)) as server:
            async with ChatClient(server.url) as client:
                return list(await asyncio.gather(*(client.stream_chat(BODY)
                                                   for _ in range(16))))

    expected = "".join(f" w{number}" for number in range(tokens))
    for outcome in asyncio.run(scenario()):
        assert outcome.ok, outcome.error
        assert outcome.reply.text == expected
        assert outcome.reply.completion_tokens == tokens and outcome.reply.saw_done
        timings = outcome.timings
        assert timings.sent_at <= timings.first_byte_at <= timings.first_content_at
        assert timings.first_content_at <= timings.last_byte_at


CASES = {
    "plain": [chunk("Hello"), chunk(" world"), chunk(finish_reason="stop")],
    "tool call": [chunk(tool_calls=[{"index": 0, "id": "c1", "function": {
        "name": "f", "arguments": "{\"a\""}}]),
        chunk(tool_calls=[{"index": 0, "function": {"arguments": ": 1}"}}]),
        chunk(finish_reason="tool_calls")],
    "reasoning": [chunk(reasoning_content="think"), chunk("answer"),
                  chunk(finish_reason="stop")],
    "in-band error": [chunk("a"), {"error": {"message": "boom", "type": "server_error"}}],
    "invalid utf-8 kept exactly": [chunk("a"), b'data: {"choices":[{"index":0,"delta":'
                                   b'{"content":"\xff\xfe"}}]}\n\n', chunk(finish_reason="stop")],
    "lone surrogate escape": [chunk("a"), b'data: {"choices":[{"index":0,"delta":'
                              b'{"content":"\\udc80"}}]}\n\n'],
    "not JSON": [chunk("a"), b"data: {not json\n\n"],
    "not a chunk": [chunk("a"), b'data: {"choices": 5}\n\n'],
    "nested too deeply": [chunk("a"), b"data: {\"x\":" + b"[" * 5000 + b"]" * 5000 + b"}\n\n"],
    "other choices ignored": [{"choices": [{"index": 1, "delta": {"content": "no"}}]},
                              chunk("yes"), chunk(finish_reason="stop")],
    "usage only": [chunk("x"), usage_chunk({"prompt_tokens": 1, "completion_tokens": 9})],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_frame_by_frame_equals_one_write_and_byte_by_byte(name):
    frames = frames_of(CASES[name])
    raw = b"".join(frames)
    per_frame = outcome_with(frame_by_frame(frames))
    assert visible(per_frame) == visible(outcome_with(streaming(raw)))
    assert visible(per_frame) == visible(outcome_with(streaming(raw, bytewise=True)))


def test_invalid_utf8_in_a_frame_of_its_own_is_kept_byte_exact():
    outcome = outcome_with(frame_by_frame(frames_of(CASES["invalid utf-8 kept exactly"])))
    assert outcome.ok, outcome.error
    assert outcome.reply.text.encode("utf-8", "surrogateescape") == b"a\xff\xfe"


def test_caps_hold_when_each_frame_is_its_own_read():
    endless = frames_of([chunk(f"t{number} ") for number in range(3000)], done=False)
    body = {**BODY, "max_tokens": 10}
    capped = outcome_with(frame_by_frame(endless), body)
    assert capped.error is not None and "--max-chunks-per-token" in capped.error
    assert capped.extra["evidence"]["received_bytes"] > 0
    small = outcome_with(frame_by_frame(endless), body, max_chunks_per_token=None,
                         max_reply_bytes=20_000)
    assert small.error is not None and "--max-reply-bytes" in small.error
    assert 20_000 < small.extra["evidence"]["received_bytes"] <= 20_000 + len(endless[0])


def test_cancel_after_deltas_when_each_frame_is_its_own_read():
    frames = frames_of([chunk(f"t{number}") for number in range(50)])

    async def scenario() -> RequestOutcome:
        async with ScriptedOpenAIServer(chat=frame_by_frame(frames)) as server:
            async with ChatClient(server.url) as client:
                return await client.stream_chat(BODY, cancel_after_deltas=3)

    outcome = asyncio.run(scenario())
    assert outcome.extra == {"cancelled": True}
    assert "after 3 deltas" in (outcome.error or "")


def test_a_server_that_drops_the_connection_mid_reply_is_a_one_line_failure():
    frames = frames_of([chunk("a"), chunk("b")], done=False)
    outcome = outcome_with(frame_by_frame(frames, then="drop"))
    assert outcome.error is not None and "\n" not in outcome.error
    assert "2 deltas" in outcome.error


def test_the_request_timeout_still_bounds_a_reply_that_keeps_streaming():
    async def slow(server: ScriptedOpenAIServer, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for number in range(10_000):
            await response.write(sse_body([chunk(f"t{number}")], done=False))
            await asyncio.sleep(0.02)
        return response

    outcome = outcome_with(slow, request_timeout=0.5)
    assert outcome.error is not None and "request timeout" in outcome.error, outcome.error

