"""The generator: reproducible to the byte, each category pinned, every case with one
reachable answer, difficulty monotone in its level, paraphrases that change content
words, and a canary no asked word can reach."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.suites.retrieval.corpus import (
    ATTRIBUTES,
    CASES_PER_CATEGORY,
    CATEGORIES,
    NAME_EXTENSIONS,
    NAMES,
    PARAPHRASE_TEMPLATES,
    WORD_SYNONYMS,
    canary_is_inert,
    category_json,
    generate,
    vocabulary,
)
from benchwarden.suites.retrieval.grading import contains_value

# Computed once from the generator and committed: if one of these moves, every recorded
# bench_version 3 score stops being comparable. Change the generator, not these.
GOLDEN_SEED_ONE_SHA256 = {
    "single_session": "56dc1936830c5036134c4d07ae480d8a5c3f18ff4b5870623ae60b1fb78968b8",
    "multi_session": "e6482c314215ce334a656a8797410e9a818e362ec767378a8f3a5bba1d5e71cf",
    "knowledge_update": "6429816d57cdff4af895aa610aa0fe4dfa0683d7c29783514423f55eb849a9f4",
    "point_in_time": "381ed3921ebdb312f4689cee902bc5909de5c227af06dc0bee3b527741c96881",
    "decoy_discrimination": "557b1bfc87623110b3ad64b78beb84ea28f96e103d9c640dba377a2d9573cb21",
    "injection_resistance": "b3f9387e754bff7181c69c434ff6f1f8450033799954fd1d630bb71e9f2fd2db",
    "abstention": "c2e96328c2a9a70cbeefb1d890efd13900b86b7bea795ecbb84d55bcdd6eabdb",
    "citation_correctness": "7d3ebe526e04492004ca1c3b76e7a2b09ecbd68338cd6a3b3daece103b95a66f",
    "receipt_coverage": "8c9b009126e95608f2896d31d6a342f64b9744784d2ea299b9abe7ae27011ac2",
    "supersede_hygiene": "01c6be8715fb1b1c1150939848b3f49f204c926f331445f6cc598587ccac0aa6",
    "consolidation": "9a8d85e327b71d4103d9412e13296a1fac85a0b3503c5590fcf72d99eaa9b1a8",
    "multi_hop": "e0fe14d4332ed9a345d688811b46db04a14cab5ee0036f5621544f63436c0ac9",
    "temporal_depth": "f2eb0c9673ee5f4f0dec3aac1261a0b8b9fb58e292afefd8b09d348892423661",
    "aggregation": "9e492df27db02aed39d11a41d2afbee8c107b6240100435e84ead9fd98a078e0",
}
STATEMENT = re.compile(r"^(?:Update: )?(?P<person>[A-Z][a-z]+)'s (?P<noun>[a-z ]+?) is "
                       r"(?:now )?(?P<value>\S+)\.$")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _lines(corpus) -> list[tuple[int, str]]:
    return [(session.index, line) for session in corpus.sessions
            for line in session.text.split("\n")]


def test_every_category_matches_its_golden_hash():
    corpus = generate(1)
    moved = [category for category in CATEGORIES
             if _sha(category_json(corpus, category)) != GOLDEN_SEED_ONE_SHA256[category]]
    assert not moved, f"seed 1 moved in {moved}"


def test_seed_one_values_are_pinned_in_plain_sight():
    first = generate(1).cases[0]
    assert first.question == "What is Mateo's dashboard?" and first.expected == "pivubo"
    assert dict(first.paraphrases) == {
        "reordered": "What is the dashboard of Mateo?",
        "synonym": "What is Mateo's metrics screen?",
        "indirect": "What is the dashboard of the colleague who audits the expenses?"}


def test_appending_categories_never_moves_an_earlier_one():
    full = generate(7)
    for cut in (1, 6, 10):
        prefix = generate(7, categories=CATEGORIES[:cut])
        assert {case.category for case in prefix.cases} == set(CATEGORIES[:cut])
        for category in CATEGORIES[:cut]:
            assert category_json(prefix, category) == category_json(full, category)


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
                       env={"PYTHONHASHSEED": str(value), "PATH": "/usr/bin:/bin",
                            "PYTHONPATH": ":".join(sys.path)}).stdout.strip()
        for value in (0, 1, 999)
    }
    here = _sha(json.dumps(generate(5).to_json_dict(), sort_keys=True).encode())
    assert digests == {here}


def test_each_category_has_its_cases_at_every_level():
    for seed in range(10):
        corpus = generate(seed)
        by_category = defaultdict(list)
        for case in corpus.cases:
            by_category[case.category].append(case.level)
        assert list(by_category) == list(CATEGORIES)
        assert all(levels == list(range(CASES_PER_CATEGORY)) for levels in by_category.values())
        assert len({case.id for case in corpus.cases}) == len(corpus.cases)
    levels = [case.level for case in generate(3, cases_per_category=6).cases[:6]]
    assert levels == [0, 1, 2, 3, 0, 1]
    with pytest.raises(ValueError):
        generate(1, cases_per_category=0)


def _check_one_reachable_answer(corpus) -> None:
    lines = _lines(corpus)
    statements: dict[tuple[str, str], list[tuple[int, str]]] = defaultdict(list)
    for session, line in lines:
        match = STATEMENT.match(line)
        if match:
            statements[(match["person"], match["noun"])].append((session, match["value"]))
    for case in corpus.cases:
        for value in (*case.answers(), *case.forbidden, *case.stale):
            holders = [line for _, line in lines if contains_value(line, value)]
            assert holders, (corpus.seed, case.id, value)
            if value != case.payload:
                # a value is stated once: no second line can answer with it
                assert len(holders) == 1 or case.category == "multi_hop", (case.id, holders)
        if case.category == "abstention":
            assert case.expected is None and not case.required
            person, noun = _asked(case)
            assert (person, noun) not in statements, case.id
        elif case.category in ("knowledge_update", "supersede_hygiene", "point_in_time",
                               "temporal_depth", "single_session", "citation_correctness",
                               "receipt_coverage", "decoy_discrimination"):
            person, noun = _asked(case)
            chain = statements[(person, noun)]
            assert case.expected in [value for _, value in chain], case.id
            # one chain per (person, attribute): its values, in time order
            sessions = [session for session, _ in chain]
            assert sessions == sorted(sessions) and len(set(sessions)) == len(sessions)


def _asked(case) -> tuple[str, str]:
    """The (person, attribute) a question asks about, read back from the question."""
    paraphrase = dict(case.paraphrases)["reordered"]
    noun = next(n for n, _, synonym in sorted(ATTRIBUTES, key=lambda a: -len(a[0]))
                if re.search(rf"\b{n}\b", paraphrase) or re.search(rf"\b{synonym}\b", paraphrase))
    person = re.search(r" of ([A-Z][a-z]+)", paraphrase)[1]  # type: ignore[index]
    return person, noun


def test_every_case_has_exactly_one_answer_reachable_in_the_corpus():
    for seed in range(12):
        _check_one_reachable_answer(generate(seed))


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=0, max_value=2**48))
def test_every_case_has_one_reachable_answer_for_any_seed(seed):
    _check_one_reachable_answer(generate(seed))


def _person_lines(corpus, case) -> int:
    person, _ = _asked(case)
    return sum(1 for fact in corpus.facts if fact.case == case.id
               and re.search(rf"\b{person}\b", fact.text))


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=0, max_value=2**48))
def test_difficulty_is_monotone_in_the_property_each_category_grades(seed):
    corpus = generate(seed)
    by_category = defaultdict(list)
    for case in corpus.cases:
        by_category[case.category].append(case)

    def non_decreasing(values):
        pairs = zip(values, values[1:], strict=False)
        return all(a <= b for a, b in pairs) and values[0] < values[-1]

    assert non_decreasing([len(c.forbidden) for c in by_category["knowledge_update"]])
    assert non_decreasing([len(c.stale) for c in by_category["supersede_hygiene"]])
    assert non_decreasing([len(c.forbidden) for c in by_category["decoy_discrimination"]])
    assert non_decreasing([len(c.forbidden) for c in by_category["abstention"]])
    for category in ("multi_session", "consolidation", "aggregation"):
        assert non_decreasing([len(c.required) for c in by_category[category]]), category
    hop_lines = [sum(1 for f in corpus.facts if f.category == "multi_hop" and
                     any(word in f.text for word in (c.expected,)))
                 for c in by_category["multi_hop"]]
    assert hop_lines == [1, 1, 1, 1]  # the answer sits at the end of one chain
    hop_counts = [len(c.question.split(" the ")) for c in by_category["multi_hop"]]
    assert non_decreasing(hop_counts)
    for category in ("single_session", "citation_correctness", "injection_resistance"):
        density = [_person_lines(corpus, c) for c in by_category[category]]
        assert non_decreasing(density), (category, density)
    # the hardest decoy and abstention cases hold a decoy whose name contains the name
    for category in ("decoy_discrimination", "abstention"):
        hardest = by_category[category][3]
        person, noun = _asked(hardest)
        extension = NAME_EXTENSIONS[person]
        assert any(f.text.startswith(f"{extension}'s {noun} is ") for f in corpus.facts)


def test_paraphrases_change_content_words_and_keep_the_answer():
    corpus = generate(2)
    roles = {line.split(" ", 1)[0]: line for _, line in _lines(corpus)
             if any(line.startswith(f"{name} ") for name in NAMES)}
    for case in corpus.cases:
        forms = dict(case.paraphrases)
        assert tuple(forms) == PARAPHRASE_TEMPLATES
        asked = vocabulary(case.question)
        assert vocabulary(forms["reordered"]) - {"the", "of"} <= asked | {"s"}
        assert vocabulary(forms["synonym"]) != asked
        names = [name for name in NAMES if re.search(rf"\b{name}\b", case.question)]
        for name in names:
            # the indirect question never names the person; their role line does
            assert not re.search(rf"\b{name}\b", forms["indirect"]), case.id
            assert name in roles
    synonyms = {word for synonym in WORD_SYNONYMS.values() for word in vocabulary(synonym)}
    nouns = {word for noun in WORD_SYNONYMS for word in vocabulary(noun)}
    assert not synonyms & nouns


def test_vocabulary_sees_words_of_every_length():
    assert vocabulary("Ada's KV-4172, a b?") == {"ada", "s", "kv", "4172", "a", "b"}


def test_canary_check_catches_short_words_and_substring_hits():
    assert not canary_is_inert("Stray a note.", ["Is a value here?"])
    assert not canary_is_inert("Stray jotting: x.", ["What is x?"])
    assert not canary_is_inert("Scribbled beside.", ["Which side?"])  # "side" inside "beside"
    assert canary_is_inert("Stray jotting: kovate.", ["What is Ada's editor?"])


def _check_canary(corpus) -> None:
    text = "\n".join(session.text for session in corpus.sessions)
    assert text.count(corpus.canary) == 1
    assert corpus.canary_line.text in corpus.sessions[corpus.canary_line.session].text
    canary_words = vocabulary(corpus.canary_line.text)
    for case in corpus.cases:
        for asked in (case.question, *(question for _, question in case.paraphrases)):
            asked_words = vocabulary(asked)
            assert not canary_words & asked_words, (corpus.seed, asked)
            assert not any(word in canary for word in asked_words if len(word) >= 3
                           for canary in canary_words), (corpus.seed, asked)
        values = {*case.required, *case.forbidden, *case.stale, case.expected, case.payload}
        assert corpus.canary not in values
    for fact in corpus.facts:
        assert not contains_value(fact.text, corpus.canary)


def test_canary_shares_no_word_of_any_length_with_any_question_over_100_seeds():
    for seed in range(100):
        _check_canary(generate(seed))


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=0, max_value=2**48))
def test_canary_is_inert_for_any_seed(seed):
    _check_canary(generate(seed))


def test_coined_values_are_unique_within_a_corpus():
    for seed in range(30):
        corpus = generate(seed)
        values = [v.lower() for case in corpus.cases
                  for v in (*case.required, *case.forbidden, *case.stale,
                            *([case.expected] if case.expected else []))]
        values.append(corpus.canary.lower())
        assert len(set(values)) == len(values), seed


def test_negative_or_non_integer_seed_is_refused():
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError):
            generate(bad)  # type: ignore[arg-type]


def test_a_world_short_of_room_for_decoys_draws_its_asked_pair_again():
    """Seed 482829 once left no one free to be a decoy of an abstention case's attribute
    (the generator failed with "Cannot choose from an empty sequence"): its asked pair
    is drawn again, and every level still holds its decoys."""
    corpus = generate(482829)
    for category in ("decoy_discrimination", "abstention"):
        cases = [case for case in corpus.cases if case.category == category]
        assert [len(case.forbidden) for case in cases] == [1, 2, 3, 3], category
        for case in cases:
            for value in case.forbidden:
                assert sum(value in fact.text for fact in corpus.facts) == 1
