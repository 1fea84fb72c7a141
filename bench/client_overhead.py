"""Client CPU per streamed token: benchwarden's ChatClient against the openai SDK.

A separate server process streams pre-rendered chat-completion replies (N content
chunks, a finish chunk, a usage chunk, `[DONE]`) as fast as it can; this process runs
S concurrent streams through one client and measures its own CPU time (user + system,
`time.process_time`) per streamed token. The server's CPU is not counted. Both clients
get the same load in the same run, alternating; each measured round follows an
unmeasured warm-up round on the same client (so its connection pool is full), and every
reply is checked to have all its tokens.

    python bench/client_overhead.py                      # 256 streams x 256 tokens
    python bench/client_overhead.py --per-token-writes   # one server write per token
    python bench/client_overhead.py --streams 1024 --tokens 64 --repeats 3
    python bench/client_overhead.py --loop asyncio         # benchwarden on asyncio's loop
    python bench/client_overhead.py --read-path            # diagnostic: CPU per body read
    python bench/client_overhead.py --decoders             # diagnostic: chunk decoders
    python bench/client_overhead.py --cold-feed            # diagnostic: feed, caches cold
    python bench/client_overhead.py --cold-feed --against /tmp/base   # ... paired A/B

benchwarden runs on the loop the CLI runs it on (benchwarden/targets/event_loop.py:
uvloop when installed); the SDK on asyncio's own loop, as `asyncio.run` gives its users.

See bench/README.md for how to read the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from _figures import Figure, add_json_option, emit  # noqa: E402

# --- the server (runs in its own process) ---

def render_reply(tokens: int) -> list[bytes]:
    """The SSE frames of one reply: one per token, then finish, usage and [DONE]."""
    frames = []
    for number in range(tokens):
        frames.append({"id": "chatcmpl-bench", "object": "chat.completion.chunk",
                       "created": 1764460800, "model": "bench-model",
                       "choices": [{"index": 0, "delta": {"content": f" word{number}"},
                                    "logprobs": None, "finish_reason": None}]})
    frames.append({"id": "chatcmpl-bench", "object": "chat.completion.chunk",
                   "created": 1764460800, "model": "bench-model",
                   "choices": [{"index": 0, "delta": {}, "logprobs": None,
                                "finish_reason": "length"}]})
    frames.append({"id": "chatcmpl-bench", "object": "chat.completion.chunk",
                   "created": 1764460800, "model": "bench-model", "choices": [],
                   "usage": {"prompt_tokens": 12, "completion_tokens": tokens,
                             "total_tokens": 12 + tokens}})
    rendered = [f"data: {json.dumps(frame, separators=(',', ':'))}\n\n".encode()
                for frame in frames]
    rendered.append(b"data: [DONE]\n\n")
    return rendered


def serve(tokens: int, per_token_writes: bool) -> None:
    from aiohttp import web

    frames = render_reply(tokens)
    whole = b"".join(frames)

    async def chat(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        await response.prepare(request)
        if per_token_writes:
            for frame in frames:
                await response.write(frame)
                await asyncio.sleep(0)  # let other streams' writes interleave
        else:
            await response.write(whole)
        await response.write_eof()
        return response

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
        await site.start()
        print(f"PORT {runner.addresses[0][1]}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


# --- the clients ---

BODY = {"model": "bench-model", "stream": True, "max_tokens": 4096,
        "messages": [{"role": "user", "content": "Say many words."}],
        "stream_options": {"include_usage": True}}


async def run_benchwarden(url: str, streams: int, rounds: int) -> list[tuple]:
    from benchwarden.targets.openai_client import ChatClient

    async with ChatClient(url, max_connections=streams) as client:
        async def one() -> int:
            outcome = await client.stream_chat(BODY)
            if not outcome.ok:
                raise SystemExit(f"benchwarden stream failed: {outcome.error}")
            return outcome.reply.text.count(" word")

        return [await measured(lambda: asyncio.gather(*(one() for _ in range(streams))))
                for _ in range(rounds)]


async def run_openai(url: str, streams: int, rounds: int) -> list[tuple]:
    import openai

    limits = type(openai.DEFAULT_CONNECTION_LIMITS)(
        max_connections=streams, max_keepalive_connections=streams)
    # A long connect timeout: under this load the SDK's busy event loop can take more
    # than its default 5 s to get round to finishing a connect.
    client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="bench", max_retries=0,
                                timeout=openai.Timeout(600.0, connect=300.0),
                                http_client=openai.DefaultAsyncHttpxClient(limits=limits))
    async with client:
        async def one() -> int:
            stream = await client.chat.completions.create(
                model=BODY["model"], messages=BODY["messages"], max_tokens=BODY["max_tokens"],
                stream=True, stream_options={"include_usage": True})
            words = 0
            async for chunk in stream:
                for choice in chunk.choices:
                    if choice.delta.content:
                        words += 1
            return words

        return [await measured(lambda: asyncio.gather(*(one() for _ in range(streams))))
                for _ in range(rounds)]


# What the bare reader counts as one token: the start of a content delta, as the bench
# server renders it (17 bytes, so a mark never lies wholly inside the 16 bytes carried
# over from the previous read).
TOKEN_MARK = b'{"content":" word'
CHUNKED_END = b"0\r\n\r\n"


class _BareStream(asyncio.Protocol):
    """One keep-alive connection of the bare reader: sends a request and counts token
    marks in whatever bytes arrive, until the chunked body's last chunk. No HTTP or SSE
    parsing, no JSON: the least a client can do with the same bytes."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[int] | None = None
        self.tokens = 0
        self.carried = b""

    def connection_made(self, transport) -> None:
        self.transport = transport

    def request(self, payload: bytes) -> asyncio.Future[int]:
        self.done = asyncio.get_running_loop().create_future()
        self.tokens, self.carried = 0, b""
        self.transport.write(payload)
        return self.done

    def data_received(self, data: bytes) -> None:
        joined = self.carried + data
        self.tokens += joined.count(TOKEN_MARK)
        if joined.endswith(CHUNKED_END) and self.done is not None and not self.done.done():
            self.done.set_result(self.tokens)
        self.carried = joined[-(len(TOKEN_MARK) - 1):]

    def connection_lost(self, exc) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(SystemExit(f"bare reader: connection lost ({exc})"))


