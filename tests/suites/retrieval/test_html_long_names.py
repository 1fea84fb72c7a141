"""Long names and texts on the retrieval page (`html.page_copy`), and the ladder's ledger
bound: a store written by another tool can name a strategy, a run, a case, a category or
a template with 20,000 characters and hold questions and reasons as long, and the page
repeated each at every row and in its embedded JSON (231 MB for a run at the page's
caps, 658 MB for a ladder page). Clipped, every name stays one name, distinct from every
other, and the page is no larger than the same page of names at the limit."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from benchwarden.core import html as core_html
from benchwarden.suites.retrieval import html as retrieval_html
from benchwarden.suites.retrieval.report import RetrievalReport, as_report
from benchwarden.suites.retrieval.scoring import (
    CaseOutcome,
    PackMeasure,
    decide,
    run_seeds,
    score_seed,
)
from tests.core.test_report_numbers import assert_page_matches_json
from tests.suites.retrieval.test_html import ladder_report, strategy_report

LIMIT = core_html.NAME_LIMIT
SEEDS = (11, 22, 33, 44)
CASES = 6
KINDS = ("strategy", "run", "case", "category", "template", "question", "reason", "failure",
         "source", "stamp", "ladder")


class Names:
    """Identifiers of every kind, `length` characters long: `ZZ<kind><i>Q` then filler,
    so the start of each is its own and any copy of its first `LIMIT` characters is
    found. `length` None gives the short names a run of this suite writes."""

    def __init__(self, length: int | None) -> None:
        self.length = length
        self.made: dict[str, str] = {}

    def __call__(self, kind: str, index: int, short: str) -> str:
        if self.length is None:
            return short
        head = f"ZZ{kind}{index}Q"
        name = (head + "abcdefghijklmnopqrstuvwxy" * (self.length // 25 + 2))[:self.length]
        self.made[f"{kind}{index}"] = name
        return name


def _seed_blocks(name: Names, seed_skill: float) -> list[dict[str, Any]]:
    blocks = []
    for seed in SEEDS:
        outcomes = []
        for index in range(CASES):
            score = 0.0 if (index + seed) % 2 else 1.0
            reason = None if score else name("reason", index, f"missing value v{index}")
            paraphrases = tuple(
                PackMeasure(score if (t + index) % 3 else 1.0 - score, 500 + t, False,
                            reason=reason, template=name("template", t, f"tpl{t}"))
                for t in range(3))
            outcomes.append(CaseOutcome(
                seed=seed, case_id=name("case", index, f"case-{index}"),
                category=name("category", index % 3, f"cat{index % 3}"),
                question=name("question", index, f"What is v{index}?"),
                original=PackMeasure(score if index else seed_skill, 600, False, reason=reason),
                paraphrases=paraphrases))
        blocks.append(score_seed(seed, outcomes, 2000))
    return blocks


def run_report(name: Names, index: int = 0, *, failed: bool = True,
               ladder: str | None = None) -> dict[str, Any]:
    """One strategy's report JSON, every identifier and text made by `name`."""
    strategy = name("strategy", index, ["bm25", "fts5"][index])
    run_id = name("run", index, f"retrieval-run-{index}")
    blocks = _seed_blocks(name, 1.0 - 0.5 * index)
    failure = ({"seed": SEEDS[-1], "kind": name("failure", 0, "strategy_error"),
                "reason": name("failure", 1, "pack() raised KeyError"),
                "case": name("failure", 2, "case-0"),
                "traceback": name("failure", 3, "Traceback ...")} if failed else None)
    config: dict[str, Any] = {"strategy": {"name": strategy}}
    if ladder:
        config.update(ladder=ladder, base="0" * 40, date="2026-11-30")
    return {
        "schema": "benchwarden.report/1", "suite": "retrieval", "bench_version": "3",
        "run": {"id": run_id, "suite": "retrieval", "bench_version": "3", "config": config,
                "seeds": list(SEEDS), "target": {"strategy": strategy},
                "package_version": name("stamp", 0, "0.1.0"),
                "git_sha": name("stamp", 1, "c0ffee"), "host": {"os": name("stamp", 2, "Linux")},
                "started_at": 1_790_000_000.0, "ended_at": 1_790_000_030.0,
                "status": "failed" if failed else "completed", "resumed_from": None},
        "verdict": {"kind": "fail" if failed else "info",
                    "reason": (f"strategy {strategy} failed on seed {SEEDS[-1]}: "
                               f"{failure['reason']}" if failure else "composite over seeds")},
        "strategy": {"name": strategy, "builtin": False,
                     "path": name("source", 0, "/tmp/s.py"), "object": name("source", 1, "S"),
                     "source_sha256": name("source", 2, "ab" * 32)},
        "settings": {"limit": 10, "budget_chars": 2000},
        "seeds": blocks, "summary": run_seeds(blocks), "failure": failure,
    }


