"""Agents: run one agent episode and say what happened (the built-in agent adapters).

A driver gets an `AgentContext` (prompts, the arm, the trial's working directory, a
`Toolbox` that gates and runs tool calls) and returns an `Episode`: final report,
token components, turns, transcript, and how it stopped (`finished`, `turn_cap`,
`wall_clock`). Built in:
- `OpenAIDriver`: a tool-calling loop against any OpenAI-compatible endpoint through
  `benchwarden.targets.openai_client.ChatClient`;
- `CommandDriver`: an external agent program that prints a JSON result (the contract
  is in docs/arms.md).
An `mcp` arm's tools come from MCP servers running inside the trial's boundary: the
toolbox opens the sessions (`mcp_client.McpSessions`) before the episode, offers the
listed tools to the model and relays its calls; the command driver's program gets the
servers' command lines and starts them itself, inside the same boundary.

Invariants:
- Every tool call is checked by `isolation` before it runs; a denied call is answered
  to the agent, recorded with `denied: true`, and never executed. Transcript entries:
  `{kind: "shell", command}`, `{kind: "function", name, arguments}`, `{kind: "mcp",
  server, tool, arguments}` (arguments as the model wrote them).
- A driver's own failure (server unreachable, malformed result, program crash) raises
  `HarnessError`; it is never turned into an agent outcome.
- The wall clock is a hard backstop: the episode is cancelled, every process it
  started is killed (whole process group), and whatever tokens were already reported
  are kept.
- Nothing the agent asks for runs in the harness's own process space: shell commands,
  and the command driver's agent program, run through the trial's `TrialSandbox`
  (inside its bubblewrap boundary unless `--isolation none` was chosen).
- The agent's shell gets a minimal environment whose HOME (also CURL_HOME and
  XDG_CONFIG_HOME) is an empty folder that is read-only inside the boundary, so no
  ~/.curlrc, .wgetrc or .netrc the agent writes can reroute an allowed tool.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgspec

from benchwarden.core.interrupts import asyncio_handles_sigint
from benchwarden.core.records import TokenComponents
from benchwarden.suites.arms.boundary import SandboxFailure, TrialSandbox
from benchwarden.suites.arms.isolation import (
    CommandCheck,
    NetworkChannel,
    check_command,
    check_function_call,
    check_mcp_call,
    permitted_names,
)
from benchwarden.suites.arms.mcp_client import McpFailure, McpSessions
from benchwarden.suites.arms.tasks import Arm, FunctionTool, McpServer
from benchwarden.targets import event_loop

OUTPUT_LIMIT = 16_000
COMMAND_RESULT_LIMIT = 16 * 1024 * 1024
MCP_START_TIMEOUT = 60.0
"""Seconds an MCP server has to start and list its tools (outside the wall clock, like
a shell arm's services; a server that misses it is a harness error)."""
Stop = Literal["finished", "turn_cap", "wall_clock"]


class HarnessError(Exception):
    """The harness (driver, server, environment) failed, not the agent. One line."""


@dataclass(frozen=True)
class Limits:
    turn_cap: int = 40
    wall_clock: float = 300.0
    command_timeout: float = 60.0
    """Backstop for one shell command (never longer than what is left of the wall clock)."""


@dataclass
class Episode:
    final_report: str
    tokens: TokenComponents
    tokens_reported: bool
    turns: int
    transcript: list[dict[str, Any]]
    stopped: Stop
    imputed_cost_usd: float | None = None
    model: str | None = None
    began_at: float | None = None
    """When the agent began (epoch seconds), if later than the driver's start: an mcp
    arm's servers start first, outside the episode, like a shell arm's services."""


def _shell_env(agent_env: Mapping[str, str], workdir: Path, home: Path) -> dict[str, str]:
    """A minimal environment: nothing of the harness's own leaks into the agent's shell.
    The configuration homes come last, so an environment cannot point them elsewhere."""
    env = {"TMPDIR": str(workdir), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
           "PATH": "/usr/local/bin:/usr/bin:/bin"}
    env.update(agent_env)
    env.update({"HOME": str(home), "CURL_HOME": str(home), "XDG_CONFIG_HOME": str(home)})
    return env


def _clip(text: str) -> str:
    if len(text) <= OUTPUT_LIMIT:
        return text
    return text[:OUTPUT_LIMIT] + f"\n[output cut at {OUTPUT_LIMIT} characters]"


class Toolbox:
    """Gates and runs an agent's tool calls for one trial; keeps the transcript."""

    def __init__(self, arm: Arm, workdir: Path, agent_env: Mapping[str, str],
                 functions: Sequence[FunctionTool], call_function: Any,
                 command_timeout: float = 60.0,
                 channel: NetworkChannel = NetworkChannel(),
                 runner: TrialSandbox | None = None, home: Path | None = None,
                 mcp_servers: Sequence[McpServer] = ()) -> None:
        self.arm = arm
        self.channel = channel
        self.workdir = workdir
        self.runner = runner
        """Where commands run: the trial's sandbox (None: this toolbox runs no commands)."""
        self.home = home if home is not None else workdir
        self.env = _shell_env(agent_env, workdir, self.home)
        self.functions = tuple(functions)
        self._call_function = call_function
        self.command_timeout = command_timeout
        self.mcp_servers = tuple(mcp_servers)
        self._mcp: McpSessions | None = None
        self.transcript: list[dict[str, Any]] = []

    @asynccontextmanager
    async def opened(self, start_timeout: float = MCP_START_TIMEOUT) -> AsyncIterator[Toolbox]:
        """An `mcp` arm's sessions, open for the episode (other arms: nothing to open).
        Leaving the block, also by cancellation, closes them and kills the servers."""
        if self.arm.channel != "mcp":
            yield self
            return
        if self.runner is None:
            raise HarnessError("no sandbox to run the MCP servers in (the trial starts one)")
        if not self.mcp_servers:
            raise HarnessError(f"arm {self.arm.name} uses MCP but the environment names no "
                               "MCP servers (mcp_servers())")
        try:
            sessions = McpSessions(self.runner, self.mcp_servers, self.workdir)
        except McpFailure as error:
            raise HarnessError(str(error)) from None
        try:
            try:
                await sessions.open(start_timeout)
            except McpFailure as error:
                raise HarnessError(str(error)) from None
            self._mcp = sessions
            yield self
        finally:
            self._mcp = None
            await sessions.close()

    def tool_specs(self) -> list[dict[str, Any]]:
        if self.arm.channel == "shell":
            allowed = ", ".join(sorted(permitted_names(self.arm)))
            return [{"type": "function", "function": {
                "name": "shell",
                "description": ("Run one shell command in your working directory and return "
                                "its output and exit status. Allowed commands: " + allowed),
                "parameters": {"type": "object", "properties": {
                    "command": {"type": "string", "description": "The command line to run."}},
                    "required": ["command"]}}}]
        if self.arm.channel == "mcp":
            if self._mcp is None:
                raise HarnessError("the MCP sessions are not open (use Toolbox.opened())")
            return self._mcp.specs()
        return [tool.to_openai() for tool in self.functions]

    async def call(self, name: str, raw_arguments: str, deadline: float) -> str:
        """Answer one tool call: denied, failed or run. Never raises for the agent's mistakes."""
        try:
            arguments = json.loads(raw_arguments) if raw_arguments.strip() else {}
        except json.JSONDecodeError as error:
            self.transcript.append({"kind": "invalid", "name": name, "arguments": raw_arguments,
                                    "denied": True, "reason": "arguments are not JSON"})
            return f"error: the arguments are not valid JSON ({error.msg}); send a JSON object"
        if isinstance(arguments, str) and self.arm.channel == "shell" and name == "shell":
            arguments = {"command": arguments}  # small models often send the bare command
        if not isinstance(arguments, dict):
            arguments = {}
        if self.arm.channel == "shell" and name == "shell":
            return await self._shell(str(arguments.get("command", "")), deadline)
        if self._mcp is not None and name in self._mcp.tools:
            return await self._mcp_call(name, raw_arguments, arguments, deadline)
        if self.arm.channel != "functions":
            decision = check_function_call(name, self.arm, ())
        else:
            decision = check_function_call(name, self.arm, (f.name for f in self.functions))
        refusal = self._record({"kind": "function", "name": name, "arguments": raw_arguments},
                               decision)
        if refusal is not None:
            return refusal
        try:
            return _clip(self._call_function(name, arguments))
        except ValueError as error:
            return f"error: {error}"

    def _record(self, entry: dict[str, Any], decision: CommandCheck,
                refused: str = "refused") -> str | None:
        """Put the call on the transcript; when the gate refused it, mark it denied and
        return the answer the agent gets instead of running it."""
        if not decision.allowed:
            entry.update(denied=True, reason=decision.message)
        self.transcript.append(entry)
        return None if decision.allowed else f"{refused}: {decision.message}"

    def _time_left(self, deadline: float) -> float:
        """One call's backstop: the command timeout, never past the wall clock."""
        return max(0.1, min(self.command_timeout, deadline - time.monotonic()))

    async def _mcp_call(self, name: str, raw_arguments: str, arguments: dict[str, Any],
                        deadline: float) -> str:
        assert self._mcp is not None
        server, tool = self._mcp.tools[name][0], self._mcp.tools[name][1].name
        entry: dict[str, Any] = {"kind": "mcp", "server": server, "tool": tool,
                                 "arguments": raw_arguments}
        refusal = self._record(entry, check_mcp_call(server, tool, self.arm, self._mcp.listed))
        if refusal is not None:
            return refusal
        try:
            answer = await self._mcp.call(server, tool, arguments, self._time_left(deadline))
        except McpFailure as error:
            raise HarnessError(str(error)) from None
        if answer.timed_out:
            entry["timed_out"] = True
        return _clip(answer.text)

    async def _shell(self, command: str, deadline: float) -> str:
        entry: dict[str, Any] = {"kind": "shell", "command": command}
        refusal = self._record(entry, check_command(command, self.arm, self.channel),
                               "refused (not run)")
        if refusal is not None:
            return refusal
        timeout = self._time_left(deadline)
        if self.runner is None:
            raise HarnessError("no sandbox to run shell commands in (the trial starts one)")
        try:
            outcome = await self.runner.run_async(command=command, env=self.env, cwd=self.workdir,
                                                  timeout=timeout, limit=OUTPUT_LIMIT)
        except SandboxFailure as error:
            raise HarnessError(str(error)) from None
        if outcome.timed_out:
            entry["timed_out"] = True
            return f"[command killed after {timeout:.0f} s]"
        entry["exit_status"] = outcome.exit_status
        cut_note = f"\n[output cut at {OUTPUT_LIMIT} bytes]" if outcome.truncated else ""
        text = outcome.output + cut_note
        return _clip(text) + f"\n[exit status {outcome.exit_status}]"


@dataclass(frozen=True)
class AgentContext:
    system_prompt: str
    task_prompt: str
    arm: Arm
    task_id: str
    workdir: Path
    toolbox: Toolbox
    limits: Limits
    seed: int | None = None
    trial: int = 1


# -- the OpenAI-compatible tool-calling loop -------------------------------------

@dataclass(frozen=True)
class OpenAIDriver:
    base_url: str
    model: str
    api_key_env: str | None = None
    """Name of the environment variable holding the key (read where the trial runs)."""
    temperature: float = 0.0
    max_tokens: int = 1024
    request_timeout: float = 120.0
    name: str = "openai"

    def __post_init__(self) -> None:
        from benchwarden.core.secrets import refuse_url_credentials

        refuse_url_credentials(self.base_url)  # a key in the URL would be stored with the run

    def describe(self) -> dict[str, Any]:
        return {"driver": self.name, "url": self.base_url, "model": self.model,
                "api_key_env": self.api_key_env, "temperature": self.temperature,
                "max_tokens": self.max_tokens}

    def run(self, context: AgentContext) -> Episode:
        return event_loop.run(self._run(context))  # uvloop where installed, as contamination

    async def _run(self, context: AgentContext) -> Episode:
        from benchwarden.targets.openai_client import ChatClient, TargetError

        progress = _Progress()
        try:
            api_key = os.environ.get(self.api_key_env) if self.api_key_env else None
            async with ChatClient(self.base_url, api_key=api_key,
                                  request_timeout=min(self.request_timeout,
                                                      context.limits.wall_clock + 5)) as client, \
                    context.toolbox.opened():
                # the wall clock starts once the arm's MCP servers (if any) are up
                deadline = time.monotonic() + context.limits.wall_clock
                progress.began_at = time.time()
                try:
                    await asyncio.wait_for(self._loop(client, context, progress, deadline),
                                           context.limits.wall_clock)
                except TimeoutError:
                    progress.stopped = "wall_clock"
        except TargetError as error:
            raise HarnessError(f"model server failed: {error}") from None
        return Episode(progress.final_report, progress.tokens, True, progress.turns,
                       context.toolbox.transcript, progress.stopped, None, self.model,
                       progress.began_at)

    async def _loop(self, client: Any, context: AgentContext, progress: _Progress,
                    deadline: float) -> None:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": context.system_prompt},
            {"role": "user", "content": context.task_prompt}]
        tools = context.toolbox.tool_specs()
        while True:
            if progress.turns >= context.limits.turn_cap:
                progress.stopped = "turn_cap"
                return
            body: dict[str, Any] = {"model": self.model, "messages": messages, "tools": tools,
                                    "temperature": self.temperature, "max_tokens": self.max_tokens}
            if context.seed is not None:
                body["seed"] = context.seed
            completion = await client.complete_chat(body)
            progress.turns += 1
            progress.add_usage(completion.usage)
            calls = list(completion.tool_calls)
            if not calls:
                progress.final_report = completion.content or ""
                progress.stopped = "finished"
                return
            assistant: dict[str, Any] = {"role": "assistant", "content": completion.content or None,
                                         "tool_calls": []}
            answers = []
            for index, call in enumerate(calls):
                call_id = call.id or f"call_{progress.turns}_{index}"
                assistant["tool_calls"].append({"id": call_id, "type": "function", "function": {
                    "name": call.name, "arguments": call.arguments}})
                answer = await context.toolbox.call(call.name, call.arguments, deadline)
                answers.append({"role": "tool", "tool_call_id": call_id, "content": answer})
            messages.append(assistant)
            messages.extend(answers)


