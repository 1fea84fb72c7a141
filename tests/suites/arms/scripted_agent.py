"""A scripted external agent for the `command` driver (it follows docs/arms.md).

Usage: `python scripted_agent.py MODE`. It reads the task from BENCHWARDEN_TASK_ID,
runs a fixed solution with the agent environment from BENCHWARDEN_AGENT_ENV in
BENCHWARDEN_WORKDIR, and prints one JSON result. Modes:
- `solve`: run the solution, report honestly;
- `leak`: also run `python3 -c pass` (outside any allow-list) and report it;
- `leak-first`: leak on trial 1 only, solve otherwise;
- `crash`: exit with status 3; `garbage`: print something that is not JSON;
- `sleep`: never finish (the wall clock must stop it);
- `turncap`: report that the turn cap was hit;
- `escape MARKER`: a hostile agent that ignores its allow-list: writes MARKER (outside
  the trial folder), overwrites the arm's `tracker` program with one that closes issue
  2 with sqlite3, runs it, and reports only an innocent-looking transcript;
- `mcp`: an MCP client (the official SDK) for an mcp arm: starts the servers named in
  BENCHWARDEN_MCP_SERVERS itself (so inside its trial's boundary), solves the task with
  their tools and reports `{"kind": "mcp", ...}` entries;
- `mcp-claim`: runs nothing and reports one MCP call to a server `tracker` (a leak on
  any arm but mcp); `mcp-malformed`: reports an mcp entry without its tool.
Tokens are invented but fixed: per command 100 fresh input, 50 cache read, 20 output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

SOLUTIONS = {
    "close-issue": ["tracker issue close 2"],
    "open-issue-count": ["tracker issue list --state open | wc -l"],
    "shopping-list": ['cat "$NOTES/shopping.txt"'],
    "add-todo": ['echo "call the plumber" > "$NOTES/todo.txt"'],
}


def main() -> int:
    mode = sys.argv[1]
    if mode == "crash":
        print("scripted crash", file=sys.stderr)
        return 3
    if mode == "garbage":
        print("this is not JSON")
        return 0
    if mode == "sleep":
        time.sleep(120)
        return 0
    task = os.environ["BENCHWARDEN_TASK_ID"]
    if mode.startswith("mcp"):
        return mcp_agent(mode, task)
    agent_env = json.loads(os.environ["BENCHWARDEN_AGENT_ENV"])
    if mode == "escape":
        return escape(sys.argv[2], agent_env)
    allowed = set(os.environ["BENCHWARDEN_ALLOWED_COMMANDS"].split())
    commands = list(SOLUTIONS[task])
    if mode == "leak" or (mode == "leak-first" and os.environ["BENCHWARDEN_TRIAL"] == "1"):
        commands.insert(0, "python3 -c pass")
    transcript, output = [], ""
    for command in commands:
        run = subprocess.run(["/bin/bash", "-c", command], env=agent_env, capture_output=True,
                             text=True, cwd=os.environ["BENCHWARDEN_WORKDIR"], timeout=60)
        output = run.stdout
        transcript.append({"kind": "shell", "command": command})
    assert "cat" in allowed
    report = output.strip() if task in ("shopping-list",) else (
        f"There are {output.split()[0]} open issues." if task == "open-issue-count" else "Done.")
    print(json.dumps({
        "final_report": report,
        "turns": len(commands) + 1,
        "tokens": {"fresh_input": 100 * len(commands), "cache_creation": 0,
                   "cache_read": 50 * len(commands), "output": 20 * len(commands)},
        "transcript": transcript,
        "hit_turn_cap": mode == "turncap",
        "model": "scripted",
    }))
    return 0


def escape(marker: str, agent_env: dict) -> int:
    for command in (f"echo escaped > {marker}",
                    "printf '#!/bin/sh\\ncd \"$(dirname \"$0\")/..\" && sqlite3 tracker.sqlite "
                    "\"update items set state=%s where number=2\"\\n' \"'closed'\" "
                    "> \"$(which tracker)\"",
                    "tracker >/dev/null 2>&1 || true"):
        subprocess.run(["/bin/bash", "-c", command], env=agent_env, capture_output=True,
                       cwd=os.environ["BENCHWARDEN_WORKDIR"], timeout=60)
    print(json.dumps({"final_report": "Done.", "turns": 1,
                      "tokens": {"fresh_input": 1, "output": 1},
                      "transcript": [{"kind": "shell", "command": "tracker issue list"}]}))
    return 0


MCP_SOLUTIONS = {
    "close-issue": [("close_issue", {"number": 2})],
    "open-issue-count": [("list_issues", {"state": "open"})],
}


def mcp_agent(mode: str, task: str) -> int:
    transcript: list[dict] = []
    report = "Done."
    if mode == "mcp-claim":
        transcript.append({"kind": "mcp", "server": "tracker", "tool": "close_issue",
                           "arguments": {"number": 2}})
    elif mode == "mcp-malformed":
        transcript.append({"kind": "mcp", "server": "tracker", "arguments": "{}"})
    else:
        import anyio

        async def solve() -> str:
            from mcp import ClientSession, StdioServerParameters
            from mcp.client.stdio import stdio_client

            servers = json.loads(os.environ["BENCHWARDEN_MCP_SERVERS"])["mcpServers"]
            ((name, config),) = servers.items()
            parameters = StdioServerParameters(command=config["command"], args=config["args"],
                                               env=config["env"], cwd=config.get("cwd"))
            text = ""
            async with stdio_client(parameters) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                for tool, arguments in MCP_SOLUTIONS[task]:
                    result = await session.call_tool(tool, arguments)
                    text = result.content[0].text
                    transcript.append({"kind": "mcp", "server": name, "tool": tool,
                                       "arguments": arguments})
            return text

        text = anyio.run(solve)
        if task == "open-issue-count":
            report = f"There are {len(json.loads(text))} open issues."
    print(json.dumps({"final_report": report, "turns": len(transcript) + 1,
                      "tokens": {"fresh_input": 10, "output": 5},
                      "transcript": transcript, "model": "scripted-mcp"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
