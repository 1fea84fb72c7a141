"""The per-read shortcuts of `_BodyReader.feed` (docs/decisions/0002-http-client.md):
a read that is one whole HTTP chunk skips httptools, and a piece that is one
`data: {...}` block skips the SSE parser and `take_chunk`. Whatever the framing, the
splits, the line endings, comments, caps and stops, the reader must end in exactly the
state the general path (httptools, `SSEParser.feed`, `_StreamState.take`) gives.

Driven in memory, without a connection: the `_Tap` is given a response head as it would
be after aiohttp parsed it, and the connection's reads go to the reader as the tap's
hook hands them over (`ChatClient` against real sockets is covered by the other tests).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.targets.openai_client import (
    _AT_CHUNK_START,
    _MID_CHUNK,
    _PIECES,
    _BodyReader,
    _Stop,
    _StreamFailure,
    _StreamState,
    _Tap,
)
from benchwarden.targets.sse import SSEParser
from tests.fakes.raw_http_server import chunked, head


def content_frame(text: str, line_ending: str = "\n") -> bytes:
    body = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    return f"data: {json.dumps(body)}{line_ending}{line_ending}".encode()


FINISH = (b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n')
USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'

# SSE frames a stream may hold: plain content chunks (the shortcut's case), the same
# with CRLF or CR line endings, comments and keep-alives, a chunk that is not content,
# an event split over two data lines, a field without a colon, a frame that is not a
# chat chunk, invalid UTF-8 and invalid JSON in a frame.
frames = st.one_of(
    st.builds(content_frame, st.text(max_size=6)),
    st.builds(content_frame, st.text(max_size=3), st.sampled_from(["\r\n", "\r"])),
    st.sampled_from([b": keep-alive\n\n", b":\n", b": ping\r\n", b"\n", FINISH, USAGE,
                     b'data: {"choices":[{"delta":\ndata: {"content":"two lines"}}]}\n\n',
                     b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n',
                     b'event: message\ndata: {"choices":[{"delta":{"content":"e"}}]}\n\n',
                     b'data:{"choices":[{"delta":{"content":"no space"}}]}\n\n',
                     b'data: {"choices":[{"delta":{"content":"\xff"}}]}\n\n',
                     # JSON whitespace that is an SSE line ending: two lines
                     b'data: {"choices":[{"delta":\n{"content":"lf"}}]}\n\n',
                     b'data: {"choices":[{"delta":\r{"content":"cr"}}]}\n\n',
                     b"retry\n", b'data: {"choices":[{"delta":{"content":"\\u00e9"}}]}\n\n']))
# Chunks one thing away from the plain content chunk `take_chunk`'s shortcut takes:
# the reader's own shortcut must hand them on as the general path does (the shortcut
# in `take_chunk` is held to the field-by-field path by test_openai_client_chunk_path).
near_plain = [json.dumps({"choices": choices, **extra}).encode() for choices, extra in [
    ([{"index": 1, "delta": {"content": "other choice"}}], {}),
    ([{"index": 0, "delta": {"content": "c"}, "finish_reason": "stop"}], {}),
    ([{"index": 0, "delta": {"content": "lp"}, "logprobs": {"content": [
        {"token": "lp", "logprob": -0.5, "bytes": [108, 112], "top_logprobs": []}]}}], {}),
    ([{"delta": {"content": "r", "reasoning_content": "think"}}], {}),
    ([{"delta": {"reasoning": "think"}}], {}),
    ([{"delta": {"content": "", "tool_calls": [
        {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": "{}"}}]}}], {}),
    ([{"delta": {"content": "a"}}, {"index": 1, "delta": {"content": "b"}}], {}),
    ([{"index": 0}], {}),
    ([{"delta": {"content": ""}}], {}),
    ([{"delta": {"content": "u"}}], {"usage": {"prompt_tokens": 1, "completion_tokens": 1}}),
    ([{"delta": {"content": None}}], {}),
]]
frames = st.one_of(frames, st.sampled_from([b"data: " + body + b"\n\n" for body in near_plain]))
rare_frames = st.sampled_from([b"data: [DONE]\n\n", b'data: {"choices": 3}\n\n',
                               b"data: {not json}\n\n", b'data: {"error":{"message":"m"}}\n\n'])


def snapshot(reader: _BodyReader) -> tuple[object, ...]:
    state = reader.state
    error = None if reader.error is None else str(reader.error)
    return (state.reply(), state.frames, state.counted_deltas, state.content_deltas,
            state.saw_done, state.first_content_at is None, reader.received,
            reader.hasher.hexdigest(), bytes(reader.head), reader.stop, error,
            reader.events_seen)


def general_path(body: bytes) -> tuple[object, ...]:
    """The reply the plain SSE parser and `take` make of the whole body, stopping where
    the reader stops (the reference the shortcuts are held to)."""
    reader = _BodyReader(_StreamState(), None, None, None, None)
    parser = SSEParser()
    reader.received = len(body)
    reader.hasher.update(body)
    reader.head += body[:4096]
    try:
        for event in parser.feed(body):
            reader.events_seen += 1
            reader.state.take(event, 1.0)
            if reader.state.saw_done:
                reader.stop = _Stop.DONE
                break
    except _StreamFailure as failure:
        reader.error = failure
        reader.stop = _Stop.FAILED
    return snapshot(reader)


def tapped_reader(*, byte_cap: int | None = None,
                  event_cap: int | None = None) -> tuple[_BodyReader, _Tap]:
    """A reader whose chunked body is taken by a `_Tap`, as after `_head_received`."""
    reader = _BodyReader(_StreamState(), byte_cap, event_cap, None, None)
    tap = _Tap(reader, None)
    tap.protocol = types.SimpleNamespace(transport=None)  # no connection: hooks go nowhere
    assert tap._is_event_stream_head(head()) and tap.chunked
    tap.taken = True
    tap._hand_reads_to_reader()
    return reader, tap


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({cut % (len(data) + 1) for cut in cuts} | {0, len(data)})
    return [data[start:end] for start, end in itertools.pairwise(points) if end > start]


chunk_forms = st.sampled_from(["frame per chunk", "uppercase", "extension",
                               "split frames", "one chunk"])


def chunk_body(body_frames: list[bytes], form: str, borders: list[int]) -> bytes:
    if form == "frame per chunk":
        pieces = chunked(*body_frames)
    elif form == "uppercase":
        pieces = chunked(*body_frames, upper=True)
    elif form == "extension":
        pieces = chunked(*body_frames, extension=b";x=1")
    elif form == "split frames":  # chunk borders anywhere, inside frames and lines
        pieces = chunked(*split(b"".join(body_frames), borders))
    else:
        pieces = chunked(b"".join(body_frames))
    return b"".join(pieces) + b"0\r\n\r\n"


@given(st.lists(frames, min_size=1, max_size=8), st.lists(rare_frames, max_size=1),
       chunk_forms, st.lists(st.integers(0, 4000), max_size=6),
       st.one_of(st.just("chunk per read"), st.lists(st.integers(0, 4000), max_size=8)))
@settings(max_examples=300, deadline=None)
def test_any_framing_and_any_reads_give_what_the_general_path_gives(
        body_frames, rare, form, borders, reads):
    body_frames = body_frames + rare + [FINISH, b"data: [DONE]\n\n"]
    body = b"".join(body_frames)
    wire = chunk_body(body_frames, form, borders)
    reader, tap = tapped_reader()
    if reads == "chunk per read":  # what servers send: each read one whole chunk
        pieces = chunked(*body_frames) + [b"0\r\n\r\n"] if form == "frame per chunk" else [wire]
    else:
        pieces = split(wire, reads)
    for piece in pieces:
        reader.feed(piece)
        if reader.error is not None and reader.stop is _Stop.FAILED:
            break
    expected = general_path(body)
    got = snapshot(reader)
    if reader.stop is None:  # the whole body was read: all of it must agree
        assert reader.ended and got == expected
    else:
        # Stopped ([DONE], a failure): the same reply, counts, stop and message. The
        # bytes counted and the events seen are those of the reads that arrived.
        assert got[:6] == expected[:6] and got[9:11] == expected[9:11]
        assert reader.ended or reader.stop is _Stop.FAILED


def test_each_read_one_whole_chunk_skips_httptools():
    reader, _ = tapped_reader()
    parsed: list[bytes] = []
    httptools_feed = reader.parse_framing

    def counting(data: bytes) -> None:
        parsed.append(data)
        httptools_feed(data)

    reader.parse_framing = counting
    body_frames = [content_frame("Hello"), content_frame(" world"), FINISH, b"data: [DONE]\n\n"]
    for piece in chunked(*body_frames):
        reader.feed(piece)
    assert reader.state.reply().text == "Hello world" and reader.stop is _Stop.DONE
    assert parsed == []  # every read was a whole chunk, taken directly
    reader.feed(b"0\r\n\r\n")  # the last chunk goes through httptools, which ends the body
    assert parsed == [b"0\r\n\r\n"] and reader.ended


def test_a_read_that_leaves_the_parser_mid_chunk_is_not_taken_as_a_chunk():
    reader, _ = tapped_reader()
    first, second = content_frame("a"), content_frame("b")
    wire = b"".join(chunked(first, second))
    cut = len(chunked(first)[0]) + 3  # the first chunk and "XX\r" of the second's size line
    reader.feed(wire[:cut])
    assert reader.raw_reads == _MID_CHUNK
    reader.feed(wire[cut:])  # "\n" + data + CRLF: looks like nothing, must be parsed
    assert reader.raw_reads == _AT_CHUNK_START and reader.state.reply().text == "ab"


def test_chunk_data_that_happens_to_look_like_a_whole_chunk_stays_data():
    # The second chunk's data is itself shaped like a whole chunk, and arrives as one
    # read while the parser expects data: it must be taken as data, not unwrapped.
    inner = b"5\r\ndata:\r\n"
    first = b"data: x\n"
    wire = b"".join(chunked(first, inner)) + b"0\r\n\r\n"
    reader, _ = tapped_reader()
    first_end = len(chunked(first)[0])
    inner_start = first_end + len(b"a\r\n")
    for start, end in ((0, first_end), (first_end, inner_start),
                       (inner_start, inner_start + len(inner)), (inner_start + len(inner),
                                                                  len(wire))):
        reader.feed(wire[start:end])
    assert reader.ended and reader.received == len(first + inner)
    assert reader.hasher.hexdigest() == hashlib.sha256(first + inner).hexdigest()


@pytest.mark.parametrize("slack", [0, -1])
def test_the_byte_cap_holds_at_a_frame_taken_whole(slack):
    body_frames = [content_frame("one"), content_frame("two"), content_frame("three")]
    cap = len(body_frames[0]) + len(body_frames[1]) + slack
    reader, _ = tapped_reader(byte_cap=cap)
    for piece in chunked(*body_frames):
        reader.feed(piece)
    if slack == 0:  # exactly at the cap: both frames taken, the third is over it
        assert reader.stop is _Stop.BYTE_CAP and reader.state.reply().text == "onetwo"
    else:
        assert reader.stop is _Stop.BYTE_CAP and reader.state.reply().text == "one"
    assert reader.received == cap + (len(body_frames[2]) if slack == 0 else 1)


@pytest.mark.parametrize("cap", [1, 2])
def test_the_event_cap_holds_at_a_frame_taken_whole(cap):
    reader, _ = tapped_reader(event_cap=cap)
    for piece in chunked(content_frame("a"), content_frame("b"), content_frame("c")):
        reader.feed(piece)
    assert reader.stop is _Stop.EVENT_CAP and reader.events_seen == cap + 1
    assert reader.state.reply().text == "ab"[:cap]


def test_pieces_from_aiohttp_are_never_unwrapped():
    # A body aiohttp reads (`_ReaderWithSink`) hands `feed` data, not reads.
    reader = _BodyReader(_StreamState(), None, None, None, None)
    assert reader.raw_reads == _PIECES
    data = chunked(content_frame("z"))[0]  # data that merely looks like a whole chunk
    reader.feed(data)
    assert reader.received == len(data)
