"""A report file: the JSON `json.dumps(indent=2, ensure_ascii=False)` writes (but for how
a float is spelt), encoded by msgspec a piece at a time, any value read back as
written."""

from __future__ import annotations

import json
import re

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

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
