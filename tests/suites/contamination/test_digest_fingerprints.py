"""Reply fingerprints in rung digests (docs/decisions/0006): a scored reply whose stored
bytes are its reference's is taken from its digest unread, the first of each other
fingerprint of a probe is read and shared by the later ones, and a fingerprint that does
not match its record is caught wherever records are read.

Stores are written through the store API as the driver writes them (`make_record`,
`digest_of`, `digests_as_stored`); the reports are compared with the one read from every
record (`digests=False`), which never trusts a digest.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Iterator
from unittest import mock

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchwarden.core import secrets
from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import RunEnd, RunSummary
from benchwarden.core.store import SQLiteStore
from benchwarden.suites.contamination import report as report_module
from benchwarden.suites.contamination import scoring, shown
from benchwarden.suites.contamination.digest import (
    SUMMARY_KEY,
    RungDigest,
    StoredRungDigest,
    as_summary,
    digest_from,
    digests_in,
    fingerprint,
    stored_digests_in,
)
from benchwarden.suites.contamination.driver import SUITE, Plan, digests_as_stored, make_record
from benchwarden.suites.contamination.fidelity import RungTally
from benchwarden.suites.contamination.report import (
    PAYLOAD_FIELDS,
    PAYLOAD_TYPES,
    StoredOutcome,
    build_report,
    digest_of,
    reply_fingerprint,
    scored_form,
)
from benchwarden.suites.contamination.scoring import rung_label
from benchwarden.targets.replies import (
    Candidate,
    Reply,
    RequestOutcome,
    Timings,
    TokenLogprob,
    ToolCall,
)
from tests.core.test_store_backends import (  # noqa: F401 (fixtures)
    backend,
    postgres_database,
)

from .helpers import CANARIES, alternating_rungs_run, ok, reply_text
from .test_digest import PROBES, _same, solo_outcome, write_run
from .test_digest import _outcome as _digest_outcome

SCORED_KINDS = st.sampled_from(("ok", "ok", "ok", "diverged", "failed", "leaked", "lp_ok",
                                "garbled_reply", "no_content"))


def _scored_reads(store, run_id) -> list[tuple[str, str, int]]:
    """`(leg, task, repeat)` of every rung's scored request the digest read of the run
    reads (`_read_with_digests`, the listing's read-back aside), whole (as the full pass
    reads a record) or its outcome alone."""
    read: list[tuple[str, str, int]] = []
    original = report_module._stored_requests
    one_field = store.iter_payload_field_at

    def counting(store, scope, seqs=None):
        for summary in original(store, scope, seqs):
            if summary.arm not in report_module.SOLO_LEGS and summary.task.isdigit():
                read.append((summary.arm, summary.task, summary.trial))
            yield summary

    def counting_fields(seqs, **where):
        for place in one_field(seqs, **where):
            if place.arm not in report_module.SOLO_LEGS and place.task.isdigit():
                read.append((place.arm, place.task, place.trial))
            yield place

    info = store.run_info(run_id)
    config = info.run.config
    digests = report_module._stored_digests(store, str(config["scope"]))
    with mock.patch.object(report_module, "_stored_requests", counting), \
            mock.patch.object(store, "iter_payload_field_at", counting_fields):
        report_module._read_with_digests(store, config, digests, [])
    return read


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(SCORED_KINDS, min_size=PROBES, max_size=PROBES), min_size=1,
                max_size=8), st.sampled_from((1, 2, 3, 4096)))
def test_only_scored_replies_that_are_not_their_references_bytes_are_read(rungs, batch):
    """With references without logprobs, an `ok` rung reply is its reference's bytes
    (its timings differ, which are not the reply; so does one whose content never
    streamed): it is not read. Of the other fingerprinted replies (another text,
    logprobs the reference lacks, text kept in its escaped form) the first of each
    probe and fingerprint is read, and the later ones share it; a failure (never
    fingerprinted) is read wherever it is. The report is the one read from every record,
    however many requests are taken a batch (`batch`: a first reading and its later
    sharers in different batches)."""
    with SQLiteStore(":memory:") as store, \
            mock.patch.object(report_module, "_CLAIMS_PER_BATCH", batch):
        run_id = write_run(store, rungs, None, (True, True), reference_logprobs=False)
        read = _scored_reads(store, run_id)
        through_digests = build_report(store, run_id)
        from_records = build_report(store, run_id, digests=False)
        expected = _first_of_each_fingerprint(store, run_id)
    assert sorted(read) == sorted(expected)
    assert len(read) == len(set(read))  # none read twice
    assert not [w for w in [*through_digests.warnings, *from_records.warnings] if "digest" in w]
    _same(through_digests, from_records)


def _first_of_each_fingerprint(store, run_id) -> list[tuple[str, str, int]]:
    """`(leg, task, repeat)` of the scored requests a digested reading must read, from
    the records' own fingerprints: each one not `ok`, and the first (in the store's
    order) of each probe's fingerprints but its reference's."""
    records = list(store.iter_record_summaries(
        suite=SUITE, scope=str(store.run_info(run_id).run.config["scope"]),
        payload_fields=PAYLOAD_FIELDS, payload_types=PAYLOAD_TYPES))
    seen = {(r.task, reply_fingerprint(r)) for r in records if r.arm == "ref_a"}
    expected = []
    for record in records:
        if record.arm in report_module.SOLO_LEGS or not record.task.isdigit():
            continue
        printed = reply_fingerprint(record)
        if printed is None or (record.task, printed) not in seen:
            expected.append((record.arm, record.task, record.trial))
        if printed is not None:
            seen.add((record.task, printed))
    return expected


def _run_with_solo_legs(store, rungs: int, probe_zero: RequestOutcome):
    """A run of `PROBES` probes begun, its prime and references written, probe 0's as
    `probe_zero`, the others' as `solo_outcome`: its start and plan."""
    first, plan = alternating_rungs_run(rungs, PROBES)
    store.begin_run(first)
    for leg in ("prime", "ref_a", "ref_b"):
        store.append([make_record(plan, first.run_id, leg, str(p), 1, p, p,
                                  probe_zero if p == 0 else solo_outcome(p, False), None)
                      for p in range(PROBES)])
    return first, plan