def ladder_page_report(name: Names, entries: int = 30) -> dict[str, Any]:
    """The challenger's report with its comparison and a ledger of `entries` decisions
    naming both sides."""
    directory = name("ladder", 0, "/tmp/ladder")
    champion = run_report(name, 0, failed=False, ladder=directory)
    challenger = run_report(name, 1, failed=False, ladder=directory)
    decision = decide(champion, challenger).to_json_dict()
    sides = [{**side["strategy"], "run_id": side["run"]["id"]} for side in (champion, challenger)]
    ledger = [{"kind": "genesis", "at": 1.0, "champion": sides[0], "seq": 0}]
    ledger += [{"kind": "decision", "at": 2.0 + number, "seq": number + 1, "base": "0" * 40,
                "date": "2026-11-30", "seeds": list(SEEDS), "decide_on": "composite",
                "champion": {**sides[0], "composite": [0.5] * len(SEEDS)},
                "challenger": {**sides[1], "composite": [0.25] * len(SEEDS)},
                "verdict": {k: decision["verdict"][k] for k in ("mean_diff", "band",
                                                                  "dethroned")},
                "reason": f"{sides[1]['name']} does not reach the band", "outcome": "held"}
               for number in range(entries)]
    return {**challenger, "comparison": {"champion": champion, "challenger": challenger,
                                         "decision": decision}, "ledger": ledger}


def _embedded(page: str) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page,
                      re.S)
    assert found is not None
    return json.loads(found.group(1))  # type: ignore[no-any-return]


def _commands_removed(page: str, whole: RetrievalReport) -> str:
    """The page without the commands it names, which keep their names whole."""
    assert whole.run is not None
    commands = [retrieval_html.whole_report_command(whole),
                f"benchwarden export --suite retrieval --run {whole.run.id} --out cases.jsonl"]
    directory = whole.run.config.get("ladder")
    if directory:
        commands.append(f"benchwarden ladder show --ladder {directory}")
    for command in commands:  # as the page's text and as the embedded JSON hold it
        page = page.replace(core_html.escape(command), "").replace(command, "")
    return page


@pytest.mark.parametrize("build", [run_report, ladder_page_report], ids=["run", "ladder"])
def test_long_names_of_every_kind_are_clipped_on_the_page_each_still_one_name(build) -> None:
    at_limit, long = Names(LIMIT), Names(20_000)
    whole_at_limit, whole = as_report(build(at_limit)), as_report(build(long))
    assert set(long.made) == set(at_limit.made)
    assert {key.rstrip("0123456789") for key in long.made} >= (
        set(KINDS) - ({"ladder"} if build is run_report else {"failure"}))
    page_at_limit = retrieval_html.render_html(whole_at_limit)
    page = retrieval_html.render_html(whole)
    # the same page as names at the limit, but for the commands (whole: they must run),
    # the clipping note and each clipped name's ellipsis (three bytes in UTF-8 where the
    # name at the limit has one)
    rest = _commands_removed(page, whole)
    assert len(rest.encode()) <= len(page_at_limit.encode()) * 1.02 + 2_000
    for name in long.made.values():
        assert name[:LIMIT] not in rest, name[:20]
    # whole only in the commands: the clipping note's and its copy in the JSON, the
    # failed-case export's, the ledger's
    assert whole.run is not None and page.count(whole.run.id) <= 3
    embedded = _embedded(page)
    held = json.dumps(whole.to_json())  # a passing case's id is in no report
    assert embedded["page_cut"]["names"] == sum(name in held for name in long.made.values())
    assert "names and texts longer than 256 characters" in page
    assert embedded["page_cut"]["command"] == retrieval_html.whole_report_command(whole)
    # each is still its own name: as many strategies, categories, templates and cases
    copy = retrieval_html.page_copy(whole)
    copy_at_limit = retrieval_html.page_copy(whole_at_limit)
    for side, side_at_limit in _sides(copy, copy_at_limit):
        assert side.summary is not None and side_at_limit.summary is not None
        assert len(side.summary.category_means) == len(side_at_limit.summary.category_means)
        assert len(side.summary.guards.consistency_per_template) == 3
        cases = {case.case for block in side.seeds for case in block.failed_cases}
        questions = {case.question for block in side.seeds for case in block.failed_cases}
        assert len(cases) == len(questions) == len(
            {case.case for block in side_at_limit.seeds for case in block.failed_cases})
        assert all(len(text) <= LIMIT for text in cases | questions)
    names = {side.name for side, _ in _sides(copy, copy_at_limit)}
    assert len(names) == (2 if copy.comparison is not None else 1)
    # every number on the page is the embedded copy's, and the copy is stable
    assert_page_matches_json(page, copy)
    assert retrieval_html.page_copy(copy) == copy
    # the report itself keeps every name whole
    assert whole.run is not None and whole.run.id in long.made.values()


