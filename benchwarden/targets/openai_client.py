"""The OpenAI-compatible chat client every suite talks to a server through.

Built on aiohttp (one `ClientSession` per `ChatClient`; a streamed event-stream body is
taken from the connection once aiohttp has parsed the headers, its HTTP framing decoded
by httptools, see `_Tap` and `_BodyReader`) and msgspec (chunks decoded straight into
typed structs): under hundreds of concurrent streams this spends
tens of times less client CPU per token than the `openai` SDK
(docs/decisions/0002-http-client.md, bench/client_overhead.py). It runs on any asyncio
event loop; the CLI starts uvloop where installed (event_loop.py).

Invariants:
- `stream_chat` never raises for a request-level failure: every failure becomes a
  `RequestOutcome` whose `error` is one line of at most 300 characters saying what
  happened and, where it helps, what to check. Only a caller bug (a body that is not
  JSON-serialisable, a client used outside `async with`) raises.
- The request body is sent exactly as given: the client adds HTTP headers, never
  fields. The API key is sent as `Authorization: Bearer` only when set and is never
  logged, stored or shown in `repr`.
- Tool-call arguments are concatenated exactly as streamed, never re-serialised (a
  server that sends a JSON object instead of a string gets it compactly encoded).
- Unknown JSON keys and unknown SSE fields are ignored; an `error` anywhere fails.
- Server text is byte-exact: bytes that are not valid UTF-8 reach the reply as lone
  surrogates (see replies.py), never as U+FFFD, and error lines show them as `\\xNN`.
  Valid frames take msgspec's fast path; only a frame holding invalid UTF-8 goes
  through the slower decoder that keeps those bytes, which rejects the same JSON
  (lone `\\uDxxx` escapes included) as the fast path does.
- A request is sent again only in one case: the pooled keep-alive connection it went
  out on failed before any response came, the sign of a connection the server had
  already closed. The retry uses a new connection and the outcome says so
  (`extra["reconnected"]`).

- A body the `_Tap` takes is never seen by aiohttp, and its connection goes back to the
  pool only when the body ended cleanly (a chunked body, nothing after its last chunk);
  broken framing fails the request at once, never hangs it.

- A streamed request's own objects (tap, body reader, reply state, stall watch) are
  freed by reference counting when it ends: no cycle among them, and the pooled
  connection keeps none of them (tests/targets/test_openai_client_request_objects.py),
  also when the server cuts a body off mid-reply: the transport error aiohttp keeps
  loses its traceback, which held the frames reading that body.

- `sent_at` is when the request's body was written to its connection (after the
  connection was obtained and the request built); `stream_together` holds a burst's
  requests until every one is ready to write, so their spread is only the writes.

The base URL may be given with or without a trailing `/v1` (and trailing slashes): it
is normalised to the part before `/v1`, and requests go to `{base}/v1/...`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import datetime
import email.utils
import enum
import gc
import hashlib
import itertools
import json
import math
import re
import time
import types
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import aiohttp
import httptools
import msgspec

from benchwarden.core.errors import TargetUnreachableError
from benchwarden.core.verdicts import one_line
from benchwarden.targets.replies import (
    ERROR_LIMIT,
    Candidate,
    ChatCompletion,
    Reply,
    RequestOutcome,
    Timings,
    TokenLogprob,
    ToolCall,
    Usage,
    escape_invalid_utf8,
)
from benchwarden.targets.sse import SSEEvent, SSEParser

_Result = TypeVar("_Result")

__all__ = [  # the values are re-exported from replies.py for callers' convenience
    "ChatClient",
    "ChatCompletion",
    "RequestOutcome",
    "TargetError",
    "TargetUnreachable",
    "ToolCall",
    "Usage",
    "normalise_base_url",
    "now",
    "one_line_error",
]

# One clock per process: epoch-anchored so readings mean something across runs, but
# advanced by perf_counter so that intervals inside a run are monotonic and precise.
_EPOCH_AT_IMPORT = time.time()
_PERF_AT_IMPORT = time.perf_counter()
_CLOCK_OFFSET = _EPOCH_AT_IMPORT - _PERF_AT_IMPORT  # now() = perf_counter() + this
_perf_counter = time.perf_counter


def now() -> float:
    """Seconds since the epoch, advanced by `time.perf_counter` (the client clock)."""
    return _perf_counter() + _CLOCK_OFFSET


def one_line_error(text: str) -> str:
    """Squash whitespace (newlines included) to single spaces; cut to 300 characters;
    bytes that were not valid UTF-8 shown as `\\xNN` (so the line is valid text)."""
    return one_line(escape_invalid_utf8(text), ERROR_LIMIT) or "unknown error"


class TargetUnreachable(TargetUnreachableError):
    """The server did not answer `GET /v1/models` with 200 in time (one-line message)."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line_error(message))


class TargetError(Exception):
    """A non-streamed request failed: transport, HTTP status or JSON (one-line message)."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line_error(message))


def normalise_base_url(url: str) -> str:
    """`http://h:8000/v1/` and `http://h:8000` both become `http://h:8000`."""
    base = url.strip().rstrip("/")
    if base.endswith("/v1"):
        base = base[: -len("/v1")].rstrip("/")
    if not base.startswith(("http://", "https://")) or "://" == base[-3:]:
        raise ValueError(f"target URL must look like http://HOST:PORT[/v1], got {url!r}")
    return base


# --- The wire shapes, decoded by msgspec. Unknown keys are ignored; every field is
# optional because servers differ in what they send and when. `gc=False`: decoded
# chunks hold no reference cycles, so the garbage collector need not track them. ---


class _Function(msgspec.Struct, gc=False):
    name: str | None = None
    arguments: Any = None  # a string fragment; a JSON object from a few servers


class _ToolCallDelta(msgspec.Struct, gc=False):
    index: int | None = None
    id: str | None = None
    function: _Function | None = None


class _Delta(msgspec.Struct, gc=False):
    content: str | None = None
    reasoning_content: str | None = None  # SGLang, llama.cpp
    reasoning: str | None = None  # vLLM (late 2025 on), Ollama
    tool_calls: list[_ToolCallDelta] | None = None


class _TopLogprob(msgspec.Struct, gc=False):
    token: str | None = None
    bytes: list[int] | None = None  # the token's exact bytes (a token may split a character)
    logprob: float | None = None


class _TokenLogprob(msgspec.Struct, gc=False):
    token: str | None = None
    bytes: list[int] | None = None
    logprob: float | None = None
    top_logprobs: list[_TopLogprob] | None = None


class _Logprobs(msgspec.Struct, gc=False):
    content: list[_TokenLogprob] | None = None


class _Choice(msgspec.Struct, gc=False):
    index: int | None = 0
    delta: _Delta | None = None
    finish_reason: str | None = None
    logprobs: _Logprobs | None = None  # sent only when the request asked for logprobs


class _PromptDetails(msgspec.Struct, gc=False):
    cached_tokens: int | None = None


class _CompletionDetails(msgspec.Struct, gc=False):
    reasoning_tokens: int | None = None


class _Usage(msgspec.Struct, gc=False):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: _PromptDetails | None = None
    completion_tokens_details: _CompletionDetails | None = None


class _Chunk(msgspec.Struct, gc=False):
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    error: Any = None


_chunk_decoder = msgspec.json.Decoder(_Chunk)
_any_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()

_ERROR_BODY_LIMIT = 64 * 1024
_EXCERPT = 80
_DRAIN_SECONDS = 0.25


class _StreamFailure(Exception):
    """Raised inside the read loop; becomes the outcome's error line."""


class _StaleConnection(Exception):
    """A pooled connection the server had already closed: retry once on a new one."""


def _is_stale_connection(exc: BaseException) -> bool:
    """Did the connection die before any response, as a reused keep-alive one does?

    llama.cpp's server, for one, closes the connection after each streamed reply while
    announcing keep-alive; a request sent on it before the close is noticed fails on
    write or with a disconnect before any response. A refused or timed-out connect is
    not this case, and neither is a failure after the response began.
    """
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return True
    if isinstance(exc, aiohttp.ClientConnectorError) or isinstance(exc, TimeoutError):
        return False
    return isinstance(exc, (aiohttp.ClientOSError, ConnectionResetError, BrokenPipeError))


def _error_text(value: Any) -> str:
    """The human message of an error value in any of the shapes servers use."""
    if isinstance(value, dict):
        inner = value.get("error")
        if isinstance(inner, dict):
            message = inner.get("message") or inner.get("msg")
            kind = inner.get("type") or inner.get("code")
            if message:
                return f"{message} ({kind})" if kind else str(message)
            return _encoder.encode(inner).decode()
        if isinstance(inner, str) and inner:
            return inner  # TGI: {"error": "text", "error_type": ...}
        for key in ("message", "detail", "msg"):  # flat SGLang/vLLM-old, FastAPI
            if value.get(key):
                detail = value[key]
                return detail if isinstance(detail, str) else _encoder.encode(detail).decode()
        return _encoder.encode(value).decode()
    if isinstance(value, str):
        return value
    return _encoder.encode(value).decode()


def _error_text_from_body(body: bytes) -> str:
    text = body.decode("utf-8", "surrogateescape").strip()
    if not text:
        return ""
    try:
        return _error_text(_any_decoder.decode(body))
    except (msgspec.DecodeError, UnicodeEncodeError, RecursionError):
        return text


def _arguments_text(arguments: Any) -> str:
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        return arguments
    try:
        return _encoder.encode(arguments).decode()
    except UnicodeEncodeError:  # holds invalid UTF-8 from the server: keep those bytes
        return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


_RAW_BYTE = re.compile("[\udc80-\udcff]")  # what an invalid byte decodes to
_SURROGATE = re.compile("[\ud800-\udfff]")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _surrogates_in(value: Any) -> int:
    """How many lone surrogates the strings (keys too) of a decoded document hold."""
    if isinstance(value, str):
        return 0 if value.isascii() else len(_SURROGATE.findall(value))
    if isinstance(value, dict):
        return sum(_surrogates_in(key) + _surrogates_in(item) for key, item in value.items())
    if isinstance(value, list):
        return sum(_surrogates_in(item) for item in value)
    return 0