class _Progress:
    """What the loop has learnt so far; survives cancellation by the wall clock."""

    def __init__(self) -> None:
        self.turns = 0
        self.tokens = TokenComponents()
        self.final_report = ""
        self.stopped: Stop = "finished"
        self.began_at: float | None = None

    def add_usage(self, usage: Any) -> None:
        prompt = usage.prompt_tokens or 0
        cached = min(usage.cached_prompt_tokens or 0, prompt)
        self.tokens = self.tokens + TokenComponents(
            fresh_input=prompt - cached, cache_read=cached,
            output=usage.completion_tokens or 0,
            reasoning=usage.reasoning_tokens)


# -- an external agent program ---------------------------------------------------

class _Tokens(msgspec.Struct, forbid_unknown_fields=True):
    fresh_input: int = 0
    cache_creation: int = 0
    cache_read: int = 0
    output: int = 0
    reasoning: int | None = None


class _Entry(msgspec.Struct):
    kind: str
    command: str | None = None
    name: str | None = None
    server: str | None = None
    """mcp entries: the server called (one of BENCHWARDEN_MCP_SERVERS)."""
    tool: str | None = None
    """mcp entries: the tool called."""
    arguments: str | dict[str, Any] | None = None
    """As the model wrote them: JSON text, or (mcp entries) the object itself."""
    denied: bool = False


