"""Divergence classes, `--bisect` and `--repro` through the real CLI, against fault
servers (tests/fakes/divergence_servers.py) that flip a chosen token by a chosen margin,
leak a canary, refuse logprobs, or start diverging at a chosen concurrency."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from benchwarden.core import formatting as fmt
from benchwarden.suites.contamination.html import render_html
from tests.fakes.divergence_servers import LogprobServer, ThresholdServer
from tests.fakes.openai_server import FakeOpenAIServer
from tests.suites.contamination.helpers import contamination_args, invoke


def run(server, tmp_path, *extra: str):
    store, report_path = tmp_path / "store.sqlite", tmp_path / "report.json"
    args = contamination_args(server.url, store, report_path, *extra)
    if "--bisect" in extra and extra.count("--concurrency") == 0:
        at = args.index("--concurrency")  # the helper's default rungs: a bisect picks its own
        del args[at:at + 2]
    result = invoke(args)
    report = json.loads(report_path.read_text()) if report_path.exists() else None
    return result, report


def classified(report):
    return [c for c in report["cells"] if "divergence" in c]


def test_a_small_flip_is_a_near_tie_in_json_terminal_and_page(tmp_path):
    with LogprobServer("drift", flip_margin=0.2) as server:
        result, report = run(server, tmp_path, "--logprobs", "3")
    assert result.exit_code == 1, result.output  # still zero tolerance
    cells = classified(report)
    assert cells and {c["class"] for c in cells} == {"diverged"}
    for cell in cells:
        point = cell["divergence"]
        assert point["class"] == "near-tie"
        assert point["margin"] == pytest.approx(0.2)
        assert point["reply_token"] == "different " != point["reference_token"]
        assert point["reference_top"][1]["token"] == "different "
    assert report["score"]["near_tie"] == len(cells)
    assert report["request"]["bodies"][0]["top_logprobs"] == 3
    assert "near-tie" in report["verdict"]["reason"]
    assert "near-tie Δ0.200" in result.output
    page = render_html(report)
    assert 'id="divergences"' in page and "near-tie" in page
    # the page prints the report's margin through the shared formatter, not its own
    assert fmt.number(cells[0]["divergence"]["margin"], 3) in page


def test_a_large_flip_is_substantive(tmp_path):
    with LogprobServer("drift", flip_margin=2.0) as server:
        result, report = run(server, tmp_path, "--logprobs", "3")
    assert result.exit_code == 1
    assert {c["divergence"]["class"] for c in classified(report)} == {"substantive"}
    assert report["score"]["substantive"] == len(classified(report)) > 0


def test_the_threshold_is_configurable(tmp_path):
    with LogprobServer("drift", flip_margin=0.2) as server:
        result, report = run(server, tmp_path, "--logprobs", "3", "--near-tie-nats", "0.1")
    assert {c["divergence"]["class"] for c in classified(report)} == {"substantive"}
    assert {c["divergence"]["threshold_nats"] for c in classified(report)} == {0.1}


def test_a_leak_is_substantive_with_its_canary(tmp_path):
    with LogprobServer("leak", flip_margin=0.01) as server:
        result, report = run(server, tmp_path, "--logprobs", "3")
    assert result.exit_code == 1
    leaks = [c for c in report["cells"] if c["class"] == "contaminated"]
    assert leaks
    for cell in leaks:
        assert cell["divergence"]["class"] == "substantive"
        assert cell["divergence"]["foreign"] == cell["foreign"]
    assert "substantive" in result.output and "CONTAMINATED" in result.output


def test_a_server_that_refuses_logprobs_does_not_break_the_run(tmp_path):
    with LogprobServer("drift", refuse_logprobs=True) as server:
        result, report = run(server, tmp_path, "--logprobs", "5")
        refused = server.refused
    assert refused == 1  # the one check before the run, never a scored request
    assert result.exit_code == 1
    assert "logprobs" not in report["request"]["bodies"][0]
    assert any("refused them" in warning for warning in report["warnings"])
    assert report["run"]["config"]["logprobs"] == 0
    assert {c["divergence"]["class"] for c in classified(report)} == {"unclassified"}
    assert all(c["class"] != "unmeasured" for c in report["cells"])


def test_logprobs_default_follows_the_preset(tmp_path):
    with LogprobServer("clean") as server:
        result, report = run(server, tmp_path, "--preset", "llamacpp")
    assert result.exit_code == 0, result.output
    assert report["request"]["bodies"][0]["top_logprobs"] == 5
    (tmp_path / "none").mkdir()
    with LogprobServer("clean") as server:
        _, report = run(server, tmp_path / "none", "--preset", "none")
    assert "logprobs" not in report["request"]["bodies"][0]


@pytest.mark.parametrize("args, message", [
    (["--logprobs", "21"], "--logprobs must be between 0 (off) and 20"),
    (["--near-tie-nats", "-1"], "--near-tie-nats"),
    (["--bisect", "8-2"], "--bisect needs LO-HI"),
    (["--bisect", "two"], "--bisect expects a range like 2-16"),
    (["--bisect", "2-8", "--concurrency", "2,4"], "drop --concurrency"),
    (["--bisect", "2-8", "--repeat", "2"], "drop --repeat"),
])
def test_bad_divergence_options_are_one_line_usage_errors(tmp_path, args, message):
    with FakeOpenAIServer("clean") as server:
        result, _ = run(server, tmp_path, *args)
    assert result.exit_code == 2
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_bisect_finds_the_smallest_diverging_concurrency(tmp_path):
    with ThresholdServer(diverge_at=5, settle=0.1) as server:
        result, report = run(server, tmp_path, "--bisect", "2-8")
    assert result.exit_code == 1, result.output
    bisect = report["bisect"]
    assert bisect["smallest"] == 5 and bisect["finished"]
    assert [step["level"] for step in bisect["tried"]] == [8, 5, 3, 4]
    assert [step["diverged"] for step in bisect["tried"]] == [True, True, False, False]
    assert [rung["concurrency"] for rung in report["rungs"]] == [8, 5, 3, 4]  # each recorded
    assert "smallest diverging concurrency in 2-8: 5" in result.output
    assert "Bisect" in render_html(report)


def test_bisect_with_no_divergence_says_so(tmp_path):
    with FakeOpenAIServer("clean") as server:
        result, report = run(server, tmp_path, "--bisect", "2-6")
    assert result.exit_code == 0
    assert report["bisect"]["smallest"] is None
    assert [step["level"] for step in report["bisect"]["tried"]] == [6]
    assert "no probe diverged at concurrency 6" in report["bisect"]["reading"]


def run_script(folder, url):
    # a clean environment: the script must need nothing of benchwarden's
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-I", str(folder / "repro.py"), "--url", url],
                          capture_output=True, text=True, timeout=120, env=env,
                          cwd=folder)


def test_repro_replays_the_divergence_against_the_server(tmp_path):
    folder = tmp_path / "repro"
    with FakeOpenAIServer("drift", settle=0.1) as server:
        result, report = run(server, tmp_path, "--repro", str(folder))
        assert result.exit_code == 1
        assert f"replay written to {folder / 'repro.py'}" in result.output
        script = (folder / "repro.py").read_text()
        assert "benchwarden" not in script.split("PLAN = ")[0].replace(
            "benchwarden contamination finding", "")
        replay = run_script(folder, server.url)
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert "DIFFERS from the solo reply" in replay.stdout
    assert re.search(r"solo vs the run's reference +same", replay.stdout)
    assert "REPRODUCED in 1 of 1" in replay.stdout
    readme = (folder / "README.txt").read_text()
    assert report["run"]["id"] in readme and "seed:      11" in readme
    assert "diverged" in readme and "fake-model" in readme


def test_repro_against_a_clean_server_does_not_reproduce(tmp_path):
    folder = tmp_path / "repro"
    with FakeOpenAIServer("leak", settle=0.1) as server:
        run(server, tmp_path, "--repro", str(folder))
        leaking = run_script(folder, server.url)
    assert leaking.returncode == 1 and "foreign canary" in leaking.stdout
    with FakeOpenAIServer("clean") as clean:
        replay = run_script(folder, clean.url)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "not reproduced" in replay.stdout


def test_repro_of_a_stored_run_and_of_a_passing_run(tmp_path):
    with FakeOpenAIServer("drift", settle=0.1) as server:
        result, report = run(server, tmp_path)
    folder = tmp_path / "later"
    again = invoke(["contamination", "--store", str(tmp_path / "store.sqlite"),
                    "--repro-of", report["run"]["id"], "--repro", str(folder)])
    assert again.exit_code == 0, again.output
    assert (folder / "repro.py").exists() and (folder / "README.txt").exists()
    (tmp_path / "clean").mkdir()
    with FakeOpenAIServer("clean") as server:
        result, _ = run(server, tmp_path / "clean", "--repro", str(tmp_path / "none"))
    assert result.exit_code == 0
    assert "no failing probe to replay" in result.output
    assert not (tmp_path / "none" / "repro.py").exists()


def test_a_killed_bisect_resumes_where_it_stopped(tmp_path):
    """Killed after its second rung, a bisect resumed with --resume runs only the rungs
    still to decide, chosen from the stored ones, and finds the same level."""
    from benchwarden.core.errors import RunInterrupted
    from benchwarden.suites.contamination.driver import ContaminationConfig, run_contamination
    from tests.suites.contamination.test_resume import KilledStore

    path = tmp_path / "store.sqlite"
    with ThresholdServer(diverge_at=5, settle=0.1) as server:
        # appends: 6 solo records (2 probes × prime, ref_a, ref_b), then c8, c5, c3, ...
        killed = KilledStore(path, 6 + 3)
        with pytest.raises(RunInterrupted):
            run_contamination(ContaminationConfig(url=server.url, probes=2, max_tokens=64,
                                                  seed=11, bisect=(2, 8)), killed,
                              progress=False)
        run_id = killed.runs()[0].run.run_id
        killed.close()
        sent = server.chat_requests
        result = invoke(["contamination", "--resume", run_id, "--store", str(path),
                         "--json", str(tmp_path / "resumed.json"), "--no-progress"])
        resent = server.chat_requests - sent
    assert result.exit_code == 1, result.output
    report = json.loads((tmp_path / "resumed.json").read_text())
    assert report["bisect"]["smallest"] == 5
    assert [step["level"] for step in report["bisect"]["tried"]] == [8, 5, 3, 4]
    assert resent == 3 + 4 + 2  # rungs c3 and c4, then the post-check
