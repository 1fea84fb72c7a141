"""The contamination HTML page, from in-memory reports: escaping, sections, no network."""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec
import pytest

from benchwarden.suites.contamination.html import render_html
from benchwarden.suites.contamination.report import ContaminationReport

HOSTILE = ("<script>document.title='PWNED';window.__pwned=1</script>"
           "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">"
           " it's \"quoted\" & \u2028 separated </pre></details>")

CANARIES = ["XK-AZURE-HERON-41", "QT-CRIMSON-OTTER-07", "ZB-AMBER-FALCON-93", "WM-COBALT-LYNX-18"]
TOPICS = ["a lighthouse warns ships at night", "bees make honey from nectar",
          "a sundial tells the time from a shadow", "tides follow the pull of the moon"]


def _reply(text: str, tokens: int = 40, reasoning: str = "") -> dict[str, Any]:
    return {"reasoning": reasoning, "text": text, "tool_calls": [], "finish_reason": "stop",
            "completion_tokens": tokens, "usage_reported": True, "prompt_tokens": 90,
            "cached_prompt_tokens": 64, "saw_done": True}


def _answer(probe: int) -> str:
    return f"{CANARIES[probe]}\nIn short, {TOPICS[probe]}: a short answer.\n{CANARIES[probe]}"


def _outcome(sent: float, first: float | None, last: float | None, reply: dict | None,
             error: str | None = None) -> dict[str, Any]:
    return {"timings": {"sent_at": sent, "first_byte_at": first, "first_content_at": first,
                        "last_byte_at": last},
            "reply": reply, "error": error, "status": 200 if error is None else 500, "extra": {}}


def sample_report(*, verdict_kind: str = "fail") -> dict[str, Any]:
    """A run of 4 probes over rungs c2, c4, c8 and the post-check on a 4-slot server:
    probe 1 diverges at c8, probe 2 leaks probe 3's canary (with a hostile payload) at
    c4, probe 3 is persistent in the post-check."""
    clock = 1_790_000_000.0
    requests: list[dict[str, Any]] = []

    def add(leg: str, probe: int, slot: int, outcome: dict, scored: bool = True,
            repeat: int = 1) -> None:
        requests.append({"leg": leg, "probe": probe, "slot": slot, "repeat": repeat,
                         "scored": scored, "outcome": outcome})

    for leg in ("prime", "ref_a", "ref_b"):
        for probe in range(4):
            add(leg, probe, probe,
                _outcome(clock, clock + 0.05, clock + 0.4, _reply(_answer(probe))))
            clock += 0.5
    replies = {
        ("c8", 1): _answer(1).replace("a short answer", "a shorter answer"),
        ("c4", 2): _answer(2) + f"\nAlso {CANARIES[3]} {HOSTILE}",
    }
    rungs = []
    for concurrency in (2, 4, 8):
        label = f"c{concurrency}"
        slots = max(concurrency, 4)
        for slot in range(slots):
            probe = slot % 4
            start = clock + slot * 0.0004
            wave = slot // 4  # the server runs at most 4 streams at once
            first = clock + 0.03 + wave * 0.4
            text = replies.get((label, probe), _answer(probe)) if slot < 4 else _answer(probe)
            add(label, probe, slot, _outcome(start, first, first + 0.35, _reply(text)),
                scored=slot < 4)
        rungs.append({"label": label, "concurrency": concurrency, "repeat": 1, "slots": slots,
                      "peak_in_flight": min(concurrency, 4), "launch_skew_ms": (slots - 1) * 0.4,
                      "observed_parallelism": min(concurrency, 4)})
        clock += 1.5
    for probe in range(4):
        text = _answer(probe) if probe != 3 else _answer(3).replace("moon", "mooon")
        add("post", probe, probe, _outcome(clock, clock + 0.05, clock + 0.4, _reply(text)))
        clock += 0.5

    at_c8 = _answer(1).index("a short answer") + len("a short")
    at_post = _answer(3).index("moon") + 3
    cells = []
    for probe in range(4):
        for leg in ("c2", "c4", "c8", "post"):
            cell: dict[str, Any] = {"probe": probe, "leg": leg, "repeat": 1, "class": "identical"}
            if (leg, probe) == ("c8", 1):
                cell.update({"class": "diverged", "at": at_c8 + 1,
                             "detail": "stream differs from its solo reference"})
            elif (leg, probe) == ("c4", 2):
                cell.update({"class": "contaminated", "foreign": CANARIES[3]})
            elif (leg, probe) == ("post", 3):
                cell.update({"class": "persistent", "at": at_post + 1})
            cells.append(cell)
    verdict = {"kind": verdict_kind,
               "reason": "1 CONTAMINATED (1 foreign canaries) · 1 PERSISTENT (survived into solo "
                         f"requests) · 1 diverged; earliest divergence at char {at_c8 + 1}"}
    return {
        "schema": "benchwarden.report/1", "suite": "contamination", "bench_version": "1",
        "run": {"id": "run-2026-11-30-abc", "suite": "contamination", "bench_version": "1",
                "config": {"concurrency": [2, 4, 8], "probes": 4}, "seeds": [7],
                "target": {"url": "http://127.0.0.1:8080", "model": "smollm2 <b>bold</b>"},
                "package_version": "0.1.0", "git_sha": "0123456789abcdef", "host": {"os": "Linux"},
                "started_at": 1_790_000_000.0, "ended_at": clock, "status": "completed",
                "resumed_from": None},
        "verdict": verdict,
        "score": {"prompts": 4, "rungs": 3, "compared": 16, "identical": 13, "diverged": 1,
                  "contaminated": 1, "persistent": 1, "alone_unstable": 0, "unmeasured": 0,
                  "foreign_canaries": 1, "tokens_compared": 520, "earliest_divergence": at_c8 + 1},
        "cells": cells,
        "rungs": rungs,
        "probes": [{"index": i, "canary": c, "topic": t}
                   for i, (c, t) in enumerate(zip(CANARIES, TOPICS, strict=False))],
        "requests": requests,
    }


