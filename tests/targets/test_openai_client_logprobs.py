"""Token logprobs in streamed chat replies: collected from `choices[0].logprobs.content`
as llama.cpp's server sends them, kept byte-exact, stored and restored exactly, and
absent (None, not an empty tuple) when the server sends none."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from benchwarden.targets.openai_client import _StreamState
from benchwarden.targets.replies import Candidate, RequestOutcome, Timings, TokenLogprob
from benchwarden.targets.sse import SSEEvent


def frame(delta: dict, logprobs: list | None = None, finish: str | None = None) -> SSEEvent:
    choice: dict = {"index": 0, "delta": delta, "finish_reason": finish}
    if logprobs is not None:
        choice["logprobs"] = {"content": logprobs}
    return SSEEvent(json.dumps({"choices": [choice]}))


def entry(token: str, raw: list[int], logprob: float, top: list[tuple[str, list[int], float]]):
    return {"id": 1, "token": token, "bytes": raw, "logprob": logprob,
            "top_logprobs": [{"id": 2, "token": t, "bytes": b, "logprob": lp} for t, b, lp in top]}


def reply_of(*events: SSEEvent):
    state = _StreamState()
    for event in events:
        state.take(event, 0.0)
    return state.reply()


def test_logprobs_are_collected_per_piece_with_their_candidates():
    reply = reply_of(
        frame({"role": "assistant", "content": None}),
        frame({"content": "I"}, [entry("I", [73], -2.28, [("I", [73], -2.28),
                                                         ("Hello", list(b"Hello"), -2.37)])]),
        frame({"content": "'m"}, [entry("'m", [39, 109], -0.15, [("'m", [39, 109], -0.15)])]),
        frame({}, finish="length"))
    assert reply.text == "I'm"
    assert reply.token_logprobs == (
        TokenLogprob("I", -2.28, (Candidate("I", -2.28), Candidate("Hello", -2.37))),
        TokenLogprob("'m", -0.15, (Candidate("'m", -0.15),)))


def test_a_token_that_splits_a_character_keeps_its_bytes():
    # llama.cpp sends such a token with an empty `token` string and its raw bytes
    reply = reply_of(frame({"content": "x"}, [entry("", [240, 159], -1.0,
                                                    [("", [240, 159], -1.0)])]))
    assert reply.token_logprobs is not None
    assert reply.token_logprobs[0].token.encode("utf-8", "surrogateescape") == b"\xf0\x9f"
    outcome = RequestOutcome(Timings(0.0), reply=reply)
    assert RequestOutcome.from_json_dict(json.loads(json.dumps(outcome.to_json_dict()))) == outcome


def test_a_reply_without_logprobs_has_none_and_keeps_its_stored_shape():
    reply = reply_of(frame({"content": "hi"}), frame({}, finish="stop"))
    assert reply.token_logprobs is None
    stored = RequestOutcome(Timings(0.0), reply=reply).to_json_dict()
    assert "token_logprobs" not in stored["reply"]
    assert RequestOutcome.from_json_dict(stored).reply == reply


def test_bytes_that_are_not_bytes_fall_back_to_the_token_string():
    reply = reply_of(frame({"content": "a"}, [entry("a", [300], -0.5, [])]))
    assert reply.token_logprobs == (TokenLogprob("a", -0.5, ()),)


@given(st.lists(st.tuples(st.binary(min_size=1, max_size=4),
                          st.floats(-50, 0, allow_nan=False)), min_size=1, max_size=8))
def test_stored_logprobs_round_trip_exactly(pieces):
    events = [frame({"content": "."}, [entry("?", list(raw), lp, [("?", list(raw), lp)])])
              for raw, lp in pieces]
    reply = reply_of(*events)
    assert reply.token_logprobs is not None
    assert [t.token.encode("utf-8", "surrogateescape") for t in reply.token_logprobs] \
        == [raw for raw, _ in pieces]
    outcome = RequestOutcome(Timings(0.0), reply=reply)
    assert RequestOutcome.from_json_dict(json.loads(json.dumps(outcome.to_json_dict()))) == outcome
