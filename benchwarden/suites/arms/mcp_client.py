"""The harness's MCP client for an `mcp` arm: sessions with the trial's MCP servers.

Each server (`tasks.McpServer`) is started INSIDE the trial's boundary by its
supervisor (`TrialSandbox.open_stream`); its stdin and stdout are relayed over the
supervisor's pipe, and `sandbox_transport` turns that relay into the read and write
streams the official SDK's `ClientSession` expects (the stdio transport's framing: one
JSON-RPC message per line). `McpSessions` opens one session per server, lists the
tools, offers them to the model as function schemas and relays the model's calls.

Invariants:
- The server process never runs in the harness's own process space or outside the
  boundary: the harness only reads and writes lines.
- `McpSessions.close()` (also on cancellation by the wall clock) ends every session
  and kills every server process; the sandbox's own close is the backstop.
- A server that cannot start, dies or speaks something other than MCP raises
  `McpFailure` (a harness error); a tool's own error (`isError`) is answered to the
  model as text, like a function tool's `ValueError`.
- The `mcp` package is imported only here and only when an `mcp` arm runs, so suites
  without one work where it is not installed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchwarden.suites.arms.boundary import SandboxFailure, TrialSandbox
from benchwarden.suites.arms.tasks import McpServer

INSTALL_HINT = "the mcp arm needs the MCP SDK: pip install 'benchwarden[mcp]'"


class McpFailure(Exception):
    """An MCP server failed (could not start, died, broke the protocol). One line."""


@dataclass(frozen=True)
class McpAnswer:
    """What one relayed tool call produced: the text the model sees, and whether the
    call was cut by its timeout."""

    text: str
    timed_out: bool = False


def _sdk() -> Any:
    try:
        import mcp
    except ImportError:
        raise McpFailure(INSTALL_HINT) from None
    return mcp


@asynccontextmanager
async def sandbox_transport(sandbox: TrialSandbox, server: McpServer,
                            cwd: Path) -> AsyncIterator[tuple[Any, Any, int]]:
    """Start `server` inside the sandbox; yield the SDK's (read, write) streams over it
    and the process's id in the sandbox. Leaving the block kills the process."""
    import anyio
    import mcp.types as types
    from mcp.shared.message import SessionMessage

    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str | None] = asyncio.Queue()

    def hear(line: str | None) -> None:  # called from the sandbox's reader thread
        try:
            loop.call_soon_threadsafe(lines.put_nowait, line)
        except RuntimeError:  # the loop is closed: nobody listens any more
            pass

    identifier = sandbox.open_stream(argv=list(server.argv), env=dict(server.env),
                                     cwd=Path(server.cwd) if server.cwd else cwd, listener=hear)
    read_writer, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, write_reader = anyio.create_memory_object_stream[Any](0)

    async def relay_in() -> None:
        async with read_writer:
            while True:
                line = await lines.get()
                if line is None:
                    return
                if not line.strip():
                    continue
                try:
                    message = types.JSONRPCMessage.model_validate_json(line)
                except ValueError as error:  # pydantic's ValidationError is a ValueError
                    await read_writer.send(error)
                    continue
                await read_writer.send(SessionMessage(message))

    async def relay_out() -> None:
        async with write_reader:
            async for session_message in write_reader:
                try:
                    sandbox.write_line(identifier, session_message.message.model_dump_json(
                        by_alias=True, exclude_none=True))
                except SandboxFailure:
                    return  # the reader hears the end and closes the session's requests

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(relay_in)
            group.start_soon(relay_out)
            try:
                yield read_stream, write_stream, identifier
            finally:
                sandbox.kill(identifier)
                group.cancel_scope.cancel()
    finally:
        for stream in (read_stream, write_stream, read_writer, write_reader):
            await stream.aclose()


def tool_text(result: Any) -> str:
    """The text a model sees for one MCP tool result. Pure."""
    parts = []
    for block in result.content or []:
        text = getattr(block, "text", None)
        kind = getattr(block, "type", "other")
        parts.append(text if isinstance(text, str) else f"[{kind} content]")
    if not parts and result.structuredContent is not None:
        parts.append(json.dumps(result.structuredContent, ensure_ascii=False))
    text = "\n".join(parts)
    return f"error: {text}" if result.isError else text


