"""The OpenAI-compatible chat client every suite talks to a server through.

Built on aiohttp (one `ClientSession` per `ChatClient`, bodies read incrementally) and
msgspec (chunks decoded straight into typed structs): under hundreds of concurrent
streams this spends 15 to 55 times less client CPU per token than the `openai` SDK
(docs/decisions/0002-http-client.md, bench/client_overhead.py).

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

The base URL may be given with or without a trailing `/v1` (and trailing slashes): it
is normalised to the part before `/v1`, and requests go to `{base}/v1/...`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import time
from typing import Any

import aiohttp
import msgspec

from benchwarden.core.verdicts import one_line
from benchwarden.targets.replies import (
    ERROR_LIMIT,
    ChatCompletion,
    Reply,
    RequestOutcome,
    Timings,
    ToolCall,
    Usage,
    escape_invalid_utf8,
)
from benchwarden.targets.sse import SSEEvent, SSEParser

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


def now() -> float:
    """Seconds since the epoch, advanced by `time.perf_counter` (the client clock)."""
    return _EPOCH_AT_IMPORT + (time.perf_counter() - _PERF_AT_IMPORT)


def one_line_error(text: str) -> str:
    """Squash whitespace (newlines included) to single spaces; cut to 300 characters;
    bytes that were not valid UTF-8 shown as `\\xNN` (so the line is valid text)."""
    return one_line(escape_invalid_utf8(text), ERROR_LIMIT) or "unknown error"


class TargetUnreachable(Exception):
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


class _Choice(msgspec.Struct, gc=False):
    index: int | None = 0
    delta: _Delta | None = None
    finish_reason: str | None = None


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
                 "counted_deltas", "content_deltas", "frames", "saw_done",
                 "first_byte_at", "first_content_at", "last_byte_at")

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
        self.first_byte_at: float | None = None
        self.first_content_at: float | None = None
        self.last_byte_at: float | None = None

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
        self.frames += 1
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

    def timings(self, sent_at: float) -> Timings:
        return Timings(sent_at, self.first_byte_at, self.first_content_at, self.last_byte_at)

    def reply(self) -> Reply:
        usage = self.usage
        reported = usage is not None and usage.completion_tokens is not None
        return Reply(
            reasoning="".join(self.reasoning),
            text="".join(self.text),
            tool_calls=tuple(
                ToolCall(name=call.name or "", arguments="".join(call.arguments), id=call.id)
                for call in self.calls),
            finish_reason=self.finish_reason,
            completion_tokens=usage.completion_tokens if reported else self.counted_deltas,
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
        )


async def _read_capped(response: aiohttp.ClientResponse) -> bytes:
    """The body, or its first 64 KiB when a server sends an unbounded one."""
    parts: list[bytes] = []
    size = 0
    async for piece in response.content.iter_any():
        parts.append(piece)
        size += len(piece)
        if size >= _ERROR_BODY_LIMIT:
            break
    return b"".join(parts)[:_ERROR_BODY_LIMIT]


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


class ChatClient:
    """One aiohttp session talking to one OpenAI-compatible server.

    Use as `async with ChatClient(url) as client:`; requests from many tasks share the
    session's connection pool (at most `max_connections` open at once; more queue).
    `request_timeout` bounds each whole request; `stall_timeout`, when set, fails a
    request whose server sends no byte for that long (by default only the whole
    request is bounded, because a server that queues requests sends nothing while a
    request waits for a slot).
    """

    def __init__(self, base_url: str, *, api_key: str | None = None,
                 request_timeout: float = 300.0, connect_timeout: float = 10.0,
                 max_connections: int = 1024, stall_timeout: float | None = None) -> None:
        self.base_url = normalise_base_url(base_url)
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.stall_timeout = stall_timeout
        self.max_connections = max_connections
        self._chat_url = f"{self.base_url}/v1/chat/completions"
        self._models_url = f"{self.base_url}/v1/models"
        auth = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._stream_headers = {"Content-Type": "application/json",
                                "Accept": "text/event-stream", **auth}
        self._json_headers = {"Content-Type": "application/json",
                              "Accept": "application/json", **auth}
        self._session: aiohttp.ClientSession | None = None
        self._fresh_session: aiohttp.ClientSession | None = None

    def __repr__(self) -> str:  # never shows the API key
        return f"ChatClient({self.base_url!r})"

    async def __aenter__(self) -> "ChatClient":
        connector = aiohttp.TCPConnector(limit=self.max_connections, limit_per_host=0)
        timeout = aiohttp.ClientTimeout(total=self.request_timeout,
                                        sock_connect=self.connect_timeout,
                                        sock_read=self.stall_timeout)
        self._session = aiohttp.ClientSession(connector=connector, timeout=timeout)
        # Retries after a stale pooled connection go here: always a new connection.
        self._fresh_session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self.max_connections, force_close=True),
            timeout=timeout)
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

    # --- reachability ---

    async def list_models(self, timeout: float = 10.0) -> list[str]:
        """Model ids from `GET {base}/v1/models`; TargetUnreachable unless 200 in time."""
        session = self._require_session()
        url = self._models_url
        try:
            async with session.get(
                url, headers=self._json_headers,
                timeout=aiohttp.ClientTimeout(total=timeout,
                                              sock_connect=min(timeout, self.connect_timeout)),
            ) as response:
                if response.status == 200:
                    body = await response.read()  # listings can be large (routers, hubs)
                else:
                    body = await _read_capped(response)
                    detail = _error_text_from_body(body) or (response.reason or "")
                    raise TargetUnreachable(
                        f"GET {url} answered HTTP {response.status}: {detail}"
                        f"{_status_hint(response.status)}")
        except TargetUnreachable:
            raise
        except asyncio.CancelledError:
            raise
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise TargetUnreachable(self._transport_error("GET", url, exc, timeout)) from None
        try:
            listing = _any_decoder.decode(body)
            return [str(entry["id"]) for entry in listing["data"]]
        except (msgspec.DecodeError, KeyError, TypeError) as exc:
            raise TargetUnreachable(
                f"GET {url} answered 200 but not an OpenAI model list "
                f"({type(exc).__name__}: {exc}): {body[:_EXCERPT].decode('utf-8', 'replace')}"
            ) from None

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
                    await response.read()
                    return True
            except asyncio.CancelledError:
                raise
            except (aiohttp.ClientError, TimeoutError, OSError):
                return False

        answered = await asyncio.gather(*(one() for _ in range(min(count, self.max_connections))))
        return sum(answered)

    # --- streamed chat ---

    async def stream_chat(self, body: dict, *,
                          cancel_after_deltas: int | None = None) -> RequestOutcome:
        """POST the body (as given) and record the streamed reply; never raises for a
        request-level failure. With `cancel_after_deltas=k` the connection is closed
        after k content deltas and the outcome says so (`extra={"cancelled": True}`)."""
        session = self._require_session()
        if cancel_after_deltas is not None and cancel_after_deltas < 1:
            raise ValueError(f"cancel_after_deltas must be at least 1, got {cancel_after_deltas}")
        payload = _encoder.encode(body)
        try:
            return await self._stream_once(session, payload, cancel_after_deltas, True)
        except _StaleConnection:
            assert self._fresh_session is not None
            outcome = await self._stream_once(self._fresh_session, payload,
                                              cancel_after_deltas, False)
            return dataclasses.replace(outcome, extra={**outcome.extra, "reconnected": True})

    async def _stream_once(self, session: aiohttp.ClientSession, payload: bytes,
                           cancel_after_deltas: int | None,
                           may_retry: bool) -> RequestOutcome:
        state = _StreamState()
        status: int | None = None
        sent_at = now()
        try:
            async with session.post(self._chat_url, data=payload,
                                    headers=self._stream_headers) as response:
                state.first_byte_at = state.last_byte_at = now()
                status = response.status
                if status != 200:
                    detail = _error_text_from_body(await _read_capped(response))
                    state.last_byte_at = now()
                    return self._failed(
                        state, sent_at, status,
                        f"HTTP {status} from POST {self._chat_url}: "
                        f"{detail or response.reason or 'no message'}{_status_hint(status)}")
                if response.content_type == "application/json":
                    # Not a stream: a server that ignored stream=true, or an error object.
                    detail = _error_text_from_body(await _read_capped(response))
                    state.last_byte_at = now()
                    return self._failed(
                        state, sent_at, status,
                        "server answered application/json instead of an event stream "
                        f"(does it support stream=true?): {detail}")
                parser = SSEParser()
                take = state.take
                async for piece in response.content.iter_any():
                    read_at = state.last_byte_at = now()
                    for event in parser.feed(piece):
                        take(event, read_at)
                        if state.saw_done:
                            await _drain_after_done(response)
                            return self._complete(state, sent_at, status)
                        if (cancel_after_deltas is not None
                                and state.content_deltas >= cancel_after_deltas):
                            response.close()
                            return self._failed(
                                state, sent_at, status,
                                f"cancelled by client after {state.content_deltas} deltas",
                                extra={"cancelled": True})
                for event in parser.finish():
                    take(event, state.last_byte_at)
                if state.saw_done or state.finish_reason:
                    return self._complete(state, sent_at, status)
                cut = " (its last line was cut off)" if parser.has_partial_line else ""
                return self._failed(
                    state, sent_at, status,
                    f"stream ended without [DONE] or finish_reason after "
                    f"{state.content_deltas} deltas{cut}")
        except _StreamFailure as failure:
            return self._failed(state, sent_at, status, str(failure))
        except asyncio.CancelledError:
            raise
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            if may_retry and status is None and _is_stale_connection(exc):
                raise _StaleConnection() from None
            return self._failed(state, sent_at, status,
                                self._transport_error("POST", self._chat_url, exc,
                                                      self.request_timeout, state))
        except Exception as exc:  # a surprise must not end a run of many requests
            return self._failed(state, sent_at, status,
                                f"unexpected client error on POST {self._chat_url}: "
                                f"{type(exc).__name__}: {exc}")

    @staticmethod
    def _complete(state: _StreamState, sent_at: float, status: int) -> RequestOutcome:
        return RequestOutcome(timings=state.timings(sent_at), reply=state.reply(),
                              status=status)

    @staticmethod
    def _failed(state: _StreamState, sent_at: float, status: int | None, message: str,
                extra: dict[str, Any] | None = None) -> RequestOutcome:
        return RequestOutcome(timings=state.timings(sent_at), error=one_line_error(message),
                              status=status, extra=extra or {})

    def _transport_error(self, method: str, url: str, exc: BaseException, total: float,
                         state: _StreamState | None = None) -> str:
        progress = "" if state is None else f" after {state.content_deltas} deltas"
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            return (f"{method} {url} failed: no connection within {self.connect_timeout:g} s"
                    " — is the host reachable?")
        if isinstance(exc, aiohttp.SocketTimeoutError):
            return (f"{method} {url} stalled: no byte for {self.stall_timeout:g} s"
                    f"{progress} (stall_timeout)")
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

    async def complete_chat(self, body: dict) -> ChatCompletion:
        """POST the body (as given, not streamed); TargetError on any failure."""
        session = self._require_session()
        payload = _encoder.encode(body)
        url = self._chat_url
        for attempt_session in (session, self._fresh_session):
            assert attempt_session is not None
            status: int | None = None
            try:
                async with attempt_session.post(url, data=payload,
                                                headers=self._json_headers) as response:
                    status = response.status
                    raw = await response.read()
                break
            except asyncio.CancelledError:
                raise
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                if (attempt_session is session and status is None
                        and _is_stale_connection(exc)):
                    continue
                raise TargetError(self._transport_error("POST", url, exc,
                                                        self.request_timeout)) from None
        if status != 200:
            detail = _error_text_from_body(raw[:_ERROR_BODY_LIMIT])
            raise TargetError(f"HTTP {status} from POST {url}: {detail or 'no message'}"
                              f"{_status_hint(status)}")
        try:
            document = _any_decoder.decode(raw)
        except msgspec.DecodeError as exc:
            raise TargetError(f"POST {url} answered invalid JSON ({exc}): "
                              f"{raw[:_EXCERPT].decode('utf-8', 'replace')}") from None
        return _completion_from(document, url)


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
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    content = message.get("content")
    if isinstance(content, list):  # content parts
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    calls = []
    for call in message.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        calls.append(ToolCall(name=str(function.get("name") or ""),
                              arguments=_arguments_text(function.get("arguments")),
                              id=call.get("id")))
    usage = document.get("usage") if isinstance(document.get("usage"), dict) else {}
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