def _rung(plan: Plan, run_id: str, level: int, repeat: int, start: float,
          probe_zero: RequestOutcome | None = None) -> list:
    """A rung's records, each reply its probe's `solo_outcome` (probe 0's: `probe_zero`,
    when given), all sent at `start`."""
    records = []
    for slot in range(level):
        probe = slot % PROBES
        outcome = (probe_zero if probe == 0 and probe_zero is not None
                   else solo_outcome(probe, False))
        records.append(make_record(
            plan, run_id, rung_label(level), str(slot) if slot < PROBES else f"ballast-{slot}",
            repeat, probe, slot, dataclasses.replace(
                outcome, timings=Timings(start, start, start, start + 1.0)), None, level))
    return records


def _finish(store, plan: Plan, run_id: str, digests: list[RungDigest]) -> None:
    """The run's post-check written and its end recorded with `digests`."""
    store.append([make_record(plan, run_id, "post", str(p), 1, p, p, solo_outcome(p, False),
                              None) for p in range(PROBES)])
    store.finish_run(RunEnd(run_id, time.time(), "completed", {SUMMARY_KEY: as_summary(digests)}))


def test_a_cell_taken_from_its_fingerprint_classifies_as_read_even_when_it_leaks():
    """A reference that itself holds another probe's canary: a rung reply with its bytes
    is contaminated from the digest exactly as when read."""
    leaking = ok(reply_text(0) + CANARIES[1], start=1.0, end=1.5)
    with SQLiteStore(":memory:") as store:
        first, plan = _run_with_solo_legs(store, 2, leaking)
        digests: list[RungDigest] = []
        for index in range(2):
            records = _rung(plan, first.run_id, (2, 4)[index], 1, 5.0 + index, leaking)
            store.append(records)
            digests.extend(digest_of(records))
        _finish(store, plan, first.run_id, digests)
        assert _scored_reads(store, first.run_id) == []
        through_digests = build_report(store, first.run_id)
        from_records = build_report(store, first.run_id, digests=False)
    assert through_digests.score.contaminated >= 2
    _same(through_digests, from_records)


