"""The nouns a user composes to define an arms suite: tasks, arms, an environment.

A suite is plain data plus one environment factory:
- a `Task` has an id, a tier, an intent (what the agent is asked) and a checker;
- an `Arm` is a condition: a tool channel (`shell`, `functions` or `mcp`), the command
  names its shell may run, and the bootstrap prompt that tells the agent how to reach
  the system;
- an `Environment` is one fresh instance of the system under test, made per trial and
  never reused: `seed()`, `capture_state()`, `destroy()`, plus what an agent needs to
  reach it (`agent_env`, `functions`, `call_function`).

Invariants:
- Every arm of a suite gets the same base prompt; arms differ only in channel,
  allow-list and bootstrap.
- Outcomes are `pass` or `fail` with exactly one failure tag (`incorrect`,
  `confused`, `hung`); invalid trials and harness errors never become records.
- Names (the suite's, arms', tasks', tiers') are unique in their kind and hold at most
  `NAME_LIMIT` characters.
"""

from __future__ import annotations

import functools
import importlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from benchwarden.core import formatting as fmt

DEFAULT_TIERS: tuple[str, ...] = ("read", "single-mutation", "find-then-act", "multi-step")
NAME_LIMIT = 256
"""Characters a suite's, an arm's, a task's or a tier's name holds at most: a name is
written into every record and shown in every view (the coverage grid, the comparisons,
the trials), so 200 tasks of 20,000-character names made an 83 MB page."""

SUITE_NAME = "arms"
"""The suite's name in the store (here, not in `trial`, so that reading a report does
not import what running a trial needs: asyncio, the agents, bashlex's parser tables)."""
PASS = "pass"
FAIL = "fail"
FAILURE_TAGS: tuple[str, ...] = ("incorrect", "confused", "hung")
FLOOR = 3
"""A cell is covered at this many samples; fewer is partial, none is missing."""
ALL_PAIRS_UP_TO_ARMS = 8
"""Arms up to which a report compares every pair (28 pairs at 8). Past it, each arm is
compared with the baseline only (`views.pairs_compared`): pairs grow with the square of
the arms (1,225 at 50 arms, each a table of its own and a page's worth of its tasks),
and `arms compare A B` compares any pair left out."""

# A captured state: entity kind -> natural key -> field -> value. Values are JSON-able;
# list values that are order-free are stored sorted by the environment.
State = Mapping[str, Mapping[str, Mapping[str, Any]]]


@dataclass(frozen=True)
class CheckResult:
    """What a checker decided and, when it failed, every reason why."""

    passed: bool
    reasons: tuple[str, ...] = ()


class Checker(Protocol):
    """Decides a finished episode. Pure: reads only its arguments."""

    def check(self, *, report: str, seeded: State, final: State) -> CheckResult: ...


@dataclass(frozen=True)
class Task:
    id: str
    """Stable identifier; part of every record's address."""
    tier: str
    """One of the suite's tiers (`read`, `single-mutation`, ... by default)."""
    intent: str
    """The plain-language request the agent receives."""
    checker: Checker
    """Decides pass or fail from the final report and the environment's state."""


@dataclass(frozen=True)
class FunctionTool:
    """A function the model may call directly (the function-tools channel)."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    """JSON schema of the arguments object."""

    def to_openai(self) -> dict[str, Any]:
        return {"type": "function", "function": {
            "name": self.name, "description": self.description,
            "parameters": dict(self.parameters)}}


@dataclass(frozen=True)
class Arm:
    name: str
    """The condition's label; part of every record's address."""
    channel: Literal["shell", "functions", "mcp"]
    """`shell`: the agent gets one shell tool; `functions`: the environment's functions;
    `mcp`: the tools the environment's MCP servers list (`Environment.mcp_servers()`)."""
    bootstrap: str
    """Arm-specific instructions appended to the suite's base prompt."""
    allowed_commands: frozenset[str] = frozenset()
    """Command names the shell may run (shell arms). Always-denied names stay denied."""
    network_commands: frozenset[str] = frozenset()
    """Network tools this arm legitimately uses (e.g. `curl` for an HTTP arm)."""


@dataclass(frozen=True)
class Service:
    """A process an environment needs running inside the trial's boundary for the whole
    trial (e.g. its REST server). `ready_port`: the trial waits until 127.0.0.1:port
    accepts connections inside the boundary before the agent starts."""

    name: str
    argv: Sequence[str]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    ready_port: int | None = None


@dataclass(frozen=True)
class McpServer:
    """An MCP server an `mcp` arm reaches over the stdio transport. The trial starts it
    INSIDE its boundary (like a `Service`) and the harness's MCP client speaks to its
    stdin and stdout; `name` is the `server` of every transcript entry it answers."""

    name: str
    argv: Sequence[str]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None


