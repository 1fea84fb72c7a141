"""Seed scoring, multi-seed summaries, legacy reports and the paired verdict."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.core.stats import minimum_detectable_effect
from benchwarden.suites.retrieval.corpus import CATEGORIES
from benchwarden.suites.retrieval.scoring import (
    CaseOutcome,
    PackMeasure,
    comparable,
    decide,
    normalise_report,
    run_seeds,
    score_seed,
)


def outcome(category: str, score: float, used: int = 100, canary: bool = False,
            paraphrase_scores=(None, None, None)) -> CaseOutcome:
    paraphrases = tuple(
        PackMeasure(score if p is None else p, used, False, template=f"t{i}")
        for i, p in enumerate(paraphrase_scores))
    return CaseOutcome(1, f"x-{category}", category, "q?",
                       PackMeasure(score, used, canary), paraphrases)


def report(version: str, seeds: dict[int, float], guarded: dict[int, float] | None = None,
           **extra) -> dict:
    blocks = []
    for seed, composite in seeds.items():
        block = {"seed": seed, "composite": composite, "category_means": {}}
        if version != "1":
            block["guards"] = {"efficiency": 1.0, "consistency": 1.0, "canary": 1.0,
                               "canary_tripped": False, "canary_leak_rate": 0.0}
            block["composite_guarded"] = (guarded or seeds)[seed]
        blocks.append(block)
    return {"suite": "retrieval", "bench_version": version, "seeds": blocks,
            "settings": {"limit": 10, "budget_chars": 2000}, **extra}


def test_seed_score_recomputes_composite_as_plain_mean_of_category_means():
    outcomes = [outcome(category, 1.0 if i % 2 else 0.0) for i, category in enumerate(CATEGORIES)]
    block = score_seed(1, outcomes, 2000)
    means = [v for v in block["category_means"].values() if v is not None]
    assert block["composite"] == pytest.approx(sum(means) / len(means)) == pytest.approx(0.5)
    g = block["guards"]
    assert block["composite_guarded"] == pytest.approx(
        block["composite"] * g["efficiency"] * g["consistency"] * g["canary"])
    assert len(block["failed_cases"]) == 7


def test_seed_guards_come_from_every_pack():
    outcomes = [outcome("single_session", 1.0, used=1000, canary=True,
                        paraphrase_scores=(1.0, 0.0, 1.0)),
                outcome("abstention", 0.0, used=1000)]
    block = score_seed(1, outcomes, 2000)
    g = block["guards"]
    assert g["efficiency"] == pytest.approx(0.75)
    assert g["consistency"] == pytest.approx(5 / 6)
    assert g["consistency_per_template"] == {"t0": 1.0, "t1": 0.5, "t2": 1.0}
    assert g["canary"] == 0.5 and g["canary_tripped"]
    assert g["canary_leak_rate"] == pytest.approx(1 / 8)
    assert block["composite"] == 0.5
    assert block["composite_guarded"] == pytest.approx(0.5 * 0.75 * (5 / 6) * 0.5)


def test_each_template_says_how_many_cases_it_moved_and_the_summary_sums_them():
    outcomes = [outcome("single_session", 1.0, paraphrase_scores=(1.0, 0.0, 0.0)),
                outcome("abstention", 0.0, paraphrase_scores=(0.0, 0.0, 1.0))]
    block = score_seed(1, outcomes, 2000)
    assert block["guards"]["disagreements_per_template"] == {"t0": [0, 2], "t1": [1, 2],
                                                             "t2": [2, 2]}
    other = score_seed(2, outcomes[:1], 2000)
    summary = run_seeds([block, other])
    assert summary["guards"]["disagreements_per_template"] == {"t0": [0, 3], "t1": [2, 3],
                                                               "t2": [3, 3]}
    # a version-2 seed block has no counts: it reads as none, not as a crash
    legacy = normalise_report(report("2", {1: 0.5}))
    assert legacy["seeds"][0]["guards"]["disagreements_per_template"] == {}


def test_empty_seed_is_zero_not_a_crash():
    block = score_seed(1, [], 2000)
    assert block["composite"] == 0.0 and block["guards"]["efficiency"] == 1.0


def test_run_seeds_reports_mean_and_se_of_both_composites_and_every_guard():
    summary = run_seeds(report("2", {1: 0.5, 2: 0.7}, guarded={1: 0.25, 2: 0.35})["seeds"])
    assert summary["composite"]["mean"] == pytest.approx(0.6)
    assert summary["composite"]["se"] == pytest.approx(0.1)
    assert summary["composite_guarded"]["mean"] == pytest.approx(0.3)
    for name in ("efficiency", "consistency", "canary", "canary_leak_rate"):
        assert summary["guards"][name]["mean"] is not None


def test_legacy_version_one_report_is_read_with_neutral_guards():
    legacy = normalise_report(report("1", {1: 0.6, 2: 0.7}))
    assert legacy["bench_version"] == "1" and legacy["legacy_guards"]
    for block in legacy["seeds"]:
        assert block["composite_guarded"] == block["composite"]
        assert block["guards"]["efficiency"] == block["guards"]["canary"] == 1.0
    assert legacy["summary"]["composite_guarded"]["mean"] == pytest.approx(0.65)


def test_legacy_report_is_never_compared_with_a_newer_one():
    with pytest.raises(ValueError, match="bench_version 1 with bench_version 2"):
        decide(report("1", {1: 0.6, 2: 0.7}), report("2", {1: 0.9, 2: 0.9}))


def test_different_seeds_are_refused():
    with pytest.raises(ValueError, match="different seeds"):
        comparable(normalise_report(report("2", {1: 0.6, 2: 0.7})),
                   normalise_report(report("2", {1: 0.6, 3: 0.7})))


def test_report_without_version_is_refused():
    bad = report("2", {1: 0.6})
    del bad["bench_version"]
    with pytest.raises(ValueError, match="bench_version"):
        normalise_report(bad)


def test_paired_verdict_on_known_numbers():
    champion = report("2", {1: 0.60, 2: 0.62, 3: 0.64})
    challenger = report("2", {1: 0.65, 2: 0.66, 3: 0.70})
    decision = decide(champion, challenger)
    verdict = decision.verdict
    assert verdict.mean_diff == pytest.approx(0.05)
    assert verdict.se == pytest.approx(0.01 / 3 ** 0.5)
    assert verdict.band == pytest.approx(1.96 * 0.01 / 3 ** 0.5)
    assert verdict.dethroned and decision.dethroned


def test_a_held_decision_says_how_large_a_difference_its_seeds_could_detect():
    champion = report("2", {1: 0.60, 2: 0.62, 3: 0.64, 4: 0.60})
    challenger = report("2", {1: 0.62, 2: 0.60, 3: 0.66, 4: 0.58})  # diffs +.02 -.02 +.02 -.02
    decision = decide(champion, challenger)
    assert not decision.dethroned
    paired = decision.paired
    assert paired.n == 4 and paired.mean_diff == pytest.approx(0.0, abs=1e-12)
    assert paired.mde == pytest.approx(minimum_detectable_effect(paired.sd, 4))
    assert paired.mde > abs(paired.mean_diff)
    assert f"detect differences of about {paired.mde:.4f}" in decision.reason
    assert decision.to_json_dict()["paired"]["mde"] == pytest.approx(paired.mde)


def test_paired_verdict_with_zero_se_is_decided_by_the_floor():
    champion = report("2", {1: 0.5, 2: 0.25, 3: 0.75})
    just_under = report("2", {1: 0.5 + 0.005, 2: 0.25 + 0.005, 3: 0.75 + 0.005})
    held = decide(champion, just_under)
    assert held.verdict.se == pytest.approx(0.0, abs=1e-12)
    assert held.verdict.band == 0.007 and not held.dethroned
    clear = report("2", {1: 0.5 + 0.0078125, 2: 0.25 + 0.0078125, 3: 0.75 + 0.0078125})
    won = decide(champion, clear)
    assert won.verdict.se == 0.0 and won.verdict.band == 0.007 and won.dethroned


def test_ladder_can_decide_on_the_guarded_composite():
    champion = report("2", {1: 0.6, 2: 0.6}, guarded={1: 0.6, 2: 0.6})
    challenger = report("2", {1: 0.9, 2: 0.9}, guarded={1: 0.3, 2: 0.3})
    assert decide(champion, challenger, "composite").dethroned
    assert not decide(champion, challenger, "composite_guarded").dethroned


def test_a_failed_challenger_can_never_dethrone():
    champion = report("2", {1: 0.1, 2: 0.1})
    challenger = report("2", {1: 1.0}, failure={"seed": 2, "reason": "sandbox: CPU limit"})
    decision = decide(champion, challenger)
    assert not decision.dethroned and decision.verdict is None
    assert "CPU limit" in decision.reason


def test_a_failed_champion_is_an_error_not_a_verdict():
    with pytest.raises(ValueError, match="champion run failed"):
        decide(report("2", {1: 0.1}, failure={"seed": 1, "reason": "x"}),
               report("2", {1: 0.5}))


# -- the report's shape: every number over seeds is in the summary ---------------------

seed_scores_strategy = st.lists(
    st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=len(CATEGORIES), max_size=len(CATEGORIES)),
    min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(seed_scores_strategy, st.integers(min_value=100, max_value=4000))
def test_the_summary_holds_student_t_intervals_and_the_page_draws_exactly_them(scores, used):
    from benchwarden.core.stats import mean_se
    from benchwarden.suites.retrieval.html import render_html
    from benchwarden.suites.retrieval.report import RetrievalReport

    blocks = []
    for seed, row in enumerate(scores, 1):
        outcomes = [CaseOutcome(seed, f"{i}-{category}", category, "q?",
                                PackMeasure(score, used, False),
                                (PackMeasure(score if i % 3 else 1.0 - score, used, False,
                                             template="t0"),))
                    for i, (category, score) in enumerate(zip(CATEGORIES, row, strict=False))]
        blocks.append(score_seed(seed, outcomes, 2000))
    typed = RetrievalReport.from_json({**report("2", {}), "seeds": blocks})
    assert typed.summary is not None
    composite = mean_se([b["composite"] for b in blocks])
    assert (typed.summary.composite.low, typed.summary.composite.high) == (composite.low,
                                                                          composite.high)
    template = typed.summary.guards.consistency_per_template["t0"]
    assert template.mean == pytest.approx(
        sum(b["guards"]["consistency_per_template"]["t0"] for b in blocks) / len(blocks))
    intervals = {(e.low, e.high) for e in (typed.summary.composite, typed.summary.composite_guarded,
                                           *typed.summary.category_means.values(),
                                           typed.summary.guards.efficiency,
                                           typed.summary.guards.consistency,
                                           typed.summary.guards.canary)}
    page = render_html(typed)
    drawn = {(float(low), float(high))
             for low, high in re.findall(
                 r'class="whisker" data-low="([^"]+)" data-high="([^"]+)"', page)}
    assert drawn <= intervals
    assert RetrievalReport.from_json(typed.to_json()) == typed
