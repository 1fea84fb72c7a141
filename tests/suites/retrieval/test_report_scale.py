"""The retrieval report at scale: built from slim records one seed at a time, the same
report a whole read gives; failed cases listed up to `FAILED_CASES_LISTED`; the terminal
and the page bounded in seeds, every number over seeds unchanged."""

from __future__ import annotations

import io
import json
import re
from collections import defaultdict
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from benchwarden.core.records import Record, Run, RunEnd
from benchwarden.core.store import open_store
from benchwarden.suites.retrieval import html as retrieval_html
from benchwarden.suites.retrieval import report as retrieval_report
from benchwarden.suites.retrieval.driver import FAILURE_TASK
from benchwarden.suites.retrieval.scoring import CaseOutcome, run_seeds, score_seed

CATEGORY = ("single_session", "multi_session", "abstention")
TEMPLATES = ("reordered", "synonym")


def case_payload(seed: int, index: int, score: float, odd: bool) -> dict[str, Any]:
    """A case's stored payload; `odd`: the forms an older or hand-written record may
    hold (an integral float, a number for a flag), read by the plain path."""
    paraphrases = [{"score": 1.0 - score if t else score, "used_chars": 100 + 7 * index + t,
                    "canary_hit": bool((seed + t) % 3 == 0), "reason": None,
                    "template": template} for t, template in enumerate(TEMPLATES)]
    payload = {"category": CATEGORY[index % len(CATEGORY)],
               "question": f"question {seed}-{index}", "score": score,
               "used_chars": 300 + index, "canary_hit": index % 4 == 0,
               "reason": None if score >= 1.0 else f"missing value {index}",
               "paraphrases": paraphrases, "items": ["pack text " * 20], "truncated": False}
    if odd:
        payload["used_chars"] = float(payload["used_chars"])
        payload["canary_hit"] = int(payload["canary_hit"])
    return payload


def write_run(path: Any, order: list[tuple[int, int]], scores: dict[tuple[int, int], float],
              odd: set[tuple[int, int]], failure_seed: int | None = None) -> list[Record]:
    """A retrieval run whose case records are appended in `order` ((seed, case) pairs),
    one batch per run of the same seed; the records in the store's order."""
    run_id = "retrieval-scale"
    written = []
    with open_store(path) as store:
        store.begin_run(Run(run_id=run_id, suite="retrieval", bench_version="3",
                            config={"strategy": {"name": "s"},
                                    "settings": {"limit": 10, "budget_chars": 2000}},
                            seeds=tuple(sorted({seed for seed, _ in order})),
                            target={"strategy": "s"}, package_version="0.1.0", git_sha=None,
                            host={}, started_at=1.0))
        batch: list[Record] = []
        for number, (seed, index) in enumerate(order):
            if batch and batch[-1].trial != seed:
                store.append(batch)
                written += batch
                batch = []
            batch.append(Record(suite="retrieval", scope=run_id, arm="s", task=f"c{index:02d}",
                                trial=seed, run_id=run_id, outcome="pass", started_at=1.0,
                                ended_at=2.0 + number,
                                payload=case_payload(seed, index, scores[(seed, index)],
                                                     (seed, index) in odd)))
        if batch:
            store.append(batch)
            written += batch
        if failure_seed is not None:
            failure = Record(suite="retrieval", scope=run_id, arm="s", task=FAILURE_TASK,
                             trial=failure_seed, run_id=run_id, outcome="error",
                             started_at=9.0, ended_at=9.0,
                             payload={"seed": failure_seed, "kind": "crash", "reason": "boom"})
            store.append([failure])
        store.finish_run(RunEnd(run_id, 10.0, "completed", {}))
    return written


def expected_seeds(records: list[Record], cap: int) -> list[dict[str, Any]]:
    """The seed blocks of a whole read: every case decoded as it always was, each seed
    scored over its cases in the store's order, failed cases listed up to `cap` in seed
    order."""
    by_seed: dict[int, list[CaseOutcome]] = defaultdict(list)
    for record in records:
        by_seed[record.trial].append(CaseOutcome.from_payload(record.trial, record.task,
                                                              record.payload))
    blocks = [score_seed(seed, by_seed[seed], 2000) for seed in sorted(by_seed)]
    budget = cap
    for block in blocks:
        failed = block["failed_cases"]
        block["failed_cases"] = failed[:max(budget, 0)]
        block["failed_cases_left_out"] = len(failed) - len(block["failed_cases"])
        budget -= len(block["failed_cases"])
    return blocks


