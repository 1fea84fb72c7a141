"""Rung digests in the run end: the report read through them is the report read from every
record, and a digest that disagrees with its records is caught.

The stores are written through the store API as the driver writes them (`make_record`,
`digest_of`), with drawn requests (failed, cancelled, no streamed content, zero-length,
text stored in its escaped form), rungs split between an interrupted run and the run
resuming it, and some rungs' digests lost (a run killed before its end).
"""

from __future__ import annotations

import dataclasses
import json
import time

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import Record, RunEnd
from benchwarden.core.store import SQLiteStore
from benchwarden.suites.contamination import scoring, shown
from benchwarden.suites.contamination.digest import (
    SUMMARY_KEY,
    RungDigest,
    as_summary,
    digests_in,
)
from benchwarden.suites.contamination.driver import SUITE, Plan, make_record
from benchwarden.suites.contamination.html import render_html
from benchwarden.suites.contamination.report import build_report, digest_of
from benchwarden.suites.contamination.scoring import rung_label
from benchwarden.targets.replies import Candidate, RequestOutcome, Timings, TokenLogprob

from .helpers import (
    CANARIES,
    alternating_rungs_run,
    cancelled_by_client,
    failed,
    ok,
    reply_text,
)

PROBES = 2
KINDS = st.sampled_from(("ok", "ok", "ok", "diverged", "failed", "leaked", "cancelled",
                         "planned_cut", "no_content", "zero_length", "garbled_error",
                         "garbled_reply", "nested_extra", "lp_ok", "lp_diverged", "lp_leaked",
                         "lp_garbled_reply", "split_char", "odd_candidate"))


def with_logprobs(outcome: RequestOutcome) -> RequestOutcome:
    """`outcome` with token logprobs spelling its reply in 8-character tokens, each with
    top candidates that hold the other spelling of the drawn divergence (`x3` / `xX`),
    so a diverged cell classifies as a near-tie from them."""
    reply = outcome.reply
    assert reply is not None
    pieces = [reply.text[start:start + 8] for start in range(0, len(reply.text), 8)]
    tokens = tuple(TokenLogprob(piece, -0.1, (
        Candidate(piece, -0.1), Candidate(piece.replace("x3", "xX"), -0.2),
        Candidate(piece.replace("xX", "x3"), -0.25))) for piece in pieces)
    return dataclasses.replace(outcome, reply=dataclasses.replace(reply, token_logprobs=tokens))


def with_split_logprobs(outcome: RequestOutcome) -> RequestOutcome:
    """`outcome` with token logprobs in which each character outside ASCII is split
    into its UTF-8 bytes, one token each (a real engine's byte tokens): a token is then
    not valid text though the reply's text is, and is stored in its escaped form."""
    reply = outcome.reply
    assert reply is not None
    pieces = [piece for character in reply.text
              for piece in ([character] if character.isascii()
                            else [chr(0xDC00 + byte) for byte in character.encode()])]
    tokens = tuple(TokenLogprob(piece, -0.1, (Candidate(piece, -0.1), Candidate("\udcff", -0.3)))
                   for piece in pieces)
    return dataclasses.replace(outcome, reply=dataclasses.replace(reply, token_logprobs=tokens))


def _outcome(kind: str, probe: int, start: float) -> RequestOutcome:
    if kind == "split_char":  # a divergence to a character two byte tokens spell
        return with_split_logprobs(ok(reply_text(probe).replace("x3", "x\u00e9"),
                                      start=start, end=start + 0.5))
    if kind.startswith("lp_"):
        return with_logprobs(_outcome(kind[3:], probe, start))
    if kind == "odd_candidate":  # valid tokens, a candidate that is not valid text
        drawn = with_logprobs(_outcome("diverged", probe, start))
        assert drawn.reply is not None and drawn.reply.token_logprobs is not None
        steps = tuple(dataclasses.replace(step, top=(*step.top, Candidate("\udcfe", -9.0)))
                      for step in drawn.reply.token_logprobs)
        return dataclasses.replace(drawn, reply=dataclasses.replace(drawn.reply,
                                                                    token_logprobs=steps))
    text = reply_text(probe)
    outcome = ok(text, start=start, end=start + 0.5)
    if kind == "diverged":
        return ok(text.replace("x3", "xX"), start=start, end=start + 0.5)
    if kind == "leaked":
        return ok(text + CANARIES[1 - probe], start=start, end=start + 0.5)
    if kind == "failed":
        return failed("HTTP 500 from POST http://h/v1: no", at=start, status=500)
    if kind in ("cancelled", "planned_cut"):
        return dataclasses.replace(cancelled_by_client(probe),
                                   timings=Timings(start, start, start, start + 0.2))
    if kind == "no_content":  # a reply whose content never streamed: no interval
        return dataclasses.replace(outcome, timings=Timings(start, start, None, start + 0.1))
    if kind == "zero_length":
        return dataclasses.replace(outcome, timings=Timings(start, start, start, start))
    if kind == "garbled_error":  # stored as an object: the record is read plain
        return failed("server said \udcff then closed", at=start, status=502)
    if kind == "garbled_reply":
        return ok(text + "\udc80", start=start, end=start + 0.5)
    if kind == "nested_extra":
        return dataclasses.replace(outcome, extra={"note": {"said": ["\udcfe", 1]}})
    return outcome


