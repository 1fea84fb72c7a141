"""The shared formatters: every view prints numbers through these."""

from __future__ import annotations

import math
import re

from hypothesis import given
from hypothesis import strategies as st

from benchwarden.core import formatting as fmt
from benchwarden.core.reports import EstimateBlock

finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12)
missing = st.sampled_from([None, math.nan, math.inf, -math.inf])


def _parse(text: str) -> float:
    return float(text.replace(",", ""))


@given(finite, st.integers(min_value=0, max_value=6))
def test_number_reads_back_to_the_value_within_its_rounding(value: float, digits: int) -> None:
    text = fmt.number(value, digits)
    assert re.fullmatch(r"-?\d{1,3}(,\d{3})*(\.\d+)?", text), text
    assert abs(_parse(text) - value) <= 0.5 * 10 ** -digits + 1e-9 * abs(value)
    assert (len(text.split(".")[1]) if "." in text else 0) == digits


@given(missing, st.integers(min_value=0, max_value=4))
def test_every_formatter_prints_a_dash_for_missing_values(value: float | None, digits: int) -> None:
    for text in (fmt.number(value, digits), fmt.count(value), fmt.tokens(value),
                 fmt.signed(value, digits), fmt.percent(value, digits), fmt.duration(value),
                 fmt.when(value), fmt.p_value(value), fmt.interval(value, 1.0, digits),
                 fmt.interval(0.0, value, digits)):
        assert text == fmt.DASH


def test_integers_and_booleans() -> None:
    assert fmt.number(1234567) == "1,234,567"
    assert fmt.number(0.12345) == "0.12"
    assert fmt.number(True) == "yes" and fmt.number(False) == "no"
    assert fmt.number("label") == "label"
    assert fmt.count(True) == fmt.DASH  # a flag is not a count


@given(finite, st.integers(min_value=0, max_value=4))
def test_signed_always_shows_its_sign(value: float, digits: int) -> None:
    text = fmt.signed(value, digits)
    assert text[0] in "+-"
    assert abs(_parse(text) - value) <= 0.5 * 10 ** -digits + 1e-9 * abs(value)


def test_signed_with_scale_and_suffix() -> None:
    assert fmt.signed(0.0153, 1, scale=100, suffix=" pp") == "+1.5 pp"
    assert fmt.signed(-1234.4, 0) == "-1,234"


@given(st.floats(min_value=0, max_value=1), st.floats(min_value=0, max_value=1))
def test_interval_keeps_its_ends_in_order(a: float, b: float) -> None:
    low, high = min(a, b), max(a, b)
    text = fmt.interval(low, high, 3)
    left, right = text.strip("[]").split(", ")
    assert _parse(left) <= _parse(right)


def test_percent_rate_and_interval() -> None:
    assert fmt.percent(0.573) == "57%"
    assert fmt.percent(0.573, 1) == "57.3%"
    rate = EstimateBlock(mean=0.5, se=0.1, low=0.236, high=0.764, n=10, method="wilson")
    assert fmt.rate(rate) == "50% [24, 76]"
    assert fmt.rate(EstimateBlock(mean=0.5)) == "50%"
    assert fmt.rate(EstimateBlock()) == fmt.DASH and fmt.rate(None) == fmt.DASH
    assert fmt.interval(-0.01, 0.2, 1, scale=100, sign=True) == "[-1.0, +20.0]"


def test_estimate_shows_the_standard_error_only_when_known() -> None:
    assert fmt.estimate(EstimateBlock(mean=1234.5, se=56.7), 0) == "1,234 ± 57"
    assert fmt.estimate(EstimateBlock(mean=0.61234), 4) == "0.6123"
    assert fmt.estimate(None) == fmt.DASH
    assert (
        fmt.estimate_interval(EstimateBlock(mean=10.0, low=8.0, high=12.5), 1) == "10.0 [8.0, 12.5]"
    )


def test_duration_tokens_p_value_and_when() -> None:
    assert fmt.duration(12.345) == "12.3 s"
    assert fmt.tokens(1234567.4) == "1,234,567"
    assert fmt.p_value(0.04567) == "0.046"
    assert fmt.when(0) == "1970-01-01 00:00:00 UTC"
    assert fmt.when(1_790_000_000.5) == "2026-09-21 14:13:20 UTC"
    assert fmt.when(1e20) == fmt.DASH  # past the calendar: no crash
    assert fmt.text(None) == fmt.DASH and fmt.text("") == fmt.DASH and fmt.text(3) == "3"


@given(st.floats(min_value=0, max_value=4e9))
def test_when_is_always_one_shape(timestamp: float) -> None:
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC", fmt.when(timestamp))


def test_the_html_module_keeps_its_names_as_the_shared_formatters() -> None:
    from benchwarden.core import html as h

    assert h.fmt_number is fmt.number
    assert h.fmt_percent(0.5) == "50.0%"