# -- a fingerprint that is not its record's ----------------------------------------------------

def _lying_store(tmp_path, rung: int) -> tuple[SQLiteStore, str]:
    """A completed run (references without logprobs) whose rung `rung` holds a diverged
    scored reply for probe 0 that its digest fingerprints as the reference's."""
    store = SQLiteStore(tmp_path / "s.sqlite")
    rungs = [["ok", "ok"], ["ok", "ok", "ok"], ["ok", "ok"]]
    rungs[rung][0] = "diverged"
    run_id = write_run(store, rungs, None, (False, False), reference_logprobs=False)
    true = digest_of(report_module._stored_requests(store, run_id))
    reference = fingerprint(scored_form(solo_outcome(0, False).to_json_dict()["reply"]))
    lying = [msgspec.structs.replace(digest, scored_replies=[("0", reference), *[
        pair for pair in digest.scored_replies or [] if pair[0] != "0"]]) if index == rung
        else digest
        for index, digest in enumerate(true)]
    assert lying[rung] != true[rung]
    store.finish_run(RunEnd(run_id, time.time(), "completed", {SUMMARY_KEY: as_summary(lying)}))
    return store, run_id


@pytest.mark.parametrize("rung", [0, 1, 2])
def test_a_listed_rung_whose_fingerprint_lies_is_read_from_its_records(tmp_path, rung):
    store, run_id = _lying_store(tmp_path, rung)
    with store:
        built = build_report(store, run_id)
        whole = build_report(store, run_id, digests=False)
    leg, repeat = (("c2", 1), ("c4", 1), ("c2", 2))[rung]
    assert built.warnings[-1] == (f"rung {leg} #{repeat} read from its records differs from "
                                  "its digest in the run's end: the report is read from the "
                                  "records alone")
    assert built.score.diverged == whole.score.diverged == 1
    assert msgspec.json.encode(msgspec.structs.replace(built, warnings=whole.warnings)) == \
        msgspec.json.encode(whole)


@pytest.mark.parametrize("rung", [0, 1, 2])
def test_read_from_every_record_a_lying_fingerprint_is_named_whether_listed_or_not(
        tmp_path, rung):
    """The trust boundary: a digest's fingerprint decides an unlisted rung's cell unread
    (as its fidelity counts decide whether the rung was measured), so `show
    --from-records`, which recounts every digest, is what names a digest that lies."""
    store, run_id = _lying_store(tmp_path, rung)
    with store, mock.patch.object(shown, "RUNG_LIMIT", 1):
        whole = build_report(store, run_id, digests=False)
    leg, repeat = (("c2", 1), ("c4", 1), ("c2", 2))[rung]
    assert [w for w in whole.warnings if "differs from its digest" in w] == [
        f"rung {leg} #{repeat} read from its records differs from its digest in the run's end"]
    assert whole.score.diverged == 1


def test_a_first_read_whose_bytes_are_not_its_claim_has_every_later_claim_read(tmp_path):
    """Later requests share the reply of the first one read with their fingerprint only
    when the report's own fingerprint of that first one is the claim: here rung c2 #1's
    digest claims for probe 0 the fingerprint of the diverged reply that rungs c4 #1 and
    c2 #2 hold, while its record holds another one, so both of those are read too."""
    diverged = _digest_outcome("diverged", 0, 0.0).to_json_dict()["reply"]
    claimed = fingerprint(scored_form(diverged))
    store = SQLiteStore(tmp_path / "s.sqlite")
    rungs = [["garbled_reply", "ok"], ["diverged", "ok", "ok"], ["diverged", "ok"]]
    run_id = write_run(store, rungs, None, (False, False), reference_logprobs=False)
    true = digest_of(report_module._stored_requests(store, run_id))
    lying = [msgspec.structs.replace(digest, scored_replies=[("0", claimed), *[
        pair for pair in digest.scored_replies or [] if pair[0] != "0"]]) if index == 0
        else digest for index, digest in enumerate(true)]
    store.finish_run(RunEnd(run_id, time.time(), "completed", {SUMMARY_KEY: as_summary(lying)}))
    with store:
        assert sorted(_scored_reads(store, run_id)) == [("c2", "0", 1), ("c2", "0", 2),
                                                        ("c4", "0", 1)]
        built = build_report(store, run_id)
        whole = build_report(store, run_id, digests=False)
    assert built.score.diverged == whole.score.diverged == 3


