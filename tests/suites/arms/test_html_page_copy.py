"""What an arms page embeds of a report that outgrows it (`html.page_copy`): the lists
that grow with the suite's tasks and the store's runs are cut to what the page draws,
the page says how many there are and which command writes them all, and a report
within every bound is embedded whole."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchwarden.suites.arms import html as arms_html
from benchwarden.suites.arms.report import ArmsReport
from tests.core.test_html_long_names import renamed
from tests.core.test_report_numbers import assert_page_matches_json
from tests.suites.arms.test_html import ARMS, _wide, sample_report


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict[str, Any]:
    return sample_report(tmp_path_factory.mktemp("arms"))


def _embedded(page: str) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page,
                      re.S)
    assert found is not None
    return json.loads(found.group(1))


def _wider(report: dict[str, Any], tasks: int, runs: int = 1) -> dict[str, Any]:
    """`_wide`, with `runs` run ids, every comparison pairing every task, and the run's
    configuration listing every task."""
    wide = _wide(report, tasks)
    names = wide["tasks"]
    wide["runs"] = [f"arms-run-{number}" for number in range(1, runs + 1)]
    for comparison in wide["comparisons"]:
        comparison["tasks"] = list(names)
        comparison["only_a"] = names[: tasks // 2]
    wide["run"]["config"]["tasks"] = list(names)
    return wide


def test_a_report_within_every_bound_is_embedded_whole(report) -> None:
    typed = ArmsReport.from_json(report)
    assert arms_html.page_copy(typed) is typed
    assert _embedded(arms_html.render_html(typed)) == json.loads(json.dumps(typed.to_json()))


def test_a_wide_suite_s_page_embeds_what_it_draws_and_counts_the_rest(report) -> None:
    tasks, runs = 4 * arms_html.COVERAGE_CELLS_DRAWN, 3 * arms_html.RUNS_EMBEDDED
    whole = ArmsReport.from_json(_wider(report, tasks, runs))
    page = arms_html.render_html(whole)
    embedded = _embedded(page)
    cut = embedded["page_cut"]
    drawn = arms_html.COVERAGE_CELLS_DRAWN // len(ARMS)
    assert cut["tasks"] == tasks and len(embedded["tasks"]) == drawn
    for arm in ARMS:
        assert set(embedded["coverage"][arm]["samples"]) <= set(embedded["tasks"])
        # the arm's coverage counts are the whole suite's
        assert embedded["coverage"][arm]["cells"] == whole.coverage[arm].cells
    assert f"wide-task-{tasks - 3:05d}" in embedded["tasks"]  # the short cell is drawn
    assert cut["tally_cells"] == cut["runs_tally_cells"] == tasks * len(ARMS)
    assert len(embedded["runs_tally"]["cells"]) == arms_html.TALLY_ROWS_SHOWN
    assert any(cell["invalid"] for cell in embedded["runs_tally"]["cells"])
    assert cut["runs"] == runs and embedded["runs"] == whole.runs[-arms_html.RUNS_EMBEDDED:]
    assert cut["comparison_tasks"] == [[tasks, tasks // 2, 0]] * len(whole.comparisons)
    for comparison in embedded["comparisons"]:
        assert len(comparison["tasks"]) == arms_html.COMPARISON_TASKS_EMBEDDED
    assert cut["run_config_keys"] == ["tasks"] and "tasks" not in embedded["run"]["config"]
    assert embedded["run"]["config"]["scope"] == whole.run.config["scope"]
    assert cut["command"] == (f"benchwarden show {whole.run.id} --json FILE "
                              "(with this page's --store)")
    # what the page says of them
    assert f"Drawing {drawn:,} of {tasks:,} tasks" in page
    assert f"Showing {arms_html.TALLY_ROWS_SHOWN:,} of {tasks * len(ARMS):,} cells" in page
    assert f"Tally of all {runs:,} runs" in page
    assert page.count("writes all of it") == 2 and "benchwarden show arms-run-1 --json" in page
    paired = page[page.index('id="paired"'):page.index('id="trials"')]
    assert f"<td class=\"num\">{tasks:,}</td>" in paired or f">{tasks:,}<" in paired
    # every number on the page is one of the embedded copy's
    assert_page_matches_json(page, arms_html.page_copy(whole))


def test_the_page_does_not_grow_with_the_suite_or_the_runs(report) -> None:
    fitting = arms_html.COVERAGE_CELLS_DRAWN // len(ARMS)
    sizes = [len(arms_html.render_html(ArmsReport.from_json(
        _wider(report, tasks, runs))).encode())
        for tasks, runs in ((2 * fitting, 2 * arms_html.RUNS_EMBEDDED),
                            (40 * fitting, 50 * arms_html.RUNS_EMBEDDED))]
    assert sizes[1] <= sizes[0] * 1.02


def test_cutting_a_copy_again_changes_nothing(report) -> None:
    copy = arms_html.page_copy(ArmsReport.from_json(_wider(report, 3_000, 500)))
    assert copy.page_cut is not None
    assert arms_html.page_copy(copy) is copy
    again = ArmsReport.from_json(json.loads(json.dumps(copy.to_json())))
    assert arms_html.render_html(again) == arms_html.render_html(copy)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tasks=st.integers(min_value=5, max_value=40), runs=st.integers(min_value=0, max_value=12),
       config_bytes=st.integers(min_value=2, max_value=400))
def test_the_copy_holds_every_list_within_its_bound_and_counts_what_it_cut(
        report, monkeypatch, tasks, runs, config_bytes) -> None:
    monkeypatch.setattr(arms_html, "COVERAGE_CELLS_DRAWN", 30)
    monkeypatch.setattr(arms_html, "TALLY_ROWS_SHOWN", 12)
    monkeypatch.setattr(arms_html, "RUNS_EMBEDDED", 5)
    monkeypatch.setattr(arms_html, "COMPARISON_TASKS_EMBEDDED", 7)
    monkeypatch.setattr(arms_html, "CONFIG_VALUE_EMBEDDED_BYTES", config_bytes)
    whole = ArmsReport.from_json(_wider(report, tasks, runs))
    copy = arms_html.page_copy(whole)
    cut = copy.page_cut
    large = [key for key, value in whole.run.config.items()
             if len(json.dumps(value)) > config_bytes]
    over = (tasks > 10, tasks * len(ARMS) > 12, runs > 5, tasks > 7, bool(large))
    if not any(over):
        assert copy is whole
        return
    assert cut is not None
    assert (cut.tasks == tasks) == over[0] and (cut.tasks is None) == (not over[0])
    assert len(copy.tasks) <= 10
    assert cut.tally_cells == (tasks * len(ARMS) if over[1] else None)
    assert len(copy.tally.cells) <= 12 and len(copy.runs_tally.cells) <= 12
    assert cut.runs == (runs if over[2] else None) and copy.runs == whole.runs[-5:]
    assert (cut.comparison_tasks is not None) == over[3]
    assert all(len(c.tasks) <= 7 and c.tasks == whole.comparisons[0].tasks[:7]
               for c in copy.comparisons)
    assert (cut.run_config_keys or []) == large
    assert set(copy.run.config) == set(whole.run.config) - set(large)
    # nothing else moves
    for name in ("headline", "per_tier", "per_component", "failure_tags", "samples", "trials",
                 "verdict", "arms", "tiers", "floor", "weights"):
        assert getattr(copy, name) == getattr(whole, name)
    assert arms_html.page_copy(copy) == copy


def test_the_whole_report_command_quotes_the_run_and_the_suite(report) -> None:
    wide = _wider(report, 4 * arms_html.COVERAGE_CELLS_DRAWN)
    wide["run"]["id"] = "run one; rm -rf x"
    cut = arms_html.page_copy(ArmsReport.from_json(wide)).page_cut
    assert cut is not None
    assert cut.command.startswith("benchwarden show 'run one; rm -rf x' --json FILE")
    del wide["run"]
    wide["scope"] = "my suite"
    cut = arms_html.page_copy(ArmsReport.from_json(wide)).page_cut
    assert cut is not None
    assert cut.command.startswith("benchwarden arms report --suite 'my suite' --json FILE")


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tasks=st.integers(min_value=5, max_value=60), name_length=st.integers(1, 252),
       budget=st.integers(min_value=0, max_value=20_000))
def test_the_comparisons_task_names_embedded_stay_within_their_characters(
        report, monkeypatch, tasks, name_length, budget) -> None:
    """Many comparisons, or long task names: the copy keeps the same number of first
    tasks of every comparison's lists, the most whose names fit the budget in all, and
    counts every list."""
    monkeypatch.setattr(arms_html, "COMPARISON_TASK_CHARACTERS_EMBEDDED", budget)
    wide = _wider(report, tasks)
    names = [f"{number:04d}" + "n" * name_length for number in range(tasks)]
    for comparison in wide["comparisons"]:
        comparison["tasks"], comparison["only_a"], comparison["only_b"] = \
            list(names), names[: tasks // 2], names[tasks // 3:]
    whole = ArmsReport.from_json(wide)
    copy = arms_html.page_copy(whole)
    lists = [(c.tasks, c.only_a, c.only_b) for c in whole.comparisons]
    kept = [(c.tasks, c.only_a, c.only_b) for c in copy.comparisons]

    def characters(held: list[tuple[list[str], ...]]) -> int:
        return sum(len(name) for three in held for listed in three for name in listed)

    if characters(lists) <= budget:
        assert kept == lists
        return
    assert characters(kept) <= budget
    count = max(len(listed) for three in kept for listed in three)
    # the same first tasks of every list, and one more each would not have fitted
    assert kept == [tuple(listed[:count] for listed in three) for three in lists]
    assert characters([tuple(listed[:count + 1] for listed in three) for three in lists]) > budget
    assert copy.page_cut is not None and copy.page_cut.comparison_tasks == [
        (len(c.tasks), len(c.only_a), len(c.only_b)) for c in whole.comparisons]
    assert arms_html.page_copy(copy) == copy


def _named(report: dict[str, Any], length: int, *, run_id: bool = False) -> tuple[
        dict[str, Any], dict[str, str]]:
    """The report as a store written by another tool could hold it: every arm, task,
    tier, the suite, the model and the driver (and the run id, if asked) named with
    `length` characters, all sharing the same start, so only their ends tell them apart."""
    plain = [*report["arms"], *report["tasks"], *report["tiers"], report["scope"],
             "smollm2", "openai-tools", *(["arms-run-1"] if run_id else [])]
    names = {name: ("x" * length + "-" + name)[-length:] for name in plain}
    assert len(set(names.values())) == len(names)
    return renamed(report, names), names


def test_a_store_s_long_names_are_clipped_on_the_page_each_still_one_name(report) -> None:
    """Names of 20,000 characters make a page no larger than names at the limit do: every
    one is clipped wherever the page draws or embeds it, and stays distinct."""
    from benchwarden.core import html as core_html

    limit = core_html.NAME_LIMIT
    at_limit, _ = _named(report, limit)
    long, names = _named(report, 20_000)
    page_at_limit = arms_html.render_html(ArmsReport.from_json(at_limit))
    page = arms_html.render_html(ArmsReport.from_json(long))
    assert len(page.encode()) <= len(page_at_limit.encode()) + 2_000
    for name in names.values():
        assert name[:limit] not in page
    embedded = _embedded(page)
    assert embedded["page_cut"]["names"] == len(names)
    assert "names longer than 256 characters are clipped on this page" in page
    # each is still its own name: every task of every arm's coverage, every tier's rows
    assert all(len(row["samples"]) == len(report["tasks"]) for row in embedded["coverage"].values())
    assert len({row["tier"] for row in embedded["per_tier"]}) == len(report["tiers"])
    assert len(embedded["tasks"]) == len(set(embedded["tasks"])) == len(report["tasks"])
    assert {trial["task"] for trial in embedded["trials"]} == set(embedded["tasks"])
    # the commands stay whole: they must run
    assert embedded["export_command"] == report["export_command"]
    assert embedded["page_cut"]["command"].startswith("benchwarden show arms-run-1 --json")
    # every number on the page is one of the embedded copy's, and the copy is stable
    whole = ArmsReport.from_json(long)
    copy = arms_html.page_copy(whole)
    assert_page_matches_json(page, copy)
    assert arms_html.page_copy(copy) == copy
    again = ArmsReport.from_json(json.loads(json.dumps(copy.to_json())))
    assert arms_html.render_html(again) == page
    # the report itself keeps every name whole
    assert set(whole.tasks) == {names[task] for task in report["tasks"]}


def test_a_long_run_id_is_clipped_but_whole_in_the_commands(report) -> None:
    from benchwarden.core import html as core_html

    long, names = _named(report, 20_000, run_id=True)
    run_id = names["arms-run-1"]
    page = arms_html.render_html(ArmsReport.from_json(long))
    commands = page.count(f"benchwarden show {run_id} --json FILE")
    # whole only in the commands (the note's, and its copy in the embedded JSON)
    assert commands == 2 and page.count(run_id) == commands
    embedded = _embedded(page)
    assert embedded["page_cut"]["command"] == f"benchwarden show {run_id} --json FILE " \
        "(with this page's --store)"
    assert len(embedded["run"]["id"]) <= core_html.NAME_LIMIT
    assert all(len(trial["run_id"]) <= core_html.NAME_LIMIT for trial in embedded["trials"])


def test_the_terminal_shows_long_names_clipped(report) -> None:
    import io

    from rich.console import Console

    from benchwarden.core import html as core_html
    from benchwarden.suites.arms.report import render_terminal

    def terminal(tree: dict[str, Any]) -> str:
        output = io.StringIO()
        render_terminal(ArmsReport.from_json(tree), Console(file=output, width=300))
        return output.getvalue()

    at_limit, _ = _named(report, core_html.NAME_LIMIT)
    long, names = _named(report, 20_000)
    text = terminal(long)
    assert not any(name[:core_html.NAME_LIMIT] in text for name in names.values())
    assert f"{len(names)} names longer than 256 characters are shown clipped" in text
    assert len(text) <= 1.1 * len(terminal(at_limit))
    assert "names longer than" not in terminal(report)
    # a note the terminal prints past its bounds names the whole run id, never its clip
    long, names = _named(report, 20_000, run_id=True)
    long["runs_tally"]["cells"] = [{**cell, "task": f"{cell['task']}-{number}"}
                                   for number in range(40)
                                   for cell in long["runs_tally"]["cells"]]
    text = terminal(long)
    assert "every cell: benchwarden show" in text
    joined = "".join(text.split())  # rich wraps a 20,000-character command over lines
    assert joined.count(f"benchwardenshow{names['arms-run-1']}--jsonFILE") >= 2