def _rung_records(plan: Plan, run_id: str, index: int, kinds: list[str]) -> list[Record]:
    level, repetition = (2, 4)[index % 2], index // 2 + 1
    records = []
    for slot, kind in enumerate(kinds):
        probe, start = slot % PROBES, 10.0 + index + slot * 0.01
        cut = 4 if kind == "planned_cut" or (kind == "ok" and slot >= 5) else None
        records.append(make_record(plan, run_id, rung_label(level),
                                   str(slot) if slot < PROBES else f"ballast-{slot}",
                                   repetition, probe, slot, _outcome(kind, probe, start),
                                   cut, level))
    return records


def write_run(store: SQLiteStore, rungs: list[list[str]], resumed_at: int | None,
              ends: tuple[bool, bool], *, reference_logprobs: bool = True,
              older_digests: bool = False, late_reference: str | None = None) -> str:
    """A run of two probes whose rungs (c2, c4 alternating, repeated) hold the drawn
    requests; from rung `resumed_at` on, written by a run resuming the first (which
    ended interrupted). `ends`: whether each run recorded its end (with its digests).
    `reference_logprobs`: the solo legs' replies carry token logprobs (then a rung's `ok`
    reply, which has none, is not its reference's bytes; an `lp_ok` one is).
    `older_digests`: digests as a version before reply fingerprints wrote them.
    `late_reference`: a drawn kind of outcome written as probe 0's `ref_a` after the
    rungs, not before them (no driver writes one there)."""
    first, plan = alternating_rungs_run(len(rungs), PROBES)
    store.begin_run(first)
    for leg in ("prime", "ref_a", "ref_b"):
        store.append([make_record(plan, first.run_id, leg, str(p), 1, p, p,
                                  solo_outcome(p, reference_logprobs), None)
                      for p in range(PROBES)
                      if not (leg == "ref_a" and p == 0 and late_reference is not None)])
    run_id, digests = first.run_id, []
    for index, kinds in enumerate(rungs):
        if index == resumed_at:
            _end(store, run_id, "interrupted", digests, ends[0])
            resumed = stamp_run(suite=SUITE, bench_version=scoring.BENCH_VERSION,
                                config=first.config, resumed_from=first.run_id)
            store.begin_run(resumed)
            run_id, digests = resumed.run_id, []
        records = _rung_records(plan, run_id, index, kinds)
        store.append(records)
        digests.extend(as_older(digest) if older_digests else digest
                       for digest in digest_of(records))
    if late_reference is not None:
        store.append([make_record(plan, run_id, "ref_a", "0", 1, 0, 0,
                                  _outcome(late_reference, 0, 80.0), None)])
    store.append([make_record(plan, run_id, "post", str(p), 1, p, p,
                              ok(reply_text(p), start=90.0, end=90.5), None)
                  for p in range(PROBES)])
    _end(store, run_id, "completed", digests, ends[resumed_at is not None])
    return first.run_id


def solo_outcome(probe: int, logprobs: bool) -> RequestOutcome:
    """A solo leg's reply to `probe` (the reference every `ok` rung reply repeats)."""
    outcome = ok(reply_text(probe), start=1.0, end=1.5)
    return with_logprobs(outcome) if logprobs else outcome


def as_older(digest: RungDigest) -> RungDigest:
    """`digest` as a version before reply fingerprints wrote it (no level, no replies)."""
    return msgspec.structs.replace(digest, level=None, scored_replies=None)


