"""Fault servers for divergence classification, `--bisect` and `--repro` (fakes: a real
engine cannot flip a chosen token by a chosen margin, or start diverging at a chosen
concurrency, on demand).

- `LogprobServer(behaviour, flip_margin=...)`: `FakeOpenAIServer` replies (same
  behaviours) with token logprobs when the request asks for them: every content delta
  is one token. The token at the `drift` position (body word 8) always has the runner-up
  "different " `flip_margin` nats below the chosen token, so a drift there is a near tie
  when the margin is small and substantive when it is large; every other token's
  runner-up is 4 nats below, and a leaked canary is never among the candidates.
  `refuse_logprobs=True` answers HTTP 400 to any request carrying `logprobs`, as a
  server that rejects unknown fields does.
- `ThresholdServer(diverge_at)`: changes word 8 of every reply served while at least
  `diverge_at` chat requests are active together (and only then).
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from tests.fakes.openai_server import FakeOpenAIServer, reply_words

_CANARY = re.compile(r"\b[A-Z]{2}-[A-Z]+-[A-Z]+-\d{2}\b")
DRIFT_INDEX = 9  # the delta of body word 8 (after the canary line)
RUNNER_UP = "different "
CHOSEN_LOGPROB = -0.4


def solo_deltas(prompt: str, words: int) -> list[str]:
    """The deltas of the reply to `prompt` when nothing interferes."""
    match = _CANARY.search(prompt)
    canary = match.group(0) if match else "NO-CANARY"
    return [canary + "\n"] + [word + " " for word in reply_words(prompt, words)] + ["\n" + canary]


def _entry(token: str, logprob: float, top: list[tuple[str, float]]) -> dict[str, Any]:
    return {"token": token, "bytes": list(token.encode()), "logprob": logprob,
            "top_logprobs": [{"token": t, "bytes": list(t.encode()), "logprob": lp}
                             for t, lp in top]}


class LogprobServer(FakeOpenAIServer):
    def __init__(self, behaviour: str = "clean", *, flip_margin: float = 0.2,
                 refuse_logprobs: bool = False, **options: Any) -> None:
        super().__init__(behaviour, **options)
        self.flip_margin = flip_margin
        self.refuse_logprobs = refuse_logprobs
        self.refused = 0

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if self.refuse_logprobs and "logprobs" in body:
            self.refused += 1
            return web.json_response({"error": {"message": "unknown field: logprobs",
                                                 "type": "invalid_request_error"}}, status=400)
        return await super()._chat(request)

    def logprobs(self, index: int, token: str, solo: str) -> dict[str, Any]:
        """The logprob entry of delta `index` (`token` sent, `solo` what a lone request
        gets there)."""
        if index == DRIFT_INDEX and token in (solo, RUNNER_UP):
            ranked = [(solo, CHOSEN_LOGPROB), (RUNNER_UP, CHOSEN_LOGPROB - self.flip_margin)]
            if token == RUNNER_UP:  # the batched run saw the two the other way round
                ranked = [(RUNNER_UP, CHOSEN_LOGPROB), (solo, CHOSEN_LOGPROB - 0.01)]
            return _entry(token, ranked[0][1], ranked + [("zzz ", -6.0)])
        if token == solo:
            return _entry(token, -0.05, [(token, -0.05), ("qqq ", -4.05), ("zzz ", -6.0)])
        # something no lone request would say (a leaked canary): the reference never
        # listed it, so its margin is only bounded
        return _entry(token, -0.1, [(token, -0.1), (solo, -3.0)])

    def choice_fields(self, body: dict[str, Any], index: int, text: str) -> dict[str, Any]:
        if not body.get("logprobs"):
            return {}
        solo = solo_deltas(str(body["messages"][-1]["content"]), self.words)
        expected = solo[index] if index < len(solo) else text
        return {"logprobs": {"content": [self.logprobs(index, text, expected)]}}


class ThresholdServer(FakeOpenAIServer):
    def __init__(self, diverge_at: int, **options: Any) -> None:
        super().__init__("clean", **options)
        self.diverge_at = diverge_at
        self.diverged_replies = 0

    async def _stream(self, request: web.Request, body: dict[str, Any], deltas: list[str],
                      concurrent: bool) -> web.StreamResponse:
        if len(self._state.active) >= self.diverge_at:
            deltas = list(deltas)
            deltas[DRIFT_INDEX] = RUNNER_UP
            self.diverged_replies += 1
        return await super()._stream(request, body, deltas, concurrent)
