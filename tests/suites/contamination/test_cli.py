"""The `contamination` command end to end: the real CLI against `FakeOpenAIServer`.

Each fake behaviour must come out as the class and verdict it should, with the exit
code, and the JSON report must carry the documented keys.
"""

from __future__ import annotations

import json

import pytest

from benchwarden.core.store import SQLiteStore
from tests.fakes import FakeOpenAIServer
from tests.suites.contamination.helpers import contamination_args, invoke
from tests.targets.fakes import free_port_nobody_listens_on

RUNG_LEGS = ("c2", "c4")


def run_fake(tmp_path, behaviour: str, *extra: str, env=None):
    store, report_path = tmp_path / "store.sqlite", tmp_path / "report.json"
    with FakeOpenAIServer(behaviour) as server:
        result = invoke(contamination_args(server.url, store, report_path, *extra), env=env)
    report = json.loads(report_path.read_text()) if report_path.exists() else None
    return result, report, server


def cells_of(report, leg=None, klass=None):
    return [c for c in report["cells"]
            if (leg is None or c["leg"] == leg) and (klass is None or c["class"] == klass)]


def rung_cells(report):
    return [c for c in report["cells"] if c["leg"] in RUNG_LEGS]


def test_clean_server_passes_with_a_complete_report(tmp_path):
    result, report, server = run_fake(tmp_path, "clean")
    assert result.exit_code == 0, result.output
    assert "PASS" in result.output and "probe × leg" in result.output
    assert "peak in flight" in result.output
    for key in ("bench_version", "run", "verdict", "score", "cells", "rungs"):
        assert key in report
    run = report["run"]
    assert run["id"] and run["config"]["seed"] == 11 and run["package_version"]
    assert run["target"] == {"url": server.url, "model": "fake-model"}
    assert run["started_at"] <= run["ended_at"] and run["status"] == "completed"
    assert report["verdict"]["kind"] == "pass"
    score = report["score"]
    assert set(score) >= {"prompts", "rungs", "compared", "identical", "diverged",
                          "contaminated", "persistent", "alone_unstable", "unmeasured",
                          "foreign_canaries", "tokens_compared", "earliest_divergence"}
    assert (score["prompts"], score["rungs"], score["compared"]) == (2, 2, 6)
    assert score["identical"] == 6 and score["tokens_compared"] > 0
    assert {(c["probe"], c["leg"]) for c in report["cells"]} == {
        (p, leg) for p in (0, 1) for leg in ("c2", "c4", "post")}
    assert [(r["label"], r["concurrency"], r["repeat"]) for r in report["rungs"]] == [
        ("c2", 2, 1), ("c4", 4, 1)]
    assert all(r["peak_in_flight"] >= 2 and r["launch_skew_ms"] >= 0 for r in report["rungs"])
    body = report["request"]["bodies"][0]
    assert body["stream"] is True and body["temperature"] == 0 and body["max_tokens"] == 64
    assert body["stream_options"] == {"include_usage": True} and body["model"] == "fake-model"
    # prime 2 + ref_a 2 + ref_b 2 + c2 2 + c4 4 + post 2
    assert server.chat_requests == 14 and len(report["requests"]) == 14


@pytest.mark.parametrize("behaviour, leg_class, reason", [
    ("leak", "contaminated", "CONTAMINATED"),
    ("drift", "diverged", "diverged; earliest divergence at char"),
    ("truncated", "unmeasured", "rung c2: 2 of 2 requests failed: truncated stream ×2"),
    ("usage_mismatch", "diverged", "diverged"),
    ("serialising", "unmeasured", "rung c2 not concurrent: peak in flight 1"),
])
def test_faults_under_concurrency_fail_the_rungs_only(tmp_path, behaviour, leg_class, reason):
    result, report, _ = run_fake(tmp_path, behaviour)
    assert result.exit_code == 1, result.output
    assert report["verdict"]["kind"] == "fail" and reason in report["verdict"]["reason"]
    assert {c["class"] for c in rung_cells(report)} == {leg_class}
    assert {c["class"] for c in cells_of(report, "post")} == {"identical"}
    assert "FAIL" in result.output


