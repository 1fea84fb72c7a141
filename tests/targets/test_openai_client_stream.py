"""The streaming client against fake servers speaking the shapes of real ones (SERVERS.md)."""

from __future__ import annotations

import asyncio
import json

import pytest

from benchwarden.targets.openai_client import ChatClient
from benchwarden.targets.replies import RequestOutcome, ToolCall

from .fakes import (
    FakeOneShotKeepAliveServer,
    ScriptedOpenAIServer,
    chunk,
    endless_deltas,
    sse_body,
    streaming,
    usage_chunk,
)

# Every test here runs on asyncio's loop and on uvloop (tests/targets/conftest.py).
pytestmark = pytest.mark.usefixtures("on_both_loops")

BODY = {"model": "fake-model", "stream": True, "temperature": 0, "max_tokens": 16,
        "messages": [{"role": "user", "content": "hi"}],
        "stream_options": {"include_usage": True}}


def stream(raw: bytes, *, bytewise: bool = False, **client_options) -> RequestOutcome:
    async def scenario() -> RequestOutcome:
        async with ScriptedOpenAIServer(chat=streaming(raw, bytewise=bytewise)) as server:
            async with ChatClient(server.url, **client_options) as client:
                return await client.stream_chat(BODY)

    return asyncio.run(scenario())


def ok(outcome: RequestOutcome):
    assert outcome.error is None, outcome.error
    assert outcome.ok and outcome.status == 200
    return outcome.reply


LLAMACPP_LIKE = [
    chunk(role="assistant", content=None),
    chunk("Hel"), chunk(""), chunk("lo"),
    chunk(finish_reason="stop"),
    usage_chunk({"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12,
                 "prompt_tokens_details": {"cached_tokens": 4}}) | {"timings": {"n": 1}},
]


def test_content_finish_and_the_choices_empty_usage_chunk():
    reply = ok(stream(sse_body(LLAMACPP_LIKE)))
    assert reply.text == "Hello" and reply.reasoning == "" and reply.tool_calls == ()
    assert reply.finish_reason == "stop" and reply.saw_done
    assert reply.completion_tokens == 3 and reply.usage_reported  # usage, not the 2 deltas
    assert reply.prompt_tokens == 9 and reply.cached_prompt_tokens == 4


def test_timings_are_recorded_in_order():
    timings = stream(sse_body(LLAMACPP_LIKE)).timings
    assert timings.first_byte_at is not None and timings.first_content_at is not None
    assert timings.sent_at <= timings.first_byte_at <= timings.first_content_at
    assert timings.first_content_at <= timings.last_byte_at


def test_usage_on_the_finish_chunk_as_older_llama_cpp_sent_it():
    frames = [chunk("a"), chunk("b"),
              chunk(finish_reason="length", usage={"prompt_tokens": 5, "completion_tokens": 7})]
    reply = ok(stream(sse_body(frames)))
    assert reply.finish_reason == "length" and reply.completion_tokens == 7


def test_continuous_usage_in_every_chunk_the_last_one_wins():
    frames = [chunk(word, usage={"prompt_tokens": 5, "completion_tokens": n})
              for n, word in enumerate(["x", "y", "z"], start=1)]
    frames.append(chunk(finish_reason="stop", usage={"prompt_tokens": 5, "completion_tokens": 4}))
    reply = ok(stream(sse_body(frames)))
    assert reply.text == "xyz" and reply.completion_tokens == 4


def test_without_usage_the_non_empty_content_and_reasoning_deltas_are_counted():
    frames = [chunk(role="assistant", content=""), chunk(reasoning_content="think"),
              chunk("a"), chunk(""), chunk(None), chunk("b"), chunk(finish_reason="stop")]
    reply = ok(stream(sse_body(frames)))
    assert not reply.usage_reported and reply.completion_tokens == 3
    assert reply.prompt_tokens is None and reply.cached_prompt_tokens is None


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_in_either_field_name(field):
    frames = [chunk(**{field: "Let me "}), chunk(**{field: "think."}), chunk("Answer."),
              chunk(finish_reason="stop")]
    reply = ok(stream(sse_body(frames)))
    assert reply.reasoning == "Let me think." and reply.text == "Answer."


