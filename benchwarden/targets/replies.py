"""The transcript of one streamed chat-completion reply, as the client recorded it.

These are plain values shared by the client (which fills them) and the suites (which
score them). Times are seconds on one clock per process: epoch-anchored but advanced
by `time.perf_counter`, so intervals between requests of one run are monotonic.

Invariants:
- Tool-call arguments are kept exactly as streamed (concatenated fragments), never
  re-serialised.
- A failed request is a `RequestOutcome` with `error` set to one line of at most 300
  characters, never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

ERROR_LIMIT = 300


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # the raw argument string as streamed
    id: str | None = None


@dataclass(frozen=True)
class Timings:
    """Client-side clock readings for one request (None when it never happened)."""

    sent_at: float
    first_byte_at: float | None = None  # response headers received
    first_content_at: float | None = None  # first non-empty content/reasoning/tool delta
    last_byte_at: float | None = None


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
        return msgspec.to_builtins(self)

    @classmethod
    def from_json_dict(cls, data: Any) -> "RequestOutcome":
        return msgspec.convert(data, cls)


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
