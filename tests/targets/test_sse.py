"""The SSE parser: the standard's line rules, and independence from how bytes are split."""

from __future__ import annotations

import itertools
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.targets import sse
from benchwarden.targets.sse import SSEEvent, SSEParser


def parse(*chunks: bytes, finish: bool = False) -> list[SSEEvent]:
    parser = SSEParser()
    events = [event for piece in chunks for event in parser.feed(piece)]
    if finish:
        events += parser.finish()
    return events


def split_at(raw: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({cut % (len(raw) + 1) for cut in cuts})
    edges = [0, *points, len(raw)]
    return [raw[start:end] for start, end in itertools.pairwise(edges)]


def test_data_lines_with_and_without_the_space_after_the_colon():
    events = parse(b"data: one\n\ndata:two\n\ndata:  three\n\n")
    assert [event.data for event in events] == ["one", "two", " three"]


def test_the_three_line_endings_give_the_same_events():
    expected = [SSEEvent("a\nb"), SSEEvent("c")]
    for ending in (b"\n", b"\r\n", b"\r"):
        raw = ending.join([b"data: a", b"data: b", b"", b"data: c", b"", b""])
        assert parse(raw) == expected, ending


def test_mixed_line_endings_in_one_stream():
    assert parse(b"data: a\r\ndata: b\rdata: c\n\r\n") == [SSEEvent("a\nb\nc")]


def test_comment_lines_are_ignored_and_do_not_dispatch():
    assert parse(b": ping\n\n:\n\ndata: x\n: keep-alive\n\n") == [SSEEvent("x")]


def test_event_and_id_fields_and_unknown_fields_are_reported():
    raw = b"event: error\nid: 7\nretry: 10\nobfuscation: zz\ndata: {}\n\n"
    assert parse(raw) == [SSEEvent("{}", "error", "7", (("retry", "10"), ("obfuscation", "zz")))]


def test_a_block_without_data_has_data_none():
    assert parse(b'error: {"message": "boom"}\n\n') == [
        SSEEvent(None, None, None, (("error", '{"message": "boom"}'),))]


def test_a_bare_data_line_is_an_empty_data_value():
    assert parse(b"data\n\n") == [SSEEvent("")]
    assert parse(b"data\ndata\n\n") == [SSEEvent("\n")]


def test_a_byte_order_mark_at_the_start_is_dropped_even_when_split():
    assert parse(b"\xef", b"\xbb", b"\xbfdata: x\n\n") == [SSEEvent("x")]
    assert parse(b"\xef\xbb\xbfdata: y\n\n") == [SSEEvent("y")]


def test_cr_at_the_end_of_a_chunk_then_lf_is_one_line_ending():
    # Two line endings would make a blank line and dispatch "a" alone.
    assert parse(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n") == [SSEEvent("a\nb")]


def test_utf8_character_split_across_chunks():
    raw = "data: héllo → 世界 🙂\n\n".encode()
    for cut in range(1, len(raw)):
        assert parse(raw[:cut], raw[cut:]) == [SSEEvent("héllo → 世界 🙂")], cut


def test_unicode_line_separators_inside_data_do_not_split_lines():
    assert parse("data: a\u2028b\x85c\x0cd\n\n".encode()) == [SSEEvent("a\u2028b\x85c\x0cd")]


def test_invalid_utf8_bytes_are_kept_exactly_not_replaced():
    assert parse(b"data: \xff\n\n") == [SSEEvent("\udcff")]
    assert parse(b"data: \xfe\n\n") == [SSEEvent("\udcfe")]  # not the same as \xff
    # A multi-byte character cut short keeps its bytes; the valid one after it decodes.
    assert parse(b"data: \xe4\xb8 \xe4\xb8\x96\n\n") == [SSEEvent("\udce4\udcb8 \u4e16")]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64).filter(lambda raw: not set(raw) & {0x0A, 0x0D}))
def test_any_data_bytes_come_back_exactly(raw):
    (event,) = parse(b"data:" + raw + b"\n\n")
    expected = raw[1:] if raw[:1] == b" " else raw
    assert event.data.encode("utf-8", "surrogateescape") == expected


