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


def rendered(failed: list[tuple[int, FailedCase]], run_id: str | None) -> str:
    out = io.StringIO()
    Console(file=out, width=220, color_system=None).print(_failed_cases_table(failed, run_id))
    return out.getvalue()


@settings(max_examples=60, deadline=None)
@given(count=st.integers(min_value=1, max_value=3 * FAILED_CASES_SHOWN),
       run_id=st.sampled_from([None, "retrieval-1"]))
def test_the_first_cases_are_listed_and_the_rest_counted(count, run_id):
    failed = [(1 + number // 20, FailedCase(case=f"case-{number:04d}", score=0.0,
                                            reason=f"reason {number}"))
              for number in range(count)]
    text = rendered(failed, run_id)
    listed = [number for number in range(count) if f"case-{number:04d}" in text]
    assert listed == list(range(min(count, FAILED_CASES_SHOWN)))  # the first, in order
    more = count - FAILED_CASES_SHOWN
    if more > 0:
        assert f"failed cases ({count}; the first {FAILED_CASES_SHOWN})" in text
        assert f"{more} more not shown" in " ".join(text.split())
        if run_id:
            assert f"benchwarden report {run_id} --html FILE" in " ".join(text.split())
    else:
        assert f"failed cases ({count})" in text and "more not shown" not in text
