"""`benchwarden report`: a stored run, recomputed and written as one HTML page."""

from __future__ import annotations

import re

from click.testing import CliRunner

from benchwarden.cli.main import cli
from benchwarden.core.store import open_store
from benchwarden.suites.contamination.driver import ContaminationConfig, run_contamination
from tests.fakes.openai_server import FakeOpenAIServer


def _leaky_run(store_path) -> dict:
    with FakeOpenAIServer("leak") as server, open_store(store_path) as store:
        config = ContaminationConfig(url=server.url, concurrency=(2,), probes=2, max_tokens=64,
                                     seed=11)
        return run_contamination(config, store, progress=False).to_json()


def test_report_latest_writes_the_run_as_a_page(tmp_path) -> None:
    store = tmp_path / "store.sqlite"
    report = _leaky_run(store)
    out = tmp_path / "out" / "report.html"
    result = CliRunner().invoke(
        cli, ["report", "--latest", "--store", str(store), "--html", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert str(out) in result.output
    page = out.read_text(encoding="utf-8")
    assert report["verdict"]["kind"] == "fail"
    assert 'class="verdict verdict-fail"' in page
    assert "CONTAMINATED" in page
    # every classified cell has a grid square that opens its evidence
    targets = re.findall(r'<a class="cell-link" href="#([^"]+)"', page)
    assert len(targets) == len(report["cells"]) > 0
    assert all(f'id="{target}"' in page for target in targets)
    assert '<mark class="foreign">' in page
    assert page.count('class="chart timeline"') == len(report["rungs"])


def test_report_by_run_id_matches_latest(tmp_path) -> None:
    store = tmp_path / "store.sqlite"
    report = _leaky_run(store)
    first, second = tmp_path / "a.html", tmp_path / "b.html"
    runner = CliRunner()
    assert runner.invoke(cli, ["report", report["run"]["id"], "--store", str(store),
                               "--html", str(first)]).exit_code == 0
    assert runner.invoke(cli, ["report", "--latest", "--store", str(store),
                               "--html", str(second)]).exit_code == 0
    assert first.read_bytes() == second.read_bytes()


def test_report_needs_a_run(tmp_path) -> None:
    result = CliRunner().invoke(cli, ["report", "--store", str(tmp_path / "s.sqlite"),
                                      "--html", str(tmp_path / "r.html")])
    assert result.exit_code == 2
    assert "--latest" in result.output


def test_report_of_an_empty_store_is_a_one_line_error(tmp_path) -> None:
    missing = CliRunner().invoke(cli, ["report", "--latest", "--store", str(tmp_path / "s.sqlite"),
                                       "--html", str(tmp_path / "r.html")])
    assert missing.exit_code == 2
    assert "no store at" in missing.output
    assert not (tmp_path / "s.sqlite").exists()  # reading never creates a store
    open_store(tmp_path / "s.sqlite").close()
    result = CliRunner().invoke(cli, ["report", "--latest", "--store", str(tmp_path / "s.sqlite"),
                                      "--html", str(tmp_path / "r.html")])
    assert result.exit_code == 2
    assert "no runs" in result.output
    assert not (tmp_path / "r.html").exists()


def test_report_refuses_a_folder_as_output(tmp_path) -> None:
    store = tmp_path / "store.sqlite"
    _leaky_run(store)
    result = CliRunner().invoke(cli, ["report", "--latest", "--store", str(store),
                                      "--html", str(tmp_path)])
    assert result.exit_code == 2


def test_report_of_an_arms_run_carries_every_trial(tmp_path) -> None:
    from tests.suites.arms.test_html import sample_report as arms_sample

    expected = arms_sample(tmp_path)  # writes tmp_path/arms.sqlite
    out = tmp_path / "arms.html"
    result = CliRunner().invoke(cli, ["report", "arms-run-1", "--store", str(tmp_path / "arms.sqlit"
                                                                                        "e"),
                                      "--html", str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    assert len(re.findall(r'<details class="drill[^"]*" id="trial-', page)) == len(
        expected["trials"]
    )
    assert "<script>document.title" not in page

