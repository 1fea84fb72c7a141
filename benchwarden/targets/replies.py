"""The transcript of one streamed chat-completion reply, as the client recorded it.

These are plain values shared by the client (which fills them) and the suites (which
score them). Times are seconds on one clock per process: epoch-anchored but advanced
by `time.perf_counter`, so intervals between requests of one run are monotonic.

Invariants:
- Tool-call arguments are kept exactly as streamed (concatenated fragments), never
  re-serialised.
- A failed request is a `RequestOutcome` with `error` set to one line of at most 300
  characters, never an exception.
- Server text is byte-exact: a byte that was not valid UTF-8 is held as the lone
  surrogate U+DC80..U+DCFF (Python's "surrogateescape"), so
  `text.encode("utf-8", "surrogateescape")` is what the server sent. Such a string
  cannot be written as UTF-8 JSON, so `to_json_dict` stores it as
  `{"utf8_bytes_base64": "<base64 of those bytes>"}` (and any other string holding
  lone surrogates as `{"utf8_surrogatepass_base64": ...}`); `from_json_dict` turns
  both back into the same string. Valid text is stored as itself, so records of
  well-behaved servers look as they always did. `escape_invalid_utf8` is the one way
  to show such text: each invalid byte as `\\xNN`, never collapsed to U+FFFD.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import msgspec

ERROR_LIMIT = 300

# The keys of the two stored forms of a string that is not valid Unicode text.
BYTES_KEY = "utf8_bytes_base64"
SURROGATEPASS_KEY = "utf8_surrogatepass_base64"


def escape_invalid_utf8(text: str) -> str:
    """`text` for display: each byte that was not valid UTF-8 shown as `\\xNN`.

    Valid text comes back unchanged (and fast); a lone surrogate that did not come from
    a byte is shown as `\\udNNN`. The result always encodes as UTF-8.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    shown = []
    for character in text:
        code = ord(character)
        if 0xDC80 <= code <= 0xDCFF:
            shown.append(f"\\x{code - 0xDC00:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            shown.append(f"\\u{code:04x}")
        else:
            shown.append(character)
    return "".join(shown)


def _storable(value: Any) -> Any:
    """`value` with every string that is not valid Unicode text in its stored form."""
    if isinstance(value, str):
        if value.isascii():
            return value
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            pass
        try:
            raw = value.encode("utf-8", "surrogateescape")
            if raw.decode("utf-8", "surrogateescape") == value:
                return {BYTES_KEY: base64.b64encode(raw).decode("ascii")}
        except UnicodeEncodeError:
            pass  # a surrogate no byte decodes to: not from a server, kept all the same
        raw = value.encode("utf-8", "surrogatepass")
        return {SURROGATEPASS_KEY: base64.b64encode(raw).decode("ascii")}
    if isinstance(value, dict):
        return {key: _storable(item) for key, item in value.items()}  # our own keys
    if isinstance(value, (list, tuple)):
        return [_storable(item) for item in value]
    return value


def restored_strings(value: Any) -> Any:
    """The inverse of `_storable`: plain JSON values as stored, each string held in its
    stored form turned back into that string (`RequestOutcome.from_json_dict`, and a
    reader that decodes part of a stored reply by itself)."""
    if isinstance(value, dict):
        if len(value) == 1:
            (key, item), = value.items()
            if key == BYTES_KEY and isinstance(item, str):
                return base64.b64decode(item).decode("utf-8", "surrogateescape")
            if key == SURROGATEPASS_KEY and isinstance(item, str):
                return base64.b64decode(item).decode("utf-8", "surrogatepass")
        return {key: restored_strings(item) for key, item in value.items()}
    if isinstance(value, list):
        return [restored_strings(item) for item in value]
    return value


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # the raw argument string as streamed
    id: str | None = None


@dataclass(frozen=True)
class Timings:
    """Client-side clock readings for one request (None when it never happened)."""

    sent_at: float  # the request body written (begun, for one that never got that far)
    first_byte_at: float | None = None  # response headers received
    first_content_at: float | None = None  # first non-empty content/reasoning/tool delta
    last_byte_at: float | None = None


@dataclass(frozen=True)
class Candidate:
    """One candidate token at one step and its log-probability (natural log)."""

    token: str  # the token's bytes as text, invalid UTF-8 kept as in `Reply.text`
    logprob: float


@dataclass(frozen=True)
class TokenLogprob:
    """The token a server chose at one step, its log-probability and the top candidates
    it reported there (`logprobs`/`top_logprobs` of a chat completion)."""

    token: str
    logprob: float
    top: tuple[Candidate, ...] = ()


@dataclass(frozen=True)
class Reply:
    reasoning: str
    text: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str | None
    completion_tokens: int  # server usage when sent, else the count of non-empty deltas
    usage_reported: bool
    prompt_tokens: int | None = None
    cached_prompt_tokens: int | None = None  # diagnostic only, never compared
    saw_done: bool = False
    reasoning_tokens: int | None = None  # usage.completion_tokens_details, when reported
    # per generated token, when the server sent logprobs (None: it sent none)
    token_logprobs: tuple[TokenLogprob, ...] | None = None


@dataclass(frozen=True)
class RequestOutcome:
    timings: Timings
    reply: Reply | None = None
    error: str | None = None  # one line, at most ERROR_LIMIT characters
    status: int | None = None  # HTTP status when one was received
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None and self.reply is not None

    def to_json_dict(self) -> dict[str, Any]:
        """Plain JSON values, invalid UTF-8 in its stored form (see the module notes)."""
        data = msgspec.to_builtins(self)
        reply = data.get("reply")
        if isinstance(reply, dict) and reply.get("token_logprobs") is None:
            reply.pop("token_logprobs", None)  # records without logprobs keep their old shape
        storable: dict[str, Any] = _storable(data)
        return storable

    @classmethod
    def from_json_dict(cls, data: Any) -> RequestOutcome:
        """The exact inverse of `to_json_dict`."""
        return msgspec.convert(restored_strings(data), cls)


@dataclass(frozen=True)
class Usage:
    """Token counts a server reported for one non-streamed completion (None: not sent)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_prompt_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens
    reasoning_tokens: int | None = None  # usage.completion_tokens_details.reasoning_tokens


@dataclass(frozen=True)
class ChatCompletion:
    """One non-streamed chat completion (the agent loop of the arms suite reads these).

    `raw` is the server's whole JSON object, kept for transcripts; the other fields are
    read from its first choice.
    """

    content: str | None
    reasoning: str | None
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str | None
    usage: Usage
    raw: dict[str, Any] = field(default_factory=dict)
