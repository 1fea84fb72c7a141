"""Every request-level failure is an error outcome with one actionable line, never a raise."""

from __future__ import annotations

import asyncio
import json

import pytest

from benchwarden.targets.openai_client import ChatClient
from benchwarden.targets.replies import ERROR_LIMIT, RequestOutcome

from .fakes import (
    answering,
    chunk,
    free_port_nobody_listens_on,
    sse_body,
    stalling,
    stream_outcome,
    streaming,
)

# Every test here runs on asyncio's loop and on uvloop (tests/targets/conftest.py).
pytestmark = pytest.mark.usefixtures("on_both_loops")

BODY = {"model": "fake-model", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


def outcome_from(handler, **client_options) -> RequestOutcome:
    return stream_outcome(handler, BODY, **client_options)


def failed(outcome: RequestOutcome) -> str:
    assert not outcome.ok and outcome.reply is None
    assert outcome.error is not None
    assert "\n" not in outcome.error and len(outcome.error) <= ERROR_LIMIT
    return outcome.error


def test_connection_refused():
    async def scenario():
        url = f"http://127.0.0.1:{free_port_nobody_listens_on()}"
        async with ChatClient(url) as client:
            return await client.stream_chat(BODY)

    outcome = asyncio.run(scenario())
    error = failed(outcome)
    assert "connection refused" in error and "is the server running?" in error
    assert outcome.status is None and outcome.timings.first_byte_at is None


@pytest.mark.parametrize("status, body, message", [
    (500, {"error": {"message": "CUDA out of memory", "type": "server_error", "code": 500}},
     "CUDA out of memory"),
    (400, {"object": "error", "message": "The model `x` does not exist.", "type": "NotFound"},
     "The model `x` does not exist."),
    (422, {"error": "Input validation error: `top_p` must be < 1", "error_type": "validation"},
     "Input validation error: `top_p` must be < 1"),
    (422, {"detail": [{"loc": ["body", "messages"], "msg": "field required"}]},
     "field required"),
])
def test_http_error_status_with_the_message_from_each_json_shape(status, body, message):
    error = failed(outcome_from(answering(status, json.dumps(body))))
    assert error.startswith(f"HTTP {status} from POST ")
    assert message in error


def test_http_error_with_a_plain_text_body_and_with_an_empty_one():
    error = failed(outcome_from(answering(404, "no such route\nsorry", "text/plain")))
    assert "HTTP 404" in error and "no such route sorry" in error
    assert "check the model name" in error
    assert "HTTP 503" in failed(outcome_from(answering(503, b"")))


def test_http_401_points_at_the_api_key():
    error = failed(outcome_from(answering(401, json.dumps({"error": {"message": "bad key"}}))))
    assert "bad key" in error and "API key" in error


def test_a_long_multi_line_server_message_is_squashed_to_one_line():
    body = json.dumps({"error": {"message": "Traceback:\n" + "  frame\n" * 500}})
    error = failed(outcome_from(answering(500, body)))
    assert error.endswith("…") and len(error) == ERROR_LIMIT


def test_in_band_error_object_mid_stream():
    raw = sse_body([chunk("a"), chunk("b"), {"error": {"message": "engine died",
                                                       "type": "InternalServerError"}}])
    error = failed(outcome_from(streaming(raw)))
    assert error.startswith("server error in stream after 2 deltas: engine died")


def test_in_band_tgi_string_error():
    raw = sse_body([chunk("a"), {"error": "Request failed during generation: OOM",
                                 "error_type": "generation"}])
    assert "Request failed during generation: OOM" in failed(outcome_from(streaming(raw)))


def test_event_error_frame():
    raw = sse_body([chunk("a")], done=False) + \
        b'event: error\ndata: {"message": "overloaded"}\n\n'
    error = failed(outcome_from(streaming(raw)))
    assert "server error in stream" in error and "overloaded" in error


def test_event_error_frame_without_data():
    error = failed(outcome_from(streaming(b"event: error\n\n")))
    assert "server error in stream after 0 deltas" in error


def test_old_llama_cpp_error_field_line():
    raw = sse_body([chunk("a")], done=False) + \
        b'error: {"code": 500, "message": "context shift is disabled", "type": "server_error"}\n\n'
    error = failed(outcome_from(streaming(raw)))
    assert "context shift is disabled" in error


def test_invalid_json_in_a_frame():
    raw = sse_body([chunk("a"), "data: {\"choices\": [\n\n"], done=False)
    error = failed(outcome_from(streaming(raw)))
    assert error.startswith("invalid JSON in frame 2 after 1 deltas")


def test_a_frame_that_is_json_but_not_a_chunk():
    error = failed(outcome_from(streaming(sse_body(['data: ["a", "list"]\n\n']))))
    assert "frame 1 is not a chat-completion chunk" in error


def test_a_stream_without_done_or_finish_reason():
    raw = sse_body([chunk(role="assistant"), chunk("a"), chunk("b")], done=False)
    error = failed(outcome_from(streaming(raw)))
    assert error == "stream ended without [DONE] or finish_reason after 2 deltas"


def test_an_empty_event_stream():
    error = failed(outcome_from(streaming(b"")))
    assert error == "stream ended without [DONE] or finish_reason after 0 deltas"


def test_a_stream_whose_last_line_is_cut_off():
    raw = sse_body([chunk("a")], done=False) + b'data: {"choices": [{"del'
    error = failed(outcome_from(streaming(raw)))
    assert "after 1 deltas" in error and "cut off" in error


def test_the_connection_dropped_mid_body():
    raw = sse_body([chunk("a"), chunk("b")], done=False)
    error = failed(outcome_from(streaming(raw, then="drop")))
    assert "closed the connection mid-reply after 2 deltas" in error


def test_a_stalled_stream_hits_the_request_timeout():
    raw = sse_body([chunk("a")], done=False)
    error = failed(outcome_from(streaming(raw, then="stall"), request_timeout=0.5,
                                stall_timeout=None))
    assert "timed out after 0.5 s (request timeout) after 1 deltas" in error


def test_a_server_that_never_answers_hits_the_request_timeout():
    outcome = outcome_from(stalling(), request_timeout=0.5)
    assert "timed out after 0.5 s" in failed(outcome)
    assert outcome.status is None


def test_the_stall_timeout_names_a_stalled_read():
    raw = sse_body([chunk("a")], done=False)
    error = failed(outcome_from(streaming(raw, then="stall"), request_timeout=60,
                                stall_timeout=0.3))
    assert "stalled: no complete line for 0.3 s after 1 deltas" in error
    assert "--stall-timeout" in error


def test_a_json_answer_instead_of_a_stream():
    body = json.dumps({"error": {"message": "streaming is not supported"}})
    error = failed(outcome_from(answering(200, body)))
    assert "instead of an event stream" in error and "streaming is not supported" in error


def test_a_failure_keeps_the_timings_of_what_was_received():
    raw = sse_body([chunk("a")], done=False)
    outcome = outcome_from(streaming(raw))
    failed(outcome)
    assert outcome.status == 200
    assert outcome.timings.first_content_at is not None
    assert outcome.timings.last_byte_at is not None


def test_using_the_client_outside_async_with_is_a_caller_bug():
    async def scenario():
        await ChatClient("http://127.0.0.1:1").stream_chat(BODY)

    with pytest.raises(RuntimeError, match="async with"):
        asyncio.run(scenario())


def test_cancelling_after_zero_deltas_is_a_caller_bug():
    async def scenario():
        async with ChatClient("http://127.0.0.1:1") as client:
            await client.stream_chat(BODY, cancel_after_deltas=0)

    with pytest.raises(ValueError, match="at least 1"):
        asyncio.run(scenario())
