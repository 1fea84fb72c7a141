"""The credential rule and the scrubber, in memory (no store, no server)."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from benchwarden.core.errors import ConfigurationError
from benchwarden.core.records import Record, Run, RunEnd
from benchwarden.core.secrets import (
    MARKER,
    MIN_SECRET_LENGTH,
    Scrubber,
    credential_paths,
    is_credential_name,
    url_credential_problem,
)
from benchwarden.core.store import find_secrets

KEY = "sk-distinctive-0123456789abcdef"

secret_text = st.text(min_size=MIN_SECRET_LENGTH, max_size=40)
any_text = st.text(max_size=60)


# -- the scrubber ---------------------------------------------------------------------------
@given(secret=secret_text, before=any_text, after=any_text, copies=st.integers(1, 3))
@example(secret="d]zzzzzz", before="", after="zzzzzz", copies=1)  # marker + tail = secret
@example(secret="redacted", before="[", after="]", copies=2)  # the secret inside the marker
@example(secret="[redacted]", before="[redacted", after="]", copies=1)
def test_scrubbed_text_never_contains_the_secret(secret, before, after, copies):
    scrubber = Scrubber([secret])
    text = before + (secret + after) * copies
    assert secret not in scrubber.scrub(text)


@given(secrets=st.lists(secret_text, min_size=1, max_size=3), text=any_text,
       picks=st.lists(st.integers(0, 2), max_size=4))
def test_no_remembered_secret_survives_whatever_surrounds_it(secrets, text, picks):
    scrubber = Scrubber(secrets)
    mixed = text.join(secrets[i % len(secrets)] for i in picks) + text
    cleaned = scrubber.scrub(mixed)
    assert all(secret not in cleaned for secret in secrets)


@given(text=any_text)
def test_text_without_the_secret_is_unchanged(text):
    scrubber = Scrubber([KEY])
    if KEY not in text and "0123456789" not in text:
        assert scrubber.scrub(text) == text


@pytest.mark.parametrize("prefix", ["", "Basic ", "x", "xy", "user:"])
def test_base64_of_the_secret_is_scrubbed_at_every_alignment(prefix):
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        encoded = encode((prefix + KEY).encode()).decode()
        cleaned = Scrubber([KEY]).scrub(f"header was {encoded} end")
        assert MARKER in cleaned
        # what is left of the encoding is the prefix's characters and at most the two
        # characters at each edge that the key shares with its neighbours (and padding)
        leftover = cleaned[len("header was "):-len(" end")].replace(MARKER, "")
        assert len(leftover) <= -(-len(prefix) * 4 // 3) + 2 + 4, leftover


@pytest.mark.parametrize("form", [quote(KEY, safe=""), json.dumps(KEY)[1:-1],
                                  f"Bearer {KEY}", KEY])
def test_common_encodings_are_scrubbed(form):
    assert KEY not in Scrubber([KEY]).scrub(f"echo: {form}.")


def test_url_and_html_encoded_forms_of_an_awkward_key_are_scrubbed():
    key = 'k&y<"/+= :ey-12345'
    scrubber = Scrubber([key])
    for form in (quote(key, safe=""), "k&amp;y&lt;&quot;/+= :ey-12345", json.dumps(key)[1:-1]):
        assert form not in scrubber.scrub(f"[{form}]")


def test_a_key_too_short_to_scrub_is_refused():
    with pytest.raises(ConfigurationError, match="at least 8"):
        Scrubber(["abc"])


def test_values_nested_at_any_depth_are_scrubbed_keys_included():
    scrubber = Scrubber([KEY])
    value = {"a": [KEY, {"b": f"x{KEY}y", KEY: 1}], "n": 3, "t": (KEY,)}
    assert KEY not in json.dumps(scrubber.scrub_value(value), default=list)
    assert scrubber.scrub_value(value)["n"] == 3


def test_store_entries_are_scrubbed_by_the_process_scrubber(tmp_path):
    from benchwarden.core import secrets
    from benchwarden.core.store import SQLiteStore

    secrets.remember(KEY)
    try:
        path = tmp_path / "s.sqlite"
        run = Run(run_id="r1", suite="s", bench_version="1", config={"model": f"m-{KEY}"},
                  seeds=(), target={"url": "http://h"}, package_version="0", git_sha=None,
                  host={}, started_at=0.0)
        with SQLiteStore(path) as store:
            store.begin_run(run)
            store.append([Record(suite="s", scope="r1", arm="a", task="t", trial=1,
                                 run_id="r1", outcome="error", started_at=0, ended_at=0,
                                 payload={"error": f"401: bad header Bearer {KEY}"})])
            store.finish_run(RunEnd("r1", 1.0, "interrupted", {"why": KEY}))
            assert store.verify().ok
            assert store.records()[0].payload["error"] == f"401: bad header Bearer {MARKER}"
    finally:
        secrets.forget_all()
    for file in tmp_path.iterdir():
        assert KEY.encode() not in file.read_bytes(), file


# -- the rule for names and values ----------------------------------------------------------
@pytest.mark.parametrize("name", ["api_key", "apiKey", "access_token", "x-api-token", "token",
                                  "Authorization", "client_secret", "password", "passwd",
                                  "session_id", "cookie", "refresh-token", "X-Auth", "jwt",
                                  "private_key", "credentials"])
def test_credential_names(name):
    assert is_credential_name(name)


@pytest.mark.parametrize("name", ["max_tokens", "max_completion_tokens", "min_tokens", "top_k",
                                  "stop_token_ids", "skip_special_tokens", "seed", "top_p",
                                  "min_completion_tokens", "repeat_penalty", "author",
                                  "keep_alive", "n_keep", "prompt_cache_key", "keywords"])
def test_sampling_and_other_fields_that_only_collide(name):
    assert not is_credential_name(name)


@pytest.mark.parametrize("value", ["sk-abcdefghijkl", "sk-proj-abcdefghijklmnop",
                                   "Bearer abc.def.ghi", "Basic dXNlcjpwYXNz",
                                   "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln",
                                   "ghp_abcdefghijklmnopqrstuv", "hf_abcdefghijklmnop",
                                   "AKIAABCDEFGHIJKLMNOP"])
def test_credential_values_are_found_at_any_depth(value):
    assert credential_paths({"metadata": {"notes": [value]}}) == ["metadata.notes[0]"]


def test_the_name_of_a_variable_holding_a_key_is_not_a_secret_in_the_store():
    assert find_secrets({"api_key_env": "OPENAI_API_KEY", "max_tokens": 256}) == []
    assert find_secrets({"config": {"extra": {"access_token": "x"}}}) == ["config.extra.access_toke"
                                                                          "n"]


@pytest.mark.parametrize("url", ["http://user:sk-abc@host/v1", "http://user@host:8000",
                                 "https://:pw@host", "http://host/v1?api_key=abc",
                                 "http://host/v1?token=abc", "http://host/v1?x=sk-abcdefghijkl",
                                 "http://host/sk-abcdefghijklmnop/v1"])
def test_urls_carrying_credentials_are_refused(url):
    problem = url_credential_problem(url)
    assert problem and "--api-key-env" in problem and "\n" not in problem


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1", "https://api.example.com",
                                 "http://host/v1?model=x", "http://[::1]:9/v1"])
def test_plain_urls_pass(url):
    assert url_credential_problem(url) is None


def test_url_passwords_are_masked_for_display():
    from benchwarden.core.secrets import mask_url_passwords

    text = "runs in postgresql://bob:hunter2@h:5/db; target http://u:sk-1@x/v1; a@b"
    assert mask_url_passwords(text) == ("runs in postgresql://bob:***@h:5/db; "
                                        "target http://u:***@x/v1; a@b")


def test_the_store_backstop_reads_names_that_hold_no_string_as_the_programs_own():
    # arms stores {task id: tier}: a task called "rotate-api-key" is not a credential
    assert find_secrets({"task_tiers": {"rotate-api-key": 1, "auth-login": 2}}) == []
    assert find_secrets({"extra": {"auth": {"user": "me", "token": "abc"}}}) == ["extra.auth.token"]
    # a request field is refused for any value: a nested object may hold the credential
    assert credential_paths({"auth": {"user": "me"}}) == ["auth"]
