"""The contamination report as one self-contained HTML page.

`render_html(report)` reads only the suite's typed report (`ContaminationReport`, as
`build_report` returns it, or a report file's JSON read into one) and draws: the verdict,
the counters, the probe × leg grid coloured by class (each cell opens its evidence:
reference and reply side by side with the first differing character marked, or the
foreign canary highlighted), rung fidelity (peak in flight against requested
concurrency) and a per-request timeline per rung.

Bounded at any store size: the report lists at most `shown.RUNG_LIMIT` rungs and
`shown.LANE_LIMIT` requests of each (a report file written before the caps is cut down
the same way, `within_caps`), and the grid, divergence, fidelity and timeline sections
say how many they show of how many and give the export command for all of it. The
report embedded in the page leaves out the listed requests' token logprobs (`page_copy`:
none is drawn, and they were 95 % of a real engine's page), each reply saying how many
entries it held, and cuts their texts to `TEXT_EMBEDDED` characters; a cell draws each
stream in a window of `STREAM_DRAWN` characters around its first mark, saying how many
it leaves out. So the page is bounded whatever the length of the replies too.

Invariants: a view only: every number on the page is a field of the report printed by
`benchwarden.core.formatting` (counters, peak in flight, launch skew, requests failed,
per-request times), and a test checks each against the JSON. Every reply, canary, error
and server string reaches the page through the escaping helpers of
`benchwarden.core.html`; the page needs no network. Missing optional parts of the report
(per-request outcomes, probes) shrink the page, never break it.

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
import shlex
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import msgspec

from benchwarden.core import formatting as fmt
from benchwarden.core import html as h
from benchwarden.core.reports import as_json
from benchwarden.suites.contamination.report import (
    CellBlock,
    ContaminationReport,
    DivergenceBlock,
    RequestEntry,
    RungBlock,
    as_report,
    column_name,
    names_clipped,
    probes_shown,
    within_caps,
)
from benchwarden.suites.contamination.scoring import canonical, display_text
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



# ---------------------------------------------------------------------------- reading

_SURROGATE = re.compile("[\ud800-\udfff]")


def _byte_chip(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    if 0xDC80 <= code <= 0xDCFF:
        return (f'<span class="ctl byte" title="invalid UTF-8 byte 0x{code - 0xDC00:02X}">'
                f'\\x{code - 0xDC00:02x}</span>')
    return f'<span class="ctl byte" title="lone surrogate U+{code:04X}">\\u{code:04x}</span>'


def _restored(entry: RequestEntry) -> RequestOutcome | None:
    """The stored outcome as the client decoded it (invalid bytes as lone surrogates);
    None for a shape the client does not know."""
    try:
        return RequestOutcome.from_json_dict(dict(entry.outcome))
    except (msgspec.ValidationError, TypeError, ValueError):
        return None


def _column(report: ContaminationReport, leg: str, repeat: int, level: int | None) -> str:
    return column_name(leg, repeat, report.repeated, level)


def _rungs_note(report: ContaminationReport) -> str:
    """The note a section listing rungs carries when the report lists only some
    (`shown`): how many, which first, what was left out, and how to get all of it."""
    if not isinstance(report.rungs_total, int):
        return ""
    states = report.rungs_left_out if isinstance(report.rungs_left_out, dict) else {}
    counted = ", ".join(f"{fmt.count(count)} {state.replace('_', ' ')}"
                        for state, count in states.items())
    return (f'<p class="note">Showing {h.escape(fmt.count(len(report.rungs)))} of '
            f"{h.escape(fmt.count(report.rungs_total))} rungs: those that need attention "
            "first (a leak, a divergence, failed requests, unmeasured, below the label), "
            f"then the rest in the order run. Not shown: {h.escape(counted or fmt.DASH)}. "
            "The score and the verdict count every rung.</p>" + _export_note(report))


def _export_note(report: ContaminationReport) -> str:
    if not isinstance(report.export_command, str):
        return ""
    return ('<p class="note">Every request as data (outcome, timings, reply): '
            f"<code>{h.escape(report.export_command)}</code></p>")


# ---------------------------------------------------------------------------- views

STREAM_DRAWN = 3_000
"""Characters of one reply stream a cell draws at most: a window around its first mark
(the first differing character, a foreign canary), or its start. A reasoning model's
replies of tens of thousands of characters, two per cell over 24 rungs, made pages of
tens of megabytes; the report file keeps every character."""


def _stream_html(text: str, marks: Sequence[tuple[int, int, str]]) -> str:
    shown, marks, before, after = _stream_window(text, marks)
    # escaping leaves lone surrogates alone; they become chips only here, inside <pre> text
    marked = _SURROGATE.sub(_byte_chip, h.highlight(shown, marks, SEPARATOR_CHIPS))
    return (f'<pre class="text stream">{_elided(before, "before")}{marked}'
            f'{_elided(after, "after")}</pre>')


def _stream_window(text: str, marks: Sequence[tuple[int, int, str]]
                   ) -> tuple[str, list[tuple[int, int, str]], int, int]:
    """The part of `text` a cell draws (`STREAM_DRAWN` characters, from a third of them
    before its first mark), its marks moved into it, and how many characters are left
    out before and after."""
    if len(text) <= STREAM_DRAWN:
        return text, list(marks), 0, 0
    focus = min((start for start, _, _ in marks), default=0)
    begin = max(0, min(focus - STREAM_DRAWN // 3, len(text) - STREAM_DRAWN))
    end = begin + STREAM_DRAWN
    moved = [(max(start, begin) - begin, min(stop, end) - begin, kind)
             for start, stop, kind in marks if stop > begin and start < end]
    return text[begin:end], moved, begin, len(text) - end


def _elided(count: int, where: str) -> str:
    if not count:
        return ""
    return (f'<span class="elided">[{h.escape(fmt.count(count))} characters {where} not '
            "shown: the report file holds them]</span>")


def _divergence_marks(text: str, at: int | None) -> list[tuple[int, int, str]]:
    if at is None or at >= len(text):
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


def _reply_facts(entry: RequestEntry | None) -> str:
    outcome = _restored(entry) if entry is not None else None
    if entry is None or outcome is None:
        return '<p class="note">not recorded</p>'
    reply = outcome.reply
    bits = []
    if outcome.error:
        bits.append(f'<strong class="err">error:</strong> {h.escape(outcome.error)}')
    if reply is not None:
        bits.append(f"{fmt.count(reply.completion_tokens)} completion tokens")
        bits.append(f"finish {h.escape(fmt.text(reply.finish_reason))}")
        if reply.cached_prompt_tokens is not None:
            bits.append(f"cached prompt tokens {fmt.count(reply.cached_prompt_tokens)} "
                        "(diagnostic)")
    for name, value in (("first delta", entry.wait_ms), ("last byte", entry.last_byte_after_ms)):
        if value is not None:
            bits.append(f"{name} +{fmt.number(value, 0)} ms")
    return f'<p class="note">{" · ".join(bits)}</p>'


Marks = Callable[[str], list[tuple[int, int, str]]]


def _reply_block(title: str, entry: RequestEntry | None, marks_for: Marks) -> str:
    outcome = _restored(entry) if entry is not None else None
    if outcome is None or outcome.reply is None:
        return f"<div><h4>{h.escape(title)}</h4>{_reply_facts(entry)}</div>"
    text = canonical(outcome.reply)
    return (f"<div><h4>{h.escape(title)}</h4>{_stream_html(text, marks_for(text))}"
            f"{_reply_facts(entry)}</div>")


def _cell_detail(cell: CellBlock, column: str, probe_name: str,
                 reference: RequestEntry | None, second_reference: RequestEntry | None,
                 got: RequestEntry | None, own_canary: str, other_canaries: list[str],
                 references_part_at: int | None = None) -> str:
    kind = cell.kind
    colour, _, meaning = CLASS_STYLE.get(kind, UNKNOWN_STYLE)
    summary = (f'{h.badge(kind.replace("_", " "), colour)}<strong>{h.escape(probe_name)}</strong>'
               f'<span class="muted">leg {h.escape(column)}</span>')
    explanation = []
    if meaning:
        explanation.append(h.escape(meaning))
    for value, label in ((cell.why, "why"), (cell.detail, "detail"),
                         (cell.foreign, "foreign canary")):
        if value:
            explanation.append(f"{h.escape(label)}: <code>{h.escape(value)}</code>")
    parted_at = references_part_at if cell.leg == "ref" else cell.at
    if parted_at is not None:
        explanation.append(f"first difference at character: <code>{fmt.number(parted_at)}</code>")
    body = [f'<p>{" · ".join(explanation)}</p>']
    if cell.divergence is not None:
        body.append(_divergence_html(cell.divergence))
    if own_canary:
        body.append(f'<p class="note">own canary <code>{h.escape(own_canary)}</code></p>')

    if cell.leg == "ref":
        # the reference itself is the problem: show A against B, parted where the report says
        def ref_marks(text: str) -> list[tuple[int, int, str]]:
            return _divergence_marks(text, references_part_at)
        left = _reply_block("solo reference A", reference, ref_marks)
        right = _reply_block("solo reference B", second_reference, ref_marks)
    else:
        foreign = [c for c in other_canaries if c]

        def marks(text: str) -> list[tuple[int, int, str]]:
            found = _canary_marks(text, foreign)
            if found:
                return found
            if kind in ("diverged", "persistent"):
                return _divergence_marks(text, cell.at)
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
    element_id = h.anchor_id("cell", cell.probe, column)
    return h.details(summary, "".join(body), element_id=element_id)


def _probe_names(report: ContaminationReport) -> dict[int, str]:
    names = {cell.probe: f"probe {cell.probe}" for cell in report.cells}
    for probe in report.probes:
        topic = [probe.topic] if probe.topic else []
        names[probe.index] = " · ".join([f"probe {probe.index}", *topic])
    return names


def _columns(report: ContaminationReport) -> list[str]:
    columns = ["ref"] if any(cell.leg == "ref" for cell in report.cells) else []
    for key in [_column(report, r.label, r.repeat, r.concurrency) for r in report.rungs] + [
            _column(report, c.leg, c.repeat, c.level) for c in report.cells if c.level is not None]:
        if key not in columns:
            columns.append(key)
    if any(cell.leg == "post" for cell in report.cells) or not columns:
        columns.append("post")
    return columns


def _grid_section(report: ContaminationReport,
                  by_request: Mapping[tuple[str, int, int], RequestEntry]) -> str:
    cells = report.cells
    if not cells:
        return h.section("grid", "Probe × leg", h.empty_note("no cells were classified"),
                         intro="Nothing was compared in this run.")
    probes = sorted({cell.probe for cell in cells})
    names = _probe_names(report)
    canaries = {probe.index: probe.canary for probe in report.probes if probe.canary}
    columns = _columns(report)

    grid_cells: dict[tuple[str, str], h.GridCell] = {}
    drill: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for cell in cells:
        column = _column(report, cell.leg, cell.repeat, cell.level)
        if column not in columns:
            columns.append(column)
        colour, short, _ = CLASS_STYLE.get(cell.kind, UNKNOWN_STYLE)
        if cell.kind in ("diverged", "persistent") and cell.at is not None:
            short = f"{short}{fmt.number(cell.at)}"
        name = names.get(cell.probe, f"probe {cell.probe}")
        note = f"{name} · {column}: {cell.kind.replace('_', ' ')}"
        for value in (cell.why, cell.foreign, cell.detail):
            if value:
                note += f" · {value}"
        grid_cells[(name, column)] = h.GridCell(
            colour, short, note, href="#" + h.anchor_id("cell", cell.probe, column))
        own = canaries.get(cell.probe, "")
        others = [c for p, c in canaries.items() if p != cell.probe]
        if cell.foreign and cell.foreign not in others:
            others.append(cell.foreign)
        reference = by_request.get(("ref_a", cell.probe, 1))
        second = by_request.get(("ref_b", cell.probe, 1))
        got = by_request.get((cell.leg, cell.probe, cell.repeat if cell.leg != "post" else 1))
        drill[cell.probe].append((cell.kind, _cell_detail(
            cell, column, name, reference, second, got, own, others,
            report.references_part_at.get(cell.probe))))

    score = report.score
    chart = h.grid([names.get(p, f"probe {p}") for p in probes], columns, grid_cells,
                   label="probe by leg classification",
                   cell_width=max(58, min(120, 900 // max(1, len(columns)))),
                   cell_height=38, row_header="probe", column_header="leg →")
    key = h.legend((colour, f"{name.replace('_', ' ')} "
                            f"({fmt.count(getattr(score, name) if score else None)})", meaning)
                   for name, (colour, _, meaning) in CLASS_STYLE.items())
    # problems first and in view; identical cells folded away (a grid click still opens them)
    problems = "".join(markup for probe in probes for kind, markup in drill[probe]
                       if kind != "identical")
    quiet = [markup for probe in probes for kind, markup in drill[probe] if kind == "identical"]
    drills = "<h3>Evidence</h3>" + (
        problems or '<p class="note">Every compared cell is identical.</p>')
    if quiet:
        drills += h.details(f"<strong>{fmt.count(score.identical if score else None)} identical "
                            'cells</strong><span class="muted">same stream as the solo reference'
                            "</span>", "".join(quiet), css_class="group")
    probes_note = "" if not isinstance(report.probes_total, int) else (
        f'<p class="note">Showing {h.escape(fmt.count(len(probes)))} of '
        f"{h.escape(fmt.count(report.probes_total))} probes: those with a cell that is not "
        "identical first, then the rest in order; the score and the verdict count every "
        "probe, and the report's JSON file holds every cell.</p>")
    return h.section(
        "grid", "Probe × leg", key + _rungs_note(report) + probes_note + chart
        + '<p class="note">Click a cell to open its evidence below. The number after ≠ is the '
          'first differing character.</p>'
        + f'<div class="drills">{drills}</div>',
        intro="Each probe's reply in each leg, compared with the same probe's solo reference. "
              "Rungs fire the probes together; the post-check runs each probe alone after "
              "the rungs.")


def _score_section(report: ContaminationReport) -> str:
    score = report.score
    colours = {name: style[0] for name, style in CLASS_STYLE.items()}

    def value(name: str) -> str:
        return fmt.number(getattr(score, name) if score else None)
    tiles = [
        ("prompts", value("prompts"), h.ACCENT),
        ("rungs", value("rungs"), h.ACCENT),
        ("comparisons", value("compared"), h.ACCENT),
        ("identical", value("identical"), colours["identical"]),
        ("diverged", value("diverged"), colours["diverged"]),
        ("contaminated", value("contaminated"), colours["contaminated"]),
        ("persistent", value("persistent"), colours["persistent"]),
        ("alone unstable", value("alone_unstable"), colours["alone_unstable"]),
        ("unmeasured", value("unmeasured"), colours["unmeasured"]),
        ("foreign canaries", value("foreign_canaries"), colours["contaminated"]),
        ("tokens compared", value("tokens_compared"), h.MUTED),
        ("earliest divergence (char)", value("earliest_divergence"), h.MUTED),
        ("near-tie divergences", value("near_tie"), DIVERGENCE_COLOUR["near-tie"]),
        ("substantive divergences", value("substantive"), DIVERGENCE_COLOUR["substantive"]),
        ("unclassified divergences", value("unclassified"), DIVERGENCE_COLOUR["unclassified"]),
    ]
    return h.section("score", "Score", h.stat_tiles(tiles),
                     intro="Zero tolerance: any cell that is not identical fails the run, "
                           "and so does a run that compared nothing.")


PEAK_TONE = {"unmeasured": h.BAD, "below_label": h.WARN}
DIVERGENCE_COLOUR = {"near-tie": "#e69f00", "substantive": "#cf222e", "unclassified": "#8c959f"}
DIVERGENCE_MEANING = {
    "near-tie": "the reference preferred its token by less than the threshold: a flip of "
                "a near tie in batched arithmetic",
    "substantive": "a larger margin, or a foreign canary: not a rounding accident",
    "unclassified": "the token logprobs cannot say (none sent, or too few candidates)",
}


def _margin_text(point: DivergenceBlock) -> str:
    shown = fmt.number(point.margin, 3)
    return ("≥ " + shown) if point.margin is not None and point.margin_is_bound else shown


def _divergence_html(point: DivergenceBlock) -> str:
    """The divergence class of one cell, for its evidence panel."""
    colour = DIVERGENCE_COLOUR.get(point.kind, h.MUTED)
    items = [("class", point.kind), ("why", point.reason),
             ("threshold (nats)", fmt.number(point.threshold_nats, 3)),
             ("first differing token #", fmt.number(point.step)),
             ("margin as the reference saw it (nats)", _margin_text(point)),
             ("margin as the reply saw it (nats)", fmt.number(point.reply_margin, 3))]
    if point.reference_token is not None:
        items.append(("reference token → reply token",
                      f"{point.reference_token!r} → {point.reply_token!r}"))
    top = ""
    if point.reference_top:
        top = h.table(("reference's top candidate", "logprob"),
                      ((repr(c.token), fmt.number(c.logprob, 3)) for c in point.reference_top),
                      numeric=(1,))
    return (f'<div class="divergence">{h.badge(point.kind, colour)}'
            f"{h.facts(items)}{top}</div>")


def _divergence_section(report: ContaminationReport) -> str:
    points = [cell for cell in report.cells if cell.divergence is not None]
    bisect = report.bisect
    parts = []
    if bisect is not None:
        parts.append("<h3>Bisect</h3>" + h.facts([
            ("range", f"{fmt.count(bisect.low)}-{fmt.count(bisect.high)}"),
            ("smallest diverging concurrency", fmt.count(bisect.smallest)),
            ("result", bisect.reading)]) + h.table(
            ("rung tried (in order)", "a probe diverged"),
            ((fmt.count(step.level), fmt.number(step.diverged)) for step in bisect.tried)))
    if not points and not parts:
        return ""
    key = h.legend((colour, name, DIVERGENCE_MEANING[name])
                   for name, colour in DIVERGENCE_COLOUR.items())
    rows = []
    for cell in points:
        point = cell.divergence
        assert point is not None
        rows.append((f"probe {fmt.count(cell.probe)}",
                     _column(report, cell.leg, cell.repeat, cell.level), point.kind,
                     _margin_text(point), fmt.number(point.reply_margin, 3),
                     fmt.number(point.step),
                     "" if point.reference_token is None
                     else f"{point.reference_token!r} → {point.reply_token!r}",
                     ", ".join(f"{c.token!r} {fmt.number(c.logprob, 3)}"
                               for c in point.reference_top), point.reason))
    if points:
        listed = ""
        if isinstance(report.cells_total, int):
            listed = ('<p class="note">The divergences of the listed rungs (see the probe × '
                      "leg grid); the score above counts every one of the run.</p>")
        parts.insert(0, key + listed + h.table(
            ("probe", "leg", "class", "margin (reference, nats)", "margin (reply, nats)",
             "token #", "reference → reply", "reference's top candidates", "why"),
            rows, numeric=(3, 4, 5)))
    return h.section(
        "divergences", "Divergences", "".join(parts),
        intro="What kind of difference each failed cell is, from token log-probabilities at "
              "the first differing token. The margin is the reference's logprob of its own "
              "token minus its logprob of the token the reply chose (≥ when that token was "
              "not among its top candidates). The verdict is zero tolerance whatever the class.")


def _fidelity_section(report: ContaminationReport) -> str:
    rungs: list[RungBlock] = report.rungs
    if not rungs:
        return h.section("fidelity", "Rung fidelity", h.empty_note("no rung was run"))
    groups, values = [], {}
    series = [h.Series("label concurrency", "#b6c6d6"), h.Series("peak in flight", h.ACCENT)]
    rows = []
    for rung in rungs:
        name = _column(report, rung.label, rung.repeat, rung.concurrency)
        groups.append(name)
        values[(name, series[0].name)] = h.Bar(name, float(rung.concurrency),
                                               value_text=fmt.count(rung.concurrency))
        values[(name, series[1].name)] = h.Bar(name, float(rung.peak_in_flight),
                                               color=PEAK_TONE.get(rung.state, h.ACCENT),
                                               value_text=fmt.count(rung.peak_in_flight))
        rows.append((name, fmt.count(rung.concurrency), fmt.count(rung.requests_sent),
                     fmt.count(rung.requests_failed), fmt.count(rung.peak_in_flight),
                     fmt.number(rung.launch_skew_ms, 1), rung.reading))
    chart = h.grouped_bars(groups, series, values,
                           label="peak in flight against requested concurrency",
                           unit="requests at once", height=300)
    note = h.legend([("#b6c6d6", "label", "the concurrency the rung is named for"),
                     (h.ACCENT, "peak in flight", "replies streaming at the same instant"),
                     (h.WARN, "below the label", "the server's observed parallelism"),
                     (h.BAD, "unmeasured", "nothing ran together, or a request failed: the rung "
                                           "cannot speak to contamination")])
    return h.section(
        "fidelity", "Rung fidelity", note + _rungs_note(report) + chart + h.table(
            ("rung", "label concurrency", "requests sent in the rung", "requests failed",
             "peak in flight (observed)", "launch skew (ms)", "reading"),
            rows, numeric=(1, 2, 3, 4, 5)),
        intro="What the server really ran together, from client timings: the most replies whose "
              "streaming intervals (first content delta → last byte) overlap. A rung sends one "
              "request per probe at least, so it can send more than its label. Any failed "
              "request (scored or ballast) makes the rung's cells unmeasured. Launch skew is "
              "first to last send.")


def _timeline_section(report: ContaminationReport) -> str:
    class_of = {(c.leg, c.probe, c.repeat): c.kind for c in report.cells}
    by_rung: dict[tuple[str, int], list[RequestEntry]] = defaultdict(list)
    for request in report.requests:
        if request.level is not None:
            by_rung[(request.leg, request.repeat)].append(request)
    if not by_rung:
        return h.section("timeline", "Per-request timeline",
                         h.empty_note("this report carries no per-request timings"))
    order = [(rung.label, rung.repeat) for rung in report.rungs]
    rung_of = {(rung.label, rung.repeat): rung for rung in report.rungs}
    order += [key for key in by_rung if key not in order]
    blocks = []
    for leg, repeat in order:
        entries = by_rung.get((leg, repeat))
        if not entries:
            continue
        level = entries[0].level
        title = _column(report, leg, repeat, level)
        lanes = []
        for entry in sorted(entries, key=lambda e: e.slot):
            sent, first, last = entry.sent_ms, entry.first_content_ms, entry.last_byte_ms
            if sent is None:
                continue
            kind = class_of.get((leg, entry.probe, repeat)) if entry.scored else None
            stream_colour = CLASS_STYLE.get(kind, UNKNOWN_STYLE)[0] if kind else BALLAST
            role = (f"probe {entry.probe} ({kind.replace('_', ' ')})" if kind
                    else f"ballast, probe {entry.probe}")
            segments = []
            if first is not None:
                segments.append(h.Segment(sent, first, WAITING,
                                          f"slot {entry.slot}: waiting "
                                          f"{fmt.number(entry.wait_ms, 0)} ms", thin=True))
                if last is not None:
                    segments.append(h.Segment(first, last, stream_colour,
                                              f"slot {entry.slot} · {role}: streaming "
                                              f"{fmt.number(first, 0)}–{fmt.number(last, 0)} ms"))
            elif last is not None:
                error = entry.outcome.get("error") if isinstance(entry.outcome, Mapping) else None
                segments.append(h.Segment(sent, last, h.BAD,
                                          f"slot {entry.slot}: no content ({error or 'empty'})",
                                          thin=True))
            marks = [(sent, f"slot {entry.slot} sent at +{fmt.number(sent, 1)} ms")]
            href = "#" + h.anchor_id("cell", entry.probe, title) if kind else None
            lanes.append(h.Lane(f"slot {entry.slot} · p{entry.probe}", segments, marks, href))
        if lanes:
            rung = rung_of.get((leg, repeat))
            listed = None if rung is None or not isinstance(rung.requests_listed, int) \
                else rung.requests_listed
            drawn = "" if rung is None or listed is None else (
                f'<p class="note">Drawing {h.escape(fmt.count(listed))} of its '
                f"{h.escape(fmt.count(rung.requests_sent))} requests: every scored one, "
                "then failed ones, then the rest by slot.</p>")
            blocks.append(f"<h3>{h.escape(title)}</h3>" + drawn + h.timeline(
                lanes, label=f"timeline of rung {title}", unit="ms since the rung's first send"))
    key = h.legend([(WAITING, "waiting", "sent → first content delta"),
                    (BALLAST, "ballast", "unscored slot streaming"),
                    (CLASS_STYLE["identical"][0], "scored",
                     "streaming, coloured by the cell's class")])
    return h.section("timeline", "Per-request timeline",
                     key + _rungs_note(report) + "".join(blocks),
                     intro="Every slot of every rung: the tick is the send, the thin bar the wait "
                           "for the first content delta, the thick bar the stream until the "
                           "last byte.")


def _setup_section(report: ContaminationReport, plain: Mapping[str, Any]) -> str:
    parts = [h.run_facts(plain)]
    if report.probes:
        parts.append("<h3>Probes</h3>" + h.table(
            ("probe", "canary", "topic"),
            ((fmt.count(p.index), fmt.text(p.canary), fmt.text(p.topic)) for p in report.probes)))
    if report.legs:
        parts.append("<h3>Requests per leg</h3>" + h.table(
            ("leg", "outcomes"),
            ((leg, ", ".join(f"{fmt.count(count)} {status}" for status, count in counts.items()))
             for leg, counts in report.legs.items())))
    request = report.request
    if request is not None and (request.preset or request.extra_body):
        parts.append(h.facts([("engine preset", request.preset or "none"),
                              ("extra body", json.dumps(request.extra_body or {},
                                                        ensure_ascii=False))]))
    bodies = list(request.bodies) if request is not None else []
    if bodies:
        parts.append("<h3>Request body sent (probe 0)</h3>"
                     + h.pre(json.dumps(bodies[0], indent=2, ensure_ascii=False)))
        counted = (f"all {fmt.count(len(bodies))}" if not isinstance(report.probes_total, int)
                   else f"the first {fmt.count(len(bodies))} of "
                        f"{fmt.count(report.probes_total)}")
        parts.append(h.details(f"{counted} request bodies", "".join(
            h.pre(json.dumps(body, indent=2, ensure_ascii=False)) for body in bodies)))
    return h.section("run", "Run", "".join(parts))


def _warnings_section(report: ContaminationReport) -> str:
    if not report.warnings:
        return ""
    items = "".join(f"<li>{h.escape(w)}</li>" for w in report.warnings)
    return ('<section class="card warnings" id="warnings"><h2>Warnings</h2>'
            f'<ul>{items}</ul></section>')


LEFT_OUT_KEY = "token_logprobs_left_out"
"""Set in a listed request's reply, in the page's embedded copy, where its token logprobs
were left out: how many entries they held."""


TEXT_EMBEDDED = 2_000
"""Characters of a listed request's reply text, reasoning or tool-call arguments the
page's embedded copy keeps (`page_copy`); the report file keeps them whole."""

