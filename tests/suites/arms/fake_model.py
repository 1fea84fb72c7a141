"""`FakeToolCallingModel`: a scripted OpenAI-compatible model that drives the tracker.

It serves non-streamed `POST /v1/chat/completions` (and `GET /v1/models`) from a
background thread on a loopback port. The behaviour is chosen by the request's
`model` name, so one server serves every scenario of a test:

- `solve`: issues a correct tool-call solution for the task and arm (the arm is read
  from the tools offered and the bootstrap prompt), then answers read tasks from the
  tool output it got back, so a pass proves the tool really ran;
- `wrong`: acts on the wrong issue (close #3 instead of #2), then reports success;
- `loop`: lists issues forever (the turn cap must stop it);
- `stall`: never answers within any short wall clock;
- `forbidden`: tries an interpreter, a foreign network tool and a piped shell, then
  gives up without doing the task;
- `http500`: every chat request fails with HTTP 500;
- `script:NAME`: runs the shell commands a test put in `scripts[NAME]`, one per turn,
  then answers "Done." (the escape tests script hostile agents with it);
- `calls:NAME`: makes the tool calls a test put in `call_scripts[NAME]` (one list of
  `(tool, arguments)` per turn), then answers "Done." (MCP and function arms).

The `mcp` arm is told from the `tools` arm by its bootstrap (the tool names are the
same); its solutions are the `tools` arm's calls.

Usage is reported like a server with a prefix cache: `prompt_tokens` is the length of
the request's messages in characters / 4, `cached_tokens` the previous request's
prompt tokens in the same conversation, `completion_tokens` fixed at 7. Every usage
object sent is kept in `usage_log` so tests can check the driver's sums.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from aiohttp import web

COMPLETION_TOKENS = 7
# the model names it answers to (besides `script:NAME` for each script a test adds)
SCENARIOS = ("solve", "wrong", "loop", "stall", "forbidden", "http500")

SOLUTIONS: dict[str, dict[str, list[list[tuple[str, dict[str, Any]]]]]] = {
    # task -> arm -> turns -> calls in that turn
    "close-issue": {
        "cli": [[("shell", {"command": "tracker issue close 2"})]],
        "http": [[("shell", {"command": "curl -s -X PATCH \"$TRACKER_URL/issues/2\" "
                                        "-H 'Content-Type: application/json' "
                                        "-d '{\"state\": \"closed\"}'"})]],
        "tools": [[("close_issue", {"number": 2})]],
    },
    "open-issue-count": {
        "cli": [[("shell", {"command": "tracker issue list --state open | wc -l"})]],
        "http": [[("shell", {"command":
                             "curl -s \"$TRACKER_URL/issues?state=open\" | jq length"})]],
        "tools": [[("list_issues", {"state": "open"})]],
    },
    "triage-slow-search": {
        "cli": [[("shell", {"command": "tracker issue list --state all | grep -i search"})],
                [("shell", {"command": "tracker issue label 5 --add enhancement && "
                                       "tracker issue assign 5 @me && "
                                       "tracker issue comment 5 "
                                       "--body 'Triaged for the next release.'"})]],
        "http": [[("shell", {"command":
                             "curl -s \"$TRACKER_URL/issues?state=all\" | grep -i search"})],
                 [("shell", {"command":
                   "curl -s -X POST \"$TRACKER_URL/issues/5/labels\" "
                   "-d '{\"labels\": [\"enhancement\"]}' && "
                   "curl -s -X POST \"$TRACKER_URL/issues/5/assignees\" "
                   "-d '{\"assignees\": [\"@me\"]}' && "
                   "curl -s -X POST \"$TRACKER_URL/issues/5/comments\" "
                   "-d '{\"body\": \"Triaged for the next release.\"}'"})]],
        "tools": [[("list_issues", {"state": "all"})],
                  [("add_labels", {"number": 5, "labels": ["enhancement"]}),
                   ("assign", {"number": 5, "user": "agent"}),
                   ("comment", {"number": 5, "body": "Triaged for the next release."})]],
    },
}

WRONG = {
    "cli": [[("shell", {"command": "tracker issue close 3"})]],
    "http": [[("shell", {"command": "curl -s -X PATCH \"$TRACKER_URL/issues/3\" "
                                    "-d '{\"state\": \"closed\"}'"})]],
    "tools": [[("close_issue", {"number": 3})]],
}
LOOP = {
    "cli": ("shell", {"command": "tracker issue list"}),
    "http": ("shell", {"command": "curl -s \"$TRACKER_URL/issues\""}),
    "tools": ("list_issues", {}),
}


def forbidden_calls(marker: str) -> list[list[tuple[str, dict[str, Any]]]]:
    """Calls a cli agent must never get to run; `marker` is a file they would create."""
    return [[("shell", {"command": f"python3 -c \"open('{marker}', 'w').write('leak')\""})],
            [("shell", {"command": f"curl -s -o {marker} http://127.0.0.1:9/"})],
            [("shell", {"command": f"echo touch {marker} | sh"})],
            [("shell", {"command": f"/usr/bin/touch {marker}"})]]


for plans in (*SOLUTIONS.values(), WRONG, LOOP):
    plans["mcp"] = plans["tools"]  # type: ignore[index]


def arm_of(body: dict[str, Any]) -> str:
    names = [t["function"]["name"] for t in body.get("tools", [])]
    if names != ["shell"]:
        return "mcp" if "MCP server" in body["messages"][0]["content"] else "tools"
    system = body["messages"][0]["content"]
    return "http" if "curl" in system.split("Reach the tracker")[-1][:80] else "cli"


def task_of(body: dict[str, Any]) -> str:
    from benchwarden.suites.arms.tracker.tasks import TASKS

    intent = body["messages"][1]["content"]
    return next(task.id for task in TASKS if task.intent == intent)


class FakeToolCallingModel:
    def __init__(self, marker: str = "/nonexistent/marker") -> None:
        self.marker = marker
        self.scripts: dict[str, list[str]] = {}
        self.call_scripts: dict[str, list[list[tuple[str, dict[str, Any]]]]] = {}
        self.usage_log: list[dict[str, int]] = []
        self.requests: list[dict[str, Any]] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._runner: web.AppRunner | None = None
        self.port = 0
        self._closing = False

    # -- lifecycle ---------------------------------------------------------------
    def __enter__(self) -> FakeToolCallingModel:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("FakeToolCallingModel did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing = True
        async def stop() -> None:
            if self._runner is not None:
                await self._runner.cleanup()
        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/chat/completions", self._chat)
        self._runner = web.AppRunner(app)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._ready.set()
        self._loop.run_forever()

    # -- handlers ----------------------------------------------------------------
    async def _models(self, request: web.Request) -> web.Response:
        # every model name it serves, as a real server lists its models (`arms run`
        # refuses a --model the server does not list)
        names = [*SCENARIOS, *(f"script:{name}" for name in self.scripts),
                 *(f"calls:{name}" for name in self.call_scripts)]
        return web.json_response({"object": "list",
                                  "data": [{"id": name, "object": "model"} for name in names]})

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        scenario = body["model"]
        if scenario == "http500":
            return web.json_response({"error": {"message": "scripted failure"}}, status=500)
        if scenario == "stall":
            while not self._closing:  # until the test ends; no wall clock is that long
                await asyncio.sleep(0.05)
            return web.json_response({"error": {"message": "stalled"}}, status=503)
        messages = body["messages"]
        turn = sum(1 for m in messages if m["role"] == "assistant")
        arm = arm_of(body)
        task = task_of(body)
        calls: list[tuple[str, dict[str, Any]]] = []
        content = None
        if scenario == "solve":
            plan = SOLUTIONS[task][arm]
            if turn < len(plan):
                calls = plan[turn]
            else:
                content = self._answer(task, messages)
        elif scenario == "wrong":
            if turn < len(WRONG[arm]):
                calls = WRONG[arm][turn]
            else:
                content = "Done: I closed the issue."
        elif scenario.startswith("script:"):
            script = self.scripts[scenario.split(":", 1)[1]]
            if turn < len(script):
                calls = [("shell", {"command": script[turn]})]
            else:
                content = "Done."
        elif scenario.startswith("calls:"):
            turns = self.call_scripts[scenario.split(":", 1)[1]]
            if turn < len(turns):
                calls = turns[turn]
            else:
                content = "Done."
        elif scenario == "loop":
            calls = [LOOP[arm]]
        elif scenario == "forbidden":
            plan = forbidden_calls(self.marker)
            if turn < len(plan):
                calls = plan[turn]
            else:
                content = "I could not do it."
        else:
            return web.json_response({"error": {"message": f"unknown scenario {scenario}"}},
                                     status=400)
        prompt = len(json.dumps(messages)) // 4
        previous = len(json.dumps(messages[:-1])) // 4 if turn else 0
        usage = {"prompt_tokens": prompt, "completion_tokens": COMPLETION_TOKENS,
                 "total_tokens": prompt + COMPLETION_TOKENS,
                 "prompt_tokens_details": {"cached_tokens": min(previous, prompt)}}
        self.usage_log.append({"prompt": prompt, "cached": min(previous, prompt),
                               "completion": COMPLETION_TOKENS})
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = [
                {"id": f"call_{turn}_{i}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(arguments)}}
                for i, (name, arguments) in enumerate(calls)]
        return web.json_response({
            "id": "fake", "object": "chat.completion", "model": scenario,
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": usage})

    @staticmethod
    def _answer(task: str, messages: list[dict[str, Any]]) -> str:
        last_tool = next(m["content"] for m in reversed(messages) if m["role"] == "tool")
        if task == "open-issue-count":
            text = last_tool.strip()
            if text.startswith("["):
                return f"There are {len(json.loads(text))} open issues."
            return f"There are {text.split()[0]} open issues."
        return "Done."
