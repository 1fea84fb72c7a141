"""Every number on every suite's HTML page is a number of its JSON report.

Each suite's typed report is built from a fixture store written through the store API;
its page is rendered, and then, read back from the page alone:
- every whisker's interval (`data-low`/`data-high`, exact floats) is an interval the
  JSON carries (`low`, `high` of one block): no view draws an interval of its own;
- every numeric token of every data-bearing element (table cells, tiles, bar values,
  bar hovers, grid cells, facts) is a JSON number printed by one of the shared
  formatters, the length of a JSON list, or a number written in a JSON string (a
  reason, an id): a view that recomputes a number (other weights, a normal interval, a
  duration of its own) prints a token that is none of these;
- the main tables cell by cell equal the report formatted by the shared formatters;
- the JSON embedded in the page is the report's own encoding.

Chart axes (ticks) are layout, not report numbers, and are left out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any

import msgspec
import pytest

from benchwarden.core import formatting as fmt
from benchwarden.core.records import Record, Run, RunEnd
from benchwarden.core.store import open_store
from benchwarden.suites.arms import report as arms_report
from benchwarden.suites.arms.html import render_html as arms_html
from benchwarden.suites.contamination import report as contamination_report
from benchwarden.suites.contamination import scoring
from benchwarden.suites.contamination.html import render_html as contamination_html
from benchwarden.suites.contamination.terminal import render_terminal as contamination_terminal
from benchwarden.suites.retrieval import report as retrieval_report
from benchwarden.suites.retrieval.html import render_html as retrieval_html
from benchwarden.suites.retrieval.scoring import decide
from benchwarden.targets.replies import Reply, RequestOutcome, Timings
from tests.suites.arms.test_html import ARMS, TASKS, _trial
from tests.suites.retrieval.test_html import _outcomes

NUMBER = re.compile(r"[+-]?\d+(?:,\d{3})*(?:\.\d+)?")
# Elements whose text is report data (class names as `benchwarden.core.html` writes them).
DATA_TEXT_CLASSES = {"bar-value", "col-value", "cell-text", "tile-value", "tile-se",
                     "marker-label", "rule-label"}


# ---------------------------------------------------------------------------- reading a page

class _Page(HTMLParser):
    """Collects whiskers, data-bearing texts and tables (rows of cell texts)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.whiskers: list[tuple[str | None, str | None]] = []
        self.texts: list[str] = []
        self.tables: list[list[list[str]]] = []
        self.embedded = ""
        self._stack: list[tuple[str, bool]] = []  # (tag, collects text)
        self._buffer: list[list[str]] = []
        self._row: list[str] | None = None
        self._in_data_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        classes = set((attributes.get("class") or "").split())
        if tag == "g" and "whisker" in classes:
            self.whiskers.append((attributes.get("data-low"), attributes.get("data-high")))
        if tag == "script" and attributes.get("id") == "report-data":
            self._in_data_script = True
        if tag == "table":
            self.tables.append([])
        if tag == "tr":
            self._row = []
        collects = tag in ("td", "dd", "title", "summary") or bool(classes & DATA_TEXT_CLASSES)
        if self._buffer:  # elements are words apart in the collected text
            self._buffer[-1].append(" ")
        if tag in ("line", "rect", "br", "meta", "img"):  # void-ish: no end tag expected
            return
        self._stack.append((tag, collects))
        if collects:
            self._buffer.append([])

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_data_script = False
        while self._stack:
            open_tag, collects = self._stack.pop()
            if collects:
                text = " ".join("".join(self._buffer.pop()).split())
                self.texts.append(text)
                if open_tag == "td" and self._row is not None:
                    self._row.append(text)
                if self._buffer:  # nested collectors see the inner text too
                    self._buffer[-1].append(text)
            if open_tag == tag:
                break
        if tag == "tr" and self._row is not None and self.tables:
            if self._row:
                self.tables[-1].append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._in_data_script:
            self.embedded += data
        elif self._buffer:
            self._buffer[-1].append(data)


