"""A streamed request's own objects (its tap, body reader, reply state, stall watch and
parsers) do not outlive it: nothing keeps them once the request ended, not the pooled
connection it went out on, and no reference cycle among them, so reference counting
frees them at once rather than the garbage collector, later.

Why it matters: under hundreds of concurrent streams a request's objects that only the
collector can free pile up between full collections (a reply's text included) and make
every collection longer (bench/client_overhead.py, client CPU per token); objects a
pooled connection keeps stay for as long as the connection (its whole reply, once per
connection).

How: the collector is told to keep what it finds unreachable (`gc.DEBUG_SAVEALL`)
while the requests run, so a cycle found by an automatic collection counts too.

A body the server cuts off mid-reply is covered too: aiohttp's reader of that body
keeps the transport error, whose traceback held the frames reading it (the reader
among them) until the client dropped the tracebacks of the errors it turns into a
message.
"""

from __future__ import annotations

import asyncio
import gc

import pytest

from benchwarden.targets.openai_client import (
    ChatClient,
    _BodyReader,
    _StallWatch,
    _StreamState,
    _Tap,
)
from benchwarden.targets.sse import SSEParser

from .fakes import ScriptedOpenAIServer, answering, chunk, sse_body, streaming

pytestmark = pytest.mark.usefixtures("on_both_loops")

BODY = {"model": "fake-model", "stream": True, "max_tokens": 16,
        "messages": [{"role": "user", "content": "hi"}]}
REPLY = sse_body([chunk("Hel"), chunk("lo"), chunk(finish_reason="stop")])
PER_REQUEST = (_Tap, _BodyReader, _StallWatch, _StreamState, SSEParser)


def per_request_objects_left(handler, cancel_after: int | None = None,
                             **client_options) -> tuple[list[str], list[str]]:
    """Run three streamed requests (the first on a new connection, the others on the
    pooled one, when it can be reused); then, with the client and its connections
    still open, the type names of the request objects the collector had to free, and
    of those still alive."""

    async def scenario() -> tuple[list[str], list[str]]:
        async with ScriptedOpenAIServer(chat=handler) as server:
            async with ChatClient(server.url, **client_options) as client:
                for _ in range(3):
                    await client.stream_chat(BODY, cancel_after_deltas=cancel_after)
                # Collected here, with the loop and the connections still alive: what
                # the collector finds now is what the requests left behind.
                gc.collect()
                in_cycles = {type(item).__name__ for item in gc.garbage
                             if isinstance(item, PER_REQUEST)}
                gc.garbage.clear()
                alive = {type(item).__name__ for item in gc.get_objects()
                         if isinstance(item, PER_REQUEST) and id(item) not in before}
                return sorted(in_cycles), sorted(alive)

    gc.collect()
    gc.garbage.clear()
    # (objects some earlier test still holds are not this test's business)
    before = {id(item) for item in gc.get_objects() if isinstance(item, PER_REQUEST)}
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        return asyncio.run(scenario())
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


CASES = {
    "taken chunked body": (streaming(REPLY), {}),
    "byte by byte": (streaming(REPLY, bytewise=True), {}),
    "cancelled by the client": (streaming(REPLY), {"cancel_after": 1}),
    "cut at the byte cap": (streaming(REPLY), {"max_reply_bytes": 40}),
    "cut off by the server mid-reply": (streaming(REPLY[:len(REPLY) // 2], then="drop"), {}),
    "HTTP error": (answering(500, '{"error": {"message": "boom"}}'), {}),
    "JSON instead of a stream": (answering(200, '{"error": "not a stream"}'), {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_streamed_requests_objects_are_freed_when_it_ends(case):
    handler, options = CASES[case]
    in_cycles, alive = per_request_objects_left(handler, **options)
    assert in_cycles == []
    assert alive == []  # the pooled connection keeps none of them