def _end(store: SQLiteStore, run_id: str, status: str, digests: list[RungDigest],
         recorded: bool) -> None:
    if recorded:
        store.finish_run(RunEnd(run_id, time.time(), status, {SUMMARY_KEY: as_summary(digests)}))


def _same(first, second) -> None:
    assert msgspec.json.encode(first) == msgspec.json.encode(second)
    assert render_html(first) == render_html(second)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(KINDS, min_size=PROBES, max_size=7), min_size=1, max_size=10),
       st.none() | st.integers(min_value=0, max_value=9), st.tuples(st.booleans(), st.booleans()),
       st.integers(min_value=1, max_value=4), st.integers(min_value=2, max_value=5),
       st.booleans(), st.booleans())
def test_the_report_read_through_digests_is_the_report_read_from_every_record(
        rungs, resumed_at, ends, rung_limit, lane_limit, reference_logprobs, older_digests):
    from unittest import mock

    if resumed_at is not None and resumed_at >= len(rungs):
        resumed_at = None
    with SQLiteStore(":memory:") as store, \
            mock.patch.object(shown, "RUNG_LIMIT", rung_limit), \
            mock.patch.object(shown, "LANE_LIMIT", lane_limit):
        run_id = write_run(store, rungs, resumed_at, ends, reference_logprobs=reference_logprobs,
                           older_digests=older_digests)
        through_digests = build_report(store, run_id)
        from_records = build_report(store, run_id, digests=False)
    assert not any("digest" in warning or "summarises" in warning
                   for warning in [*through_digests.warnings, *from_records.warnings])
    _same(through_digests, from_records)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(KINDS, min_size=PROBES, max_size=6), min_size=1, max_size=8),
       st.integers(min_value=1, max_value=4))
def test_scored_replies_read_without_logprobs_report_as_read_whole(rungs, rung_limit):
    """The scoring's first reading leaves scored replies' token logprobs out and reads
    whole the cells whose divergence it classifies: the report is the one read whole."""
    from unittest import mock

    from benchwarden.suites.contamination import report as report_module

    def whole(record):
        return report_module._outcome(record), None

    def read_as_records(self, store, scope, places):  # not by their outcome alone
        for _ in self._read_scored(store, scope, places):
            pass

    with SQLiteStore(":memory:") as store, mock.patch.object(shown, "RUNG_LIMIT", rung_limit):
        run_id = write_run(store, rungs, None, (True, True))
        light = build_report(store, run_id)
        with mock.patch.object(report_module, "_scored_outcome", whole), \
                mock.patch.object(report_module.ScopeReading, "_read_scored_outcomes",
                                  read_as_records):
            read_whole = build_report(store, run_id)
    _same(light, read_whole)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.sampled_from(("lp_ok", "lp_diverged", "lp_leaked", "diverged", "ok",
                                          "failed")), min_size=PROBES, max_size=6),
                min_size=1, max_size=6), st.booleans())
def test_a_diverged_reply_is_classified_from_the_one_reading_of_its_record(rungs, digests):
    """Each scored reply's divergence evidence is taken as the reply is read without its
    token logprobs: no record is read a second time for them, whether the rungs are read
    through their digests or record by record (a soak that diverges everywhere is read
    once). Every class is still the one the whole replies give."""
    from unittest import mock

    from benchwarden.suites.contamination import report as report_module

    read_again = []
    original = report_module._logged_reply

    def counting(stored):
        read_again.append(stored)
        return original(stored)

    with SQLiteStore(":memory:") as store:
        run_id = write_run(store, rungs, None, (True, True))
        with mock.patch.object(report_module, "_logged_reply", counting):
            built = build_report(store, run_id, digests=digests)
    assert read_again == []
    if any("lp_diverged" in rung[:PROBES] and "failed" not in rung for rung in rungs):
        assert built.score.near_tie > 0  # classified from the evidence


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(KINDS, min_size=PROBES, max_size=6), min_size=1, max_size=4))
def test_a_scored_outcome_read_alone_is_the_one_read_with_its_record(rungs):
    """A scored request's outcome read by itself, its reply decoded in the same pass
    (`_ScoredStoredOutcome`), is the outcome and logprob flag the record's summary
    read gives, whatever the outcome holds (failures, escaped text, nested extras,
    logprobs); and its address is the record's."""
    from benchwarden.suites.contamination import report as report_module

    with SQLiteStore(":memory:") as store:
        run_id = write_run(store, rungs, None, (True, True))
        scope = str(store.run_info(run_id).run.config["scope"])
        summaries = [summary for summary in report_module._stored_requests(store, scope)
                     if summary.task.isdigit() and summary.arm.startswith("c")]
        alone = list(store.iter_payload_field_at(
            [summary.seq for summary in summaries], suite=SUITE, scope=scope,
            field="outcome", kind=report_module._ScoredStoredOutcome))
    assert summaries
    assert [(p.seq, p.arm, p.task, p.trial) for p in alone] == [
        (s.seq, s.arm, s.task, s.trial) for s in summaries]
    for summary, place in zip(summaries, alone, strict=True):
        assert report_module._scored_fields_outcome(place.value) \
            == report_module._scored_outcome(summary)