# -- the fingerprint is of the stored bytes ----------------------------------------------------

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30) | st.builds(
    lambda text, byte: text + chr(0xDC00 + byte), st.text(max_size=10),
    st.integers(0x80, 0xFF))  # a byte that was not valid UTF-8: stored in its escaped form
_LOGPROB = st.floats(allow_nan=False, allow_infinity=False, max_value=0.0) | st.just(-0.0)


@st.composite
def _replies(draw) -> Reply:
    tokens = draw(st.lists(st.builds(
        TokenLogprob, _TEXT, _LOGPROB,
        st.lists(st.builds(Candidate, _TEXT, _LOGPROB), max_size=3).map(tuple)), max_size=4))
    return Reply(reasoning=draw(_TEXT), text=draw(_TEXT), tool_calls=(),
                 finish_reason=draw(st.sampled_from((None, "stop", "length"))),
                 completion_tokens=draw(st.integers(0, 2**40)), usage_reported=draw(st.booleans()),
                 prompt_tokens=draw(st.none() | st.integers(0, 10**6)),
                 token_logprobs=tuple(tokens) if draw(st.booleans()) else None)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_replies(), min_size=1, max_size=4), st.data())
def test_a_reply_has_one_fingerprint_in_memory_typed_and_plain(backend, replies, data):  # noqa: F811
    """The driver fingerprints a record it holds (its reply's canonical JSON); a report
    reads the stored bytes (typed) or a plain value (an outcome that does not fit the
    typed read): all three are one fingerprint, on both backends."""
    run = stamp_run(suite=SUITE, bench_version=scoring.BENCH_VERSION, config={})
    run_id = run.run_id  # a new run each example: the backend's store outlives them
    plan = Plan(run_id, run_id, ({},) * len(replies), (4,), 1, "shared-prefix")
    records = []
    for slot, reply in enumerate(replies):
        outcome = RequestOutcome(Timings(1.0, 1.0, 1.0, 2.0), reply=reply,
                                 error=data.draw(st.none() | st.just("HTTP 500"), label="error"))
        records.append(make_record(plan, run_id, "c4", str(slot), 1, slot, slot, outcome,
                                   None, 4))
    with backend.open() as store:
        store.begin_run(run)
        store.append(records)
        typed = list(store.iter_record_summaries(suite=SUITE, scope=run_id,
                                                 payload_fields=PAYLOAD_FIELDS,
                                                 payload_types=PAYLOAD_TYPES))
        plain = list(store.iter_record_summaries(suite=SUITE, scope=run_id,
                                                 payload_fields=PAYLOAD_FIELDS))
    for record, read_typed, read_plain in zip(records, typed, plain, strict=True):
        expected = None
        if record.payload["outcome"].get("error") is None:
            expected = fingerprint(scored_form(record.payload["outcome"]["reply"]))
        assert reply_fingerprint(record) == expected
        assert reply_fingerprint(read_plain) == expected
        if isinstance(read_typed.payload["outcome"], StoredOutcome):
            assert reply_fingerprint(read_typed) == expected
    assert digest_of(records) == digest_of(typed) == digest_of(plain)


_DIAGNOSTICS = st.fixed_dictionaries({
    "prompt_tokens": st.none() | st.integers(0, 10**6),
    "cached_prompt_tokens": st.none() | st.integers(0, 10**6),
    "usage_reported": st.booleans(), "saw_done": st.booleans(),
    "reasoning_tokens": st.none() | st.integers(0, 10**6)})


@settings(max_examples=100, deadline=None)
@given(_replies(), _DIAGNOSTICS, st.sampled_from(
    ("text", "reasoning", "finish_reason", "completion_tokens", "logprob", "tool_name",
     "tool_arguments", "tool_added")), st.none() | _TEXT)
