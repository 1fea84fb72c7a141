"""`--html` on the suites' run commands writes the same page `benchwarden report` does."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from click.testing import CliRunner

from benchwarden.cli.main import cli
from benchwarden.core.store import open_store

SCRIPTED_AGENT = Path(__file__).resolve().parents[1] / "suites" / "arms" / "scripted_agent.py"


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, env={"COLUMNS": "200"})


def assert_self_contained_page(page: Path, run_id: str) -> str:
    markup = page.read_text(encoding="utf-8")
    assert markup.lstrip().lower().startswith("<!doctype html>")
    assert run_id in markup
    assert "<svg" in markup
    assert not re.search(r"""(src|href)\s*=\s*["']?https?://""", markup)
    return markup


def test_retrieval_run_writes_the_page_of_the_run(tmp_path):
    store, page = tmp_path / "s.sqlite", tmp_path / "out" / "retrieval.html"
    result = invoke("retrieval", "run", "--strategy", "substring", "--seeds", "1",
                    "--store", str(store), "--html", str(page))
    assert result.exit_code == 0, result.output
    with open_store(store) as opened:
        run_id = opened.latest_run("retrieval").run.run_id
    assert "composite" in assert_self_contained_page(page, run_id)


def test_arms_run_writes_the_page_with_the_trials(tmp_path):
    store, page = tmp_path / "s.sqlite", tmp_path / "arms.html"
    result = invoke("arms", "run", "--suite", "tracker", "--arm", "cli", "--task", "close-issue",
                    "--trials", "1", "--driver", "command",
                    "--command", f"{sys.executable} {SCRIPTED_AGENT} solve",
                    "--store", str(store), "--html", str(page))
    assert result.exit_code == 0, result.output
    with open_store(store) as opened:
        run_id = opened.latest_run("arms").run.run_id
    assert "close-issue" in assert_self_contained_page(page, run_id)


def test_a_folder_given_as_html_path_is_refused_before_anything_runs(tmp_path):
    store = tmp_path / "s.sqlite"
    result = invoke("retrieval", "run", "--strategy", "substring", "--seeds", "1",
                    "--store", str(store), "--html", str(tmp_path))
    assert result.exit_code == 2
    assert "'--html'" in result.output and "is a directory" in result.output
    assert not store.exists()


def test_contamination_run_writes_the_page_with_its_verdict(tmp_path):
    from tests.fakes import FakeOpenAIServer
    from tests.suites.contamination.helpers import contamination_args

    store, page = tmp_path / "s.sqlite", tmp_path / "contamination.html"
    with FakeOpenAIServer("leak") as server:
        result = invoke(*contamination_args(server.url, store, tmp_path / "r.json"),
                        "--html", str(page))
    assert result.exit_code == 1, result.output
    with open_store(store) as opened:
        run_id = opened.latest_run("contamination").run.run_id
    markup = assert_self_contained_page(page, run_id)
    assert "CONTAMINATED" in markup.upper() and "FAIL" in markup.upper()
