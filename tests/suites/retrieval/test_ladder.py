"""The ladder: derived seeds, the hash-chained ledger, promotion, and failed challengers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchwarden.core.store import open_store
from benchwarden.suites.retrieval.ladder import (
    EXIT_DETHRONED,
    EXIT_HELD,
    Ladder,
    LedgerError,
    challenge,
    derive_seeds,
    leaderboard,
)
from benchwarden.suites.retrieval.sandbox import SandboxLimits

FILES = Path(__file__).with_name("strategy_files")
EXAMPLE = f"{FILES / 'entity_first.py'}:EntityFirst"
LIMITS = SandboxLimits(wall_seconds=60, cpu_seconds=5, memory_mb=512, open_files=32)


def test_seed_derivation_matches_known_values():
    # 0x74d32ae12264 is the first 12 hex digits of sha256(b"0123abcd:2026-11-30:0")
    assert 0x74D32AE12264 == 128450306318948
    assert derive_seeds("0123abcd", "2026-11-30", 3) == [
        128450306318948, 137813619309649, 16094357473486]
    assert len(derive_seeds("x", "2026-01-01")) == 12
    assert derive_seeds("x", "2026-01-01") != derive_seeds("x", "2026-01-02")
    with pytest.raises(ValueError):
        derive_seeds("x", "2026-01-01", 0)


def test_ledger_appends_in_a_chain_and_reads_back(tmp_path):
    ladder = Ladder(tmp_path)
    first = ladder.append({"kind": "note", "n": 1})
    second = ladder.append({"kind": "note", "n": 2})
    assert (first["seq"], second["seq"]) == (0, 1)
    assert second["prev_hash"] == first["hash"] and first["prev_hash"] == "0" * 64
    assert [entry["n"] for entry in ladder.entries()] == [1, 2]


def test_an_edited_ledger_line_is_named(tmp_path):
    ladder = Ladder(tmp_path)
    for n in range(3):
        ladder.append({"kind": "note", "n": n})
    lines = ladder.ledger_path.read_text().splitlines()
    edited = json.loads(lines[1])
    edited["n"] = 99
    lines[1] = json.dumps(edited)
    ladder.ledger_path.write_text("\n".join(lines) + "\n")
    with pytest.raises(LedgerError, match="line 2: contents do not match"):
        ladder.entries()


def test_a_removed_ledger_line_breaks_the_chain(tmp_path):
    ladder = Ladder(tmp_path)
    for n in range(3):
        ladder.append({"kind": "note", "n": n})
    lines = ladder.ledger_path.read_text().splitlines()
    ladder.ledger_path.write_text("\n".join([lines[0], lines[2]]) + "\n")
    with pytest.raises(LedgerError, match="line 2: chain broken"):
        ladder.entries()


def _challenge(ladder: Ladder, challenger: str, tmp_path: Path, **options):
    with open_store(tmp_path / "store.sqlite") as store:
        return challenge(ladder, challenger, store=store, base="feedface", date="2026-11-30",
                         seed_count=3, limits=LIMITS, **options)


def test_a_winning_challenger_is_promoted_with_provenance(tmp_path):
    ladder = Ladder(tmp_path / "ladder")
    result = _challenge(ladder, EXAMPLE, tmp_path)
    assert result.exit_code == EXIT_DETHRONED and result.outcome == "dethroned"
    entries = ladder.entries()
    assert [e["kind"] for e in entries] == ["genesis", "decision"]
    assert entries[0]["champion"]["name"] == "bm25"
    decision = entries[1]
    assert decision["seeds"] == derive_seeds("feedface", "2026-11-30", 3)
    assert len(decision["champion"]["composite"]) == len(decision["challenger"]["composite"]) == 3
    assert decision["verdict"]["dethroned"] and decision["decide_on"] == "composite"
    assert decision["bench_version"] == "3"
    promoted = ladder.directory / decision["promoted"]["path"]
    text = promoted.read_text()
    assert text.startswith("# Promoted to champion by `benchwarden ladder challenge`.")
    assert "feedface" in text.splitlines()[2]
    assert text.endswith((FILES / "entity_first.py").read_text())
    assert ladder.champion()["path"] == decision["promoted"]["path"]
    assert ladder.champion_spec().attribute == "EntityFirst"


def test_a_failed_challenger_holds_and_the_champion_stays(tmp_path):
    ladder = Ladder(tmp_path / "ladder")
    result = _challenge(ladder, f"{FILES / 'misbehaving.py'}:Crashes", tmp_path)
    assert result.exit_code == EXIT_HELD and result.outcome == "held"
    assert "crashed" in result.reason
    entry = ladder.entries()[-1]
    assert entry["challenger"]["failure"]["kind"] == "crash"
    assert entry["verdict"] is None
    assert ladder.champion()["name"] == "bm25"
    assert not (ladder.directory / "champions").exists()


def test_the_promoted_champion_defends_and_the_leaderboard_counts_it(tmp_path):
    ladder = Ladder(tmp_path / "ladder")
    _challenge(ladder, EXAMPLE, tmp_path)
    again = _challenge(ladder, "substring", tmp_path, decide_on="composite_guarded")
    assert again.exit_code == EXIT_HELD
    entries = ladder.entries()
    assert entries[-1]["decide_on"] == "composite_guarded"
    assert entries[-1]["champion"]["name"] == "entity_first:EntityFirst"
    board = leaderboard(entries)
    assert [reign["champion"] for reign in board] == ["bm25", "entity_first:EntityFirst"]
    assert board[1]["defences"] == 1 and board[1]["margin"] > 0


def test_a_champion_file_changed_after_promotion_is_refused(tmp_path):
    ladder = Ladder(tmp_path / "ladder")
    _challenge(ladder, EXAMPLE, tmp_path)
    promoted = ladder.directory / ladder.champion()["path"]
    promoted.write_text(promoted.read_text() + "\n# sneaky edit\n")
    with pytest.raises(LedgerError, match="changed since it was promoted"):
        ladder.champion_spec()


def test_two_challenges_at_once_are_decided_one_after_the_other(tmp_path):
    import threading

    ladder_dir = tmp_path / "ladder"
    results = {}

    def run(name: str, challenger: str) -> None:
        with open_store(tmp_path / f"{name}.sqlite") as store:
            results[name] = challenge(Ladder(ladder_dir), challenger, store=store, base="feedface",
                                      date="2026-11-30", seed_count=2, limits=LIMITS)

    threads = [threading.Thread(target=run, args=("a", EXAMPLE)),
               threading.Thread(target=run, args=("b", EXAMPLE))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    entries = Ladder(ladder_dir).entries()
    assert [e["kind"] for e in entries] == ["genesis", "decision", "decision"]
    # the second decision was scored against the champion the first one promoted
    assert entries[1]["outcome"] == "dethroned"
    assert entries[2]["champion"]["name"] == "entity_first:EntityFirst"
    assert entries[2]["outcome"] == "held"
    assert len(list((ladder_dir / "champions").glob("*.py"))) == 1


def test_the_isolation_and_what_was_hidden_are_recorded_in_the_decision(tmp_path):
    ladder = Ladder(tmp_path / "ladder")
    _challenge(ladder, "substring", tmp_path, isolation="none", initial_champion="substring")
    settings = ladder.entries()[-1]["settings"]
    assert settings["isolation"] == "none" and settings["sandbox"] is True
    assert str(ladder.directory.resolve()) in settings["hidden"]
    assert str((tmp_path / "store.sqlite").resolve()) in settings["hidden"]


def test_a_ladder_started_on_another_bench_version_is_refused_before_anything_runs(tmp_path):
    ladder = Ladder(tmp_path / "ladder")
    ladder.append({"kind": "genesis", "at": 0.0, "bench_version": "2",
                   "champion": {"name": "bm25", "builtin": True}})
    with pytest.raises(LedgerError, match="started on retrieval bench_version 2; .* "
                                          "bench_version 3") as refused:
        _challenge(ladder, "substring", tmp_path)
    assert "\n" not in str(refused.value)
    assert [entry["kind"] for entry in ladder.entries()] == ["genesis"]  # nothing decided
    assert not (tmp_path / "store.sqlite").exists() or _runs(tmp_path) == 0


def _runs(tmp_path: Path) -> int:
    with open_store(tmp_path / "store.sqlite") as store:
        return len(store.runs())
