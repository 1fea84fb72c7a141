"""The client against hostile servers: peak memory, and SSE parse time against line length.

Memory: a separate server process sends a well-formed 100 MB reply (4 KB content
deltas), one 100 MB `data:` line, and an endless token stream; each scenario runs in a
fresh client process whose peak RSS (`ru_maxrss`) is reported against the baseline
measured in the same run: a fresh client process that only lists the server's models.
With the default bounds (max_tokens 256) the chunk cap ends the reply first; with the
chunk cap off the byte cap does; either way the client must stay under 200 MB. The
100 MB reply is also read with both bounds off, to show what they save.

Parse time: one `data:` line of 8 MB and of 80 MB fed to `SSEParser` in 64 KiB pieces
(as the network delivers them), best of five fresh processes; linear time means a ratio
near 10.

    python bench/hostile_client.py
    python bench/hostile_client.py --reply-mb 200 --skip-unbounded

See bench/README.md for the last figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from _figures import Figure, add_json_option, emit  # noqa: E402

PIECE = 64 * 1024
RSS_LIMIT_MB = 200


# --- the server (its own process) ---

def frame(content: str | None, finish: str | None = None) -> bytes:
    delta = {} if content is None else {"content": content}
    chunk = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1,
             "model": "bench-model",
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n".encode()


def serve(reply_mb: int) -> None:
    from aiohttp import web

    token = frame(" word")
    batch = token * 256
    big = frame("x" * 4000) * 16  # about 64 KB per write
    end = frame(None, "stop") + b"data: [DONE]\n\n"

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            if body.get("scenario") == "endless":
                while True:
                    await response.write(batch)
            if body.get("scenario") == "line":
                await response.write(b'data: {"choices":[{"index":0,"delta":{"content":"')
                block = b"y" * 1_000_000
                for _ in range(reply_mb):
                    await response.write(block)
                await response.write(b'"}}]}\n\n' + end)
                await response.write_eof()
                return response
            written = 0
            while written < reply_mb * 1_000_000:
                await response.write(big)
                written += len(big)
            await response.write(end)
            await response.write_eof()
        except ConnectionError:
            pass  # the client hung up, as it should
        return response

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "bench-model"}]})

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        app.router.add_get("/v1/models", models)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        print(f"PORT {runner.addresses[0][1]}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


# --- one client scenario (its own process, so its peak RSS is its own) ---

def client(url: str, scenario: str) -> None:
    from benchwarden.targets import event_loop
    from benchwarden.targets.openai_client import ChatClient

    async def run() -> str:
        options: dict = {}
        if scenario == "reply-unbounded":
            options = {"max_reply_bytes": None, "max_chunks_per_token": None}
        elif scenario in ("reply-byte-cap", "line"):
            options = {"max_chunks_per_token": None}
        async with ChatClient(url, request_timeout=600, **options) as chat:
            if scenario == "idle":
                return f"listed {await chat.list_models()}"
            body = {"model": "bench-model", "stream": True, "max_tokens": 256,
                    "messages": [{"role": "user", "content": "Say many words."}],
                    "scenario": scenario.split("-")[0]}
            started = time.perf_counter()
            outcome = await chat.stream_chat(body)
            took = time.perf_counter() - started
            if outcome.ok:
                return f"ok, {len(outcome.reply.text):,} characters of text in {took:.1f} s"
            return f"{outcome.error} ({took:.1f} s)"

    result = event_loop.run(run())  # the loop the CLI runs the client on
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({"peak_mb": peak_kb / 1024, "result": result}), flush=True)


def measure(url: str, scenario: str) -> dict:
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--client", scenario,
                           "--url", url], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- parse time ---

def parse_once(megabytes: int) -> None:
    """One timed parse in this (fresh) process: no run reuses another's memory."""
    from benchwarden.targets.sse import SSEParser

    line = b"data: " + b"x" * (megabytes * 1_000_000) + b"\n\n"
    pieces = [line[start:start + PIECE] for start in range(0, len(line), PIECE)]
    del line
    parser = SSEParser()
    started = time.perf_counter()
    events = [event for piece in pieces for event in parser.feed(piece)]
    took = time.perf_counter() - started
    if len(events) != 1 or len(events[0].data) != megabytes * 1_000_000:
        raise SystemExit("the parser did not return the one long event")
    print(took, flush=True)


