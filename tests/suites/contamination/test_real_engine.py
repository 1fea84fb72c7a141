"""The full contamination suite, through the CLI, against the real llama.cpp engine.

This asserts that the report is complete and self-consistent and that every rung really
ran requests together; it does not assert the verdict (that is a finding about the
engine, printed for the record).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchwarden.suites.contamination.scoring import exact_bytes
from benchwarden.targets.replies import RequestOutcome
from tests.conftest import running_real_engine

PROBES = 4
CONCURRENCY = (2, 4, 8)
CLASS_COUNTERS = ("identical", "diverged", "contaminated", "persistent", "alone_unstable",
                  "unmeasured")


@pytest.fixture(scope="module")
def real_engine(tmp_path_factory):
    with running_real_engine(tmp_path_factory, slots=4, context=8192) as engine:
        yield engine


def check_report_is_complete(report: dict) -> None:
    """Every probe × leg cell present, counters consistent with the cells, rungs listed."""
    score, cells, rungs = report["score"], report["cells"], report["rungs"]
    assert score["prompts"] == PROBES
    assert score["rungs"] == len(CONCURRENCY)
    assert [rung["concurrency"] for rung in rungs] == list(CONCURRENCY)
    measured_legs = [rung["label"] for rung in rungs] + ["post"]
    by_probe: dict[int, list[str]] = {}
    for cell in cells:
        by_probe.setdefault(cell["probe"], []).append(cell["leg"])
    assert sorted(by_probe) == list(range(PROBES))
    for probe, legs in by_probe.items():
        # a probe with a usable solo reference has one cell per rung and the post-check;
        # one without has a single `ref` cell saying why
        assert legs == ["ref"] or sorted(legs) == sorted(measured_legs), (probe, legs)
    assert sum(score[name] for name in CLASS_COUNTERS) == len(cells)
    assert score["compared"] == sum(1 for cell in cells if cell["leg"] != "ref")
    for name in CLASS_COUNTERS:
        assert score[name] == sum(1 for cell in cells if cell["class"].replace("-", "_") == name)
    assert report["verdict"]["kind"] in ("pass", "fail") and report["verdict"]["reason"]


@pytest.mark.engine
def test_full_suite_against_llama_server(real_engine, tmp_path, output_dir):
    report_path = output_dir / "contamination-llama-server.json"
    command = [sys.executable, "-m", "benchwarden", "contamination", "--url", real_engine.api_url,
               "--model", real_engine.model, "--probes", str(PROBES),
               "--concurrency", ",".join(map(str, CONCURRENCY)), "--max-tokens", "64",
               "--preset", "llamacpp", "--store", str(tmp_path / "store.sqlite"),
               "--json", str(report_path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "COLUMNS": "160"})
    print(result.stdout)
    print(result.stderr[-2000:])
    assert result.returncode in (0, 1), result.stderr
    report = json.loads(report_path.read_text())
    check_report_is_complete(report)
    assert result.returncode == (1 if report["verdict"]["kind"] == "fail" else 0)
    for rung in report["rungs"]:
        assert rung["peak_in_flight"] >= 2, rung
    check_logprobs_recorded(report)
    verdict = report["verdict"]
    print(f"VERDICT against llama-server -np 4: {verdict['kind']}: {verdict['reason']}")


def check_logprobs_recorded(report: dict) -> None:
    """The llamacpp preset asks for 5 top candidates per token: every reply carries one
    logprob entry per streamed piece, spelling its text, and every divergence is
    classified from them (never "no token logprobs")."""
    assert report["request"]["bodies"][0]["top_logprobs"] == 5
    replies = [RequestOutcome.from_json_dict(entry["outcome"]).reply
               for entry in report["requests"] if entry["status"] == "ok"]
    assert replies
    for reply in replies:
        assert reply is not None and reply.token_logprobs, reply
        spelled = b"".join(exact_bytes(entry.token) for entry in reply.token_logprobs)
        assert spelled == exact_bytes(reply.text)
        assert all(len(entry.top) == 5 for entry in reply.token_logprobs)
        assert all(entry.logprob <= 0 for entry in reply.token_logprobs)
    for cell in report["cells"]:
        point = cell.get("divergence")
        if point is None or "foreign" in point:
            continue
        assert "no token logprobs" not in point["reason"], cell
        print(f"divergence: probe {cell['probe']} {cell['leg']}: {point['class']} "
              f"margin {point.get('margin')}: {point['reason']}")
        if point["class"] == "near-tie":
            assert 0 <= point["margin"] < point["threshold_nats"]
            assert point["reference_top"]


# A seed whose shared-prefix probes flip near ties under batching on this engine and CPU:
# on freshly started servers, 4 runs of 4 failed with only near-tie divergences (margins
# 0.08-0.23 nats: " looks"/" is" in the post-check, " first"/" volcano" in c2 and c4,
# " to"/" move" in c4, c8 and the post-check), never the same cells twice.
FLIPPING_SEED = 1009902515


# Fresh servers a flipping run is tried on, at most: a run of this scenario showed no
# near-tie flip about once in four (which ties flip depends on how the requests of a rung
# happen to be batched), so three independent tries leave about one chance in sixty.
FLIPPING_ATTEMPTS = 3


def run_flipping_scenario(engine, store: str, report_path) -> tuple[
        subprocess.CompletedProcess, dict]:
    command = [sys.executable, "-m", "benchwarden", "contamination", "--url", engine.api_url,
               "--model", engine.model, "--probes", str(PROBES),
               "--concurrency", ",".join(map(str, CONCURRENCY)), "--repeat", "2",
               "--max-tokens", "64", "--preset", "llamacpp", "--seed", str(FLIPPING_SEED),
               "--store", store, "--json", str(report_path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900,
                            env={**os.environ, "COLUMNS": "200"})
    print(result.stdout)
    assert result.returncode in (0, 1), result.stderr
    return result, json.loads(report_path.read_text())


@pytest.mark.engine
def test_a_flipping_scenario_on_the_real_engine_shows_a_near_tie(tmp_path_factory, tmp_path,
                                                                output_dir):
    """The issue's "The blacksmith makes vs shapes", on the real engine: the run fails
    (zero tolerance) and its divergences are classified from real logprobs as near-tie
    flips, each with its margin under the threshold and the reference's candidates.
    Rungs run twice, so a flip has more than one chance to show; a run that shows none is
    tried again on another freshly started engine (an engine no other run has sent
    anything: which near ties flip depends on what the server's slots and prompt cache
    hold, and the evidence is for a fresh server), up to `FLIPPING_ATTEMPTS` runs. Every
    run's report must hold its logprobs; the first that flips is held to every assertion
    below."""
    report_path = output_dir / "contamination-llama-server-near-tie.json"
    verdicts = []
    for attempt in range(FLIPPING_ATTEMPTS):
        with running_real_engine(tmp_path_factory, slots=4, context=8192) as engine:
            result, report = run_flipping_scenario(
                engine, str(tmp_path / f"store-{attempt}.sqlite"), report_path)
        check_logprobs_recorded(report)
        near_ties = [cell for cell in report["cells"]
                     if cell.get("divergence", {}).get("class") == "near-tie"]
        if near_ties:
            break
        verdicts.append(report["verdict"]["reason"])
    assert near_ties, f"no near-tie flip in {FLIPPING_ATTEMPTS} runs: {verdicts}"
    assert result.returncode == 1 and report["verdict"]["kind"] == "fail"  # still zero tolerance
    assert report["score"]["near_tie"] == len(near_ties)
    assert "near-tie" in report["verdict"]["reason"]
    assert "near-tie" in result.stdout and "divergences (margin" in result.stdout
    print(f"VERDICT seed {FLIPPING_SEED} (run {attempt + 1}): {report['verdict']['reason']}")