def read_page(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    return parser


# ---------------------------------------------------------------------------- the JSON's numbers

def _walk(value: Any) -> Iterator[Any]:
    yield value
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def _intervals(report: dict[str, Any]) -> set[tuple[float, float]]:
    return {(float(node["low"]), float(node["high"])) for node in _walk(report)
            if isinstance(node, dict) and isinstance(node.get("low"), (int, float))
            and isinstance(node.get("high"), (int, float))}


def _renderings(value: float) -> Iterator[str]:
    """Every way a shared formatter prints a JSON number."""
    for digits in range(5):
        yield fmt.number(float(value), digits)
        yield fmt.signed(value, digits)
        yield fmt.signed(value, digits, scale=100)
        yield fmt.number(100 * value, digits)
    yield fmt.number(value)
    yield fmt.count(value)
    yield fmt.percent(value)
    yield fmt.percent(value, 1)
    yield fmt.duration(value)
    yield fmt.when(value)
    yield fmt.p_value(value)


def allowed_tokens(report: dict[str, Any]) -> set[str]:
    tokens: set[str] = set()
    for node in _walk(report):
        if isinstance(node, bool):
            continue
        if isinstance(node, (int, float)):
            for text in _renderings(node):
                tokens.update(NUMBER.findall(text))
        elif isinstance(node, str):
            tokens.update(NUMBER.findall(node))
        elif isinstance(node, (list, dict)):
            tokens.add(fmt.count(len(node)))
    return tokens


def assert_page_matches_json(page: str, report: msgspec.Struct, *,
                             draws_intervals: bool = True) -> _Page:
    plain = msgspec.to_builtins(report)
    parsed = read_page(page)
    assert json.loads(parsed.embedded) == json.loads(json.dumps(plain, default=str))

    intervals = _intervals(plain)
    assert parsed.whiskers or not draws_intervals, "the page draws no interval"
    for low, high in parsed.whiskers:
        assert low is not None and high is not None, "a whisker without its interval"
        assert (float(low), float(high)) in intervals, f"whisker [{low}, {high}] is not in the JSON"

    allowed = allowed_tokens(plain)
    strange = sorted({(token, text) for text in parsed.texts for token in NUMBER.findall(text)
                      if token not in allowed})
    assert not strange, f"numbers on the page that the JSON does not hold: {strange[:10]}"
    return parsed


def _table_with(parsed: _Page, first_cell: str, width: int) -> list[list[str]]:
    for table in parsed.tables:
        if table and len(table[0]) == width and any(row[0] == first_cell for row in table):
            return table
    raise AssertionError(f"no table of width {width} with a row {first_cell!r}")


# ---------------------------------------------------------------------------- arms

def write_arms_run(store: Any) -> None:
    """One finished arms run, `arms-run-1`: every arm x task cell three trials deep."""
    store.begin_run(Run(run_id="arms-run-1", suite="arms", bench_version="1",
                        config={"scope": "tracker", "arms": list(ARMS), "tasks": list(TASKS),
                                "tiers": sorted(set(TASKS.values()))},
                        seeds=(3,), target={"url": "http://127.0.0.1:8081"},
                        package_version="0.1.0", git_sha="feedface", host={"os": "Linux"},
                        started_at=1_790_000_000.0))
    records = [_trial(arm, task, trial, index) for index, (arm, task, trial) in enumerate(
        (a, t, n) for a in ARMS for t in TASKS for n in (1, 2, 3))]
    store.append(records)
    cells = [{"arm": a, "task": t, "before": 0, "after": 3, "passed": 2, "failed": 1,
              "invalid": 0, "harness_errors": 0, "covered": True} for a in ARMS for t in TASKS]
    store.finish_run(RunEnd("arms-run-1", 1_790_000_500.0, "completed",
                            {"recorded": len(records), "invalid": 1, "harness_errors": 0,
                             "attempted": len(records) + 1, "cells": cells, "problems": [],
                             "floor": 3, "floor_reached": True}))


@pytest.fixture
def arms(tmp_path) -> arms_report.ArmsReport:
    with open_store(tmp_path / "arms.sqlite") as store:
        write_arms_run(store)
        return arms_report.with_trials(store, arms_report.build_report(store, "arms-run-1"))


def test_every_number_on_the_arms_page_is_the_json_s(arms) -> None:
    parsed = assert_page_matches_json(arms_html(arms), arms)
    headline = _table_with(parsed, "cli", 9)
    for shown, row in zip(headline, arms.headline, strict=False):
        assert shown[1:7] == [fmt.count(row.samples), fmt.rate(row.success),
                              fmt.estimate(row.cost_equivalent, 0), fmt.estimate(row.raw_tokens, 0),
                              fmt.estimate(row.turns, 1), fmt.estimate(row.duration_s, 1)]
        assert shown[8] == fmt.estimate(row.imputed_cost_usd, 4)
    assert arms.trials is not None
    for trial in arms.trials:  # the drill-down's cost and duration are the Record's
        shown = (f"{fmt.tokens(trial.cost_equivalent)} cost-eq tokens · "
                 f"{fmt.duration(trial.duration_s)}")
        assert shown in " ".join(parsed.texts)


def test_the_arms_page_of_a_json_file_is_the_page_of_the_typed_report(arms) -> None:
    again = arms_report.ArmsReport.from_json(json.loads(json.dumps(arms.to_json())))
    assert again == arms
    assert arms_html(again) == arms_html(arms)


# ---------------------------------------------------------------------------- retrieval

def _retrieval_run(store: Any, run_id: str, name: str, skill: float, dumps: bool) -> None:
    seeds = (101, 202, 303, 404, 505, 606)
    store.begin_run(Run(run_id=run_id, suite="retrieval", bench_version="2",
                        config={"strategy": {"name": name, "version": "1"},
                                "settings": {"limit": 10, "budget_chars": 2000}},
                        seeds=seeds, target={"strategy": name}, package_version="0.1.0",
                        git_sha=None, host={}, started_at=1_790_000_000.0))
    records = []
    for seed in seeds:
        for outcome in _outcomes(seed, skill, dumps):
            payload = outcome.to_payload()
            records.append(Record(suite="retrieval", scope=run_id, arm=name, task=outcome.case_id,
                                  trial=seed, run_id=run_id,
                                  outcome="pass" if payload["score"] >= 1.0 else "fail",
                                  started_at=1_790_000_001.0, ended_at=1_790_000_002.5,
                                  payload=payload))
    store.append(records)
    store.finish_run(RunEnd(run_id, 1_790_000_030.0, "completed", {}))


@pytest.fixture
def retrieval(tmp_path
              ) -> tuple[retrieval_report.RetrievalReport, retrieval_report.RetrievalReport]:
    with open_store(tmp_path / "retrieval.sqlite") as store:
        _retrieval_run(store, "retrieval-champion", "fts5-bm25", 0.6, dumps=False)
        _retrieval_run(store, "retrieval-challenger", "dump-all", 0.8, dumps=True)
        champion = retrieval_report.build_report(store, "retrieval-champion")
        challenger = retrieval_report.build_report(store, "retrieval-challenger")
    decision = decide(champion, challenger).to_json_dict()
    with_comparison = msgspec.structs.replace(
        challenger, comparison=retrieval_report.comparison(champion, challenger, decision),
        ledger=[{"decided_at": 1_790_000_040.0, "champion": "fts5-bm25", "challenger": "dump-all",
                 **{k: decision["verdict"][k] for k in ("mean_diff", "band", "n", "dethroned")},
                 "reason": decision["reason"]}])
    return champion, with_comparison


def test_every_number_on_the_retrieval_page_is_the_json_s(retrieval) -> None:
    single, compared = retrieval
    for report in (single, compared):
        parsed = assert_page_matches_json(retrieval_html(report), report)
        guards = [row for row in _table_with(parsed, report.name, 10) if row[0] == report.name]
        assert len(guards) == len(report.seeds)
        for shown, block in zip(guards, report.seeds, strict=True):
            assert shown[1:] == [str(block.seed), fmt.number(block.guards.efficiency, 3),
                                 fmt.number(block.guards.mean_used_chars, 0),
                                 fmt.number(block.guards.consistency, 3),
                                 fmt.number(block.guards.canary, 2),
                                 fmt.number(block.guards.canary_tripped),
                                 fmt.number(block.guards.canary_leak_rate, 3),
                                 fmt.number(block.composite, 4),
                                 fmt.number(block.composite_guarded, 4)]


def test_retrieval_whiskers_are_the_student_t_intervals_of_the_summary(retrieval) -> None:
    single, _ = retrieval
    assert single.summary is not None
    composite = single.summary.composite
    assert composite.method == "t" and composite.n == 6
    drawn = {(float(low), float(high)) for low, high in read_page(retrieval_html(single)).whiskers
             if low is not None and high is not None}
    for estimate in single.summary.category_means.values():
        if estimate.low is not None:
            assert (estimate.low, estimate.high) in drawn
    # at six seeds the t interval is wider than a normal one by t(0.975, 5) / 1.96
    guard = single.summary.guards.efficiency
    if guard.se:
        widening = (guard.high - guard.low) / (2 * 1.96 * guard.se)
        assert widening == pytest.approx(2.5706 / 1.96, rel=1e-3)


def test_a_retrieval_json_file_reads_back_to_the_same_page(retrieval) -> None:
    _, compared = retrieval
    again = retrieval_report.RetrievalReport.from_json(json.loads(json.dumps(compared.to_json())))
    assert retrieval_html(again) == retrieval_html(compared)


# ---------------------------------------------------------------------------- contamination

CANARIES = ("XK-AZURE-HERON-41", "QJ-CRIMSON-OTTER-77", "BM-JADE-LYNX-23")
TOPICS = ("a lighthouse warns ships", "bees make honey", "tides follow the moon")
INVALID_BYTE = b"\xff".decode("utf-8", "surrogateescape")  # as the client keeps it
CONTAMINATION_START = 1_790_000_000.0


def _answer(probe: int) -> str:
    words = " ".join(f"w{probe}x{i}" for i in range(12))
    byte = f" raw {INVALID_BYTE} byte" if probe == 0 else ""  # probe 0's replies: invalid UTF-8
    return f"{CANARIES[probe]}\n{words}{byte}\n{CANARIES[probe]}"


def _streamed(text: str, sent: float, first: float, last: float,
              tokens: int = 24) -> RequestOutcome:
    reply = Reply(reasoning="", text=text, tool_calls=(), finish_reason="stop",
                  completion_tokens=tokens, usage_reported=True, prompt_tokens=120,
                  cached_prompt_tokens=96, saw_done=True)
    return RequestOutcome(Timings(sent_at=sent, first_byte_at=first, first_content_at=first,
                                  last_byte_at=last), reply=reply, status=200)


def _contamination_record(leg: str, task: str, trial: int, probe: int, slot: int,
                          outcome: RequestOutcome) -> Record:
    return Record(suite="contamination", scope="contamination-run-1", arm=leg, task=task,
                  trial=trial, run_id="contamination-run-1",
                  outcome="ok" if outcome.ok else "error", started_at=outcome.timings.sent_at,
                  ended_at=outcome.timings.last_byte_at or outcome.timings.sent_at,
                  payload={"probe": probe, "slot": slot, "cancel_after_deltas": None,
                           "outcome": outcome.to_json_dict()})


@pytest.fixture
def contamination(tmp_path) -> contamination_report.ContaminationReport:
    """Three probes, rungs c2 and c4, the post-check. Probe 0's replies hold an invalid
    UTF-8 byte; probe 1 diverges in c2; probe 2's solo references disagree; rung c4 has a
    failed ballast request (HTTP 500), so its cells are unmeasured."""
    bodies = [{"model": "m", "messages": [{"role": "user", "content": f"probe {i}"}]}
              for i in range(3)]
    config = {"scope": "contamination-run-1", "url": "http://127.0.0.1:8080", "model": "m",
              "seed": 7, "scenario": "shared-prefix", "max_tokens": 64,
              "min_completion_tokens": 8, "concurrency": [2, 4], "repeat": 1,
              "probe_set": [{"index": i, "canary": CANARIES[i], "topic": TOPICS[i]}
                            for i in range(3)],
              "request_bodies": bodies, "preset": "llamacpp", "extra_body": {}}
    clock = CONTAMINATION_START + 1.0
    records = []
    for leg in ("prime", "ref_a", "ref_b"):
        for probe in range(3):
            text = _answer(probe) + (" again" if (leg, probe) == ("ref_b", 2) else "")
            records.append(_contamination_record(leg, str(probe), 1, probe, probe, _streamed(
                text, clock, clock + 0.0312, clock + 0.4187)))
            clock += 0.5
    with open_store(tmp_path / "contamination.sqlite") as store:
        store.begin_run(Run(run_id="contamination-run-1", suite="contamination",
                            bench_version="2", config=config, seeds=(7,),
                            target={"url": config["url"], "model": "m"},
                            package_version="0.1.0", git_sha="feedface", host={"os": "Linux"},
                            started_at=CONTAMINATION_START))
        store.append(records[:3])  # prime
        store.append(records[3:])  # the references
        for level, slots in ((2, 3), (4, 4)):
            rung = []
            for slot in range(slots):
                probe = slot % 3
                sent = clock + slot * 0.00037
                first, last = sent + 0.0421 + 0.013 * slot, sent + 0.5173 + 0.021 * slot
                if (level, slot) == (4, 3):
                    outcome = RequestOutcome(Timings(sent_at=sent, first_byte_at=sent + 0.01),
                                             error="HTTP 500 from POST http://127.0.0.1:8080/v1/"
                                                   "chat/completions: busy", status=500)
                else:
                    text = _answer(probe)
                    if (level, probe) == (2, 1):
                        text = text.replace("w1x7", "w1x7 w1x7")
                    outcome = _streamed(text, sent, first, last)
                task = str(slot) if slot < 3 else f"ballast-{slot}"
                rung.append(_contamination_record(f"c{level}", task, 1, probe, slot, outcome))
            store.append(rung)
            clock += 1.5
        store.append([_contamination_record("post", str(probe), 1, probe, probe, _streamed(
            _answer(probe), clock + probe * 0.5, clock + probe * 0.5 + 0.0297,
            clock + probe * 0.5 + 0.3911)) for probe in range(3)])
        store.finish_run(RunEnd("contamination-run-1", clock + 2.0, "completed", {}))
        return contamination_report.build_report(store, "contamination-run-1")


def test_the_contamination_fixture_holds_what_it_says(contamination) -> None:
    kinds = {(cell.leg, cell.probe): cell.kind for cell in contamination.cells}
    assert kinds[("c2", 1)] == "diverged" and kinds[("ref", 2)] == "alone_unstable"
    assert kinds[("c2", 0)] == kinds[("post", 0)] == "identical"  # invalid byte and all
    assert {kinds[("c4", p)] for p in (0, 1)} == {"unmeasured"}
    c2, c4 = contamination.rungs
    assert (c2.concurrency, c2.requests_failed, c4.concurrency, c4.requests_failed) == (2, 0, 4, 1)
    assert c4.state == "unmeasured" and c4.failures == {"HTTP 500": 1}
    assert {cell.level for cell in contamination.cells if cell.leg == "c4"} == {4}
    assert contamination.verdict is not None and contamination.verdict.kind == "fail"
    # reference B of probe 2 goes on where A ends its text (after the reasoning separator)
    assert contamination.references_part_at == {2: 1 + len(_answer(2))}


def test_every_number_on_the_contamination_page_is_the_json_s(contamination) -> None:
    page = contamination_html(contamination)
    parsed = assert_page_matches_json(page, contamination, draws_intervals=False)
    fidelity = _table_with(parsed, "c2", 7)
    assert [row[:6] for row in fidelity] == [
        [rung.label, fmt.count(rung.concurrency), fmt.count(rung.requests_sent),
         fmt.count(rung.requests_failed), fmt.count(rung.peak_in_flight),
         fmt.number(rung.launch_skew_ms, 1)] for rung in contamination.rungs]
    assert [row[6] for row in fidelity] == [rung.reading for rung in contamination.rungs]
    score = contamination.score
    assert score is not None
    tiles = [text for text in parsed.texts if text]  # the tiles, in the order the score has them
    for name in ("compared", "identical", "diverged", "alone_unstable", "unmeasured",
                 "tokens_compared", "earliest_divergence"):
        assert fmt.number(getattr(score, name)) in tiles
    shown = " ".join(parsed.texts)
    for entry in contamination.requests:  # the timeline's hovers are the report's times
        if entry.level is not None and entry.first_content_ms is not None:
            assert f"slot {entry.slot}: waiting {fmt.number(entry.wait_ms, 0)} ms" in shown
            assert (f"streaming {fmt.number(entry.first_content_ms, 0)}–"
                    f"{fmt.number(entry.last_byte_ms, 0)} ms") in shown
        elif entry.level is not None:
            assert f"slot {entry.slot} sent at +{fmt.number(entry.sent_ms, 1)} ms" in shown
    # the reply facts print the report's waits, not their own arithmetic
    for entry in contamination.requests:
        if entry.leg == "ref_a" and entry.wait_ms is not None:
            assert f"first delta +{fmt.number(entry.wait_ms, 0)} ms" in page
    # an invalid byte is a chip on the page and `\xff` nowhere as U+FFFD
    assert 'title="invalid UTF-8 byte 0xFF"' in page and "\ufffd" not in page
    page.encode("utf-8")


def test_the_contamination_terminal_prints_the_report_s_numbers(contamination) -> None:
    from rich.console import Console

    console = Console(record=True, width=250)
    contamination_terminal(contamination, console)
    text = console.export_text()
    for rung in contamination.rungs:
        assert rung.description in text
    assert contamination.score is not None
    assert f"tokens_compared {fmt.number(contamination.score.tokens_compared)}" in text
    assert f"DIVERGED @ char {fmt.number(next(c.at for c in contamination.cells if c.at))}" in text


def test_a_contamination_json_file_reads_back_to_the_same_report_and_page(contamination) -> None:
    encoded = msgspec.json.encode(contamination)  # valid UTF-8 despite the invalid byte
    encoded.decode("utf-8")
    again = contamination_report.ContaminationReport.from_json(json.loads(encoded))
    assert again == contamination
    assert contamination_html(again) == contamination_html(contamination)


def test_a_bench_version_1_contamination_report_still_reads(contamination) -> None:
    old = contamination.to_json()
    old["bench_version"] = "1"
    for rung in old["rungs"]:
        rung["slots"] = rung.pop("requests_sent")
        for key in ("requests_failed", "failures", "unmeasured_reason", "description",
                    "state", "reading"):
            rung.pop(key)
    for entry in old["requests"]:
        for key in ("level", "sent_ms", "first_content_ms", "last_byte_ms", "wait_ms",
                    "last_byte_after_ms"):
            entry.pop(key)
    for cell in old["cells"]:
        cell.pop("level", None)
    old.pop("references_part_at")
    read = contamination_report.ContaminationReport.from_json(old)
    assert [r.requests_sent for r in read.rungs] == [r.requests_sent for r in contamination.rungs]
    assert all(r.requests_failed is None for r in read.rungs)  # not counted before version 2
    assert [r.concurrency for r in read.rungs] == [2, 4]
    assert [c.level for c in read.cells] == [c.level for c in contamination.cells]
    assert read.requests == contamination.requests  # the times are derived the same way
    assert "—" in contamination_html(read)  # requests failed: unknown, a dash, never 0


# ---------------------------------------------------------------------------- JSON shape

# `store_head` (the head witness every report built from a store carries) follows the verdict.
ARMS_KEYS = ["schema", "suite", "bench_version", "run", "verdict", "store_head", "scope",
             "floor", "weights", "arms", "tasks", "tiers", "samples", "headline", "coverage",
             "per_tier", "per_component", "failure_tags", "comparisons", "tally", "runs"]
RETRIEVAL_KEYS = ["schema", "suite", "bench_version", "run", "verdict", "store_head",
                  "strategy", "settings", "seeds", "summary", "failure"]


def test_the_typed_reports_keep_the_json_field_names(arms, retrieval) -> None:
    plain = arms.to_json()
    # the old names keep their order; what reports learned since follows them
    assert list(plain) == ARMS_KEYS + ["trials", "trials_total", "export_command", "runs_tally"]
    assert list(msgspec.structs.replace(arms, trials=None, trials_total=None, export_command=None,
                                        runs_tally=None).to_json()) == ARMS_KEYS
    assert list(plain["failure_tags"][0]) == ["arm", "samples", "pass", "incorrect", "confused",
                                             "hung", "denied_calls"]
    assert list(plain["comparisons"][0]["success_difference"])[-2:] == ["mde_binomial",
                                                                        "samples_per_arm"]
    assert "mde_binomial" not in plain["comparisons"][0]["cost_equivalent_difference"]
    single, compared = retrieval
    assert list(single.to_json()) == RETRIEVAL_KEYS
    assert list(compared.to_json()) == RETRIEVAL_KEYS + ["comparison", "ledger"]
    assert json.loads(msgspec.json.encode(single)) == single.to_json()


CONTAMINATION_KEYS = ["schema", "suite", "bench_version", "run", "verdict", "store_head",
                      "score", "cells", "rungs", "probes", "request", "legs", "warnings",
                      "requests", "references_part_at", "bisect"]


def test_the_contamination_report_keeps_its_json_field_names(contamination) -> None:
    plain = contamination.to_json()
    assert list(plain) == CONTAMINATION_KEYS
    assert plain["bench_version"] == "2"
    assert list(plain["rungs"][0]) == [
        "label", "concurrency", "repeat", "requests_sent", "requests_failed", "failures",
        "peak_in_flight", "observed_parallelism", "launch_skew_ms", "unmeasured_reason",
        "description", "state", "reading"]
    diverged = next(cell for cell in plain["cells"] if cell["class"] == "diverged")
    assert list(diverged) == ["probe", "leg", "repeat", "class", "at", "detail", "level",
                              "divergence"]
    post = next(cell for cell in plain["cells"] if cell["leg"] == "post")
    assert list(post) == ["probe", "leg", "repeat", "class"]  # no level off the rungs
    assert list(plain["score"]) == list(scoring.Score.COUNTERS)
    assert json.loads(msgspec.json.encode(contamination)) == json.loads(json.dumps(plain))


def test_a_partial_or_foreign_file_reads_or_fails_in_one_line() -> None:
    empty = arms_report.ArmsReport.from_json({"suite": "arms"})
    assert empty.headline == [] and empty.trials is None and empty.tally is None
    with pytest.raises(ValueError, match="not an arms report"):
        arms_report.ArmsReport.from_json({"suite": "retrieval"})
    with pytest.raises(ValueError, match="does not read as a report") as caught:
        arms_report.ArmsReport.from_json({"suite": "arms", "headline": "many"})
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match="not a contamination report"):
        contamination_report.ContaminationReport.from_json({"suite": "arms"})
    with pytest.raises(ValueError, match="does not read as a report") as caught:
        contamination_report.ContaminationReport.from_json({"suite": "contamination",
                                                            "cells": [{"probe": "one"}]})
    assert "\n" not in str(caught.value)
    assert contamination_report.ContaminationReport.from_json({}).cells == []
    with pytest.raises(ValueError, match="no per-seed scores"):
        retrieval_report.RetrievalReport.from_json({"suite": "retrieval", "bench_version": "2"},
                                                   scored=True)


def test_compare_does_not_normalise_a_typed_report_again(retrieval, monkeypatch) -> None:
    from benchwarden.suites.retrieval import scoring

    single, compared = retrieval
    expected = decide(single.to_json(), compared.to_json())

    def refuse(report: Any) -> Any:
        raise AssertionError("a typed report was normalised again")

    monkeypatch.setattr(scoring, "normalise_report", refuse)
    assert decide(single, compared) == expected


def test_every_field_of_every_typed_report_says_what_it_holds() -> None:
    import ast
    import inspect

    from benchwarden.core import reports

    undocumented = []
    for module in (reports, arms_report, retrieval_report, contamination_report):
        for node in ast.parse(inspect.getsource(module)).body:
            if not isinstance(node, ast.ClassDef):
                continue
            for index, statement in enumerate(node.body):
                if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                    after = node.body[index + 1] if index + 1 < len(node.body) else None
                    if not (isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                            and isinstance(after.value.value, str) and after.value.value.strip()):
                        undocumented.append(f"{module.__name__}.{node.name}.{statement.target.id}")
    assert not undocumented
