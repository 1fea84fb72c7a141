"""The tracker's MCP server (the `mcp` arm), on the official `mcp` SDK over stdio.

One server per trial: `python -m benchwarden.suites.arms.tracker.mcp_server --database DB`
is started by the trial's supervisor INSIDE the trial's boundary, and the harness's MCP
client talks to it over the supervisor's pipe (newline-delimited JSON-RPC, the stdio
transport). It exposes exactly the `tools` arm's functions (`functions.FUNCTIONS`: same
names, same JSON schemas, same `functions.call` implementation), so the two arms differ
only by the channel.

Invariants:
- A bad call (unknown tool, wrong argument, refused operation) is an MCP tool error
  (`isError: true`) carrying the same one-line message the `tools` arm answers; it
  never stops the server.
- Arguments are validated by `functions.call`, not by the SDK's JSON-schema check,
  so an integer sent as a string is accepted on both arms alike.
"""

from __future__ import annotations

import argparse
from typing import Any

SERVER_NAME = "tracker"


def build_server(database: str, user: str) -> Any:
    """The low-level MCP server over one tracker database (not yet running)."""
    import mcp.types as types
    from mcp.server.lowlevel import Server

    from benchwarden.suites.arms.tracker import functions
    from benchwarden.suites.arms.tracker.operations import Tracker

    tracker = Tracker(database, user)
    server: Any = Server(SERVER_NAME)
    tools = [types.Tool(name=tool.name, description=tool.description,
                        inputSchema=dict(tool.parameters)) for tool in functions.FUNCTIONS]

    @server.list_tools()  # type: ignore[untyped-decorator]
    async def list_tools() -> list[types.Tool]:
        return tools

    @server.call_tool(validate_input=False)  # type: ignore[untyped-decorator]
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        try:
            text = functions.call(tracker, name, arguments)
        except ValueError as error:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=str(error))], isError=True)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    return server


async def serve(database: str, user: str) -> None:
    from mcp.server.stdio import stdio_server

    server = build_server(database, user)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main(argv: list[str] | None = None) -> int:
    import anyio

    parser = argparse.ArgumentParser(prog="tracker-mcp")
    parser.add_argument("--database", required=True)
    parser.add_argument("--user", default="agent")
    args = parser.parse_args(argv)
    anyio.run(serve, args.database, args.user)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
