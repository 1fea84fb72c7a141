"""The contamination report at scale: what it lists is capped (`shown`), what it counts
is not, and the page stays bounded however many records the store holds.

The stores here are written through the store API (no server), with rungs that need
attention placed late in the run, so the cap has to choose them over earlier quiet ones.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import RunEnd
from benchwarden.core.store import SQLiteStore
from benchwarden.suites.contamination import report as report_module
from benchwarden.suites.contamination import scoring, shown
from benchwarden.suites.contamination.driver import SUITE, Plan, make_record
from benchwarden.suites.contamination.fidelity import RungTally, rung_fidelity
from benchwarden.suites.contamination.html import render_html
from benchwarden.suites.contamination.report import build_report, within_caps
from benchwarden.suites.contamination.scoring import Legs, RungOutcomes, rung_label
from benchwarden.suites.contamination.terminal import left_out_lines
from benchwarden.targets.replies import RequestOutcome, Timings

from .helpers import (
    CANARIES,
    alternating_rungs_run,
    cancelled_by_client,
    failed,
    good,
    http_error,
    ok,
    reply_text,
)

# -- the choice ------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=shown.QUIET), max_size=80),
       st.integers(min_value=0, max_value=30))
def test_the_chosen_rungs_are_the_most_urgent_in_the_order_run(ranks, limit):
    chosen = shown.chosen_rungs(ranks, limit)
    assert chosen == sorted(chosen)
    assert len(chosen) == min(limit, len(ranks))
    if len(ranks) <= limit:
        assert chosen == list(range(len(ranks)))
    left = set(range(len(ranks))) - set(chosen)
    for kept in chosen:  # nothing left out is more urgent (or as urgent and earlier)
        for dropped in left:
            assert (ranks[kept], kept) < (ranks[dropped], dropped)


lanes = st.lists(st.tuples(st.integers(min_value=0, max_value=600), st.booleans(),
                           st.booleans()), max_size=300)


@settings(max_examples=300, deadline=None)
@given(lanes, st.integers(min_value=1, max_value=140))
def test_the_chosen_lanes_keep_every_scored_one_then_failed_ones_first(drawn, limit):
    every = [shown.Lane(key, slot, scored, failed)
             for key, (slot, scored, failed) in enumerate(drawn)]
    chosen = shown.chosen_lanes(every, limit)
    assert [(lane.slot, lane.key) for lane in chosen] == sorted((lane.slot, lane.key)
                                                                 for lane in chosen)
    scored = [lane for lane in every if lane.scored]
    assert set(scored) <= set(chosen)
    assert len(chosen) == (len(every) if len(every) <= limit else max(limit, len(scored)))
    dropped = set(every) - set(chosen)
    for kept in chosen:
        if kept.scored:
            continue
        for left in dropped:  # an unscored lane kept is at least as urgent as one dropped
            assert (not kept.failed, kept.slot, kept.key) < (not left.failed, left.slot,
                                                              left.key)


@pytest.mark.parametrize(("kinds", "failed", "state", "rank"), [
    ({"identical", "contaminated", "diverged"}, 3, "unmeasured", shown.LEAKED),
    ({"identical", "diverged"}, 0, "as_labelled", shown.DIVERGED),
    ({"unmeasured"}, 2, "unmeasured", shown.FAILED),
    ({"unmeasured"}, 0, "unmeasured", shown.UNMEASURED),
    ({"identical"}, 0, "below_label", shown.BELOW_LABEL),
    ({"identical"}, 0, "as_labelled", shown.QUIET),
])
def test_a_rung_is_ranked_by_its_worst_finding(kinds, failed, state, rank):
    assert shown.rung_rank(kinds, failed, state) == rank


# -- the fidelity counted as the store streams ---------------------------------------------------

def _outcome(kind: int, start: float, length: float) -> RequestOutcome:
    if kind == 0:
        return ok("x", start=start, end=start + length)
    if kind == 1:
        return http_error(500)
    if kind == 2:
        return cancelled_by_client(0)
    if kind == 3:  # a reply that came with an error (cut off after some content)
        return dataclasses.replace(ok("partial", start=start, end=start + length),
                                   error="stream stalled for 60 s")
    if kind == 5:  # text that is not valid UTF-8 is stored in another form (restored)
        return failed("server said \udcff\udcfe then closed", at=start)
    return RequestOutcome(Timings(sent_at=start, first_content_at=start + length / 2))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(min_value=0, max_value=5),
                          st.floats(min_value=0, max_value=5, allow_nan=False),
                          st.floats(min_value=0, max_value=3, allow_nan=False),
                          st.booleans()), max_size=40))
def test_a_rung_counted_a_request_at_a_time_has_the_fidelity_of_all_its_outcomes(requests):
    outcomes = [_outcome(kind, start, length) for kind, start, length, _ in requests]
    planned = [cut for *_, cut in requests]
    whole, slim = RungTally(), RungTally()
    for outcome, cut in zip(outcomes, planned, strict=True):
        whole.add(outcome, cut)
        # what the report streams for a ballast request: the stored outcome, reply unread
        slim.add(report_module._fidelity_view(outcome.to_json_dict()), cut)
    expected = rung_fidelity("c8", 8, 3, outcomes, planned)
    assert whole.fidelity("c8", 8, 3) == expected
    assert slim.fidelity("c8", 8, 3) == expected


# -- a large synthetic store ---------------------------------------------------------------------

PROBES = 2
LEVELS = (4, 16)


def _write_run(store: SQLiteStore, repeat: int) -> str:
    """A finished run of `repeat` repetitions of rungs c4 and c16 over two probes. Late in
    the run one rung leaks a canary, one diverges and one has a failed ballast request."""
    probe_set = [{"index": i, "canary": CANARIES[i], "topic": f"topic {i}"}
                 for i in range(PROBES)]
    bodies = [{"messages": [{"role": "user", "content": f"probe {i}"}]} for i in range(PROBES)]
    config = {"scope": "", "probe_set": probe_set, "concurrency": list(LEVELS),
              "repeat": repeat, "min_completion_tokens": 4, "request_bodies": bodies,
              "scenario": "shared-prefix", "seed": 1}
    run = stamp_run(suite=SUITE, bench_version=scoring.BENCH_VERSION, config=config,
                    target={"url": "http://127.0.0.1:1/v1", "model": "m"})
    run = dataclasses.replace(run, config={**config, "scope": run.run_id})
    plan = Plan(run.run_id, run.run_id, tuple(bodies), LEVELS, repeat, "shared-prefix")
    store.begin_run(run)
    clock = 100.0

    def solo(leg: str) -> None:
        nonlocal clock
        store.append([make_record(plan, run.run_id, leg, str(p), 1, p, p,
                                  good(p, start=clock, end=clock + 0.5), None)
                      for p in range(PROBES)])
        clock += 1.0

    for leg in ("prime", "ref_a", "ref_b"):
        solo(leg)
    for repetition in range(1, repeat + 1):
        for level in LEVELS:
            slots = plan.slots(level)
            outcomes = []
            for index in range(slots):
                probe = index % PROBES
                start, end = clock + index * 0.001, clock + 0.5
                text = reply_text(probe)
                if repetition == repeat and level == LEVELS[0] and index == 0:
                    text += " " + CANARIES[1]  # a leak, in the last repetition
                if repetition == repeat - 1 and level == LEVELS[1] and index == 1:
                    text = text.replace("w1x3", "w1xX")  # a divergence
                outcome = ok(text, start=start, end=end)
                if repetition == repeat - 2 and level == LEVELS[1] and index == slots - 1:
                    outcome = failed("HTTP 500 from POST http://127.0.0.1:1/v1/chat/"
                                     "completions: fake", at=start, status=500)  # ballast
                outcomes.append(outcome)
            store.append([make_record(plan, run.run_id, rung_label(level),
                                      str(i) if i < PROBES else f"ballast-{i}", repetition,
                                      i % PROBES, i, outcome, None, level)
                          for i, outcome in enumerate(outcomes)])
            clock += 1.0
    solo("post")
    store.finish_run(RunEnd(run.run_id, clock, "completed", {}))
    return run.run_id


def _recount(store: SQLiteStore, run_id: str) -> scoring.Score:
    """The score computed the way the report did before it streamed: every record
    decoded whole, each rung's fidelity from all its outcomes."""
    return _recount_levels(store, run_id, LEVELS)


