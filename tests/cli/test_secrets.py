"""Credentials never reach the append-only store or any output (issue 8, section 3).

Through the real CLI (a child process, as a user runs it) against a loopback server that
echoes the Authorization header back in 401 bodies and in reply text.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchwarden.core.secrets import MARKER
from tests.fakes import FakeOpenAIServer
from tests.fakes.credential_echo_server import CredentialEchoServer

KEY = "sk-bw-DISTINCTIVE-7f3a9c2e41d8b6"
KEY_VARIABLE = "BW_SECRET_TEST_KEY"
SMALL_RUN = ["--probes", "2", "--concurrency", "2,4", "--max-tokens", "64", "--seed", "5",
             "--no-progress"]


def forbidden_forms() -> list[bytes]:
    """The key and the forms of it a server echoed (raw, inside base64 of its header)."""
    header_base64 = base64.b64encode(f"Bearer {KEY}".encode()).decode()
    return [KEY.encode(), KEY[3:-3].encode(), header_base64[12:-4].encode()]


def benchwarden(*args: str, env_extra: dict[str, str] | None = None,
                timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", KEY_VARIABLE: KEY, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "benchwarden", *args], capture_output=True,
                          text=True, env=env, timeout=timeout)


def assert_no_key(label: str, data: bytes | str) -> None:
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    for form in forbidden_forms():
        assert form not in raw, f"{label} holds {form!r}"


def parquet_text(path: Path) -> str:
    import pyarrow.parquet as parquet

    return json.dumps(parquet.read_table(path).to_pylist(), default=str)


def test_a_key_echoed_by_the_server_is_in_no_artefact_of_the_run(tmp_path):
    store = tmp_path / "store.sqlite"
    outputs: dict[str, str] = {}
    with CredentialEchoServer() as server:
        run = benchwarden("contamination", "--url", server.url, "--api-key-env", KEY_VARIABLE,
                          *SMALL_RUN, "--store", str(store), "--json", str(tmp_path / "r.json"),
                          "--html", str(tmp_path / "r.html"))
        assert server.authorizations == {f"Bearer {KEY}"}  # the key was really sent
    assert run.returncode in (0, 1), run.stderr
    outputs["run stdout"], outputs["run stderr"] = run.stdout, run.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    run_id = report["run"]["id"]

    for name, args in {
        "runs": ["runs", "--store", str(store)],
        "show": ["show", run_id, "--store", str(store), "--json", str(tmp_path / "shown.json")],
        "jsonl": ["export", "--store", str(store), "--out", str(tmp_path / "x.jsonl")],
        "csv": ["export", "--store", str(store), "--out", str(tmp_path / "x.csv")],
        "parquet": ["export", "--store", str(store), "--out", str(tmp_path / "x.parquet")],
        "report html": ["report", run_id, "--store", str(store), "--html",
                        str(tmp_path / "again.html")],
    }.items():
        done = benchwarden(*args)
        assert done.returncode in (0, 1), (name, done.stderr)
        outputs[f"{name} stdout"], outputs[f"{name} stderr"] = done.stdout, done.stderr

    for label, text in outputs.items():
        assert_no_key(label, text)
    files = sorted(path for path in tmp_path.rglob("*") if path.is_file())
    assert {"store.sqlite", "r.json", "r.html", "shown.json", "x.jsonl", "x.csv",
            "x.parquet"} <= {path.name for path in files}
    for path in files:
        assert_no_key(str(path), path.read_bytes())
    assert_no_key("parquet values", parquet_text(tmp_path / "x.parquet"))

    # the echo reached the records, as the marker (so the test could have failed)
    exported = (tmp_path / "x.jsonl").read_text()
    assert "invalid key: Bearer " + MARKER in exported
    assert f"you sent Bearer {MARKER}" in exported


def test_a_key_echoed_while_listing_models_is_not_printed(tmp_path):
    with CredentialEchoServer(models_401=True) as server:
        done = benchwarden("contamination", "--url", server.url, "--api-key-env", KEY_VARIABLE,
                           *SMALL_RUN, "--store", str(tmp_path / "s.sqlite"))
    assert done.returncode == 2, done.stderr
    assert "401" in done.stderr and MARKER in done.stderr
    assert_no_key("stderr", done.stderr + done.stdout)
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("command", [
    ["contamination", *SMALL_RUN],
    ["arms", "run", "--arm", "all", "--task", "all", "--driver", "openai", "--trials", "1"],
])
@pytest.mark.parametrize("userinfo", [f"user:{KEY}@", f"{KEY}@", "user:@"])
def test_a_url_with_user_or_key_is_refused_before_anything_is_sent(tmp_path, command, userinfo):
    store = tmp_path / "s.sqlite"
    with FakeOpenAIServer() as server:
        url = server.url.replace("http://", f"http://{userinfo}") + "/v1"
        done = benchwarden(*command, "--url", url, "--store", str(store))
        assert server.chat_requests == 0
    assert done.returncode == 2, done.stderr
    assert "--api-key-env" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert_no_key("output", done.stdout + done.stderr)
    assert not store.exists()


def test_a_key_in_a_url_query_is_refused(tmp_path):
    done = benchwarden("contamination", "--url", f"http://127.0.0.1:9/v1?api_key={KEY}",
                       *SMALL_RUN, "--store", str(tmp_path / "s.sqlite"))
    assert done.returncode == 2 and "api_key=..." in done.stderr
    assert_no_key("output", done.stdout + done.stderr)


@pytest.mark.parametrize("extra, field", [
    ({"access_token": "tok-123456789"}, "access_token"),
    ({"x-api-token": "tok-123456789"}, "x-api-token"),
    ({"metadata": {"Authorization": "whatever-it-is"}}, "metadata.Authorization"),
    ({"metadata": [{"session": "abc"}]}, "metadata[0].session"),
    ({"user": f"Bearer {KEY}"}, "user"),
    ({"notes": KEY}, "notes"),
])
def test_an_extra_body_field_that_looks_like_a_credential_is_refused(tmp_path, extra, field):
    store = tmp_path / "s.sqlite"
    with FakeOpenAIServer() as server:
        done = benchwarden("contamination", "--url", server.url, *SMALL_RUN,
                           "--extra-body", json.dumps(extra), "--store", str(store))
        assert server.chat_requests == 0
    assert done.returncode == 2, done.stderr
    assert f"--extra-body field {field} looks like a credential" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert_no_key("output", done.stdout + done.stderr)


def test_sampling_fields_that_collide_by_name_are_accepted(tmp_path):
    with FakeOpenAIServer() as server:
        done = benchwarden("contamination", "--url", server.url, *SMALL_RUN,
                           "--extra-body", '{"top_k": 1, "stop_token_ids": [2], '
                                           '"skip_special_tokens": true}',
                           "--store", str(tmp_path / "s.sqlite"))
        assert server.chat_requests > 0
    assert done.returncode == 0, done.stderr


def test_a_key_too_short_to_scrub_is_refused(tmp_path):
    with FakeOpenAIServer() as server:
        done = benchwarden("contamination", "--url", server.url, "--api-key-env", "BW_SHORT",
                           *SMALL_RUN, "--store", str(tmp_path / "s.sqlite"),
                           env_extra={"BW_SHORT": "abc"})
        assert server.chat_requests == 0
    assert done.returncode == 2 and "at least 8" in done.stderr


def test_the_arms_openai_driver_keeps_an_echoed_key_out_of_the_store_and_output(tmp_path):
    store = tmp_path / "arms.sqlite"
    with CredentialEchoServer() as server:
        done = benchwarden("arms", "run", "--arm", "all", "--task", "open-issue-count",
                           "--trials", "1", "--driver", "openai", "--url", server.url,
                           "--model", "fake-model", "--api-key-env", KEY_VARIABLE,
                           "--store", str(store), "--json", str(tmp_path / "arms.json"))
        assert server.authorizations == {f"Bearer {KEY}"}
    assert done.returncode in (0, 1), done.stderr
    assert_no_key("output", done.stdout + done.stderr)
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert_no_key(str(path), path.read_bytes())
    # the server's 401 echo reached the run's tally (its harness errors), scrubbed
    from benchwarden.core.store import SQLiteStore

    with SQLiteStore(store) as opened:
        (info,) = opened.runs()
    assert info.end is not None and f"Bearer {MARKER}" in json.dumps(dict(info.end.summary))


def test_the_terminal_streams_scrub_and_offer_no_way_around():
    import io

    from benchwarden.cli.main import ScrubbingStream
    from benchwarden.core import secrets

    underlying = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    stream = ScrubbingStream(underlying)
    secrets.remember(KEY)
    try:
        stream.write(f"401: Bearer {KEY}; store postgresql://bob:hunter2hunter2@db/x\n")
    finally:
        secrets.forget_all()
    stream.flush()
    written = underlying.buffer.getvalue().decode()
    assert written == f"401: Bearer {MARKER}; store postgresql://bob:***@db/x\n"
    assert not hasattr(stream, "buffer")  # click would write bytes past the scrubber


def test_a_model_name_that_looks_like_a_key_is_refused(tmp_path):
    with FakeOpenAIServer() as server:
        done = benchwarden("contamination", "--url", server.url, "--model", KEY, *SMALL_RUN,
                           "--store", str(tmp_path / "s.sqlite"))
        assert server.chat_requests == 0
    assert done.returncode == 2 and "--model looks like a credential" in done.stderr
    assert_no_key("output", done.stdout + done.stderr)