def test_a_fingerprint_is_of_what_the_scoring_compares(reply, diagnostics, changed, call_id):
    """Replies that differ only in what no cell is judged by (prompt and cached-prompt
    token counts, usage flags, a tool call's id) share a fingerprint, so a rung reply
    whose prefix cache hit differently is still taken unread; one that differs in
    anything the scoring reads does not."""
    with_call = dataclasses.replace(reply, tool_calls=(ToolCall("look", '{"q": 1}', "id-1"),))
    diagnostic = dataclasses.replace(
        with_call, tool_calls=(ToolCall("look", '{"q": 1}', call_id),), **diagnostics)

    def printed(one: Reply) -> str | None:
        outcome = RequestOutcome(Timings(1.0), reply=one)
        return reply_fingerprint(make_record(Plan("r", "r", ({},), (2,), 1, "shared-prefix"),
                                             "r", "c2", "0", 1, 0, 0, outcome, None, 2))

    assert printed(diagnostic) == printed(with_call)
    other = {
        "text": lambda r: dataclasses.replace(r, text=r.text + "!"),
        "reasoning": lambda r: dataclasses.replace(r, reasoning=r.reasoning + "!"),
        "finish_reason": lambda r: dataclasses.replace(
            r, finish_reason="tool_calls" if r.finish_reason != "tool_calls" else None),
        "completion_tokens": lambda r: dataclasses.replace(
            r, completion_tokens=r.completion_tokens + 1),
        "logprob": lambda r: dataclasses.replace(r, token_logprobs=(
            *(r.token_logprobs or ()), TokenLogprob("x", -1.5, ()))),
        "tool_name": lambda r: dataclasses.replace(
            r, tool_calls=(ToolCall("find", '{"q": 1}', "id-1"),)),
        "tool_arguments": lambda r: dataclasses.replace(
            r, tool_calls=(ToolCall("look", '{"q": 2}', "id-1"),)),
        "tool_added": lambda r: dataclasses.replace(
            r, tool_calls=(*r.tool_calls, ToolCall("look", "", None))),
    }[changed](with_call)
    assert printed(other) != printed(with_call)


def test_a_rung_reply_whose_prefix_cache_hit_differently_is_taken_unread():
    """A real engine reports the cached prompt tokens of each request (llama.cpp: 150
    for the reference, 94 under load, the same text and logprobs): the cell is still
    taken from its fingerprint."""
    reference = solo_outcome(0, True)
    assert reference.reply is not None
    cached = dataclasses.replace(reference, reply=dataclasses.replace(
        reference.reply, prompt_tokens=180, cached_prompt_tokens=94))
    with SQLiteStore(":memory:") as store:
        first, plan = _run_with_solo_legs(store, 1, reference)
        records = _rung(plan, first.run_id, 2, 1, 5.0, cached)
        store.append(records)
        _finish(store, plan, first.run_id, digest_of(records))
        assert _scored_reads(store, first.run_id) == []
        _same(build_report(store, first.run_id), build_report(store, first.run_id,
                                                              digests=False))


@pytest.fixture
def remembered_secret() -> Iterator[str]:
    secret = "sk-fingerprint-test-9c1f2e7a"
    secrets.remember(secret)
    try:
        yield secret
    finally:
        secrets.forget_all()


def test_the_driver_fingerprints_a_scrubbed_reply_as_the_store_keeps_it(remembered_secret):
    """A server that echoes the API key into a scored reply: the store keeps the reply
    scrubbed, so the driver's digest (`digests_as_stored`) fingerprints the scrubbed
    bytes and agrees with the recount, where a digest of the records as held would not;
    the reference, scrubbed alike, still matches, so the cell is taken unread."""
    echoed = ok(reply_text(0) + " key " + remembered_secret, start=1.0, end=1.5)
    with SQLiteStore(":memory:") as store:
        first, plan = _run_with_solo_legs(store, 1, echoed)
        records = [make_record(plan, first.run_id, "c2", str(slot), 1, slot, slot,
                               echoed if slot == 0 else solo_outcome(slot, False), None, 2)
                   for slot in range(2)]
        store.append(records)
        written = digests_as_stored(records)
        recounted = digest_of(report_module._stored_requests(store, first.run_id))
        assert written == recounted
        assert digest_of(records) != recounted  # the unscrubbed reply's bytes are not stored
        _finish(store, plan, first.run_id, written)
        assert _scored_reads(store, first.run_id) == []
        through_digests = build_report(store, first.run_id)
        from_records = build_report(store, first.run_id, digests=False)
    assert not [w for w in from_records.warnings if "digest" in w]
    _same(through_digests, from_records)


