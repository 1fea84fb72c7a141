"""The generator: reproducible to the byte, categories 1-10 pinned, the canary inert."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

from hypothesis import given, settings, strategies as st

from benchwarden.suites.retrieval import corpus as corpus_module
from benchwarden.suites.retrieval.corpus import (
    CATEGORIES, PARAPHRASE_TEMPLATES, generate, long_words, paraphrase, pinned_json)
from benchwarden.suites.retrieval.grading import contains_value

# Computed once from the generator and committed: if one of these moves, every recorded
# score of categories 1-10 stops being comparable. Change the generator, not these.
GOLDEN_PINNED_SHA256 = {
    1: "e8818e5aa05802e0d1726de86e245df8d95b9628c77fa98e7259fbf1c1305883",
    2: "f9484a9b5ecb98b2bb3fa1c4e6b45357b379d36672abf93dcf4bfa4f73de3f14",
    12345: "20b29ab42c4d8012e46c682ed9c9b47384db232fef5b33210ff3ac73968673ae",
}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_categories_one_to_ten_match_their_golden_hashes():
    for seed, expected in GOLDEN_PINNED_SHA256.items():
        assert _sha(pinned_json(generate(seed))) == expected, f"seed {seed} moved"


def test_seed_one_values_are_pinned_in_plain_sight():
    cases = {case.category: case for case in generate(1).cases}
    assert cases["single_session"].question == "What is Umar's pager alias?"
    assert cases["single_session"].expected == "pelese"
    assert cases["knowledge_update"].forbidden == ("netome",)
    assert cases["knowledge_update"].expected == "lutido"


def test_same_seed_gives_byte_identical_corpus_and_key():
    first = json.dumps(generate(42).to_json_dict(), sort_keys=True).encode()
    second = json.dumps(generate(42).to_json_dict(), sort_keys=True).encode()
    assert first == second
    assert first != json.dumps(generate(43).to_json_dict(), sort_keys=True).encode()


def test_generation_does_not_depend_on_hash_randomisation():
    program = ("import hashlib, json; from benchwarden.suites.retrieval.corpus import generate; "
               "print(hashlib.sha256(json.dumps(generate(5).to_json_dict(), sort_keys=True)"
               ".encode()).hexdigest())")
    digests = {
        subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True,
                       env={"PYTHONHASHSEED": str(value), "PATH": "/usr/bin:/bin"}).stdout.strip()
        for value in (0, 1, 999)
    }
    here = _sha(json.dumps(generate(5).to_json_dict(), sort_keys=True).encode())
    assert digests == {here}


def test_adding_or_dropping_later_categories_cannot_move_the_first_ten(monkeypatch):
    before = pinned_json(generate(1))
    monkeypatch.setattr(corpus_module, "_later_categories", lambda rng, mint, names: ([], []))
    without_later = generate(1)
    assert all(case.category in CATEGORIES[:10] for case in without_later.cases)
    assert pinned_json(without_later) == before


def test_every_category_has_exactly_one_case_per_seed():
    for seed in range(20):
        corpus = generate(seed)
        assert [case.category for case in corpus.cases] == list(CATEGORIES)
        assert len({case.id for case in corpus.cases}) == len(CATEGORIES)


def test_every_answer_is_in_the_corpus_and_abstention_has_none():
    for seed in range(30):
        corpus = generate(seed)
        text = "\n".join(session.text for session in corpus.sessions)
        for case in corpus.cases:
            for value in (*case.required, *case.forbidden, *case.stale,
                          *([case.expected] if case.expected else [])):
                assert contains_value(text, value), (seed, case.id, value)
            if case.category == "abstention":
                assert case.expected is None and not case.required


def _check_canary(corpus) -> None:
    text = "\n".join(session.text for session in corpus.sessions)
    assert text.count(corpus.canary) == 1
    assert corpus.canary_line.text in corpus.sessions[corpus.canary_line.session].text
    canary_words = long_words(corpus.canary_line.text)
    for case in corpus.cases:
        for template in ("{question}", *PARAPHRASE_TEMPLATES):
            asked = paraphrase(case.question, template)
            assert not canary_words & long_words(asked), (corpus.seed, asked)
        values = {*case.required, *case.forbidden, *case.stale, case.expected, case.payload}
        assert corpus.canary not in values
    for fact in corpus.facts:
        assert not contains_value(fact.text, corpus.canary)


def test_canary_shares_no_long_word_with_any_question_over_200_seeds():
    for seed in range(200):
        _check_canary(generate(seed))


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=2**48))
def test_canary_is_inert_for_any_seed(seed):
    _check_canary(generate(seed))


def test_coined_values_are_unique_within_a_corpus():
    for seed in range(50):
        corpus = generate(seed)
        values = [v.lower() for case in corpus.cases
                  for v in (*case.required, *case.forbidden, *case.stale,
                            *([case.expected] if case.expected else []))]
        values.append(corpus.canary.lower())
        assert len(set(values)) == len(values), seed


def test_updates_always_come_after_what_they_replace():
    for seed in range(50):
        facts = generate(seed).facts
        for category in ("knowledge_update", "point_in_time", "supersede_hygiene",
                         "temporal_depth"):
            sessions = [f.session for f in facts if f.category == category]
            assert sessions == sorted(sessions) and len(set(sessions)) == len(sessions)


def test_negative_or_non_integer_seed_is_refused():
    import pytest

    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError):
            generate(bad)  # type: ignore[arg-type]
