"""Names of any length on the contamination page and terminal (`report.names_clipped`): a
store written by another tool can name a run, a rung, a probe's topic or canary with any
number of characters, and a hostile server can stream a finish reason or a tool name of
any length. Each was repeated on every listed request and cell: 3,072 listed requests
naming one of 20,000 characters made pages of 60-130 MB (450 MB with every kind)."""

from __future__ import annotations

import io
import json
import re
from typing import Any

from rich.console import Console

from benchwarden.core import html as core_html
from benchwarden.suites.contamination.html import render_html
from benchwarden.suites.contamination.report import ContaminationReport, names_clipped
from benchwarden.suites.contamination.terminal import render_terminal
from tests.core.test_html_long_names import renamed
from tests.suites.contamination.test_html import (
    TOPICS,
    _full_listing,
    _island,
    sample_report,
)

LIMIT = core_html.NAME_LIMIT
RUN_ID = "run-2026-11-30-abc"


def _named(length: int, *, run_id: bool = False) -> tuple[dict[str, Any], dict[str, str]]:
    """The full listing (24 rungs of 128 requests) as a store written by another tool
    could hold it, every name `length` characters long and all sharing one start: the
    rungs' labels, the probes' topics, the model, each request's status, ballast task,
    finish reason and tool call; and each cell's reason a sentence of 30,000."""
    report = _full_listing(sample_report())
    plain = [rung["label"] for rung in report["rungs"]] + list(TOPICS) + ["smollm2 <b>bold</b>"]
    plain += [RUN_ID] if run_id else []
    names = {name: ("x" * length + "-" + name)[-length:] for name in plain}
    report = renamed(report, names)
    for number, request in enumerate(report["requests"]):
        request["status"] = ("s" * length + "-ok")[-length:]
        request["task"] = ("b" * length + f"-ballast-{number % 7}")[-length:]
        reply = request["outcome"]["reply"]
        reply["finish_reason"] = ("f" * length + "-stop")[-length:]
        reply["tool_calls"] = [{"name": ("n" * length + "-tool")[-length:],
                                "id": ("i" * length + f"-{number % 5}")[-length:],
                                "arguments": "{}"}]
    for cell in report["cells"]:
        cell["why"] = "the reason: " + "w" * 30_000
    return report, names


def test_long_names_make_a_page_no_larger_than_names_at_the_limit() -> None:
    at_limit, _ = _named(LIMIT)
    long, names = _named(20_000)
    page_at_limit = render_html(at_limit)
    page = render_html(long)
    assert len(page.encode()) < 20_000_000
    # the cells' reasons are cut the same way in both, and a clipped name is as long as
    # one at the limit (its ellipsis a few bytes more, escaped in the embedded JSON)
    assert len(page.encode()) <= 1.02 * len(page_at_limit.encode())
    for name in [*names.values(), long["requests"][0]["status"],
                 long["requests"][0]["outcome"]["reply"]["finish_reason"]]:
        assert name[:LIMIT] not in page
    island = _island(page)
    # each is still its own name: every rung, every probe's topic
    assert len({rung["label"] for rung in island["rungs"]}) == 24
    assert len({probe["topic"] for probe in island["probes"]}) == len(TOPICS)
    assert all(len(rung["label"]) <= LIMIT for rung in island["rungs"])
    assert {request["leg"] for request in island["requests"]} >= {
        rung["label"] for rung in island["rungs"]}
    assert "names longer than 256 characters are clipped" in page
    assert "sentences are cut at 2,000 characters" in page


def test_the_run_id_is_clipped_but_whole_in_the_commands() -> None:
    long, names = _named(20_000, run_id=True)
    run_id = names[RUN_ID]
    page = render_html(long)
    drawn = re.sub(r'<script type="application/json" id="report-data">.*?</script>', "", page,
                   flags=re.S)
    commands = drawn.count(f"benchwarden show {run_id} --json FILE")
    assert commands >= 1 and drawn.count(run_id) == commands
    assert len(_island(page)["run"]["id"]) <= LIMIT


def test_a_report_of_short_names_is_shown_as_it_is() -> None:
    typed = ContaminationReport.from_json(sample_report())
    assert names_clipped(typed) == (typed, 0, 0) and names_clipped(typed)[0] is typed
    # a sentence at its limit is not cut
    report = sample_report()
    report["cells"][0]["why"] = "w" * core_html.SENTENCE_LIMIT
    typed = ContaminationReport.from_json(report)
    assert names_clipped(typed)[0] is typed


def test_clipping_keeps_the_reply_texts_and_the_report_reads_back() -> None:
    long, _ = _named(20_000)
    typed = ContaminationReport.from_json(long)
    clipped, names, sentences = names_clipped(typed)
    assert names == 24 + len(TOPICS) + 1 + 1 + 7 + 1 + 1 + 5  # rungs, topics, model, ...
    assert sentences == len(long["cells"])
    assert [request.outcome["reply"]["text"] for request in clipped.requests] == \
        [request.outcome["reply"]["text"] for request in typed.requests]
    assert [cell.at for cell in clipped.cells] == [cell.at for cell in typed.cells]
    assert ContaminationReport.from_json(json.loads(json.dumps(
        clipped.to_json() if hasattr(clipped, "to_json") else
        __import__("msgspec").to_builtins(clipped)))) == clipped
    assert names_clipped(clipped) == (clipped, 0, 0)


