"""An incremental parser for server-sent events (the `text/event-stream` format).

Feed it the response body in whatever byte chunks the network delivers; it returns the
events completed so far. It follows the SSE parsing rules of the HTML standard:

- lines end with LF, CRLF or CR, and a CR at the end of one chunk followed by an LF at
  the start of the next is one line ending, not two;
- a line starting with `:` is a comment (keep-alives, llama.cpp pings) and is ignored;
- `name: value` or `name:value` (one leading space is dropped), and a bare `name`
  line has an empty value;
- several `data` lines of one event are joined with `\n`;
- a blank line dispatches the event;
- a leading byte-order mark is dropped.

One deliberate extension: the standard drops a block without `data` and ignores fields
it does not know. We report every block that had any field line and keep the unknown
fields in `SSEEvent.other`, so that the caller decides what to ignore (the chat client
must see the non-standard `error:` line of older llama.cpp builds). A block without a
data line has `data=None`, so a standard consumer just skips those.

Invariants: the events returned never depend on how the byte stream was split into
chunks, and bytes are only decoded as UTF-8 once a whole line is present, so a
multi-byte character split across chunks decodes correctly. Decoding is byte-exact:
each byte that is not part of valid UTF-8 becomes the lone surrogate U+DC80..U+DCFF
("surrogateescape"), so `\\xff` and `\\xfe` stay different and
`text.encode("utf-8", "surrogateescape")` gives back exactly the bytes the server sent.
The work per chunk is a few `bytes` operations plus one Python step per line: there
is no per-byte loop. Time is linear in the input for any line length: the pieces of
an unfinished line are kept in a list and joined once, when its line ending arrives
(never `pending += chunk`, which copies the whole line again for every chunk and made
an 80 MB line take half a minute). `progress` counts the chunks that completed at
least one line, so a caller can tell a server that trickles bytes of one line from
one that is streaming.
"""

from __future__ import annotations

from typing import NamedTuple

_BOM = b"\xef\xbb\xbf"


class SSEEvent(NamedTuple):
    """One dispatched event block."""

    data: str | None
    """The `data` lines joined with `\\n`; None when the block had no `data` line."""
    event: str | None = None
    """The `event` field (None when absent: the standard's default type "message")."""
    id: str | None = None
    """The `id` field of this block, when it had one."""
    other: tuple[tuple[str, str], ...] = ()
    """Fields the standard does not define (and `retry`), as (name, value), in order."""


_new_event = tuple.__new__


# A line at least this long is finished without the split and slice copies of the usual
# path (its `data` value is kept as a view into the joined line): fewer passes over a
# huge line, and fewer fresh buffers of its size.
LARGE_LINE = 1 << 20


def _text(raw: bytes | memoryview) -> str:
    return str(raw, "utf-8", "surrogateescape")