@st.composite
def runs(draw):
    seeds = draw(st.lists(st.integers(1, 40), min_size=1, max_size=6, unique=True))
    cases = draw(st.integers(1, 5))
    pairs = [(seed, index) for seed in seeds for index in range(cases)]
    scores = {pair: draw(st.sampled_from([0.0, 0.5, 1.0])) for pair in pairs}
    odd = {pair for pair in pairs if draw(st.booleans()) and draw(st.booleans())}
    if draw(st.booleans()):  # interleaved: a seed's records in more than one batch
        order = draw(st.permutations(pairs))
    else:  # one batch a seed, the seeds in any order
        order = [pair for seed in draw(st.permutations(seeds))
                 for pair in pairs if pair[0] == seed]
    return order, scores, odd


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=runs(), cap=st.integers(0, 12))
def test_the_report_is_the_whole_read_s_whatever_the_order_and_the_records_forms(
        tmp_path_factory, monkeypatch, drawn, cap):
    """Seeds scored one at a time from slim typed records (a seed whose records come back
    later read again holding every seed) give the blocks and summary a whole read of
    every record gives, failed cases listed up to the cap, the first seeds' first."""
    order, scores, odd = drawn
    monkeypatch.setattr(retrieval_report, "FAILED_CASES_LISTED", cap)
    path = tmp_path_factory.mktemp("scale") / "store.sqlite"
    records = write_run(path, order, scores, odd)
    with open_store(path, create=False) as store:
        built = retrieval_report.build_report(store, "retrieval-scale")
    wanted = expected_seeds(records, cap)
    assert built.to_json()["seeds"] == msgspec.to_builtins(
        msgspec.convert(wanted, list[retrieval_report.SeedBlock]))
    assert msgspec.to_builtins(built.summary) == msgspec.to_builtins(
        msgspec.convert(run_seeds(wanted), retrieval_report.Summary))


def test_a_failure_record_is_the_report_s_failure_and_no_seed_of_it(tmp_path):
    order = [(1, 0), (1, 1), (2, 0)]
    write_run(tmp_path / "s.sqlite", order, dict.fromkeys(order, 1.0), set(), failure_seed=3)
    with open_store(tmp_path / "s.sqlite", create=False) as store:
        built = retrieval_report.build_report(store, "retrieval-scale")
    assert built.failure == {"seed": 3, "kind": "crash", "reason": "boom"}
    assert [block.seed for block in built.seeds] == [1, 2]
    assert built.verdict is not None and built.verdict.kind == "fail"


def test_seeds_the_store_holds_apart_are_read_a_seed_at_a_time(tmp_path, monkeypatch):
    """Seeds whose records alternate batch by batch (no driver writes them so): the report
    is read again a seed at a time by address, holding one seed's cases, not the run's,
    and is the whole read's report; the first failure record by sequence is the run's."""
    order = [(seed, index) for index in range(4) for seed in (1, 2, 3)]  # one record a batch
    scores = {pair: 0.5 if pair[1] % 2 else 1.0 for pair in order}
    records = write_run(tmp_path / "s.sqlite", order, scores, set(), failure_seed=2)
    held, most = [0], [0]
    reading, scoring = retrieval_report._case_outcome, retrieval_report.score_seed

    def read(*args):
        held[0] += 1
        most[0] = max(most[0], held[0])
        return reading(*args)

    def score(seed, outcomes, budget):
        held[0] -= len(outcomes)
        return scoring(seed, outcomes, budget)

    monkeypatch.setattr(retrieval_report, "_case_outcome", read)
    monkeypatch.setattr(retrieval_report, "score_seed", score)
    with open_store(tmp_path / "s.sqlite", create=False) as store:
        built = retrieval_report.build_report(store, "retrieval-scale", digests=False)
    # one seed's 4 cases, and the one case the first pass held when it found seed 1 again
    # (holding every seed: all 12, and that one)
    assert most[0] == 5
    wanted = expected_seeds(records, retrieval_report.FAILED_CASES_LISTED)
    assert built.to_json()["seeds"] == msgspec.to_builtins(
        msgspec.convert(wanted, list[retrieval_report.SeedBlock]))
    assert built.failure == {"seed": 2, "kind": "crash", "reason": "boom"}


@given(offers=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 9)), unique_by=lambda o: o[0],
                       max_size=25), limit=st.integers(0, 20))
def test_the_failed_listing_holds_about_its_limit_and_lists_the_first_seeds_first(offers, limit):
    listing = retrieval_report._ListedFailures(limit)
    most = 0
    for seed, count in offers:
        listing.offer(seed, [f"{seed}:{k}" for k in range(count)])
        most = max(most, listing.held - max((len(v) for v in listing.lists.values()), default=0))
        assert most < max(limit, 1)  # what it holds beyond its largest list stays under the limit
    whole = {seed: [f"{seed}:{k}" for k in range(count)] for seed, count in offers}
    budget = limit
    expected = {}
    for seed in sorted(whole):
        expected[seed] = whole[seed][:max(budget, 0)]
        budget -= len(expected[seed])
    assert listing.listed(whole) == expected


