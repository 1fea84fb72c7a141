"""`GatheringServer`: a fault-injecting fake (a real engine cannot hold replies on
demand) that answers no chat request until `expected` of them have arrived, then
streams them all, as a server with room for the whole rung does. Against it a rung
whose requests really were all in flight at once shows peak in flight == its size;
a client that sent some only after others had finished would deadlock it, and the
gate's `patience` ends the wait then (the replies still come, the peak shows it).

`arrived_within` is the spread of the arrival times of the gathered requests, as the
server saw them (the server-side view of launch skew).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web

from tests.fakes.openai_server import FakeOpenAIServer


class GatheringServer(FakeOpenAIServer):
    def __init__(self, expected: int, *, patience: float = 20.0, **options: Any) -> None:
        super().__init__("clean", **options)
        self.expected = expected
        self.patience = patience
        self.arrivals: list[float] = []
        self.gave_up = False
        self._all_in: asyncio.Event | None = None

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        if self._all_in is None:
            self._all_in = asyncio.Event()
        self.arrivals.append(time.perf_counter())
        if len(self.arrivals) >= self.expected:
            self._all_in.set()
        try:
            await asyncio.wait_for(self._all_in.wait(), self.patience)
        except TimeoutError:
            self.gave_up = True
        return await super()._chat(request)

    @property
    def arrived_within(self) -> float:
        gathered = self.arrivals[: self.expected]
        return max(gathered) - min(gathered) if gathered else 0.0
