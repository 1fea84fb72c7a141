import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchwarden.core.records import DEFAULT_WEIGHTS, Record, TokenComponents, TokenWeights
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