def _recount_levels(store: SQLiteStore, run_id: str, levels) -> scoring.Score:
    config = store.run_info(run_id).run.config
    records = store.records(suite=SUITE, scope=config["scope"])
    by_address = {(r.arm, r.task, r.trial): r for r in records}

    def outcome(record):
        return None if record is None else RequestOutcome.from_json_dict(
            record.payload["outcome"])

    def solo(leg):
        return [outcome(by_address.get((leg, str(i), 1))) for i in range(PROBES)]

    rungs = []
    for repetition in range(1, int(config["repeat"]) + 1):
        for level in levels:
            label = rung_label(level)
            sent = sorted((r for r in records if r.arm == label and r.trial == repetition),
                          key=lambda r: r.payload["slot"])
            rungs.append(RungOutcomes(
                label, level, repetition,
                [outcome(by_address.get((label, str(i), repetition))) for i in range(PROBES)],
                [outcome(r) for r in sent],
                [r.payload.get("cancel_after_deltas") is not None for r in sent]))
    return scoring.score(Legs(ref_a=solo("ref_a"), ref_b=solo("ref_b"), rungs=rungs,
                              post=solo("post"), canaries=[p["canary"]
                                                           for p in config["probe_set"]],
                              min_completion_tokens=4))


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """Two stores over the caps, one five times the other."""
    made = {}
    for repeat in (30, 150):
        path = tmp_path_factory.mktemp("scale") / f"r{repeat}.sqlite"
        with SQLiteStore(path) as store:
            made[repeat] = (path, _write_run(store, repeat))
    return made


