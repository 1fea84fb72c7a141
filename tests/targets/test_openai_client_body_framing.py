"""The streamed body's HTTP/1.1 framing, now that the client decodes it itself (the
request's `_Tap`, with httptools): every way a server may cut, extend or frame a
chunked body gives the same reply as the plain bytes would, one write or byte by
byte; broken framing is a one-line failure, never a hang; a connection goes back to
the pool only after a body that ended cleanly. Against a raw fake server
(tests/fakes/raw_http_server.py), on both event loops."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp.client_proto import ResponseHandler

from benchwarden.targets.openai_client import ChatClient
from benchwarden.targets.replies import RequestOutcome
from tests.fakes.raw_http_server import RawHTTPServer, chunked, head

from .fakes import chunk, sse_body

pytestmark = pytest.mark.usefixtures("on_both_loops")

BODY = {"model": "fake-model", "stream": True, "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}]}

FRAMES = [sse_body([chunk("Hello")], done=False), sse_body([chunk(" world")], done=False),
          sse_body([chunk(finish_reason="stop")], done=False), b"data: [DONE]\n\n"]
LAST_CHUNK = b"0\r\n\r\n"
DELIVERIES = ["pieces", "one write", "bytewise"]


def outcomes(replies: list[list[bytes]], *, delivery: str = "pieces", after: str = "keep",
             **client_options: Any) -> tuple[list[RequestOutcome], RawHTTPServer]:
    """One `stream_chat` per reply, one after the other, through one client."""

    async def scenario() -> tuple[list[RequestOutcome], RawHTTPServer]:
        async with RawHTTPServer(replies, delivery=delivery, after=after) as server:
            async with ChatClient(server.url, **client_options) as client:
                got = [await client.stream_chat(BODY) for _ in replies]
        return got, server

    return asyncio.run(asyncio.wait_for(scenario(), 30))


def only(reply: list[bytes], **options: Any) -> RequestOutcome:
    return outcomes([reply], **options)[0][0]


def assert_hello_world(outcome: RequestOutcome) -> None:
    assert outcome.ok and outcome.reply is not None, outcome.error
    assert outcome.reply.text == "Hello world" and outcome.reply.finish_reason == "stop"
    assert outcome.reply.saw_done


@pytest.mark.parametrize("delivery", DELIVERIES)
@pytest.mark.parametrize("framing", ["lowercase hex", "uppercase hex", "extensions",
                                     "trailers", "one chunk", "frames split across chunks"])
def test_every_chunked_framing_gives_the_same_reply(framing, delivery):
    if framing == "lowercase hex":
        body = chunked(*FRAMES) + [LAST_CHUNK]
    elif framing == "uppercase hex":  # the frames are over 9 bytes: sizes hold A-F
        body = chunked(*FRAMES, upper=True) + [LAST_CHUNK]
    elif framing == "extensions":
        body = chunked(*FRAMES, extension=b';name="value";other') + [b"0;last\r\n\r\n"]
    elif framing == "trailers":
        body = chunked(*FRAMES) + [b"0\r\nX-Checksum: abc\r\nX-Other: d\r\n\r\n"]
    elif framing == "one chunk":
        body = chunked(b"".join(FRAMES)) + [LAST_CHUNK]
    else:  # chunk borders in the middle of frames and lines
        joined = b"".join(FRAMES)
        body = chunked(joined[:7], joined[7:40], joined[40:41], joined[41:]) + [LAST_CHUNK]
    assert_hello_world(only([head()] + body, delivery=delivery))


def test_chunk_size_lines_and_the_last_chunk_split_across_reads():
    first, second = chunked(FRAMES[0]), chunked(b"".join(FRAMES[1:]))
    pieces = [head(), first[0][:1], first[0][1:3], first[0][3:], second[0][:-1],
              second[0][-1:] + b"0\r", b"\n\r", b"\n"]
    assert_hello_world(only(pieces))


@pytest.mark.parametrize("delivery", DELIVERIES)
def test_a_body_delimited_by_the_close_is_read_to_its_end(delivery):
    close_head = head(chunked_body=False, extra=b"Connection: close\r\n")
    assert_hello_world(only([close_head, *FRAMES], delivery=delivery, after="close"))


@pytest.mark.parametrize("delivery", DELIVERIES)
def test_a_body_without_done_ends_with_the_last_chunk(delivery):
    outcome = only([head(), *chunked(*FRAMES[:3]), LAST_CHUNK], delivery=delivery)
    assert outcome.ok and outcome.reply.text == "Hello world" and not outcome.reply.saw_done


def test_a_clean_chunked_end_gives_the_connection_back_to_the_pool():
    reply = [head(), *chunked(*FRAMES), LAST_CHUNK]
    got, server = outcomes([reply, reply, reply])
    for outcome in got:
        assert_hello_world(outcome)
        assert "reconnected" not in outcome.extra
    assert server.requests_per_connection == [3]


def test_bytes_after_the_last_chunk_cost_the_connection_not_the_reply():
    reply = [head(), *chunked(*FRAMES), LAST_CHUNK + b"HTTP/1.1 garbage\r\n"]
    got, server = outcomes([reply, [head(), *chunked(*FRAMES), LAST_CHUNK]])
    for outcome in got:
        assert_hello_world(outcome)
    assert server.requests_per_connection == [1, 1]


@pytest.mark.parametrize("delivery", DELIVERIES)
def test_a_body_that_goes_on_after_done_is_complete_at_done(delivery):
    after = [sse_body([chunk(" more")], done=False)] * 3
    outcome = only([head(), *chunked(*FRAMES, *after), LAST_CHUNK], delivery=delivery)
    assert_hello_world(outcome)


def test_a_body_that_never_ends_after_done_costs_only_its_connection():
    outcome = only([head(), *chunked(*FRAMES, b"data: {}\n\n")], after="hold")
    assert_hello_world(outcome)


@pytest.mark.parametrize("delivery", DELIVERIES)
@pytest.mark.parametrize("broken", [b"zz\r\n", b"-5\r\n", b"5 5\r\n",
                                    b"ffffffffffffffffffff\r\n"])
def test_malformed_chunk_framing_is_a_one_line_failure(broken, delivery):
    outcome = only([head(), *chunked(FRAMES[0]), broken + b"hello\r\n"], delivery=delivery,
                   after="hold")
    assert outcome.error is not None and "\n" not in outcome.error
    assert "malformed HTTP body framing" in outcome.error and "after 1 deltas" in outcome.error
    assert outcome.reply is None


def test_chunk_data_longer_than_its_size_is_a_one_line_failure():
    frame = FRAMES[1]
    lying = b"%x\r\n" % (len(frame) - 5) + frame + b"\r\n"
    outcome = only([head(), *chunked(FRAMES[0]), lying], after="hold")
    assert outcome.error is not None and "malformed HTTP body framing" in outcome.error


@pytest.mark.parametrize("delivery", DELIVERIES)
@pytest.mark.parametrize("cut", ["mid chunk", "mid size line", "before the last chunk"])
def test_a_chunked_body_cut_short_is_a_one_line_failure(cut, delivery):
    pieces = chunked(*FRAMES[:2])
    if cut == "mid chunk":
        pieces[-1] = pieces[-1][:10]
    elif cut == "mid size line":
        pieces.append(b"1")
    outcome = only([head(), *pieces], delivery=delivery, after="close")
    assert outcome.error is not None and "\n" not in outcome.error
    assert "closed the connection mid-reply" in outcome.error


@pytest.mark.parametrize("stated", ["short", "long"])
def test_a_lying_content_length_is_a_one_line_failure_not_a_hang(stated):
    body = b"".join(FRAMES[:3])  # no [DONE]: the end of the body decides
    length = len(body) - 20 if stated == "short" else len(body) + 20
    reply = [head(chunked_body=False, extra=b"Content-Length: %d\r\n" % length), body]
    outcome = only(reply, after="close")
    assert outcome.error is not None and "\n" not in outcome.error


def test_the_byte_cap_holds_for_a_chunked_body():
    many = [sse_body([chunk("x" * 100)], done=False)] * 50
    outcome = only([head(), *chunked(*many)], after="hold", max_reply_bytes=2000)
    assert outcome.error is not None and "cap" in outcome.error
    assert outcome.extra["evidence"]["received_bytes"] > 2000


def test_first_content_time_is_the_read_that_brought_it():
    async def scenario() -> tuple[RequestOutcome, list[float]]:
        replies = [[head() + chunked(FRAMES[0])[0], *chunked(*FRAMES[1:]), LAST_CHUNK]]
        async with RawHTTPServer(replies, delivery="pieces") as server:
            async with ChatClient(server.url) as client:
                return await client.stream_chat(BODY), server.written_at

    outcome, written_at = asyncio.run(scenario())
    timings = outcome.timings
    assert outcome.ok
    # taken as the first read arrived (with the head), before the server wrote again
    assert timings.first_byte_at <= timings.first_content_at < written_at[1]
    assert timings.last_byte_at >= written_at[-2]  # the [DONE] chunk (the last one is empty)


def test_the_body_of_a_chunked_event_stream_never_reaches_aiohttp(monkeypatch):
    """The point of the tap: aiohttp's protocol is handed the response head and the
    last chunk, no byte of the body."""
    given: list[bytes] = []
    original = ResponseHandler.data_received

    def noting(self: ResponseHandler, data: bytes) -> None:
        given.append(data)
        original(self, data)

    monkeypatch.setattr(ResponseHandler, "data_received", noting)
    assert_hello_world(only([head(), *chunked(*FRAMES), LAST_CHUNK]))
    assert given == [head(), LAST_CHUNK]
    # ... while a Content-Length stream (left to aiohttp) goes through it as before
    given.clear()
    whole = b"".join(FRAMES)
    reply = [head(chunked_body=False, extra=b"Content-Length: %d\r\n" % len(whole)), whole]
    assert_hello_world(only(reply))
    assert b"".join(given).endswith(whole)


@pytest.mark.parametrize("content_type", [b"application/json", b"text/plain"])
def test_other_content_types_are_left_to_aiohttp(content_type):
    reply = [head(content_type=content_type), *chunked(*FRAMES), LAST_CHUNK]
    outcome = only(reply)
    if content_type == b"application/json":
        assert outcome.error is not None and "instead of an event stream" in outcome.error
    else:
        assert_hello_world(outcome)