class CommandResult(msgspec.Struct, forbid_unknown_fields=True):
    """What an external agent prints on stdout (one JSON object); see docs/arms.md."""

    final_report: str
    turns: int
    tokens: _Tokens
    transcript: list[_Entry]
    hit_turn_cap: bool = False
    imputed_cost_usd: float | None = None
    model: str | None = None
    began_at: float | None = None
    """When the agent began (epoch seconds), if later than the driver's start: an mcp
    arm's servers start first, outside the episode, like a shell arm's services."""


def parse_command_result(stdout: bytes) -> CommandResult:
    text = stdout.decode("utf-8", "replace").strip()
    if not text:
        raise HarnessError("the agent program printed nothing; it must print one JSON object")
    try:
        result = msgspec.json.decode(text.encode("utf-8"), type=CommandResult)
    except (msgspec.ValidationError, msgspec.DecodeError) as error:
        raise HarnessError(f"the agent program's output is not a valid result: {error}") from None
    if result.turns < 0 or min(result.tokens.fresh_input, result.tokens.cache_creation,
                               result.tokens.cache_read, result.tokens.output) < 0:
        raise HarnessError("the agent program reported negative turns or tokens")
    for index, entry in enumerate(result.transcript, start=1):
        if entry.kind == "mcp" and not (entry.server and entry.tool):
            raise HarnessError(f"the agent program's transcript entry {index} is an mcp call "
                               "without a server and a tool")
    return result