def test_leak_names_the_other_probes_canary(tmp_path):
    result, report, _ = run_fake(tmp_path, "leak")
    canaries = [p["canary"] for p in report["probes"]]
    for cell in rung_cells(report):
        assert cell["foreign"] == canaries[1 - cell["probe"]]
    assert report["score"]["foreign_canaries"] == 4
    assert f"CONTAMINATED carrying {canaries[1]}" in result.output


def test_drift_is_localised_in_the_table(tmp_path):
    result, report, _ = run_fake(tmp_path, "drift")
    at = {c["at"] for c in rung_cells(report)}
    assert min(at) > len(report["probes"][0]["canary"])  # the canary line matched
    assert report["score"]["earliest_divergence"] == min(at)
    assert f"DIVERGED @ char {min(at)}" in result.output


def test_usage_mismatch_says_so(tmp_path):
    _, report, _ = run_fake(tmp_path, "usage_mismatch")
    assert all("identical stream but completion_tokens" in c["detail"] for c in rung_cells(report))


def test_serialising_server_shows_peak_one(tmp_path):
    result, report, server = run_fake(tmp_path, "serialising")
    assert server.peak_active == 1
    assert [r["peak_in_flight"] for r in report["rungs"]] == [1, 1]
    assert "rung c4 not concurrent: peak in flight 1" in report["verdict"]["reason"]
    assert "not concurrent" in result.output


def test_persistent_state_shows_in_the_post_check(tmp_path):
    result, report, _ = run_fake(tmp_path, "persistent")
    assert result.exit_code == 1
    assert {c["class"] for c in cells_of(report, "post")} == {"persistent"}
    assert {c["class"] for c in cells_of(report, "c2")} == {"identical"}
    assert "PERSISTENT" in report["verdict"]["reason"]


def test_unstable_alone_disqualifies_only_that_probe(tmp_path):
    result, report, _ = run_fake(tmp_path, "unstable")
    assert result.exit_code == 1
    assert cells_of(report, "ref") == [{
        "probe": 0, "leg": "ref", "repeat": 1, "class": "alone_unstable",
        # the fake sends no logprobs: the references' divergence cannot be classified
        "divergence": {"class": "unclassified", "threshold_nats": 0.5,
                       "reason": "no token logprobs in the reference (the server sent none "
                                 "or the run asked for none: --logprobs)"}}]
    assert {c["class"] for c in report["cells"] if c["probe"] == 1} == {"identical"}
    assert "not reproducible alone" in report["verdict"]["reason"]
    assert "alone-unstable" in result.output


def test_http_500_everywhere_is_nothing_measured(tmp_path):
    result, report, _ = run_fake(tmp_path, "http500")
    assert result.exit_code == 1
    assert report["verdict"]["reason"].startswith("nothing measured")
    assert report["score"]["compared"] == 0
    assert all(c["leg"] == "ref" and "HTTP 500" in c["why"] for c in report["cells"])
    assert "prime of probe 0 failed" in " ".join(report["warnings"])


def test_cancel_scenario_cuts_ballast_and_still_passes(tmp_path):
    result, report, _ = run_fake(tmp_path, "clean", "--scenario", "cancel")
    assert result.exit_code == 0, result.output
    ballast = [r for r in report["requests"] if r["task"].startswith("ballast")]
    cancelled = [r for r in ballast if r["status"] == "cancelled"]
    assert cancelled and len(cancelled) < len(ballast)
    assert all(r["cancel_after_deltas"] == 4 for r in cancelled)
    assert {r["requests_sent"] for r in report["rungs"]} == {4}
    assert {r["requests_failed"] for r in report["rungs"]} == {0}  # planned cuts are the plan


