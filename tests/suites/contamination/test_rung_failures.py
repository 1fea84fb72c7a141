"""A rung is judged whole: any failed request (scored or ballast) leaves it unmeasured.

In memory, no server: rungs built from outcomes as the client records them.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.suites.contamination.fidelity import failure_kind
from benchwarden.suites.contamination.scoring import (
    CLASS_NAMES,
    Contaminated,
    Identical,
    Legs,
    RungOutcomes,
    Unmeasured,
    score,
    verdict,
)
from benchwarden.targets.replies import RequestOutcome, Timings
from tests.suites.contamination.helpers import (
    CANARIES,
    cancelled_by_client,
    failed,
    good,
    http_error,
    ok,
    reply_text,
    too_many_files,
)

FLOOR = 16
REFS = [good(0), good(1)]


def rung(label, scored, ballast=(), cancel_planned=(), concurrency=None, repeat=1):
    requests = list(scored) + list(ballast)
    level = concurrency or int(label[1:])
    return RungOutcomes(label, level, repeat, list(scored), requests, list(cancel_planned))


def legs(rungs, probes=2):
    return Legs(ref_a=REFS[:probes], ref_b=REFS[:probes], rungs=rungs,
                post=REFS[:probes], canaries=CANARIES[:probes], min_completion_tokens=FLOOR)


def cells_of(result, leg, repeat=1):
    return [c.result for c in result.cells if c.leg == leg and c.repeat == repeat]


def test_a_failed_ballast_request_leaves_every_cell_of_its_rung_unmeasured():
    # the capacity-6 server of issue 8: the scored requests were served, ballast got 500
    healthy = rung("c2", [good(0), good(1)])
    overloaded = rung("c8", [good(0), good(1)], [good(0), good(1), good(0), good(1)]
                      + [http_error(500)] * 2)
    result = score(legs([healthy, overloaded]))
    reason = "rung c8: 2 of 8 requests failed: HTTP 500 ×2"
    assert cells_of(result, "c8") == [Unmeasured(reason)] * 2
    assert cells_of(result, "c2") == [Identical()] * 2  # the other rung still compares
    outcome = verdict(result)
    assert outcome.kind == "fail" and f"2 unmeasured ({reason})" in outcome.reason
    assert result.fidelity[1].requests_failed == 2 and result.fidelity[0].requests_failed == 0


def test_failures_are_counted_and_grouped_by_kind_most_frequent_first():
    ballast = [too_many_files()] * 3 + [http_error(503)] + [failed("POST x timed out after 300 s")]
    result = score(legs([rung("c8", [good(0), good(1)], ballast + [good(0)] * 3)]))
    assert cells_of(result, "c8")[0] == Unmeasured(
        "rung c8: 5 of 10 requests failed: transport: Too many open files ×3, "
        "HTTP 503 ×1, timeout ×1")


def test_a_failed_scored_request_names_its_own_error_too():
    result = score(legs([rung("c2", [http_error(500), good(1)], [good(0)])]))
    first, second = cells_of(result, "c2")
    assert isinstance(first, Unmeasured)
    assert first.why.startswith("rung c2: 1 of 3 requests failed: HTTP 500 ×1 (this one: "
                                "request failed: HTTP 500 from POST")
    assert second == Unmeasured("rung c2: 1 of 3 requests failed: HTTP 500 ×1")


def test_a_foreign_canary_still_speaks_in_a_failed_rung():
    leaked = ok(reply_text(0).replace("w0x5", CANARIES[1]))
    result = score(legs([rung("c4", [leaked, good(1)], [http_error(500), good(1)])]))
    assert cells_of(result, "c4") == [Contaminated(CANARIES[1]),
                                      Unmeasured("rung c4: 1 of 4 requests failed: HTTP 500 ×1")]


def test_a_short_reply_in_a_failed_rung_gets_the_rung_reason():
    result = score(legs([rung("c2", [good(0, tokens=3), good(1)], [http_error(500)])]))
    assert cells_of(result, "c2")[0] == Unmeasured("rung c2: 1 of 3 requests failed: HTTP 500 ×1")


def test_planned_cuts_are_the_plan_but_other_failures_of_cut_ballast_count():
    scored = [good(0), good(1)]
    cut = [cancelled_by_client(0), good(1), cancelled_by_client(0), good(1)]
    planned = [False, False, True, False, True, False]
    clean = score(legs([rung("c2", scored, cut, planned)]))
    assert cells_of(clean, "c2") == [Identical()] * 2 and verdict(clean).kind == "pass"

    # a request due to be cut that errored before its cut point is a failure
    errored = [cancelled_by_client(0), good(1), http_error(502), good(1)]
    result = score(legs([rung("c2", scored, errored, planned)]))
    assert cells_of(result, "c2")[0] == Unmeasured("rung c2: 1 of 6 requests failed: HTTP 502 ×1")

    # a cut the plan did not ask for is a failure too
    unplanned = score(legs([rung("c2", scored, cut, [False] * 6)]))
    assert cells_of(unplanned, "c2")[0] == Unmeasured(
        "rung c2: 2 of 6 requests failed: cancelled off plan ×2")


def test_each_repetition_of_a_rung_is_judged_on_its_own():
    first = rung("c2", [good(0), good(1)], [good(0)], repeat=1)
    second = rung("c2", [good(0), good(1)], [http_error(500)], repeat=2)
    result = score(legs([first, second]))
    assert cells_of(result, "c2", 1) == [Identical()] * 2
    assert cells_of(result, "c2", 2) == [
        Unmeasured("rung c2 #2: 1 of 3 requests failed: HTTP 500 ×1")] * 2


def test_failure_kinds_read_the_clients_error_lines():
    def error(line, status=None):
        return failure_kind(RequestOutcome(Timings(0.0), error=line, status=status))
    assert error("HTTP 429 from POST u: slow down", 429) == "HTTP 429"
    assert error("POST u failed: ClientOSError: [Errno 24] Too many open files") == \
        "transport: Too many open files"
    assert error("POST u failed after 3 deltas: ClientOSError: [Errno 104] "
                 "Connection reset by peer") == "transport: Connection reset by peer"
    assert error("POST u timed out after 300 s (request timeout) after 2 deltas") == "timeout"
    assert error("stream ended without [DONE] or finish_reason after 7 deltas") == \
        "truncated stream"
    assert error("POST u failed: connection refused — is the server running?") == \
        "connection refused"
    assert error("server error in stream after 3 deltas: request timed out (x)") == \
        "in-band server error"
    assert error("reply exceeded the 4 MiB cap (--max-reply-bytes) after 9 deltas; kept its "
                 "first 4,096 bytes, sha256 ab") == "reply over the byte cap"
    assert error("server streamed 2,600 chunks for max_tokens 256 (cap 1,100: 4 per token "
                 "+ 76, --max-chunks-per-token)") == "too many chunks for max_tokens"
    # unknown lines are grouped by their first words, with URLs and numbers blanked out
    assert error("weird thing 12 at http://h:1/v1/x happened") == "weird thing N at URL happened"
    assert error("weird thing 99 at http://h:2/v1/y happened") == "weird thing N at URL happened"


# -- property: no rung with a failed request yields an identical cell ---------------------------
REQUEST_KINDS = ("ok", "http500", "emfile", "cut_planned", "cut_unplanned", "error_planned")


def _request(kind: str, probe: int) -> tuple[RequestOutcome, bool]:
    return {
        "ok": (good(probe), False),
        "http500": (http_error(500), False),
        "emfile": (too_many_files(), False),
        "cut_planned": (cancelled_by_client(probe), True),
        "cut_unplanned": (cancelled_by_client(probe), False),
        "error_planned": (http_error(503), True),
    }[kind]


@st.composite
def rungs_with_failures(draw):
    probes = draw(st.integers(2, 3))
    rungs, failing = [], []
    for index in range(draw(st.integers(1, 4))):
        scored_kinds = draw(st.lists(st.sampled_from(("ok", "ok", "http500", "emfile")),
                                     min_size=probes, max_size=probes))
        ballast_kinds = draw(st.lists(st.sampled_from(REQUEST_KINDS), max_size=6))
        built = [_request(kind, i % probes) for i, kind in enumerate(scored_kinds + ballast_kinds)]
        requests = [outcome for outcome, _ in built]
        planned = [plan for _, plan in built]
        label = f"c{2 + index}"
        rungs.append(RungOutcomes(label, 2 + index, 1, requests[:probes], requests, planned))
        if any(kind not in ("ok", "cut_planned") for kind in scored_kinds + ballast_kinds):
            failing.append(label)
    refs = [good(i) for i in range(probes)]
    return Legs(refs, refs, rungs, refs, CANARIES[:probes], FLOOR), failing


@settings(max_examples=300, deadline=None)
@given(rungs_with_failures())
def test_a_rung_with_any_failed_request_never_yields_an_identical_cell(case):
    legs_, failing = case
    result = score(legs_)
    for cell in result.cells:
        if cell.leg in failing:
            assert isinstance(cell.result, Unmeasured)
            assert cell.result.why.startswith(f"rung {cell.leg}: ")
            assert "requests failed: " in cell.result.why
        elif cell.leg != "post":
            assert isinstance(cell.result, Identical)
    # each cell bumps exactly one counter
    counters = result.counters()
    assert sum(counters[name] for name in CLASS_NAMES) == len(result.cells)
    # the verdict fails whenever anything is unmeasured, and names every failed rung
    outcome = verdict(result)
    assert (outcome.kind == "fail") == bool(failing)
    for label in failing:
        assert f"rung {label}: " in outcome.reason
    for fit in result.fidelity:
        assert (fit.requests_failed > 0) == (fit.label in failing)
        assert fit.requests_failed == sum(count for _, count in fit.failures)


def test_the_verdict_line_names_a_bounded_number_of_failed_rungs():
    rungs = [rung("c2", [good(0), good(1)], [http_error(500)], repeat=r) for r in range(1, 21)]
    outcome = verdict(score(legs(rungs)))
    assert "rung c2 #8: 1 of 3 requests failed" in outcome.reason
    assert "rung c2 #9:" not in outcome.reason
    assert "and 12 more rungs, see the report" in outcome.reason
