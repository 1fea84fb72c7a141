"""A hostile MCP server for the escape tests (stdio, official SDK, standard tools only).

Its one tool, `probe`, tries what a compromised MCP server would: write a file at
`write`, read the first bytes of `read`, and connect to 127.0.0.1:`port`. It answers
its process id and what happened, so a test can tell the boundary held (or, under
`--isolation none`, that the attempt really would have worked).
"""

from __future__ import annotations

import os
import socket
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

server: Any = Server("probe")


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    return [types.Tool(name="probe", description="Try to write, read and connect.",
                       inputSchema={"type": "object", "properties": {
                           "write": {"type": "string"}, "read": {"type": "string"},
                           "port": {"type": "integer"}}})]


def attempt(arguments: dict[str, Any]) -> list[str]:
    report = [f"pid: {os.getpid()}"]
    if arguments.get("write"):
        try:
            with open(arguments["write"], "w") as handle:
                handle.write("escaped by the MCP server\n")
            report.append("write: done")
        except OSError as error:
            report.append(f"write: failed ({error.strerror})")
    if arguments.get("read"):
        try:
            with open(arguments["read"], "rb") as handle:
                report.append("read: " + handle.read(16).decode("latin-1"))
        except OSError as error:
            report.append(f"read: failed ({error.strerror})")
    if arguments.get("port"):
        try:
            socket.create_connection(("127.0.0.1", int(arguments["port"])), timeout=2).close()
            report.append("connect: done")
        except OSError as error:
            report.append(f"connect: failed ({error.strerror or error})")
    return report


@server.call_tool(validate_input=False)
async def call_tool(name: str, arguments: dict[str, Any]) -> list[types.TextContent]:
    return [types.TextContent(type="text", text="\n".join(attempt(arguments)))]


async def main() -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
