"""A test suite: the tracker, but its environment names no network origins, so the gate
checks `curl` by name only and the OS boundary is the only wall between an allowed
curl and the host's loopback (test_escapes.py proves it holds)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from benchwarden.suites.arms.tracker.suite import SUITE as TRACKER
from benchwarden.suites.arms.tracker.suite import TrackerEnvironment


class OpenNetworkEnvironment(TrackerEnvironment):
    def network_origins(self) -> Sequence[str]:
        return ()


SUITE = dataclasses.replace(TRACKER, name="tracker-open-network",
                            environment=OpenNetworkEnvironment)