def _built(path, run_id):
    with SQLiteStore(path, create=False) as store:
        return build_report(store, run_id)


@pytest.mark.parametrize("repeat", [30, 150])
def test_a_capped_report_counts_every_record_and_lists_what_needs_attention(stores, repeat):
    path, run_id = stores[repeat]
    built = _built(path, run_id)
    with SQLiteStore(path, create=False) as store:
        recount = _recount(store, run_id)
        recorded = len(store.records(suite=SUITE, scope=run_id))
    assert msgspec.to_builtins(built.score) == recount.counters()
    assert built.verdict is not None
    assert (built.verdict.kind, built.verdict.reason) == (scoring.verdict(recount).kind,
                                                          scoring.verdict(recount).reason)
    assert (built.score.contaminated, built.score.diverged, built.score.unmeasured) == (
        1, 1, PROBES)
    assert built.rungs_total == 2 * repeat and len(built.rungs) == shown.RUNG_LIMIT
    assert built.requests_total == recorded > len(built.requests)
    assert built.cells_total == len(recount.cells) > len(built.cells)
    assert sum(built.rungs_left_out.values()) == 2 * repeat - shown.RUNG_LIMIT
    assert built.export_command.startswith("benchwarden export --store ")
    # the leak, the divergence and the failed request are listed though they came last
    listed = {(rung.label, rung.repeat) for rung in built.rungs}
    assert {("c4", repeat), ("c16", repeat - 1), ("c16", repeat - 2)} <= listed
    kinds = Counter(cell.kind for cell in built.cells)
    assert (kinds["contaminated"], kinds["diverged"]) == (1, 1)
    failing = next(r for r in built.rungs if (r.label, r.repeat) == ("c16", repeat - 2))
    assert failing.requests_failed == 1
    assert [(r.label, r.repeat) for r in built.rungs] == [
        (f.label, f.repeat) for f in recount.fidelity if (f.label, f.repeat) in listed]
    # every listed rung's fidelity is the one computed from all its outcomes
    fits = {(f.label, f.repeat): f.to_json_dict() for f in recount.fidelity}
    for rung in built.rungs:
        assert {k: v for k, v in msgspec.to_builtins(rung).items()
                if k != "requests_listed"} == fits[(rung.label, rung.repeat)]
    lines = left_out_lines(built)
    assert any(f"of {2 * repeat} rungs" in line for line in lines)