def test_ollama_thinking_and_content_chunks_of_one_step():
    frames = [chunk(reasoning="hmm", content=""), chunk(content="yes", reasoning=""),
              chunk(finish_reason="stop")]
    reply = ok(stream(sse_body(frames)))
    assert (reply.reasoning, reply.text, reply.completion_tokens) == ("hmm", "yes", 2)


def test_reasoning_tokens_from_completion_tokens_details():
    frames = [chunk("a", finish_reason="stop"),
              usage_chunk({"prompt_tokens": 1, "completion_tokens": 9,
                           "completion_tokens_details": {"reasoning_tokens": 6}})]
    assert ok(stream(sse_body(frames))).reasoning_tokens == 6


def test_sglang_tool_call_fragments_with_explicit_nulls_afterwards():
    def fragment(index, *, call_id=None, name=None, arguments=None):
        return {"index": index, "id": call_id, "type": "function" if call_id else None,
                "function": {"name": name, "arguments": arguments}}

    frames = [
        chunk(tool_calls=[fragment(0, call_id="call_a", name="get_weather", arguments="")]),
        chunk(tool_calls=[fragment(0, arguments='{"city": ')]),
        chunk(tool_calls=[fragment(1, call_id="call_b", name="get_time", arguments="{")]),
        chunk(tool_calls=[fragment(0, arguments='"Oslo"}')]),
        chunk(tool_calls=[fragment(1, arguments="}")]),
        chunk(finish_reason="tool_calls"),
    ]
    reply = ok(stream(sse_body(frames)))
    assert reply.tool_calls == (
        ToolCall(name="get_weather", arguments='{"city": "Oslo"}', id="call_a"),
        ToolCall(name="get_time", arguments="{}", id="call_b"))
    assert reply.finish_reason == "tool_calls"


def test_tgi_tool_call_fragments_repeat_id_and_type_and_null_the_name():
    def fragment(name, arguments):
        return [{"index": 0, "id": "0", "type": "function",
                 "function": {"name": name, "arguments": arguments}}]

    frames = [chunk(tool_calls=fragment("lookup", "{\"q\"")),
              chunk(tool_calls=fragment(None, ": \"x y\"")),
              chunk(tool_calls=fragment(None, "}")),
              chunk(finish_reason="stop")]
    reply = ok(stream(sse_body(frames)))
    assert reply.tool_calls == (ToolCall(name="lookup", arguments='{"q": "x y"}', id="0"),)


def test_ollama_whole_parallel_calls_all_at_index_0_are_kept_apart_by_id():
    frames = [chunk(tool_calls=[
        {"index": 0, "id": "call_1", "type": "function",
         "function": {"name": "add", "arguments": '{"a":1,"b":2}'}},
        {"index": 0, "id": "call_2", "type": "function",
         "function": {"name": "mul", "arguments": '{"a":3,"b":4}'}}]),
        chunk(finish_reason="tool_calls")]
    reply = ok(stream(sse_body(frames)))
    assert [(call.id, call.name, call.arguments) for call in reply.tool_calls] == [
        ("call_1", "add", '{"a":1,"b":2}'), ("call_2", "mul", '{"a":3,"b":4}')]


def test_arguments_sent_as_a_json_object_are_encoded_compactly():
    frames = [chunk(tool_calls=[{"index": 0, "id": "c", "function": {
        "name": "f", "arguments": {"x": [1, 2]}}}]), chunk(finish_reason="tool_calls")]
    assert ok(stream(sse_body(frames))).tool_calls[0].arguments == '{"x":[1,2]}'


def test_a_tool_call_fragment_is_the_first_content():
    frames = [chunk(role="assistant"),
              chunk(tool_calls=[{"index": 0, "id": "c", "function": {"name": "f"}}]),
              chunk(finish_reason="tool_calls")]
    outcome = stream(sse_body(frames))
    assert ok(outcome).completion_tokens == 0  # tool-call fragments are not counted tokens
    assert outcome.timings.first_content_at is not None