def _decode_chunk(data: str) -> _Chunk:
    """One frame as a chunk: msgspec's fast path, or (for a frame holding bytes that
    were not UTF-8, which msgspec cannot take) the stdlib decoder, which keeps them.

    Raises msgspec.DecodeError / ValidationError for what the fast path rejects. The
    stdlib decoder also accepts lone `\\uDxxx` escapes, which msgspec refuses: any
    surrogate in the result that is not one of the frame's raw bytes came from one.
    """
    try:
        return _chunk_decoder.decode(data)
    except UnicodeEncodeError:
        pass
    except RecursionError:  # nesting deeper than msgspec follows (an unknown key's value)
        raise msgspec.DecodeError("JSON is malformed: nested too deeply") from None
    try:
        document = json.loads(data, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise msgspec.DecodeError(f"JSON is malformed: {type(exc).__name__}: {exc}") from None
    if _surrogates_in(document) != len(_RAW_BYTE.findall(data)):
        raise msgspec.DecodeError("JSON is malformed: invalid utf-16 surrogate pair")
    return msgspec.convert(document, _Chunk)


class _CallBuilder:
    __slots__ = ("index", "id", "name", "arguments")

    def __init__(self, index: int | None, call_id: str | None) -> None:
        self.index = index
        self.id = call_id
        self.name: str | None = None
        self.arguments: list[str] = []


class _StreamState:
    """What one streamed reply has delivered so far."""

    __slots__ = ("text", "reasoning", "calls", "calls_by_index", "finish_reason", "usage",
                 "counted_deltas", "content_deltas", "frames", "saw_done", "status",
                 "sent_at", "first_byte_at", "first_content_at", "last_byte_at", "token_logprobs")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: list[_CallBuilder] = []
        self.calls_by_index: dict[int | None, _CallBuilder] = {}
        self.finish_reason: str | None = None
        self.usage: _Usage | None = None
        self.counted_deltas = 0  # non-empty content/reasoning deltas: the token fallback
        self.content_deltas = 0  # ... and tool-call fragments: what "N deltas" counts
        self.frames = 0
        self.saw_done = False
        self.status: int | None = None  # the HTTP status, once the headers are in
        # when the request's bytes were written (`_TimedRequest`); until then, when it
        # was begun
        self.sent_at = now()
        self.first_byte_at: float | None = None
        self.first_content_at: float | None = None
        self.last_byte_at: float | None = None
        self.token_logprobs: list[TokenLogprob] | None = None  # None: the server sent none

    def take(self, event: SSEEvent, read_at: float) -> None:
        data, kind, _, other = event  # unpacking is cheaper than attribute reads
        if other:
            for name, value in other:
                if name == "error":  # older llama.cpp: a non-standard `error:` line
                    raise _StreamFailure(self._in_band(_error_text_from_body(
                        value.encode("utf-8", "surrogateescape"))))
        if kind is not None and kind != "message":
            if kind == "error":
                raise _StreamFailure(self._in_band(
                    _error_text_from_body((data or "").encode("utf-8", "surrogateescape"))
                    or "event: error"))
            return  # an event type a chat stream does not define
        if data is None:
            return
        if data == "[DONE]":
            self.saw_done = True
            return
        try:
            chunk = _decode_chunk(data)
        except msgspec.ValidationError as exc:
            raise _StreamFailure(
                f"frame {self.frames + 1} is not a chat-completion chunk ({exc}): "
                f"{data[:_EXCERPT]}") from None
        except msgspec.DecodeError as exc:
            if not data.strip():
                return  # an empty data line carries nothing
            raise _StreamFailure(
                f"invalid JSON in frame {self.frames + 1} after {self.content_deltas} "
                f"deltas ({exc}): {data[:_EXCERPT]}") from None
        self.take_chunk(chunk, read_at)

    def take_chunk(self, chunk: _Chunk, read_at: float) -> None:
        """One decoded chat-completion chunk (a frame's JSON)."""
        self.frames += 1
        choices = chunk.choices
        if (choices is not None and len(choices) == 1 and chunk.error is None
                and chunk.usage is None):
            # The usual chunk, one content delta of our choice and nothing else: what the
            # general path below does for it, with fewer steps (it is once per token).
            choice = choices[0]
            delta = choice.delta
            if (delta is not None and delta.content and not choice.index
                    and choice.finish_reason is None and choice.logprobs is None
                    and delta.reasoning_content is None and delta.reasoning is None
                    and delta.tool_calls is None):
                self.text.append(delta.content)
                self.counted_deltas += 1
                self.content_deltas += 1
                if self.first_content_at is None:
                    self.first_content_at = read_at
                return
        self._take_chunk_fields(chunk, read_at)

    def _take_chunk_fields(self, chunk: _Chunk, read_at: float) -> None:
        """`take_chunk` for any chunk, field by field (after `frames` is counted)."""
        if chunk.error is not None:
            raise _StreamFailure(self._in_band(_error_text(chunk.error)))
        if chunk.usage is not None:
            self.usage = chunk.usage  # the last one wins (continuous usage, usage chunk)
        if not chunk.choices:
            return
        for choice in chunk.choices:
            if choice.index:
                continue  # one reply per request: other choices (n > 1) are not ours
            delta = choice.delta
            if delta is not None:
                counted = False
                if delta.content:
                    self.text.append(delta.content)
                    counted = True
                if delta.reasoning_content:
                    self.reasoning.append(delta.reasoning_content)
                    counted = True
                if delta.reasoning:
                    self.reasoning.append(delta.reasoning)
                    counted = True
                if delta.tool_calls:
                    substantial = self._take_tool_calls(delta.tool_calls)
                else:
                    substantial = False
                if counted:
                    self.counted_deltas += 1
                if counted or substantial:
                    self.content_deltas += 1
                    if self.first_content_at is None:
                        self.first_content_at = read_at
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
            if choice.logprobs is not None and choice.logprobs.content:
                self._take_logprobs(choice.logprobs.content)

    def _take_logprobs(self, entries: list[_TokenLogprob]) -> None:
        if self.token_logprobs is None:
            self.token_logprobs = []
        for entry in entries:
            self.token_logprobs.append(TokenLogprob(
                _token_text(entry.token, entry.bytes), _logprob(entry.logprob),
                tuple(Candidate(_token_text(top.token, top.bytes), _logprob(top.logprob))
                      for top in entry.top_logprobs or ())))

    def _take_tool_calls(self, fragments: list[_ToolCallDelta]) -> bool:
        """Merge fragments into calls; True when one carried a name or argument text."""
        substantial = False
        for fragment in fragments:
            call = self._call_for(fragment)
            function = fragment.function
            if function is None:
                continue
            if function.name and not call.name:
                call.name = function.name  # later repeats and nulls are ignored
                substantial = True
            arguments = _arguments_text(function.arguments)
            if arguments:
                call.arguments.append(arguments)
                substantial = True
        return substantial

    def _call_for(self, fragment: _ToolCallDelta) -> _CallBuilder:
        index, call_id = fragment.index, fragment.id
        current = self.calls_by_index.get(index)
        if current is not None and (call_id is None or current.id is None
                                    or current.id == call_id):
            if current.id is None:
                current.id = call_id
            return current
        if call_id is not None:
            # Older Ollama gave parallel calls all index 0: a new id is a new call.
            for call in self.calls:
                if call.id == call_id:
                    self.calls_by_index[index] = call
                    return call
        call = _CallBuilder(index, call_id)
        self.calls.append(call)
        self.calls_by_index[index] = call
        return call

    def _in_band(self, message: str) -> str:
        return f"server error in stream after {self.content_deltas} deltas: {message}"

    def timings(self) -> Timings:
        return Timings(self.sent_at, self.first_byte_at, self.first_content_at,
                       self.last_byte_at)

    def reply(self) -> Reply:
        usage = self.usage
        reported_tokens = usage.completion_tokens if usage is not None else None
        reported = reported_tokens is not None
        return Reply(
            reasoning="".join(self.reasoning),
            text="".join(self.text),
            tool_calls=tuple(
                ToolCall(name=call.name or "", arguments="".join(call.arguments), id=call.id)
                for call in self.calls),
            finish_reason=self.finish_reason,
            completion_tokens=(reported_tokens if reported_tokens is not None
                               else self.counted_deltas),
            usage_reported=reported,
            prompt_tokens=usage.prompt_tokens if usage is not None else None,
            cached_prompt_tokens=(
                usage.prompt_tokens_details.cached_tokens
                if usage is not None and usage.prompt_tokens_details is not None else None),
            saw_done=self.saw_done,
            reasoning_tokens=(
                usage.completion_tokens_details.reasoning_tokens
                if usage is not None and usage.completion_tokens_details is not None
                else None),
            token_logprobs=(None if self.token_logprobs is None
                            else tuple(self.token_logprobs)),
        )


def _token_text(token: str | None, raw: list[int] | None) -> str:
    """A logprob entry's token as text: from its bytes when sent (invalid UTF-8 kept as
    lone surrogates, as in the reply's text), else its `token` string."""
    if raw is not None:
        try:
            return bytes(raw).decode("utf-8", "surrogateescape")
        except ValueError:  # not a list of byte values: fall back to the string
            pass
    return token or ""


def _logprob(value: float | None) -> float:
    """A logprob as a finite float (-inf, which some servers send for an impossible
    candidate, and a missing one become -1e9, so the record stays plain JSON)."""
    if value is None or not math.isfinite(value):
        return -1e9
    return float(value)


async def _read_capped(response: aiohttp.ClientResponse,
                       limit: int = _ERROR_BODY_LIMIT) -> bytes:
    """The body, or its first `limit` bytes when a server sends more: memory stays
    bounded by the limit plus one network piece whatever the server sends."""
    parts: list[bytes] = []
    size = 0
    async for piece in response.content.iter_any():
        parts.append(piece)
        size += len(piece)
        if size >= limit:
            break
    return b"".join(parts)[:limit]


async def _drain_after_done(response: aiohttp.ClientResponse) -> None:
    """Read the body's end (the chunked terminator usually follows `[DONE]` at once) so
    that the connection goes back to the pool; a server that keeps the body open after
    `[DONE]` just costs that connection."""
    if response.content.at_eof():
        return
    try:
        await asyncio.wait_for(response.content.read(_ERROR_BODY_LIMIT), _DRAIN_SECONDS)
    except (aiohttp.ClientError, TimeoutError, OSError):
        pass


def _status_hint(status: int) -> str:
    if status in (401, 403):
        return " — check the API key (is --api-key-env set to the right variable?)"
    if status == 404:
        return " — check the model name and that the URL is an OpenAI-compatible server"
    if status == 429:
        return " — the server is rate limiting: lower the concurrency"
    return ""


# --- Bounds on what one hostile or broken server can cost (docs/hostile-servers.md).
# Generous for every real server: a 256-token reply is 30-100 KB on the wire, and even
# top-20 logprobs (about 2.5 KB a token) keep a 4,096-token reply near 10 MB. ---

DEFAULT_MAX_REPLY_BYTES = 16 * 1024 * 1024
"""Bytes of one reply body (all of it: frames, pings, usage) before it is cut off."""
DEFAULT_STALL_TIMEOUT = 60.0
"""Seconds without a completed line, once the first byte came, before a read fails."""
DEFAULT_CHUNKS_PER_TOKEN = 4.0
"""Events allowed per requested token (Ollama splits a step in two; 4 leaves room)."""
CHUNK_ALLOWANCE = 64
"""Events allowed on top: role, finish, usage chunks, [DONE], stray empty deltas."""
DEFAULT_RETRY_429_MAX_WAIT = 30.0
"""Seconds of Retry-After waits honoured per request before overload is reported."""
EVIDENCE_BYTES = 4096
"""How much of a rejected body an error outcome keeps (with its length and SHA-256)."""
MODELS_BODY_LIMIT = 8 * 1024 * 1024
"""The largest `GET /v1/models` body read (3,000 long model ids are about 200 KB)."""
MAX_429_RETRIES = 20
"""Retries of one request after HTTP 429, whatever the waits (Retry-After: 0 loops)."""
_MIN_429_PAUSE = 0.05


def size_text(size: int) -> str:
    """`16 MiB`, `4 KiB` or `1,234 bytes`: a byte count as a person reads it."""
    for unit, name in ((1024 * 1024 * 1024, "GiB"), (1024 * 1024, "MiB"), (1024, "KiB")):
        if size >= unit and size % unit == 0:
            return f"{size // unit} {name}"
    return f"{size:,} bytes"


def chunk_cap(body: Any, chunks_per_token: float | None) -> tuple[int, int] | None:
    """(most events a reply may stream, the token limit it derives from) for a request
    body; None when the body sets no token limit or the cap is off.

    The limit is `max_completion_tokens` (OpenAI's newer name) or `max_tokens`, times
    `n` when several choices are asked for."""
    if chunks_per_token is None or not isinstance(body, dict):
        return None
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        return None
    choices = body.get("n")
    if not isinstance(choices, int) or isinstance(choices, bool) or choices < 1:
        choices = 1
    return math.ceil(chunks_per_token * limit * choices) + CHUNK_ALLOWANCE, limit


_DELTA_SECONDS = re.compile(r"\d{1,12}(\.\d{1,6})?")


def retry_after_seconds(value: str | None, now_epoch: float) -> float | None:
    """The wait a `Retry-After` header asks for: delay-seconds or an HTTP-date (RFC 9110
    §10.2.3); a date in the past is 0; None when absent or unreadable."""
    if value is None:
        return None
    text = value.strip()
    if _DELTA_SECONDS.fullmatch(text):
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # "-0000" means UTC with no zone information
        when = when.replace(tzinfo=datetime.UTC)
    return max(0.0, when.timestamp() - now_epoch)


def _seconds_text(seconds: float) -> str:
    return f"{round(seconds, 1):g}"


def overload_pause(retry_after: str | None, *, waited: float, retries: int, bound: float,
                   now_epoch: float) -> float | str:
    """How long to wait before retrying after HTTP 429, or why not to (the error line's
    opening). Pure: the caller supplies the clock."""
    delay = retry_after_seconds(retry_after, now_epoch)
    if delay is None:
        shown = "" if retry_after is None else f" {retry_after.strip()[:40]!r}"
        return f"server overloaded: HTTP 429 without a usable Retry-After{shown}"
    if retries >= MAX_429_RETRIES:
        return (f"server overloaded: HTTP 429 again after {retries} retries "
                f"({_seconds_text(waited)} s waited)")
    if waited + delay > bound:
        if waited:
            return (f"server overloaded: HTTP 429, Retry-After {_seconds_text(delay)} s would "
                    f"exceed the {_seconds_text(bound)} s bound after {_seconds_text(waited)} s"
                    f" already waited (--retry-429-max-wait)")
        return (f"server overloaded: HTTP 429, Retry-After {_seconds_text(delay)} s exceeds "
                f"the {_seconds_text(bound)} s bound (--retry-429-max-wait)")
    return max(delay, _MIN_429_PAUSE)


class _Overloaded(Exception):
    """HTTP 429: the caller waits as Retry-After asks (within its bound) and retries."""

    def __init__(self, retry_after: str | None, detail: str,
                 outcome: RequestOutcome | None = None) -> None:
        super().__init__(detail)
        self.retry_after = retry_after
        self.detail = detail
        self.outcome = outcome


class _StallWatch:
    """Fails a streamed request when, once the server's first byte arrived, no line
    completes for `seconds`: header lines first, then SSE lines.

    One timer per request, re-armed only when it fires: the readers merely note when a
    line last completed. Until the headers are complete, the bytes are seen by the
    request's `_Tap` on the connection, so a server trickling its status line is caught
    too; the body is watched by the SSE parser's `progress` at the cost of one
    assignment per read. On a stall the watch expires the request's `asyncio.timeout`
    guard, which cancels it and surfaces as TimeoutError with `fired`.
    """

    __slots__ = ("seconds", "guard", "last_progress_at", "handle", "fired", "headers_in")

    def __init__(self, seconds: float, guard: asyncio.Timeout) -> None:
        self.seconds = seconds
        self.guard = guard
        self.last_progress_at = 0.0
        self.handle: asyncio.TimerHandle | None = None
        self.fired = False
        self.headers_in = False

    def arm(self, at: float) -> None:
        self.last_progress_at = at
        self.handle = asyncio.get_running_loop().call_later(self.seconds, self._check)

    def _check(self) -> None:
        loop = asyncio.get_running_loop()
        quiet = now() - self.last_progress_at
        if quiet >= self.seconds:
            self.fired = True
            self.guard.reschedule(loop.time())
        else:
            self.handle = loop.call_later(self.seconds - quiet, self._check)

    def saw_bytes(self, data: bytes, at: float) -> None:
        """Bytes of the response head arrived (a line completed if they hold `\n`)."""
        if self.handle is None:
            self.arm(at)
        elif b"\n" in data:
            self.last_progress_at = at

    def headers_arrived(self) -> None:
        self.headers_in = True
        at = now()
        if self.handle is None:
            self.arm(at)
        else:
            self.last_progress_at = at

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.cancel()


def _refresh_protocol(protocol: Any) -> None:
    """Make the transport look up `protocol.data_received` again. asyncio's transports
    look it up on every read; uvloop's keep the bound method they found when the
    protocol was set, so setting the protocol again is what makes them see a hook
    added (or removed) since."""
    transport = getattr(protocol, "transport", None)
    if transport is not None and not transport.is_closing():
        transport.set_protocol(protocol)


class _Sending:
    """The streamed request the current task is sending, as the context variable
    `_sending` holds it: its `_Tap`, which `_WatchingConnector` attaches to the
    connection it hands that request (in the same task), and its `_StreamState`, in
    which `_TimedRequest` notes when the request's bytes were written (`sent_at`).

    A holder emptied when the request ends, not the objects themselves: a connection
    opened for a request keeps a copy of that task's context for its whole life (the
    event loop runs the connection's callbacks in it), and through the objects it
    would keep that request's reply as long as the connection stays in the pool."""

    __slots__ = ("tap", "state")

    def __init__(self, tap: _Tap, state: _StreamState) -> None:
        self.tap: _Tap | None = tap
        self.state: _StreamState | None = state

    def end(self) -> None:
        self.tap = self.state = None


_sending: contextvars.ContextVar[_Sending | None] = contextvars.ContextVar(
    "benchwarden_sending", default=None)


READ_SIZE = 64 * 1024
"""The most one socket read asks for. asyncio asks for 256 KiB, and CPython allocates
that much for every read before shrinking it to what came: above glibc's mmap threshold
(128 KiB) each read maps and unmaps fresh memory, about 12 µs, which with one network
read per streamed token was a fifth of the client's CPU (bench/client_overhead.py)."""


RELEASE_PAUSE = 0.002
"""Seconds between the last request of a burst being ready and the burst's release."""


class _Launch:
    """A gate that holds requests fired together until every one of them is ready to
    write: built, holding its connection (opened if need be), its headers rendered.
    Then all are released at once, in one pass of the event loop, so what is left
    between the first and the last send is only the writes (about 5 µs each).

    What else could stretch that pass is kept out of it: the release comes
    `RELEASE_PAUSE` after the last request is ready (the process idles just before, so
    the scheduler has just woken it with a fresh time slice rather than pre-empting it
    midway), and the garbage collector is held off from the release until every
    released request has written (a full collection took several milliseconds there).

    `expected` requests are counted at the gate; a request that ends before reaching it
    (a connect failure) is counted as it ends, and the gate opens after `patience`
    seconds whatever is missing, so a request that cannot get a connection never holds
    the others back for ever.
    """

    __slots__ = ("expected", "arrived", "opened", "timer")

    def __init__(self, expected: int, patience: float) -> None:
        self.expected = expected
        self.arrived = 0
        self.opened = asyncio.Event()
        self.timer = asyncio.get_running_loop().call_later(patience, self.open)

    def count(self) -> None:
        self.arrived += 1
        if self.arrived == self.expected:
            self.timer.cancel()
            self.timer = asyncio.get_running_loop().call_later(RELEASE_PAUSE, self.open)

    def open(self) -> None:
        self.timer.cancel()
        if self.opened.is_set():
            return
        collecting = gc.isenabled()
        if collecting:
            gc.disable()
        self.opened.set()  # queues every waiting request's wake-up, in order
        if collecting:  # queued after them: runs once they have all written
            asyncio.get_running_loop().call_soon(gc.enable)

    async def wait(self) -> None:
        await self.opened.wait()


class _LaunchTicket:
    """One request's place at a `_Launch`: counted once, however often it is sent
    (a retry after HTTP 429 or a stale connection is not held again)."""

    __slots__ = ("launch", "counted")

    def __init__(self, launch: _Launch) -> None:
        self.launch = launch
        self.counted = False

    async def pass_gate(self) -> None:
        if not self.counted:
            self.counted = True
            self.launch.count()
            await self.launch.wait()

    def leave(self) -> None:
        """The request ended; if it never reached the gate, stop waiting for it."""
        if not self.counted:
            self.counted = True
            self.launch.count()


_launch_ticket: contextvars.ContextVar[_LaunchTicket | None] = contextvars.ContextVar(
    "benchwarden_launch_ticket", default=None)


class _TimedRequest(aiohttp.ClientRequest):
    """aiohttp's request, which waits at its launch gate (if it has one) once it is
    built, holds its connection and its headers are ready (aiohttp writes them with the
    body), and notes when its body is written: that is a streamed request's `sent_at`,
    the moment the server can start on it."""

    async def write_bytes(self, *args: Any, **kwargs: Any) -> None:
        ticket = _launch_ticket.get()
        if ticket is not None:
            await ticket.pass_gate()
        sending = _sending.get()
        if sending is not None and sending.state is not None:
            sending.state.sent_at = now()
        await super().write_bytes(*args, **kwargs)


class _WatchingConnector(aiohttp.TCPConnector):
    """A TCPConnector that attaches the current streamed request's `_Tap` to the
    connection it hands over (so the stall watch sees the bytes before the response
    headers are complete, and the body can be taken from the socket), and reads its
    sockets in `READ_SIZE` pieces."""

    async def connect(self, *args: Any, **kwargs: Any) -> Any:
        connection = await super().connect(*args, **kwargs)
        transport = getattr(connection, "transport", None)
        if getattr(transport, "max_size", 0) > READ_SIZE:
            transport.max_size = READ_SIZE  # type: ignore[union-attr]
        sending = _sending.get()
        tap = None if sending is None else sending.tap
        protocol = getattr(connection, "protocol", None)
        if tap is not None and protocol is not None:
            tap.attach(protocol)
        return connection


class _Stop(enum.Enum):
    """Why a body reader stopped before the body ended."""

    DONE = "done"  # `[DONE]` arrived: the reply is complete
    FAILED = "failed"  # an in-band error, a frame that is not a chunk (`error` says)
    BYTE_CAP = "byte cap"
    EVENT_CAP = "event cap"
    CANCELLED = "cancelled"  # `cancel_after_deltas` reached


# What `_BodyReader.feed` is given (its `raw_reads`).
_PIECES, _AT_CHUNK_START, _MID_CHUNK = 0, 1, 2


class _BodyReader:
    """Reads one 200 event stream inside the connection's `data_received`, as the
    request's `_Tap` (httptools) or, for a body the tap leaves to aiohttp, aiohttp's
    HTTP parser hands over each piece of the body, instead of waking the request's task
    for every piece.

    Why: when a server writes each token separately, every token is its own network
    read; through `StreamReader.iter_any` each one costs a future, an event-loop
    callback, a task step and the reader's buffer bookkeeping, about half of the client's
    CPU per token (bench/client_overhead.py --per-token-writes). Here a piece is counted,
    hashed, parsed and taken where it arrives, and the task wakes once, when the reply
    stops (`[DONE]`, a cap, a failure, the cancel point) or the body ends.

    How: a taken body's parser calls `feed` itself (`ended` notes the body's end); for a
    body aiohttp reads, the response's `StreamReader` is switched to `_ReaderWithSink`, a
    subclass that adds no state (so the switch is allowed) and hands `feed_data` to the
    reader registered for it in `_SINKS`, pieces that came with the headers first (the
    switch also wakes the task when aiohttp sees the body end or fail, for both).
    Invariants: `feed` never raises (a failure is kept in `error`); nothing is taken
    after `stop` is set; after `[DONE]` later bytes are drained (so the connection can
    be reused), after any other stop they are dropped (the response is being closed:
    memory stays bounded). The
    request's total timeout still applies: the task waits inside the reader's timer,
    exactly as `StreamReader` reads do.
    """

    __slots__ = ("state", "parser", "byte_cap", "event_cap", "cancel_after", "watch",
                 "received", "events_seen", "progress_seen", "hasher", "head", "stop",
                 "error", "waiter", "ended", "plain", "raw_reads", "parse_framing", "chunks_begun",
                 "chunks_ended", "framing_failed", "body_ended")

    def __init__(self, state: _StreamState, byte_cap: int | None, event_cap: int | None,
                 cancel_after: int | None, watch: _StallWatch | None) -> None:
        self.state = state
        self.parser = SSEParser()
        self.byte_cap = byte_cap
        self.event_cap = event_cap
        self.cancel_after = cancel_after
        self.watch = watch
        self.received = self.events_seen = self.progress_seen = 0
        self.hasher = hashlib.sha256()  # of every byte received: evidence if the reply is cut
        self.head = bytearray()
        self.stop: _Stop | None = None
        self.error: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.ended = False  # the body's end, as the request's `_Tap` decoded it
        self.plain = False  # the SSE parser is at a block boundary (`feed`'s shortcut)
        # what `feed` is given (set by the `_Tap`): body pieces (`_PIECES`), or the
        # connection's reads of a chunked body, whose parser is where a chunk's size
        # line begins (`_AT_CHUNK_START`) or is not (`_MID_CHUNK`)
        self.raw_reads = _PIECES
        # For those reads, the `_Tap`'s: httptools' parser of the body (its `on_body`
        # is `feed`), what a framing error or the body's end calls.
        self.parse_framing: Callable[[bytes], None] = _ignore_bytes
        self.framing_failed: Callable[[Exception], None] = _ignore_failure
        self.body_ended: Callable[[], None] = _nothing
        # httptools' calls of `on_chunk_header` and `on_chunk_complete`, counted in C
        # (`itertools.count`: no Python call per chunk); `feed` reads them by advancing
        # both alike, so their difference stays the number of chunks still open
        self.chunks_begun = itertools.count()
        self.chunks_ended = itertools.count()

    def evidence(self) -> dict[str, Any]:
        return _evidence(self.received, self.hasher, self.head)

    def feed(self, piece: bytes) -> None:
        """One piece of the body, as it arrived; never raises.

        With `raw_reads` set, `piece` is a read of the connection, of a chunked body.
        When its parser (httptools, in the `_Tap`) expects a chunk's size line, the
        usual read, one whole chunk `<hex size>\r\n<data>\r\n`, has its data taken
        here and the parser, which would end where it began, is skipped; only the plain
        form (lowercase hex without leading zeros, no extension, not the last chunk) is
        taken so. Any other read goes to the parser (`parse_framing`), which hands its
        data back here piece by piece. (That is done here, not in a function of the
        tap's, to spare a Python call per read.)

        The usual piece, exactly one `data: {...}` block at a block boundary of the SSE
        parser (`plain`), is decoded by msgspec from its bytes, without an SSE event or
        a str, and handed to `_StreamState.take_chunk` (whose shortcut takes the usual
        chunk). A frame msgspec refuses from bytes (invalid UTF-8 among them) and
        anything else go through the parser, with the general messages. Pieces after
        `stop` (the `_Tap` keeps decoding the body to its end) are dropped.
        """
        raw_reads = self.raw_reads
        if raw_reads:
            length = len(piece)
            size_line = (_SIZE_LINE_OF_WHOLE_CHUNK[length]
                         if raw_reads == _AT_CHUNK_START and length < _WHOLE_CHUNK_MOST
                         else None)
            if (size_line is None or piece[-1] != 0x0A or piece[-2] != 0x0D
                    or not piece.startswith(size_line)):
                self.raw_reads = _PIECES  # what httptools hands `feed` is the chunks' data
                try:
                    self.parse_framing(piece)
                except Exception as exc:  # noqa: BLE001 - llhttp's framing errors
                    self.framing_failed(exc)
                    return
                if self.ended:
                    self.body_ended()
                else:
                    # Every chunk begun has ended, and no byte of the next size line
                    # came (a whole size line begins a chunk; one cut short cannot end
                    # with LF): the next read may be one whole chunk again.
                    self.raw_reads = (
                        _AT_CHUNK_START if piece.endswith(b"\n")
                        and next(self.chunks_begun) == next(self.chunks_ended)
                        else _MID_CHUNK)
                return
            piece = piece[len(size_line):-2]
        if self.stop is not None:
            return
        try:
            state = self.state
            read_at = state.last_byte_at = _perf_counter() + _CLOCK_OFFSET  # now()
            received = self.received = self.received + len(piece)
            self.hasher.update(piece)
            if received - len(piece) < EVIDENCE_BYTES:
                head = self.head
                head += piece[:EVIDENCE_BYTES - len(head)]
            if self.byte_cap is not None and received > self.byte_cap:
                self._stop(_Stop.BYTE_CAP)
                return
            chunk = None
            # One `data: {...}` line and its blank line: no CR or LF (a line ending) in
            # the value. (`13 not in` is a memchr; `b"\r" not in` costs seven times more.)
            if (self.plain and piece.startswith(b"data: {") and piece[-1] == 0x0A
                    and piece[-2] == 0x0A):
                line = piece[6:-2]
                if 0x0A not in line and 0x0D not in line:
                    try:
                        chunk = _chunk_decoder.decode(line)
                    except (msgspec.DecodeError, RecursionError):
                        pass  # the general path gives the general message
            if chunk is None:
                parser = self.parser
                events = parser.feed(piece)
                self.plain = parser.at_block_boundary
                self._take_events(events, read_at)
                return
            watch = self.watch
            if watch is not None:
                if watch.handle is None:
                    watch.arm(read_at)
                watch.last_progress_at = read_at
            self.events_seen += 1
            if self.event_cap is not None and self.events_seen > self.event_cap:
                self._stop(_Stop.EVENT_CAP)
                return
            state.take_chunk(chunk, read_at)
            if self.cancel_after is not None and state.content_deltas >= self.cancel_after:
                self._stop(_Stop.CANCELLED)
        except Exception as exc:  # noqa: BLE001 - surfaces in the task, as an outcome
            self.error = exc
            self._stop(_Stop.FAILED)

    def _take_events(self, events: list[SSEEvent], read_at: float) -> None:
        """The events the parser completed from one piece (maybe none)."""
        parser = self.parser
        watch = self.watch
        if watch is not None:
            if watch.handle is None:
                watch.arm(read_at)
            if parser.progress != self.progress_seen:
                self.progress_seen = parser.progress
                watch.last_progress_at = read_at
        if not events:
            return
        self.events_seen += len(events)
        if self.event_cap is not None and self.events_seen > self.event_cap:
            self._stop(_Stop.EVENT_CAP)
            return
        state = self.state
        take = state.take
        cancel_after = self.cancel_after
        for event in events:
            take(event, read_at)
            if state.saw_done:
                self._stop(_Stop.DONE)
                return
            if cancel_after is not None and state.content_deltas >= cancel_after:
                self._stop(_Stop.CANCELLED)
                return

    def _stop(self, reason: _Stop) -> None:
        self.stop = reason
        self.wake()

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def read(self, response: aiohttp.ClientResponse) -> None:
        """Until `stop` is set or the body ended (then `stop` is None). A transport
        failure (the server closed mid-reply, the request timeout) raises as a read of
        the body would. When the request's `_Tap` took the body, the pieces come from it
        (some maybe before this is called) and aiohttp's reader only reports the end of
        a body delimited by the connection's close, or the failure of a cut one."""
        content = response.content
        if content.__class__ is not aiohttp.StreamReader:  # unusual: read it the plain way
            async for piece in content.iter_any():
                self.feed(piece)
                if self.stop is not None:
                    return
            return
        loop = asyncio.get_running_loop()
        arrived = content.read_nowait()  # what came with the headers
        if arrived:
            self.feed(arrived)
        if self.stop is not None or self.ended or content.is_eof():
            return
        _SINKS[content] = self
        content.__class__ = _ReaderWithSink
        timer: Any = getattr(content, "_timer", None) or contextlib.nullcontext()
        try:
            while self.stop is None and not self.ended and not content.is_eof():
                failure = content.exception()
                if failure is not None:
                    raise failure
                self.waiter = loop.create_future()
                with timer:  # the request's total timeout, as StreamReader reads use it
                    await self.waiter
        finally:
            self.waiter = None
            if _SINKS.get(content) is self:
                del _SINKS[content]
        failure = content.exception()
        if failure is not None and self.stop is None and not self.ended:
            raise failure

    async def drain(self, response: aiohttp.ClientResponse, tap: _Tap | None) -> None:
        """After `[DONE]`: wait (briefly) for the body's end, so that the connection can
        go back to the pool; a server that keeps the body open just costs that
        connection (aiohttp closes a connection whose body did not end)."""
        if tap is None or not tap.taken:
            await _drain_after_done(response)
            return
        if self.ended:
            return
        self.waiter = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(self.waiter, _DRAIN_SECONDS)
        except TimeoutError:
            pass
        finally:
            self.waiter = None


# The body reader of each response being read through `_ReaderWithSink` (a response's
# StreamReader keeps no attributes of its own: it has __slots__).
_SINKS: dict[aiohttp.StreamReader, _BodyReader] = {}


class _ReaderWithSink(aiohttp.StreamReader):
    """aiohttp's StreamReader whose body pieces go to the response's `_BodyReader`."""

    __slots__ = ()

    def feed_data(self, data: bytes, size: int = 0) -> bool:
        sink = _SINKS.get(self)
        if sink is None or sink.stop is _Stop.DONE:
            return super().feed_data(data, size)  # the drain after [DONE], as usual
        if sink.stop is None and data:
            sink.feed(data)
        return False

    def feed_eof(self) -> None:
        super().feed_eof()
        sink = _SINKS.get(self)
        if sink is not None:
            sink.wake()

    def set_exception(self, *args: Any, **kwargs: Any) -> None:
        super().set_exception(*args, **kwargs)
        sink = _SINKS.get(self)
        if sink is not None:
            sink.wake()


HEAD_LIMIT = 64 * 1024
"""The most bytes of a response head the `_Tap` keeps while looking for its end; a
longer head is left to aiohttp (which refuses over-long header lines) as is its body."""

_TERMINATOR = b"0\r\n\r\n"  # the last chunk of a chunked body, no trailers


def _size_line_of_whole_chunk(length: int) -> bytes | None:
    """The size line (with its CRLF) that a read of `length` bytes holding exactly one
    whole chunk, written as servers write it (lowercase hex, no leading zeros, no
    extension), starts with; None when no such chunk of data is that long (the last
    chunk, of size 0, is never one). A chunk of n bytes takes n + len(hex(n)) + 4 bytes,
    so for each length there is at most one n."""
    for digits in range(1, 8):
        size = length - digits - 4
        if size > 0 and len(b"%x" % size) == digits:
            return b"%x\r\n" % size
    return None


# Whole chunks up to this many bytes (a token's frame is a few hundred) are recognised
# by `_BodyReader.feed` from their length alone; longer reads go through httptools.
_WHOLE_CHUNK_MOST = 8 * 1024
_SIZE_LINE_OF_WHOLE_CHUNK = [_size_line_of_whole_chunk(length)
                             for length in range(_WHOLE_CHUNK_MOST)]


class _Tap:
    """One streamed request's view of its connection's bytes, from the moment it holds
    the connection: the response head (for the stall watch), then, when the response
    is a 200 uncompressed event stream, the body itself, decoded by httptools (llhttp)
    and handed to the request's `_BodyReader` without aiohttp seeing a byte of it.

    Why: with one network read per token, aiohttp's read path (its protocol's
    `data_received` in Python, its parser, the payload reader) was half of the client's
    CPU per token; here a read is one Python call around llhttp and one into
    `_BodyReader.feed` (docs/decisions/0002-http-client.md).

    How: the tap shadows the protocol's `data_received` (an instance attribute; see
    `_refresh_protocol` for uvloop). It passes the head's bytes to aiohttp until the
    blank line that ends the head, and no further, so aiohttp parses the status line
    and headers exactly as before and creates the response; what follows goes to
    httptools, which was given the same head and so knows the body's framing (chunked
    or until the close). The tap takes the body only when both parsers agree a new 200
    `text/event-stream` response without content coding just began, chunked or
    delimited by the close; otherwise (a Content-Length body among them: aiohttp must
    see its bytes to end its response and reuse the connection) it hands everything on
    to aiohttp and the body is read as before.

    Invariants: aiohttp never sees part of a taken body. The connection returns to the
    pool only when a chunked body ended cleanly with nothing after it: aiohttp is then
    given the last chunk, which ends its response; any other end (the close, bytes
    after the end, a framing error, a reply stopped early) leaves aiohttp's
    response unfinished, and aiohttp closes such a connection when it is released. A
    body cut short still fails through aiohttp (its parser sees the close mid-body),
    with the messages it always gave. The tap is detached when the request ends.
    """

    __slots__ = ("reader", "watch", "protocol", "receive", "head", "taken",
                 "chunked", "headers", "headers_complete", "messages", "feed_parser")

    def __init__(self, reader: _BodyReader, watch: _StallWatch | None) -> None:
        self.reader = reader
        self.watch = watch
        self.protocol: Any = None
        self.receive: Callable[[Any, bytes], None] | None = None  # the class's data_received
        self.head: bytearray | None = bytearray()  # None: no longer looking for the end
        self.feed_parser: Callable[[bytes], None] = _ignore_bytes  # the body's parser
        self.taken = False  # the body is ours
        self.chunked = False
        self.headers: dict[bytes, bytes] = {}
        self.headers_complete = False
        self.messages = 0

    # --- attaching to the connection ---

    def attach(self, protocol: Any) -> None:
        self.detach()
        try:
            protocol.data_received = self._head_received
        except AttributeError:  # a protocol without an instance dict: aiohttp reads all
            return
        self.protocol = protocol
        self.receive = type(protocol).data_received
        _refresh_protocol(protocol)

    def detach(self) -> None:
        protocol = self.protocol
        if protocol is not None:
            protocol.__dict__.pop("data_received", None)
            self.protocol = None
            _refresh_protocol(protocol)

    def _hook(self, data_received: Callable[[bytes], None]) -> None:
        protocol = self.protocol
        protocol.data_received = data_received
        _refresh_protocol(protocol)

    # --- the response head ---

    def _head_received(self, data: bytes) -> None:
        at = now()
        if self.watch is not None:
            self.watch.saw_bytes(data, at)
        protocol = self.protocol
        receive = self.receive
        assert receive is not None
        head = self.head
        if head is None:  # not ours: only the stall watch looks, until the headers are in
            receive(protocol, data)
            return
        searched_from = max(0, len(head) - 3)
        head += data
        end = head.find(b"\r\n\r\n", searched_from)
        if end < 0:
            if len(head) > HEAD_LIMIT:
                self._leave_to_aiohttp()
            receive(protocol, data)
            return
        end += 4
        body_from = len(data) - (len(head) - end)
        payload_before = getattr(protocol, "_payload", None)
        receive(protocol, data[:body_from] if body_from < len(data) else data)
        payload = getattr(protocol, "_payload", None)
        rest = data[body_from:]
        if (payload is None or payload is payload_before
                or payload.__class__ is not aiohttp.StreamReader
                or protocol.transport is None or protocol.transport.is_closing()
                or not self._is_event_stream_head(bytes(head[:end]))):
            self._leave_to_aiohttp()
            if rest:
                receive(protocol, rest)
            return
        self.taken = True
        self.head = None
        state = self.reader.state
        state.first_byte_at = state.last_byte_at = at
        if self.watch is not None:
            self.watch.headers_in = True
        reader = self.reader
        if self.chunked:
            self._hand_reads_to_reader()
            self._hook(reader.feed)
            if rest:
                reader.feed(rest)
        else:
            self._hook(self._body_received)
            if rest:
                self._body_received(rest)

    def _hand_reads_to_reader(self) -> None:
        """A chunked body: its reader is given the connection's reads and decodes
        their framing itself, with this tap's parser (`_BodyReader.feed`)."""
        reader = self.reader
        reader.parse_framing = self.feed_parser
        reader.framing_failed = self._framing_failed
        reader.body_ended = self._let_go
        reader.raw_reads = _AT_CHUNK_START

    def _is_event_stream_head(self, head: bytes) -> bool:
        """Does httptools read this head as a 200 uncompressed event stream?"""
        parser = httptools.HttpResponseParser(types.SimpleNamespace(
            on_header=self.on_header, on_headers_complete=self.on_headers_complete))
        try:
            parser.feed_data(head)
        except httptools.HttpParserError:
            return False
        if not self.headers_complete or parser.get_status_code() != 200:
            return False
        headers = self.headers
        media_type = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        coding = headers.get(b"content-encoding", b"identity").strip().lower()
        if media_type != b"text/event-stream" or coding not in (b"identity", b""):
            return False
        transfer = headers.get(b"transfer-encoding", b"").split(b",")[-1].strip().lower()
        self.chunked = transfer == b"chunked"
        if not self.chunked and b"content-length" in headers:
            # aiohttp must see a Content-Length body to end its response, and without
            # that the connection could not be reused: such a (rare) stream stays its.
            return False
        # The body's parser is another one, given the same head: it has no `on_header`,
        # so httptools keeps no header text (trailers, however long, cost no memory),
        # and its `on_body` is the body reader's own `feed`, no call in between.
        # httptools finds the callbacks by name when the parser is made.
        body_parser = httptools.HttpResponseParser(types.SimpleNamespace(
            on_message_begin=self.on_message_begin, on_body=self.reader.feed,
            on_message_complete=self.on_message_complete,
            on_chunk_header=self.reader.chunks_begun.__next__,
            on_chunk_complete=self.reader.chunks_ended.__next__))
        try:
            body_parser.feed_data(head)
        except httptools.HttpParserError:
            return False
        self.feed_parser = body_parser.feed_data
        return True

    def _leave_to_aiohttp(self) -> None:
        """Not a body the tap takes: aiohttp reads it. The hook stays only while the
        stall watch needs the head's bytes (`headers_arrived` removes it)."""
        self.head = None
        if self.watch is None:
            self.detach()

    # httptools' callbacks (the parser finds them by name when it is created)

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.headers_complete:
            self.headers[name.lower()] = value

    def on_headers_complete(self) -> None:
        self.headers_complete = True

    def on_message_begin(self) -> None:
        self.messages += 1  # a second one: bytes after the body's end

    def on_message_complete(self) -> None:
        reader = self.reader
        reader.ended = True
        reader.wake()

    # --- the body ---

    def _body_received(self, data: bytes) -> None:
        """A read of a body delimited by the close, through httptools (whose `on_body`
        is the reader's `feed`; a chunked body's reads go to `feed` itself)."""
        try:
            self.feed_parser(data)
        except Exception as exc:  # noqa: BLE001 - llhttp's framing errors, never raised
            self._framing_failed(exc)
            return
        if self.reader.ended:
            self._let_go()

    def _framing_failed(self, exc: Exception) -> None:
        reader = self.reader
        if not reader.ended and reader.stop is None:
            reader.error = _StreamFailure(
                f"malformed HTTP body framing from the server after "
                f"{reader.state.content_deltas} deltas: {exc}")
            reader._stop(_Stop.FAILED)
        self._drop_the_rest()

    def _drop_the_rest(self) -> None:
        """Nothing more is read from this connection's body: aiohttp's response stays
        unfinished, so the connection is closed when the request lets go of it."""
        self.reader.raw_reads = _PIECES
        self._hook(_ignore_bytes)

    def _let_go(self) -> None:
        """The body ended: end aiohttp's response too when that is clean (a chunked
        body, nothing after it), so the connection can be reused."""
        if not self.chunked or self.messages > 1:
            self._drop_the_rest()
            return
        protocol, receive = self.protocol, self.receive
        self.detach()
        if protocol is not None and receive is not None:
            receive(protocol, _TERMINATOR)

    def stop(self) -> None:
        """The request ended: the connection is aiohttp's again."""
        self.detach()
        reader = self.reader
        reader.raw_reads = _PIECES
        # (they were this tap's: no reference cycle outlives the request)
        reader.parse_framing = _ignore_bytes
        reader.framing_failed = _ignore_failure
        reader.body_ended = _nothing
        # The body's parser calls this tap and its reader back, and the tap holds it:
        # let it go, so that the request's objects are freed by reference counting
        # when it ends, not left (its reply included) for a full collection.
        self.feed_parser = _ignore_bytes


def _ignore_failure(exc: Exception) -> None:
    """A `_BodyReader`'s `framing_failed` when no `_Tap` gave it one."""


def _nothing() -> None:
    """A `_BodyReader`'s `body_ended` when no `_Tap` gave it one."""


def _ignore_bytes(data: bytes) -> None:
    """What a connection whose body was given up reads, until it is closed."""


class _ModelEntry(msgspec.Struct, gc=False):
    id: str


class _ModelListing(msgspec.Struct, gc=False):
    data: list[_ModelEntry]


_listing_decoder = msgspec.json.Decoder(_ModelListing)



def _forget_frames(error: BaseException) -> None:
    """Drop the tracebacks of a transport error and of the errors it chains. aiohttp's
    reader of a body cut off mid-reply keeps the error, and the error's traceback keeps
    the frames that were reading it, the reader included: a cycle that would hold the
    request's objects (its reply so far) until a full collection. The message is made
    from the error itself, never from its traceback."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        current.__traceback__ = None
        pending += [current.__cause__, current.__context__]


class ChatClient:
    """One aiohttp session talking to one OpenAI-compatible server.

    Use as `async with ChatClient(url) as client:`; requests from many tasks share the
    session's connection pool (at most `max_connections` open at once; more queue).

    Every bound has a default a user never has to think about (the constants above):
    `request_timeout` bounds each whole request, the wait for the first byte included
    (a server that queues requests legitimately sends nothing while one waits);
    `stall_timeout` fails a reply that, once its first byte came, completes no line
    (header line, then SSE line) for that long, so a slowloris trickling bytes is
    stalled too, in its status line as in its body; `max_reply_bytes`
    and `max_chunks_per_token` cut off a server that streams far more than was asked
    for, keeping evidence (the first 4 KiB, the length and the SHA-256), never the
    flood; HTTP 429 is retried as its Retry-After asks while the waits of one request
    stay within `retry_429_max_wait` seconds. A retry is that request's own business:
    a burst fired together is not held back for it. None turns a bound off.
    """

    def __init__(self, base_url: str, *, api_key: str | None = None,
                 request_timeout: float = 300.0, connect_timeout: float = 10.0,
                 max_connections: int = 1024,
                 stall_timeout: float | None = DEFAULT_STALL_TIMEOUT,
                 max_reply_bytes: int | None = DEFAULT_MAX_REPLY_BYTES,
                 max_chunks_per_token: float | None = DEFAULT_CHUNKS_PER_TOKEN,
                 retry_429_max_wait: float = DEFAULT_RETRY_429_MAX_WAIT) -> None:
        self.base_url = normalise_base_url(base_url)
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.stall_timeout = stall_timeout
        self.max_connections = max_connections
        self.max_reply_bytes = max_reply_bytes
        self.max_chunks_per_token = max_chunks_per_token
        self.retry_429_max_wait = retry_429_max_wait
        self._chat_url = f"{self.base_url}/v1/chat/completions"
        self._models_url = f"{self.base_url}/v1/models"
        auth = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # Uncompressed bodies: the byte cap then counts what the server sent, and a
        # server cannot hand us a compression bomb (aiohttp would still inflate a
        # compressed body a server sends anyway, in bounded steps the cap counts).
        self._stream_headers = {"Content-Type": "application/json",
                                "Accept": "text/event-stream",
                                "Accept-Encoding": "identity", **auth}
        self._json_headers = {"Content-Type": "application/json",
                              "Accept": "application/json",
                              "Accept-Encoding": "identity", **auth}
        self._session: aiohttp.ClientSession | None = None
        self._fresh_session: aiohttp.ClientSession | None = None

    def __repr__(self) -> str:  # never shows the API key
        return f"ChatClient({self.base_url!r})"

    async def __aenter__(self) -> ChatClient:
        connector = _WatchingConnector(limit=self.max_connections, limit_per_host=0)
        timeout = aiohttp.ClientTimeout(total=self.request_timeout,
                                        sock_connect=self.connect_timeout)
        self._session = aiohttp.ClientSession(connector=connector, timeout=timeout,
                                              request_class=_TimedRequest)
        # Retries after a stale pooled connection go here: always a new connection.
        self._fresh_session = aiohttp.ClientSession(
            connector=_WatchingConnector(limit=self.max_connections, force_close=True),
            timeout=timeout, request_class=_TimedRequest)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        for session in (self._session, self._fresh_session):
            if session is not None:
                await session.close()
        self._session = self._fresh_session = None

    def _require_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("use ChatClient inside `async with ChatClient(url) as client:`")
        return self._session

    async def _pause_or_reason(self, overload: _Overloaded, waited: float,
                               retries: int) -> float | str:
        """Sleep as the 429 asks and return the pause, or return why not to retry."""
        pause = overload_pause(overload.retry_after, waited=waited, retries=retries,
                               bound=self.retry_429_max_wait, now_epoch=time.time())
        if isinstance(pause, float):
            await asyncio.sleep(pause)
        return pause

    async def _retrying_overload(self, attempt: Callable[[], Awaitable[_Result]],
                                 failure: Callable[[str, str], Exception]) -> _Result:
        """Run `attempt`, retrying HTTP 429 within the Retry-After bound; past it, raise
        `failure(reason, server_detail)`."""
        waited, retries = 0.0, 0
        while True:
            try:
                return await attempt()
            except _Overloaded as overload:
                pause = await self._pause_or_reason(overload, waited, retries)
                if isinstance(pause, str):
                    raise failure(pause, overload.detail) from None
                waited += pause
                retries += 1

    # --- reachability ---

    async def list_models(self, timeout: float = 10.0) -> list[str]:
        """Model ids from `GET {base}/v1/models`; TargetUnreachable unless 200 in time.

        HTTP 429 is retried within `retry_429_max_wait`; any body that is not a model
        list (too large, nested too deeply, not JSON, a wrong shape) is one line."""
        return await self._retrying_overload(
            lambda: self._list_models_once(timeout),
            lambda reason, detail: TargetUnreachable(
                f"{reason} from GET {self._models_url}: {detail}"))

    async def _list_models_once(self, timeout: float) -> list[str]:
        session = self._require_session()
        url = self._models_url
        try:
            async with session.get(
                url, headers=self._json_headers,
                timeout=aiohttp.ClientTimeout(total=timeout,
                                              sock_connect=min(timeout, self.connect_timeout)),
            ) as response:
                if response.status == 200:
                    # Listings can be large (routers, hubs), but not without end.
                    body = await _read_capped(response, MODELS_BODY_LIMIT + 1)
                else:
                    body = await _read_capped(response)
                    detail = _error_text_from_body(body) or (response.reason or "")
                    if response.status == 429:
                        raise _Overloaded(response.headers.get("Retry-After"), detail)
                    raise TargetUnreachable(
                        f"GET {url} answered HTTP {response.status}: {detail}"
                        f"{_status_hint(response.status)}")
        except (TargetUnreachable, _Overloaded):
            raise
        except asyncio.CancelledError:
            raise
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise TargetUnreachable(self._transport_error("GET", url, exc, timeout)) from None
        if len(body) > MODELS_BODY_LIMIT:
            raise TargetUnreachable(
                f"GET {url} answered 200 with a body over {size_text(MODELS_BODY_LIMIT)}: "
                "not a model list this client reads")
        try:
            listing = _listing_decoder.decode(body)
        except (msgspec.DecodeError, RecursionError) as exc:
            reason = ("nested too deeply" if isinstance(exc, RecursionError)
                      else f"{type(exc).__name__}: {exc}")
            raise TargetUnreachable(
                f"GET {url} answered 200 but not an OpenAI model list ({reason}): "
                f"{body[:_EXCERPT].decode('utf-8', 'surrogateescape')}") from None
        return [entry.id for entry in listing.data]

    async def open_connections(self, count: int, timeout: float = 10.0) -> int:
        """Open up to `count` pooled connections before a burst, so that firing the burst
        costs each request only its write, not a TCP connect: it is the connect that makes
        a single event loop slow to launch hundreds of requests at once. Each connection is
        opened by a `GET /v1/models` whose answer, whatever it is, is read and dropped.
        Returns how many connections answered; a failure only loses the head start."""
        session = self._require_session()

        async def one() -> bool:
            try:
                async with session.get(self._models_url, headers=self._json_headers,
                                       timeout=aiohttp.ClientTimeout(total=timeout)) as response:
                    await _read_capped(response, MODELS_BODY_LIMIT)
                    return True
            except asyncio.CancelledError:
                raise
            except (aiohttp.ClientError, TimeoutError, OSError):
                return False

        answered = await asyncio.gather(*(one() for _ in range(min(count, self.max_connections))))
        return sum(answered)

    # --- streamed chat ---

    async def stream_chat(self, body: dict[str, Any], *,
                          cancel_after_deltas: int | None = None) -> RequestOutcome:
        """POST the body (as given) and record the streamed reply; never raises for a
        request-level failure. With `cancel_after_deltas=k` the connection is closed
        after k content deltas and the outcome says so (`extra={"cancelled": True}`).
        After HTTP 429 the request is sent again as Retry-After asks, within
        `retry_429_max_wait`; the outcome then counts the retries and the wait
        (`extra["http_429_retries"]`, `extra["http_429_waited_s"]`)."""
        session = self._require_session()
        if cancel_after_deltas is not None and cancel_after_deltas < 1:
            raise ValueError(f"cancel_after_deltas must be at least 1, got {cancel_after_deltas}")
        payload = _encoder.encode(body)
        cap = chunk_cap(body, self.max_chunks_per_token)
        waited, retries = 0.0, 0
        while True:
            try:
                outcome = await self._stream_reconnecting(session, payload,
                                                          cancel_after_deltas, cap)
            except _Overloaded as overload:
                assert overload.outcome is not None
                pause = await self._pause_or_reason(overload, waited, retries)
                if isinstance(pause, str):
                    outcome = overload.outcome
                    return dataclasses.replace(
                        outcome, error=one_line_error(f"{pause}: {overload.detail}"),
                        extra={**outcome.extra, **_retry_note(retries, waited)})
                waited += pause
                retries += 1
                continue
            if retries:
                outcome = dataclasses.replace(
                    outcome, extra={**outcome.extra, **_retry_note(retries, waited)})
            return outcome

    async def stream_together(
            self, requests: Sequence[tuple[dict[str, Any], int | None]],
            on_each_done: Callable[[], None] | None = None) -> list[RequestOutcome]:
        """Stream every `(body, cancel_after_deltas)` request at once, as a rung fires
        them; the outcomes in the order given.

        Every request is built and given its connection (opened if the pool has none)
        before any is written; then all are released together, so the spread of their
        `sent_at` (launch skew) is only the writes, not the connects or the building.
        Each request is otherwise exactly `stream_chat` (its retries, bounds and
        outcome); `on_each_done` is called as each one ends."""
        launch = _Launch(min(len(requests), self.max_connections),
                         patience=self.connect_timeout + 1.0)

        async def one(body: dict[str, Any], cancel_after: int | None) -> RequestOutcome:
            ticket = _LaunchTicket(launch)
            _launch_ticket.set(ticket)  # this task's own context: its requests only
            try:
                return await self.stream_chat(body, cancel_after_deltas=cancel_after)
            finally:
                ticket.leave()
                if on_each_done is not None:
                    on_each_done()

        tasks = [asyncio.create_task(one(body, cancel_after)) for body, cancel_after in requests]
        try:
            return list(await asyncio.gather(*tasks))
        finally:
            launch.timer.cancel()

    async def _stream_reconnecting(self, session: aiohttp.ClientSession, payload: bytes,
                                   cancel_after_deltas: int | None,
                                   cap: tuple[int, int] | None) -> RequestOutcome:
        try:
            return await self._stream_once(session, payload, cancel_after_deltas, cap, True)
        except _StaleConnection:
            assert self._fresh_session is not None
            outcome = await self._stream_once(self._fresh_session, payload,
                                              cancel_after_deltas, cap, False)
            return dataclasses.replace(outcome, extra={**outcome.extra, "reconnected": True})

    async def _stream_once(self, session: aiohttp.ClientSession, payload: bytes,
                           cancel_after_deltas: int | None, cap: tuple[int, int] | None,
                           may_retry: bool) -> RequestOutcome:
        state = _StreamState()
        watch: _StallWatch | None = None
        try:
            async with asyncio.timeout(None) as guard:
                if self.stall_timeout is not None:
                    watch = _StallWatch(self.stall_timeout, guard)
                body = _BodyReader(state, self.max_reply_bytes,
                                   None if cap is None else cap[0], cancel_after_deltas, watch)
                tap = _Tap(body, watch)
                sending = _Sending(tap, state)
                token = _sending.set(sending)
                try:
                    return await self._post_stream(session, payload, state, body, tap, cap)
                finally:
                    _sending.reset(token)
                    sending.end()
                    tap.stop()
                    if watch is not None:
                        watch.stop()
        except _StreamFailure as failure:
            return self._failed(state, state.status, str(failure))
        except _Overloaded:
            raise
        except asyncio.CancelledError:
            raise
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            _forget_frames(exc)
            status = state.status
            if watch is not None and watch.fired:
                where = (f"after {state.content_deltas} deltas" if watch.headers_in
                         else "in the response headers")
                return self._failed(
                    state, status,
                    f"POST {self._chat_url} stalled: no complete line for "
                    f"{self.stall_timeout:g} s {where} (stall timeout, --stall-timeout)")
            if may_retry and status is None and _is_stale_connection(exc):
                raise _StaleConnection() from None
            return self._failed(state, status,
                                self._transport_error("POST", self._chat_url, exc,
                                                      self.request_timeout, state))
        except Exception as exc:  # a surprise must not end a run of many requests
            return self._failed(state, state.status,
                                f"unexpected client error on POST {self._chat_url}: "
                                f"{type(exc).__name__}: {exc}")

    async def _post_stream(self, session: aiohttp.ClientSession, payload: bytes,
                           state: _StreamState, body: _BodyReader, tap: _Tap,
                           cap: tuple[int, int] | None) -> RequestOutcome:
        async with session.post(self._chat_url, data=payload,
                                headers=self._stream_headers) as response:
            if not tap.taken:
                tap.detach()  # aiohttp reads this body: the tap has nothing more to see
                state.first_byte_at = state.last_byte_at = now()
            # else the tap noted when the headers came (and maybe body pieces since)
            if body.watch is not None:
                body.watch.headers_arrived()
            status = state.status = response.status
            if status != 200:
                detail = _error_text_from_body(await _read_capped(response))
                state.last_byte_at = now()
                outcome = self._failed(
                    state, status,
                    f"HTTP {status} from POST {self._chat_url}: "
                    f"{detail or response.reason or 'no message'}{_status_hint(status)}")
                if status == 429:
                    raise _Overloaded(response.headers.get("Retry-After"),
                                      detail or response.reason or "no message", outcome)
                return outcome
            if response.content_type == "application/json":
                # Not a stream: a server that ignored stream=true, or an error object.
                detail = _error_text_from_body(await _read_capped(response))
                state.last_byte_at = now()
                return self._failed(
                    state, status,
                    "server answered application/json instead of an event stream "
                    f"(does it support stream=true?): {detail}")
            return await self._read_stream(response, state, status, body, tap, cap)

    async def _read_stream(self, response: aiohttp.ClientResponse, state: _StreamState,
                           status: int, body: _BodyReader, tap: _Tap,
                           cap: tuple[int, int] | None) -> RequestOutcome:
        """The body of a 200 event stream, within the byte, chunk and stall bounds."""
        await body.read(response)
        stop = body.stop
        if stop is _Stop.DONE:
            await body.drain(response, tap)
            return self._complete(state, status)
        if stop is _Stop.FAILED:
            raise body.error if body.error is not None else _StreamFailure("unknown error")
        if stop is _Stop.BYTE_CAP:
            response.close()
            assert self.max_reply_bytes is not None
            return self._failed(
                state, status,
                f"reply exceeded the {size_text(self.max_reply_bytes)} cap (--max-reply-bytes) "
                f"after {state.content_deltas:,} deltas; kept its first {len(body.head):,} "
                "bytes, length and SHA-256 as evidence", extra=body.evidence())
        if stop is _Stop.EVENT_CAP:
            response.close()
            assert cap is not None
            return self._failed(
                state, status,
                f"server streamed {body.events_seen:,} chunks for max_tokens {cap[1]:,} "
                f"(cap {cap[0]:,}: {self.max_chunks_per_token:g} per token + "
                f"{CHUNK_ALLOWANCE}, --max-chunks-per-token)", extra=body.evidence())
        if stop is _Stop.CANCELLED:
            response.close()
            return self._failed(state, status,
                                f"cancelled by client after {state.content_deltas} deltas",
                                extra={"cancelled": True})
        parser = body.parser  # the body ended
        ended_at = state.last_byte_at
        assert ended_at is not None  # set when the headers arrived
        for event in parser.finish():
            state.take(event, ended_at)
        if state.saw_done or state.finish_reason:
            return self._complete(state, status)
        cut = " (its last line was cut off)" if parser.has_partial_line else ""
        return self._failed(
            state, status,
            f"stream ended without [DONE] or finish_reason after "
            f"{state.content_deltas} deltas{cut}")

    @staticmethod
    def _complete(state: _StreamState, status: int) -> RequestOutcome:
        return RequestOutcome(timings=state.timings(), reply=state.reply(),
                              status=status)

    @staticmethod
    def _failed(state: _StreamState, status: int | None, message: str,
                extra: dict[str, Any] | None = None) -> RequestOutcome:
        return RequestOutcome(timings=state.timings(), error=one_line_error(message),
                              status=status, extra=extra or {})

    def _transport_error(self, method: str, url: str, exc: BaseException, total: float,
                         state: _StreamState | None = None) -> str:
        progress = "" if state is None else f" after {state.content_deltas} deltas"
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            return (f"{method} {url} failed: no connection within {self.connect_timeout:g} s"
                    " — is the host reachable?")
        if isinstance(exc, TimeoutError):
            quiet = ""
            if state is not None and state.last_byte_at is not None:
                quiet = f"; last byte {now() - state.last_byte_at:.1f} s before"
            which = "" if state is None else " (request timeout)"
            return f"{method} {url} timed out after {total:g} s{which}{progress}{quiet}"
        if isinstance(exc, aiohttp.ClientConnectorError):
            cause = exc.os_error
            if isinstance(cause, ConnectionRefusedError):
                return f"{method} {url} failed: connection refused — is the server running?"
            return f"{method} {url} failed: cannot connect ({cause.strerror or cause})"
        if isinstance(exc, aiohttp.ServerDisconnectedError):
            return f"{method} {url} failed: the server closed the connection{progress}"
        if isinstance(exc, aiohttp.ClientPayloadError):
            return (f"{method} {url}: the server closed the connection mid-reply{progress}"
                    f" (did it crash?): {exc}")
        return f"{method} {url} failed{progress}: {type(exc).__name__}: {exc}"

    # --- non-streamed chat (the arms suite's agent loop) ---

    async def complete_chat(self, body: dict[str, Any]) -> ChatCompletion:
        """POST the body (as given, not streamed); TargetError on any failure. HTTP 429
        is retried as for `stream_chat`; a body over `max_reply_bytes` is a failure."""
        return await self._retrying_overload(
            lambda: self._complete_once(body),
            lambda reason, detail: TargetError(f"{reason} from POST {self._chat_url}: {detail}"))

    async def _complete_once(self, body: dict[str, Any]) -> ChatCompletion:
        session = self._require_session()
        payload = _encoder.encode(body)
        url = self._chat_url
        limit = self.max_reply_bytes
        retry_after: str | None = None
        for attempt_session in (session, self._fresh_session):
            assert attempt_session is not None
            status: int | None = None
            try:
                async with attempt_session.post(url, data=payload,
                                                headers=self._json_headers) as response:
                    status = response.status
                    retry_after = response.headers.get("Retry-After")
                    if status != 200:
                        raw = await _read_capped(response)
                    elif limit is None:
                        raw = await response.read()
                    else:
                        raw = await _read_capped(response, limit + 1)
                break
            except asyncio.CancelledError:
                raise
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                _forget_frames(exc)
                if (attempt_session is session and status is None
                        and _is_stale_connection(exc)):
                    continue
                raise TargetError(self._transport_error("POST", url, exc,
                                                        self.request_timeout)) from None
        assert status is not None  # each attempt breaks with a status, retries or raises
        if status != 200:
            detail = _error_text_from_body(raw[:_ERROR_BODY_LIMIT])
            if status == 429:
                raise _Overloaded(retry_after, detail or "no message")
            raise TargetError(f"HTTP {status} from POST {url}: {detail or 'no message'}"
                              f"{_status_hint(status)}")
        if limit is not None and len(raw) > limit:
            raise TargetError(f"POST {url}: reply exceeded the {size_text(limit)} cap "
                              "(--max-reply-bytes)")
        try:
            document = _any_decoder.decode(raw)
        except (msgspec.DecodeError, RecursionError) as exc:
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            raise TargetError(f"POST {url} answered invalid JSON ({reason}): "
                              f"{raw[:_EXCERPT].decode('utf-8', 'surrogateescape')}") from None
        return _completion_from(document, url)


def _retry_note(retries: int, waited: float) -> dict[str, Any]:
    return {"http_429_retries": retries, "http_429_waited_s": round(waited, 3)}


def _evidence(received: int, hasher: Any, head: bytearray) -> dict[str, Any]:
    """What an error outcome keeps of a body it cut off: the first bytes (as text,
    invalid UTF-8 kept exactly), how many bytes came and their SHA-256."""
    return {"evidence": {"received_bytes": received, "sha256": hasher.hexdigest(),
                         "excerpt": bytes(head).decode("utf-8", "surrogateescape")}}


def _completion_from(document: Any, url: str) -> ChatCompletion:
    if not isinstance(document, dict):
        raise TargetError(f"POST {url} answered JSON that is not an object")
    if document.get("error"):
        raise TargetError(f"server error from POST {url}: {_error_text(document)}")
    choices = document.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise TargetError(f"POST {url} answered no choices: "
                          f"{_encoder.encode(document)[:_EXCERPT].decode('utf-8', 'replace')}")
    choice = choices[0]
    given_message = choice.get("message")
    message: dict[str, Any] = given_message if isinstance(given_message, dict) else {}
    content = message.get("content")
    if isinstance(content, list):  # content parts
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    calls = []
    for call in message.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        given_function = call.get("function")
        function: dict[str, Any] = given_function if isinstance(given_function, dict) else {}
        calls.append(ToolCall(name=str(function.get("name") or ""),
                              arguments=_arguments_text(function.get("arguments")),
                              id=call.get("id")))
    given_usage = document.get("usage")
    usage: dict[str, Any] = given_usage if isinstance(given_usage, dict) else {}
    prompt_details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    return ChatCompletion(
        content=content if isinstance(content, str) else None,
        reasoning=reasoning if isinstance(reasoning, str) else None,
        tool_calls=tuple(calls),
        finish_reason=choice.get("finish_reason"),
        usage=Usage(
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            cached_prompt_tokens=(prompt_details.get("cached_tokens")
                                  if isinstance(prompt_details, dict) else None),
            reasoning_tokens=(completion_details.get("reasoning_tokens")
                              if isinstance(completion_details, dict) else None),
        ),
        raw=document,
    )