def test_finish_dispatches_a_block_whose_blank_line_never_came():
    parser = SSEParser()
    assert parser.feed(b"data: last\n") == []
    assert parser.has_partial_event and not parser.has_partial_line
    assert parser.finish() == [SSEEvent("last")]


def test_an_unterminated_last_line_is_held_back():
    parser = SSEParser()
    assert parser.feed(b'data: {"cut') == []
    assert parser.has_partial_line
    assert parser.finish() == []


# --- properties ---

_line_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"),
    max_size=12)
_event = st.tuples(
    st.lists(_line_text, min_size=1, max_size=3),  # data lines
    st.one_of(st.none(), st.sampled_from(["message", "error", "ping"])),  # event field
    st.booleans(),  # write `data:` without the space where that is unambiguous
    st.booleans(),  # put a comment line inside the block
)


def render(events, ending: str) -> bytes:
    lines: list[str] = []
    for data_lines, name, no_space, comment in events:
        if name is not None:
            lines.append(f"event: {name}")
        if comment:
            lines.append(": a comment")
        for value in data_lines:
            tight = no_space and not value.startswith(" ")
            lines.append(f"data:{value}" if tight else f"data: {value}")
        lines.append("")
    return "".join(line + ending for line in lines).encode()


@settings(max_examples=200, deadline=None)
@given(st.lists(_event, max_size=6), st.sampled_from(["\n", "\r\n", "\r"]),
       st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_any_split_of_the_stream_gives_the_events_that_were_written(events, ending, cuts):
    raw = render(events, ending)
    expected = [SSEEvent("\n".join(data_lines), name) for data_lines, name, _, _ in events]
    assert parse(raw) == expected
    assert parse(*split_at(raw, cuts)) == expected


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_byte_by_byte_feeding_equals_one_chunk_for_arbitrary_bytes(raw):
    whole = parse(raw, finish=True)
    one_at_a_time = parse(*(raw[i:i + 1] for i in range(len(raw))), finish=True)
    assert one_at_a_time == whole


def reference_parse(raw: bytes) -> list[SSEEvent]:
    """The parsing rules written out the slow, obvious way, on the whole stream at once
    (ending as `finish` does: a last block of complete lines is dispatched)."""
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    complete_lines = re.split(rb"\r\n|\r|\n", raw)[:-1]
    events: list[SSEEvent] = []
    data: list[bytes] = []
    event = event_id = None
    other: list[tuple[str, str]] = []
    seen = False
    for line in [*complete_lines, b""]:
        if line == b"":
            if seen:
                events.append(SSEEvent(
                    b"\n".join(data).decode("utf-8", "surrogateescape") if data else None,
                    None if event is None else event.decode("utf-8", "surrogateescape"),
                    None if event_id is None else event_id.decode("utf-8", "surrogateescape"),
                    tuple(other)))
            data, event, event_id, other, seen = [], None, None, [], False
        elif line.startswith(b":"):
            continue
        else:
            name, _, value = line.partition(b":")
            value = value[1:] if value.startswith(b" ") else value
            seen = True
            if name == b"data":
                data.append(value)
            elif name == b"event":
                event = value
            elif name == b"id":
                if b"\0" not in value:
                    event_id = value
            else:
                other.append((name.decode("utf-8", "surrogateescape"),
                              value.decode("utf-8", "surrogateescape")))
    return events


_sse_ish_bytes = st.lists(st.sampled_from([
    b"data", b"data:", b"data: ", b"event: ", b"id: 1", b"retry: 5", b"error: {}", b": c",
    b":", b" ", b"x", b"{\"a\": 1}", "é世🙂".encode(), b"\xff", b"\x00", b"\xef\xbb\xbf",
    b"\n", b"\n", b"\n\n", b"\r", b"\r\n", b"\r\n\r\n",
]), max_size=40).map(b"".join)


@settings(max_examples=200, deadline=None)
@given(_sse_ish_bytes, st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_the_parser_agrees_with_the_obvious_reference_on_any_split(raw, cuts):
    assert parse(*split_at(raw, cuts), finish=True) == reference_parse(raw)


# --- linear time and progress on long lines ---

def test_a_long_line_in_many_pieces_is_one_event_and_its_size_is_tracked():
    parser = SSEParser()
    line = b"data: " + b"x" * 100_000
    for start in range(0, len(line), 1000):
        assert parser.feed(line[start:start + 1000]) == []
    assert parser.partial_line_size == len(line) and parser.progress == 0
    assert parser.feed(b"\n\n") == [SSEEvent("x" * 100_000)]
    assert parser.partial_line_size == 0 and parser.progress == 1


def test_progress_counts_chunks_that_complete_a_line_comments_included():
    parser = SSEParser()
    parser.feed(b": ping")
    assert parser.progress == 0
    parser.feed(b"\n")
    parser.feed(b"data: a")
    assert parser.progress == 1
    parser.feed(b"\n\ndata: b\n")
    assert parser.progress == 2


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=1, max_value=5000), st.lists(st.integers(0, 10_000), max_size=30))
def test_a_long_line_split_anywhere_gives_the_same_event(length, cuts):
    raw = b"data: " + b"\xe4\xb8\x96" * length + b"\r\n\r\n"
    assert parse(*split_at(raw, cuts)) == [SSEEvent("\u4e16" * length)]