# -- bisect: levels from digests -----------------------------------------------------------------

@pytest.mark.parametrize("older", [False, True])
@pytest.mark.parametrize("diverged_at", [None, 8, 4])
def test_a_bisect_runs_levels_come_in_run_order_from_its_digests(older, diverged_at):
    """A `--bisect 2-8` run records its rungs as it chooses them (c8, c4, c2 here) and
    reads their levels from their records; with every scored reply taken from its
    digest, the levels (and so the rungs' order and the bisect's reading) come from the
    digests, in the order the rungs ran."""
    first, plan = alternating_rungs_run(1, PROBES)
    config = {**first.config, "concurrency": [], "bisect": [2, 8], "repeat": 1}
    first = dataclasses.replace(first, config=config)
    plan = dataclasses.replace(plan, concurrency=(), repeat=1, bisect=(2, 8))
    diverged = ok(reply_text(0).replace("x3", "xX"))
    with SQLiteStore(":memory:") as store:
        store.begin_run(first)
        for leg in ("prime", "ref_a", "ref_b"):
            store.append([make_record(plan, first.run_id, leg, str(p), 1, p, p,
                                      solo_outcome(p, False), None) for p in range(PROBES)])
        digests = []
        for step, level in enumerate((8, 4, 2)):
            records = _rung(plan, first.run_id, level, 1, 10.0 + step)
            if level == diverged_at:  # probe 0's own request only
                records[0] = _rung(plan, first.run_id, level, 1, 10.0 + step, diverged)[0]
            store.append(records)
            digests.extend(digest_of(records))
        if older:
            digests = [msgspec.structs.replace(d, level=None, scored_replies=None)
                       for d in digests]
        _finish(store, plan, first.run_id, digests)
        read = _scored_reads(store, first.run_id)
        through_digests = build_report(store, first.run_id)
        from_records = build_report(store, first.run_id, digests=False)
    assert len(read) == (6 if older else int(diverged_at is not None))
    assert [rung.concurrency for rung in through_digests.rungs] == [8, 4, 2]
    assert through_digests.bisect is not None
    assert [tried.level for tried in through_digests.bisect.tried] == [8, 4, 2]
    assert not [w for w in from_records.warnings if "digest" in w]
    _same(through_digests, from_records)


# -- the digest's own rules ----------------------------------------------------------------------

def test_a_task_fingerprinted_twice_in_a_rung_is_left_out_and_failures_are_not_listed():
    digest = digest_from("c4", 1, RungTally(), [("ok", 4)], level=4,
                         scored_replies=[("0", "aa"), ("1", None), ("0", "bb"), ("2", "cc")])
    assert digest.scored_replies == [("2", "cc")]
    assert digest.claims() == {"2": "cc"}
    assert digests_in({SUMMARY_KEY: as_summary([digest])}) == [digest]


def test_a_digest_from_before_fingerprints_agrees_with_its_recount_on_what_it_holds():
    full = digest_from("c4", 1, RungTally(), [("ok", 4)], level=4,
                       scored_replies=[("0", "aa")])
    older = msgspec.structs.replace(full, level=None, scored_replies=None)
    assert older.agrees_with(full)
    assert full.agrees_with(full)
    assert not full.agrees_with(older)
    assert not older.agrees_with(msgspec.structs.replace(full, sent=5))
    assert not msgspec.structs.replace(full, scored_replies=[]).agrees_with(full)
    # an end written before fingerprints reads as a digest without them, and so does
    # one whose fingerprints are of whole replies (`replies`, format 2, never released)
    stored = as_summary([older])
    assert stored[0].get("scored_replies") is None
    assert digests_in({SUMMARY_KEY: stored}) == [older]
    assert digests_in({SUMMARY_KEY: [{**stored[0], "replies": [["0", "aa"]]}]}) == [older]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from("0123"), st.sampled_from("abcde"), max_size=4),
                max_size=12),
       st.sets(st.tuples(st.sampled_from("0123"), st.sampled_from("abcde")), max_size=4),
       st.sets(st.sampled_from("0123"), min_size=1))
