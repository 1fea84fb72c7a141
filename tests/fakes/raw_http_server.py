"""A fake HTTP/1.1 server that answers each request with scripted raw bytes (a fake: no
real server writes malformed chunk framing, lying lengths or bytes after a body's end
on demand).

`RawHTTPServer(replies, delivery=...)` reads a request (head and Content-Length body),
then writes the next reply in `replies`: a list of byte pieces, the response head
included. `delivery` says how they reach the socket: "pieces" (each piece its own
write, drained, with a pause so that each is its own read on the client), "one write"
(all joined) or "bytewise" (one byte per write). After the last piece the connection
is kept for the next request (`keep`), closed (`close`), or held open until the server
is closed (`hold`). `requests_per_connection` lists, per connection, how many requests
it carried: a client that reuses a connection shows as a count above 1; `written_at`
when each piece was written, on the client's clock (`openai_client.now`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from benchwarden.targets.openai_client import now

PIECE_PAUSE = 0.005  # seconds between pieces, so that each is its own read


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """One request off the connection (its head, and its body by Content-Length);
    the head is returned. IncompleteReadError when the client closed instead."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)
    return head


def chunked(*frames: bytes, upper: bool = False, extension: bytes = b"") -> list[bytes]:
    """Each frame as one HTTP chunk (hex size, optional extension, data, CRLF)."""
    size_format = b"%X" if upper else b"%x"
    return [size_format % len(frame) + extension + b"\r\n" + frame + b"\r\n"
            for frame in frames]


def head(*, chunked_body: bool = True, content_type: bytes = b"text/event-stream",
         extra: bytes = b"") -> bytes:
    """A 200 response head; chunked by default (what every streaming server sends)."""
    framing = b"Transfer-Encoding: chunked\r\n" if chunked_body else b""
    return (b"HTTP/1.1 200 OK\r\nContent-Type: " + content_type + b"\r\n" + framing
            + extra + b"\r\n")


class RawHTTPServer:
    def __init__(self, replies: Sequence[Sequence[bytes]], *, delivery: str = "pieces",
                 after: str = "keep") -> None:
        assert delivery in ("pieces", "one write", "bytewise")
        assert after in ("keep", "close", "hold")
        self._replies = list(replies)
        self._delivery = delivery
        self._after = after
        self._served = 0
        self._server: asyncio.AbstractServer | None = None
        self._release = asyncio.Event()
        self.requests_per_connection: list[int] = []
        self.written_at: list[float] = []
        self.url = ""

    async def __aenter__(self) -> RawHTTPServer:
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._release.set()
        self._server.close()
        await self._server.wait_closed()

    async def _write(self, writer: asyncio.StreamWriter, pieces: Sequence[bytes]) -> None:
        if self._delivery == "one write":
            self.written_at.append(now())
            writer.write(b"".join(pieces))
            await writer.drain()
            return
        if self._delivery == "bytewise":
            pieces = [bytes([byte]) for byte in b"".join(pieces)]
        for piece in pieces:
            self.written_at.append(now())
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(PIECE_PAUSE if self._delivery == "pieces" else 0)

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        self.requests_per_connection.append(0)
        slot = len(self.requests_per_connection) - 1
        try:
            while self._served < len(self._replies):
                await read_request(reader)
                self.requests_per_connection[slot] += 1
                reply = self._replies[self._served]
                self._served += 1
                await self._write(writer, reply)
                if self._after == "close":
                    break
                if self._after == "hold":
                    await self._release.wait()
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except asyncio.CancelledError:
            pass  # the server is closing: this connection just ends
        finally:
            writer.close()