def test_a_diverged_cell_is_classified_from_its_logprobs_read_back():
    with SQLiteStore(":memory:") as store:
        run_id = write_run(store, [["lp_diverged", "lp_ok", "lp_ok"], ["lp_ok", "lp_ok"]],
                           None, (True, True))
        built = build_report(store, run_id)
    (cell,) = [cell for cell in built.cells if cell.kind == "diverged"]
    assert cell.divergence is not None and cell.divergence.kind == "near-tie"
    assert cell.divergence.reference_token is not None


def test_a_digest_is_what_the_full_pass_counts_of_its_rung():
    plan = Plan("r", "r", ({}, {}), (2, 4), 1, "shared-prefix")
    records = _rung_records(plan, "r", 1, ["ok", "failed", "cancelled", "planned_cut", "ok",
                                           "no_content", "ok"])
    (digest,) = digest_of(records)
    assert (digest.leg, digest.repeat, digest.sent) == ("c4", 1, 7)
    assert digest.statuses == [("ok", 4), ("error", 1), ("cancelled", 2)]
    # the off-plan cut and the HTTP 500 failed; the planned cut did not
    assert dict(digest.failures) == {"HTTP 500": 1, "cancelled off plan": 1}
    assert digests_in({SUMMARY_KEY: as_summary([digest])}) == [digest]
    assert digests_in({SUMMARY_KEY: [{"leg": "c4"}]}) == []  # a shape not read: none


def _store_with_end(digests_of, tmp_path) -> tuple[SQLiteStore, str]:
    """A completed run whose end holds `digests_of(true digests)`."""
    store = SQLiteStore(tmp_path / "s.sqlite")
    rungs = [["ok", "ok", "ok", "ok"], ["ok", "ok", "failed", "ok", "ok"], ["ok"] * 4]
    run_id = write_run(store, rungs, None, (False, False))
    plan = Plan(run_id, run_id, ({}, {}), (2, 4), 2, "shared-prefix")
    true = [digest for index, kinds in enumerate(rungs)
            for digest in digest_of(_rung_records(plan, run_id, index, kinds))]
    store.finish_run(RunEnd(run_id, time.time(), "completed",
                            {SUMMARY_KEY: as_summary(digests_of(true))}))
    return store, run_id


def test_a_digest_counting_other_requests_than_the_store_holds_is_not_used(tmp_path):
    store, run_id = _store_with_end(
        lambda true: [msgspec.structs.replace(true[0], sent=true[0].sent + 1), *true[1:]],
        tmp_path)
    with store:
        built = build_report(store, run_id)
        whole = build_report(store, run_id, digests=False)
    (warning,) = [w for w in built.warnings if "summarises" in w]
    assert "rung c2 #1 as 5 requests but the store holds 4 records" in warning
    assert msgspec.json.encode(msgspec.structs.replace(built, warnings=whole.warnings)) == \
        msgspec.json.encode(whole)


@pytest.mark.parametrize("edit", [
    {"peak_in_flight": 1}, {"failures": []}, {"first_send": 0.0},
    {"statuses": [("ok", 5)]}])
def test_a_listed_rung_whose_records_disagree_with_its_digest_is_read_from_records(
        tmp_path, edit):
    store, run_id = _store_with_end(
        lambda true: [true[0], msgspec.structs.replace(true[1], **edit), true[2]], tmp_path)
    with store:
        built = build_report(store, run_id)
        whole = build_report(store, run_id, digests=False)
    assert built.warnings[-1] == ("rung c4 #1 read from its records differs from its digest "
                                  "in the run's end: the report is read from the records "
                                  "alone")
    assert msgspec.json.encode(msgspec.structs.replace(built, warnings=whole.warnings)) == \
        msgspec.json.encode(whole)


