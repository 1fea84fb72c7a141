"""`report_type` on the Suite protocol: each built-in suite names its typed report, and
`core.suite.decode_report` turns a report file read back (JSON) into that type, the
same object the store built, with no dispatch on suite names outside the registry."""

from __future__ import annotations

import json

import msgspec
import pytest

from benchwarden.core.errors import ConfigurationError
from benchwarden.core.suite import UnknownSuite, decode_report, get_suite, render_report_html
from tests.core.test_report_numbers import arms, contamination, retrieval  # noqa: F401 - fixtures


@pytest.mark.parametrize("name, class_name", [("arms", "ArmsReport"),
                                              ("contamination", "ContaminationReport"),
                                              ("retrieval", "RetrievalReport")])
def test_each_built_in_suite_names_its_typed_report(name, class_name):
    report_type = get_suite(name).report_type
    assert report_type.__name__ == class_name
    assert issubclass(report_type, msgspec.Struct)


def _round_trip(report):
    return json.loads(msgspec.json.encode(report))


def test_a_report_file_decodes_to_its_typed_report(arms, contamination, retrieval):  # noqa: F811
    for typed in (arms, contamination, retrieval[0]):
        decoded = decode_report(_round_trip(typed))
        assert type(decoded) is type(typed)
        assert decoded == typed
        assert decode_report(typed) is typed
        assert render_report_html(_round_trip(typed)) == render_report_html(typed)


def test_a_report_of_no_registered_suite_or_a_broken_one_is_refused(contamination):  # noqa: F811
    with pytest.raises(UnknownSuite):
        decode_report({"suite": "nosuch"})
    broken = _round_trip(contamination)
    broken["score"] = "not a score block"
    with pytest.raises(ConfigurationError, match="contamination"):
        decode_report(broken)
