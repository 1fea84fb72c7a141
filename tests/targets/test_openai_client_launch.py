"""`ChatClient.stream_together`: a rung's requests are built and hold their connections
before any is written, then released together. Checked against a server that answers
none until all have arrived (tests/fakes/gathering_server.py), so peak in flight == the
rung's size is a property of the launch, not of timing luck."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from benchwarden.suites.contamination.fidelity import (
    launch_skew_ms,
    peak_overlap,
    streaming_interval,
)
from benchwarden.targets.openai_client import ChatClient
from benchwarden.targets.replies import RequestOutcome
from tests.fakes.gathering_server import GatheringServer

from .fakes import ScriptedOpenAIServer, chunk, free_port_nobody_listens_on, sse_body, streaming

# Every test here runs on asyncio's loop and on uvloop (tests/targets/conftest.py).
pytestmark = pytest.mark.usefixtures("on_both_loops")


def body(number: int) -> dict:
    return {"model": "fake-model", "stream": True, "max_tokens": 64,
            "messages": [{"role": "user", "content": f"request {number}"}]}


def together(url: str, requests, **client_options) -> tuple[list[RequestOutcome], int]:
    done = 0

    def count() -> None:
        nonlocal done
        done += 1

    async def scenario() -> list[RequestOutcome]:
        async with ChatClient(url, **client_options) as client:
            return await client.stream_together(requests, on_each_done=count)

    return asyncio.run(scenario()), done


@pytest.mark.parametrize("slots", [1, 8, 64])
def test_every_slot_is_delivered_and_all_were_in_flight_at_once(slots):
    with GatheringServer(slots, words=12) as server:
        outcomes, done = together(server.url, [(body(n), None) for n in range(slots)])
        assert not server.gave_up  # every request reached the server before any reply
    assert done == slots and len(outcomes) == slots
    assert all(outcome.ok for outcome in outcomes), [o.error for o in outcomes if not o.ok]
    intervals = [span for span in map(streaming_interval, outcomes) if span is not None]
    assert peak_overlap(intervals) == slots
    skew = launch_skew_ms(outcomes)
    assert skew is not None and skew >= 0
    for outcome in outcomes:
        timings = outcome.timings
        assert timings.sent_at <= timings.first_byte_at <= timings.last_byte_at


def test_outcomes_come_back_in_the_order_of_the_requests():
    # each request asks for a different reply; the scripted server echoes its request
    async def echo(server, request):
        payload = await request.json()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await asyncio.sleep(0.01 * (5 - int(payload["messages"][0]["content"].split()[1])))
        await response.write(sse_body([chunk(payload["messages"][0]["content"]),
                                       chunk(finish_reason="stop")]))
        await response.write_eof()
        return response

    async def scenario() -> list[RequestOutcome]:
        async with ScriptedOpenAIServer(chat=echo) as server:
            async with ChatClient(server.url) as client:
                return await client.stream_together([(body(n), None) for n in range(5)])

    outcomes = asyncio.run(scenario())
    assert [outcome.reply.text for outcome in outcomes] == [f"request {n}" for n in range(5)]


def test_cancel_after_deltas_applies_per_slot():
    with GatheringServer(4, words=20) as server:
        outcomes, _ = together(server.url, [(body(n), 3 if n % 2 else None) for n in range(4)])
    assert [bool(outcome.extra.get("cancelled")) for outcome in outcomes] == [
        False, True, False, True]
    assert outcomes[0].ok and outcomes[2].ok


def test_a_slot_that_cannot_connect_does_not_hold_the_others():
    # more slots than connections: the gate opens once the pool is full, the rest follow
    with GatheringServer(3, words=4, patience=5.0) as server:
        outcomes, done = together(server.url, [(body(n), None) for n in range(5)],
                                  max_connections=3)
    assert done == 5 and all(outcome.ok for outcome in outcomes)


def test_a_failed_connection_is_an_outcome_and_releases_the_gate():
    url = f"http://127.0.0.1:{free_port_nobody_listens_on()}"
    outcomes, done = together(url, [(body(n), None) for n in range(3)])
    assert done == 3
    assert all("connection refused" in (outcome.error or "") for outcome in outcomes)


def test_stream_chat_alone_records_when_the_body_was_written():
    async def scenario() -> RequestOutcome:
        async with ScriptedOpenAIServer(chat=streaming(sse_body([chunk("x"),
                                                                 chunk(finish_reason="stop")]))
                                        ) as server:
            async with ChatClient(server.url) as client:
                return await client.stream_chat(body(0))

    outcome = asyncio.run(scenario())
    assert outcome.ok
    assert outcome.timings.sent_at <= outcome.timings.first_byte_at
