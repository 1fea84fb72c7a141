"""The real command line: `retrieval gen|run|compare` and `ladder challenge|show`.
Results are checked through the Python API (the store and the JSON reports)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchwarden.cli.main import cli
from benchwarden.core.store import open_store
from benchwarden.suites.retrieval.corpus import (
    CASES_PER_CATEGORY,
    CASES_PER_SEED,
    CATEGORIES,
    generate,
)
from benchwarden.suites.retrieval.report import build_report

FILES = Path(__file__).with_name("strategy_files")


def benchwarden(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the installed CLI in a child process, as a person would."""
    env = {**os.environ, "COLUMNS": "160"}
    return subprocess.run([sys.executable, "-m", "benchwarden", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300)


@pytest.mark.parametrize("strategy", ["substring", "fts5", "bm25", "dump"])
def test_each_builtin_runs_over_seeds_one_to_three(strategy, tmp_path):
    store_path, report_path = tmp_path / "store.sqlite", tmp_path / "report.json"
    done = benchwarden("retrieval", "run", "--strategy", strategy, "--seeds", "1-3",
                       "--store", str(store_path), "--json", str(report_path))
    assert done.returncode == 0, done.stderr
    for heading in ("per-category means", "composite and guards", "paraphrase agreement",
                    "cases it moved"):
        assert heading in done.stdout
    written = json.loads(report_path.read_text())
    assert written["bench_version"] == "3" and written["suite"] == "retrieval"
    assert [block["seed"] for block in written["seeds"]] == [1, 2, 3]
    with open_store(store_path) as store:
        assert len(store.records(run_id=written["run"]["id"])) == 3 * CASES_PER_SEED
        rebuilt = build_report(store, written["run"]["id"]).to_json()
    assert rebuilt["seeds"] == written["seeds"]
    summary = written["summary"]
    for name in ("composite", "composite_guarded"):
        assert summary[name]["n"] == 3 and summary[name]["se"] is not None
    for name in ("efficiency", "consistency", "canary", "canary_leak_rate"):
        assert summary["guards"][name]["mean"] is not None
    for block in written["seeds"]:
        means = [v for v in block["category_means"].values() if v is not None]
        assert block["composite"] == pytest.approx(sum(means) / len(means))
        guards = block["guards"]
        assert block["composite_guarded"] == pytest.approx(
            block["composite"] * guards["efficiency"] * guards["consistency"] * guards["canary"])
        assert set(guards["consistency_per_template"]) and guards["packs"] == 4 * CASES_PER_SEED
    if strategy == "dump":
        assert summary["guards"]["canary_tripped_seeds"] == 3
        assert summary["guards"]["efficiency"]["mean"] < 0.52
    else:
        assert summary["guards"]["canary_tripped_seeds"] == 0


def test_gen_prints_sessions_and_the_full_answer_key():
    runner = CliRunner()
    result = runner.invoke(cli, ["retrieval", "gen", "--seed", "4", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data == json.loads(json.dumps(generate(4).to_json_dict()))
    assert [case["category"] for case in data["cases"]] == [
        category for category in CATEGORIES for _ in range(CASES_PER_CATEGORY)]
    assert data["canary"]["value"]
    text = runner.invoke(cli, ["retrieval", "gen", "--seed", "4"], terminal_width=200)
    assert text.exit_code == 0 and "answer key" in text.output and "canary" in text.output


def test_compare_two_report_files_prints_the_paired_verdict(tmp_path):
    runner = CliRunner()
    paths = {}
    for name in ("bm25", "dump"):
        paths[name] = tmp_path / f"{name}.json"
        done = runner.invoke(cli, ["retrieval", "run", "--strategy", name, "--seeds", "1,2",
                                   "--store", str(tmp_path / "s.sqlite"), "--json",
                                   str(paths[name])])
        assert done.exit_code == 0, done.output
    decision_path = tmp_path / "decision.json"
    done = runner.invoke(cli, ["retrieval", "compare", "--champion", str(paths["bm25"]),
                               "--challenger", str(paths["dump"]), "--json", str(decision_path)],
                         terminal_width=160)
    assert done.exit_code == 0, done.output
    assert "mean_diff" in done.output and "band" in done.output
    decision = json.loads(decision_path.read_text())
    assert decision["seeds"] == [1, 2] and decision["dethroned"] is False
    assert decision["verdict"]["band"] >= 0.007


@pytest.mark.parametrize("legacy_version", ["1", "2"])
def test_compare_refuses_a_legacy_report_against_a_current_one(legacy_version, tmp_path):
    runner = CliRunner()
    current = tmp_path / "current.json"
    runner.invoke(cli, ["retrieval", "run", "--strategy", "substring", "--seeds", "1,2",
                        "--store", str(tmp_path / "s.sqlite"), "--json", str(current)])
    legacy = tmp_path / "legacy.json"
    legacy.write_text(json.dumps({"suite": "retrieval", "bench_version": legacy_version, "seeds": [
        {"seed": 1, "composite": 0.6, "category_means": {}},
        {"seed": 2, "composite": 0.7, "category_means": {}}]}))
    done = runner.invoke(cli, ["retrieval", "compare", "--champion", str(legacy),
                               "--challenger", str(current)])
    assert done.exit_code == 2
    assert f"bench_version {legacy_version} with bench_version 3" in done.output
    assert len(done.output.strip().splitlines()) == 1


def test_compare_refuses_reports_on_other_seeds(tmp_path):
    runner = CliRunner()
    paths = []
    for seeds in ("1,2", "2,3"):
        path = tmp_path / f"{seeds}.json"
        runner.invoke(cli, ["retrieval", "run", "--strategy", "fts5", "--seeds", seeds,
                            "--store", str(tmp_path / "s.sqlite"), "--json", str(path)])
        paths.append(path)
    done = runner.invoke(cli, ["retrieval", "compare", "--champion", str(paths[0]),
                               "--challenger", str(paths[1])])
    assert done.exit_code == 2 and "different seeds" in done.output


@pytest.mark.parametrize("seeds", ["3-1", "x", "1,1", "-2", ""])
def test_bad_seed_lists_are_one_line_errors(seeds, tmp_path):
    done = CliRunner().invoke(cli, ["retrieval", "run", "--strategy", "bm25", "--seeds", seeds,
                                    "--store", str(tmp_path / "s.sqlite")])
    assert done.exit_code == 2
    assert len(done.output.strip().splitlines()) == 1


def test_an_unknown_strategy_is_a_one_line_error(tmp_path):
    done = CliRunner().invoke(cli, ["retrieval", "run", "--strategy", "nope",
                                    "--store", str(tmp_path / "s.sqlite")])
    assert done.exit_code == 2 and "neither a built-in" in done.output


def test_a_failing_strategy_run_exits_one_and_keeps_the_reason(tmp_path):
    done = CliRunner().invoke(cli, [
        "retrieval", "run", "--strategy", f"{FILES / 'misbehaving.py'}:Crashes", "--sandbox",
        "--seeds", "1-2", "--store", str(tmp_path / "s.sqlite"),
        "--json", str(tmp_path / "r.json")], terminal_width=200)
    assert done.exit_code == 1
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["failure"]["kind"] == "crash"
    assert report["verdict"]["kind"] == "fail"


@pytest.mark.parametrize("flag", [[], ["--traceback"]])
def test_a_strategy_error_names_the_case_and_traceback_shows_file_and_line(tmp_path, flag):
    done = benchwarden("retrieval", "run", "--strategy", f"{FILES / 'misbehaving.py'}:RaisesInPack",
                       "--sandbox", "--seeds", "1", "--store", str(tmp_path / "s.sqlite"), *flag)
    assert done.returncode == 1, done.stderr
    out = " ".join((done.stdout + done.stderr).split())
    assert "KeyError" in out and "misbehaving.py:" in out
    assert "on case " in out  # the case it failed on, even without --traceback
    if flag:
        assert "Traceback (most recent call last)" in done.stderr
        assert "in helper" in done.stderr  # the strategy's own frames, with their lines
    else:
        assert "Traceback (most recent call last)" not in done.stderr


def test_isolation_needs_sandbox_and_a_missing_bwrap_is_a_one_line_error(tmp_path):
    runner = CliRunner()
    done = runner.invoke(cli, ["retrieval", "run", "--strategy", "substring", "--isolation", "none",
                               "--store", str(tmp_path / "s.sqlite")])
    assert done.exit_code == 2 and "add --sandbox" in done.output
    env = {**os.environ, "BENCHWARDEN_BWRAP": "", "PATH": str(tmp_path)}  # no bwrap on PATH
    for args in (["retrieval", "run", "--strategy", "substring", "--sandbox", "--seeds", "1"],
                 ["ladder", "challenge", "--challenger", "substring", "--ladder",
                  str(tmp_path / "ladder"), "--base", "x", "--date", "2026-11-30", "--seeds", "2"]):
        missing = subprocess.run([sys.executable, "-m", "benchwarden", *args,
                                  "--store", str(tmp_path / "s.sqlite")],
                                 capture_output=True, text=True, env=env, timeout=120)
        assert missing.returncode == 2, missing.stdout + missing.stderr
        assert len(missing.stderr.strip().splitlines()) == 1, missing.stderr
        assert "bubblewrap" in missing.stderr and "--isolation none" in missing.stderr
    assert not (tmp_path / "ladder" / "ledger.jsonl").exists()  # nothing ran, nothing decided


def test_isolation_none_runs_without_the_boundary_and_is_recorded(tmp_path):
    report_path = tmp_path / "r.json"
    done = benchwarden("retrieval", "run", "--strategy", f"{FILES / 'entity_first.py'}:EntityFirst",
                       "--sandbox", "--isolation", "none", "--seeds", "1",
                       "--store", str(tmp_path / "s.sqlite"), "--json", str(report_path))
    assert done.returncode == 0, done.stderr
    assert "WITHOUT a boundary" in done.stderr
    assert json.loads(report_path.read_text())["settings"]["isolation"] == "none"


def test_ladder_challenge_and_show_through_the_cli(tmp_path):
    ladder_dir = tmp_path / "ladder"
    done = benchwarden("ladder", "challenge", "--challenger",
                       f"{FILES / 'entity_first.py'}:EntityFirst", "--ladder", str(ladder_dir),
                       "--base", "c0ffee", "--date", "2026-11-30", "--seeds", "3")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "DETHRONED" in done.stdout
    held = benchwarden("ladder", "challenge", "--challenger",
                       f"{FILES / 'misbehaving.py'}:Crashes", "--ladder", str(ladder_dir),
                       "--base", "c0ffee", "--date", "2026-11-30", "--seeds", "3")
    assert held.returncode == 3, held.stdout + held.stderr
    assert "crashed" in " ".join((held.stdout + held.stderr).split())
    shown = benchwarden("ladder", "show", "--ladder", str(ladder_dir))
    assert shown.returncode == 0, shown.stderr
    assert "entity_first:EntityFirst" in shown.stdout and "chain intact" in shown.stdout
    assert "held (challenger failed)" in shown.stdout


def test_ladder_show_on_an_empty_folder_is_a_one_line_error(tmp_path):
    done = CliRunner().invoke(cli, ["ladder", "show", "--ladder", str(tmp_path)])
    assert done.exit_code == 2 and "no entries" in done.output


def test_run_resume_finishes_a_killed_run(tmp_path, monkeypatch):
    from benchwarden.suites.retrieval import driver

    store_path = tmp_path / "s.sqlite"
    real = driver.score_one_seed

    def dies_on_seed_two(task, on_case=None):
        if task.seed == 2:
            raise KeyboardInterrupt
        return real(task, on_case)

    monkeypatch.setattr(driver, "score_one_seed", dies_on_seed_two)
    with open_store(store_path) as store:
        with pytest.raises(KeyboardInterrupt):
            driver.run_strategy(store, driver.parse_strategy("bm25"), [1, 2, 3],
                                driver.RunSettings(), run_id="retrieval-cut-short")
    monkeypatch.setattr(driver, "score_one_seed", real)
    runner = CliRunner()
    done = runner.invoke(cli, ["retrieval", "run", "--resume", "retrieval-cut-short",
                               "--store", str(store_path), "--json", str(tmp_path / "r.json")])
    assert done.exit_code == 0, done.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert [block["seed"] for block in report["seeds"]] == [1, 2, 3]
    again = runner.invoke(cli, ["retrieval", "run", "--resume", "retrieval-cut-short",
                                "--store", str(store_path)])
    assert again.exit_code == 2 and "already ended" in again.output