class SSEParser:
    """Turns byte chunks into `SSEEvent`s; one parser per response body."""

    __slots__ = ("_pending", "_pending_size", "_skip_leading_lf", "_at_start", "_data",
                 "_event", "_id", "_other", "_has_fields", "progress")

    def __init__(self) -> None:
        self._pending: list[bytes] = []  # the pieces of an unfinished line, joined once
        self._pending_size = 0
        self._skip_leading_lf = False  # the previous chunk ended with CR
        self._at_start = True  # a byte-order mark may still arrive
        self.progress = 0  # chunks that completed at least one line
        self._reset_block()

    def _reset_block(self) -> None:
        self._data: list[bytes | memoryview] = []
        self._event: bytes | None = None
        self._id: bytes | None = None
        self._other: list[tuple[str, str]] = []
        self._has_fields = False

    @property
    def has_partial_line(self) -> bool:
        """True when bytes of a line without its line ending are held back."""
        return self._pending_size > 0

    @property
    def partial_line_size(self) -> int:
        """How many bytes of an unfinished line are held back."""
        return self._pending_size

    def _take_pending(self) -> bytes:
        pending = self._pending
        joined = pending[0] if len(pending) == 1 else b"".join(pending)
        self._pending = []
        self._pending_size = 0
        return joined

    def _hold(self, piece: bytes) -> None:
        if piece:
            self._pending.append(piece)
            self._pending_size += len(piece)

    @property
    def has_partial_event(self) -> bool:
        """True when field lines were read but no blank line has dispatched them yet."""
        return self._has_fields

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Consume one chunk of the body; return the events it completed, in order."""
        if self._at_start:
            if self._pending_size:
                chunk = self._take_pending() + chunk  # at most two bytes held back
            if len(chunk) < len(_BOM) and _BOM.startswith(chunk):
                self._hold(chunk)  # might still become a byte-order mark
                return []
            self._at_start = False
            if chunk.startswith(_BOM):
                chunk = chunk[len(_BOM):]
        if self._skip_leading_lf and chunk:
            self._skip_leading_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if not chunk:
            return []
        # The last line ending in the chunk; line endings are ASCII, so splitting the
        # bytes here never cuts a UTF-8 character.
        end = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
        if end < 0:
            self._hold(chunk)
            return []
        self.progress += 1
        if self._pending_size >= LARGE_LINE:
            return self._end_large_line(chunk)
        if chunk[end] == 0x0D and end == len(chunk) - 1:
            self._skip_leading_lf = True  # an LF opening the next chunk ends this line
        if self._pending_size:
            self._hold(chunk[: end + 1])
            complete = self._take_pending()
        else:
            complete = chunk[: end + 1]
        self._hold(chunk[end + 1:])
        if not self._has_fields:
            if b"\r" not in complete:
                return self._blocks(complete)
            lf_only = complete.replace(b"\r\n", b"\n")  # CRLF streams (sse-starlette)
            if b"\r" not in lf_only:
                return self._blocks(lf_only)
        # bytes.splitlines splits on exactly LF, CRLF and CR (unlike str.splitlines).
        return self._lines(complete.splitlines())

    @property
    def at_block_boundary(self) -> bool:
        """True when the next byte begins a new line of a new block (nothing held back,
        no field lines waiting for their blank line, past the byte-order mark): then a
        chunk that is exactly `data: X\n\n` is one event with data X, whatever came
        before."""
        return not (self._pending_size or self._has_fields or self._at_start
                    or self._skip_leading_lf)

    def single_data_line(self, chunk: bytes) -> bytes | None:
        """The value X when `chunk` is exactly one block `data: X\n\n` arriving at a block
        boundary (the usual network read of a chat stream), counted as progress; None
        otherwise, and then nothing is consumed: feed the chunk instead.

        Taking X is what `feed(chunk)` would do: it returns `[SSEEvent(X as text)]` and
        leaves the parser as it found it. The caller may then decode X from bytes.
        """
        if (not chunk.startswith(b"data: ") or chunk.find(b"\n", 6) != len(chunk) - 2
                or not chunk.endswith(b"\n\n") or 0x0D in chunk
                or not self.at_block_boundary):
            return None
        self.progress += 1
        return chunk[6:-2]

    def _end_large_line(self, chunk: bytes) -> list[SSEEvent]:
        """The held-back line is huge and ends in `chunk` (which has a line ending): join
        it once and keep a `data` value as a view into it; the rest of the chunk goes
        through `feed` as usual."""
        newline, carriage = chunk.find(b"\n"), chunk.find(b"\r")
        first = min(newline, carriage) if newline >= 0 and carriage >= 0 else max(newline,
                                                                                   carriage)
        self._pending.append(chunk[:first])
        line = b"".join(self._pending)
        self._pending = []
        self._pending_size = 0
        rest = chunk[first + 1:]
        if chunk[first] == 0x0D:
            if rest[:1] == b"\n":
                rest = rest[1:]
            elif not rest:
                self._skip_leading_lf = True  # an LF opening the next chunk ends this line
        if line.startswith(b"data:"):
            start = 6 if line[5:6] == b" " else 5
            self._data.append(memoryview(line)[start:])
            self._has_fields = True
            events: list[SSEEvent] = []
        else:
            events = self._lines([line])
        return events + self.feed(rest) if rest else events

    def _blocks(self, complete: bytes) -> list[SSEEvent]:
        """LF-only lines starting at a block boundary: the usual shape of a chat stream.

        Splitting on blank lines first makes the common block, one `data: ...` line,
        one Python step instead of two; anything else goes through `_lines`.
        """
        events: list[SSEEvent] = []
        blocks = complete.split(b"\n\n")
        tail = blocks.pop()  # b"" when `complete` ended with a blank line
        for block in blocks:
            if block.startswith(b"data: ") and b"\n" not in block:
                events.append(_new_event(
                    SSEEvent, (block[6:].decode("utf-8", "surrogateescape"), None, None, ())))
            elif block.startswith(b"data:") and b"\n" not in block:
                events.append(_new_event(
                    SSEEvent, (block[5:].decode("utf-8", "surrogateescape"), None, None, ())))
            else:
                lines = block.split(b"\n")
                lines.append(b"")
                events += self._lines(lines)
        if tail:
            events += self._lines(tail[:-1].split(b"\n"))  # complete lines, no dispatch
        return events

    def finish(self) -> list[SSEEvent]:
        """The body ended: dispatch a block whose blank line never came.

        The standard discards such a block; we keep it (servers that omit the final
        blank line exist) but only its complete lines: an unterminated last line may
        be cut short and stays in `has_partial_line` for the caller to judge.
        """
        return [self._dispatch()] if self._has_fields else []

    def _lines(self, lines: list[bytes]) -> list[SSEEvent]:
        # The hot path of every streamed token: block state lives in locals and an
        # event is built with tuple.__new__ (the NamedTuple constructor is Python code).
        events: list[SSEEvent] = []
        data = self._data
        has_fields = self._has_fields
        for line in lines:
            if not line:
                if has_fields:
                    if self._event is None and self._id is None and not self._other:
                        if not data:
                            text = None
                        elif len(data) == 1:
                            first = data[0]
                            text = (first.decode("utf-8", "surrogateescape")
                                    if first.__class__ is bytes else _text(first))
                        else:
                            text = b"\n".join(data).decode("utf-8", "surrogateescape")
                        events.append(_new_event(SSEEvent, (text, None, None, ())))
                        data = self._data = []
                    else:
                        events.append(self._dispatch())
                        data = self._data
                    has_fields = False
                continue
            if line.startswith(b"data:"):
                value = line[5:]
                data.append(value[1:] if value[:1] == b" " else value)
                has_fields = True
                continue
            if line[0] == 0x3A:  # ":" comment
                continue
            name, _, value = line.partition(b":")
            if value[:1] == b" ":
                value = value[1:]
            has_fields = True
            if name == b"data":
                data.append(value)
            elif name == b"event":
                self._event = value
            elif name == b"id":
                if b"\0" not in value:  # the standard ignores ids containing NUL
                    self._id = value
            else:
                self._other.append((_text(name), _text(value)))
        self._has_fields = has_fields
        return events

    def _dispatch(self) -> SSEEvent:
        data = self._data
        if not data:
            text = None
        elif len(data) == 1:
            text = _text(data[0])
        else:
            text = _text(b"\n".join(data))
        event = SSEEvent(
            text,
            None if self._event is None else _text(self._event),
            None if self._id is None else _text(self._id),
            tuple(self._other),
        )
        self._reset_block()
        return event
