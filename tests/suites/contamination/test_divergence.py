"""Divergence classes (near-tie / substantive / unclassified) and the bisect search: pure
functions of `scoring`, tested in memory, exhaustively where the inputs are small and with
hypothesis where they are wide."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchwarden.suites.contamination import scoring
from benchwarden.suites.contamination.scoring import (
    NEAR_TIE,
    SUBSTANTIVE,
    UNCLASSIFIED,
    Legs,
    bisect_step,
    classify_divergence,
    first_differing_token,
)
from benchwarden.targets.replies import Candidate, Reply, RequestOutcome, TokenLogprob
from tests.suites.contamination.helpers import CANARIES, ok

REAL_ENGINE_NEAR_TIE = Path(__file__).parent / "data" / "real_engine_near_tie.json"


def token(text: str, logprob: float, *top: tuple[str, float]) -> TokenLogprob:
    return TokenLogprob(text, logprob, tuple(Candidate(t, lp) for t, lp in top))


def reply(tokens: list[TokenLogprob] | None, text: str | None = None) -> Reply:
    spelled = "".join(t.token for t in tokens or [])
    return Reply(reasoning="", text=spelled if text is None else text, tool_calls=(),
                 finish_reason="stop", completion_tokens=len(tokens or []),
                 usage_reported=True, token_logprobs=None if tokens is None else tuple(tokens))


SHARED = [token("The", -0.1, ("The", -0.1), ("A", -3.0)),
          token(" smith", -0.2, (" smith", -0.2), (" cat", -4.0))]


def pair(reference_step: TokenLogprob, reply_step: TokenLogprob) -> tuple[Reply, Reply]:
    return reply(SHARED + [reference_step]), reply(SHARED + [reply_step])


# -- classify_divergence ----------------------------------------------------------------------
def test_a_small_margin_is_a_near_tie_with_the_reference_candidates_recorded():
    reference, got = pair(token(" makes", -1.0, (" makes", -1.0), (" shapes", -1.3), (" is", -2.0)),
                          token(" shapes", -1.1, (" shapes", -1.1), (" makes", -1.15)))
    point = classify_divergence(reference, got, threshold=0.5)
    assert point.kind == NEAR_TIE
    assert point.step == 2
    assert (point.reference_token, point.reply_token) == (" makes", " shapes")
    assert point.margin == pytest.approx(0.3)
    assert point.reply_margin == pytest.approx(0.05)
    assert not point.margin_is_bound
    assert [c.token for c in point.reference_top] == [" makes", " shapes", " is"]
    assert "0.300 nats" in point.reason


def test_a_margin_at_the_threshold_is_substantive():
    reference, got = pair(token(" makes", -1.0, (" makes", -1.0), (" shapes", -1.5)),
                          token(" shapes", -1.0, (" shapes", -1.0)))
    assert classify_divergence(reference, got, threshold=0.5).kind == SUBSTANTIVE
    assert classify_divergence(reference, got, threshold=0.5000001).kind == NEAR_TIE


def test_a_token_outside_the_reference_top_gives_a_bound():
    reference, got = pair(token(" makes", -0.1, (" makes", -0.1), (" shapes", -2.0)),
                          token(" XK-AZURE", -0.1, (" XK-AZURE", -0.1)))
    point = classify_divergence(reference, got, threshold=0.5)
    assert (point.kind, point.margin_is_bound) == (SUBSTANTIVE, True)
    assert point.margin == pytest.approx(1.9)
    # a bound below the threshold decides nothing
    reference, got = pair(token(" makes", -0.1, (" makes", -0.1), (" shapes", -0.3)),
                          token(" other", -0.1, (" other", -0.1)))
    point = classify_divergence(reference, got, threshold=0.5)
    assert (point.kind, point.margin_is_bound) == (UNCLASSIFIED, True)
    assert "--logprobs" in point.reason


def test_a_foreign_canary_is_always_substantive_even_on_a_near_tie():
    reference, got = pair(token(" makes", -1.0, (" makes", -1.0), (" shapes", -1.01)),
                          token(" shapes", -1.0, (" shapes", -1.0)))
    point = classify_divergence(reference, got, threshold=0.5, foreign=CANARIES[1])
    assert point.kind == SUBSTANTIVE and point.foreign == CANARIES[1]
    assert point.margin == pytest.approx(0.01)  # the evidence is kept all the same
    assert CANARIES[1] in point.reason
    no_logprobs = classify_divergence(reply(None, "a"), reply(None, "b"), threshold=0.5,
                                      foreign=CANARIES[1])
    assert no_logprobs.kind == SUBSTANTIVE


@pytest.mark.parametrize("reference_tokens, reply_tokens, why", [
    (None, SHARED, "no token logprobs in the reference"),
    (SHARED, None, "no token logprobs in the reply"),
    (SHARED, SHARED, "the same tokens"),
    (SHARED, SHARED[:1], "stopped at token 1"),
])
def test_what_logprobs_cannot_decide_is_unclassified(reference_tokens, reply_tokens, why):
    point = classify_divergence(reply(reference_tokens), reply(reply_tokens), threshold=0.5)
    assert point.kind == UNCLASSIFIED and why in point.reason


@pytest.mark.parametrize("foreign", [None, CANARIES[1]])
@pytest.mark.parametrize("threshold", [0.5, 2.0])
def test_a_pair_without_logprobs_is_one_point_whichever_replies(threshold, foreign):
    """The point of a pair lacking logprobs is made once per side, threshold and foreign
    canary (a soak diverging everywhere has tens of thousands): each is the point
    those alone make, and another side, threshold or canary gets its own."""
    first = classify_divergence(reply(None, "a"), reply(SHARED, "b"), threshold=threshold,
                                foreign=foreign)
    again = classify_divergence(reply(None, "c"), reply(None, "d"), threshold=threshold,
                                foreign=foreign)
    assert again == first
    assert (first.kind, first.threshold, first.foreign) == (
        SUBSTANTIVE if foreign else UNCLASSIFIED, threshold, foreign)
    other_side = classify_divergence(reply(SHARED, "a"), reply(None, "b"),
                                     threshold=threshold, foreign=foreign)
    if foreign is None:  # (a leak's reason names the canary, whichever side)
        assert "no token logprobs in the reference" in first.reason
        assert "no token logprobs in the reply" in other_side.reason
    other_threshold = classify_divergence(reply(None, "a"), reply(None, "b"),
                                          threshold=threshold + 1, foreign=foreign)
    assert other_threshold.threshold == threshold + 1
    other_canary = classify_divergence(reply(None, "a"), reply(None, "b"),
                                       threshold=threshold, foreign=CANARIES[0])
    assert other_canary.foreign == CANARIES[0] and other_canary.kind == SUBSTANTIVE


def test_tokens_that_do_not_spell_the_reply_are_not_trusted():
    reference = reply(SHARED + [token(" a", -1.0, (" a", -1.0), (" b", -1.1))])
    got = reply(SHARED + [token(" b", -1.0, (" b", -1.0))], text="something else")
    point = classify_divergence(reference, got, threshold=0.5)
    assert point.kind == UNCLASSIFIED and "do not spell" in point.reason


def test_tokens_compare_on_exact_bytes():
    # two different invalid bytes must not be the same token
    assert first_differing_token([token("\udcff", -1.0)], [token("\udcfe", -1.0)]) == 0
    assert first_differing_token([token("\udcff", -1.0)], [token("\udcff", -2.0)]) is None


logprob = st.floats(min_value=-30, max_value=0, allow_nan=False)


@given(chosen=logprob, alternative=logprob, threshold=st.floats(0, 10), listed=st.booleans(),
       foreign=st.booleans())
def test_the_class_follows_the_documented_rule(chosen, alternative, threshold, listed, foreign):
    top = [(" a", chosen)] + ([(" b", alternative)] if listed else []) + [(" z", -40.0)]
    reference, got = pair(token(" a", chosen, *top), token(" b", alternative, (" b", alternative)))
    point = classify_divergence(reference, got, threshold=threshold,
                                foreign="XK-AZURE-HERON-41" if foreign else None)
    margin = chosen - alternative if listed else chosen - min(lp for _, lp in top)
    assert point.margin == pytest.approx(margin)
    assert point.margin_is_bound is (not listed)
    if foreign:
        expected = SUBSTANTIVE
    elif margin >= threshold:
        expected = SUBSTANTIVE
    else:
        expected = NEAR_TIE if listed else UNCLASSIFIED
    assert point.kind == expected
    assert point.to_json_dict()["class"] == expected


def test_recorded_real_engine_flip_is_a_near_tie():
    """Two solo references of one probe, as llama-server (SmolLM2-135M, CPU) sent them
    with logprobs: the second came from a warm prefix cache and flipped " made" to
    " tuned" where the first preferred " made" by 0.23 nats."""
    data = json.loads(REAL_ENGINE_NEAR_TIE.read_text())
    first = RequestOutcome.from_json_dict(data["ref_a"]).reply
    second = RequestOutcome.from_json_dict(data["ref_b"]).reply
    assert first is not None and second is not None
    point = classify_divergence(first, second, threshold=scoring.DEFAULT_NEAR_TIE_NATS)
    assert point.kind == NEAR_TIE
    assert (point.reference_token, point.reply_token) == (" made", " tuned")
    assert 0 < point.margin < 0.5
    assert point.reply_margin is not None and point.reply_margin > 0


# -- the score carries the classes --------------------------------------------------------------
def test_score_counts_divergence_classes_and_the_verdict_names_them():
    near = [token("x", -1.0, ("x", -1.0), ("y", -1.1))]
    reference = RequestOutcome(ok("p").timings, reply=reply(SHARED + near))
    flipped = RequestOutcome(ok("p").timings,
                             reply=reply(SHARED + [token("y", -1.0, ("y", -1.0))]))
    legs = Legs(ref_a=[reference], ref_b=[reference],
                rungs=[scoring.RungOutcomes("c2", 2, 1, [flipped], [flipped,
                       RequestOutcome(ok("q", start=0.0, end=1.0).timings,
                                      reply=reply(SHARED + near))])],
                post=[reference], canaries=["XK-AZURE-HERON-41"], min_completion_tokens=1)
    result = scoring.score(legs)
    counts = (result.diverged, result.near_tie, result.substantive, result.unclassified)
    assert counts == (1, 1, 0, 0)
    cell = next(c for c in result.cells if c.leg == "c2")
    assert cell.divergence is not None and cell.divergence.kind == NEAR_TIE
    verdict = scoring.verdict(result)
    assert verdict.kind == "fail"  # zero tolerance whatever the class
    assert "1 near-tie" in verdict.reason


STEP_KINDS = {
    "same": token("x", -1.0, ("x", -1.0), ("y", -1.1)),
    "near": token("y", -1.0, ("y", -1.0), ("x", -1.05)),
    "far": token("z", -0.5, ("z", -0.5)),
    "unlisted": token("q", -0.7),
    "leak": token(" " + CANARIES[1], -0.3, (" " + CANARIES[1], -0.3), ("x", -0.4)),
    "misspelt": token("x", -1.0, ("x", -1.0)),
}


def _drawn_reply(kind: str, logprobs: bool) -> RequestOutcome:
    step = STEP_KINDS[kind]
    made = reply(SHARED + [step], text="The smith" + ("?" if kind == "misspelt" else step.token))
    if not logprobs:
        made = dataclasses.replace(made, token_logprobs=None)
    return RequestOutcome(ok("p").timings, reply=made)


@given(st.lists(st.sampled_from(sorted(STEP_KINDS)), min_size=1, max_size=8),
       st.lists(st.booleans(), min_size=8, max_size=8), st.floats(0.01, 3.0))
def test_a_score_read_without_logprobs_given_its_points_is_the_score_read_whole(
        kinds, sent, threshold):
    """A cell's class never reads token logprobs, its divergence point does: the score
    of replies read without them, given the points of the same replies' evidence
    (`divergence_evidence`, `cell_divergence`), is the score of the whole replies (what
    the report does with a soak that diverges everywhere, holding no whole reply)."""
    reference = RequestOutcome(ok("p").timings, reply=reply(SHARED + [STEP_KINDS["same"]]))
    overlapping = RequestOutcome(ok("q", start=0.0, end=1.0).timings,
                                 reply=reply(SHARED + [STEP_KINDS["same"]]))

    def legs(logprobs: bool) -> Legs:
        return Legs(ref_a=[reference], ref_b=[reference],
                    rungs=[scoring.RungOutcomes(
                        "c2", 2, repeat, [_drawn_reply(kind, logprobs and sent[repeat - 1])],
                        [_drawn_reply(kind, logprobs and sent[repeat - 1]), overlapping])
                        for repeat, kind in enumerate(kinds, start=1)],
                    post=[reference], canaries=list(CANARIES[:2]), min_completion_tokens=1,
                    near_tie_nats=threshold)

    whole, light = scoring.score(legs(True)), scoring.score(legs(False))
    reference_reply = scoring.probe_reference(legs(True), 0)
    assert isinstance(reference_reply, Reply)
    points = {}
    for index, cell in enumerate(light.cells):
        if cell.divergence is not None and cell.leg == "c2":
            read = _drawn_reply(kinds[cell.repeat - 1], sent[cell.repeat - 1]).reply
            point = scoring.cell_divergence(
                reference_reply, cell.result, scoring.divergence_evidence(reference_reply, read),
                threshold)
            assert point is not None
            points[index] = point
    assert scoring.with_divergences(light, points) == whole
    assert scoring.with_divergences(whole, {}) is whole


def test_a_point_given_to_a_cell_without_one_is_refused():
    reference = RequestOutcome(ok("p").timings, reply=reply(SHARED + [STEP_KINDS["same"]]))
    legs = Legs(ref_a=[reference], ref_b=[reference], rungs=[], post=[reference],
                canaries=list(CANARIES[:1]), min_completion_tokens=1)
    result = scoring.score(legs)
    point = classify_divergence(reference.reply, reference.reply, threshold=0.5)
    with pytest.raises(ValueError, match="no divergence point to replace"):
        scoring.with_divergences(result, {0: point})


# -- bisect -----------------------------------------------------------------------------------
def search(low: int, high: int, diverges_from: int | None) -> tuple[list[int], int | None]:
    """Drive bisect_step against a server that diverges at and above `diverges_from`."""
    shown: dict[int, bool | None] = {}
    while True:
        level, smallest = bisect_step(low, high, shown)
        if level is None:
            return list(shown), smallest
        assert level not in shown and low <= level <= high
        shown[level] = diverges_from is not None and level >= diverges_from


@pytest.mark.parametrize("low, high", [(2, 3), (2, 8), (3, 17), (2, 64)])
def test_bisect_finds_the_smallest_diverging_level_for_every_threshold(low, high):
    for threshold in [None, *range(2, high + 3)]:
        tried, smallest = search(low, high, threshold)
        if threshold is None or threshold > high:
            assert (tried, smallest) == ([high], None)
        else:
            assert smallest == max(low, threshold)
        assert len(tried) <= 1 + (high - low).bit_length()


@given(st.integers(2, 500), st.integers(1, 500), st.integers(2, 520))
def test_bisect_property(low, width, threshold):
    high = min(512, low + width)
    if high <= low:
        return
    tried, smallest = search(low, high, threshold)
    assert smallest == (max(low, threshold) if threshold <= high else None)


def test_an_unmeasured_rung_stops_the_bisect():
    assert bisect_step(2, 8, {8: True, 5: None}) == (None, None)
    assert bisect_step(2, 8, {8: None}) == (None, None)


def test_a_rung_diverges_when_any_probe_diverged_or_leaked():
    def rung_diverges(results):
        return scoring.kinds_diverge({result.kind for result in results})
    assert rung_diverges([scoring.Identical()]) is False
    assert rung_diverges([scoring.Identical(), scoring.Diverged(3, "")])
    assert rung_diverges([scoring.Contaminated("X")])
    assert rung_diverges([scoring.Unmeasured("failed")]) is None