@pytest.mark.parametrize("edit", [
    {"peak_in_flight": 99}, {"failures": [("HTTP 500", 9)]}, {"first_send": 0.0},
    {"statuses": [("ok", 9)]}, {"sent": 9}])
@pytest.mark.parametrize("rung", [0, 2])
def test_read_from_every_record_each_digest_is_recounted_and_one_that_differs_named(
        tmp_path, edit, rung):
    """`show --from-records` (`digests=False`): every rung's digest checked against its
    records, whether or not the report lists the rung."""
    store, run_id = _store_with_end(
        lambda true: [msgspec.structs.replace(digest, **edit) if index == rung else digest
                      for index, digest in enumerate(true)], tmp_path)
    with store:
        whole = build_report(store, run_id, digests=False)
    leg, repeat = (("c2", 1), ("c4", 1), ("c2", 2))[rung]
    assert [w for w in whole.warnings if "differs from its digest" in w] == [
        f"rung {leg} #{repeat} read from its records differs from its digest in the run's end"]
    (tmp_path / "honest").mkdir()
    honest, honest_run = _store_with_end(lambda true: true, tmp_path / "honest")
    with honest:
        assert not [w for w in build_report(honest, honest_run, digests=False).warnings
                    if "digest" in w]


def test_a_rung_digested_twice_is_read_from_its_records(tmp_path):
    store, run_id = _store_with_end(lambda true: [*true, true[0]], tmp_path)
    with store:
        _same(build_report(store, run_id), build_report(store, run_id, digests=False))


# -- the driver writes them ------------------------------------------------------------------

def test_a_killed_run_and_its_resume_keep_the_digests_of_the_rungs_they_stored(tmp_path,
                                                                              monkeypatch):
    from benchwarden.core.errors import RunInterrupted
    from benchwarden.suites.contamination import report as report_module
    from benchwarden.suites.contamination.driver import ContaminationConfig, run_contamination
    from tests.fakes import FakeOpenAIServer

    from .test_resume import KILL_AT_C4, KilledStore

    path = tmp_path / "store.sqlite"
    config = ContaminationConfig(url="", probes=2, concurrency=(2, 4), max_tokens=64, seed=3)
    with FakeOpenAIServer("clean") as server:
        config = dataclasses.replace(config, url=server.url)
        killed = KilledStore(path, KILL_AT_C4)
        with pytest.raises(RunInterrupted):
            run_contamination(config, killed, progress=False)
        run_id = killed.runs()[0].run.run_id
        killed.close()
        with SQLiteStore(path) as store:
            resumed = run_contamination(config, store, progress=False, resume=run_id)
    with SQLiteStore(path) as store:
        ends = {info.run.run_id: info.end for info in store.runs()}
        assert [d.key for d in digests_in(ends[run_id].summary)] == [("c2", 1)]
        assert [d.key for d in digests_in(ends[resumed.run.id].summary)] == [("c4", 1)]
        for digest in [*digests_in(ends[run_id].summary),
                       *digests_in(ends[resumed.run.id].summary)]:
            mine = [r for r in store.records(scope=run_id) if (r.arm, r.trial) == digest.key]
            assert digest_of(mine) == [digest]
        taken = []
        original = report_module.ScopeReading.take_digest
        monkeypatch.setattr(report_module.ScopeReading, "take_digest",
                            lambda self, digest: (taken.append(digest.key),
                                                  original(self, digest))[1])
        through_digests = build_report(store, resumed.run.id)
        assert sorted(taken) == [("c2", 1), ("c4", 1)]
        _same(through_digests, build_report(store, resumed.run.id, digests=False))
        # the run's own report (its digests still in memory) is the one read back
        # (the stored run's mappings come back with their keys sorted)
        assert json.dumps(msgspec.to_builtins(through_digests), sort_keys=True) == \
            json.dumps(msgspec.to_builtins(resumed), sort_keys=True)


