"""Output a CI log can read: at 80 columns with no terminal attached, no table cuts a
cell with "…", every run id `runs` lists is whole (and `show` takes it back), a
retrieval run's target is its strategy, and the runs say their ids.

Everything runs the real CLI in a child process (`python -m benchwarden`, stdout a
pipe, COLUMNS=80), as a CI job does."""

from __future__ import annotations

import pytest

from benchwarden.core.store import open_store
from tests.cli.test_store_commands import bw
from tests.core.test_report_numbers import _retrieval_run, write_arms_run
from tests.fakes import FakeOpenAIServer
from tests.suites.contamination.helpers import contamination_args

NARROW = {"COLUMNS": "80", "TERM": "dumb"}
ELLIPSIS = "…"


@pytest.fixture(scope="module")
def three_suites(tmp_path_factory):
    """A store with a contamination run (a real CLI run against a fake server), a
    retrieval run and an arms run (written through the store API)."""
    store = tmp_path_factory.mktemp("narrow") / "store.sqlite"
    with FakeOpenAIServer("clean") as server:
        made = bw(*contamination_args(server.url, store))
    assert made.returncode == 0, made.stderr
    with open_store(store) as opened:
        _retrieval_run(opened, "retrieval-20261130T120000Z-abcdef", "fts5-bm25", 0.6, dumps=False)
        write_arms_run(opened)
        run_ids = [info.run.run_id for info in opened.runs(None)]
    return store, run_ids


def test_runs_at_80_columns_shows_every_id_whole_and_each_one_shows(three_suites):
    store, run_ids = three_suites
    listed = bw("runs", "--store", str(store), env=NARROW)
    assert listed.returncode == 0, listed.stderr
    assert ELLIPSIS not in listed.stdout
    assert all(len(line) <= 80 for line in listed.stdout.splitlines()[1:])  # [0]: the path
    for run_id in run_ids:
        assert run_id in listed.stdout.split(), f"{run_id} is not whole in:\n{listed.stdout}"
    assert "fts5-bm25" in listed.stdout  # a retrieval run's target is its strategy
    for run_id in run_ids:  # what `runs` shows is what `show` takes
        shown = bw("show", run_id, "--store", str(store), env=NARROW)
        assert shown.returncode == 0, (run_id, shown.stderr)
        assert ELLIPSIS not in shown.stdout, shown.stdout


def test_runs_on_a_wide_screen_is_a_table_with_whole_ids(three_suites):
    store, run_ids = three_suites
    listed = bw("runs", "--store", str(store), env={"COLUMNS": "160"})
    assert "┃ run" in listed.stdout and ELLIPSIS not in listed.stdout
    assert all(run_id in listed.stdout for run_id in run_ids)


def test_arms_report_folds_rather_than_cuts_at_80_columns(three_suites):
    store, _ = three_suites
    report = bw("arms", "report", "--store", str(store), env=NARROW)
    assert report.returncode == 0, report.stderr
    assert ELLIPSIS not in report.stdout, report.stdout
    assert "samples" in report.stdout.replace("\n", "") or "sampl" in report.stdout


def test_a_retrieval_run_says_its_id_and_compare_says_both(tmp_path):
    store = tmp_path / "store.sqlite"
    ran = bw("retrieval", "run", "--strategy", "substring", "--seeds", "1-2", "--store",
             str(store), env=NARROW)
    assert ran.returncode == 0, ran.stderr
    with open_store(store) as opened:
        (only,) = [info.run.run_id for info in opened.runs(None)]
    assert f"run {only} recorded in {store}" in ran.stdout
    compared = bw("retrieval", "compare", "--champion", "substring", "--challenger", "fts5",
                  "--seeds", "1-2", "--store", str(store), env=NARROW)
    assert compared.returncode == 0, compared.stderr
    with open_store(store) as opened:
        new_ids = [info.run.run_id for info in opened.runs(None)][1:]
    assert len(new_ids) == 2
    for run_id in new_ids:
        assert run_id in compared.stdout
    assert ELLIPSIS not in ran.stdout + compared.stdout


def test_a_long_leg_prints_plain_progress_lines_without_a_terminal(tmp_path):
    store = tmp_path / "store.sqlite"
    with FakeOpenAIServer("clean") as server:
        args = [a for a in contamination_args(server.url, store) if a != "--no-progress"]
        ran = bw(*args, env=NARROW)
    assert ran.returncode == 0, ran.stderr
    lines = [line for line in ran.stderr.splitlines() if "requests" in line]
    assert lines, ran.stderr
    assert lines[-1].endswith("(100%)")
    assert all("━" not in line for line in lines)


def test_runs_past_the_table_bound_are_listed_as_lines_on_a_wide_screen_too(
        three_suites, monkeypatch):
    """Past `TABLE_MOST_RUNS` runs (rich measured every cell of a 50,000-row table before
    drawing one) the wide screen gets the plain lines: every run id whole, each run's
    status and count, no table."""
    from click.testing import CliRunner

    from benchwarden.cli import store as store_commands

    store, run_ids = three_suites
    monkeypatch.setattr(store_commands, "TABLE_MOST_RUNS", len(run_ids) - 1)
    listed = CliRunner().invoke(store_commands.runs, ["--store", str(store)],
                                env={"COLUMNS": "160"})
    assert listed.exit_code == 0, listed.output
    assert "┃" not in listed.output and ELLIPSIS not in listed.output
    lines = listed.output.splitlines()
    assert lines[0] == f"runs in {store}"
    for run_id in run_ids:
        assert any(line.startswith(f"{run_id}  ") and " records" in line for line in lines)
    monkeypatch.setattr(store_commands, "TABLE_MOST_RUNS", len(run_ids))
    tabled = CliRunner().invoke(store_commands.runs, ["--store", str(store)],
                                env={"COLUMNS": "160"})
    assert "┃ run" in tabled.output