def mcp_servers_json(servers: Sequence[McpServer]) -> str:
    """The servers in the `mcpServers` shape MCP clients read (name -> command, args,
    env, cwd): what an external agent starts, inside the trial's boundary."""
    return json.dumps({"mcpServers": {
        server.name: {"command": server.argv[0], "args": list(server.argv[1:]),
                      "env": dict(server.env), **({"cwd": server.cwd} if server.cwd else {})}
        for server in servers}}, sort_keys=True)


@dataclass(frozen=True)
class CommandDriver:
    command: str
    name: str = "command"

    def describe(self) -> dict[str, Any]:
        return {"driver": self.name, "command": self.command}

    def run(self, context: AgentContext) -> Episode:
        with asyncio_handles_sigint():
            return asyncio.run(self._run(context))

    async def _run(self, context: AgentContext) -> Episode:
        if context.arm.channel == "functions":
            raise HarnessError(f"the command driver runs shell and mcp arms only; arm "
                               f"{context.arm.name} uses function tools")
        try:
            argv = shlex.split(self.command)
        except ValueError as error:
            raise HarnessError(f"--command cannot be split into words: {error}") from None
        agent_env = context.toolbox.env
        env = dict(os.environ)
        env.update({
            "BENCHWARDEN_TASK_ID": context.task_id,
            "BENCHWARDEN_TRIAL": str(context.trial),
            "BENCHWARDEN_TASK_PROMPT": context.task_prompt,
            "BENCHWARDEN_SYSTEM_PROMPT": context.system_prompt,
            "BENCHWARDEN_BOOTSTRAP": context.arm.bootstrap,
            "BENCHWARDEN_ARM": context.arm.name,
            "BENCHWARDEN_WORKDIR": str(context.workdir),
            "BENCHWARDEN_TURN_CAP": str(context.limits.turn_cap),
            "BENCHWARDEN_WALL_CLOCK": str(context.limits.wall_clock),
            "BENCHWARDEN_ALLOWED_COMMANDS": " ".join(sorted(permitted_names(context.arm))),
            "BENCHWARDEN_AGENT_ENV": json.dumps(agent_env, sort_keys=True),
        })
        if context.seed is not None:
            env["BENCHWARDEN_SEED"] = str(context.seed)
        if context.toolbox.mcp_servers:
            env["BENCHWARDEN_MCP_SERVERS"] = mcp_servers_json(context.toolbox.mcp_servers)
        runner = context.toolbox.runner
        if runner is None:
            raise HarnessError("no sandbox to run the agent program in (the trial starts one)")
        try:
            outcome = await asyncio.wait_for(
                runner.run_async(argv=argv, env=env, cwd=context.workdir,
                                 timeout=context.limits.wall_clock, merge=False,
                                 limit=COMMAND_RESULT_LIMIT),
                context.limits.wall_clock + 30)
        except TimeoutError:  # the sandbox itself stopped answering
            return Episode("", TokenComponents(), False, 0, [], "wall_clock")
        except SandboxFailure as error:
            raise HarnessError(str(error)) from None
        if outcome.timed_out:
            return Episode("", TokenComponents(), False, 0, [], "wall_clock")
        if outcome.exit_status != 0:
            tail = " ".join(outcome.stderr.split())[-200:]
            raise HarnessError(f"the agent program exited with status {outcome.exit_status}"
                               + (f": {tail}" if tail else ""))
        if outcome.truncated:
            raise HarnessError(f"the agent program printed more than {COMMAND_RESULT_LIMIT} "
                               "bytes; it must print one JSON object")
        stdout = outcome.output.encode("utf-8")
        result = parse_command_result(stdout)
        transcript = [{k: v for k, v in msgspec.to_builtins(entry).items()
                       if v is not None and not (k == "denied" and v is False)}
                      for entry in result.transcript]
        tokens = TokenComponents(**msgspec.to_builtins(result.tokens))
        capped = result.hit_turn_cap or result.turns > context.limits.turn_cap
        stopped: Stop = "turn_cap" if capped else "finished"
        return Episode(result.final_report, tokens, True, result.turns, transcript, stopped,
                       result.imputed_cost_usd, result.model)
