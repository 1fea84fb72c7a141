"""How fast one process launches a contamination rung: the spread of send times (launch
skew) when N streamed requests are fired at once, as the suite fires a rung.

Baseline, measured in the same run: a cold connection pool, where every request of the
burst also opens its TCP connection. Measured: the pool opened first
(`ChatClient.open_connections`, what the contamination driver does), so each request of
the burst is only a write. The server is the fast streaming server of
`client_overhead.py`, in its own process, so it does not share this event loop.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchwarden.targets.openai_client import ChatClient  # noqa: E402

from _figures import Figure, add_json_option, emit  # noqa: E402

BODY = {"model": "bench-model", "stream": True, "max_tokens": 64,
        "messages": [{"role": "user", "content": "Say a few words."}],
        "stream_options": {"include_usage": True}}


async def launch_skew_ms(url: str, slots: int, open_first: bool) -> float:
    async with ChatClient(url, max_connections=slots) as client:
        if open_first:
            await client.open_connections(slots)
        gate = asyncio.Event()

        async def slot():
            await gate.wait()
            return await client.stream_chat(BODY)

        tasks = [asyncio.create_task(slot()) for _ in range(slots)]
        await asyncio.sleep(0)
        gate.set()
        outcomes = await asyncio.gather(*tasks)
    failed = [outcome.error for outcome in outcomes if not outcome.ok]
    if failed:
        raise SystemExit(f"{len(failed)} requests failed, e.g. {failed[0]}")
    sends = [outcome.timings.sent_at for outcome in outcomes]
    return (max(sends) - min(sends)) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slots", default="8,64,256,512", help="rung sizes, comma-separated")
    parser.add_argument("--repeats", type=int, default=5, help="bursts per size and mode")
    add_json_option(parser)
    options = parser.parse_args()
    figures = []
    server_script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "client_overhead.py")
    server = subprocess.Popen([sys.executable, server_script, "--serve", "--tokens", "64"],
                              stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        if not line.startswith("PORT "):
            raise SystemExit("the bench server did not start")
        url = f"http://127.0.0.1:{int(line.split()[1])}"
        print(f"launch skew (first to last send) of one rung, median of {options.repeats} bursts")
        print(f"{'slots':>6}  {'cold pool (baseline)':>21}  {'pool opened first':>18}  {'ratio':>6}")
        for slots in (int(text) for text in options.slots.split(",")):
            cold, warm = [], []
            for _ in range(options.repeats):  # alternate, so drift hits both alike
                cold.append(asyncio.run(launch_skew_ms(url, slots, open_first=False)))
                warm.append(asyncio.run(launch_skew_ms(url, slots, open_first=True)))
            cold_ms, warm_ms = statistics.median(cold), statistics.median(warm)
            print(f"{slots:>6}  {cold_ms:>17.1f} ms  {warm_ms:>15.1f} ms  "
                  f"{cold_ms / warm_ms:>5.1f}x")
            figures.append(Figure(f"skew_ms.c{slots}", warm_ms, cold_ms, "ms",
                                  "pool opened first vs cold pool"))
        emit("rung_launch", figures, options.json_path)
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
