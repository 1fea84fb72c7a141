"""The client against hostile servers: every fault ends in bounded time and memory as an
error outcome (or a one-line TargetUnreachable) that says what happened."""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from email.utils import formatdate

import msgspec
import pytest

from benchwarden.core.records import canonical_json
from benchwarden.targets.openai_client import (
    CHUNK_ALLOWANCE,
    DEFAULT_MAX_REPLY_BYTES,
    EVIDENCE_BYTES,
    MAX_429_RETRIES,
    ChatClient,
    TargetUnreachable,
)
from benchwarden.targets.replies import ERROR_LIMIT, RequestOutcome
from tests.fakes.hostile_servers import HostileServer, TricklingServer

# Every test here runs on asyncio's loop and on uvloop (tests/targets/conftest.py).
pytestmark = pytest.mark.usefixtures("on_both_loops")

BODY = {"model": "fake-model", "stream": True, "max_tokens": 16,
        "messages": [{"role": "user", "content": "topic: rivers\nXK-AZURE-HERON-41"}]}


def outcome_from(server: HostileServer, body: dict = BODY, **client_options) -> RequestOutcome:
    async def scenario() -> RequestOutcome:
        async with ChatClient(server.url, **client_options) as client:
            return await client.stream_chat(body)

    return asyncio.run(scenario())


def failed(outcome: RequestOutcome) -> str:
    assert not outcome.ok and outcome.reply is None
    assert outcome.error is not None
    assert "\n" not in outcome.error and len(outcome.error) <= ERROR_LIMIT
    return outcome.error


def stored_size(outcome: RequestOutcome) -> int:
    """Bytes the outcome takes as a store payload (after an exact round trip)."""
    stored = canonical_json({"outcome": outcome.to_json_dict()})
    back = RequestOutcome.from_json_dict(msgspec.json.decode(stored)["outcome"])
    assert back == outcome
    return len(stored)


def chunks_streamed(error: str) -> int:
    """N of "server streamed N chunks ...": the count seen when the cap was checked (the
    cap is checked per network read, so N may pass the cap by one read's chunks)."""
    match = re.match(r"server streamed ([\d,]+) chunks ", error)
    assert match, error
    return int(match.group(1).replace(",", ""))


def evidence(outcome: RequestOutcome) -> dict:
    found = outcome.extra["evidence"]
    assert set(found) == {"received_bytes", "sha256", "excerpt"}
    return found


# --- too much: endless, over-chunked, huge ---

def test_an_endless_stream_is_cut_at_the_chunk_cap_derived_from_max_tokens():
    with HostileServer("endless", limit_seconds=30) as server:
        outcome = outcome_from(server)
    error = failed(outcome)
    assert chunks_streamed(error) > 4 * 16 + CHUNK_ALLOWANCE
    assert error.endswith("for max_tokens 16 (cap 128: 4 per token + 64, --max-chunks-per-token)")
    found = evidence(outcome)
    assert found["excerpt"].startswith("data: {") and len(found["excerpt"]) == EVIDENCE_BYTES
    assert found["received_bytes"] < 1024 * 1024
    assert stored_size(outcome) < 2 * EVIDENCE_BYTES


def test_an_endless_stream_without_a_token_limit_is_cut_at_the_byte_cap():
    body = {key: value for key, value in BODY.items() if key != "max_tokens"}
    with HostileServer("endless", limit_seconds=30) as server:
        outcome = outcome_from(server, body, max_reply_bytes=256 * 1024)
    error = failed(outcome)
    assert error.startswith("reply exceeded the 256 KiB cap (--max-reply-bytes) after ")
    found = evidence(outcome)
    assert 256 * 1024 < found["received_bytes"] < 2 * 1024 * 1024


def test_a_100_mb_reply_keeps_only_evidence_at_the_default_cap():
    with HostileServer("huge_reply", reply_bytes=100 * 1024 * 1024) as server:
        outcome = outcome_from(server, max_chunks_per_token=None)
        sent = server.bytes_sent
    error = failed(outcome)
    assert error.startswith("reply exceeded the 16 MiB cap (--max-reply-bytes)")
    found = evidence(outcome)
    assert DEFAULT_MAX_REPLY_BYTES < found["received_bytes"] < DEFAULT_MAX_REPLY_BYTES + 4 * 1024**2
    assert sent < 40 * 1024 * 1024  # the client hung up; the server did not send it all
    assert stored_size(outcome) < 2 * EVIDENCE_BYTES


