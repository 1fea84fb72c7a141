"""Scoring of the contamination suite, over in-memory outcomes (no server, no clock)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.suites.contamination.scoring import (
    CLASS_NAMES,
    AloneUnstable,
    Contaminated,
    Diverged,
    Identical,
    Legs,
    Persistent,
    RungOutcomes,
    Unmeasured,
    canonical,
    classify,
    common_prefix,
    judged,
    probe_reference,
    rung_cell,
    score,
    verdict,
)
from benchwarden.targets.replies import Reply, ToolCall
from tests.suites.contamination.helpers import CANARIES, failed, good, ok, reply_text

FLOOR = 16


def concurrent_rung(label: str, outcomes, concurrency: int = 2, repeat: int = 1) -> RungOutcomes:
    """A rung with one overlapping ballast slot besides the scored ones, so it is
    concurrent even when a scored request failed."""
    return RungOutcomes(label, concurrency, repeat, list(outcomes), list(outcomes) + [good(0)])


def legs(ref_a, ref_b=None, rungs=None, post=None, floor: int = FLOOR, probes: int = 2) -> Legs:
    ref_b = ref_a if ref_b is None else ref_b
    if rungs is None:
        rungs = [concurrent_rung("c2", [good(i) for i in range(probes)])]
    if post is None:
        post = [good(i) for i in range(probes)]
    return Legs(ref_a=ref_a, ref_b=ref_b, rungs=rungs, post=post,
                canaries=CANARIES[:probes], min_completion_tokens=floor)


def cell(result, probe: int, leg: str):
    matches = [c.result for c in result.cells if c.probe == probe and c.leg == leg]
    assert len(matches) == 1, result.cells
    return matches[0]


REFS = [good(0), good(1)]


def test_identical_streams_pass():
    result = score(legs(REFS))
    assert result.compared == 4 and result.identical == 4
    assert result.tokens_compared == 4 * 32
    assert result.earliest_divergence is None
    outcome = verdict(result)
    assert outcome.kind == "pass"
    assert "2 prompts × 1 rungs" in outcome.reason and "128 tokens" in outcome.reason


@pytest.mark.parametrize("k", [0, 1, 17, 40])
def test_divergence_at_k_is_localised(k):
    text = reply_text(0)
    changed = text[:k] + ("#" if text[k] != "#" else "%") + text[k + 1:]
    result = score(legs(REFS, rungs=[concurrent_rung("c2", [ok(changed), good(1)])]))
    found = cell(result, 0, "c2")
    assert isinstance(found, Diverged)
    assert found.at == k + 1  # the reasoning separator comes first in the canonical form
    assert result.earliest_divergence == k + 1
    assert verdict(result).kind == "fail"
    assert f"earliest divergence at char {k + 1}" in verdict(result).reason
    assert isinstance(cell(result, 1, "c2"), Identical)


def test_foreign_canary_is_contamination_not_divergence():
    leaked = reply_text(0).replace("w0x5", CANARIES[1])
    result = score(legs(REFS, rungs=[concurrent_rung("c2", [ok(leaked), good(1)])]))
    found = cell(result, 0, "c2")
    assert found == Contaminated(CANARIES[1])
    assert result.contaminated == 1 and result.diverged == 0 and result.foreign_canaries == 1
    assert "CONTAMINATED" in verdict(result).reason


def test_own_canary_is_not_foreign():
    doubled = reply_text(0) + " " + CANARIES[0]
    result = score(legs([ok(doubled), good(1)], post=[ok(doubled), good(1)],
                        rungs=[concurrent_rung("c2", [ok(doubled), good(1)])]))
    assert verdict(result).kind == "pass"


@pytest.mark.parametrize("second", [
    ok(reply_text(0).replace("w0x3", "other")),       # text differs alone
    good(0, tokens=33),                                # usage differs alone
])
def test_solo_instability_disqualifies_the_probe(second):
    result = score(legs(REFS, ref_b=[second, good(1)]))
    assert cell(result, 0, "ref") == AloneUnstable()
    assert not [c for c in result.cells if c.probe == 0 and c.leg != "ref"]
    assert result.alone_unstable == 1 and result.compared == 2
    outcome = verdict(result)
    assert outcome.kind == "fail" and "not reproducible alone" in outcome.reason


def test_one_crashed_request_cannot_pass():
    result = score(legs(REFS, rungs=[concurrent_rung("c2", [failed("boom"), good(1)])]))
    crashed, other = cell(result, 0, "c2"), cell(result, 1, "c2")
    assert isinstance(crashed, Unmeasured) and "this one: request failed: boom" in crashed.why
    assert other == Unmeasured("rung c2: 1 of 3 requests failed: boom ×1")
    outcome = verdict(result)
    assert outcome.kind == "fail"
    assert "2 unmeasured (rung c2: 1 of 3 requests failed: boom ×1)" in outcome.reason


def test_all_crashed_is_fail_not_clean():
    crashed = [failed(), failed()]
    result = score(legs(crashed, rungs=[concurrent_rung("c2", crashed)], post=crashed))
    assert result.compared == 0 and result.unmeasured == 2
    outcome = verdict(result)
    assert outcome.kind == "fail" and outcome.reason.startswith("nothing measured")


def test_below_floor_is_unmeasured_and_exactly_at_floor_is_measurable():
    at_floor = [good(0, tokens=FLOOR), good(1, tokens=FLOOR)]
    result = score(legs(at_floor, rungs=[concurrent_rung("c2", at_floor)], post=at_floor))
    assert verdict(result).kind == "pass"

    short_reply = concurrent_rung("c2", [good(0, tokens=FLOOR), good(1, tokens=FLOOR - 1)])
    result = score(legs(at_floor, rungs=[short_reply], post=at_floor))
    found = cell(result, 1, "c2")
    assert isinstance(found, Unmeasured) and "floor 16" in found.why


def test_short_reference_is_unmeasured():
    short = [good(0, tokens=FLOOR - 1), good(1)]
    result = score(legs(short, ref_b=[good(0, tokens=FLOOR - 1), good(1)]))
    found = cell(result, 0, "ref")
    assert isinstance(found, Unmeasured) and "floor" in found.why
    assert verdict(result).kind == "fail"


def test_failed_reference_is_unmeasured():
    result = score(legs(REFS, ref_b=[failed("timeout after 300 s"), good(1)]))
    found = cell(result, 0, "ref")
    assert isinstance(found, Unmeasured) and "timeout after 300 s" in found.why


def tool_reply(arguments: str):
    return ok("", tools=(ToolCall("lookup", arguments),), finish="tool_calls")


def test_tool_call_argument_difference_is_divergence():
    refs = [tool_reply('{"city": "Oslo"}'), good(1)]
    result = score(legs(refs, rungs=[concurrent_rung("c2", [tool_reply('{"city":"Oslo"}'),
                                                             good(1)])]))
    found = cell(result, 0, "c2")
    assert isinstance(found, Diverged)
    assert found.at == len('\x01\x02lookup\x03{"city":')


def test_finish_reason_difference_is_divergence():
    result = score(legs(REFS, rungs=[concurrent_rung("c2", [good(0, finish="length"), good(1)])]))
    found = cell(result, 0, "c2")
    assert isinstance(found, Diverged) and found.at == len(canonical(REFS[0].reply)) - 4


def test_reasoning_only_difference_is_divergence():
    refs = [good(0, reasoning="think about mills"), good(1)]
    rung = concurrent_rung("c2", [good(0, reasoning="think about hills"), good(1)])
    result = score(legs(refs, rungs=[rung], post=refs))
    found = cell(result, 0, "c2")
    assert isinstance(found, Diverged) and found.at == len("think about ")


def test_post_check_divergence_is_persistent():
    changed = ok(reply_text(1).replace("w1x2", "zz"))
    result = score(legs(REFS, post=[good(0), changed]))
    found = cell(result, 1, "post")
    assert isinstance(found, Persistent) and found.at == common_prefix(
        canonical(REFS[1].reply), canonical(changed.reply))
    assert result.persistent == 1 and "PERSISTENT" in verdict(result).reason


def test_equal_text_with_different_usage_is_divergence_also_in_post_check():
    result = score(legs(REFS, rungs=[concurrent_rung("c2", [good(0, tokens=31), good(1)])],
                        post=[good(0), good(1, tokens=40)]))
    rung_cell, post_cell = cell(result, 0, "c2"), cell(result, 1, "post")
    assert isinstance(rung_cell, Diverged) and "32 vs 31" in rung_cell.detail
    assert rung_cell.at == len(canonical(REFS[0].reply))
    assert isinstance(post_cell, Diverged) and "32 vs 40" in post_cell.detail


def test_serialised_rung_is_unmeasured_with_its_reason():
    # slot 1 starts streaming only after slot 0's last byte: peak in flight 1
    serial = [good(0, start=0.0, end=1.0), good(1, start=1.0, end=2.0)]
    rung = RungOutcomes("c4", 4, 1, serial, serial)
    result = score(legs(REFS, rungs=[rung]))
    found = cell(result, 0, "c4")
    assert found == Unmeasured("rung c4 not concurrent: peak in flight 1")
    assert result.fidelity[0].peak_in_flight == 1
    outcome = verdict(result)
    assert outcome.kind == "fail" and "rung c4 not concurrent: peak in flight 1" in outcome.reason


def test_ballast_counts_for_fidelity_but_is_not_scored():
    scored = [good(0, start=0.0, end=1.0), good(1, start=2.0, end=3.0)]
    ballast = [good(0, start=0.5, end=2.5)]
    rung = RungOutcomes("c3", 3, 1, scored, scored + ballast)
    result = score(legs(REFS, rungs=[rung]))
    assert result.fidelity[0].peak_in_flight == 2 and result.fidelity[0].requests_sent == 3
    assert verdict(result).kind == "pass"
    assert len([c for c in result.cells if c.leg == "c3"]) == 2


def test_missing_outcomes_of_an_interrupted_run_are_unmeasured():
    rung = concurrent_rung("c2", [good(0)])  # slot for probe 1 never recorded
    result = score(legs(REFS, rungs=[rung], post=[good(0)]))
    assert isinstance(cell(result, 1, "c2"), Unmeasured)
    assert isinstance(cell(result, 1, "post"), Unmeasured)
    assert verdict(result).kind == "fail"


# -- property: each cell increments exactly one class counter -------------------------------
def outcome_for(probe: int):
    variants = st.sampled_from(["same", "error", "short", "leak", "diverge", "tokens",
                                "finish", "none"])

    def build(kind: str):
        return {
            "same": good(probe),
            "error": failed(),
            "short": good(probe, tokens=3),
            "leak": ok(reply_text(probe) + CANARIES[(probe + 1) % 3]),
            "diverge": ok(reply_text(probe)[:-5] + "?????"),
            "tokens": good(probe, tokens=99),
            "finish": good(probe, finish=None),
            "none": None,
        }[kind]
    return variants.map(build)


@st.composite
def random_legs(draw):
    probes = draw(st.integers(2, 3))
    rung_count = draw(st.integers(0, 3))
    column = lambda: [draw(outcome_for(i)) for i in range(probes)]  # noqa: E731
    rungs = []
    for r in range(rung_count):
        outcomes = column()
        overlapping = draw(st.booleans())
        slots = [o for o in outcomes if o is not None]
        if not overlapping:
            slots = [good(0, start=10.0 * i, end=10.0 * i + 1) for i in range(probes)]
        rungs.append(RungOutcomes(f"c{2 + r}", 2 + r, 1, outcomes, slots))
    return Legs(column(), column(), rungs, column(), CANARIES[:probes],
                draw(st.sampled_from([1, 16, 40])))


@settings(max_examples=300, deadline=None)
@given(random_legs())
def test_each_cell_increments_exactly_one_counter(legs_):
    result = score(legs_)
    counters = result.counters()
    assert sum(counters[name] for name in CLASS_NAMES) == len(result.cells)
    for name in CLASS_NAMES:
        assert counters[name] == sum(1 for c in result.cells if c.result.kind == name)
    assert result.compared == sum(1 for c in result.cells if c.leg != "ref")
    # every probe has either one ref cell or one cell per rung plus the post-check
    for probe in range(result.prompts):
        legs_of_probe = [c.leg for c in result.cells if c.probe == probe]
        assert legs_of_probe == ["ref"] or len(legs_of_probe) == result.rungs + 1
    outcome = verdict(result)
    assert (outcome.kind == "pass") == (result.compared > 0
                                        and result.identical == len(result.cells))


def _sharing_replies(legs_: Legs) -> Legs:
    """`legs_` with every rung and post-check reply equal to its probe's first reference,
    or to a reply of the same probe met before it, replaced by that very reply object,
    as the report shares them."""
    def sharer(probe: int):
        reference = legs_.ref_a[probe] if probe < len(legs_.ref_a) else None
        met = [] if reference is None or reference.reply is None else [reference.reply]

        def shared(outcome):
            if outcome is None or outcome.reply is None:
                return outcome
            same = next((reply for reply in met if reply == outcome.reply), None)
            if same is None:
                met.append(outcome.reply)
                return outcome
            return dataclasses.replace(outcome, reply=same)
        return shared

    sharers = [sharer(probe) for probe in range(max(len(legs_.ref_a), len(legs_.post),
                                                    *(len(r.scored) for r in legs_.rungs)))]
    rungs = [dataclasses.replace(rung, scored=[sharers[p](o) for p, o in enumerate(rung.scored)])
             for rung in legs_.rungs]
    return dataclasses.replace(legs_, rungs=rungs,
                               post=[sharers[p](o) for p, o in enumerate(legs_.post)])


def _copying_replies(legs_: Legs) -> Legs:
    """`legs_` with every rung and post-check reply a separate (equal) object."""
    def copied(outcome):
        if outcome is None or outcome.reply is None:
            return outcome
        return dataclasses.replace(outcome, reply=dataclasses.replace(outcome.reply))

    rungs = [dataclasses.replace(rung, scored=[copied(o) for o in rung.scored])
             for rung in legs_.rungs]
    return dataclasses.replace(legs_, rungs=rungs, post=[copied(o) for o in legs_.post])


@settings(max_examples=300, deadline=None)
@given(random_legs())
def test_a_score_with_shared_replies_is_the_score_with_equal_copies(legs_):
    """`score` judges one reply object once per probe and reason to be unmeasured, not
    once per cell (the report shares one object among equal stored replies): every cell,
    counter and divergence must be what equal but separate replies give."""
    shared = _sharing_replies(legs_)
    assert score(shared) == score(_copying_replies(legs_)) == score(legs_)


# -- property: a reply that is its reference classifies as an equal copy of it would --------
@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2), st.sampled_from(["same", "leak", "short", "diverge", "tokens",
                                           "finish"]),
       st.sampled_from([1, 16, 40]), st.booleans(), st.sampled_from([None, "not concurrent"]),
       st.booleans())
def test_a_reply_that_is_its_reference_classifies_as_an_equal_copy_would(
        probe, kind, floor, persistent_leg, rung_unmeasured, form_given):
    """The report shares a probe's reference reply with every request the scoring cannot
    tell from it, and `classify` then compares by identity (and `score` hands it the
    reference's canonical form once per probe): the class must be the one an equal but
    separate reply gets, whatever the reference holds (a foreign canary, too few tokens)."""
    reference = {
        "same": good(probe), "leak": ok(reply_text(probe) + CANARIES[(probe + 1) % 3]),
        "short": good(probe, tokens=3), "diverge": ok(reply_text(probe)[:-5] + "?????"),
        "tokens": good(probe, tokens=99), "finish": good(probe, finish=None),
    }[kind].reply
    assert reference is not None
    shared = ok(reply_text(probe))
    shared = dataclasses.replace(shared, reply=reference)
    copied = dataclasses.replace(shared, reply=dataclasses.replace(reference))
    assert copied.reply == reference and copied.reply is not reference
    form = canonical(reference) if form_given else None
    arguments = dict(persistent_leg=persistent_leg, rung_unmeasured=rung_unmeasured)
    expected = classify(reference, copied, CANARIES[probe], CANARIES, floor, **arguments)
    assert classify(reference, shared, CANARIES[probe], CANARIES, floor, reference_form=form,
                    **arguments) == expected
    assert classify(reference, copied, CANARIES[probe], CANARIES, floor, reference_form=form,
                    **arguments) == expected


# -- property: replies classified as they are read score as the replies do ------------------
def _judging(legs_: Legs) -> tuple[Legs, dict[tuple[int, int], object]]:
    """`legs_` with every rung reply `judged` classifies replaced by its `Judged` (as a
    report reading a huge soak keeps them), and the outcome each replaced, by (rung
    index, probe)."""
    replaced: dict[tuple[int, int], object] = {}
    rungs = []
    for index, rung in enumerate(legs_.rungs):
        scored = []
        for probe, got in enumerate(rung.scored):
            reference = probe_reference(legs_, probe)
            made = None
            if isinstance(reference, Reply) and got is not None:
                made = judged(reference, got, legs_.canaries[probe], legs_.canaries,
                              legs_.min_completion_tokens, legs_.near_tie_nats)
            if made is not None:
                replaced[(index, probe)] = got
            scored.append(got if made is None else made)
        rungs.append(dataclasses.replace(rung, scored=scored))
    return dataclasses.replace(legs_, rungs=rungs), replaced


@settings(max_examples=300, deadline=None)
@given(random_legs())
def test_replies_classified_as_read_count_as_their_cells_and_are_made_again_alike(legs_):
    """A cell whose reply was classified as it was read (`Judged`) is counted as its
    cell, with no cell held: the counters, the rungs' kinds, the fidelity and the verdict
    are the whole score's, the cells held are the others in the same order, and
    `rung_cell` makes each counted cell exactly as the score makes it."""
    whole = score(legs_)
    light_legs, replaced = _judging(legs_)
    light = score(light_legs)
    assert light.counters() == whole.counters()
    assert light.fidelity == whole.fidelity and light.rung_kinds == whole.rung_kinds
    assert light.cells_total == len(whole.cells)
    assert verdict(light) == verdict(whole)
    labels = {(rung.label, rung.repeat): index for index, rung in enumerate(legs_.rungs)}
    counted = {(labels[(c.leg, c.repeat)], c.probe): c for c in whole.cells
               if (c.leg, c.repeat) in labels and (labels[(c.leg, c.repeat)], c.probe) in replaced}
    assert set(counted) == set(replaced)
    assert list(light.cells) == [c for c in whole.cells if c not in counted.values()]
    for (index, probe), cell_ in counted.items():
        assert rung_cell(light_legs, index, probe, replaced[(index, probe)]) == cell_
    for index, rung in enumerate(legs_.rungs):
        assert whole.rung_kinds[index] == {c.result.kind for c in whole.cells
                                           if (c.leg, c.repeat) == (rung.label, rung.repeat)}


def test_a_reply_classified_against_another_reference_is_refused():
    legs_ = legs(REFS, rungs=[concurrent_rung("c2", [good(0), good(1)])])
    other = dataclasses.replace(REFS[0].reply)  # equal, but not the scoring's object
    made = judged(other, good(0), CANARIES[0], CANARIES[:2], FLOOR, 0.5)
    assert made is not None and made.kind == "identical"
    moved = dataclasses.replace(legs_, rungs=[dataclasses.replace(
        legs_.rungs[0], scored=[made, good(1)])])
    with pytest.raises(ValueError, match="another reference"):
        score(moved)


@pytest.mark.parametrize("kind", ["error", "short"])
def test_a_failed_or_short_reply_is_not_classified_as_read(kind):
    """Its class in a rung that could not be compared needs the rung's reason: kept."""
    got = failed() if kind == "error" else good(0, tokens=3)
    assert judged(REFS[0].reply, got, CANARIES[0], CANARIES[:2], FLOOR, 0.5) is None


@settings(max_examples=200, deadline=None)
@given(unmeasured=st.lists(st.booleans(), max_size=30), held=st.lists(
    st.tuples(st.integers(0, 29), st.booleans()), max_size=6))
def test_the_verdict_names_the_first_unmeasured_rungs_and_one_other_cause(unmeasured, held):
    """The unmeasured line names the first `MAX_RUNGS_NAMED` rungs that could not be
    compared, counts the rest, and names one held cell unmeasured for a cause that is
    not its rung's: counted in one pass, not every reason held (a soak of rungs of two
    has hundreds of thousands)."""
    from benchwarden.suites.contamination.fidelity import RungFidelity
    from benchwarden.suites.contamination.scoring import MAX_RUNGS_NAMED, Cell, Score

    fidelity = tuple(RungFidelity("c2", 2, repeat + 1, 2, 1 if alone else 2, 0.1)
                     for repeat, alone in enumerate(unmeasured))
    reasons = [fit.unmeasured_reason for fit in fidelity if fit.unmeasured_reason]
    cells = []
    for index, own_rung in held:
        if index >= len(fidelity):
            continue
        fit = fidelity[index]
        why = (fit.unmeasured_reason if own_rung and fit.unmeasured_reason
               else f"probe failed in rung {index}")
        cells.append(Cell(0, "c2", fit.repeat, Unmeasured(why)))
    result = Score(unmeasured=len(cells) + len(reasons), fidelity=fidelity,
                   cells=tuple(cells))
    outcome = verdict(result)
    if not result.unmeasured:
        assert "unmeasured" not in outcome.reason
        return
    for reason in reasons[:MAX_RUNGS_NAMED]:
        assert reason in outcome.reason
    for reason in reasons[MAX_RUNGS_NAMED:]:
        assert reason not in outcome.reason
    assert (f"and {len(reasons) - MAX_RUNGS_NAMED} more rungs" in outcome.reason) == (
        len(reasons) > MAX_RUNGS_NAMED)
    others = [cell for cell in cells if cell.result.why not in reasons]
    if others:
        assert f"e.g. probe 0 c2: {others[0].result.why}" in outcome.reason
    else:
        assert "e.g. probe" not in outcome.reason