@settings(max_examples=60, deadline=None)
@given(KINDS, st.integers(min_value=0, max_value=PROBES - 1))
def test_a_reply_read_again_for_its_class_gives_the_evidence_of_the_whole_reply(kind, probe):
    """A diverged reply whose evidence was not taken as it was first read is read again
    only as far as its class needs (`_logged_reply`: candidates unread; a reply holding a
    string in its stored form read whole): its evidence is the whole reply's, whatever
    it holds (byte tokens, a candidate that is not valid text, no reply at all)."""
    from benchwarden.suites.contamination import report as report_module

    outcome = _outcome(kind, probe, 1.0)
    body = msgspec.json.encode(outcome.to_json_dict())
    try:  # as the store hands it over: typed, or plain JSON when it does not fit
        stored = msgspec.json.decode(body, type=report_module.StoredOutcome)
    except msgspec.ValidationError:
        stored = msgspec.json.decode(body)
    read = report_module._logged_reply(stored)
    reference = solo_outcome(probe, True).reply
    assert reference is not None
    if outcome.reply is None:
        assert read is None
        return
    assert read is not None
    assert scoring.divergence_evidence(reference, read) \
        == scoring.divergence_evidence(reference, outcome.reply)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(KINDS, min_size=PROBES, max_size=6), min_size=1, max_size=8),
       st.none() | st.integers(min_value=0, max_value=7), st.booleans(),
       st.integers(min_value=1, max_value=4), st.integers(min_value=2, max_value=5),
       st.none() | st.sampled_from(("ok", "lp_ok", "diverged", "lp_diverged", "failed")))
def test_replies_classified_as_read_report_as_replies_scored_whole(
        rungs, resumed_at, digests, rung_limit, lane_limit, late_reference):
    """A scored reply is classified as it is read and kept as its class alone; the cells
    of the listed rungs are made again from their records. The report is the one whose
    every reply the scoring classified from the outcome, whatever the rungs hold, which
    rungs are listed, and whether a solo reference came after the rungs (then the
    classes taken against the one before are not used)."""
    from unittest import mock

    from benchwarden.suites.contamination import report as report_module

    if resumed_at is not None and resumed_at >= len(rungs):
        resumed_at = None
    made_again = []
    original_cell = scoring.rung_cell

    def counting(*args):
        made_again.append(args)
        return original_cell(*args)

    with SQLiteStore(":memory:") as store, \
            mock.patch.object(shown, "RUNG_LIMIT", rung_limit), \
            mock.patch.object(shown, "LANE_LIMIT", lane_limit):
        run_id = write_run(store, rungs, resumed_at, (True, True),
                           late_reference=late_reference)
        with mock.patch.object(scoring, "rung_cell", counting):
            judged = build_report(store, run_id, digests=digests)
        with mock.patch.object(report_module.ScopeReading, "_judgment",
                               lambda *args: None):
            whole = build_report(store, run_id, digests=digests)
    _same(judged, whole)
    assert len(made_again) <= rung_limit * PROBES  # only the listed rungs' cells
    if late_reference is None:
        listed = {(rung.label, rung.repeat) for rung in judged.rungs}
        # every listed rung's ok reply at or above the floor was counted, then made again
        assert {(args[0].rungs[args[1]].label, args[0].rungs[args[1]].repeat)
                for args in made_again} <= listed
        assert made_again or not any(
            cell.kind != "unmeasured" for cell in judged.cells if cell.level is not None)


def test_a_solo_reference_read_after_judged_replies_makes_the_classes_stale():
    """A store holds one `ref_a` record a probe (its address is unique), written before
    the rungs; records read in another order (a reference after replies were classified
    against the one before) mark the reading stale, and its classes would not be the
    scoring's: `_built` then reads the scope again without classifying as it reads."""
    from benchwarden.suites.contamination import report as report_module

    with SQLiteStore(":memory:") as store:
        run_id = write_run(store, [["lp_ok", "lp_diverged", "ok"], ["lp_ok", "lp_ok"]], None,
                           (True, True))
        config = store.run_info(run_id).run.config
        records = list(store.records(suite=SUITE, scope=run_id))
    again = next(r for r in records if r.arm == "ref_a" and r.task == "0")
    moved = [*records, dataclasses.replace(again)]  # read once more, after the rungs
    stale = report_module.read_scope(moved, config)
    assert stale.stale
    with pytest.raises(ValueError, match="another reference"):
        scoring.score(stale.legs())
    whole = report_module.read_scope(moved, config, judging=False)
    assert not whole.stale and scoring.score(whole.legs()).compared > 0
    assert not report_module.read_scope(records, config).stale