def test_the_page_is_bounded_whatever_the_number_of_records(stores):
    pages = {repeat: render_html(_built(path, run_id))
             for repeat, (path, run_id) in stores.items()}
    small, large = len(pages[30].encode()), len(pages[150].encode())
    assert large < 2_000_000  # a few hundred kilobytes here; the bound is 20 MB
    assert large < small * 1.05  # five times the records, the same page
    assert "Showing 24 of 300 rungs" in pages[150]
    assert "benchwarden export --store" in pages[150]
    assert "The divergences of the listed rungs" in pages[150]
    assert "Drawing" not in pages[150]  # no rung here is wider than LANE_LIMIT


def test_the_capped_report_is_the_uncapped_one_cut_down(stores, monkeypatch):
    """With the caps lifted the report lists everything; cutting that down
    (`within_caps`, which the page applies to report files written before the caps)
    gives exactly the report built under the caps."""
    path, run_id = stores[30]
    capped = _built(path, run_id)
    monkeypatch.setattr(shown, "RUNG_LIMIT", 10_000)
    monkeypatch.setattr(shown, "LANE_LIMIT", 10_000)
    uncapped = _built(path, run_id)
    with SQLiteStore(path, create=False) as store:
        assert len(uncapped.requests) == len(store.records(suite=SUITE, scope=run_id))
    assert uncapped.rungs_total is msgspec.UNSET and uncapped.export_command is msgspec.UNSET
    assert "rungs_total" not in json.dumps(msgspec.to_builtins(uncapped))
    monkeypatch.undo()
    # a report file written before the caps renders as bounded as a new one
    old_page = render_html(msgspec.to_builtins(uncapped))
    assert "Showing 24 of 60 rungs" in old_page
    assert len(old_page) < 1.2 * len(render_html(capped))
    cut = within_caps(uncapped)
    for name in ("rungs", "cells", "requests", "rungs_total", "cells_total", "requests_total",
                 "rungs_left_out", "score", "verdict"):
        assert msgspec.to_builtins(getattr(cut, name)) == msgspec.to_builtins(
            getattr(capped, name)), name


def test_a_wide_rung_lists_its_scored_and_failed_requests_first(tmp_path, monkeypatch):
    monkeypatch.setattr(shown, "LANE_LIMIT", 5)
    with SQLiteStore(tmp_path / "s.sqlite") as store:
        run_id = _write_run(store, 3)
        built = build_report(store, run_id)
    wide = next(r for r in built.rungs if (r.label, r.repeat) == ("c16", 1))
    assert wide.requests_listed == 5 and wide.requests_sent == 16
    # repetition 1 of c16 has the failed ballast request (slot 15): the two scored
    # requests, then it, then the first others by slot
    drawn = [e for e in built.requests if (e.leg, e.repeat) == ("c16", 1)]
    assert [e.slot for e in drawn] == [0, 1, 2, 3, 15]
    assert drawn[-1].status == "error"
    # times stay relative to the rung's first send over all its requests
    assert drawn[0].sent_ms == 0.0
    assert built.requests_total == 4 * PROBES + 3 * (4 + 16)


