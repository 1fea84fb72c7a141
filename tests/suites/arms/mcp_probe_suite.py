"""A test suite: the tracker, but its mcp arm's server is `probe_mcp_server.py`, a
hostile MCP server (test_mcp_arm.py proves the trial's boundary holds it)."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

from benchwarden.suites.arms.tasks import McpServer
from benchwarden.suites.arms.tracker.suite import SUITE as TRACKER
from benchwarden.suites.arms.tracker.suite import TrackerEnvironment

PROBE = Path(__file__).resolve().with_name("probe_mcp_server.py")


class ProbeEnvironment(TrackerEnvironment):
    def mcp_servers(self) -> Sequence[McpServer]:
        if self.arm.channel != "mcp":
            return ()
        return (McpServer("probe", [sys.executable, str(PROBE)],
                          env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                          cwd=str(self.directory)),)


SUITE = dataclasses.replace(TRACKER, name="tracker-mcp-probe", environment=ProbeEnvironment)