@settings(max_examples=300, deadline=None)
@given(_sse_ish_bytes, st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
       st.integers(min_value=1, max_value=12))
def test_the_large_line_path_agrees_with_the_reference(raw, cuts, threshold):
    # Lines of `threshold` bytes or more take the join-once path: lowered here so that
    # every shape of line (data or not, any line ending, split anywhere) goes through it.
    saved = sse.LARGE_LINE
    sse.LARGE_LINE = threshold
    try:
        assert parse(*split_at(raw, cuts), finish=True) == reference_parse(raw)
    finally:
        sse.LARGE_LINE = saved


# --- single_data_line: the client's shortcut for a read holding one `data:` block ---

def _state(parser: SSEParser) -> tuple:
    return (list(parser._pending), parser._pending_size, parser._skip_leading_lf,
            parser._at_start, list(parser._data), parser._has_fields, parser.progress)


def test_single_data_line_takes_one_whole_block_at_a_boundary():
    parser = SSEParser()
    parser.feed(b"data: first\n\n")
    assert parser.single_data_line(b'data: {"a":1}\n\n') == b'{"a":1}'
    assert parser.progress == 2


def test_single_data_line_declines_what_is_not_exactly_one_data_block():
    parser = SSEParser()
    assert parser.single_data_line(b"data: x\n\n") is None  # a BOM may still open the stream
    parser.feed(b": hello\n")
    for chunk in (b"data: x\n", b"data: x\n\ndata: y\n\n", b"data: x\r\n\r\n", b"data:x\n\n",
                  b"event: e\n\n", b"data: x\rdata: y\n\n", b"data: x"):
        assert parser.single_data_line(chunk) is None, chunk
    parser.feed(b"data: open")  # a line is pending
    assert parser.single_data_line(b"data: x\n\n") is None


_prefixes = st.lists(st.sampled_from([b"data: a\n\n", b"data: b\n", b"\n", b"\r", b"da",
                                      b"\xef\xbb\xbf", b": c\n", b"id: 1\n"]), max_size=4)


@given(_prefixes, st.binary(max_size=40), st.sampled_from([b"data: ", b"data:", b""]),
       st.sampled_from([b"\n\n", b"\n", b"\r\n\r\n", b""]))
@settings(max_examples=400)
def test_single_data_line_is_exactly_what_feed_would_do(prefix, value, head, tail):
    chunk = head + value + tail
    shortcut, plain = SSEParser(), SSEParser()
    for piece in prefix:
        shortcut.feed(piece)
        plain.feed(piece)
    taken = shortcut.single_data_line(chunk)
    events = plain.feed(chunk)
    if taken is None:
        return
    assert events == [SSEEvent(taken.decode("utf-8", "surrogateescape"))]
    assert _state(shortcut) == _state(plain)