def test_one_huge_line_is_cut_with_its_length_and_sha256():
    size = 8 * 1024 * 1024
    with HostileServer("huge_line", reply_bytes=size) as server:
        outcome = outcome_from(server, max_reply_bytes=1024 * 1024)
    assert failed(outcome).startswith("reply exceeded the 1 MiB cap")
    found = evidence(outcome)
    received = found["received_bytes"]
    assert 1024 * 1024 < received < size
    # The server's body is known: the hash is of exactly the bytes received.
    head = b'data: {"choices": [{"index": 0, "delta": {"content": "'
    body = head + b"y" * (received - len(head))
    assert found["sha256"] == hashlib.sha256(body).hexdigest()
    assert found["excerpt"].encode() == body[:EVIDENCE_BYTES]


def test_a_compression_bomb_is_cut_at_the_byte_cap_of_what_it_inflates_to():
    with HostileServer("gzip_bomb", reply_bytes=200 * 1024 * 1024) as server:
        outcome = outcome_from(server, max_reply_bytes=1024 * 1024)
        wire = server.bytes_sent
    assert wire < 1024 * 1024  # small on the wire, 200 MB inflated
    assert failed(outcome).startswith("reply exceeded the 1 MiB cap")
    assert evidence(outcome)["received_bytes"] < 8 * 1024 * 1024


def test_the_client_asks_for_uncompressed_bodies():
    from tests.targets.fakes import ScriptedOpenAIServer, chunk, sse_body, streaming

    async def scenario():
        raw = sse_body([chunk("a", finish_reason="stop")])
        async with ScriptedOpenAIServer(chat=streaming(raw)) as server:
            async with ChatClient(server.url) as client:
                await client.list_models()
                await client.stream_chat(BODY)
            return server.requests

    requests = asyncio.run(scenario())
    assert [r.headers.get("Accept-Encoding") for r in requests] == ["identity", "identity"]


def test_a_server_streaming_ten_chunks_per_token_is_cut():
    with HostileServer("overchunked", chunks_per_token=10) as server:
        error = failed(outcome_from(server))
    assert 128 < chunks_streamed(error) <= 10 * 16 + 2
    assert "for max_tokens 16 (cap 128: 4 per token + 64" in error


def test_a_server_within_the_chunk_allowance_is_not_cut():
    # Four chunks per token plus finish and [DONE] stays under 4 per token + 64.
    with HostileServer("overchunked", chunks_per_token=4) as server:
        outcome = outcome_from(server)
    assert outcome.ok, outcome.error
    assert outcome.reply.text == "t" * 64 and outcome.reply.finish_reason == "length"


# --- too slow: slowloris ---

def test_a_slowloris_trickling_bytes_ends_at_the_stall_timeout():
    # Bytes keep coming (every 0.05 s) but no line completes within 0.5 s.
    with HostileServer("slowloris", byte_interval=0.05, limit_seconds=20) as server:
        outcome = outcome_from(server, stall_timeout=0.5, request_timeout=20)
    error = failed(outcome)
    assert "stalled: no complete line for 0.5 s after 0 deltas" in error
    assert "--stall-timeout" in error
    assert outcome.timings.last_byte_at is not None


def test_a_slowloris_trickling_its_status_line_ends_at_the_stall_timeout():
    # The first byte comes at once, then one every 0.05 s: "HTTP/1.1 200 OK" alone
    # takes longer than the 0.5 s allowed for a line.
    with TricklingServer(byte_interval=0.05, limit_seconds=20) as server:
        outcome = outcome_from(server, stall_timeout=0.5, request_timeout=20)
        sent = server.bytes_sent
    error = failed(outcome)
    assert "stalled: no complete line for 0.5 s in the response headers" in error
    assert outcome.status is None and sent < 17 + 10  # it gave up inside the status line


def test_headers_that_arrive_line_by_line_in_time_are_not_a_stall():
    with TricklingServer(byte_interval=0.002, limit_seconds=20) as server:
        outcome = outcome_from(server, stall_timeout=5, request_timeout=20)
    assert outcome.ok, outcome.error
    assert outcome.reply.text == "slow "