_MALFORMED = {  # where in a scored reply's stored outcome, and what the driver never writes
    "logprobs not a list": ("token_logprobs", "garbage"),
    "a token not text": ("token_logprobs", [{"token": 5, "logprob": -1.0}]),
    "a logprob not a number": ("token_logprobs", [{"token": "a", "logprob": "x"}]),
    "candidates not a list": ("token_logprobs", [{"token": "a", "logprob": -1.0, "top": "zz"}]),
    "a candidate not text": ("token_logprobs",
                             [{"token": "a", "logprob": -1.0, "top": [{"token": 1}]}]),
    "text not text": ("text", 12),
}


@pytest.mark.parametrize("digests", [True, False])
@pytest.mark.parametrize("malformed", sorted(_MALFORMED))
def test_a_scored_outcome_this_version_cannot_read_is_named_in_one_line(
        tmp_path, malformed, digests):
    """A scored record whose stored outcome is not of the driver's shape fails the
    report with one line naming the store and the record (its number and address),
    wherever it is read: through its rung's digest or record by record."""
    from unittest import mock

    from benchwarden.core.store import CorruptStore

    field_name, value = _MALFORMED[malformed]
    original_records, original_digest_of = _rung_records, digest_of
    good: dict[int, list[Record]] = {}

    def rung_records(plan, run_id, index, kinds):
        records = original_records(plan, run_id, index, kinds)
        good[id(records)] = list(records)
        if index == 0:  # probe 1's own request of the first rung
            stored = json.loads(msgspec.json.encode(records[1].payload["outcome"]))
            stored["reply"][field_name] = value
            records[1] = dataclasses.replace(records[1],
                                             payload={**records[1].payload, "outcome": stored})
        return records

    def digests_of_good(records):  # the driver counts what it wrote, which this is not
        return original_digest_of(good.get(id(records), records))

    path = tmp_path / "store.sqlite"
    with SQLiteStore(str(path)) as store, \
            mock.patch(f"{__name__}._rung_records", rung_records), \
            mock.patch(f"{__name__}.digest_of", digests_of_good):
        run_id = write_run(store, [["lp_diverged", "lp_diverged", "ok"], ["lp_ok", "lp_ok"]],
                           None, (True, True))
        seq = next(record.seq for record in store.iter_record_summaries(suite=SUITE,
                                                                          scope=run_id)
                   if (record.arm, record.task, record.trial) == ("c2", "1", 1))
        with pytest.raises(CorruptStore) as caught:
            build_report(store, run_id, digests=digests)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message
    assert f"record {seq} (c2, task 1, repeat 1)" in message and "cannot read" in message


def test_a_stale_reading_is_read_again_without_classifying_as_read(tmp_path):
    """When the first reading is stale (a reference read after replies were classified
    against another), the report reads the scope again, classifying in the score, and
    is the report the first reading would have given, its warnings said once."""
    from unittest import mock

    from benchwarden.suites.contamination import report as report_module

    readings = []
    original = report_module._scope_reading

    def staled(*args, **kwargs):
        found = original(*args, **kwargs)
        if kwargs["judging"]:
            found.stale = True  # as a late reference would make it
        readings.append(kwargs["judging"])
        return found

    store, run_id = _store_with_end(  # a digest that miscounts its rung: one warning
        lambda true: [msgspec.structs.replace(true[0], sent=true[0].sent + 1), *true[1:]],
        tmp_path)
    with store:
        expected = build_report(store, run_id)
        with mock.patch.object(report_module, "_scope_reading", staled):
            again = build_report(store, run_id)
    assert readings == [True, False]
    _same(again, expected)
    assert len([w for w in again.warnings if "summarises" in w]) == 1


@pytest.mark.parametrize("leg, repeat", [("c8", 7), ("ref_a", 1)])
def test_read_from_every_record_a_digest_of_no_rung_read_is_named(tmp_path, leg, repeat):
    """The recount compares each rung once its last record is read; a digest of a rung
    the store holds no record of (or of a solo leg, which has no digest) never meets
    one, and is named all the same."""
    store, run_id = _store_with_end(
        lambda true: [*true, msgspec.structs.replace(true[0], leg=leg, repeat=repeat)],
        tmp_path)
    with store:
        whole = build_report(store, run_id, digests=False)
    assert [w for w in whole.warnings if "differs from its digest" in w] == [
        f"rung {leg} #{repeat} read from its records differs from its digest in the run's end"]