async def run_bare(url: str, streams: int, rounds: int) -> list[tuple]:
    """The floor: the same streams read by `_BareStream`s on benchwarden's loop. Its CPU
    per token is what the kernel (receive, ACK), the event loop and one Python call per
    read cost with nothing else: no client on this loop and machine spends less."""
    host, port = url.removeprefix("http://").split(":")
    body = json.dumps(BODY).encode()
    payload = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
               ).encode() + body
    loop = asyncio.get_running_loop()
    connections = [(await loop.create_connection(_BareStream, host, int(port)))[1]
                   for _ in range(streams)]
    try:
        return [await measured(lambda: asyncio.gather(*(c.request(payload) for c in connections)))
                for _ in range(rounds)]
    finally:
        for connection in connections:
            connection.transport.close()


async def measured(start_round) -> tuple[float, float, int]:
    """One round: (CPU seconds of this process, wall seconds, tokens received)."""
    cpu_before = time.process_time()
    wall_before = time.perf_counter()
    counts = await start_round()
    cpu = time.process_time() - cpu_before
    wall = time.perf_counter() - wall_before
    return (cpu, wall, sum(counts))


def benchwarden_loop_run(coroutine):
    """Run on the client's own loop (uvloop when installed); an older checkout without
    benchwarden/targets/event_loop.py ran on asyncio's."""
    try:
        from benchwarden.targets import event_loop
    except ImportError:
        return asyncio.run(coroutine)
    return event_loop.run(coroutine)


def benchwarden_loop_name() -> str:
    try:
        from benchwarden.targets import event_loop
    except ImportError:
        return "asyncio"
    return event_loop.event_loop_name()


def report(name: str, results, streams: int, tokens: int) -> float:
    expected = streams * tokens
    per_token = []
    for cpu, _wall, counted in results:
        if counted != expected:
            raise SystemExit(f"{name}: received {counted} tokens, expected {expected}")
        per_token.append(cpu / counted * 1e6)
    median = statistics.median(per_token)
    runs = ", ".join(f"{value:.1f}" for value in per_token)
    walls = ", ".join(f"{wall:.2f}" for _, wall, _ in results)
    print(f"  {name:<12} {median:8.2f} µs CPU/token (median; rounds: {runs}; wall s: {walls})")
    return median


# --- diagnostics: the body's read path alone, in one process (far less noisy) ---

def chunk_framed_frame() -> tuple[bytes, bytes]:
    """One content frame of the bench's reply, and the same as one HTTP chunk."""
    frame = render_reply(1)[0]
    return frame, b"%x\r\n" % len(frame) + frame + b"\r\n"


