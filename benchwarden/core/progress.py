"""Progress of a long leg, shown the way the reader can see it: a live rich bar on a
terminal, and plain lines on a stream that is not one (CI logs, `2> log`, a pipe).

A rich bar on a non-terminal prints nothing until it stops, so a 143 s contamination run
used to be silent in a CI log. `progress_bar(...)` takes the same arguments as
`rich.progress.Progress` and returns one on a terminal; otherwise a `PlainProgress`, the
same class with its live display off, which prints one line per task whenever the task
crosses another `step_percent` of its total (at most one line per `min_seconds`) or
`every_seconds` pass without a line, and once when it completes. A suite swaps
`Progress(` for `progress_bar(` and nothing else.

Invariants:
- The same columns say the same things in both forms: a plain line is the text the
  bar's own columns render (description, done/total, elapsed, bytes, speed), without
  the bar itself.
- When to print is decided by `Cadence.due`, a pure function of (progress, time): no
  clock is read there, so it is tested in memory.
- `disable=True` prints nothing in either form; progress is only ever shown, never
  relied on, and never goes to stdout unless the console given writes there.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn, Task, TaskID
from rich.text import Text

PLAIN_STEP_PERCENT = 10
PLAIN_EVERY_SECONDS = 30.0
PLAIN_MIN_SECONDS = 5.0


@dataclass(frozen=True)
class Cadence:
    """When a plain progress line is due: each `step_percent` of the total crossed (but
    not sooner than `min_seconds` after the last line, so a leg of a few seconds says
    only where it starts and ends), or `every_seconds` since the last line (the only
    rule when the total is unknown)."""

    step_percent: int = PLAIN_STEP_PERCENT
    every_seconds: float = PLAIN_EVERY_SECONDS
    min_seconds: float = PLAIN_MIN_SECONDS

    def step_of(self, completed: float, total: float | None) -> int | None:
        """The last whole step reached, or None when there is no total to share."""
        if not total or total <= 0:
            return None
        percent = min(100.0, max(0.0, completed * 100.0 / total))
        return int(percent // self.step_percent) * self.step_percent

    def due(self, *, completed: float, total: float | None, now: float,
            last_step: int | None, last_time: float) -> bool:
        quiet_for = now - last_time
        step = self.step_of(completed, total)
        if step is not None and (last_step is None or step > last_step) \
                and quiet_for >= self.min_seconds:
            return True
        return quiet_for >= self.every_seconds


def plain_line(columns: tuple[ProgressColumn | str, ...], task: Task) -> str:
    """What the bar's columns say about `task`, as one line of text (no bar, no spinner)."""
    parts: list[str] = []
    for column in columns:
        if isinstance(column, (BarColumn, SpinnerColumn)):
            continue
        if isinstance(column, str):
            rendered: Any = Text.from_markup(column.format(task=task))
        else:
            rendered = column(task)
        if isinstance(rendered, Text):
            parts.append(rendered.plain)
        elif isinstance(rendered, str):
            parts.append(Text.from_markup(rendered).plain)
    line = " ".join(" ".join(parts).split())
    if task.total:
        line += f" ({min(100.0, task.completed * 100.0 / task.total):.0f}%)"
    return line


class PlainProgress(Progress):
    """A `rich.progress.Progress` whose live display is off; it prints plain lines on
    its console at the pace `cadence` sets instead (see the module docstring)."""

    def __init__(self, *columns: str | ProgressColumn, console: Console | None = None,
                 disable: bool = False, cadence: Cadence | None = None,
                 clock: Callable[[], float] = time.monotonic, **options: Any) -> None:
        options.pop("transient", None)  # nothing live to clear
        super().__init__(*columns, console=console, disable=True, **options)
        self.quiet = disable
        self.cadence = cadence or Cadence()
        self.clock = clock
        self._last: dict[TaskID, tuple[int | None, float, float]] = {}

    def add_task(self, description: str, start: bool = True, total: float | None = 100.0,
                 completed: int = 0, visible: bool = True, **fields: Any) -> TaskID:
        task_id = super().add_task(description, start=start, total=total, completed=completed,
                                   visible=visible, **fields)
        # no line yet: a leg that ends (or fails) within `min_seconds` says only its end
        self._last[task_id] = (self.cadence.step_of(completed, total), self.clock(),
                               float(completed))
        return task_id

    def update(self, task_id: TaskID, **changes: Any) -> None:
        super().update(task_id, **changes)
        self._say(task_id)

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        super().advance(task_id, advance)
        self._say(task_id)

    def __exit__(self, kind: Any, value: Any, trace: Any) -> None:
        if kind is not None:
            self.quiet = True  # an error or a signal says what happened; no progress after it
        super().__exit__(kind, value, trace)

    def stop(self) -> None:
        """Say where every task ended, unless its last line already said so."""
        for task_id in list(self._last):
            task = self._tasks.get(task_id)
            if task is not None and task.completed != self._last[task_id][2]:
                self._say(task_id, force=True)
        super().stop()

    def _say(self, task_id: TaskID, *, force: bool = False) -> None:
        task = self._tasks.get(task_id)
        if task is None or self.quiet or not task.visible:
            return
        now = self.clock()
        last_step, last_time, last_completed = self._last.get(task_id, (None, now, -1.0))
        finished = bool(task.total) and task.completed >= (task.total or 0)
        if not force and task.completed == last_completed:
            return
        if not (force or finished or self.cadence.due(
                completed=task.completed, total=task.total, now=now,
                last_step=last_step, last_time=last_time)):
            return
        self._last[task_id] = (self.cadence.step_of(task.completed, task.total), now,
                               task.completed)
        self.console.print(plain_line(self.columns, task), markup=False, highlight=False,
                           soft_wrap=True)


def progress_bar(*columns: str | ProgressColumn, console: Console | None = None,
                 **options: Any) -> Progress:
    """A rich `Progress` on a terminal, a `PlainProgress` otherwise (same arguments)."""
    console = console or Console(stderr=True)
    if console.is_terminal:
        return Progress(*columns, console=console, **options)
    return PlainProgress(*columns, console=console, **options)


__all__ = ["Cadence", "PlainProgress", "plain_line", "progress_bar"]