class Environment(Protocol):
    """One fresh instance of the system under test, for exactly one trial.

    Optional methods (looked up with getattr, so older environments keep working):
    - `network_origins() -> Sequence[str]`: the URL prefixes an arm's network tools may
      reach in this trial (e.g. the REST server of the http arm); when given, every
      destination of a network tool must lie under one of them;
    - `services() -> Sequence[Service]`: processes the trial starts INSIDE its boundary
      before the agent begins (shell arms), e.g. the arm's own server: only the agent's
      commands, in the same network namespace, can reach them;
    - `read_only_paths() -> Sequence[Path]`: the arm's own program and its
      configuration inside the environment's folder; read-only inside the boundary;
    - `mcp_servers() -> Sequence[McpServer]`: the MCP servers of an `mcp` arm, started
      inside the trial's boundary for the episode (server names unique)."""

    def seed(self) -> None: ...

    def capture_state(self) -> State: ...

    def destroy(self) -> None: ...

    def agent_env(self) -> Mapping[str, str]:
        """Variables a shell agent needs (PATH entries first in `PATH`)."""
        ...

    def functions(self) -> Sequence[FunctionTool]: ...

    def call_function(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Run one function call; returns the text the model sees. Raises ValueError
        with a one-line message for a bad call (answered to the model, not a crash)."""
        ...


EnvironmentFactory = Callable[[Arm, Path], Environment]
"""Makes a fresh environment for `arm` inside the trial's own temporary directory."""


@dataclass(frozen=True)
class Suite:
    name: str
    """Also the record scope: cells deepen across runs of the same suite."""
    bench_version: str
    base_prompt: str
    arms: tuple[Arm, ...]
    tasks: tuple[Task, ...]
    environment: EnvironmentFactory
    tiers: tuple[str, ...] = DEFAULT_TIERS
    description: str = ""

    def __post_init__(self) -> None:
        for kind, names in (("suite", [self.name]), ("arm", [a.name for a in self.arms]),
                            ("task", [t.id for t in self.tasks]), ("tier", list(self.tiers))):
            long = next((name for name in names
                         if isinstance(name, str) and len(name) > NAME_LIMIT), None)
            if long is not None:
                raise ValueError(f"suite {self.name[:NAME_LIMIT]}: a {kind} name of "
                                 f"{len(long):,} characters (at most {NAME_LIMIT}): "
                                 f"{long[:60]!r}...")
            # counted once (a name counted against the whole list each time took minutes
            # for a suite of 333,000 tasks)
            duplicates = sorted(name for name, seen in Counter(names).items() if seen > 1)
            if duplicates:
                raise ValueError(f"suite {self.name}: duplicate {kind} names {duplicates}")
        unknown = sorted({t.tier for t in self.tasks} - set(self.tiers))
        if unknown:
            raise ValueError(f"suite {self.name}: tasks use tiers {unknown} not in {self.tiers}")

    @functools.cached_property
    def _by_name(self) -> tuple[dict[str, Arm], dict[str, Task]]:
        """Arms and tasks by name, made once: each trial looks its own up (a scan of a
        suite of 10,000 tasks per trial was most of a run's planning)."""
        return {arm.name: arm for arm in self.arms}, {task.id: task for task in self.tasks}

    def arm(self, name: str) -> Arm:
        found = self._by_name[0].get(name)
        if found is None:
            raise ValueError(f"suite {self.name} has no arm {name!r}; arms: "
                             f"{fmt.names([a.name for a in self.arms], 20)}")
        return found

    def task(self, task_id: str) -> Task:
        found = self._by_name[1].get(task_id)
        if found is None:
            raise ValueError(f"suite {self.name} has no task {task_id!r}; tasks: "
                             f"{fmt.names([t.id for t in self.tasks], 20)}")
        return found

    def prompt_for(self, arm: Arm) -> str:
        """The system prompt: the shared base prompt, then the arm's bootstrap."""
        return f"{self.base_prompt.strip()}\n\n{arm.bootstrap.strip()}\n"


BUILTIN_SUITES: dict[str, str] = {
    "tracker": "benchwarden.suites.arms.tracker.suite:SUITE",
}


def load_suite(spec: str) -> Suite:
    """A built-in suite by name, or a user's `package.module:attribute`."""
    target = BUILTIN_SUITES.get(spec, spec)
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"suite {spec!r} is neither a built-in suite "
                         f"({', '.join(BUILTIN_SUITES)}) nor package.module:attribute")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"suite {spec!r}: cannot import {module_name}: {error}") from None
    except (Exception, SystemExit) as error:
        # the user's module ran and failed (a syntax error, an exception, a sys.exit at
        # import): its own one-line reason, never the harness's "unexpected" crash, and
        # never the exit code it asked for (3 would read as a ladder's "held")
        raise ValueError(f"suite {spec!r}: importing {module_name} failed: "
                         f"{type(error).__name__}: {error}") from None
    try:
        suite = getattr(module, attribute)
    except AttributeError:
        raise ValueError(f"suite {spec!r}: {module_name} has no attribute {attribute}") from None
    if callable(suite) and not isinstance(suite, Suite):
        try:
            suite = suite()
        except (Exception, SystemExit) as error:
            raise ValueError(f"suite {spec!r}: calling {module_name}.{attribute}() to make the "
                             f"suite failed: {type(error).__name__}: {error}") from None
    if not isinstance(suite, Suite):
        raise ValueError(f"suite {spec!r} is a {type(suite).__name__}, not an arms Suite")
    return suite
