"""Stored outcomes: exact round trips through JSON, invalid UTF-8 included."""

from __future__ import annotations

import json

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.core.records import canonical_json
from benchwarden.targets.replies import (
    BYTES_KEY,
    Reply,
    RequestOutcome,
    Timings,
    ToolCall,
    escape_invalid_utf8,
)


def outcome_with(text: str, *, error: str | None = None) -> RequestOutcome:
    reply = Reply(reasoning=text[::-1], text=text, tool_calls=(ToolCall(text, text, text),),
                  finish_reason=text, completion_tokens=3, usage_reported=True)
    return RequestOutcome(timings=Timings(1.0, 2.0, 3.0, 4.0), reply=reply, error=error,
                          status=200, extra={"excerpt": text, "nested": [text, {"x": text}]})


def through_the_store(outcome: RequestOutcome) -> RequestOutcome:
    """Encoded as the store encodes a payload, read back as the report reads it."""
    stored = canonical_json({"outcome": outcome.to_json_dict()})
    stored.decode("utf-8")  # valid UTF-8 JSON, storable in PostgreSQL's jsonb too
    assert "\\ud" not in stored.decode().lower()  # no lone-surrogate escapes either
    return RequestOutcome.from_json_dict(msgspec.json.decode(stored)["outcome"])


@settings(max_examples=300)
@given(st.binary(max_size=64))
def test_any_server_bytes_round_trip_exactly(raw):
    text = raw.decode("utf-8", "surrogateescape")
    back = through_the_store(outcome_with(text))
    assert back == outcome_with(text)
    assert back.reply.text.encode("utf-8", "surrogateescape") == raw


@settings(max_examples=300)
@given(st.text(max_size=24))  # lone surrogates of every kind included
def test_any_string_round_trips_exactly(text):
    assert through_the_store(outcome_with(text)) == outcome_with(text)


def test_different_invalid_bytes_stay_different():
    ff, fe = (through_the_store(outcome_with(raw.decode("utf-8", "surrogateescape")))
              for raw in (b"a\xff", b"a\xfe"))
    assert ff.reply.text != fe.reply.text


def test_valid_text_is_stored_as_itself_and_invalid_bytes_as_their_base64():
    assert outcome_with("héllo 世界").to_json_dict()["reply"]["text"] == "héllo 世界"
    stored = outcome_with(b"ok\xff".decode("utf-8", "surrogateescape")).to_json_dict()
    assert stored["reply"]["text"] == {BYTES_KEY: "b2v/"}  # base64 of b"ok\xff"


def test_escape_for_display_shows_each_invalid_byte():
    assert escape_invalid_utf8("plain é") == "plain é"
    shown = escape_invalid_utf8(b"a\xff\xfeb".decode("utf-8", "surrogateescape"))
    assert shown == "a\\xff\\xfeb"
    assert escape_invalid_utf8("\ud83d") == "\\ud83d"
    json.dumps(shown, ensure_ascii=False).encode("utf-8")
