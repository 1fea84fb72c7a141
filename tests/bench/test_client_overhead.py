"""The client_overhead bench's bare reader (the floor every client is read against)
must count every token of a reply however the bytes are split into reads, and finish
exactly at the chunked body's end: a floor that missed tokens or stopped early would
be cheaper than reading the stream."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.bench.test_bench_contract import load

bench = load("client_overhead")


def _chunked(frames: list[bytes]) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(frame), frame) for frame in frames) + b"0\r\n\r\n"


class _Transport:
    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)


@settings(max_examples=200, deadline=None)
@given(tokens=st.integers(min_value=0, max_value=300), data=st.data())
def test_the_bare_reader_counts_every_token_whatever_the_reads(tokens, data):
    body = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunked(
        bench.render_reply(tokens))
    cuts = sorted(data.draw(st.sets(st.integers(min_value=1, max_value=len(body) - 1),
                                    max_size=60)))
    pieces = [body[start:end] for start, end in zip([0, *cuts], [*cuts, len(body)], strict=True)]

    async def read() -> tuple[int, list[bool]]:
        stream = bench._BareStream()
        stream.connection_made(_Transport())
        done = stream.request(b"request")
        finished_early = []
        for piece in pieces:
            finished_early.append(done.done())
            stream.data_received(piece)
        return done.result(), finished_early

    counted, finished_early = asyncio.run(read())
    assert counted == tokens
    assert not any(finished_early)  # done only once the last piece arrived


def test_a_reply_cut_short_never_completes():
    body = _chunked(bench.render_reply(5))[:-3]

    async def read() -> bool:
        stream = bench._BareStream()
        stream.connection_made(_Transport())
        done = stream.request(b"request")
        stream.data_received(body)
        return done.done()

    assert asyncio.run(read()) is False


def test_the_cold_feed_diagnostic_takes_every_frame_in_both_checkouts():
    # `--cold-feed` drives the client's body readers through their private set-up (as a
    # streamed request's `_Tap` does); a change there must break this, not the figures.
    # Against this same checkout: the second client is loaded from its file by path.
    root = str(Path(bench.__file__).resolve().parent.parent)
    figures = bench.cold_feed(streams=4, reads_per_stream=3, rounds=2, against=root)
    assert list(figures) == ["this checkout", f"--against {root}"]
    assert all(len(values) == 2 and all(value > 0 for value in values)
               for values in figures.values())
