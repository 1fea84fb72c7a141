"""Issue 8, section 1, end to end: no PASS for something that was not measured.

The real CLI (`python -m benchwarden contamination`, a child process) against fault
servers on loopback: a server that refuses what it cannot serve, a client out of file
descriptors, a server whose reply bytes change under concurrency. Each run is bounded
(a few rungs, short replies, a timeout on the child).
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes import FakeOpenAIServer
from tests.fakes.fault_servers import ByteServer, CapacityServer

CHILD_TIMEOUT = 300


def run_cli(url: str, tmp_path: Path, *extra: str, preexec_fn=None):
    report_path, page_path = tmp_path / "report.json", tmp_path / "report.html"
    command = [sys.executable, "-m", "benchwarden", "contamination", "--url", url,
               "--max-tokens", "64", "--seed", "11", "--no-progress",
               "--store", str(tmp_path / "store.sqlite"), "--json", str(report_path),
               "--html", str(page_path), *extra]
    result = subprocess.run(command, capture_output=True, text=True, timeout=CHILD_TIMEOUT,
                            env={**os.environ, "COLUMNS": "250"}, preexec_fn=preexec_fn)
    report = json.loads(report_path.read_text()) if report_path.exists() else None
    page = page_path.read_text(encoding="utf-8") if page_path.exists() else ""
    return result, report, page


def rung_cells(report, label):
    return [c for c in report["cells"] if c["leg"] == label]


def check_failed_rungs_are_unmeasured(report):
    """Every rung with a failed request has only unmeasured cells, each giving the
    rung's counted reason; the verdict names each such rung."""
    for rung in report["rungs"]:
        cells = rung_cells(report, rung["label"])
        if rung["requests_failed"]:
            reason = rung["unmeasured_reason"]
            assert reason.startswith(f"rung {rung['label']}: {rung['requests_failed']} of "
                                     f"{rung['requests_sent']} requests failed: ")
            assert cells and all(c["class"] == "unmeasured" and c["why"].startswith(reason)
                                 for c in cells), cells
            assert reason in report["verdict"]["reason"]
            assert sum(rung["failures"].values()) == rung["requests_failed"]


def test_a_server_refusing_beyond_its_capacity_fails_with_the_count(tmp_path):
    with CapacityServer(capacity=6) as server:
        result, report, page = run_cli(server.url, tmp_path, "--probes", "4",
                                       "--concurrency", "8,32")
    assert result.returncode == 1, result.stdout + result.stderr
    assert report["verdict"]["kind"] == "fail"
    c32 = next(r for r in report["rungs"] if r["label"] == "c32")
    failed = c32["requests_failed"]
    assert failed > 0 and c32["failures"] == {"HTTP 500": failed}
    assert f"rung c32: {failed} of 32 requests failed: HTTP 500 ×{failed}" in \
        report["verdict"]["reason"]
    assert sum(r["requests_failed"] for r in report["rungs"]) == server.refused
    assert all(r["peak_in_flight"] <= 6 for r in report["rungs"])
    check_failed_rungs_are_unmeasured(report)
    # the terminal and the page say what happened, in words
    assert f"{failed} of 32 requests failed (HTTP 500 ×{failed}): its cells are unmeasured" \
        in result.stdout
    assert "32 requests sent in the rung" in result.stdout and "FAIL" in result.stdout
    assert f"rung c32: {failed} of 32 requests failed: HTTP 500 ×{failed}" in page
    assert "requests sent in the rung" in page


def _few_file_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (96, 96))


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_NOFILE"), reason="no RLIMIT_NOFILE")
def test_a_client_out_of_file_descriptors_fails_with_the_count(tmp_path):
    with FakeOpenAIServer("clean", delta_delay=0.01) as server:
        result, report, _ = run_cli(server.url, tmp_path, "--probes", "4",
                                    "--concurrency", "128", preexec_fn=_few_file_descriptors)
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]
    assert report["verdict"]["kind"] == "fail"
    (c128,) = report["rungs"]
    failed = c128["requests_failed"]
    assert 0 < failed <= 128 and c128["requests_sent"] == 128
    assert c128["failures"].get("transport: Too many open files", 0) > 0, c128["failures"]
    match = re.search(r"rung c128: (\d+) of 128 requests failed: (.*?)\)",
                      report["verdict"]["reason"])
    assert match and int(match.group(1)) == failed
    assert "transport: Too many open files ×" in match.group(2)
    check_failed_rungs_are_unmeasured(report)
    assert "Too many open files" in result.stdout


def test_bytes_that_differ_under_concurrency_fail_even_though_both_are_invalid(tmp_path):
    with ByteServer() as server:
        result, report, page = run_cli(server.url, tmp_path, "--probes", "2",
                                       "--concurrency", "2,4")
    assert set(server.bytes_sent) == {ByteServer.ALONE, ByteServer.TOGETHER}
    assert result.returncode == 1, result.stdout + result.stderr
    assert report["verdict"]["kind"] == "fail"
    rungs = [c for c in report["cells"] if c["leg"] in ("c2", "c4")]
    assert rungs and {c["class"] for c in rungs} == {"diverged"}
    assert {c["class"] for c in report["cells"] if c["leg"] == "post"} == {"identical"}
    for cell in rungs:  # the excerpt shows both bytes escaped, never as U+FFFD
        assert 'reference "' in cell["detail"]
        assert "\\xff" in cell["detail"] and "\\xfe" in cell["detail"]
    json_text = (tmp_path / "report.json").read_text(encoding="utf-8")
    assert "\ufffd" not in json_text and "\ufffd" not in page and "\ufffd" not in result.stdout
    assert 'title="invalid UTF-8 byte 0xFF">\\xff</span>' in page
    assert 'title="invalid UTF-8 byte 0xFE">\\xfe</span>' in page
    assert "DIVERGED @ char" in result.stdout
