"""The built-in `vouch` strategy: vouch-kb 1.5.0, for real, in process, in the boundary,
and as a ladder challenger decided on its scores. The offset conversion is pure and
tested over wide inputs.

vouch-kb is an optional extra; `make test` installs it. Under CI=true a missing vouch
fails these tests instead of skipping them, as the project does for its other real parts.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from benchwarden.cli.main import cli
from benchwarden.suites.retrieval import vouch_adapter
from benchwarden.suites.retrieval.corpus import generate
from benchwarden.suites.retrieval.driver import RunSettings, SeedTask, score_one_seed
from benchwarden.suites.retrieval.grading import contains_value, grade_pack
from benchwarden.suites.retrieval.sandbox import SandboxLimits
from benchwarden.suites.retrieval.strategies import StrategyLoadError, parse_strategy
from benchwarden.suites.retrieval.vouch_adapter import (
    VouchStrategy,
    byte_to_char_span,
    receipt_for,
    strip_markers,
)
from tests.conftest import bwrap_or_skip

LIMITS = SandboxLimits(wall_seconds=180, cpu_seconds=60, memory_mb=2048, open_files=64)


def vouch_or_skip() -> None:
    try:
        vouch_adapter.check_vouch_installed()
    except vouch_adapter.VouchUnavailable as error:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(error))




# -- pure parts ----------------------------------------------------------------------

def test_strip_markers_removes_match_markers_and_snippet_ellipses():
    assert strip_markers("Umar's «pager» «alias» is pelese.") == "Umar's pager alias is pelese."
    assert strip_markers("…the «folode» region") == "the folode region"
    assert strip_markers("no markers") == "no markers"


@given(st.text(max_size=40), st.data())
def test_byte_offsets_convert_to_the_same_characters(text, data):
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    encoded = text.encode("utf-8")
    byte_start = len(text[:start].encode("utf-8"))
    byte_end = byte_start + len(text[start:end].encode("utf-8"))
    assert byte_to_char_span(text, byte_start, byte_end) == (start, end)
    assert encoded[byte_start:byte_end].decode("utf-8") == text[start:end]


def test_byte_offsets_that_split_a_character_or_overflow_give_no_span():
    text = "café au lait"
    split = text.encode("utf-8").index("é".encode()) + 1
    assert byte_to_char_span(text, split, split + 2) is None
    assert byte_to_char_span(text, 0, 999) is None
    assert byte_to_char_span(text, 5, 3) is None


def test_a_receipt_shrinks_to_the_part_vouch_returned_and_is_never_guessed():
    session = "first line\nZoë's codename is lutido.\nlast"
    start = session.index("Zoë")
    byte_start = len(session[:start].encode("utf-8"))
    byte_end = byte_start + len("Zoë's codename is lutido.".encode())
    whole = receipt_for("Zoë's codename is lutido.", 2, session, byte_start, byte_end)
    assert whole == (2, start, start + len("Zoë's codename is lutido."))
    part = receipt_for("codename is lutido", 2, session, byte_start, byte_end)
    assert part is not None and session[part[1]:part[2]] == "codename is lutido"
    assert receipt_for("not in the line", 2, session, byte_start, byte_end) is None
    assert receipt_for("first line", 2, session, None, None) is None


# -- the real library ------------------------------------------------------------------

def test_vouch_packs_quote_the_corpus_with_receipts_that_verify():
    vouch_or_skip()
    corpus = generate(1)
    strategy = VouchStrategy()
    try:
        strategy.index(list(corpus.sessions))
        folder = strategy.folder
        assert folder is not None and (folder / ".vouch" / "claims").is_dir()
        seen = 0
        for case in corpus.cases:
            items = strategy.pack(case.question, 10, 2000)
            for item in items:
                assert "«" not in item.text and "»" not in item.text
                assert item.source is not None
                session, start, end = item.source
                assert corpus.session_text(session)[start:end] == item.text
                seen += 1
            if case.category == "receipt_coverage" and any(
                    contains_value(item.text, case.expected) for item in items):
                assert grade_pack(case, items, corpus.session_text).score == 1.0
        assert seen > 0
    finally:
        strategy.close()
    assert not folder.exists()  # close() removes the knowledge base


def test_vouch_in_the_boundary_scores_like_vouch_in_process():
    vouch_or_skip()
    bwrap_or_skip()
    spec = parse_strategy("vouch")
    inside = score_one_seed(SeedTask(spec, 4, RunSettings(sandbox=True, sandbox_limits=LIMITS)))
    assert inside.failure is None, inside.failure
    outside = score_one_seed(SeedTask(spec, 4, RunSettings(sandbox=False)))
    for field in ("score", "items"):
        assert ([p[field] for _, p, _, _ in inside.cases]
                == [p[field] for _, p, _, _ in outside.cases]), field


def test_ladder_challenge_with_vouch_is_decided_on_its_scores(tmp_path):
    vouch_or_skip()
    bwrap_or_skip()
    ladder_dir = tmp_path / "ladder"
    done = subprocess.run(
        [sys.executable, "-m", "benchwarden", "ladder", "challenge", "--challenger", "vouch",
         "--ladder", str(ladder_dir), "--base", "v0uch", "--date", "2026-11-30", "--seeds", "2",
         "--initial-champion", "substring", "--wall-seconds", "180", "--cpu-seconds", "60"],
        capture_output=True, text=True, timeout=900, env={**os.environ, "COLUMNS": "160"})
    assert done.returncode in (0, 3), done.stdout + done.stderr
    entry = json.loads((ladder_dir / "ledger.jsonl").read_text().splitlines()[-1])
    assert entry["challenger"]["name"] == "vouch" and entry["challenger"]["failure"] is None
    assert len(entry["challenger"]["composite"]) == 2
    assert entry["verdict"] is not None  # decided on the scores, not on a failure
    assert entry["settings"]["isolation"] == "bwrap"
    expected = 0 if entry["verdict"]["dethroned"] else 3
    assert done.returncode == expected
    assert entry["outcome"] == ("dethroned" if expected == 0 else "held")


def test_a_missing_vouch_is_a_one_line_error_naming_the_extra(monkeypatch, tmp_path):
    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(vouch_adapter.importlib.metadata, "version", not_installed)
    with pytest.raises(StrategyLoadError, match=r"pip install 'benchwarden\[vouch\]'"):
        parse_strategy("vouch")
    done = CliRunner().invoke(cli, ["ladder", "challenge", "--challenger", "vouch", "--ladder",
                                    str(tmp_path / "ladder"), "--base", "x", "--date", "2026-11-30",
                                    "--seeds", "2"])
    assert done.exit_code == 2
    assert "pip install 'benchwarden[vouch]'" in done.output
    assert len(done.output.strip().splitlines()) == 1
    assert not (tmp_path / "ladder" / "ledger.jsonl").exists()


def test_another_vouch_version_is_refused(monkeypatch):
    monkeypatch.setattr(vouch_adapter.importlib.metadata, "version", lambda name: "9.9.9")
    with pytest.raises(StrategyLoadError, match="found 9.9.9"):
        parse_strategy("vouch")
