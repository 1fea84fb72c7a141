"""A stored outcome read for the streaming pass (`report.StoredOutcome`: its reply kept as
raw JSON bytes) gives what reading the stored form whole gives: the outcome itself for a
scored request, `_fidelity_view` for a ballast one. An outcome that does not fit the type
is one whose error was not valid UTF-8 (stored as an object), and only that one: the
store then hands the record over plain, read as before."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.suites.contamination import report as report_module
from benchwarden.suites.contamination.fidelity import RungTally
from benchwarden.suites.contamination.report import StoredOutcome
from benchwarden.targets.replies import (
    Candidate,
    Reply,
    RequestOutcome,
    Timings,
    TokenLogprob,
    ToolCall,
)

# any code point, lone surrogates included (how invalid UTF-8 from a server is held)
texts = st.text(st.characters(blacklist_categories=()), max_size=6) | st.sampled_from(
    ["", "ok", "a\udcffb", "\ud800", "é"])
times = st.floats(min_value=0, max_value=1e10, allow_nan=False)
maybe_times = st.none() | times
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**53, max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False) | texts,
    # keys are the client's own (`_storable` keeps them as they are): valid text
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=3),
    max_leaves=6)
logprobs = st.none() | st.lists(st.builds(
    TokenLogprob, texts, st.floats(max_value=0, allow_nan=False, allow_infinity=False),
    st.lists(st.builds(Candidate, texts, st.floats(max_value=0, allow_nan=False,
                                                   allow_infinity=False)),
             max_size=2).map(tuple)), max_size=3).map(tuple)
replies = st.none() | st.builds(
    Reply, reasoning=texts, text=texts,
    tool_calls=st.lists(st.builds(ToolCall, texts, texts, st.none() | texts),
                        max_size=2).map(tuple),
    finish_reason=st.none() | texts, completion_tokens=st.integers(0, 10**6),
    usage_reported=st.booleans(), prompt_tokens=st.none() | st.integers(0, 10**6),
    saw_done=st.booleans(), token_logprobs=logprobs)
outcomes = st.builds(
    RequestOutcome, st.builds(Timings, times, maybe_times, maybe_times, maybe_times), replies,
    st.none() | texts, st.none() | st.integers(100, 599),
    st.dictionaries(st.text(max_size=6), json_values, max_size=3)
    | st.fixed_dictionaries({"cancelled": st.booleans()}))


def _not_text(value: object) -> bool:
    try:
        str(value).encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


@settings(max_examples=400, deadline=None)
@given(outcomes, st.booleans())
def test_a_stored_outcome_read_typed_is_the_stored_form_read_whole(outcome, cancel_planned):
    stored = outcome.to_json_dict()
    body = msgspec.json.encode(stored)
    try:
        typed = msgspec.json.decode(body, type=StoredOutcome)
    except msgspec.ValidationError:
        # only an error line that is not valid UTF-8 does not fit (its stored form is an
        # object): the store reads such a record plain, and the report as before
        assert outcome.error is not None and _not_text(outcome.error)
        return
    assert outcome.error is None or not _not_text(outcome.error)
    assert typed.whole() == RequestOutcome.from_json_dict(stored) == outcome
    assert typed.fidelity_view() == report_module._fidelity_view(stored)
    assert typed.replied == (outcome.reply is not None)
    # counted without building the view, as a rung's tally counts the view
    counted, viewed = RungTally(), RungTally()
    assert typed.count_in(counted, cancel_planned) == viewed.add(
        report_module._fidelity_view(stored), cancel_planned)
    assert counted == viewed
