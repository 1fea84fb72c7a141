"""The retrieval report in a terminal stays readable however many seeds a run has: the
failed-case table lists the first `FAILED_CASES_SHOWN` cases and says how many more there
are and where all of them are."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from benchwarden.suites.retrieval.report import (
    FAILED_CASES_SHOWN,
    FailedCase,
    _failed_cases_table,
)


def rendered(failed: list[tuple[int, FailedCase]], total: int, run_id: str | None) -> str:
    out = io.StringIO()
    Console(file=out, width=220, color_system=None).print(
        _failed_cases_table(failed, total, run_id))
    return out.getvalue()


@settings(max_examples=60, deadline=None)
@given(count=st.integers(min_value=1, max_value=3 * FAILED_CASES_SHOWN),
       unlisted=st.sampled_from([0, 0, 1, 500]),
       run_id=st.sampled_from([None, "retrieval-1"]))
def test_the_first_cases_are_listed_and_the_rest_counted(count, unlisted, run_id):
    """The table shows the first `FAILED_CASES_SHOWN` of the cases the report lists and
    counts every failed case, those the report does not list (`unlisted`) too."""
    failed = [(1 + number // 20, FailedCase(case=f"case-{number:04d}", score=0.0,
                                            reason=f"reason {number}"))
              for number in range(count)]
    total = count + unlisted
    text = rendered(failed, total, run_id)
    flat = " ".join(text.split())
    listed = [number for number in range(count) if f"case-{number:04d}" in text]
    shown = min(count, FAILED_CASES_SHOWN)
    assert listed == list(range(shown))  # the first, in order
    more = total - shown
    if more > 0:
        assert f"failed cases ({total}; the first {shown})" in text
        assert f"{more} more not shown" in flat
        if run_id:
            assert f"benchwarden report {run_id} --html FILE" in flat
    else:
        assert f"failed cases ({count})" in text and "more not shown" not in text
    if unlisted:
        assert f"list the first {count}; every case, as a record: benchwarden export " \
               f"--suite retrieval{' --run ' + run_id if run_id else ''} --out cases.jsonl" in flat
    else:
        assert "benchwarden export" not in flat
