"""The built-in `tracker` suite: one environment, four arms, twenty tasks.

Each trial gets a fresh tracker in its own directory: a new SQLite file, a `bin`
folder holding the `tracker` program (cli arm), for the http arm a REST server (a
`Service`) that the trial starts inside its boundary, next to the agent's commands,
and for the mcp arm an MCP server (`McpServer`, stdio) started inside the same kind of
boundary, offering the `tools` arm's functions as MCP tools.

Invariants: the `bin` folder (the program and the database path written into it) is
declared read-only, so an agent cannot rewrite the program it is asked to use; the
state the checker reads is captured from the database file by the harness, never by
running anything the agent could have changed, and only from a regular file (a
symbolic link planted in its place is refused).
"""

from __future__ import annotations

import os
import shlex
import socket
import stat
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchwarden.suites.arms.isolation import BASE_UTILITIES
from benchwarden.suites.arms.tasks import Arm, FunctionTool, McpServer, Service, State, Suite
from benchwarden.suites.arms.tracker import functions
from benchwarden.suites.arms.tracker.operations import Tracker
from benchwarden.suites.arms.tracker.seed import seed
from benchwarden.suites.arms.tracker.tasks import AGENT, TASKS

BENCH_VERSION = "tracker-1"

BASE_PROMPT = f"""You work in a small issue tracker on behalf of the user whose login is \
`{AGENT}`. Complete the task below using only the tools you are given. Issues and pull \
requests share one number sequence. When you are done, reply with a short final report \
and no tool call; when the task is a question, the final report is the answer."""

CLI_BOOTSTRAP = """Reach the tracker with the `tracker` command through the `shell` tool. \
`tracker --help`, `tracker issue --help`, `tracker pr --help` and `tracker label --help` \
describe the subcommands. Besides `tracker`, only basic text utilities (grep, head, \
sort, wc, jq, ...) are available; other programs are refused."""

HTTP_BOOTSTRAP = """Reach the tracker's REST API with `curl` through the `shell` tool. \
Its base URL is in the environment variable TRACKER_URL; `curl -s "$TRACKER_URL/"` \
lists the routes. Send JSON bodies with -H 'Content-Type: application/json' -d '{...}'. \
Besides `curl`, only basic text utilities (grep, head, sort, wc, jq, ...) are available; \
other programs are refused."""

TOOLS_BOOTSTRAP = """Reach the tracker with the functions you are given (list_issues, \
show_issue, comment, ...). You have no shell."""

MCP_BOOTSTRAP = """Reach the tracker with the tools of its MCP server, which you are \
given (list_issues, show_issue, comment, ...). You have no shell."""

ARMS = (
    Arm("cli", "shell", CLI_BOOTSTRAP, allowed_commands=BASE_UTILITIES | {"tracker"}),
    Arm("http", "shell", HTTP_BOOTSTRAP, allowed_commands=BASE_UTILITIES | {"curl"},
        network_commands=frozenset({"curl"})),
    Arm("tools", "functions", TOOLS_BOOTSTRAP),
    Arm("mcp", "mcp", MCP_BOOTSTRAP),
)


class TrackerEnvironment:
    """One fresh tracker for one trial of one arm."""

    def __init__(self, arm: Arm, directory: Path) -> None:
        self.arm = arm
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.database = self.directory / "tracker.sqlite"
        self.tracker = Tracker.create(self.database, user=AGENT)
        self.bin = self.directory / "bin"
        self.bin.mkdir(exist_ok=True)
        self.port: int | None = None
        self.package_root = Path(__file__).resolve().parents[4]
        if arm.name == "cli":
            # The program carries the database path and import path itself, so the
            # agent's environment names neither.
            package_root = self.package_root
            program = self.bin / "tracker"
            program.write_text(
                "#!/bin/sh\n"
                f"TRACKER_DB={shlex.quote(str(self.database))} "
                f"PYTHONPATH={shlex.quote(str(package_root))} "
                f"exec {shlex.quote(sys.executable)} "
                "-m benchwarden.suites.arms.tracker.cli \"$@\"\n")
            program.chmod(program.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        if arm.name == "http":
            # Any port works inside the boundary's own network namespace; a free one on
            # the host keeps `--isolation none` working too.
            self.port = free_port()

    @property
    def url(self) -> str | None:
        return f"http://127.0.0.1:{self.port}" if self.port is not None else None

    def seed(self) -> None:
        seed(self.tracker)

    def capture_state(self) -> State:
        mode = os.lstat(self.database).st_mode
        if not stat.S_ISREG(mode):
            raise ValueError(f"{self.database.name} is no longer a regular file")
        return self.tracker.capture_state()

    def destroy(self) -> None:
        pass  # the trial's boundary ends the server; the trial removes the directory

    def services(self) -> Sequence[Service]:
        """The http arm's REST server, run inside the trial's boundary."""
        if self.port is None:
            return ()
        return (Service("tracker-rest",
                        [sys.executable, "-m", "benchwarden.suites.arms.tracker.server",
                         "--database", str(self.database),
                         "--port", str(self.port), "--user", AGENT],
                        env=self._server_env(), cwd=str(self.directory), ready_port=self.port),)

    def mcp_servers(self) -> Sequence[McpServer]:
        """The mcp arm's server: the tracker's MCP server over this trial's database,
        started by the trial inside its boundary."""
        if self.arm.channel != "mcp":
            return ()
        return (McpServer("tracker", [sys.executable, "-m",
                                      "benchwarden.suites.arms.tracker.mcp_server",
                                      "--database", str(self.database), "--user", AGENT],
                          env=self._server_env(), cwd=str(self.directory)),)

    def _server_env(self) -> dict[str, str]:
        return {"PYTHONPATH": str(self.package_root), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}

    def read_only_paths(self) -> Sequence[Path]:
        """The arm's own program and its configuration: never writable by the agent."""
        return (self.bin,)

    def agent_env(self) -> Mapping[str, str]:
        env = {"PATH": os.pathsep.join([str(self.bin), "/usr/local/bin", "/usr/bin", "/bin"]),
               "TRACKER_USER": AGENT}
        if self.url is not None:
            env["TRACKER_URL"] = self.url
        return env

    def network_origins(self) -> Sequence[str]:
        """The one place the http arm's curl may go: this trial's REST server."""
        return (self.url,) if self.url is not None else ()

    def functions(self) -> Sequence[FunctionTool]:
        return functions.FUNCTIONS if self.arm.channel == "functions" else ()

    def call_function(self, name: str, arguments: Mapping[str, Any]) -> str:
        return functions.call(self.tracker, name, arguments)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def make_environment(arm: Arm, directory: Path) -> TrackerEnvironment:
    return TrackerEnvironment(arm, directory)


SUITE = Suite(
    name="tracker",
    bench_version=BENCH_VERSION,
    base_prompt=BASE_PROMPT,
    arms=ARMS,
    tasks=TASKS,
    environment=make_environment,
    description="A local SQLite issue tracker reached through a CLI, a REST API, function "
                "tools or an MCP server.",
)
