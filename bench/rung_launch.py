"""How fast one process launches a contamination rung: the spread of send times (launch
skew, first send to last send) when N streamed requests are fired at once, and whether
they all ran together (peak in flight).

Baseline, measured in the same run: the launch the contamination driver used before,
the pool opened first (`ChatClient.open_connections`) and every slot released by one
gate into `stream_chat`, so each slot built its request and took its connection after
the gate. Measured: `ChatClient.stream_together` (what the driver does now): each slot
is built and holds its connection (opened if need be, from a cold pool) before any is
written, and all are released together. `sent_at` is when a request's body is written
in both. The server is the streaming server of `client_overhead.py` writing each of 64 tokens
separately (so replies last long enough to overlap), in its own process, so it does not
share this event loop; the peak in flight is computed as the
contamination report computes it (`fidelity.peak_overlap` of the streaming intervals).

    python bench/rung_launch.py                    # 8, 64, 256, 512 slots; 5 bursts each
    python bench/rung_launch.py --slots 256 --repeats 9

Also printed: the CPU time this process spent from the first body write to the last
(the launch's own work); on a shared machine the wall-clock skew adds whatever time the
OS gave the CPU to other processes (the server among them) inside that window.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time

import aiohttp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _figures import Figure, add_json_option, emit  # noqa: E402

from benchwarden.suites.contamination.fidelity import (  # noqa: E402
    launch_skew_ms,
    peak_overlap,
    streaming_interval,
)
from benchwarden.targets import event_loop  # noqa: E402
from benchwarden.targets.openai_client import ChatClient  # noqa: E402

BODY = {"model": "bench-model", "stream": True, "max_tokens": 64,
        "messages": [{"role": "user", "content": "Say a few words."}],
        "stream_options": {"include_usage": True}}


# The CPU clock of this process as each request's body write begins (just after its
# `sent_at`): instrumentation of this script only, to tell the launch's own work from
# the time the OS gave the CPU to other processes inside the launch window.
_write_cpu: list[float] = []
_plain_write_bytes = aiohttp.ClientRequest.write_bytes


async def _noting_write_bytes(self, *args, **kwargs):
    _write_cpu.append(time.process_time())
    return await _plain_write_bytes(self, *args, **kwargs)


aiohttp.ClientRequest.write_bytes = _noting_write_bytes


async def launch(url: str, slots: int, together: bool) -> tuple[float, int, float]:
    """(launch skew in ms, peak in flight, CPU ms of this process from the first body
    write to the last) of one burst of `slots` requests."""
    _write_cpu.clear()
    async with ChatClient(url, max_connections=max(1024, slots)) as client:
        if together:
            outcomes = await client.stream_together([(BODY, None)] * slots)
        else:
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
    intervals = [span for span in map(streaming_interval, outcomes) if span is not None]
    writes = _write_cpu[-slots:]
    return (launch_skew_ms(outcomes) or 0.0, peak_overlap(intervals),
            (max(writes) - min(writes)) * 1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slots", default="8,64,256,512", help="rung sizes, comma-separated")
    parser.add_argument("--repeats", type=int, default=5, help="bursts per size and mode")
    add_json_option(parser)
    options = parser.parse_args()
    figures = []
    server_script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "client_overhead.py")
    server = subprocess.Popen([sys.executable, server_script, "--serve", "--tokens", "64",
                               "--per-token-writes"],
                              stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        if not line.startswith("PORT "):
            raise SystemExit("the bench server did not start")
        url = f"http://127.0.0.1:{int(line.split()[1])}"
        print(f"launch skew (first to last send) of one rung, median of {options.repeats} "
              "bursts; peak in flight: lowest of the bursts; on the client's loop, "
              f"{event_loop.event_loop_name()}")
        print(f"{'slots':>6}  {'gate, then send (baseline)':>27}  {'stream_together':>16}  "
              f"{'ratio':>6}  {'peak in flight':>14}  {'launch CPU (baseline)':>22}")
        for slots in (int(text) for text in options.slots.split(",")):
            before, together, peaks, cpu_before, cpu_together = [], [], [], [], []
            for _ in range(options.repeats):  # alternate, so drift hits both alike
                skew, _, cpu = event_loop.run(launch(url, slots, together=False))
                before.append(skew)
                cpu_before.append(cpu)
                skew, peak, cpu = event_loop.run(launch(url, slots, together=True))
                together.append(skew)
                peaks.append(peak)
                cpu_together.append(cpu)
            before_ms, together_ms = statistics.median(before), statistics.median(together)
            cpu_ms, cpu_before_ms = statistics.median(cpu_together), statistics.median(cpu_before)
            print(f"{slots:>6}  {before_ms:>24.1f} ms  {together_ms:>13.1f} ms  "
                  f"{together_ms / before_ms:>5.2f}x  {min(peaks):>14}  "
                  f"{cpu_ms:>7.1f} ms ({cpu_before_ms:.1f} ms)")
            figures.append(Figure(f"skew_ms.c{slots}", together_ms, before_ms, "ms",
                                  "stream_together vs gate-then-send, pool opened first"))
            figures.append(Figure(f"launch_cpu_ms.c{slots}", cpu_ms, cpu_before_ms, "ms",
                                  "CPU of this process within the launch window"))
            figures.append(Figure(f"peak_in_flight.c{slots}", min(peaks), slots, "requests",
                                  "lowest peak in flight of the bursts vs the slots fired"))
        emit("rung_launch", figures, options.json_path)
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
