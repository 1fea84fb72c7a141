"""`benchwarden report` on a run a ladder scored: the decision and the ledger history."""

from __future__ import annotations

from click.testing import CliRunner

from benchwarden.cli.main import cli
from benchwarden.core.store import open_store


def test_report_of_a_ladder_run_shows_the_decision_and_history(tmp_path) -> None:
    from benchwarden.suites.retrieval.ladder import Ladder, challenge

    store_path = tmp_path / "store.sqlite"
    with open_store(store_path) as store:
        result = challenge(Ladder(tmp_path / "ladder"), "dump", store=store, base="abc123",
                           date="2026-11-30", seed_count=3, initial_champion="substring")
    run_id = result.entry["challenger"]["run_id"]
    out = tmp_path / "ladder.html"
    invoked = CliRunner().invoke(
        cli, ["report", run_id, "--store", str(store_path), "--html", str(out)]
    )
    assert invoked.exit_code == 0, invoked.output
    page = out.read_text(encoding="utf-8")
    assert 'id="ladder"' in page and "first champion" in page
    assert 'class="chart diverging"' in page  # per-seed differences against the band
    assert "champion substring" in page and "challenger dump" in page
