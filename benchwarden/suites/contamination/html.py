"""The contamination report as one self-contained HTML page.

`render_html(report)` reads only the suite's JSON report (as `build_report` returns
it) and draws: the verdict, the counters, the probe × leg grid coloured by class (each
cell opens its evidence: reference and reply side by side with the first differing
character marked, or the foreign canary highlighted), rung fidelity (peak in flight
against requested concurrency) and a per-request timeline per rung.

Invariants: every reply, canary, error and server string reaches the page through the
escaping helpers of `benchwarden.core.html`; the page needs no network. Missing optional
parts of the report (per-request outcomes, probes) shrink the page, never break it.

Invalid UTF-8: per-request outcomes are read back through `RequestOutcome.from_json_dict`
(the client's exact stored form), so a byte the server sent that was not UTF-8 is a lone
surrogate U+DC80..U+DCFF here. In a reply stream it is drawn as a boxed chip `\\xff`
(titled "invalid UTF-8 byte 0xFF"); literal text is never boxed, so a reply that wrote
the four characters `\\xff` stays distinguishable. Error lines are the client's own
(already valid text); any lone surrogate left anywhere else is written as `\\xNN`
text, so the page is always valid UTF-8: never U+FFFD in place of a byte.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from typing import Any, Iterable, Mapping, Sequence

import msgspec

from benchwarden.core import html as h
from benchwarden.suites.contamination.scoring import display_text
from benchwarden.targets.replies import RequestOutcome

# What each class means to a reader, in the order the legend lists them.
CLASS_STYLE: dict[str, tuple[str, str, str]] = {
    # class: (colour, short cell text, meaning)
    "identical": ("#1a7f37", "✓", "same stream as the solo reference"),
    "diverged": ("#e69f00", "≠", "differs from the solo reference under concurrency"),
    "contaminated": ("#cf222e", "LEAK", "another probe's canary appears in the reply"),
    "persistent": ("#8250df", "P≠", "differs in the solo post-check, after the rungs"),
    "alone_unstable": ("#9a6700", "A≠B", "the two solo references disagree"),
    "unmeasured": ("#8c959f", "?", "failed, too short, or its rung had a failed request "
                                    "or ran nothing together"),
}
UNKNOWN_STYLE = ("#57606a", "·", "")
WAITING = "#c8d1da"
BALLAST = "#6e9fc6"

SEPARATOR_CHIPS = {"\x01": "reasoning ▸ text", "\x02": "tool call", "\x03": "arguments",
                   "\x04": "finish"}

REFERENCE_LEGS = ("ref_a", "ref_b")


# ---------------------------------------------------------------------------- reading

def _canonical(reply: Mapping[str, Any]) -> str:
    """The compared form of a reply dict (same layout as the scoring module's)."""
    calls = "".join(f"\x02{call.get('name', '')}\x03{call.get('arguments', '')}"
                    for call in reply.get("tool_calls") or [])
    return (f"{reply.get('reasoning') or ''}\x01{reply.get('text') or ''}{calls}"
            f"\x04{reply.get('finish_reason') or ''}")


def _common_prefix(a: str, b: str) -> int:
    """Longest common prefix in characters (an invalid byte is one character)."""
    limit = min(len(a), len(b))
    index = 0
    while index < limit and a[index] == b[index]:
        index += 1
    return index


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


_SURROGATE = re.compile("[\ud800-\udfff]")


def _byte_chip(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    if 0xDC80 <= code <= 0xDCFF:
        return (f'<span class="ctl byte" title="invalid UTF-8 byte 0x{code - 0xDC00:02X}">'
                f'\\x{code - 0xDC00:02x}</span>')
    return f'<span class="ctl byte" title="lone surrogate U+{code:04X}">\\u{code:04x}</span>'


def _restored(outcome: Mapping[str, Any]) -> Mapping[str, Any]:
    """A stored outcome with its strings as the client decoded them (invalid bytes as
    lone surrogates); a shape the client does not know is kept as it is."""
    try:
        restored = msgspec.to_builtins(RequestOutcome.from_json_dict(dict(outcome)))
    except (msgspec.ValidationError, TypeError, ValueError):
        return outcome
    return restored if isinstance(restored, Mapping) else outcome


def _requests(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per-request outcomes, flattened to {leg, probe, repeat, slot, scored, outcome}.

    Accepts the outcome either nested under `outcome` or spread in the entry itself.
    """
    found: list[dict[str, Any]] = []
    for entry in report.get("requests") or report.get("outcomes") or []:
        if not isinstance(entry, Mapping):
            continue
        outcome = entry.get("outcome") if isinstance(entry.get("outcome"), Mapping) else entry
        found.append({
            "leg": str(entry.get("leg", entry.get("arm", ""))),
            "probe": _int(entry.get("probe", entry.get("task")), -1),
            "repeat": _int(entry.get("repeat"), 1) or 1,
            "slot": _int(entry.get("slot"), _int(entry.get("probe", entry.get("task")), 0)),
            "scored": bool(entry.get("scored", True)),
            "outcome": _restored(outcome),
        })
    return found


def _timings(outcome: Mapping[str, Any]) -> Mapping[str, Any]:
    timings = outcome.get("timings")
    return timings if isinstance(timings, Mapping) else {}


def _rung_order(report: Mapping[str, Any], cells: Sequence[Mapping[str, Any]]) -> list[tuple[str, int]]:
    order: list[tuple[str, int]] = []
    for rung in report.get("rungs") or []:
        key = (str(rung.get("label", "")), _int(rung.get("repeat"), 1) or 1)
        if key not in order:
            order.append(key)
    for cell in cells:
        leg = str(cell.get("leg", ""))
        key = (leg, _int(cell.get("repeat"), 1) or 1)
        if leg not in ("ref", "post") and key not in order:
            order.append(key)
    return order


def _column(leg: str, repeat: int, repeats_seen: set[int]) -> str:
    return f"{leg} #{repeat}" if len(repeats_seen) > 1 and leg not in ("ref", "post") else leg


def _probe_names(report: Mapping[str, Any], probes: Iterable[int]) -> dict[int, str]:
    names = {probe: f"probe {probe}" for probe in probes}
    for index, probe in enumerate(report.get("probes") or []):
        if not isinstance(probe, Mapping):
            continue
        number = _int(probe.get("index", probe.get("probe", index)), index)
        bits = [f"probe {number}"]
        if probe.get("topic"):
            bits.append(str(probe["topic"]))
        names[number] = " · ".join(bits)
    return names


def _canaries(report: Mapping[str, Any]) -> dict[int, str]:
    found: dict[int, str] = {}
    for index, probe in enumerate(report.get("probes") or []):
        if isinstance(probe, Mapping) and probe.get("canary"):
            found[_int(probe.get("index", probe.get("probe", index)), index)] = str(probe["canary"])
    for index, canary in enumerate(report.get("canaries") or []):
        found.setdefault(index, str(canary))
    return found


# ---------------------------------------------------------------------------- views

def _stream_html(canonical: str, marks: Sequence[tuple[int, int, str]]) -> str:
    # escaping leaves lone surrogates alone; they become chips only here, inside <pre> text
    marked = _SURROGATE.sub(_byte_chip, h.highlight(canonical, marks, SEPARATOR_CHIPS))
    return f'<pre class="text stream">{marked}</pre>'


def _divergence_marks(text: str, at: int) -> list[tuple[int, int, str]]:
    if at >= len(text):
        return []
    return [(at, at + 1, "diverge"), (at + 1, len(text), "after")]


def _canary_marks(text: str, canaries: Iterable[str]) -> list[tuple[int, int, str]]:
    marks = []
    for canary in canaries:
        if not canary:
            continue
        start = text.find(canary)
        while start >= 0:
            marks.append((start, start + len(canary), "foreign"))
            start = text.find(canary, start + len(canary))
    return marks


def _reply_facts(outcome: Mapping[str, Any] | None) -> str:
    if not outcome:
        return '<p class="note">not recorded</p>'
    reply = outcome.get("reply") or {}
    timings = _timings(outcome)
    sent = timings.get("sent_at")
    bits = []
    if outcome.get("error"):
        bits.append(f'<strong class="err">error:</strong> {h.escape(outcome["error"])}')
    if reply:
        bits.append(f"{h.fmt_number(reply.get('completion_tokens'))} completion tokens")
        bits.append(f"finish {h.escape(reply.get('finish_reason') or '—')}")
        if reply.get("cached_prompt_tokens") is not None:
            bits.append(f"cached prompt tokens {h.fmt_number(reply.get('cached_prompt_tokens'))} (diagnostic)")
    if isinstance(sent, (int, float)):
        for name, key in (("first delta", "first_content_at"), ("last byte", "last_byte_at")):
            value = timings.get(key)
            if isinstance(value, (int, float)):
                bits.append(f"{name} +{(value - sent) * 1000:,.0f} ms")
    return f'<p class="note">{" · ".join(bits)}</p>'


def _reply_block(title: str, outcome: Mapping[str, Any] | None,
                 marks_for: Any) -> str:
    if not outcome or not outcome.get("reply"):
        return f"<div><h4>{h.escape(title)}</h4>{_reply_facts(outcome)}</div>"
    text = _canonical(outcome["reply"])
    return (f"<div><h4>{h.escape(title)}</h4>{_stream_html(text, marks_for(text))}"
            f"{_reply_facts(outcome)}</div>")


def _cell_detail(cell: Mapping[str, Any], column: str, probe_name: str,
                 reference: Mapping[str, Any] | None, second_reference: Mapping[str, Any] | None,
                 got: Mapping[str, Any] | None, own_canary: str, other_canaries: list[str]) -> str:
    kind = str(cell.get("class", ""))
    colour, _, meaning = CLASS_STYLE.get(kind, UNKNOWN_STYLE)
    summary = (f'{h.badge(kind.replace("_", " "), colour)}<strong>{h.escape(probe_name)}</strong>'
               f'<span class="muted">leg {h.escape(column)}</span>')
    explanation = []
    if meaning:
        explanation.append(h.escape(meaning))
    for key, label in (("why", "why"), ("detail", "detail"), ("foreign", "foreign canary"),
                       ("at", "first difference at character")):
        if cell.get(key) not in (None, ""):
            explanation.append(f"{h.escape(label)}: <code>{h.escape(cell[key])}</code>")
    body = [f'<p>{" · ".join(explanation)}</p>']
    if own_canary:
        body.append(f'<p class="note">own canary <code>{h.escape(own_canary)}</code></p>')

    ref_text = _canonical(reference["reply"]) if reference and reference.get("reply") else None
    if str(cell.get("leg")) == "ref":
        # the reference itself is the problem: show A against B
        other = _canonical(second_reference["reply"]) if second_reference and second_reference.get("reply") else None
        at = _common_prefix(ref_text, other) if ref_text is not None and other is not None else None

        def ref_marks(text: str) -> list[tuple[int, int, str]]:
            return _divergence_marks(text, at) if at is not None else []
        left = _reply_block("solo reference A", reference, ref_marks)
        right = _reply_block("solo reference B", second_reference, ref_marks)
    else:
        got_text = _canonical(got["reply"]) if got and got.get("reply") else None
        at = cell.get("at")
        if not isinstance(at, int) and ref_text is not None and got_text is not None and ref_text != got_text:
            at = _common_prefix(ref_text, got_text)
        foreign = [c for c in other_canaries if c]

        def marks(text: str) -> list[tuple[int, int, str]]:
            found = _canary_marks(text, foreign)
            if found:
                return found
            if isinstance(at, int) and kind in ("diverged", "persistent"):
                return _divergence_marks(text, at)
            return []
        left = _reply_block("solo reference", reference, marks)
        right = _reply_block(f"reply in {column}", got, marks)
    body.append(f'<div class="side">{left}{right}</div>')
    body.append('<p class="note">Streams are shown in the compared form: reasoning, '
                f'{h.pre_text(chr(1), SEPARATOR_CHIPS)} text, then each '
                f'{h.pre_text(chr(2), SEPARATOR_CHIPS)} name {h.pre_text(chr(3), SEPARATOR_CHIPS)} '
                f'raw arguments, then {h.pre_text(chr(4), SEPARATOR_CHIPS)} finish reason. '
                '<mark class="diverge">x</mark> first differing character, '
                '<mark class="foreign">canary</mark> another probe\'s canary.</p>')
    element_id = h.anchor_id("cell", cell.get("probe"), column)
    return h.details(summary, "".join(body), element_id=element_id)


def _grid_section(report: Mapping[str, Any], cells: list[Mapping[str, Any]],
                  by_request: Mapping[tuple[str, int, int], Mapping[str, Any]]) -> str:
    if not cells:
        return h.section("grid", "Probe × leg", h.empty_note("no cells were classified"),
                         intro="Nothing was compared in this run.")
    rung_keys = _rung_order(report, cells)
    repeats_seen = {repeat for _, repeat in rung_keys}
    probes = sorted({_int(cell.get("probe"), -1) for cell in cells})
    names = _probe_names(report, probes)
    canaries = _canaries(report)

    columns: list[str] = []
    if any(cell.get("leg") == "ref" for cell in cells):
        columns.append("ref")
    columns += [_column(leg, repeat, repeats_seen) for leg, repeat in rung_keys]
    if any(cell.get("leg") == "post" for cell in cells) or not columns:
        columns.append("post")

    grid_cells: dict[tuple[str, str], h.GridCell] = {}
    drill: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for cell in cells:
        probe = _int(cell.get("probe"), -1)
        leg = str(cell.get("leg", ""))
        repeat = _int(cell.get("repeat"), 1) or 1
        column = _column(leg, repeat, repeats_seen)
        if column not in columns:
            columns.append(column)
        kind = str(cell.get("class", ""))
        colour, short, meaning = CLASS_STYLE.get(kind, UNKNOWN_STYLE)
        if kind in ("diverged", "persistent") and isinstance(cell.get("at"), int):
            short = f"{short}{cell['at']}"
        note = f"{names.get(probe, probe)} · {column}: {kind.replace('_', ' ')}"
        for key in ("why", "foreign", "detail"):
            if cell.get(key):
                note += f" · {cell[key]}"
        grid_cells[(names.get(probe, f"probe {probe}"), column)] = h.GridCell(
            colour, short, note, href="#" + h.anchor_id("cell", probe, column))
        own = canaries.get(probe, "")
        others = [c for p, c in canaries.items() if p != probe]
        if cell.get("foreign") and str(cell["foreign"]) not in others:
            others.append(str(cell["foreign"]))
        reference = by_request.get(("ref_a", probe, 1))
        second = by_request.get(("ref_b", probe, 1))
        got = by_request.get((leg, probe, repeat if leg != "post" else 1))
        drill[probe].append((kind, _cell_detail(cell, column, names.get(probe, f"probe {probe}"),
                                                reference, second, got, own, others)))

    counts: dict[str, int] = defaultdict(int)
    for cell in cells:
        counts[str(cell.get("class", ""))] += 1
    chart = h.grid([names.get(p, f"probe {p}") for p in probes], columns, grid_cells,
                   label="probe by leg classification", cell_width=max(58, min(120, 900 // max(1, len(columns)))),
                   cell_height=38,
                   row_header="probe", column_header="leg →")
    key = h.legend((colour, f"{name.replace('_', ' ')} ({counts.get(name, 0)})", meaning)
                   for name, (colour, _, meaning) in CLASS_STYLE.items())
    # problems first and in view; identical cells folded away (a grid click still opens them)
    problems = "".join(markup for probe in probes for kind, markup in drill[probe] if kind != "identical")
    quiet = [markup for probe in probes for kind, markup in drill[probe] if kind == "identical"]
    drills = "<h3>Evidence</h3>" + (problems or '<p class="note">Every compared cell is identical.</p>')
    if quiet:
        drills += h.details(f"<strong>{len(quiet)} identical cells</strong>"
                            '<span class="muted">same stream as the solo reference</span>',
                            "".join(quiet), css_class="group")
    return h.section(
        "grid", "Probe × leg", key + chart
        + '<p class="note">Click a cell to open its evidence below. The number after ≠ is the '
          'first differing character.</p>'
        + f'<div class="drills">{drills}</div>',
        intro="Each probe's reply in each leg, compared with the same probe's solo reference. "
              "Rungs fire the probes together; the post-check runs each probe alone after the rungs.")


def _score_section(report: Mapping[str, Any]) -> str:
    score = report.get("score") or {}
    colours = {name: style[0] for name, style in CLASS_STYLE.items()}
    tiles = [
        ("prompts", score.get("prompts"), h.ACCENT),
        ("rungs", score.get("rungs"), h.ACCENT),
        ("comparisons", score.get("compared"), h.ACCENT),
        ("identical", score.get("identical"), colours["identical"]),
        ("diverged", score.get("diverged"), colours["diverged"]),
        ("contaminated", score.get("contaminated"), colours["contaminated"]),
        ("persistent", score.get("persistent"), colours["persistent"]),
        ("alone unstable", score.get("alone_unstable"), colours["alone_unstable"]),
        ("unmeasured", score.get("unmeasured"), colours["unmeasured"]),
        ("foreign canaries", score.get("foreign_canaries"), colours["contaminated"]),
        ("tokens compared", score.get("tokens_compared"), h.MUTED),
        ("earliest divergence (char)", score.get("earliest_divergence"), h.MUTED),
    ]
    return h.section("score", "Score", h.stat_tiles(tiles),
                     intro="Zero tolerance: any cell that is not identical fails the run, "
                           "and so does a run that compared nothing.")


def _fidelity_section(report: Mapping[str, Any]) -> str:
    rungs = [r for r in report.get("rungs") or [] if isinstance(r, Mapping)]
    if not rungs:
        return h.section("fidelity", "Rung fidelity", h.empty_note("no rung was run"))
    repeats = {_int(r.get("repeat"), 1) for r in rungs}
    groups, values = [], {}
    series = [h.Series("label concurrency", "#b6c6d6"), h.Series("peak in flight", h.ACCENT)]
    rows = []
    for rung in rungs:
        name = _column(str(rung.get("label", "")), _int(rung.get("repeat"), 1), repeats)
        groups.append(name)
        requested = rung.get("concurrency")
        peak = rung.get("peak_in_flight")
        if isinstance(requested, (int, float)):
            values[(name, series[0].name)] = h.Bar(name, float(requested), value_text=str(requested))
        if isinstance(peak, (int, float)):
            tone = h.BAD if peak <= 1 else (h.WARN if isinstance(requested, (int, float)) and peak < requested else h.ACCENT)
            values[(name, series[1].name)] = h.Bar(name, float(peak), color=tone, value_text=str(peak))
        sent = rung.get("requests_sent", rung.get("slots"))  # `slots` before bench version 2
        failed = rung.get("requests_failed")
        if rung.get("requests_failed"):
            state = f"{rung.get('unmeasured_reason') or 'requests failed'}: cells unmeasured"
        elif isinstance(peak, (int, float)) and peak <= 1:
            state = "not concurrent: cells unmeasured"
        elif isinstance(peak, (int, float)) and isinstance(requested, (int, float)) and peak < requested:
            state = (f"the server ran at most {peak} at once: its observed parallelism, "
                     f"below the label's {requested}")
        elif isinstance(peak, (int, float)) and isinstance(sent, (int, float)) and peak < sent:
            state = f"ran {peak} of {sent} at once"
        else:
            state = "all ran together"
        if isinstance(sent, (int, float)) and isinstance(requested, (int, float)) and sent > requested:
            state += (f" · sent {sent} requests, more than the {requested} its label names "
                      "(every probe runs in every rung)")
        skew = rung.get("launch_skew_ms")
        rows.append((name, requested, sent, "—" if failed is None else failed, peak,
                     "—" if not isinstance(skew, (int, float)) else f"{skew:,.1f}", state))
    chart = h.grouped_bars(groups, series, values, label="peak in flight against requested concurrency",
                           unit="requests at once", height=300)
    note = h.legend([("#b6c6d6", "label", "the concurrency the rung is named for"),
                     (h.ACCENT, "peak in flight", "replies streaming at the same instant"),
                     (h.WARN, "below the label", "the server's observed parallelism"),
                     (h.BAD, "1", "nothing ran together: the rung cannot speak to contamination")])
    return h.section(
        "fidelity", "Rung fidelity", note + chart + h.table(
            ("rung", "label concurrency", "requests sent in the rung", "requests failed",
             "peak in flight (observed)", "launch skew (ms)", "reading"),
            rows, numeric=(1, 2, 3, 4, 5)),
        intro="What the server really ran together, from client timings: the most replies whose "
              "streaming intervals (first content delta → last byte) overlap. A rung sends one "
              "request per probe at least, so it can send more than its label. Any failed "
              "request (scored or ballast) makes the rung's cells unmeasured. Launch skew is "
              "first to last send.")


def _timeline_section(report: Mapping[str, Any], requests: list[dict[str, Any]],
                      cells: list[Mapping[str, Any]]) -> str:
    rung_keys = _rung_order(report, cells)
    repeats_seen = {repeat for _, repeat in rung_keys}
    class_of = {(str(c.get("leg")), _int(c.get("probe"), -1), _int(c.get("repeat"), 1) or 1): str(c.get("class"))
                for c in cells}
    by_rung: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for request in requests:
        if request["leg"] in REFERENCE_LEGS or request["leg"] in ("prime", "post"):
            continue
        by_rung[(request["leg"], request["repeat"])].append(request)
    for key in by_rung:
        if key not in rung_keys:
            rung_keys.append(key)
    if not by_rung:
        return h.section("timeline", "Per-request timeline",
                         h.empty_note("this report carries no per-request timings"))
    blocks = []
    for leg, repeat in rung_keys:
        entries = by_rung.get((leg, repeat))
        if not entries:
            continue
        sends = [t["sent_at"] for e in entries if isinstance((t := _timings(e["outcome"])).get("sent_at"), (int, float))]
        if not sends:
            continue
        zero = min(sends)
        lanes = []
        for entry in sorted(entries, key=lambda e: e["slot"]):
            timings = _timings(entry["outcome"])
            sent = timings.get("sent_at")
            if not isinstance(sent, (int, float)):
                continue
            first = timings.get("first_content_at")
            last = timings.get("last_byte_at")
            kind = class_of.get((leg, entry["probe"], repeat)) if entry["scored"] else None
            stream_colour = CLASS_STYLE.get(kind, UNKNOWN_STYLE)[0] if kind else BALLAST
            role = f"probe {entry['probe']} ({kind.replace('_', ' ')})" if kind else f"ballast, probe {entry['probe']}"
            ms = lambda value: (value - zero) * 1000.0  # noqa: E731
            segments = []
            if isinstance(first, (int, float)):
                segments.append(h.Segment(ms(sent), ms(first), WAITING,
                                          f"slot {entry['slot']}: waiting {ms(first) - ms(sent):,.0f} ms", thin=True))
                if isinstance(last, (int, float)):
                    segments.append(h.Segment(ms(first), ms(last), stream_colour,
                                              f"slot {entry['slot']} · {role}: streaming "
                                              f"{ms(first):,.0f}–{ms(last):,.0f} ms"))
            elif isinstance(last, (int, float)):
                segments.append(h.Segment(ms(sent), ms(last), h.BAD,
                                          f"slot {entry['slot']}: no content "
                                          f"({entry['outcome'].get('error') or 'empty'})", thin=True))
            marks = [(ms(sent), f"slot {entry['slot']} sent at +{ms(sent):,.1f} ms")]
            href = ("#" + h.anchor_id("cell", entry["probe"], _column(leg, repeat, repeats_seen))
                    if kind else None)
            lanes.append(h.Lane(f"slot {entry['slot']} · p{entry['probe']}", segments, marks, href))
        title = _column(leg, repeat, repeats_seen)
        blocks.append(f"<h3>{h.escape(title)}</h3>" + h.timeline(
            lanes, label=f"timeline of rung {title}", unit="ms since the rung's first send"))
    key = h.legend([(WAITING, "waiting", "sent → first content delta"),
                    (BALLAST, "ballast", "unscored slot streaming"),
                    (CLASS_STYLE["identical"][0], "scored", "streaming, coloured by the cell's class")])
    return h.section("timeline", "Per-request timeline", key + "".join(blocks),
                     intro="Every slot of every rung: the tick is the send, the thin bar the wait "
                           "for the first content delta, the thick bar the stream until the last byte.")


def _setup_section(report: Mapping[str, Any]) -> str:
    parts = [h.run_facts(report)]
    probes = [p for p in report.get("probes") or [] if isinstance(p, Mapping)]
    if probes:
        parts.append("<h3>Probes</h3>" + h.table(
            ("probe", "canary", "topic"),
            ((str(p.get("index", i)), str(p.get("canary", "—")), str(p.get("topic", "—")))
             for i, p in enumerate(probes))))
    legs = report.get("legs")
    if isinstance(legs, Mapping) and legs:
        parts.append("<h3>Requests per leg</h3>" + h.table(
            ("leg", "outcomes"),
            ((str(leg), ", ".join(f"{count} {status}" for status, count in (counts or {}).items()))
             for leg, counts in legs.items())))
    request = report.get("request") if isinstance(report.get("request"), Mapping) else {}
    bodies = list(request.get("bodies") or [])
    if request.get("preset") or request.get("extra_body"):
        parts.append(h.facts([("engine preset", str(request.get("preset") or "none")),
                              ("extra body", json.dumps(request.get("extra_body") or {}, ensure_ascii=False))]))
    if bodies:
        shown = h.pre(json.dumps(bodies[0], indent=2, ensure_ascii=False))
        rest = "".join(h.pre(json.dumps(body, indent=2, ensure_ascii=False)) for body in bodies[1:])
        parts.append("<h3>Request body sent (probe 0)</h3>" + shown)
        if rest:
            parts.append(h.details(f"the other {len(bodies) - 1} request bodies", rest))
    return h.section("run", "Run", "".join(parts))


def _warnings_section(report: Mapping[str, Any]) -> str:
    warnings = [str(w) for w in report.get("warnings") or []]
    if not warnings:
        return ""
    items = "".join(f"<li>{h.escape(w)}</li>" for w in warnings)
    return f'<section class="card warnings" id="warnings"><h2>Warnings</h2><ul>{items}</ul></section>'



def render_html(report: Mapping[str, Any]) -> str:
    cells = [c for c in report.get("cells") or [] if isinstance(c, Mapping)]
    requests = _requests(report)
    by_request: dict[tuple[str, int, int], Mapping[str, Any]] = {}
    for request in requests:
        if request["scored"]:
            by_request.setdefault((request["leg"], request["probe"], request["repeat"]), request["outcome"])
    run = report.get("run") or {}
    target = run.get("target") or {}
    subtitle = " · ".join(str(x) for x in (target.get("model"), target.get("url") or target.get("base_url"),
                                           run.get("id")) if x)
    page = h.page(
        title="contamination report",
        subtitle=subtitle,
        report=report,
        sections=[
            ("score", "score", _warnings_section(report) + _score_section(report)),
            ("grid", "probe × leg", _grid_section(report, cells, by_request)),
            ("fidelity", "rung fidelity", _fidelity_section(report)),
            ("timeline", "timeline", _timeline_section(report, requests, cells)),
            ("run", "run", _setup_section(report)),
        ])
    # a lone surrogate left anywhere (a title attribute, a warning) becomes plain `\\xNN`
    # text: safe inside attributes, and the page always encodes as UTF-8
    return _SURROGATE.sub(lambda match: display_text(match.group(0)), page)
