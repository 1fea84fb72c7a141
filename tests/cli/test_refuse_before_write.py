"""A command refuses before it writes anything: a mistake found after one run was
recorded left a half-done comparison in the store (`retrieval compare --seeds 1`
scored two strategies, then said it needs two seeds). Each case below gives a bad
argument to a command that writes, and checks the store's bytes are unchanged (an
existing store) or that no store or folder was made (a new one)."""

from __future__ import annotations

import pytest

from tests.cli.test_store_commands import assert_one_line_error, bw, fingerprint, small_store

DEAD_URL = "http://127.0.0.1:9"  # nothing listens: a refusal must come before any request

REFUSED = {
    "compare one seed": (["retrieval", "compare", "--champion", "substring", "--challenger",
                          "fts5", "--seeds", "1"], "at least 2 seeds"),
    "compare unknown challenger": (["retrieval", "compare", "--champion", "substring",
                                    "--challenger", "nope", "--seeds", "1-2"], "nope"),
    "compare missing report": (["retrieval", "compare", "--champion", "substring",
                                "--challenger", "missing.json", "--seeds", "1-2"], "challenger"),
    "run bad seeds": (["retrieval", "run", "--strategy", "substring", "--seeds", "3-1"],
                      "N <= M"),
    "run negative limit": (["retrieval", "run", "--strategy", "substring", "--limit", "-1"],
                           "--limit"),
    "run unknown strategy": (["retrieval", "run", "--strategy", "nope"], "nope"),
    "contamination one probe": (["contamination", "--url", DEAD_URL, "--probes", "1"],
                                "--probes"),
    "contamination no url": (["contamination"], "--url"),
    "arms no trials": (["arms", "run", "--driver", "command", "--command", "true", "--arm",
                        "all", "--task", "all", "--trials", "0", "--isolation", "none"],
                       "trials"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_refused_command_leaves_an_existing_store_unchanged(tmp_path, case):
    args, words = REFUSED[case]
    folder = tmp_path / "kept"
    folder.mkdir()
    store = folder / "store.sqlite"
    small_store(store)
    before = fingerprint(folder)
    refused = bw(*args, "--store", str(store))
    assert_one_line_error(refused, 2, words)
    assert fingerprint(folder) == before


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_refused_command_makes_no_new_store(tmp_path, case):
    args, words = REFUSED[case]
    store = tmp_path / "new.sqlite"
    assert_one_line_error(bw(*args, "--store", str(store)), 2, words)
    assert not store.exists() and not (tmp_path / "new.sqlite.head").exists()


@pytest.mark.parametrize("extra, words", [
    (["--challenger", "nope"], "--challenger"),
    (["--challenger", "substring", "--date", "2026-13-01"], "--date"),
    (["--challenger", "substring", "--initial-champion", "gone.py:Strategy"],
     "--initial-champion"),
    (["--challenger", "substring", "--seeds", "1"], "--seeds"),
])
def test_a_refused_ladder_challenge_makes_no_ladder_folder(tmp_path, extra, words):
    ladder = tmp_path / "ladder"
    refused = bw("ladder", "challenge", "--ladder", str(ladder), "--isolation", "none", *extra)
    assert_one_line_error(refused, 2, words)
    assert not ladder.exists()
