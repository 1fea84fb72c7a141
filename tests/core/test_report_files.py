"""A report file: the JSON `json.dumps(indent=2, ensure_ascii=False)` writes (but for how
a float is spelt), encoded by msgspec a piece at a time, any value read back as
written."""

from __future__ import annotations

import json
import re

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.core import reports
from benchwarden.core.reports import write_json

# strings without decimal digits, so an exponent in a string is never taken for a number's
words = st.text(alphabet=st.characters(blacklist_categories=("Nd", "Cs")), max_size=8)
scalars = (st.none() | st.booleans() | st.integers(-2**70, 2**70)
           | st.floats(allow_nan=False, allow_infinity=False) | words)
# (a float key below the streamed levels is spelt as msgspec spells floats: no report has one)
keys = words | st.integers(-5, 5) | st.booleans() | st.none()
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(keys, inner, max_size=4), max_leaves=30)


def _floats_spelt_alike(text: str) -> str:
    """Every float in `text` spelt as Python's `repr` spells it (msgspec writes `1e-05`
    as `0.00001` and `1e+16` as `1e16`: the same numbers)."""
    return re.sub(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?",
                  lambda found: repr(float(found.group()))
                  if any(mark in found.group() for mark in ".eE") else found.group(), text)


@settings(max_examples=300, deadline=None)
@given(values)
def test_a_report_file_is_python_s_indented_json_and_reads_back(tmp_path_factory, value):
    path = tmp_path_factory.mktemp("report") / "r.json"
    write_json(path, {"report": value} if not isinstance(value, dict) else value)
    written = path.read_text(encoding="utf-8")
    wanted = json.dumps({"report": value} if not isinstance(value, dict) else value,
                        indent=2, ensure_ascii=False) + "\n"
    assert _floats_spelt_alike(written) == _floats_spelt_alike(wanted)
    assert json.loads(written) == json.loads(wanted)


# a report's members: long lists and mappings of any values, with keys of every kind
# (floats too: at this level a key is spelt as `json.dumps` spells it)
members = st.lists(values, max_size=40) | st.dictionaries(
    keys | st.floats(allow_nan=False, allow_infinity=False), values, max_size=40)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(words, members, min_size=1, max_size=3),
       st.sampled_from([1, 40, 300, 1 << 20]), st.integers(1, 1024))
def test_members_written_several_items_a_call_read_as_one_item_a_call(
        tmp_path_factory, report, chunk_chars, items_most):
    """However many items one msgspec call takes (from one, where every item is larger
    than the text a call aims at, to all of them), the file is `json.dumps`'s: items
    that msgspec refuses (a flag as a key, an int past 64 bits) and mappings with keys
    that are not strings among them."""
    saved = reports._CHUNK_CHARS, reports._ITEMS_MOST
    reports._CHUNK_CHARS, reports._ITEMS_MOST = chunk_chars, items_most
    try:
        path = tmp_path_factory.mktemp("report") / "r.json"
        write_json(path, report)
    finally:
        reports._CHUNK_CHARS, reports._ITEMS_MOST = saved
    written = path.read_text(encoding="utf-8")
    wanted = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    assert _floats_spelt_alike(written) == _floats_spelt_alike(wanted)
    assert json.loads(written) == json.loads(wanted)  # keys exactly, floats as numbers


def test_items_are_encoded_several_to_a_call_and_a_call_stays_near_its_text_bound(
        tmp_path, monkeypatch):
    """1,000 small items take a few calls, not 1,000; items each larger than the bound
    take one call each (memory holds about one call's text)."""
    calls: list[int] = []
    real = reports.msgspec.json.format

    def counting(text, indent=0):
        calls.append(len(text))
        return real(text, indent=indent)

    monkeypatch.setattr(reports.msgspec.json, "format", counting)
    small = {"seeds": [{"seed": number, "score": number / 7} for number in range(1000)]}
    write_json(tmp_path / "small.json", small)
    assert 2 <= len(calls) <= 4, calls
    calls.clear()
    monkeypatch.setattr(reports, "_CHUNK_CHARS", 5_000)
    big = {"rungs": [{"rung": n, "text": "x" * 8_000} for n in range(6)]}
    write_json(tmp_path / "big.json", big)
    assert len(calls) == 6 and max(calls) < 2 * 8_100, calls
    assert json.loads((tmp_path / "big.json").read_text(encoding="utf-8")) == big


def test_a_typed_report_is_written_as_its_json(tmp_path):
    class Block(msgspec.Struct, omit_defaults=True):
        seed: int
        scores: list[float]
        note: str = ""

    class Report(msgspec.Struct, omit_defaults=True):
        suite: str
        seeds: list[Block]
        warnings: list[str] = msgspec.field(default_factory=list)

    report = Report(suite="retrieval", seeds=[Block(1, [0.5, 1e-7]), Block(2, [], note="é")])
    write_json(tmp_path / "r.json", report)
    assert json.loads((tmp_path / "r.json").read_text(encoding="utf-8")) == {
        "suite": "retrieval", "seeds": [{"seed": 1, "scores": [0.5, 1e-7]},
                                        {"seed": 2, "scores": [], "note": "é"}]}


