"""The pure rules behind the client's bounds: Retry-After, the 429 decision, the chunk cap."""

from __future__ import annotations

import math
from email.utils import formatdate

from hypothesis import given
from hypothesis import strategies as st

from benchwarden.targets.openai_client import (
    CHUNK_ALLOWANCE,
    MAX_429_RETRIES,
    chunk_cap,
    overload_pause,
    retry_after_seconds,
    size_text,
)

NOW = 1_790_000_000.0


def test_retry_after_in_seconds_and_as_an_http_date():
    assert retry_after_seconds("120", NOW) == 120.0
    assert retry_after_seconds(" 0 ", NOW) == 0.0
    assert retry_after_seconds("1.5", NOW) == 1.5
    assert retry_after_seconds(formatdate(NOW + 90, usegmt=True), NOW) == 90.0
    assert retry_after_seconds(formatdate(NOW - 90, usegmt=True), NOW) == 0.0  # past: now


def test_unusable_retry_after_values_are_none():
    for value in (None, "", "soon", "-5", "1e9", "12 s", "Mon, 99 Foo 2026 00:00:00 GMT"):
        assert retry_after_seconds(value, NOW) is None, value


@given(st.text(max_size=40))
def test_retry_after_never_raises_and_is_never_negative(value):
    seconds = retry_after_seconds(value, NOW)
    assert seconds is None or (seconds >= 0 and math.isfinite(seconds))


def test_the_429_decision():
    assert overload_pause("2", waited=0, retries=0, bound=30, now_epoch=NOW) == 2.0
    assert overload_pause("0", waited=0, retries=0, bound=30, now_epoch=NOW) > 0  # no spin
    assert overload_pause("120", waited=0, retries=0, bound=30, now_epoch=NOW) == (
        "server overloaded: HTTP 429, Retry-After 120 s exceeds the 30 s bound "
        "(--retry-429-max-wait)")
    assert "after 29 s already waited" in overload_pause("2", waited=29, retries=5, bound=30,
                                                         now_epoch=NOW)
    assert "again after" in overload_pause("0", waited=0, retries=MAX_429_RETRIES, bound=30,
                                           now_epoch=NOW)
    assert overload_pause("1", waited=0, retries=0, bound=0, now_epoch=NOW).startswith(
        "server overloaded")  # a bound of 0 never retries


@given(st.one_of(st.none(), st.text(max_size=12), st.integers(0, 10**6).map(str)),
       st.floats(0, 100), st.integers(0, 40), st.floats(0, 100))
def test_the_waits_of_one_request_never_pass_the_bound(retry_after, waited, retries, bound):
    pause = overload_pause(retry_after, waited=waited, retries=retries, bound=bound,
                           now_epoch=NOW)
    if isinstance(pause, float):
        assert retries < MAX_429_RETRIES
        assert waited + retry_after_seconds(retry_after, NOW) <= bound
    else:
        assert pause.startswith("server overloaded: HTTP 429")


def test_the_chunk_cap_follows_the_token_limit_and_the_choices():
    assert chunk_cap({"max_tokens": 256}, 4.0) == (4 * 256 + CHUNK_ALLOWANCE, 256)
    assert chunk_cap({"max_completion_tokens": 100, "max_tokens": 5}, 4.0) == (464, 100)
    assert chunk_cap({"max_tokens": 10, "n": 3}, 4.0) == (4 * 30 + CHUNK_ALLOWANCE, 10)
    assert chunk_cap({"max_tokens": 10}, 1.5) == (15 + CHUNK_ALLOWANCE, 10)
    for body in ({}, {"max_tokens": None}, {"max_tokens": 0}, {"max_tokens": True},
                 {"max_tokens": "256"}, ["max_tokens"]):
        assert chunk_cap(body, 4.0) is None, body
    assert chunk_cap({"max_tokens": 256}, None) is None


@given(st.integers(1, 10**6), st.floats(1, 64), st.one_of(st.none(), st.integers(-2, 8)))
def test_a_real_server_at_one_chunk_per_token_is_always_under_the_cap(tokens, per_token, n):
    body = {"max_tokens": tokens, **({} if n is None else {"n": n})}
    cap, limit = chunk_cap(body, per_token)
    choices = n if n is not None and n >= 1 else 1
    # one chunk per token per choice, plus role, finish, usage and [DONE]
    assert tokens * choices + 4 <= cap and limit == tokens


def test_sizes_read_as_a_person_reads_them():
    assert size_text(16 * 1024 * 1024) == "16 MiB"
    assert size_text(256 * 1024) == "256 KiB"
    assert size_text(1024**3) == "1 GiB"
    assert size_text(1000) == "1,000 bytes"