def test_finish_reason_without_done_is_a_complete_reply():
    reply = ok(stream(sse_body([chunk("a"), chunk(finish_reason="stop")], done=False)))
    assert reply.text == "a" and reply.finish_reason == "stop" and not reply.saw_done


def test_unknown_keys_and_fields_are_ignored():
    frames = [
        chunk("a", obfuscation="Zx9", system_fingerprint="fp"),
        "retry: 100\nid: 3\nfoo: bar\n" + "data: " + json.dumps(chunk("b")) + "\n\n",
        "event: ping\ndata: " + json.dumps(chunk("PING")) + "\n\n",  # not a message event
        chunk(finish_reason="stop") | {"choices": [{"index": 0, "delta": {"obfuscation": "q"},
                                                    "finish_reason": "stop", "logprobs": None}]},
    ]
    reply = ok(stream(sse_body(frames)))
    assert reply.text == "ab" and reply.finish_reason == "stop"


def test_other_choices_than_index_0_are_not_mixed_in():
    frames = [chunk("mine"), {"choices": [{"index": 1, "delta": {"content": "theirs"}}]},
              chunk(finish_reason="stop")]
    assert ok(stream(sse_body(frames))).text == "mine"


FRAMES_FOR_SPLITTING = [
    chunk(role="assistant", content=None), chunk("é世"), chunk(reasoning_content="🙂"),
    chunk(tool_calls=[{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}}]),
    chunk(finish_reason="stop"), usage_chunk({"prompt_tokens": 2, "completion_tokens": 2}),
]


@pytest.mark.parametrize("line_ending", ["\n", "\r\n", "\r"])
def test_frames_split_across_tcp_writes_byte_by_byte(line_ending):
    raw = (": keep-alive" + line_ending + line_ending).encode() + sse_body(
        FRAMES_FOR_SPLITTING, line_ending=line_ending, space_after_colon=False)
    whole = ok(stream(raw))
    bytewise = ok(stream(raw, bytewise=True))
    assert bytewise == whole
    assert (whole.text, whole.reasoning, whole.tool_calls[0].arguments) == ("é世", "🙂", "{}")


def test_the_body_is_sent_exactly_as_given_with_the_api_key_as_a_header():
    async def scenario():
        async with ScriptedOpenAIServer(chat=streaming(sse_body(LLAMACPP_LIKE))) as server:
            async with ChatClient(server.url + "/v1/", api_key="sk-secret") as client:
                assert "sk-secret" not in repr(client)
                await client.stream_chat(BODY)
            async with ChatClient(server.url) as client:
                await client.stream_chat(BODY)
            return server.requests

    with_key, without_key = asyncio.run(scenario())
    assert with_key.path == "/v1/chat/completions"
    assert json.loads(with_key.body) == BODY
    assert with_key.headers["Authorization"] == "Bearer sk-secret"
    assert "Authorization" not in without_key.headers


def test_cancel_after_k_deltas_closes_the_connection():
    async def scenario():
        async with ScriptedOpenAIServer(chat=endless_deltas()) as server:
            async with ChatClient(server.url) as client:
                outcome = await client.stream_chat(BODY, cancel_after_deltas=3)
                # The server notices the closed connection on one of its next writes.
                await asyncio.wait_for(server.client_went_away.wait(), 30)
                return outcome

    outcome = asyncio.run(scenario())
    assert not outcome.ok and outcome.reply is None
    assert outcome.error == "cancelled by client after 3 deltas"
    assert outcome.extra == {"cancelled": True}


def test_many_concurrent_streams_on_one_client():
    async def scenario():
        async with ScriptedOpenAIServer(chat=streaming(sse_body(LLAMACPP_LIKE))) as server:
            async with ChatClient(server.url, max_connections=8) as client:
                return await asyncio.gather(*(client.stream_chat(BODY) for _ in range(40)))

    outcomes = asyncio.run(scenario())
    assert all(ok(outcome).text == "Hello" for outcome in outcomes)