def test_the_claims_made_more_than_once_are_those_counted_twice(claims, known, tasks):
    """`_claimed_more_than_once` over a sorted list of hashes is the claims (of the
    probes asked for, the references' left out) a count finds more than once."""
    digests = [RungDigest(leg="c2", repeat=index, sent=4, peak_in_flight=2, first_send=None,
                          last_send=None, failures=[], statuses=[],
                          scored_replies=sorted(made.items()))
               for index, made in enumerate(claims)]
    counted = Counter((task, claimed) for made in claims for task, claimed in made.items()
                      if task in tasks and (task, claimed) not in known)
    assert report_module._claimed_more_than_once(digests, sorted(tasks), known) == {
        hash(claim) for claim, count in counted.items() if count > 1}


_DIGESTS = st.builds(
    RungDigest, leg=st.sampled_from(("c2", "c4")), repeat=st.integers(1, 9),
    sent=st.integers(0, 600), peak_in_flight=st.integers(0, 512),
    first_send=st.none() | st.floats(0, 2e9), last_send=st.none() | st.floats(0, 2e9),
    failures=st.lists(st.tuples(st.text(max_size=6), st.integers(1, 9)), max_size=3),
    statuses=st.lists(st.tuples(st.sampled_from(("ok", "error", "cancelled")),
                                st.integers(1, 9)), max_size=3),
    level=st.none() | st.integers(1, 512),
    scored_replies=st.none() | st.lists(st.tuples(st.sampled_from("0123"),
                                                   st.text("0123456789abcdef", min_size=32,
                                                           max_size=32)), max_size=4))


@settings(max_examples=80, deadline=None)
@given(st.lists(_DIGESTS, max_size=6), _DIGESTS)
def test_a_digest_read_back_with_its_fingerprints_as_stored_is_the_digest_written(
        digests, recounted):
    """Read back from a store, a digest keeps its fingerprints as stored
    (`StoredRungDigest`): whole, it is the digest written, and it claims, counts its
    fidelity and agrees with a recount as that digest does."""
    with SQLiteStore(":memory:") as store:
        run = stamp_run(suite=SUITE, bench_version=scoring.BENCH_VERSION, config={})
        store.begin_run(run)
        store.finish_run(RunEnd(run.run_id, 5.0, "completed",
                                {SUMMARY_KEY: as_summary(digests)}))
        summary = store.run_info(run.run_id).end.summary
        read = stored_digests_in(summary)
        assert digests_in(summary) == digests
    assert all(isinstance(digest, StoredRungDigest) for digest in read)
    assert [digest.whole() for digest in read] == digests
    for stored, written in zip(read, digests, strict=True):
        assert stored.key == written.key and stored.fingerprinted == written.fingerprinted
        assert stored.claims() == written.claims()
        assert stored.fidelity("c2", 2, 1) == written.fidelity("c2", 2, 1)
        assert stored.agrees_with(recounted) == written.agrees_with(recounted)
        assert stored.agrees_with(written) == written.agrees_with(written)


@pytest.mark.parametrize("claims", ['[["0", 5]]', '"none"', '[["0"]]', '{"0": "ab"}'])
def test_a_digest_whose_fingerprints_do_not_decode_leaves_every_digest_unread(claims):
    """As `digests_in` gives none when one digest is not of this shape, so does a
    digest read back with its fingerprints as stored: the records are read instead."""
    good = RungDigest(leg="c2", repeat=1, sent=4, peak_in_flight=2, first_send=1.0,
                      last_send=2.0, failures=[], statuses=[("ok", 4)], scored_replies=[])
    body = msgspec.json.encode(as_summary([good])).replace(
        b'"scored_replies":[]', b'"scored_replies":' + claims.encode())
    summary = RunSummary({SUMMARY_KEY: msgspec.Raw(body)})
    assert stored_digests_in(summary) == [] == digests_in(msgspec.json.decode(
        b'{"' + SUMMARY_KEY.encode() + b'":' + body + b"}"))