@pytest.fixture
def page() -> str:
    return render_html(sample_report())


def test_the_page_is_one_complete_document(page: str) -> None:
    assert page.startswith("<!DOCTYPE html>")
    assert page.rstrip().endswith("</html>")


def test_hostile_reply_text_is_escaped_everywhere(page: str) -> None:
    assert "<script>document.title" not in page
    assert "<img src=x" not in page
    assert "&lt;script&gt;document.title=&#x27;PWNED&#x27;" in page
    assert "&lt;img src=x onerror=&quot;" in page
    # the only script elements are the page's own: the JSON island and the helper
    assert page.count("<script") == 2
    # a model name is server-supplied too
    assert "<b>bold</b>" not in page


def test_the_embedded_json_reads_back_to_the_report(page: str) -> None:
    match = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page,
                      re.S)
    assert match
    island = match.group(1)
    assert "<" not in island and "\u2028" not in island
    # the typed report's own encoding: the file's fields kept, the derived ones added
    typed = ContaminationReport.from_json(sample_report())
    assert json.loads(island) == json.loads(msgspec.json.encode(typed))
    assert sample_report()["cells"] == [
        {key: value for key, value in cell.items() if key != "level"}
        for cell in json.loads(island)["cells"]]


def test_every_section_is_present(page: str) -> None:
    for ident in ("verdict", "score", "grid", "fidelity", "timeline", "run"):
        assert f'id="{ident}"' in page
    assert 'class="verdict verdict-fail"' in page


def test_every_grid_cell_links_to_an_existing_detail(page: str) -> None:
    targets = set(re.findall(r'<a class="cell-link" href="#([^"]+)"', page))
    assert len(targets) == 16
    for target in targets:
        assert f'id="{target}"' in page


def test_the_foreign_canary_is_highlighted_in_the_leaking_reply(page: str) -> None:
    assert f'<mark class="foreign">{CANARIES[3]}</mark>' in page


def test_the_first_differing_character_is_marked(page: str) -> None:
    # reference "a short answer" vs reply "a shorter answer": they part at the " "/"e"
    assert '<mark class="diverge"> </mark>' in page
    assert '<mark class="diverge">e</mark>' in page


def test_one_timeline_per_rung_and_a_fidelity_chart(page: str) -> None:
    assert page.count('class="chart timeline"') == 3
    assert 'class="chart grouped"' in page
    assert 'class="chart grid"' in page