def test_a_report_module_keeps_no_outcome_of_an_unscored_request(stores):
    path, run_id = stores[30]
    with SQLiteStore(path, create=False) as store:
        config = store.run_info(run_id).run.config
        reading = report_module.read_scope(store.records(suite=SUITE, scope=run_id), config)
    assert len(reading.scored_outcomes) == 2 * 30 * PROBES
    assert len(reading.solo) == 4 * PROBES


def test_a_replay_of_a_rung_listed_in_part_sends_every_slot_of_it(tmp_path, monkeypatch):
    from benchwarden.suites.contamination.repro import replay_plan

    with SQLiteStore(tmp_path / "s.sqlite") as store:
        run_id = _write_run(store, 3)
        monkeypatch.setattr(shown, "LANE_LIMIT", 3)
        capped = build_report(store, run_id)
        monkeypatch.setattr(shown, "LANE_LIMIT", 10_000)
        whole = build_report(store, run_id)
    leak = next(r for r in capped.rungs if (r.label, r.repeat) == ("c4", 3))
    assert leak.requests_listed == 3
    plan, expected = replay_plan(capped), replay_plan(whole)
    assert plan is not None and expected is not None
    assert plan["cell_class"] == "contaminated" and len(expected["slots"]) == 4
    assert plan["slots"] == expected["slots"]


def test_a_scored_reply_shares_its_reference_only_when_the_scoring_cannot_tell_them_apart():
    reference = good(0).reply
    same = good(0, start=5.0, end=6.0)
    shared = report_module._sharing_reply(same, reference)
    assert shared.reply is reference and shared.timings == same.timings
    assert scoring.classify(reference, shared, CANARIES[0], CANARIES, 4,
                            persistent_leg=False) == scoring.classify(
        reference, same, CANARIES[0], CANARIES, 4, persistent_leg=False)
    longer = ok(reply_text(0), tokens=33)  # same text, other token count: diverged
    different_logprobs = dataclasses.replace(same, reply=dataclasses.replace(
        same.reply, token_logprobs=()))
    for own in (longer, different_logprobs, good(1), http_error()):
        assert report_module._sharing_reply(own, reference) is own


# -- any run, tiny caps: what is listed is chosen by attention, what is counted is all ----------

SLOT_KINDS = st.sampled_from(("ok", "ok", "ok", "diverged", "failed", "leaked", "cancelled",
                              "garbled_error", "garbled_reply", "nested_extra"))


def _write_drawn_run(store: SQLiteStore, rungs: list[list[str]]) -> str:
    """A run of two probes whose rungs (c2, c4 alternating, repeated) have the drawn kind
    of request in each slot."""
    run, plan = alternating_rungs_run(len(rungs), PROBES)
    store.begin_run(run)
    for leg in ("ref_a", "ref_b", "post"):
        store.append([make_record(plan, run.run_id, leg, str(p), 1, p, p,
                                  good(p, start=1.0, end=1.5), None) for p in range(PROBES)])
    for index, kinds in enumerate(rungs):
        level, repetition = (2, 4)[index % 2], index // 2 + 1
        records = []
        for slot, kind in enumerate(kinds):
            probe, start = slot % PROBES, 10.0 + index + slot * 0.01
            text = reply_text(probe)
            outcome = ok(text, start=start, end=start + 0.5)
            if kind == "diverged":
                outcome = ok(text.replace("x3", "xX"), start=start, end=start + 0.5)
            elif kind == "leaked":
                outcome = ok(text + CANARIES[1 - probe], start=start, end=start + 0.5)
            elif kind == "failed":
                outcome = failed("HTTP 500 from POST http://h/v1: no", at=start, status=500)
            elif kind == "cancelled":
                outcome = dataclasses.replace(cancelled_by_client(probe),
                                              timings=Timings(start, start, start, start + 0.2))
            elif kind == "garbled_error":  # stored as an object: the record is read plain
                outcome = failed("server said \udcff then closed", at=start, status=502)
            elif kind == "garbled_reply":  # a reply text stored as an object
                outcome = ok(text + "\udc80", start=start, end=start + 0.5)
            elif kind == "nested_extra":  # nested extra values, one in its stored form
                outcome = dataclasses.replace(outcome, extra={"note": {"said": ["\udcfe", 1]}})
            records.append(make_record(plan, run.run_id, rung_label(level),
                                       str(slot) if slot < PROBES else f"ballast-{slot}",
                                       repetition, probe, slot, outcome, None, level))
        store.append(records)
    return run.run_id


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(SLOT_KINDS, min_size=4, max_size=7), min_size=1, max_size=12),
       st.integers(min_value=1, max_value=4), st.integers(min_value=2, max_value=5))
