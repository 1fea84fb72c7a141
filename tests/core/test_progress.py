"""The shared progress display (`core.progress`): a rich bar on a terminal, plain lines
at a steady pace otherwise. The pace (`Cadence.due`) is pure and tested in memory; the
plain lines are printed to an in-memory console with a fake clock."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from benchwarden.core.progress import Cadence, PlainProgress, progress_bar


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=terminal, width=80), buffer


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_terminal_gets_the_rich_bar_and_a_log_the_plain_lines():
    terminal, _ = _console(True)
    log, _ = _console(False)
    assert not isinstance(progress_bar(console=terminal), PlainProgress)
    assert isinstance(progress_bar(console=terminal), Progress)
    assert isinstance(progress_bar(console=log), PlainProgress)


def test_plain_lines_say_what_the_columns_say_every_step_and_at_the_end():
    console, buffer = _console(False)
    clock = Clock()
    columns = (TextColumn("[bold]{task.description:>6}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("requests"))
    with PlainProgress(*columns, console=console, clock=clock, transient=True) as bar:
        task = bar.add_task("reach", total=40)
        for _ in range(40):
            clock.now += 2.0  # a step (4 requests) every 8 s: above min_seconds
            bar.update(task, description="c4", advance=1)
    lines = buffer.getvalue().splitlines()
    assert lines[0] == "c4 4/40 requests (10%)"
    assert lines[-1] == "c4 40/40 requests (100%)"
    # one line per 10 % crossed (none when the task starts): the last is 100 %
    assert len(lines) == 10
    assert all("━" not in line for line in lines)  # no bar characters in a log


def test_a_quick_leg_says_only_where_it_ends():
    console, buffer = _console(False)
    clock = Clock()
    with PlainProgress(TextColumn("{task.description}"), MofNCompleteColumn(),
                       console=console, clock=clock) as bar:
        task = bar.add_task("champion", total=28)
        for _ in range(28):
            clock.now += 0.01
            bar.advance(task)
    assert buffer.getvalue().splitlines() == ["champion 28/28 (100%)"]


def test_a_leg_that_fails_says_nothing_after_the_error():
    console, buffer = _console(False)
    clock = Clock()
    with pytest.raises(KeyboardInterrupt):
        with PlainProgress(TextColumn("{task.description}"), MofNCompleteColumn(),
                           console=console, clock=clock) as bar:
            task = bar.add_task("slow", total=56)
            bar.advance(task, 3)
            raise KeyboardInterrupt
    assert buffer.getvalue() == ""


def test_without_a_total_a_line_comes_every_so_many_seconds():
    console, buffer = _console(False)
    clock = Clock()
    bar = PlainProgress(TextColumn("{task.description}"), MofNCompleteColumn(), console=console,
                        clock=clock, cadence=Cadence(every_seconds=30))
    task = bar.add_task("resuming", total=None)
    for _ in range(100):
        clock.now += 1
        bar.advance(task, 1)
    bar.stop()
    lines = buffer.getvalue().splitlines()
    # one line per 30 s over 100 s, and where it ended
    assert lines[0].startswith("resuming 30")
    assert len(lines) == 3 + 1
    assert lines[-1].startswith("resuming 100")


def test_a_download_line_shows_bytes_from_the_same_columns():
    console, buffer = _console(False)
    bar = PlainProgress(TextColumn("engine: {task.description}"), BarColumn(), DownloadColumn(),
                        console=console, clock=Clock())
    task = bar.add_task("llama.tar.gz", total=77_000_000)
    bar.update(task, completed=77_000_000)
    bar.stop()
    assert buffer.getvalue().splitlines()[-1] == "engine: llama.tar.gz 77.0/77.0 MB (100%)"


def test_disabled_prints_nothing():
    console, buffer = _console(False)
    with progress_bar(TextColumn("x"), console=console, disable=True) as bar:
        task = bar.add_task("x", total=3)
        bar.advance(task, 3)
    assert buffer.getvalue() == ""


def test_elapsed_time_column_is_kept():
    console, buffer = _console(False)
    bar = PlainProgress(TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                        clock=Clock())
    task = bar.add_task("scoring", total=1)
    bar.advance(task)
    assert buffer.getvalue().startswith("scoring 0:00:0")


@given(total=st.integers(min_value=1, max_value=10_000),
       advances=st.lists(st.integers(min_value=0, max_value=500), max_size=60),
       step=st.sampled_from([5, 10, 25]))
def test_the_pace_is_at_most_one_line_per_step_when_time_stands_still(total, advances, step):
    cadence = Cadence(step_percent=step, every_seconds=30.0, min_seconds=0.0)
    completed, last_step, lines = 0, cadence.step_of(0, total), 0
    for advance in advances:
        completed = min(total, completed + advance)
        if cadence.due(completed=completed, total=total, now=0.0, last_step=last_step,
                       last_time=0.0):
            lines += 1
            last_step = cadence.step_of(completed, total)
    assert lines <= 100 // step
    reached = cadence.step_of(completed, total)
    assert last_step == reached  # no step crossed went unsaid


@given(seconds=st.floats(min_value=0, max_value=1e6, allow_nan=False))
def test_time_alone_makes_a_line_due_after_the_interval(seconds):
    cadence = Cadence(every_seconds=30.0, min_seconds=5.0)
    due = cadence.due(completed=0, total=None, now=seconds, last_step=None, last_time=0.0)
    assert due == (seconds >= 30.0)
    stepped = cadence.due(completed=50, total=100, now=seconds, last_step=40, last_time=0.0)
    assert stepped == (seconds >= 5.0)