def test_no_external_reference() -> None:
    page = render_html(sample_report())
    assert not re.search(r'(?:src|href)\s*=\s*["\']?\s*(?:https?:)?//', page, re.I)
    assert "@import" not in page and "@font-face" not in page and "url(" not in page


def test_an_almost_empty_report_still_renders() -> None:
    page = render_html({"schema": "benchwarden.report/1", "suite": "contamination",
                        "verdict": {"kind": "fail", "reason": "nothing measured: 0 comparisons"}})
    assert "nothing measured: 0 comparisons" in page
    assert 'id="grid"' in page


def test_a_pass_shows_a_pass_banner() -> None:
    page = render_html(sample_report(verdict_kind="pass"))
    assert 'class="verdict verdict-pass"' in page


def test_scored_timeline_lanes_link_to_their_cells(page: str) -> None:
    timelines = re.findall(r'<svg class="chart timeline".*?</svg>', page, re.S)
    links = [href for svg in timelines for href in re.findall(r'<a href="#([^"]+)">', svg)]
    assert len(links) == 4 * 3  # the scored slot of each probe in each rung
    assert all(f'id="{link}"' in page for link in links)


def test_a_serialising_server_shows_its_rungs_as_not_concurrent() -> None:
    report = sample_report()
    for rung in report["rungs"]:
        rung["peak_in_flight"] = 1
    page = render_html(report)
    shown = re.sub(r'<script type="application/json".*?</script>', "", page, flags=re.S)
    assert shown.count("not concurrent: cells unmeasured") == 3  # one per rung's row


# -- bench version 2: requests sent, failures, invalid bytes -------------------------------
XFF = b"\xff".decode("utf-8", "surrogateescape")


def test_rung_failures_and_requests_sent_are_stated() -> None:
    report = sample_report()
    rung = report["rungs"][2]
    rung.pop("slots")
    rung.update(requests_sent=8, requests_failed=2, failures={"HTTP 500": 2},
                unmeasured_reason="rung c8: 2 of 8 requests failed: HTTP 500 ×2")
    report["rungs"][0].update(requests_sent=4)  # c2 sends one request per probe
    page = render_html(report)
    assert "requests sent in the rung" in page and ">slots<" not in page
    assert "rung c8: 2 of 8 requests failed: HTTP 500 ×2: cells unmeasured" in page
    assert "sent 4 requests, more than the 2 its label names" in page


def test_a_report_from_bench_version_1_still_shows_its_request_counts() -> None:
    page = render_html(sample_report())  # rungs carry `slots`
    assert re.search(r"<td[^>]*>4</td>", page)


def _with_byte_reply(text: str) -> dict[str, Any]:
    from benchwarden.targets.replies import RequestOutcome

    report = sample_report()
    for request in report["requests"]:
        if request["leg"] == "c8" and request["probe"] == 1 and request["scored"]:
            outcome = RequestOutcome.from_json_dict(request["outcome"])
            reply = dict(request["outcome"]["reply"], text=text)
            stored = RequestOutcome.from_json_dict({**request["outcome"], "reply": reply})
            request["outcome"] = stored.to_json_dict()  # the client's stored form
            assert outcome.timings == stored.timings
    return report


def test_an_invalid_byte_in_a_reply_is_a_boxed_chip_never_a_replacement() -> None:
    page = render_html(_with_byte_reply(_answer(1) + " byte " + XFF + " and \\xff as text"))
    page.encode("utf-8")  # the page is always valid UTF-8
    assert "\ufffd" not in page
    assert '<span class="ctl byte" title="invalid UTF-8 byte 0xFF">\\xff</span>' in page
    # the literal four characters are not boxed
    assert "and \\xff as text" in page
    assert page.count('title="invalid UTF-8 byte 0xFF"') == 1


def test_a_lone_surrogate_anywhere_else_is_written_as_text() -> None:
    report = sample_report()
    report["warnings"] = ["server said " + XFF]
    page = render_html(report)
    page.encode("utf-8")
    assert "server said \\xff" in page


# -- what the page embeds of a real engine's listed requests -----------------------------------

