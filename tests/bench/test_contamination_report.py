"""`contamination_report.py`'s synthetic soaks: copies of a recorded run through the store
API, and with `--distinct` every copied scored reply its own, so the report's digested
reading must read every scored request (the worst case the bench measures)."""

from __future__ import annotations

from benchwarden.core.store import SQLiteStore
from benchwarden.suites.contamination.report import (
    PAYLOAD_FIELDS,
    PAYLOAD_TYPES,
    SOLO_LEGS,
    build_report,
)
from tests.bench.test_bench_contract import load
from tests.suites.contamination.test_digest import _same, write_run
from tests.suites.contamination.test_digest_fingerprints import _scored_reads


def _scored_texts(path) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """The references' texts by probe, and `(probe, text)` of every ok scored request."""
    with SQLiteStore(path, create=False, read_only=True) as store:
        info = store.latest_run("contamination")
        records = list(store.iter_records(run_id=info.run.run_id))
    references = {r.task: r.payload["outcome"]["reply"]["text"] for r in records
                  if r.arm == "ref_a"}
    scored = [(r.task, r.payload["outcome"]["reply"]["text"]) for r in records
              if r.arm not in SOLO_LEGS and r.task.isdigit()
              and r.payload["outcome"].get("reply") is not None]
    return references, scored


def test_a_distinct_soak_has_every_scored_reply_its_own_and_reads_them_all(tmp_path):
    bench = load("contamination_report")
    source = tmp_path / "recorded.sqlite"
    with SQLiteStore(source) as store:
        write_run(store, [["ok", "ok"], ["diverged", "ok", "ok"], ["ok", "failed"],
                          ["diverged", "ok", "ok"]], None, (True, True),
                  reference_logprobs=False)
    as_recorded = bench.ensure_synthetic(300, tmp_path, source)
    distinct = bench.ensure_synthetic(300, tmp_path, source, distinct=True)
    assert as_recorded != distinct and "distinct" in distinct.name

    references, scored = _scored_texts(distinct)
    assert len(scored) > 100
    assert len({text for _, text in scored}) == len(scored)
    assert not any(text == references[probe] for probe, text in scored)
    _, copied = _scored_texts(as_recorded)
    assert len({text for _, text in copied}) <= 4  # the recording's few replies, again

    for path, reads_every_one in ((distinct, True), (as_recorded, False)):
        with SQLiteStore(path, create=False, read_only=True) as store:
            run_id = store.latest_run("contamination").run.run_id
            read = _scored_reads(store, run_id)
            scored_requests = sum(
                1 for summary in store.iter_record_summaries(
                    suite="contamination", run_id=run_id, payload_fields=PAYLOAD_FIELDS,
                    payload_types=PAYLOAD_TYPES)
                if summary.arm not in SOLO_LEGS and summary.task.isdigit())
            assert (len(read) == scored_requests) is reads_every_one
            _same(build_report(store, run_id), build_report(store, run_id, digests=False))


def test_a_distinct_copy_of_replies_with_logprobs_still_spells_them(tmp_path):
    """A real engine's replies carry token logprobs: `--distinct` swaps each scored
    reply's last token for its marker, so the tokens still spell the reply and every
    divergence is classified from them (none "do not spell"), as the report classifies
    the same store read from every record."""
    bench = load("contamination_report")
    source = tmp_path / "recorded.sqlite"
    with SQLiteStore(source) as store:
        write_run(store, [["lp_ok", "lp_ok"], ["lp_ok", "lp_ok", "lp_ok"]], None,
                  (True, True))
    distinct = bench.ensure_synthetic(200, tmp_path, source, distinct=True)
    with SQLiteStore(distinct, create=False, read_only=True) as store:
        info = store.latest_run("contamination")
        scored = [r.payload["outcome"]["reply"] for r in store.iter_records(
            run_id=info.run.run_id) if r.arm not in SOLO_LEGS and r.task.isdigit()]
        built = build_report(store, info.run.run_id)
        _same(built, build_report(store, info.run.run_id, digests=False))
    assert len(scored) > 50
    for reply in scored:
        assert "".join(step["token"] for step in reply["token_logprobs"]) == reply["text"]
        assert reply["token_logprobs"][-1]["token"].startswith(" #")
    assert built.score.diverged == len(scored)
    points = [cell.divergence for cell in built.cells if cell.kind == "diverged"]
    assert points and all(point is not None for point in points)
    for point in points:  # classified at the swapped token, from the candidates there
        assert point.step == len(scored[0]["token_logprobs"]) - 1
        assert point.reply_token.startswith(" #") and point.reference_top
        assert "do not spell" not in point.reason
