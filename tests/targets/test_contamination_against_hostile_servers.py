"""`benchwarden contamination` (the real CLI) against hostile servers on loopback: every
run ends in bounded time with the fault named, a small store and a failing verdict (or a
one-line exit 2 when the server cannot be listed), never a traceback."""

from __future__ import annotations

import dataclasses
import json

import msgspec
import pytest

from benchwarden.core.store import SQLiteStore
from benchwarden.targets.replies import RequestOutcome
from tests.fakes.hostile_servers import HostileServer, TricklingServer
from tests.suites.contamination.helpers import contamination_args, invoke


def run_against(tmp_path, server: HostileServer, *extra: str):
    store, report_path = tmp_path / "store.sqlite", tmp_path / "report.json"
    with server:
        result = invoke(contamination_args(server.url, store, report_path, *extra))
    report = json.loads(report_path.read_text()) if report_path.exists() else None
    return result, report, store


def stored_outcomes(store_path) -> list[tuple[int, RequestOutcome]]:
    """(payload size in bytes, outcome) of every record in the store."""
    with SQLiteStore(store_path) as store:
        return [(len(msgspec.json.encode(record.payload)),
                 RequestOutcome.from_json_dict(record.payload["outcome"]))
                for record in store.records(suite="contamination")]


def test_an_endless_stream_fails_every_request_at_the_chunk_cap(tmp_path):
    result, report, store = run_against(tmp_path, HostileServer("endless", limit_seconds=60))
    assert result.exit_code == 1, result.output
    assert report["verdict"]["kind"] == "fail"
    outcomes = stored_outcomes(store)
    assert len(outcomes) == 14
    for size, outcome in outcomes:
        assert outcome.error.startswith("server streamed ")
        assert "for max_tokens 64 (cap 320" in outcome.error
        assert size < 12_000 and "evidence" in outcome.extra


def test_a_100_mb_reply_leaves_evidence_not_the_flood_in_the_store(tmp_path):
    server = HostileServer("huge_reply", reply_bytes=100 * 1024 * 1024)
    result, report, store = run_against(tmp_path, server, "--max-reply-bytes", "1MiB",
                                        "--max-chunks-per-token", "1000000")
    assert result.exit_code == 1, result.output
    outcomes = stored_outcomes(store)
    assert outcomes and all(o.error.startswith("reply exceeded the 1 MiB cap (--max-reply-bytes)")
                            for _, o in outcomes)
    assert max(size for size, _ in outcomes) < 12_000
    assert store.stat().st_size < 2 * 1024 * 1024  # was 105 MB for one such reply
    assert report["run"]["config"]["max_reply_bytes"] == 1024 * 1024


def test_a_slowloris_ends_each_request_at_the_stall_timeout(tmp_path):
    server = HostileServer("slowloris", byte_interval=0.1, limit_seconds=60)
    result, report, store = run_against(tmp_path, server, "--stall-timeout", "0.5")
    assert result.exit_code == 1, result.output
    errors = {o.error.split(" stalled")[1] for _, o in stored_outcomes(store)}
    assert errors == {": no complete line for 0.5 s after 0 deltas (stall timeout, "
                      "--stall-timeout)"}


def test_a_slowloris_trickling_its_headers_ends_at_the_stall_timeout(tmp_path):
    server = TricklingServer(byte_interval=0.1, limit_seconds=60)
    result, report, store = run_against(tmp_path, server, "--stall-timeout", "0.5")
    assert result.exit_code == 1, result.output
    errors = {o.error.split(" stalled")[1] for _, o in stored_outcomes(store)}
    assert errors == {": no complete line for 0.5 s in the response headers (stall timeout, "
                      "--stall-timeout)"}


def test_429_honoured_within_the_bound_still_passes(tmp_path):
    server = HostileServer("overloaded", overloaded_requests=3, retry_after="0")
    result, report, store = run_against(tmp_path, server)
    assert result.exit_code == 0, result.output
    retried = [o for _, o in stored_outcomes(store) if o.extra.get("http_429_retries")]
    assert retried and all(o.ok for o in retried)


def test_429_beyond_the_bound_is_reported_as_overload(tmp_path):
    server = HostileServer("overloaded", overloaded_requests=10_000, retry_after="120")
    result, report, store = run_against(tmp_path, server, "--retry-429-max-wait", "10")
    assert result.exit_code == 1, result.output
    for _, outcome in stored_outcomes(store):
        assert outcome.error.startswith(
            "server overloaded: HTTP 429, Retry-After 120 s exceeds the 10 s bound")


@pytest.mark.parametrize("behaviour, message", [
    ("nested", "nested too deeply"),
    ("huge", "with a body over 8 MiB"),
    ("not_list", "not an OpenAI model list"),
])
def test_a_hostile_model_list_is_one_line_and_exit_2(tmp_path, behaviour, message):
    result, report, store = run_against(tmp_path, HostileServer(models=behaviour))
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "server unreachable" in lines[0] and message in lines[0]
    assert "Traceback" not in result.output and report is None


def test_invalid_bytes_that_differ_under_concurrency_fail_the_rungs(tmp_path):
    # \xff alone, \xfe under concurrency: once both became U+FFFD and compared equal.
    result, report, store = run_against(tmp_path, HostileServer("invalid_bytes"))
    assert result.exit_code == 1, result.output
    assert report["verdict"]["kind"] == "fail"
    texts = {o.reply.text.encode("utf-8", "surrogateescape").split(b"odd")[1][:1]
             for _, o in stored_outcomes(store) if o.ok}
    assert texts == {b"\xff", b"\xfe"}


@pytest.mark.parametrize("extra, message", [
    (["--max-reply-bytes", "lots"], "--max-reply-bytes expects a size like 16MiB"),
    (["--max-reply-bytes", "100"], "--max-reply-bytes must be at least 1 KiB"),
    (["--max-chunks-per-token", "0.5"], "--max-chunks-per-token must be at least 1"),
    (["--stall-timeout", "-1"], "--stall-timeout must be a number of seconds"),
    (["--retry-429-max-wait", "nan"], "--retry-429-max-wait must be a number of seconds"),
])
def test_bad_bound_values_are_one_line_usage_errors(tmp_path, extra, message):
    result = invoke(contamination_args("http://127.0.0.1:9", tmp_path / "s.sqlite", None,
                                       *extra))
    assert result.exit_code == 2 and message in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1


def test_the_bounds_are_stored_with_the_run_and_come_back_for_resume(tmp_path):
    from benchwarden.suites.contamination.driver import config_from_run

    result, report, store = run_against(
        tmp_path, HostileServer("clean"), "--max-reply-bytes", "2MiB", "--stall-timeout", "7",
        "--retry-429-max-wait", "3", "--max-chunks-per-token", "5")
    assert result.exit_code == 0, result.output
    with SQLiteStore(store) as opened:
        run = opened.latest_run("contamination").run
    assert config_from_run(run).client_bounds() == {
        "max_reply_bytes": 2 * 1024 * 1024, "max_chunks_per_token": 5.0,
        "stall_timeout": 7.0, "retry_429_max_wait": 3.0}
    # A run stored before the bounds existed resumes with the defaults.
    older = dataclasses.replace(run, config={
        key: value for key, value in run.config.items()
        if key not in ("max_reply_bytes", "max_chunks_per_token", "stall_timeout",
                       "retry_429_max_wait")})
    assert config_from_run(older).client_bounds() == {
        "max_reply_bytes": 16 * 1024 * 1024, "max_chunks_per_token": 4.0,
        "stall_timeout": 60.0, "retry_429_max_wait": 30.0}