def _logprobs(tokens: int, candidates: int = 5) -> list[dict[str, Any]]:
    return [{"token": f" word{index}", "logprob": -0.1 * index,
             "top": [{"token": f" other{k}", "logprob": -1.0 - k} for k in range(candidates)]}
            for index in range(tokens)]


def _with_logprobs(report: dict[str, Any], every: int, tokens: int) -> dict[str, Any]:
    """The report with token logprobs in every `every`-th request's reply."""
    requests = []
    for index, request in enumerate(report["requests"]):
        reply = request["outcome"]["reply"]
        if reply is not None and index % every == 0:
            request = {**request, "outcome": {**request["outcome"],
                                              "reply": {**reply, "token_logprobs":
                                                        _logprobs(tokens)}}}
        requests.append(request)
    return {**report, "requests": requests}


def _island(page: str) -> dict[str, Any]:
    match = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page,
                      re.S)
    assert match
    return json.loads(match.group(1))  # type: ignore[no-any-return]


@pytest.mark.parametrize("every", [1, 3])
def test_the_page_embeds_the_report_without_token_logprobs_and_says_so(every: int) -> None:
    report = _with_logprobs(sample_report(), every, tokens=7)
    page = render_html(report)
    island = _island(page)
    whole = json.loads(msgspec.json.encode(ContaminationReport.from_json(report)))
    with_them = [index for index, request in enumerate(whole["requests"])
                 if (request["outcome"].get("reply") or {}).get("token_logprobs")]
    assert with_them and len(island["requests"]) == len(whole["requests"])
    for index, (embedded, request) in enumerate(zip(island["requests"], whole["requests"],
                                                    strict=True)):
        reply = request["outcome"].get("reply")
        if index in with_them:
            assert embedded["outcome"]["reply"] == {
                **{key: value for key, value in reply.items() if key != "token_logprobs"},
                "token_logprobs_left_out": 7}
            assert {**embedded, "outcome": None} == {**request, "outcome": None}
        else:
            assert embedded == request
    assert {key: value for key, value in island.items() if key != "requests"} == {
        key: value for key, value in whole.items() if key != "requests"}
    assert f"The token logprobs of {len(with_them)} listed requests" in page
    assert "benchwarden show run-2026-11-30-abc --json FILE" in page
    # what the page draws is the same with and without them: only the island and the note
    note = re.search(r'<p class="note">The token logprobs of .*?</p>', page)
    assert note
    assert _drawn(page.replace(note.group(0), "")) == _drawn(render_html(sample_report()))


def _drawn(page: str) -> str:
    return re.sub(r'<script type="application/json" id="report-data">.*?</script>', "", page,
                  flags=re.S)


def test_a_report_without_token_logprobs_embeds_as_it_is() -> None:
    page = render_html(sample_report())
    assert "token logprobs" not in page and "token_logprobs_left_out" not in page
    typed = ContaminationReport.from_json(sample_report())
    assert _island(page) == json.loads(msgspec.json.encode(typed))


def _full_listing(base: dict[str, Any]) -> dict[str, Any]:
    """`base` listing what a report lists at most: 24 rungs of 128 requests, each a copy
    of one of its ballast requests."""
    template = next(r for r in base["requests"] if r["leg"] == "c8" and not r["scored"])
    requests = [r for r in base["requests"] if r["leg"] in ("prime", "ref_a", "ref_b", "post")]
    rungs = []
    for rung in range(24):
        label = f"c{128 + rung}"
        rungs.append({"label": label, "concurrency": 128 + rung, "repeat": 1, "slots": 128,
                      "peak_in_flight": 4, "launch_skew_ms": 1.0, "observed_parallelism": 4})
        requests += [{**template, "leg": label, "slot": slot, "probe": slot % 4}
                     for slot in range(128)]
    return {**base, "rungs": rungs, "requests": requests}


def test_a_real_engine_s_full_listing_stays_under_twenty_megabytes() -> None:
    """24 rungs of 128 listed requests, each reply 64 tokens with five candidates (what
    a llama.cpp soak lists): 33 MB of page when the logprobs were embedded."""
    report = _with_logprobs(_full_listing(sample_report()), 1, tokens=64)
    whole = len(msgspec.json.encode(ContaminationReport.from_json(report)))
    page = render_html(report).encode()
    assert whole > 20_000_000 > len(page)