def parse_seconds(megabytes: int, runs: int = 5) -> float:
    """Best of fresh processes (as timeit takes the best: on a shared machine the noise
    only ever adds time). Fresh processes because a large buffer costs its first touch
    of new pages. glibc's malloc serves buffers under 32 MB from memory freed earlier
    (already touched), so only the small size would reuse the pages of its own input;
    a fixed mmap threshold of 1 MiB gives every large buffer of both sizes fresh pages,
    as a huge line received once gets in real use."""
    times = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--parse",
                               str(megabytes)], capture_output=True, text=True, check=True,
                              env={**os.environ, "MALLOC_MMAP_THRESHOLD_": str(1 << 20)})
        times.append(float(done.stdout.strip().splitlines()[-1]))
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reply-mb", type=int, default=100, help="size of the huge reply")
    parser.add_argument("--skip-unbounded", action="store_true",
                        help="do not read the huge reply with the bounds turned off")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--parse", type=int, help=argparse.SUPPRESS)
    add_json_option(parser)
    options = parser.parse_args()
    collected = []
    if options.parse:
        parse_once(options.parse)
        return
    if options.serve:
        serve(options.reply_mb)
        return
    if options.client:
        client(options.url, options.client)
        return

    server = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve",
                               "--reply-mb", str(options.reply_mb)],
                              stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        if not line.startswith("PORT "):
            raise SystemExit("the bench server did not start")
        url = f"http://127.0.0.1:{int(line.split()[1])}"
        print("peak RSS of one client process (baseline: a client that only lists models)")
        baseline = measure(url, "idle")["peak_mb"]
        print(f"  {'idle client (baseline)':<36} {baseline:7.1f} MB   1.00x")
        scenarios = [("reply", f"{options.reply_mb} MB reply, default bounds"),
                     ("reply-byte-cap", f"{options.reply_mb} MB reply, chunk cap off"),
                     ("line", f"{options.reply_mb} MB single line, chunk cap off"),
                     ("endless", "endless stream, default bounds")]
        if not options.skip_unbounded:
            scenarios.append(("reply-unbounded", f"{options.reply_mb} MB reply, bounds off"))
        failed = False
        for scenario, label in scenarios:
            figures = measure(url, scenario)
            peak = figures["peak_mb"]
            bounded = scenario != "reply-unbounded"
            verdict = ""
            if bounded:
                verdict = "  ok" if peak < RSS_LIMIT_MB else f"  OVER {RSS_LIMIT_MB} MB"
                failed |= peak >= RSS_LIMIT_MB
            print(f"  {label:<36} {peak:7.1f} MB {peak / baseline:6.2f}x{verdict}")
            collected.append(Figure(f"peak_rss.{scenario}", peak, baseline, "MB",
                                    f"{label}, vs an idle client"))
            print(f"      {figures['result'][:150]}")
    finally:
        server.terminate()
        server.wait(10)

    print("SSE parse time of one data: line, fed in 64 KiB pieces (best of 5 fresh processes)")
    small, large = parse_seconds(8), parse_seconds(80)
    print(f"  8 MB line   {small * 1000:8.1f} ms  ({small * 1000 / 8:.1f} ms/MB)")
    print(f"  80 MB line  {large * 1000:8.1f} ms  ({large * 1000 / 80:.1f} ms/MB)   "
          f"ratio {large / small:.1f} (10 = linear; quadratic would be 100)")
    collected.append(Figure("sse_parse_seconds.80mb_vs_8mb", large, small, "s",
                            "one data: line; 10x = linear"))
    emit("hostile_client", collected, options.json_path)
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