def _sides(copy: RetrievalReport, other: RetrievalReport
           ) -> list[tuple[RetrievalReport, RetrievalReport]]:
    if copy.comparison is None or other.comparison is None:
        return [(copy, other)]
    return [(copy.comparison.champion, other.comparison.champion),
            (copy.comparison.challenger, other.comparison.challenger)]


@pytest.mark.parametrize("report", [
    strategy_report("fts5-bm25", 0.7), ladder_report(),
    run_report(Names(None)), ladder_page_report(Names(None)),
    run_report(Names(LIMIT)), ladder_page_report(Names(LIMIT))],
    ids=["single", "ladder", "run", "ladder-run", "run-at-limit", "ladder-at-limit"])
def test_a_page_within_every_bound_is_drawn_as_before(report) -> None:
    """Names at most `NAME_LIMIT` long and a ledger within its bound: the page copy is the
    seeds-and-failed-cases cut alone, with no `page_cut`, so the page is the one drawn
    before names were clipped."""
    whole = as_report(report)
    copy = retrieval_html.page_copy(whole)
    assert copy == retrieval_html._page_report(whole)[0]
    assert copy.page_cut is None
    page = retrieval_html.render_html(whole)
    assert "page_cut" not in _embedded(page)
    assert "are clipped on this page" not in page and "ledger entries are drawn" not in page


def test_the_ladder_page_keeps_the_newest_ledger_entries_and_names_the_command() -> None:
    report = ladder_page_report(Names(None), entries=retrieval_html.LEDGER_ENTRIES_DRAWN + 57)
    seeds = list(range(1, retrieval_html.SEEDS_DRAWN + 41))
    for entry in report["ledger"][-3:]:  # the newest, of a ladder of many seeds
        entry["seeds"] = seeds
        entry["challenger"]["composite"] = [0.25] * len(seeds)
    whole = as_report(report)
    page = retrieval_html.render_html(whole)
    embedded = _embedded(page)
    ledger = embedded["ledger"]
    assert len(ledger) == retrieval_html.LEDGER_ENTRIES_DRAWN
    assert [entry["seq"] for entry in ledger] == [entry["seq"] for entry in
                                                  report["ledger"][-len(ledger):]]
    cut = embedded["page_cut"]
    assert cut["ledger_entries"] == len(report["ledger"])
    assert cut["ledger_lists"] == 6  # each of the three newest: seeds and a composite list
    assert cut["ledger_command"] == "benchwarden ladder show --ladder /tmp/ladder"
    assert (f"The newest 200 of {len(report['ledger'])} ledger entries are drawn and "
            "embedded here; <code>benchwarden ladder show --ladder /tmp/ladder</code> lists "
            "every entry") in page
    for entry in ledger[-3:]:
        assert len(entry["seeds"]) == retrieval_html.SEEDS_DRAWN and entry["n"] == len(seeds)
    drawn = page.split('id="ladder"')[1].split("</section>")[0]
    assert drawn.count("<tr>") - drawn.count("<thead>") == retrieval_html.LEDGER_ENTRIES_DRAWN
    assert f"<td class=\"num\">{len(seeds)}</td>" in drawn  # the seeds column counts them all
    assert_page_matches_json(page, retrieval_html.page_copy(whole))
    # the report itself keeps every entry
    assert len(whole.ledger or []) == len(report["ledger"])
