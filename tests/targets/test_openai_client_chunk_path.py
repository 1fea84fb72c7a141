"""The per-token shortcut in `_StreamState.take_chunk` (one choice, one content delta)
leaves a reply's state exactly as the field-by-field path does, for any chunk."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from benchwarden.targets.openai_client import (
    _Choice,
    _Chunk,
    _Delta,
    _Function,
    _Logprobs,
    _StreamState,
    _TokenLogprob,
    _ToolCallDelta,
    _Usage,
)

texts = st.none() | st.text(max_size=4)
deltas = st.none() | st.builds(
    _Delta, content=texts, reasoning_content=texts, reasoning=texts,
    tool_calls=st.none() | st.lists(st.builds(
        _ToolCallDelta, index=st.none() | st.integers(0, 2), id=texts,
        function=st.none() | st.builds(_Function, name=texts, arguments=texts)), max_size=2))
choices = st.builds(
    _Choice, index=st.none() | st.integers(0, 2), delta=deltas,
    finish_reason=st.none() | st.sampled_from(["", "stop", "length"]),
    logprobs=st.none() | st.builds(_Logprobs, content=st.none() | st.lists(
        st.builds(_TokenLogprob, token=texts, logprob=st.none() | st.floats(-5, 0)),
        max_size=2)))
any_chunks = st.builds(_Chunk, choices=st.none() | st.lists(choices, max_size=2),
                       usage=st.none() | st.builds(_Usage, completion_tokens=st.integers(0, 9)),
                       error=st.none())


@st.composite
def near_plain_chunks(draw: st.DrawFn) -> _Chunk:
    """A plain content chunk (the shortcut's case), or one with one thing changed."""
    delta = _Delta(content=draw(st.text(max_size=3)))
    choice = _Choice(delta=delta)
    chunk = _Chunk(choices=[choice])
    change = draw(st.sampled_from(["none", "index", "finish", "logprobs", "reasoning",
                                   "reasoning_content", "tool_calls", "usage", "two",
                                   "no delta"]))
    if change == "index":
        choice.index = draw(st.none() | st.integers(0, 1))
    elif change == "finish":
        choice.finish_reason = draw(st.sampled_from(["", "stop"]))
    elif change == "logprobs":
        choice.logprobs = _Logprobs(content=[_TokenLogprob(token="t", logprob=-1.0)])
    elif change == "reasoning":
        delta.reasoning = draw(texts)
    elif change == "reasoning_content":
        delta.reasoning_content = draw(texts)
    elif change == "tool_calls":
        delta.tool_calls = [_ToolCallDelta(index=0, function=_Function(name="f"))]
    elif change == "usage":
        chunk.usage = _Usage(completion_tokens=3)
    elif change == "two":
        chunk.choices = [choice, _Choice(delta=_Delta(content="x"))]
    elif change == "no delta":
        choice.delta = None
    return chunk


chunks = near_plain_chunks() | any_chunks


def snapshot(state: _StreamState) -> tuple[object, ...]:
    return (state.frames, state.first_content_at, state.counted_deltas,
            state.content_deltas, state.timings(), state.reply())


@given(st.lists(chunks, max_size=4))
def test_the_shortcut_and_the_field_by_field_path_agree(sequence: list[_Chunk]) -> None:
    quick, thorough = _StreamState(), _StreamState()
    thorough.sent_at = quick.sent_at
    for at, chunk in enumerate(sequence, start=1):
        quick.take_chunk(chunk, float(at))
        thorough.frames += 1
        thorough._take_chunk_fields(chunk, float(at))
    assert snapshot(quick) == snapshot(thorough)


def test_a_plain_content_chunk_takes_the_shortcut_and_counts_one_token() -> None:
    state = _StreamState()
    state.take_chunk(_Chunk(choices=[_Choice(delta=_Delta(content="hi"))]), 7.0)
    state.take_chunk(_Chunk(choices=[_Choice(delta=_Delta(content=" there"))]), 8.0)
    assert (state.reply().text, state.counted_deltas, state.first_content_at) == (
        "hi there", 2, 7.0)
    assert (state.content_deltas, state.frames) == (2, 2)
