"""In-memory outcomes for the contamination scoring tests."""

from __future__ import annotations

from benchwarden.targets.replies import Reply, RequestOutcome, Timings, ToolCall

CANARIES = ("XK-AZURE-HERON-41", "QJ-CRIMSON-OTTER-77", "BM-JADE-LYNX-23")


def reply_text(probe: int, words: int = 20) -> str:
    canary = CANARIES[probe]
    return f"{canary}\n" + " ".join(f"w{probe}x{i}" for i in range(words)) + f"\n{canary}"


def ok(text: str, *, tokens: int = 32, reasoning: str = "", finish: str | None = "stop",
       tools: tuple[ToolCall, ...] = (), start: float = 0.0, end: float = 1.0) -> RequestOutcome:
    reply = Reply(reasoning=reasoning, text=text, tool_calls=tools, finish_reason=finish,
                  completion_tokens=tokens, usage_reported=True)
    return RequestOutcome(Timings(sent_at=start, first_byte_at=start, first_content_at=start,
                                  last_byte_at=end), reply=reply)


def failed(message: str = "connection refused", at: float = 0.0) -> RequestOutcome:
    return RequestOutcome(Timings(sent_at=at), error=message)


def good(probe: int, **kwargs) -> RequestOutcome:
    return ok(reply_text(probe), **kwargs)
