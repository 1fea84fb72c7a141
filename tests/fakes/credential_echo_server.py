"""`CredentialEchoServer`: a fault-injecting server that repeats the caller's credentials.

A careless or hostile server echoes what it was sent: this one puts the Authorization
header it received (and its base64 and URL-encoded forms) into a 401 error body for
every third chat request, into the reply text of the others, and into the message of a
401 on `/v1/models` when `models_401` is set. A real engine never does this on demand,
hence a fake (see tests/fakes/openai_server.py for the protocol it shares).
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import quote

from aiohttp import web

from tests.fakes.openai_server import FakeOpenAIServer


def echoes(authorization: str) -> str:
    """The header as received, base64-encoded and URL-encoded, in one line."""
    encoded = base64.b64encode(authorization.encode()).decode()
    return f"{authorization} | b64 {encoded} | url {quote(authorization, safe='')}"


class CredentialEchoServer(FakeOpenAIServer):
    def __init__(self, *, models_401: bool = False, **options: Any) -> None:
        super().__init__("clean", **options)
        self.models_401 = models_401

    async def _models(self, request: web.Request) -> web.Response:
        if self.models_401:
            echoed = echoes(request.headers.get("Authorization", ""))
            return web.json_response({"error": {"message": "invalid credentials: " + echoed}},
                                     status=401)
        return await super()._models(request)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        if self.chat_requests % 3 == 2:
            await request.read()
            self.chat_requests += 1
            return web.json_response(
                {"error": {"message": "invalid key: "
                           + echoes(request.headers.get("Authorization", "")),
                           "type": "authentication_error"}}, status=401)
        return await super()._chat(request)

    async def _stream(self, request: web.Request, body: dict[str, Any], deltas: list[str],
                      concurrent: bool) -> web.StreamResponse:
        echoed = f"you sent {echoes(request.headers.get('Authorization', ''))} "
        return await super()._stream(request, body, [echoed, *deltas], concurrent)