def test_a_slow_but_steady_server_is_not_a_stall():
    # A line completes well within the stall timeout each time: the reply comes whole.
    with HostileServer("slowloris", byte_interval=0.001, limit_seconds=20) as server:
        outcome = outcome_from(server, stall_timeout=5, request_timeout=20)
    assert outcome.ok, outcome.error
    assert outcome.reply.text == "slow "


# --- HTTP 429 ---

def test_429_with_retry_after_is_honoured_then_the_reply_is_recorded():
    with HostileServer("overloaded", overloaded_requests=1, retry_after="1") as server:
        outcome = outcome_from(server)
        times = server.request_times
    assert outcome.ok, outcome.error
    assert outcome.extra["http_429_retries"] == 1
    assert outcome.extra["http_429_waited_s"] >= 1
    assert len(times) == 2 and times[1] - times[0] >= 0.9  # it waited as asked


def test_429_with_an_http_date_retry_after_is_honoured():
    with HostileServer("overloaded", overloaded_requests=2,
                       retry_after=formatdate(time.time() - 5, usegmt=True)) as server:
        outcome = outcome_from(server)  # a date in the past: retry at once
    assert outcome.ok and outcome.extra["http_429_retries"] == 2


def test_429_asking_longer_than_the_bound_is_reported_as_overload_without_retrying():
    with HostileServer("overloaded", overloaded_requests=100, retry_after="120") as server:
        outcome = outcome_from(server)
        requests = len(server.request_times)
    error = failed(outcome)
    assert error.startswith("server overloaded: HTTP 429, Retry-After 120 s exceeds the 30 s "
                            "bound (--retry-429-max-wait): fake overload")
    assert requests == 1 and outcome.status == 429


def test_429_waits_that_add_up_past_the_bound_stop_retrying():
    with HostileServer("overloaded", overloaded_requests=100, retry_after="1") as server:
        outcome = outcome_from(server, retry_429_max_wait=2)
    error = failed(outcome)
    assert "Retry-After 1 s would exceed the 2 s bound after 2 s already waited" in error
    assert outcome.extra["http_429_retries"] == 2


@pytest.mark.parametrize("retry_after", [None, "soon"])
def test_429_without_a_usable_retry_after_is_overload(retry_after):
    with HostileServer("overloaded", overloaded_requests=100, retry_after=retry_after) as server:
        error = failed(outcome_from(server))
    assert error.startswith("server overloaded: HTTP 429 without a usable Retry-After")


def test_429_retry_after_zero_forever_ends_after_a_bounded_number_of_retries():
    with HostileServer("overloaded", overloaded_requests=1000, retry_after="0") as server:
        outcome = outcome_from(server)
        requests = len(server.request_times)
    assert f"HTTP 429 again after {MAX_429_RETRIES} retries" in failed(outcome)
    assert requests == MAX_429_RETRIES + 1


# --- GET /v1/models ---

def models_error(server: HostileServer, **client_options) -> str:
    async def scenario() -> None:
        async with ChatClient(server.url, **client_options) as client:
            await client.list_models()

    with pytest.raises(TargetUnreachable) as caught:
        asyncio.run(scenario())
    message = str(caught.value)
    assert "\n" not in message and len(message) <= ERROR_LIMIT
    return message


@pytest.mark.parametrize("behaviour, expected", [
    ("nested", "answered 200 but not an OpenAI model list (nested too deeply)"),
    ("huge", "answered 200 with a body over 8 MiB"),
    ("not_list", "not an OpenAI model list (ValidationError: Expected `array`, got `str`"),
])
def test_hostile_model_lists_are_one_line_unreachable_errors(behaviour, expected):
    with HostileServer(models=behaviour) as server:
        assert expected in models_error(server)


def test_models_429_is_honoured_within_the_bound_and_reported_beyond_it():
    async def listing(url: str) -> list[str]:
        async with ChatClient(url) as client:
            return await client.list_models()

    with HostileServer(models="overloaded", overloaded_requests=1, retry_after="0") as server:
        assert asyncio.run(listing(server.url)) == ["fake-model"]
        assert server.models_requests == 2
    with HostileServer(models="overloaded", overloaded_requests=9, retry_after="120") as server:
        message = models_error(server)
    assert message.startswith("server overloaded: HTTP 429, Retry-After 120 s exceeds the 30 s")
    assert "GET http://127.0.0.1:" in message