def _terminal(report: dict[str, Any]) -> str:
    output = io.StringIO()
    render_terminal(report, Console(file=output, width=200))
    return output.getvalue()


def test_the_terminal_shows_long_names_clipped() -> None:
    at_limit, _ = _named(LIMIT)
    long, names = _named(20_000)
    text = _terminal(long)
    assert len(text) <= len(_terminal(at_limit)) + 500
    assert not any(name[:LIMIT] in text for name in names.values())
    assert "names longer than 256 characters shown clipped" in text


def test_a_flood_of_tool_calls_on_every_listed_request_keeps_the_page_bounded() -> None:
    """Each field of a reply is bounded on the page, but not how many tool calls a hostile
    server streams: 3,072 listed requests of 300 tool calls each. The copy embeds the
    outcomes up to its budget and the rest without them, saying so."""
    from benchwarden.suites.contamination import html as contamination_html

    report = _full_listing(sample_report())
    calls = [{"name": f"tool_{number}", "id": f"call_{number:06d}",
              "arguments": json.dumps({"path": "/tmp/" + "p" * 40, "n": number})}
             for number in range(300)]
    for request in report["requests"]:
        request["outcome"]["reply"]["tool_calls"] = calls
    page = render_html(report)
    assert len(page.encode()) < 20_000_000
    island = _island(page)
    stripped = [request for request in island["requests"]
                if request.get(contamination_html.OUTCOME_LEFT_OUT_KEY)]
    assert stripped and all("outcome" not in request for request in stripped)
    kept = [request for request in island["requests"] if "outcome" in request]
    assert kept and all(len(request["outcome"]["reply"]["tool_calls"]) == 300
                        for request in kept)
    # the outcomes come first, up to the budget, then the rest without theirs
    marks = [bool(request.get(contamination_html.OUTCOME_LEFT_OUT_KEY))
             for request in island["requests"] if request["leg"] not in ("prime",)]
    assert marks == sorted(marks)
    embedded = sum(len(json.dumps(request["outcome"], separators=(",", ":")))
                   for request in kept)
    assert embedded <= contamination_html.OUTCOMES_EMBEDDED_BYTES
    assert f"{len(stripped):,} listed requests are embedded in this page without their " \
        "outcome" in page
    # every request is still listed, with its leg, slot and timings
    assert len(island["requests"]) == len(report["requests"])


def _many_probes(count: int) -> dict[str, Any]:
    """The sample run as a store written by another tool could hold it, with `count`
    probes (a run has at most 32): the cells of each, probe `count - 3` diverged."""
    report = sample_report()
    report["probes"] = [{"index": index, "canary": f"CANARY-{index:05d}",
                         "topic": f"topic {index}"} for index in range(count)]
    template = [cell for cell in report["cells"] if cell["probe"] == 0]
    report["cells"] = [{**cell, "probe": index} for index in range(count) for cell in template]
    solo = [request for request in report["requests"]
            if request["leg"] in ("prime", "ref_a", "ref_b", "post") and request["probe"] == 0]
    report["requests"] += [{**request, "probe": index} for index in range(4, count)
                           for request in solo]
    report["run"]["config"]["probe_set"] = [{"canary": probe["canary"]}
                                            for probe in report["probes"]]
    for cell in report["cells"]:
        if cell["probe"] == count - 3 and cell["leg"] == "c4":
            cell.update({"class": "diverged", "at": 12})
    return report


def test_a_report_of_thousands_of_probes_shows_a_bounded_grid_and_says_so() -> None:
    from benchwarden.suites.contamination import report as contamination_report

    shown = contamination_report.PROBES_SHOWN
    pages = {count: render_html(_many_probes(count)) for count in (shown, 200, 2_000)}
    # within the bound, as it was; past it, the page does not grow with the probes
    assert "probes: those with a cell" not in pages[shown]
    assert len(pages[2_000].encode()) <= 1.05 * len(pages[200].encode())
    page = pages[2_000]
    assert f"Showing {shown} of 2,000 probes" in page
    island = _island(page)
    assert island["probes_total"] == 2_000 and len(island["probes"]) == shown
    # the probe needing attention is shown though it comes last
    assert 1_997 in {probe["index"] for probe in island["probes"]}
    assert {cell["probe"] for cell in island["cells"]} == {
        probe["index"] for probe in island["probes"]}
    assert "topic 1997" in page and f"topic {shown + 5}" not in page
    shown_probes = {probe["index"] for probe in island["probes"]}
    assert all(request["probe"] in shown_probes for request in island["requests"]
               if request["scored"])
    text = _terminal(_many_probes(2_000))
    assert f"showing {shown} of 2,000 probes" in text
    assert "CANARY-01997" in text and f"CANARY-{shown + 5:05d}" not in text
    # the report itself keeps every probe
    typed = ContaminationReport.from_json(_many_probes(2_000))
    assert len(typed.probes) == 2_000 and contamination_report.probes_shown(typed) is not typed