class _Item(msgspec.Struct, frozen=True, omit_defaults=True):
    name: str
    score: float | None = None
    marks: dict[str, int] = msgspec.field(default_factory=dict)


class _Inner(msgspec.Struct, frozen=True):
    low: float = 0.0
    high: float = 1.0


def _report_type(omit_defaults: bool, tag: bool, rename: str | None) -> type:
    """A report type of every kind of member `_members` meets: scalars with and without
    defaults, long lists of structs or builtins, mappings keyed by strings or by
    numbers, a nested struct, a tuple; under each struct option that changes which keys
    msgspec writes and how they are spelt."""
    class Report(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=omit_defaults,
                 tag=tag, rename=rename):
        suite: str
        seeds: list[_Item] = msgspec.field(default_factory=list)
        warnings: list[str] = msgspec.field(default_factory=list)
        by_name: dict[str, _Item] = msgspec.field(default_factory=dict)
        by_number: dict[int, float] = msgspec.field(default_factory=dict)
        interval: _Inner = msgspec.field(default_factory=_Inner)
        pair: tuple[int, int] = (0, 1)
        note: str | None = None
        count: int = 0
    return Report


items = st.builds(_Item, name=words, score=st.none() | st.floats(allow_nan=False,
                                                                 allow_infinity=False),
                  # ints past 64 bits too: msgspec refuses them, the writer falls back
                  marks=st.dictionaries(words, st.integers(-2**70, 2**70), max_size=3))


@settings(max_examples=300, deadline=None)
@given(st.booleans(), st.booleans(), st.sampled_from([None, "camel", "upper"]),
       st.fixed_dictionaries({
           "suite": words, "seeds": st.lists(items, max_size=30),
           "warnings": st.lists(words, max_size=3),
           "by_name": st.dictionaries(words, items, max_size=20),
           "by_number": st.dictionaries(st.integers(-9, 9), st.floats(
               allow_nan=False, allow_infinity=False), max_size=4),
           "interval": st.builds(_Inner, low=st.sampled_from([0.0, 0.25]),
                                 high=st.sampled_from([1.0, 0.75])),
           "pair": st.sampled_from([(0, 1), (2, 3)]), "note": st.none() | words,
           "count": st.sampled_from([0, 3])}),
       st.sampled_from([1, 300, 1 << 20]))
def test_a_typed_report_file_is_its_builtins_json_whatever_its_struct_options(
        tmp_path_factory, omit_defaults, tag, rename, members, chunk_chars):
    """A typed report is written from its own structs (its long members never made
    builtins first), and the file is still exactly `json.dumps(msgspec.to_builtins(
    report))`'s: the same keys in the same order, the same members left out as
    defaults, a tag first, renamed keys, numbers as keys spelt as `json.dumps` spells
    them; members that are empty, defaults or not."""
    report = _report_type(omit_defaults, tag, rename)(**members)
    saved = reports._CHUNK_CHARS
    reports._CHUNK_CHARS = chunk_chars
    try:
        path = tmp_path_factory.mktemp("report") / "r.json"
        write_json(path, report)
    finally:
        reports._CHUNK_CHARS = saved
    written = path.read_text(encoding="utf-8")
    wanted = json.dumps(msgspec.to_builtins(report), indent=2, ensure_ascii=False) + "\n"
    assert _floats_spelt_alike(written) == _floats_spelt_alike(wanted)


def test_a_typed_report_s_long_members_are_not_made_builtins(tmp_path, monkeypatch):
    """What makes the writing cheap: `msgspec.to_builtins` is given the report less its
    long members, never a seed block."""
    seen: list[object] = []
    real = reports.msgspec.to_builtins

    def watching(value, *args, **kwargs):
        seen.append(value)
        return real(value, *args, **kwargs)

    monkeypatch.setattr(reports.msgspec, "to_builtins", watching)
    report = _report_type(True, False, None)(
        suite="retrieval", seeds=[_Item(name=str(n), score=n / 3) for n in range(50)])
    write_json(tmp_path / "r.json", report)
    assert len(seen) == 1 and seen[0].seeds == []  # type: ignore[attr-defined]
    assert json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["seeds"][49] == {
        "name": "49", "score": 49 / 3}


def test_a_typed_report_written_as_an_array_is_its_builtins_json(tmp_path):
    """A third party's report type may be `array_like` (msgspec writes it as a JSON
    array): it is written as its builtins are, not read for members it has none of."""
    class Row(msgspec.Struct, array_like=True):
        name: str
        score: float

    class Report(msgspec.Struct, array_like=True):
        suite: str
        rows: list[Row]

    report = Report("custom", [Row("a", 0.5), Row("b", 1.0)])
    write_json(tmp_path / "r.json", report)
    assert (tmp_path / "r.json").read_text(encoding="utf-8") == json.dumps(
        msgspec.to_builtins(report), indent=2, ensure_ascii=False) + "\n"
