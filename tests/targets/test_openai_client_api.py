"""Reachability (`list_models`), non-streamed chat, URL normalisation and the error line."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchwarden.targets.openai_client import (
    ChatClient,
    TargetError,
    TargetUnreachable,
    normalise_base_url,
    now,
    one_line_error,
)
from benchwarden.targets.replies import ChatCompletion, ToolCall, Usage

from .fakes import (
    ScriptedOpenAIServer,
    answering,
    chunk,
    free_port_nobody_listens_on,
    models_listing,
    sse_body,
    stalling,
    streaming,
)


def models_from(handler, *, timeout: float = 10.0, api_key: str | None = None):
    async def scenario():
        async with ScriptedOpenAIServer(models=handler) as server:
            async with ChatClient(server.url + "/v1", api_key=api_key) as client:
                return await client.list_models(timeout=timeout), server.requests

    return asyncio.run(scenario())


def unreachable_message(coroutine_factory) -> str:
    with pytest.raises(TargetUnreachable) as caught:
        asyncio.run(coroutine_factory())
    message = str(caught.value)
    assert "\n" not in message and len(message) <= 300
    return message


def test_list_models_returns_the_ids_and_sends_the_key():
    ids, requests = models_from(models_listing(["a", "b"]), api_key="sk-1")
    assert ids == ["a", "b"]
    assert requests[0].path == "/v1/models"
    assert requests[0].headers["Authorization"] == "Bearer sk-1"


def test_list_models_reads_a_listing_larger_than_an_error_body():
    ids = [f"vendor/model-{number:05d}-with-a-long-descriptive-name" for number in range(3000)]
    assert models_from(models_listing(ids))[0] == ids


def test_list_models_unreachable_server():
    port = free_port_nobody_listens_on()

    async def scenario():
        async with ChatClient(f"http://127.0.0.1:{port}") as client:
            await client.list_models()

    assert unreachable_message(scenario) == (
        f"GET http://127.0.0.1:{port}/v1/models failed: connection refused"
        " — is the server running?")


def test_list_models_non_200():
    async def scenario():
        await_models = answering(503, json.dumps({"error": {"message": "Loading model"}}))
        async with ScriptedOpenAIServer(models=await_models) as server:
            async with ChatClient(server.url) as client:
                await client.list_models()

    message = unreachable_message(scenario)
    assert "answered HTTP 503" in message and "Loading model" in message


def test_list_models_that_does_not_answer_in_time():
    async def scenario():
        async with ScriptedOpenAIServer(models=stalling()) as server:
            async with ChatClient(server.url) as client:
                await client.list_models(timeout=0.3)

    assert "timed out after 0.3 s" in unreachable_message(scenario)


def test_list_models_answering_something_else():
    async def scenario():
        async with ScriptedOpenAIServer(models=answering(200, "<html>hi</html>", "text/html")) as s:
            async with ChatClient(s.url) as client:
                await client.list_models()

    assert "not an OpenAI model list" in unreachable_message(scenario)


def complete(handler, body=None):
    async def scenario():
        async with ScriptedOpenAIServer(chat=handler) as server:
            async with ChatClient(server.url) as client:
                return await client.complete_chat(body or {"model": "m", "messages": []}), \
                    server.requests

    return asyncio.run(scenario())


def test_complete_chat_reads_message_tool_calls_and_usage():
    document = {
        "id": "x", "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None, "reasoning_content": "plan",
            "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "run", "arguments": "{\"cmd\":  \"ls\"}"}},
                {"id": "call_2", "type": "function",
                 "function": {"name": "read", "arguments": {"path": "a"}}}]}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20,
                  "prompt_tokens_details": {"cached_tokens": 64},
                  "completion_tokens_details": {"reasoning_tokens": 5}},
    }
    body = {"model": "m", "messages": [{"role": "user", "content": "go"}], "tools": []}
    completion, requests = complete(answering(200, json.dumps(document)), body)
    assert completion == ChatCompletion(
        content=None, reasoning="plan",
        tool_calls=(ToolCall(name="run", arguments='{"cmd":  "ls"}', id="call_1"),
                    ToolCall(name="read", arguments='{"path":"a"}', id="call_2")),
        finish_reason="tool_calls",
        usage=Usage(prompt_tokens=100, completion_tokens=20, cached_prompt_tokens=64,
                    reasoning_tokens=5),
        raw=document)
    assert json.loads(requests[0].body) == body


def test_complete_chat_plain_answer_without_usage_details():
    document = {"choices": [{"finish_reason": "stop",
                             "message": {"content": "hello", "reasoning": "r"}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
    completion, _ = complete(answering(200, json.dumps(document)))
    assert (completion.content, completion.reasoning, completion.tool_calls) == ("hello", "r", ())
    assert completion.usage == Usage(prompt_tokens=3, completion_tokens=1)


@pytest.mark.parametrize("handler, expected", [
    (answering(500, json.dumps({"object": "error", "message": "boom"})), "HTTP 500"),
    (answering(200, "not json", "text/plain"), "invalid JSON"),
    (answering(200, json.dumps({"error": "overloaded"})), "overloaded"),
    (answering(200, json.dumps({"choices": []})), "no choices"),
    (answering(200, json.dumps([1, 2])), "not an object"),
])
def test_complete_chat_failures_raise_target_error(handler, expected):
    with pytest.raises(TargetError, match=expected) as caught:
        complete(handler)
    assert "\n" not in str(caught.value)


def test_complete_chat_unreachable_raises_target_error():
    async def scenario():
        async with ChatClient(f"http://127.0.0.1:{free_port_nobody_listens_on()}") as client:
            await client.complete_chat({"model": "m"})

    with pytest.raises(TargetError, match="connection refused"):
        asyncio.run(scenario())


@pytest.mark.parametrize("given_url, base", [
    ("http://h:8000", "http://h:8000"),
    ("http://h:8000/", "http://h:8000"),
    ("http://h:8000/v1", "http://h:8000"),
    ("http://h:8000/v1/", "http://h:8000"),
    (" https://api.example.com/proxy/v1 ", "https://api.example.com/proxy"),
    ("http://h/v10", "http://h/v10"),
])
def test_normalise_base_url(given_url, base):
    assert normalise_base_url(given_url) == base


@pytest.mark.parametrize("bad", ["h:8000", "ftp://h", "http://", "/v1"])
def test_normalise_base_url_refuses_what_is_not_http(bad):
    with pytest.raises(ValueError, match="http://HOST:PORT"):
        normalise_base_url(bad)


@given(st.text())
def test_one_line_error_is_always_one_short_line(text):
    line = one_line_error(text)
    assert len(line.splitlines()) == 1 and len(line) <= 300
    assert line == line.strip()


def test_one_line_error_keeps_short_messages_and_joins_lines():
    assert one_line_error("a\n  b\r\nc\t d") == "a b c d"
    assert one_line_error("") == "unknown error"


def test_the_clock_is_epoch_anchored_and_monotonic():
    import subprocess
    import sys

    readings = [now() for _ in range(1000)]
    assert readings == sorted(readings)
    # anchored to the wall clock when the module is imported, then advanced by
    # perf_counter alone: a wall clock stepped later in a long test run (a virtual
    # machine's time sync moved it 11 s once) is not followed, by design, so the
    # anchor is read in a fresh process, right after its import
    anchored = subprocess.run(
        [sys.executable, "-c", "import time\n"
         "from benchwarden.targets.openai_client import now\n"
         "print(now() - time.time())"],
        capture_output=True, text=True, check=True, stdin=subprocess.DEVNULL)
    assert abs(float(anchored.stdout)) < 5


# --- opening connections before a burst ---

def test_open_connections_opens_the_pool_before_a_burst():
    reply = sse_body([chunk("hi", role="assistant"), chunk(finish_reason="stop")])

    async def scenario():
        async with ScriptedOpenAIServer(
                chat=streaming(reply),
                models=answering(404, '{"error": "no models here"}')) as server:
            async with ChatClient(server.url) as client:
                opened = await client.open_connections(5)
                outcomes = await asyncio.gather(*(client.stream_chat({"stream": True})
                                                  for _ in range(5)))
            return opened, outcomes, server.requests

    opened, outcomes, seen = asyncio.run(scenario())
    assert opened == 5  # any answer opens a connection, even a 404
    assert [r.method for r in seen].count("GET") == 5
    assert all(outcome.ok and outcome.reply.text == "hi" for outcome in outcomes)
    assert not any(outcome.extra.get("reconnected") for outcome in outcomes)


def test_open_connections_to_nobody_loses_only_the_head_start():
    async def scenario():
        async with ChatClient(f"http://127.0.0.1:{free_port_nobody_listens_on()}") as client:
            return await client.open_connections(3, timeout=2)

    assert asyncio.run(scenario()) == 0