# -- replies of tens of thousands of characters (a reasoning model, a long --max-tokens) ------

FILLER = "a long preamble before the answer; " * 600  # 21,000 characters


def _lengthened(report: dict[str, Any]) -> dict[str, Any]:
    """`report` with `FILLER` before every reply's text: each divergence that much later."""
    requests = []
    for request in report["requests"]:
        reply = request["outcome"].get("reply")
        if reply is not None:
            request = {**request, "outcome": {**request["outcome"], "reply": {
                **reply, "text": FILLER + reply["text"]}}}
        requests.append(request)
    cells = [{**cell, "at": cell["at"] + len(FILLER)} if cell.get("at") is not None else cell
             for cell in report["cells"]]
    return {**report, "requests": requests, "cells": cells}


def _stream_texts(page: str) -> list[str]:
    """The characters each drawn reply stream shows (its markup and elisions removed)."""
    import html as html_module

    streams = re.findall(r'<pre class="text stream">(.*?)</pre>', page, re.S)
    # a separator is one character drawn as a labelled chip: counted as one
    return [html_module.unescape(re.sub(r"<[^>]+>", "", re.sub(
        r'<span class="ctl"[^>]*>.*?</span>', "#", re.sub(
            r'<span class="elided">.*?</span>', "", stream)))) for stream in streams]


def test_long_replies_are_drawn_in_a_window_around_what_the_cell_shows() -> None:
    from benchwarden.suites.contamination.html import STREAM_DRAWN

    page = render_html(_lengthened(sample_report()))
    streams = _stream_texts(page)
    assert streams and all(len(stream) <= STREAM_DRAWN for stream in streams)
    # the diverged cell's reply: the first differing character drawn and marked, the
    # filler before it said to be left out, with its count
    diverged = re.search(r'id="cell-1-c8".*?</details>', page, re.S)
    assert diverged and '<mark class="diverge">' in diverged.group(0)
    left_before = re.findall(r"\[([\d,]+) characters before not shown", diverged.group(0))
    assert left_before and all(int(count.replace(",", "")) > len(FILLER) - STREAM_DRAWN
                               for count in left_before)
    # the leaked canary is drawn marked in its cell
    leaked = re.search(r'id="cell-2-c4".*?</details>', page, re.S)
    assert leaked and f'<mark class="foreign">{CANARIES[3]}</mark>' in leaked.group(0)
    # a short reply is drawn whole, as before
    assert all("not shown" not in stream for stream in re.findall(
        r'<pre class="text stream">(.*?)</pre>', render_html(sample_report()), re.S))


def test_long_replies_are_embedded_cut_and_say_how_much_they_lost() -> None:
    from benchwarden.suites.contamination.html import TEXT_EMBEDDED, TEXT_LEFT_OUT_KEY

    report = _lengthened(sample_report())
    island = _island(render_html(report))
    whole = json.loads(msgspec.json.encode(ContaminationReport.from_json(report)))
    for embedded, request in zip(island["requests"], whole["requests"], strict=True):
        reply = request["outcome"].get("reply")
        if reply is None:
            assert embedded == request
            continue
        kept = embedded["outcome"]["reply"]
        assert kept["text"] == reply["text"][:TEXT_EMBEDDED]
        assert kept[TEXT_LEFT_OUT_KEY] == {"text": len(reply["text"]) - TEXT_EMBEDDED}
        assert {key: value for key, value in kept.items()
                if key not in ("text", TEXT_LEFT_OUT_KEY)} == {
            key: value for key, value in reply.items() if key != "text"}
        assert {**embedded, "outcome": None} == {**request, "outcome": None}
    assert {key: value for key, value in island.items() if key != "requests"} == {
        key: value for key, value in whole.items() if key != "requests"}


def test_a_full_listing_of_long_replies_stays_under_twenty_megabytes() -> None:
    """24 rungs of 128 listed requests, each reply 21,000 characters (a long
    --max-tokens): the report file is over 60 MB, the page well under 20."""
    report = _full_listing(_lengthened(sample_report()))
    whole = len(msgspec.json.encode(ContaminationReport.from_json(report)))
    page = render_html(report).encode()
    assert whole > 60_000_000 and len(page) < 20_000_000