async def read_path(reads: int, rounds: int, frames_per_read: int = 1) -> list[float]:
    """µs of CPU per body read from the connection's `data_received` on (what the
    client does with a read; the loop's own read and the kernel are left out): a
    stream is opened against a server that sends its head and then nothing, and the
    protocol is handed `frames_per_read` chunk-framed frames per call (more than one:
    reads that found several of the server's writes waiting, as under load), `reads`
    times per round."""
    from aiohttp import web

    from benchwarden.targets.openai_client import ChatClient

    release = asyncio.Event()

    async def chat(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await release.wait()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    _, framed = chunk_framed_frame()
    framed *= frames_per_read
    figures = []
    async with ChatClient(url, max_reply_bytes=None, max_chunks_per_token=None,
                          stall_timeout=None) as client:
        stream = asyncio.create_task(client.stream_chat({**BODY, "max_tokens": None}))
        await asyncio.sleep(0.5)  # the head is in and the body is being read
        connector = client._session.connector  # type: ignore[union-attr]
        (protocol,) = list(connector._acquired)  # type: ignore[union-attr]
        for _ in range(rounds):
            received = protocol.data_received
            before = time.process_time()
            for _ in range(reads):
                received(framed)
            figures.append((time.process_time() - before) / reads * 1e6)
        stream.cancel()
        await asyncio.gather(stream, return_exceptions=True)
    release.set()
    await runner.cleanup()
    return figures


def decoders(reads: int, rounds: int) -> dict[str, list[float]]:
    """µs of CPU per read to hand the frame of one chunk-framed read to the Python
    code that takes it: httptools (llhttp, called from Python, calling a Python
    `on_body` back, as the client's `_Tap` does) against a minimal Python decoder
    that handles only that case and against the client's own check for a read that
    is one whole chunk (the size line the read's length implies, looked up), both in
    the function that takes the frame (decision 0002 says why httptools decodes every
    other read)."""
    import re

    import httptools

    frame, framed = chunk_framed_frame()
    taken: list[bytes] = []

    def take(piece: bytes) -> None:  # the client's `_BodyReader.feed`, reduced to this
        taken.append(piece)

    parser = httptools.HttpResponseParser(types.SimpleNamespace(on_body=take))
    parser.feed_data(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    size_line = re.compile(rb"([0-9A-Fa-f]{1,15})(?:;[^\r\n]*)?\r\n").match

    def with_httptools(data: bytes, feed=parser.feed_data) -> None:
        try:
            feed(data)
        except httptools.HttpParserError:
            raise SystemExit("httptools refused the bench frame") from None

    def minimal(data: bytes) -> None:
        found = size_line(data)
        if found is not None:
            start, size = found.end(), int(found[1], 16)
            if len(data) == start + size + 2 and data[-2:] == b"\r\n":
                taken.append(data[start:-2])
                return
        raise SystemExit("the minimal decoder refused the bench frame")

    try:  # an older checkout has no such check
        from benchwarden.targets.openai_client import _SIZE_LINE_OF_WHOLE_CHUNK as by_length
    except ImportError:
        by_length = []

    def length_table(data: bytes) -> None:
        length = len(data)
        size_line = by_length[length] if length < len(by_length) else None
        if (size_line is None or data[-1] != 0x0A or data[-2] != 0x0D
                or not data.startswith(size_line)):
            raise SystemExit("the length table refused the bench frame")
        taken.append(data[len(size_line):-2])

    contenders = [("httptools", with_httptools), ("minimal Python", minimal)]
    if by_length:
        contenders.append(("length table", length_table))
    figures: dict[str, list[float]] = {name: [] for name, _ in contenders}
    for _ in range(rounds):
        for name, decode in contenders:
            taken.clear()
            before = time.process_time()
            for _ in range(reads):
                decode(framed)
            figures[name].append((time.process_time() - before) / reads * 1e6)
            if taken != [frame] * reads:
                raise SystemExit(f"{name} took the wrong bytes")
    return figures


CHUNKED_EVENT_STREAM_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\n")


def client_module_of(checkout: str) -> types.ModuleType:
    """Another checkout's benchwarden/targets/openai_client.py, loaded under its own
    name beside this checkout's (it imports the rest of the package from this one)."""
    import importlib.util

    path = os.path.join(checkout, "benchwarden", "targets", "openai_client.py")
    spec = importlib.util.spec_from_file_location("benchwarden_against_openai_client", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"--against: no benchwarden/targets/openai_client.py in {checkout}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def cold_feed(streams: int, reads_per_stream: int, rounds: int,
              against: str | None) -> dict[str, list[float]]:
    """µs of CPU per read for `_BodyReader.feed` taking one chunk-framed frame, with
    `streams` body readers (each with its reply state, stall watch and `_Tap`, as a
    streamed request has them, but no connection) fed in turn: with thousands of
    streams, a stream's objects have left the processor's caches by its next read,
    as in the whole bench, where the kernel's and the loop's work on 255 other
    streams' reads comes between two reads of one stream. With `against`, that
    checkout's client takes alternate rounds in the same process (paired rounds:
    what the machine's other load does to one round it does to its pair)."""
    from benchwarden.targets import openai_client

    variants = {"this checkout": openai_client}
    if against:
        variants[f"--against {against}"] = client_module_of(against)
    _, framed = chunk_framed_frame()
    figures: dict[str, list[float]] = {name: [] for name in variants}
    order = list(variants.items())
    collecting = gc.isenabled()
    gc.disable()  # the set-up makes hundreds of thousands of objects; a round makes none
    try:
        for _ in range(rounds):
            _cold_feed_round(order, streams, reads_per_stream, framed, figures)
            order.reverse()  # each goes first in every other round: no gain from the order
            gc.collect()
    finally:
        if collecting:
            gc.enable()
    return figures


def _cold_feed_round(order: list, streams: int, reads_per_stream: int, framed: bytes,
                     figures: dict[str, list[float]]) -> None:
    for name, client in order:
        feeds: list = []
        for _ in range(streams):
            state = client._StreamState()
            watch = client._StallWatch(60.0, None)
            watch.handle = True  # as if armed: no event loop here
            reader = client._BodyReader(state, client.DEFAULT_MAX_REPLY_BYTES,
                                        None, None, watch)
            tap = client._Tap(reader, watch)
            tap.protocol = types.SimpleNamespace(transport=None)
            if not tap._is_event_stream_head(CHUNKED_EVENT_STREAM_HEAD):
                raise SystemExit(f"{name}: the tap refused the bench's response head")
            tap.taken = True
            tap._hand_reads_to_reader()
            reader.feed(framed)  # the first content delta: a read of its own kind
            feeds.append(reader.feed)
        before = time.process_time()
        for _ in range(reads_per_stream):
            for feed in feeds:
                feed(framed)
        figures[name].append((time.process_time() - before)
                             / (reads_per_stream * streams) * 1e6)
        for feed in feeds:
            reader = feed.__self__
            if reader.stop is not None or (reader.state.content_deltas
                                           != reads_per_stream + 1):
                raise SystemExit(f"{name}: a reader did not take every frame")
        feeds.clear()  # freed before the next variant's are made


def run_cold_feed(options: argparse.Namespace) -> None:
    streams, reads_per_stream, rounds = options.cold_streams, 8, 10
    figures = cold_feed(streams, reads_per_stream, rounds, options.against)
    print(f"CPU per read in _BodyReader.feed, one chunk-framed frame per read, "
          f"{streams:,} streams fed in turn, {reads_per_stream} reads each per round, "
          f"{rounds} rounds:")
    for name, values in figures.items():
        print(f"  {name:<30} min {min(values):.2f} µs, median "
              f"{statistics.median(values):.2f} µs (rounds: "
              f"{', '.join(f'{value:.2f}' for value in values)})")
    if options.against:
        ours, theirs = figures.values()
        ratios = sorted(mine / other for mine, other in zip(ours, theirs, strict=True))
        quartiles = statistics.quantiles(ratios, n=4)
        print(f"  this checkout / --against, round by round: median "
              f"{statistics.median(ratios):.3f}x (quartiles {quartiles[0]:.3f}-"
              f"{quartiles[2]:.3f})")


def run_diagnostic(options: argparse.Namespace) -> None:
    reads, rounds = 100_000, 5
    if options.read_path:
        per_read = options.frames_per_read
        figures = benchwarden_loop_run(read_path(reads, rounds, per_read))
        print(f"CPU per body read from data_received on ({benchwarden_loop_name()}; "
              f"{per_read} chunk-framed frame{'s' if per_read > 1 else ''} per read, "
              f"{reads:,} reads per round): min "
              f"{min(figures):.2f} µs, median {statistics.median(figures):.2f} µs "
              f"(rounds: {', '.join(f'{value:.2f}' for value in figures)})")
        return
    results = decoders(reads, rounds)
    for name, figures in results.items():
        print(f"  {name:<15} min {min(figures):.3f} µs/read, median "
              f"{statistics.median(figures):.3f} (rounds: "
              f"{', '.join(f'{value:.3f}' for value in figures)})")
    for name in results:
        if name != "httptools":
            ratio = min(results[name]) / min(results["httptools"])
            print(f"  {name} / httptools = {ratio:.2f}x (best rounds)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=256, help="concurrent streams per round")
    parser.add_argument("--tokens", type=int, default=256, help="content chunks per reply")
    parser.add_argument("--per-token-writes", action="store_true",
                        help="the server writes each chunk separately (default: one write)")
    parser.add_argument("--repeats", type=int, default=2, help="measured rounds per client")
    parser.add_argument("--only", choices=["benchwarden", "openai", "bare"],
                        help="measure one client")
    parser.add_argument("--loop", choices=["uvloop", "asyncio"],
                        help="benchwarden's event loop (default: the one the CLI uses)")
    parser.add_argument("--read-path", action="store_true",
                        help="diagnostic: CPU per body read from data_received on, in-process")
    parser.add_argument("--frames-per-read", type=int, default=1,
                        help="with --read-path: frames in each read (default 1)")
    parser.add_argument("--decoders", action="store_true",
                        help="diagnostic: httptools against a minimal chunk decoder")
    parser.add_argument("--cold-feed", action="store_true",
                        help="diagnostic: CPU per read in the body reader, thousands of "
                             "streams fed in turn (their objects out of the caches)")
    parser.add_argument("--cold-streams", type=int, default=16_384,
                        help="with --cold-feed: streams fed in turn (default 16,384)")
    parser.add_argument("--against", metavar="CHECKOUT",
                        help="with --cold-feed: another checkout whose client takes "
                             "alternate rounds in the same process")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    add_json_option(parser)
    options = parser.parse_args()
    if options.serve:
        serve(options.tokens, options.per_token_writes)
        return
    if options.cold_feed:
        run_cold_feed(options)
        return
    if options.read_path or options.decoders:
        if options.loop:
            os.environ["BENCHWARDEN_EVENT_LOOP"] = options.loop
        run_diagnostic(options)
        return

    if options.loop:
        os.environ["BENCHWARDEN_EVENT_LOOP"] = options.loop
    command = [sys.executable, os.path.abspath(__file__), "--serve",
               "--tokens", str(options.tokens)]
    if options.per_token_writes:
        command.append("--per-token-writes")
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        if not line.startswith("PORT "):
            raise SystemExit("the bench server did not start")
        url = f"http://127.0.0.1:{int(line.split()[1])}"
        mode = "one write per token" if options.per_token_writes else "one write per reply"
        print(f"client CPU per streamed token: {options.streams} concurrent streams x "
              f"{options.tokens} tokens, server {mode}, {options.repeats} measured rounds each; "
              f"benchwarden on {benchwarden_loop_name()}, the SDK on asyncio")
        medians = {}
        clients = {"benchwarden": (run_benchwarden, benchwarden_loop_run),
                   "openai SDK": (run_openai, asyncio.run),
                   "bare reader": (run_bare, benchwarden_loop_run)}
        if options.only:
            clients = {k: v for k, v in clients.items() if k.startswith(options.only)}
        results = {name: [] for name in clients}
        for _ in range(options.repeats):  # alternate, so drift hits both alike
            for name, (run, on_loop) in clients.items():
                # Two rounds on one client: the first (unmeasured) opens the connections.
                warm_up, measured_round = on_loop(run(url, options.streams, 2))
                results[name].append(measured_round)
        for name in clients:
            medians[name] = report(name, results[name], options.streams, options.tokens)
        sdk, ours, bare = (medians.get(name) for name in
                           ("openai SDK", "benchwarden", "bare reader"))
        if sdk and ours:
            print(f"  openai SDK / benchwarden = {sdk / ours:.1f}×")
        if sdk and bare:
            print(f"  openai SDK / bare reader = {sdk / bare:.1f}× (the most any client on "
                  "this loop and kernel can reach)")
        if ours and bare:
            print(f"  benchwarden / bare reader = {ours / bare:.2f}x (1.00x: nothing left "
                  "above the floor)")
        mode_key = "per_token_writes" if options.per_token_writes else "one_write"
        emit("client_overhead", [
            Figure(f"cpu_us_per_token.{mode_key}", ours, sdk, "µs CPU/token",
                   "benchwarden vs the openai SDK"),
            Figure(f"cpu_us_per_token.{mode_key}.bare_reader", bare, sdk, "µs CPU/token",
                   "the bare reader (the floor) vs the openai SDK"),
            Figure(f"cpu_us_per_token.{mode_key}.over_bare_reader", ours, bare, "µs CPU/token",
                   "benchwarden vs the bare reader")], options.json_path)
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