def test_any_run_lists_what_needs_attention_and_counts_everything(rungs, rung_limit,
                                                                  lane_limit):
    from unittest import mock

    with SQLiteStore(":memory:") as store, \
            mock.patch.object(shown, "RUNG_LIMIT", rung_limit), \
            mock.patch.object(shown, "LANE_LIMIT", lane_limit):
        run_id = _write_drawn_run(store, rungs)
        built = build_report(store, run_id)
        recount = _recount_levels(store, run_id, (2, 4))
        recorded = store.records(suite=SUITE, scope=run_id)
    assert msgspec.to_builtins(built.score) == recount.counters()
    assert (built.verdict.kind, built.verdict.reason) == (scoring.verdict(recount).kind,
                                                          scoring.verdict(recount).reason)
    kinds: dict = {}
    for cell in recount.cells:
        kinds.setdefault((cell.leg, cell.repeat), set()).add(cell.result.kind)
    ranks = {(f.label, f.repeat): shown.rung_rank(kinds.get((f.label, f.repeat), ()),
                                                  f.requests_failed, f.state)
             for f in recount.fidelity}
    listed = [(rung.label, rung.repeat) for rung in built.rungs]
    assert len(listed) == min(rung_limit, len(recount.fidelity))
    worst_listed = max(ranks[key] for key in listed)
    assert all(ranks[key] >= worst_listed for key in ranks if key not in listed)
    # every listed rung's requests: all scored ones, then failed ones before others
    for rung in built.rungs:
        mine = [r for r in recorded if (r.arm, r.trial) == (rung.label, rung.repeat)]
        drawn = {e.slot for e in built.requests if (e.leg, e.repeat) == (rung.label,
                                                                          rung.repeat)}
        assert {r.payload["slot"] for r in mine if r.task.isdigit()} <= drawn
        failing = {r.payload["slot"] for r in mine if r.outcome != "ok"}
        if any(r.payload["slot"] not in failing and not r.task.isdigit()
               and r.payload["slot"] in drawn for r in mine):
            assert failing <= drawn
        assert len(drawn) == min(len(mine), max(lane_limit, PROBES))
    assert (built.requests_total if isinstance(built.requests_total, int)
            else len(built.requests)) == len(recorded)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(SLOT_KINDS, min_size=4, max_size=7), min_size=1, max_size=8),
       st.integers(min_value=1, max_value=4), st.integers(min_value=2, max_value=5))
def test_the_report_read_with_replies_unparsed_is_the_report_read_plain(rungs, rung_limit,
                                                                        lane_limit):
    """The pass reads stored outcomes typed (`StoredOutcome`, a ballast reply never
    parsed); read as plain JSON values instead, as the store hands over a record that
    does not fit, every byte of the report is the same."""
    from unittest import mock

    with SQLiteStore(":memory:") as store, \
            mock.patch.object(shown, "RUNG_LIMIT", rung_limit), \
            mock.patch.object(shown, "LANE_LIMIT", lane_limit):
        run_id = _write_drawn_run(store, rungs)
        typed = build_report(store, run_id)
        with mock.patch.object(report_module, "PAYLOAD_TYPES", {}):
            plain = build_report(store, run_id)
    assert msgspec.json.encode(typed) == msgspec.json.encode(plain)
    assert render_html(typed) == render_html(plain)
