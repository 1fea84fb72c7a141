import dataclasses
import math

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchwarden.core.records import (
    DEFAULT_WEIGHTS,
    Record,
    TokenComponents,
    TokenWeights,
    canonical_json,
    first_non_finite,
    non_finite_problem,
)
from benchwarden.core.verdicts import Verdict, one_line

counts = st.integers(min_value=0, max_value=10**9)


def test_default_weights_are_the_documented_ones():
    assert (DEFAULT_WEIGHTS.fresh_input, DEFAULT_WEIGHTS.cache_creation,
            DEFAULT_WEIGHTS.cache_read, DEFAULT_WEIGHTS.output) == (1.0, 1.25, 0.1, 5.0)
    tokens = TokenComponents(fresh_input=100, cache_creation=40, cache_read=1000, output=20)
    assert tokens.cost_equivalent() == pytest.approx(100 + 50 + 100 + 100)


@given(counts, counts, counts, counts)
def test_reweighting_is_linear_in_the_stored_components(f, c, r, o):
    tokens = TokenComponents(f, c, r, o)
    ones = TokenWeights(1, 1, 1, 1)
    assert tokens.cost_equivalent(ones) == tokens.raw_total
    assert tokens.cost_equivalent(TokenWeights(2, 2, 2, 2)) == 2 * tokens.raw_total


def test_weights_parse_and_refuse_nonsense():
    assert TokenWeights.parse("fresh=2,output=1") == TokenWeights(2, 1.25, 0.1, 1)
    with pytest.raises(ValueError, match="not NAME=NUMBER"):
        TokenWeights.parse("bogus=1")
    with pytest.raises(ValueError, match="not a number"):
        TokenWeights.parse("output=lots")


@pytest.mark.parametrize("text", ["fresh=nan", "output=inf", "cache_read=-inf", "output=1e400",
                                  "fresh=-1", "fresh=1,fresh=2", "fresh=1,fresh_input=2"])
def test_weights_that_make_no_cost_are_refused_in_one_line(text):
    # a NaN or infinite weight turned every cost in the views NaN or infinite (exit 0),
    # a negative one made tokens pay back, a name given twice silently took the last
    with pytest.raises(ValueError) as caught:
        TokenWeights.parse(text)
    assert "\n" not in str(caught.value) and text.split(",")[-1] in str(caught.value)


@given(number=st.floats(allow_nan=True, allow_infinity=True),
       name=st.sampled_from(["fresh", "cache_creation", "cache_read", "output"]))
def test_a_weight_read_is_finite_and_not_negative(number, name):
    try:
        weights = TokenWeights.parse(f"{name}={number!r}")
    except ValueError:
        assert not math.isfinite(number) or number < 0
        return
    assert all(math.isfinite(value) and value >= 0 for value in dataclasses.astuple(weights))


def test_token_sum_keeps_reasoning_optional():
    assert (TokenComponents(1, 2, 3, 4) + TokenComponents(1, 1, 1, 1)).reasoning is None
    assert (TokenComponents(reasoning=3) + TokenComponents()).reasoning == 3


def test_record_json_round_trip():
    record = Record("s", "sc", "a", "t", 2, "r", "ok", 1.0, 3.0, TokenComponents(1, 2, 3, 4, 5),
                    {"nested": {"x": [1, 2]}})
    assert Record.from_json_dict(record.to_json_dict()) == record
    assert record.duration_s == 2.0


def test_verdict_reason_is_one_line_and_kinds_are_checked():
    assert Verdict.failed("a\nb   c").reason == "a b c"
    assert Verdict.nothing_measured("0 comparisons").kind == "fail"
    assert Verdict.failed("x").exit_code == 1 and Verdict.passed("x").exit_code == 0
    with pytest.raises(ValueError):
        Verdict("maybe", "x")
    assert one_line("x" * 10, 5) == "xxxx…"


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats()
    | st.text(st.characters(blacklist_categories=("Cs",))),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=20)


@given(JSON_VALUES)
def test_a_value_is_named_non_finite_exactly_when_json_would_not_keep_it(value):
    """The store's refusal rule against the encoder itself: a value round-trips through
    canonical JSON unchanged exactly when no NaN or infinity is found in it."""
    kept = msgspec.json.decode(canonical_json(value)) == value
    assert (first_non_finite(value, "payload") is None) == kept


@given(st.lists(st.sampled_from(["a", "b", 0, 1]), max_size=4),
       st.sampled_from([float("nan"), float("inf"), -float("inf")]))
def test_the_named_path_leads_to_the_non_finite_value(path, number):
    value: object = number
    expected = "payload"
    for step in reversed(path):
        value = {step: value} if isinstance(step, str) else [None] * step + [value]
    for step in path:
        expected += f".{step}" if isinstance(step, str) else f"[{step}]"
    where, found = first_non_finite(value, "payload")
    assert where == expected and (found == number or math.isnan(found))
    words = {"nan": "NaN", "inf": "infinity", "-inf": "minus infinity"}[repr(number)]
    assert non_finite_problem(value, "payload") == f"{expected} is {words}, which JSON cannot hold"


def test_values_the_encoder_converts_are_walked_as_it_converts_them():
    @dataclasses.dataclass
    class Score:
        value: float

    where, number = first_non_finite({"s": Score(float("nan"))}, "p")
    assert where == "p.s.value" and math.isnan(number)
    assert first_non_finite({"s": {1.5, 2.5}}, "p") is None
    assert first_non_finite({"s": frozenset([float("inf")])}, "p") == ("p.s[0]", float("inf"))


def test_a_record_names_what_it_cannot_store():
    record = Record(suite="s", scope="c", arm="a", task="t", trial=1, run_id="r",
                    outcome="ok", started_at=1.0, ended_at=2.0)
    assert record.storage_problem() is None
    assert dataclasses.replace(record, started_at=2).storage_problem() is None  # an int is a time
    assert dataclasses.replace(record, ended_at=float("-inf")).storage_problem() == (
        "ended_at is minus infinity, which JSON cannot hold")
    assert dataclasses.replace(record, started_at="soon").storage_problem() == (
        "started_at is str, not a number of seconds")
    assert dataclasses.replace(record, tokens=TokenComponents(reasoning=1.5)).storage_problem() == (
        "tokens.reasoning is 1.5, not a whole number of tokens")
    assert dataclasses.replace(record, payload={"x": [1, float("nan")]}).storage_problem() == (
        "payload.x[1] is NaN, which JSON cannot hold")