def test_distinct_prefix_prompts_differ_from_the_first_word(tmp_path):
    result, report, _ = run_fake(tmp_path, "clean", "--scenario", "distinct-prefix")
    assert result.exit_code == 0
    prompts = [b["messages"][0]["content"] for b in report["request"]["bodies"]]
    assert prompts[0].split()[0] != prompts[1].split()[0]


def test_repeat_reports_every_repetition(tmp_path):
    result, report, _ = run_fake(tmp_path, "clean", "--repeat", "2")
    assert result.exit_code == 0
    assert [(r["label"], r["repeat"]) for r in report["rungs"]] == [
        ("c2", 1), ("c4", 1), ("c2", 2), ("c4", 2)]
    assert len(cells_of(report, "c4")) == 4 and report["score"]["rungs"] == 4


def test_preset_and_extra_body_are_sent_and_recorded(tmp_path):
    _, report, _ = run_fake(tmp_path, "clean", "--preset", "llamacpp", "--extra-body",
                            '{"seed": 7, "top_k": 1}', "--model", "chosen", "--any-model")
    body = report["request"]["bodies"][1]
    assert body["repeat_penalty"] == 1.0 and body["seed"] == 7 and body["top_k"] == 1
    assert body["model"] == "chosen" and report["run"]["target"]["model"] == "chosen"


def test_api_key_is_sent_but_never_stored(tmp_path):
    secret = "sk-test-abcdefghijklmnop"
    result, report, server = run_fake(tmp_path, "clean", "--api-key-env", "BW_TEST_KEY",
                                      env={"BW_TEST_KEY": secret})
    assert result.exit_code == 0
    assert server.authorizations == {f"Bearer {secret}"}
    assert report["run"]["config"]["api_key_env"] == "BW_TEST_KEY"
    for path in tmp_path.iterdir():
        assert secret.encode() not in path.read_bytes(), path


def test_missing_key_variable_is_a_config_error(tmp_path):
    result = invoke(contamination_args("http://127.0.0.1:9", tmp_path / "s.sqlite", None,
                                       "--api-key-env", "BW_UNSET_KEY_VAR"),
                    env={"BW_UNSET_KEY_VAR": ""})
    assert result.exit_code == 2 and "BW_UNSET_KEY_VAR" in result.output


@pytest.mark.parametrize("extra, message", [
    (["--min-completion-tokens", "64"], "must be below --max-tokens 64"),
    (["--probes", "1"], "--probes must be between 2"),
    (["--concurrency", "1,4"], "between 2 and 512, not 1"),
    (["--concurrency", "2,513"], "not 513"),
    (["--concurrency", "2,x"], "comma-separated integers"),
    (["--extra-body", "{not json"], "--extra-body is not valid JSON"),
    (["--extra-body", "[1]"], "must be a JSON object"),
    (["--extra-body", '{"messages": []}'], "may not set messages"),
    (["--scenario", "sideways"], "unknown scenario 'sideways'; choose one of"),
    (["--preset", "mystery"], "unknown preset 'mystery'; choose one of"),
    (["--api-key-env", "sk-not-a-name!"], "NAME of an environment variable"),
])
def test_configuration_errors_exit_2_with_one_line(tmp_path, extra, message):
    with FakeOpenAIServer() as server:
        result = invoke(contamination_args(server.url, tmp_path / "s.sqlite", None, *extra))
        assert server.chat_requests == 0
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_unreachable_server_exits_2_and_records_nothing(tmp_path):
    store = tmp_path / "s.sqlite"
    url = f"http://127.0.0.1:{free_port_nobody_listens_on()}"
    result = invoke(contamination_args(url, store, None))
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "unreachable" in lines[0] and "connection refused" in lines[0]
    with SQLiteStore(store) as opened:
        assert opened.runs() == []


def test_url_is_required(tmp_path):
    result = invoke(["contamination", "--store", str(tmp_path / "s.sqlite")])
    assert result.exit_code == 2 and "--url is required" in result.output