class McpSessions:
    """The open MCP sessions of one trial, and the tools their servers listed."""

    def __init__(self, sandbox: TrialSandbox, servers: Sequence[McpServer], cwd: Path) -> None:
        names = [server.name for server in servers]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise McpFailure(f"MCP server names must be unique; repeated: {duplicates}")
        self.sandbox = sandbox
        self.servers = tuple(servers)
        self.cwd = cwd
        self._stack = AsyncExitStack()
        self._sessions: dict[str, Any] = {}
        self._processes: dict[str, int] = {}
        self.tools: dict[str, tuple[str, Any]] = {}
        """The name offered to the model -> (server, the server's `Tool`)."""

    @property
    def listed(self) -> Mapping[str, tuple[str, ...]]:
        """Server name -> the tools it listed (what the gate allows)."""
        by_server: dict[str, list[str]] = {server.name: [] for server in self.servers}
        for server, tool in self.tools.values():
            by_server[server].append(tool.name)
        return {name: tuple(tools) for name, tools in by_server.items()}

    async def open(self, timeout: float) -> None:
        """Start every server, initialise its session and list its tools; each server
        has `timeout` seconds to answer."""
        mcp = _sdk()
        for server in self.servers:
            try:
                read, write, self._processes[server.name] = await self._stack.enter_async_context(
                    sandbox_transport(self.sandbox, server, self.cwd))
                session = await self._stack.enter_async_context(mcp.ClientSession(read, write))
                async with asyncio.timeout(timeout):
                    await session.initialize()
                    tools = await self._list_tools(session)
            except TimeoutError:
                raise McpFailure(f"MCP server {server.name} did not answer within "
                                 f"{timeout:.0f} s") from None
            except SandboxFailure as error:
                raise McpFailure(str(error)) from None
            except mcp.McpError as error:
                raise McpFailure(self._why(server, error)) from None
            self._sessions[server.name] = session
            for tool in tools:
                if tool.name in self.tools:
                    raise McpFailure(f"MCP servers {self.tools[tool.name][0]} and {server.name} "
                                     f"both list a tool {tool.name!r}")
                self.tools[tool.name] = (server.name, tool)

    @staticmethod
    async def _list_tools(session: Any) -> list[Any]:
        import mcp.types as types

        tools: list[Any] = []
        result = await session.list_tools()
        tools.extend(result.tools)
        while result.nextCursor:
            result = await session.list_tools(
                params=types.PaginatedRequestParams(cursor=result.nextCursor))
            tools.extend(result.tools)
        return tools

    def _why(self, server: McpServer, error: Exception) -> str:
        detail = " ".join(str(error).split())
        process = self._processes.get(server.name)
        problem = "" if process is None else " ".join(
            self.sandbox.stream_problem(process).split())[-200:]
        return f"MCP server {server.name} failed: {detail}" + (f" ({problem})" if problem else "")

    def specs(self) -> list[dict[str, Any]]:
        """The listed tools as OpenAI function-tool schemas, in listing order."""
        return [{"type": "function", "function": {
            "name": name, "description": tool.description or "",
            "parameters": dict(tool.inputSchema or {"type": "object", "properties": {}})}}
            for name, (_, tool) in self.tools.items()]

    async def call(self, server: str, tool: str, arguments: Mapping[str, Any],
                   timeout: float) -> McpAnswer:
        """Relay one call; a tool error comes back as text, a dead server raises."""
        mcp = _sdk()
        session = self._sessions[server]
        try:
            async with asyncio.timeout(timeout):
                result = await session.call_tool(tool, dict(arguments))
        except TimeoutError:
            return McpAnswer(f"[tool call cut after {timeout:.0f} s]", timed_out=True)
        except mcp.McpError as error:
            if error.error.code != mcp.types.CONNECTION_CLOSED:  # a refusal: the model's to read
                return McpAnswer(f"error: {' '.join(str(error).split())}")
            raise McpFailure(self._why(self._server(server), error)) from None
        return McpAnswer(tool_text(result))

    def _server(self, name: str) -> McpServer:
        return next(server for server in self.servers if server.name == name)

    async def close(self) -> None:
        await self._stack.aclose()
