"""Replies are compared on the exact bytes the server sent; invalid bytes are shown escaped.

The client keeps each byte that was not valid UTF-8 as a lone surrogate U+DC80..U+DCFF
("surrogateescape"); these replies are built in memory holding such surrogates.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.suites.contamination.scoring import (
    AloneUnstable,
    Diverged,
    Legs,
    RungOutcomes,
    canonical,
    common_prefix,
    display_text,
    exact_bytes,
    same_stream,
    score,
    verdict,
)
from tests.suites.contamination.helpers import CANARIES, good, ok, reply_text

FLOOR = 16
XFF = b"\xff".decode("utf-8", "surrogateescape")  # what the client holds for byte 0xFF
XFE = b"\xfe".decode("utf-8", "surrogateescape")


def with_byte(probe: int, byte: str):
    return ok(reply_text(probe) + " end " + byte + " tail")


def run(reference, in_rung):
    other = good(1)
    rung = RungOutcomes("c2", 2, 1, [in_rung, other], [in_rung, other, good(0)])
    return score(Legs([reference, other], [reference, other], [rung], [reference, other],
                      CANARIES[:2], FLOOR))


def test_ff_alone_and_fe_batched_diverge_where_the_byte_is():
    alone = with_byte(0, XFF)
    result = run(alone, with_byte(0, XFE))
    found = [c.result for c in result.cells if c.leg == "c2" and c.probe == 0][0]
    assert isinstance(found, Diverged)
    assert found.at == canonical(alone.reply).index(XFF)  # a character of the canonical form
    assert "\\xff" in found.detail and "\\xfe" in found.detail
    assert "\ufffd" not in found.detail
    found.detail.encode("utf-8")  # always printable and storable
    assert verdict(result).kind == "fail"


def test_an_invalid_byte_never_equals_the_replacement_character():
    result = run(with_byte(0, XFF), with_byte(0, "\ufffd"))
    assert result.diverged == 1


def test_the_same_invalid_byte_is_identical():
    result = run(with_byte(0, XFF), with_byte(0, XFF))
    assert result.identical == 4 and verdict(result).kind == "pass"


def test_references_differing_in_one_byte_are_alone_unstable():
    other = good(1)
    rung = RungOutcomes("c2", 2, 1, [good(0), other], [good(0), other, good(0)])
    result = score(Legs([with_byte(0, XFF), other], [with_byte(0, XFE), other], [rung],
                        [good(0), other], CANARIES[:2], FLOOR))
    assert [c.result for c in result.cells if c.probe == 0] == [AloneUnstable()]


def test_display_escapes_invalid_bytes_and_doubles_real_backslashes():
    assert display_text("a" + XFF + "b") == "a\\xffb"
    assert display_text("a\\xffb") == "a\\\\xffb"  # the four characters \xff, as text
    assert display_text("a" + XFF + "b") != display_text("a\\xffb")
    assert display_text("x\x01y\nz\x07") == "x␁y⏎z\\u0007"


raw_bytes = st.binary(max_size=40)


@settings(max_examples=300, deadline=None)
@given(raw_bytes, raw_bytes)
def test_comparison_is_byte_equality(a, b):
    text_a = a.decode("utf-8", "surrogateescape")
    text_b = b.decode("utf-8", "surrogateescape")
    assert exact_bytes(text_a) == a
    assert same_stream(text_a, text_b) == (a == b)


@settings(max_examples=300, deadline=None)
@given(raw_bytes)
def test_display_is_valid_utf8_and_never_a_replacement(a):
    text = a.decode("utf-8", "surrogateescape")
    shown = display_text(text)
    shown.encode("utf-8")
    assert shown.count("\ufffd") == text.count("\ufffd")  # only ones the server really sent


def test_surrogates_no_byte_produces_still_compare_exactly():
    assert same_stream("\ud800", "\ud800") and not same_stream("\ud800", "\ud801")
    assert not same_stream("\ud800", XFF)


# any character a reply can hold: every plane, the separators and controls, C1 controls,
# backslashes, and lone surrogates (invalid bytes and ones no byte produces)
_any_character = st.one_of(
    st.characters(codec=None, categories=None),
    st.sampled_from("\x00\x01\x02\x03\x04\n\x1f\\\x7f\x85\x9f\xa0é⏎␁"),
    st.integers(0xD800, 0xDFFF).map(chr),
)


def _displayed_one_by_one(text: str) -> str:
    """`display_text`'s rule applied to each character in turn: the specification its
    regex must keep."""
    pictures = {"\x01": "␁", "\x02": "␂", "\x03": "␃", "\x04": "␄", "\n": "⏎", "\\": "\\\\"}
    shown = []
    for character in text:
        code = ord(character)
        if character in pictures:
            shown.append(pictures[character])
        elif 0xDC80 <= code <= 0xDCFF:
            shown.append(f"\\x{code - 0xDC00:02x}")
        elif code < 0x20 or 0x7F <= code <= 0x9F or 0xD800 <= code <= 0xDFFF:
            shown.append(f"\\u{code:04x}")
        else:
            shown.append(character)
    return "".join(shown)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=_any_character, max_size=80))
def test_display_text_shows_each_character_by_its_rule(text):
    assert display_text(text) == _displayed_one_by_one(text)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=_any_character, max_size=60), st.data())
def test_common_prefix_is_the_first_differing_character(a, data):
    # b shares a drawn prefix of a, then anything: equal, a prefix, or differing
    b = a[:data.draw(st.integers(0, len(a)))] + data.draw(st.text(alphabet=_any_character,
                                                                  max_size=20))
    expected = next((index for index, (x, y) in enumerate(zip(a, b, strict=False))
                     if x != y), min(len(a), len(b)))
    assert common_prefix(a, b) == expected == common_prefix(b, a)
    assert a[:expected] == b[:expected]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=_any_character, max_size=80), st.data())
def test_a_divergence_line_written_when_read_is_the_one_written_at_once(reference, data):
    """`Diverged.at_char` keeps two excerpts and writes its line when first read: the
    same line (20 characters each side of the first difference, each shown by
    `display_text`), equal and hashed as that line, and immutable."""
    reply = reference[:data.draw(st.integers(0, len(reference)))] + data.draw(
        st.text(alphabet=_any_character, min_size=1, max_size=30))
    at = common_prefix(reference, reply)
    start = max(0, at - 20)
    line = (f"stream differs from its solo reference at char {at}: "
            f"reference \"{display_text(reference[start:at + 20])}\" vs "
            f"reply \"{display_text(reply[start:at + 20])}\"")
    written_when_read = Diverged.at_char(at, reference, reply)
    written_at_once = Diverged(at, line)
    assert hash(written_when_read) == hash(written_at_once)
    assert written_when_read == written_at_once
    assert written_when_read.detail == line == written_when_read.detail
    assert repr(written_when_read) == repr(written_at_once)
    assert written_when_read != Diverged(at + 1, line)
    with pytest.raises(AttributeError):
        written_when_read.at = at + 1  # type: ignore[misc]
    assert written_when_read.at == at