def report_of_seeds(seeds: int, failed_each: int = 2) -> retrieval_report.RetrievalReport:
    blocks = []
    for seed in range(1, seeds + 1):
        outcomes = [CaseOutcome.from_payload(seed, f"c{i}", case_payload(
            seed, i, 0.0 if i < failed_each else 1.0, False)) for i in range(4)]
        blocks.append(score_seed(seed, outcomes, 2000))
    for block in blocks:
        block["failed_cases_left_out"] = 0
    return retrieval_report.as_report({
        "schema": "benchwarden.report/1", "suite": "retrieval", "bench_version": "3",
        "run": {"id": "retrieval-many", "suite": "retrieval", "bench_version": "3",
                "config": {}, "seeds": list(range(1, seeds + 1)), "target": {},
                "package_version": "0.1.0", "git_sha": None, "host": {},
                "started_at": 1.0, "ended_at": 2.0, "status": "completed",
                "resumed_from": None},
        "verdict": {"kind": "info", "reason": "x"}, "strategy": {"name": "s"},
        "settings": {"limit": 10, "budget_chars": 2000}, "seeds": blocks,
        "summary": run_seeds(blocks), "failure": None})


def test_the_terminal_shows_the_first_seeds_and_counts_every_failed_case(monkeypatch):
    monkeypatch.setattr(retrieval_report, "SEEDS_SHOWN", 5)
    report = report_of_seeds(30)
    cut = msgspec.structs.replace(report, seeds=[
        msgspec.structs.replace(block, failed_cases=[], failed_cases_left_out=2)
        if block.seed > 10 else block for block in report.seeds])
    console = Console(record=True, width=200, file=io.StringIO())
    retrieval_report.render_terminal(cut, console)
    text = console.export_text()
    rows = re.findall(r"^│\s+(\d+) │\s+0\.\d{4} │", text, re.M)
    assert rows == [str(seed) for seed in range(1, 6)]
    assert "the first 5 of 30 seeds" in text and "25 more seeds not shown" in text
    assert "over 30 seeds" in text
    assert "failed cases (60; the first 20)" in text  # the report lists 20 of them
    assert "benchwarden export --suite retrieval --run retrieval-many --out cases.jsonl" in \
        " ".join(text.split())


def test_the_page_draws_the_first_seeds_and_counts_every_one(monkeypatch):
    monkeypatch.setattr(retrieval_html, "SEEDS_DRAWN", 7)
    report = report_of_seeds(40)
    page = retrieval_html.render_html(report)
    found = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page,
                      re.S)
    assert found is not None
    embedded = json.loads(found.group(1))
    assert [block["seed"] for block in embedded["seeds"]] == list(range(1, 8))
    assert embedded["seeds_left_out"] == 33
    assert embedded["summary"] == report.to_json()["summary"]
    assert "the first 7 seeds are drawn here, of 40 of s" in page
    assert '<div class="tile-value">40</div><div class="tile-label">seeds</div>' in page
    failed = page.split('id="failed"')[1]
    assert "66 more failed cases are neither drawn nor embedded" in failed  # 80 - 7 × 2


@pytest.mark.parametrize("seeds", [1, 7])
def test_a_page_within_the_seeds_drawn_is_the_report_as_it_is(monkeypatch, seeds):
    monkeypatch.setattr(retrieval_html, "SEEDS_DRAWN", 7)
    report = report_of_seeds(seeds)
    page = retrieval_html.render_html(report)
    assert "seeds are drawn here" not in page and "seeds_left_out" not in page


def test_compare_shows_the_first_seeds_and_decides_on_every_one(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from benchwarden.suites.retrieval.command import compare

    monkeypatch.setattr(retrieval_report, "SEEDS_SHOWN", 2)
    ran = CliRunner().invoke(compare, ["--champion", "substring", "--challenger", "fts5",
                                       "--seeds", "1-4", "--store", str(tmp_path / "s.sqlite")],
                             env={"COLUMNS": "200"})
    assert ran.exit_code == 0, ran.output
    rows = re.findall(r"^│\s+(\d+) │\s+\d\.\d{4} │", ran.output, re.M)
    assert rows == ["1", "2"]
    assert "2 more seeds not shown: the verdict below counts every one" in \
        " ".join(ran.output.split())
    assert "(n = 4)" in ran.output


def test_a_ladder_challenge_shows_the_first_seeds_and_decides_on_every_one(tmp_path,
                                                                          monkeypatch):
    from click.testing import CliRunner

    from benchwarden.cli.main import cli
    monkeypatch.setattr(retrieval_report, "SEEDS_SHOWN", 2)
    ran = CliRunner().invoke(cli, ["ladder", "challenge", "--challenger", "fts5", "--ladder",
                                   str(tmp_path / "ladder"), "--base", "x", "--date",
                                   "2026-11-30", "--seeds", "4", "--isolation", "none",
                                   "--store", str(tmp_path / "s.sqlite")],
                             env={"COLUMNS": "200"})
    assert ran.exit_code in (0, 3), ran.output  # 0 dethroned, 3 the champion holds
    rows = re.findall(r"^│\s+(\d+) │\s+\d\.\d{4} │", ran.output, re.M)
    assert len(rows) == 2
    assert "2 more seeds not shown: the verdict below counts every one" in \
        " ".join(ran.output.split())