def test_empty_data_lines_are_skipped_not_errors():
    frames = ["data: \n\n", "data:\n\n", chunk("a"), chunk(finish_reason="stop")]
    assert ok(stream(sse_body(frames))).text == "a"


def test_a_reused_connection_the_server_closed_is_retried_once_on_a_new_one():
    async def scenario():
        async with FakeOneShotKeepAliveServer(sse_body(LLAMACPP_LIKE)) as server:
            async with ChatClient(server.url) as client:
                first = await client.stream_chat(BODY)
                second = await client.stream_chat(BODY)  # goes out on the pooled connection
            return first, second, server

    first, second, server = asyncio.run(scenario())
    assert ok(first).text == "Hello" and "reconnected" not in first.extra
    assert ok(second).text == "Hello" and second.extra == {"reconnected": True}
    assert (server.requests_seen, server.requests_answered) == (3, 2)


def test_a_server_that_always_drops_the_connection_is_not_retried_forever():
    async def scenario():
        async with FakeOneShotKeepAliveServer(b"", answer_nothing=True) as server:
            async with ChatClient(server.url) as client:
                return await client.stream_chat(BODY), server.requests_seen

    outcome, seen = asyncio.run(scenario())
    assert not outcome.ok and "server closed the connection" in outcome.error
    assert outcome.extra == {"reconnected": True} and seen == 2


def test_complete_chat_also_survives_a_stale_connection():
    document = json.dumps({"choices": [{"message": {"content": "hi"},
                                        "finish_reason": "stop"}]}).encode()

    async def scenario():
        async with FakeOneShotKeepAliveServer(document) as server:
            async with ChatClient(server.url) as client:
                return [await client.complete_chat({"model": "m"}) for _ in range(3)]

    assert [completion.content for completion in asyncio.run(scenario())] == ["hi"] * 3


# --- byte-exact text: invalid UTF-8 is kept, never collapsed to U+FFFD ---

def raw_frame(delta: bytes, finish: bytes = b"null") -> bytes:
    return (b'data: {"choices": [{"index": 0, "delta": ' + delta +
            b', "finish_reason": ' + finish + b'}]}\n\n')


def test_invalid_utf8_bytes_reach_the_reply_exactly_and_stay_distinct():
    replies = []
    for byte in (b"\xff", b"\xfe"):
        raw = (raw_frame(b'{"content": "a' + byte + b'"}')
               + raw_frame(b'{"reasoning_content": "r' + byte + b'\xe4\xb8"}')
               + raw_frame(b'{}', b'"stop"') + b"data: [DONE]\n\n")
        reply = ok(stream(raw))
        assert reply.text.encode("utf-8", "surrogateescape") == b"a" + byte
        assert reply.reasoning.encode("utf-8", "surrogateescape") == b"r" + byte + b"\xe4\xb8"
        replies.append(reply)
    assert replies[0].text != replies[1].text


def test_invalid_utf8_in_tool_call_arguments_sent_as_a_json_object_is_kept():
    raw = (raw_frame(b'{"tool_calls": [{"index": 0, "id": "c1", "function": '
                     b'{"name": "f\xff", "arguments": {"k": "v\xfe"}}}]}', b'"tool_calls"')
           + b"data: [DONE]\n\n")
    (call,) = ok(stream(raw)).tool_calls
    assert call.name.encode("utf-8", "surrogateescape") == b"f\xff"
    assert call.arguments.encode("utf-8", "surrogateescape") == b'{"k":"v\xfe"}'


@pytest.mark.parametrize("raw_byte", [b"", b"\xff"])
def test_a_lone_surrogate_escape_is_invalid_json_with_or_without_raw_bytes(raw_byte):
    raw = raw_frame(b'{"content": "x' + raw_byte + b'\\udcff"}', b'"stop"')
    outcome = stream(raw)
    assert outcome.error is not None and outcome.error.startswith("invalid JSON in frame 1")


def test_an_error_line_shows_invalid_bytes_escaped():
    raw = b'data: {"choices": \xff oops\n\n'
    outcome = stream(raw)
    assert outcome.error is not None and "\\xff oops" in outcome.error
    outcome.error.encode("utf-8")  # valid text, storable anywhere