TEXT_LEFT_OUT_KEY = "characters_left_out"
"""Set in a listed request's reply, in the page's embedded copy, where its text,
reasoning or a tool call's arguments were cut to `TEXT_EMBEDDED` characters: how many
characters each lost (`{"text": n, "reasoning": n, "tool_calls": [n, ...]}`)."""


def page_copy(plain: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """The report as the page embeds it, and how many listed requests it shortened.

    The page draws no token logprobs (a divergence's tokens are already in its own
    block), and they are nearly all of a real engine's listed requests: 24 rungs of 128
    requests with 64 tokens and five candidates each made a 33 MB page, past issue 12's
    20 MB at any store size. Nor does it draw a listed request's reply but in a cell's
    window (`STREAM_DRAWN`): replies of tens of thousands of characters made pages as
    large. The embedded copy keeps every other field as the report has it; a reply whose
    logprobs it drops says how many entries they held (`LEFT_OUT_KEY`), one whose texts
    it cuts to `TEXT_EMBEDDED` characters how many each lost (`TEXT_LEFT_OUT_KEY`); the
    report file (`show RUN --json FILE`) keeps them."""
    requests = plain.get("requests")
    if not isinstance(requests, list):
        return dict(plain), 0
    kept: list[Any] = []
    shortened = 0
    embedded_bytes = 0
    for request in requests:
        outcome = request.get("outcome") if isinstance(request, Mapping) else None
        reply = outcome.get("reply") if isinstance(outcome, Mapping) else None
        if isinstance(reply, Mapping):
            slim = _slim_reply(reply)
            if slim is not reply:
                assert isinstance(outcome, Mapping)
                request = {**request, "outcome": {**outcome, "reply": slim}}
                shortened += 1
        if isinstance(outcome, Mapping):
            embedded_bytes += len(msgspec.json.encode(request["outcome"]))
            if embedded_bytes > OUTCOMES_EMBEDDED_BYTES:
                request = {key: value for key, value in request.items() if key != "outcome"}
                request[OUTCOME_LEFT_OUT_KEY] = True
        kept.append(request)
    return {**plain, "requests": kept}, shortened


OUTCOMES_EMBEDDED_BYTES = 10_000_000
"""Bytes of the listed requests' outcomes (as JSON, after `_slim_reply`) the page's copy
embeds in all; the requests past it are embedded without their outcome, each marked with
`OUTCOME_LEFT_OUT_KEY`. Each field of an outcome is bounded already, but not how many a
reply holds: a hostile server's reply of thousands of tool calls, on every listed
request, made the copy grow without bound."""

OUTCOME_LEFT_OUT_KEY = "outcome_left_out"


def _slim_reply(reply: Mapping[str, Any]) -> Mapping[str, Any]:
    """A listed reply as the page embeds it (`page_copy`): `reply` itself when nothing
    is left out."""
    changes: dict[str, Any] = {}
    entries = reply.get("token_logprobs")
    if isinstance(entries, list) and entries:
        changes[LEFT_OUT_KEY] = len(entries)
    lost: dict[str, Any] = {}
    for key in ("text", "reasoning"):
        value = reply.get(key)
        if isinstance(value, str) and len(value) > TEXT_EMBEDDED:
            changes[key] = value[:TEXT_EMBEDDED]
            lost[key] = len(value) - TEXT_EMBEDDED
    calls = reply.get("tool_calls")
    if isinstance(calls, list) and any(
            isinstance(call, Mapping) and isinstance(call.get("arguments"), str)
            and len(call["arguments"]) > TEXT_EMBEDDED for call in calls):
        cut_calls, cut_counts = [], []
        for call in calls:
            arguments = call.get("arguments") if isinstance(call, Mapping) else None
            if isinstance(arguments, str) and len(arguments) > TEXT_EMBEDDED:
                cut_calls.append({**call, "arguments": arguments[:TEXT_EMBEDDED]})
                cut_counts.append(len(arguments) - TEXT_EMBEDDED)
            else:
                cut_calls.append(call)
                cut_counts.append(0)
        changes["tool_calls"] = cut_calls
        lost["tool_calls"] = cut_counts
    if lost:
        changes[TEXT_LEFT_OUT_KEY] = lost
    if not changes:
        return reply
    slim = {key: value for key, value in reply.items() if key != "token_logprobs"
            or LEFT_OUT_KEY not in changes}
    slim.update(changes)
    return slim


def _whole_report_command(run_id: str | None) -> str:
    """What writes the whole report, named by the run id the report was made with (the
    page's copy may hold it clipped)."""
    return (f"benchwarden show {shlex.quote(run_id)} --json FILE" if run_id
            else "the report's JSON file")


def _left_out_note(run_id: str | None, plain: Mapping[str, Any]) -> str:
    requests = plain.get("requests")
    replies = [((request.get("outcome") or {}).get("reply") or {})
               for request in (requests if isinstance(requests, list) else [])
               if isinstance(request, Mapping)]
    logprobs = sum(1 for reply in replies if isinstance(reply, Mapping) and LEFT_OUT_KEY in reply)
    texts = sum(1 for reply in replies
                if isinstance(reply, Mapping) and TEXT_LEFT_OUT_KEY in reply)
    outcomes = sum(1 for request in (requests if isinstance(requests, list) else [])
                   if isinstance(request, Mapping) and request.get(OUTCOME_LEFT_OUT_KEY))
    if not logprobs and not texts and not outcomes:
        return ""
    where = _whole_report_command(run_id)
    notes = []
    if logprobs:
        notes.append(f'<p class="note">The token logprobs of {h.escape(fmt.count(logprobs))} '
                     "listed requests are not embedded in this page (none is drawn; each reply "
                     f"says how many entries it held as <code>{LEFT_OUT_KEY}</code>): "
                     f"<code>{h.escape(where)}</code> writes them.</p>")
    if texts:
        notes.append(f'<p class="note">The replies of {h.escape(fmt.count(texts))} listed '
                     f"requests are embedded in this page cut to {fmt.count(TEXT_EMBEDDED)} "
                     "characters of text, reasoning and tool-call arguments each (each says "
                     f"how many it lost as <code>{TEXT_LEFT_OUT_KEY}</code>): "
                     f"<code>{h.escape(where)}</code> writes them whole.</p>")
    if outcomes:
        notes.append(f'<p class="note">{h.escape(fmt.count(outcomes))} listed requests are '
                     "embedded in this page without their outcome (each marked "
                     f"<code>{OUTCOME_LEFT_OUT_KEY}</code>): the outcomes embedded reached "
                     f"{h.escape(fmt.count(OUTCOMES_EMBEDDED_BYTES))} bytes; "
                     f"<code>{h.escape(where)}</code> writes them.</p>")
    return "".join(notes)


def _clipped_note(names: int, sentences: int, run_id: str | None) -> str:
    if not names and not sentences:
        return ""
    what = [f"{fmt.count(names)} names longer than {h.NAME_LIMIT} characters are clipped "
            "(their start, an ellipsis and the start of their SHA-256)"] if names else []
    if sentences:
        what.append(f"{fmt.count(sentences)} sentences are cut at "
                    f"{fmt.count(h.SENTENCE_LIMIT)} characters")
    where = _whole_report_command(run_id)
    return (f'<p class="note">On this page {h.escape("; ".join(what))}: '
            f"<code>{h.escape(where)}</code> writes them whole.</p>")


def render_html(report: ContaminationReport | Mapping[str, Any]) -> str:
    # a report file written before the caps may list every request of a huge run
    report = within_caps(as_report(report))
    run_id = report.run.id if report.run is not None else None
    report, names, sentences = names_clipped(probes_shown(report))
    plain, _ = page_copy(as_json(report))
    by_request: dict[tuple[str, int, int], RequestEntry] = {}
    for request in report.requests:
        if request.scored:
            by_request.setdefault((request.leg, request.probe, request.repeat), request)
    run = report.run
    target = run.target if run else {}
    subtitle = " · ".join(str(x) for x in (target.get("model"),
                                           target.get("url") or target.get("base_url"),
                                           run.id if run else None) if x)
    page = h.page(
        title="contamination report",
        subtitle=subtitle,
        report=plain,
        sections=[(ident, name, markup) for ident, name, markup in [
            ("score", "score", _warnings_section(report) + _score_section(report)),
            ("grid", "probe × leg", _grid_section(report, by_request)),
            ("divergences", "divergences", _divergence_section(report)),
            ("fidelity", "rung fidelity", _fidelity_section(report)),
            ("timeline", "timeline", _timeline_section(report)),
            ("run", "run", _setup_section(report, plain) + _left_out_note(run_id, plain)
             + _clipped_note(names, sentences, run_id)),
        ] if markup])
    # a lone surrogate left anywhere (a title attribute, a warning) becomes plain `\\xNN`
    # text: safe inside attributes, and the page always encodes as UTF-8
    return _SURROGATE.sub(lambda match: display_text(match.group(0)), page)
