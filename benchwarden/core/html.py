"""The self-contained HTML page every suite's report is drawn in.

A suite's `render_html(report)` composes the pieces here: the page shell (inline CSS,
one small inline script), the verdict banner, tables, `<details>` drill-downs and SVG
charts (horizontal bars with error bars, grouped bars, a timeline, a grid).

Invariants:
- Nothing on the page points outside the file: no external src/href, no @import, no web
  font. The page renders the same with the network off.
- Every string that did not come from this module is escaped on the way in: text and
  attributes through `escape` (`html.escape` with quotes), text shown verbatim through
  `pre_text` (which also makes control characters visible), JSON embedded in a
  `<script>` through `json_for_script` (`<`, `>`, `&`, U+2028, U+2029 as \\u escapes).
  Helpers take raw strings and escape them themselves; the only strings they accept as
  markup are parameters named `*_html`, which must come from these helpers.
- Colours are chosen by this module or by a suite's own constant table, never by data:
  `color()` refuses anything that is not a hex colour.
- Pure functions: no file, clock or network; a report dict in, a string out.
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from benchwarden.core import formatting

# Okabe–Ito: distinguishable with the common colour-vision deficiencies.
SERIES_COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00",
                 "#8c6d1f", "#444444")
GOOD = "#1a7f37"
BAD = "#cf222e"
WARN = "#bf8700"
MUTED = "#8c959f"
ACCENT = "#0072B2"
FAINT = "#d0d7de"

_HEX_COLOR = re.compile(r"^#[0-9a-fA-F]{3}(?:[0-9a-fA-F]{3})?$")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


# ---------------------------------------------------------------------------- escaping

def escape(value: Any) -> str:
    """Text or attribute value, safe inside an element or a quoted attribute."""
    return html.escape("" if value is None else str(value), quote=True)


# Names rather than the U+2400 pictures: those glyphs are missing from many fonts.
_CONTROL_NAMES = ("NUL SOH STX ETX EOT ENQ ACK BEL BS HT LF VT FF CR SO SI DLE DC1 DC2 DC3 "
                  "DC4 NAK SYN ETB CAN EM SUB ESC FS GS RS US").split()


def _chip(code: int, label: str) -> str:
    return f'<span class="ctl" title="U+{code:04X}">{escape(label)}</span>'


def pre_text(value: Any, labels: Mapping[str, str] | None = None) -> str:
    """Verbatim text for a <pre>: escaped, with control characters drawn as named chips.

    `labels` names particular characters (e.g. a suite's field separators). U+2028 and
    U+2029 are harmless in HTML text but invisible, so they are marked too.
    """
    labels = labels or {}

    def visible(match: re.Match[str]) -> str:
        char = match.group(0)
        code = ord(char)
        return _chip(code, labels.get(char) or (_CONTROL_NAMES[code] if code < 0x20 else "DEL"))
    escaped = _CONTROL.sub(visible, escape(value))
    return (escaped.replace("\u2028", _chip(0x2028, labels.get("\u2028", "LS")))
            .replace("\u2029", _chip(0x2029, labels.get("\u2029", "PS"))))


def json_for_script(value: Any) -> str:
    """JSON that can sit inside <script type="application/json"> and be parsed back.

    The escapes keep `</script>`, `<!--` and the JavaScript line separators from ending
    or bending the script element; JSON.parse reads them back as the same characters.
    """
    text = json.dumps(value, ensure_ascii=False, default=str, sort_keys=False)
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def anchor_id(*parts: Any) -> str:
    """An element id from arbitrary parts: only [A-Za-z0-9_-], never empty."""
    joined = "-".join(_ID_UNSAFE.sub("_", str(part)) for part in parts)
    return joined or "_"


def color(value: str) -> str:
    if not _HEX_COLOR.match(value):
        raise ValueError(f"not a hex colour: {value!r}")
    return value


# ---------------------------------------------------------------------------- numbers

# The formatters live in `benchwarden.core.formatting` (one set for every view);
# these names stay for the suites' pages that call them through this module.
fmt_number = formatting.number


def fmt_percent(value: Any, digits: int = 1) -> str:
    return formatting.percent(value, digits)


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round axis ticks covering [low, high]."""
    if not math.isfinite(low) or not math.isfinite(high):
        return [0.0, 1.0]
    if high - low < 1e-6:  # flat (or sub-micro) data: draw a unit-wide axis around it
        high = low + max(abs(low), 1.0)
    raw_step = (high - low) / max(1, count)
    magnitude = 10 ** math.floor(math.log10(raw_step))
    for factor in (1, 2, 2.5, 5, 10):
        step = factor * magnitude
        if step >= raw_step:
            break
    start = math.floor(low / step) * step
    ticks = []
    value = start
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    if ticks[-1] < high:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def _tick_label(value: float) -> str:
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if value == int(value):
        return str(int(value))
    return f"{value:g}"


def _text_width(text: str, size: float = 12.0) -> float:
    """A rough width for layout (no font metrics offline): average glyph ≈ 0.6 em."""
    return 0.6 * size * len(text)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(1, limit - 1)] + "…"


# ---------------------------------------------------------------------------- long names

NAME_LIMIT = 256
"""Characters of a name (an arm, task, tier, probe, strategy, run id) a page draws and
embeds at most. The arms suite refuses longer names in a suite, and retrieval longer
strategy names, but a store written by another tool can hold any, and a hostile server
can stream a finish reason or a tool name of any length: 200 task names of 20,000
characters made an 83 MB page, each name drawn and embedded at every cell, row and
trial that names it."""

_DIGEST_WIDTHS = (12, 24, 64)


def clipped_name(name: str, taken: set[str]) -> str:
    """`name` cut to `NAME_LIMIT` characters: its start, an ellipsis and the start of its
    SHA-256, so two long names sharing a start stay two names (a wider digest where the
    first is `taken` already)."""
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
    for width in _DIGEST_WIDTHS:
        clipped = f"{name[:NAME_LIMIT - 1 - width]}…{digest[:width]}"
        if clipped not in taken:
            break
    return clipped


SENTENCE_LIMIT = 2_000
"""Characters a page keeps of a sentence (an error, a reason, a warning) under one of the
`sentences` keys `clip_long_names` is given: longer, it is cut to this length with the
number of characters it left out, so cutting it again changes nothing. Real sentences
are far shorter; a store written by another tool repeated one of 20,000 characters on
every failed request."""


class Clipped(NamedTuple):
    """What `clip_long_names` made: the tree, and how many names and sentences it cut."""

    tree: Any
    names: int
    sentences: int


def clip_long_names(tree: Any, names: Iterable[Any], *, texts: Collection[str] = (),
                    sentences: Collection[str] = ()) -> Clipped:
    """`tree` (a report's JSON: dicts, lists, strings, numbers) with every name of `names`
    longer than `NAME_LIMIT` replaced by its `clipped_name`, as a key, as a value and
    inside longer texts (a sentence naming an arm), and how many names were clipped.
    Names within the limit, and `tree` itself when nothing is long, are left as they are,
    so one name is one name everywhere on the page and a clipped copy clipped again is
    unchanged.

    Values under a key of `texts` (a reply's text, whose character positions the report
    refers to) are left exactly as they are: their suite bounds them. Values under a key
    of `sentences` have names replaced inside them, then are cut to `SENTENCE_LIMIT`
    characters."""
    listed = {name for name in names if isinstance(name, str)}
    long_names = sorted((name for name in listed if len(name) > NAME_LIMIT),
                        key=lambda name: (-len(name), name))
    taken = {name for name in listed if len(name) <= NAME_LIMIT}
    replacement: dict[str, str] = {}
    for name in long_names:
        replacement[name] = clipped_name(name, taken)
        taken.add(replacement[name])
    sentences_cut = 0

    def text(value: str) -> str:
        if len(value) <= NAME_LIMIT:
            return value
        whole = replacement.get(value)
        if whole is not None:
            return whole
        for name in long_names:  # longest first: a name inside a longer one waits for it
            if name in value:
                value = value.replace(name, replacement[name])
        return value

    def sentence(value: str) -> str:
        nonlocal sentences_cut
        value = text(value)
        if len(value) <= SENTENCE_LIMIT:
            return value
        sentences_cut += 1
        kept = SENTENCE_LIMIT - 60  # room for the note, so a cut sentence is within the limit
        return (f"{value[:kept]}… ({len(value) - kept:,} more characters in the report "
                "file)")

    def walk(value: Any, within: Callable[[str], str]) -> Any:
        if isinstance(value, str):
            return within(value)
        if isinstance(value, dict):
            return {text(key) if isinstance(key, str) else key:
                    item if key in texts else
                    walk(item, sentence if key in sentences else within)
                    for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(item, within) for item in value]
        return value

    if not long_names and not _any_sentence_over(tree, texts, sentences, False):
        return Clipped(tree, 0, 0)
    return Clipped(walk(tree, text), len(long_names), sentences_cut)


def _any_sentence_over(tree: Any, texts: Collection[str], sentences: Collection[str],
                       within: bool) -> bool:
    """Whether a string under a `sentences` key (outside `texts`) passes
    `SENTENCE_LIMIT`: when none does and no name is long, the tree is left as it is."""
    if isinstance(tree, str):
        return within and len(tree) > SENTENCE_LIMIT
    if isinstance(tree, dict):
        return any(_any_sentence_over(item, texts, sentences, within or key in sentences)
                   for key, item in tree.items() if key not in texts)
    if isinstance(tree, (list, tuple)):
        return any(_any_sentence_over(item, texts, sentences, within) for item in tree)
    return False


def names_in(tree: Any, *, texts: Collection[str] = (),
             sentences: Collection[str] = ()) -> set[str]:
    """Every string of `tree` that is a name to `clip_long_names`: each key, and each
    value outside the `texts` and `sentences` keys (the identifiers a report repeats on
    every row: run ids, legs, statuses, finish reasons, tool names)."""
    found: set[str] = set()

    def walk(value: Any, named: bool) -> None:
        if isinstance(value, str):
            if named:
                found.add(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str):
                    found.add(key)
                if key not in texts:
                    walk(item, named and key not in sentences)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item, named)

    walk(tree, True)
    return found


# ---------------------------------------------------------------------------- charts

@dataclass(frozen=True)
class Bar:
    """One bar; `low`/`high` draw an error bar (an interval), `note` a hover line."""

    label: str
    value: float | None
    low: float | None = None
    high: float | None = None
    color: str | None = None  # default: the accent colour, or the series' in grouped bars
    note: str = ""
    value_text: str | None = None  # what is printed at the bar's end (default: value)


def _svg_open(width: float, height: float, label: str, extra_class: str = "") -> str:
    return (f'<svg class="chart {extra_class}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" '
            f'height="{height:.0f}" role="img" aria-label="{escape(label)}">'
            f'<title>{escape(label)}</title>')


def _interval_data(low: float | None, high: float | None) -> str:
    """The interval a whisker draws, as exact attributes: a test reads them back and
    compares them with the report's own interval (no view may draw another)."""
    if low is None or high is None:
        return ""
    return f' data-low="{escape(repr(float(low)))}" data-high="{escape(repr(float(high)))}"'


def _whisker_h(x1: float, x2: float, y: float, half: float = 5, data: str = "") -> str:
    return (f'<g class="whisker"{data}><line x1="{x1:.1f}" y1="{y:.1f}" x2="{x2:.1f}" '
            f'y2="{y:.1f}"/>'
            f'<line x1="{x1:.1f}" y1="{y - half:.1f}" x2="{x1:.1f}" y2="{y + half:.1f}"/>'
            f'<line x1="{x2:.1f}" y1="{y - half:.1f}" x2="{x2:.1f}" y2="{y + half:.1f}"/></g>')


def _whisker_v(x: float, y1: float, y2: float, half: float = 5, data: str = "") -> str:
    return (f'<g class="whisker"{data}><line x1="{x:.1f}" y1="{y1:.1f}" x2="{x:.1f}" '
            f'y2="{y2:.1f}"/>'
            f'<line x1="{x - half:.1f}" y1="{y1:.1f}" x2="{x + half:.1f}" y2="{y1:.1f}"/>'
            f'<line x1="{x - half:.1f}" y1="{y2:.1f}" x2="{x + half:.1f}" y2="{y2:.1f}"/></g>')


def bar_chart(bars: Sequence[Bar], *, label: str, unit: str = "", width: int = 760,
              max_value: float | None = None, min_value: float = 0.0,
              value_format: str = "{:,.2f}", marker: float | None = None,
              marker_label: str = "") -> str:
    """Horizontal bars, one per row, with optional intervals and one reference line."""
    if not bars:
        return empty_note(f"{label}: nothing to chart")
    label_width = min(240.0, max(60.0, max(_text_width(_clip(b.label, 36)) for b in bars) + 12))
    row, gap, top, bottom, right = 24, 10, 10, 34, 90
    height = top + len(bars) * (row + gap) + bottom
    highs = [v for b in bars for v in (b.value, b.high) if v is not None and math.isfinite(v)]
    if marker is not None:
        highs.append(marker)
    upper = max_value if max_value is not None else (max(highs) if highs else 1.0)
    ticks = nice_ticks(min_value, upper if upper > min_value else min_value + 1)
    upper = max_value if max_value is not None else ticks[-1]
    plot_left, plot_width = label_width, width - label_width - right

    def x(value: float) -> float:
        clamped = min(max(value, min_value), upper)
        return plot_left + plot_width * (clamped - min_value) / ((upper - min_value) or 1)

    parts = [_svg_open(width, height, label, "bars")]
    axis_y = top + len(bars) * (row + gap)
    for tick in ticks:
        if tick > upper + 1e-9:
            continue
        tx = x(tick)
        parts.append(f'<line class="grid" x1="{tx:.1f}" y1="{top - 4}" x2="{tx:.1f}" '
                     f'y2="{axis_y:.1f}"/>'
                     f'<text class="tick" x="{tx:.1f}" y="{axis_y + 16:.1f}" text-anchor="middle">'
                     f'{escape(_tick_label(tick))}</text>')
    if unit:
        parts.append(f'<text class="axis-label" x="{plot_left + plot_width:.1f}" '
                     f'y="{axis_y + 30:.1f}" '
                     f'text-anchor="end">{escape(unit)}</text>')
    for index, bar in enumerate(bars):
        y = top + index * (row + gap)
        hover = bar.label if not bar.note else f"{bar.label}: {bar.note}"
        parts.append(f'<g class="bar-row"><title>{escape(hover)}</title>'
                     f'<text class="bar-label" x="{plot_left - 8:.1f}" y="{y + row / 2 + 4:.1f}" '
                     f'text-anchor="end">{escape(_clip(bar.label, 36))}</text>')
        if bar.value is None or not math.isfinite(bar.value):
            parts.append(f'<text class="bar-value muted" x="{plot_left + 4:.1f}" '
                         f'y="{y + row / 2 + 4:.1f}">'
                         f'no data</text></g>')
            continue
        end = x(bar.value)
        parts.append(f'<rect x="{plot_left:.1f}" y="{y:.1f}" '
                     f'width="{max(0.0, end - plot_left):.1f}" '
                     f'height="{row}" rx="3" fill="{color(bar.color or ACCENT)}"/>')
        text_x = end
        if bar.low is not None and bar.high is not None:
            parts.append(_whisker_h(x(bar.low), x(bar.high), y + row / 2,
                                    data=_interval_data(bar.low, bar.high)))
            text_x = max(end, x(bar.high))
        shown = bar.value_text if bar.value_text is not None else value_format.format(bar.value)
        parts.append(f'<text class="bar-value" x="{text_x + 6:.1f}" y="{y + row / 2 + 4:.1f}">'
                     f'{escape(shown)}</text></g>')
    if marker is not None:
        mx = x(marker)
        parts.append(f'<line class="marker" x1="{mx:.1f}" y1="{top - 6}" x2="{mx:.1f}" '
                     f'y2="{axis_y:.1f}"/>')
        if marker_label:
            parts.append(f'<text class="marker-label" x="{mx + 4:.1f}" y="{top + 2}">'
                         f'{escape(marker_label)}</text>')
    parts.append(f'<line class="axis" x1="{plot_left:.1f}" y1="{axis_y:.1f}" '
                 f'x2="{plot_left + plot_width:.1f}" y2="{axis_y:.1f}"/></svg>')
    return "".join(parts)


@dataclass(frozen=True)
class Rule:
    """A vertical reference line across a chart, optionally shading ±`band` around it."""

    value: float
    label: str
    color: str = BAD
    dashed: bool = True


def diverging_bars(items: Sequence[Bar], *, label: str, rules: Sequence[Rule] = (),
                   shade: tuple[float, float] | None = None, shade_label: str = "",
                   width: int = 760, value_format: str = "{:+.4f}", unit: str = "") -> str:
    """Horizontal bars from zero (negative to the left), with reference lines and an
    optional shaded interval (e.g. a paired band a difference must clear)."""
    if not items:
        return empty_note(f"{label}: nothing to chart")
    label_width = min(200.0, max(60.0, max(_text_width(_clip(b.label, 30)) for b in items) + 12))
    row, gap, bottom, right = 20, 8, 34, 80
    top = 22 + 14 * max(0, len(rules) - 1)  # one label row per reference line
    height = top + len(items) * (row + gap) + bottom
    values = [
        v for b in items for v in (b.value, b.low, b.high) if v is not None and math.isfinite(v)
    ]
    values += [r.value for r in rules] + (list(shade) if shade else []) + [0.0]
    span = max(abs(min(values)), abs(max(values))) or 1.0
    ticks = nice_ticks(-span, span, 6)
    low, high = ticks[0], ticks[-1]
    plot_left, plot_w = label_width, width - label_width - right

    def x(value: float) -> float:
        return plot_left + plot_w * (min(max(value, low), high) - low) / ((high - low) or 1)

    axis_y = top + len(items) * (row + gap)
    parts = [_svg_open(width, height, label, "diverging")]
    if shade:
        parts.append(f'<rect class="band" x="{x(shade[0]):.1f}" y="{top - 6}" '
                     f'width="{max(1.0, x(shade[1]) - x(shade[0])):.1f}" '
                     f'height="{axis_y - top + 6:.1f}">'
                     f'<title>{escape(shade_label)}</title></rect>')
    for tick in ticks:
        tx = x(tick)
        parts.append(f'<line class="grid" x1="{tx:.1f}" y1="{top - 4}" x2="{tx:.1f}" '
                     f'y2="{axis_y:.1f}"/>'
                     f'<text class="tick" x="{tx:.1f}" y="{axis_y + 16:.1f}" text-anchor="middle">'
                     f'{escape(f"{tick:+g}" if tick else "0")}</text>')
    zero = x(0.0)
    for index, item in enumerate(items):
        y = top + index * (row + gap)
        parts.append(f'<g class="bar-row"><title>{escape(item.note or item.label)}</title>'
                     f'<text class="bar-label" x="{plot_left - 8:.1f}" y="{y + row / 2 + 4:.1f}" '
                     f'text-anchor="end">{escape(_clip(item.label, 30))}</text>')
        if item.value is not None and math.isfinite(item.value):
            end = x(item.value)
            parts.append(f'<rect x="{min(zero, end):.1f}" y="{y:.1f}" '
                         f'width="{max(1.0, abs(end - zero)):.1f}" '
                         f'height="{row}" rx="2" fill="{color(item.color or ACCENT)}"/>')
            if item.low is not None and item.high is not None:
                parts.append(_whisker_h(x(item.low), x(item.high), y + row / 2,
                                        data=_interval_data(item.low, item.high)))
            shown = (
                item.value_text if item.value_text is not None else value_format.format(item.value)
            )
            anchor, text_x = (
                ("start", max(end, zero) + 6) if item.value >= 0 else ("end", min(end, zero) - 6)
            )
            parts.append(f'<text class="bar-value" x="{text_x:.1f}" y="{y + row / 2 + 4:.1f}" '
                         f'text-anchor="{anchor}">{escape(shown)}</text>')
        parts.append("</g>")
    parts.append(f'<line class="axis" x1="{zero:.1f}" y1="{top - 6}" x2="{zero:.1f}" '
                 f'y2="{axis_y:.1f}"/>')
    for index, rule in enumerate(rules):
        rx = x(rule.value)
        label_y = top - 12 - 14 * index
        dash = ' stroke-dasharray="5 3"' if rule.dashed else ""
        parts.append(f'<line x1="{rx:.1f}" y1="{label_y + 2}" x2="{rx:.1f}" y2="{axis_y:.1f}" '
                     f'stroke="{color(rule.color)}" stroke-width="1.6"{dash}><title>'
                     f'{escape(rule.label)}</title></line>'
                     f'<text class="rule-label" x="{rx:.1f}" y="{label_y}" text-anchor="middle" '
                     f'fill="{color(rule.color)}">{escape(_clip(rule.label, 28))}</text>')
    if unit:
        parts.append(f'<text class="axis-label" x="{plot_left + plot_w:.1f}" y="{axis_y + 30:.1f}" '
                     f'text-anchor="end">{escape(unit)}</text>')
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True)
class Series:
    name: str
    color: str


def grouped_bars(groups: Sequence[str], series: Sequence[Series],
                 values: Mapping[tuple[str, str], Bar], *, label: str, unit: str = "",
                 width: int = 760, height: int = 280, max_value: float | None = None,
                 value_format: str = "{:,.2f}") -> str:
    """Vertical bars: one cluster per group, one bar per series (missing = gap)."""
    if not groups or not series:
        return empty_note(f"{label}: nothing to chart")
    top, bottom, left, right = 34, 54, 52, 12
    cluster = (width - left - right) / len(groups)
    longest = max(_text_width(_clip(g, 32)) for g in groups)
    rotate = longest > cluster - 6
    if rotate:  # slanted labels need room below the axis; the plot keeps its height
        extra = int(longest * 0.6) + 24 - bottom  # sin(35°) of the label, plus its line
        bottom += extra
        height += extra
    plot_h = height - top - bottom
    plot_w = width - left - right
    finite = [v for bar in values.values() for v in (bar.value, bar.high)
              if v is not None and math.isfinite(v)]
    upper = max_value if max_value is not None else nice_ticks(0, max(finite or [1.0]))[-1]
    ticks = [t for t in nice_ticks(0, upper) if t <= upper + 1e-9]

    def y(value: float) -> float:
        return top + plot_h * (1 - min(max(value, 0.0), upper) / (upper or 1))

    parts = [_svg_open(width, height, label, "grouped")]
    legend_x: float = left
    for item in series:
        parts.append(f'<rect x="{legend_x:.1f}" y="6" width="12" height="12" rx="2" '
                     f'fill="{color(item.color)}"/>'
                     f'<text class="legend-text" x="{legend_x + 16:.1f}" y="16">'
                     f'{escape(_clip(item.name, 28))}</text>')
        legend_x += 16 + _text_width(_clip(item.name, 28)) + 18
    for tick in ticks:
        ty = y(tick)
        parts.append(f'<line class="grid" x1="{left}" y1="{ty:.1f}" x2="{left + plot_w}" '
                     f'y2="{ty:.1f}"/>'
                     f'<text class="tick" x="{left - 6}" y="{ty + 4:.1f}" text-anchor="end">'
                     f'{escape(_tick_label(tick))}</text>')
    if unit:
        parts.append(f'<text class="axis-label" x="12" y="{top + plot_h / 2:.1f}" '
                     f'text-anchor="middle" '
                     f'transform="rotate(-90 12 {top + plot_h / 2:.1f})">{escape(unit)}</text>')
    bar_w = min(44.0, cluster * 0.8 / len(series))
    for g_index, group in enumerate(groups):
        cx = left + cluster * g_index + cluster / 2
        start = cx - bar_w * len(series) / 2
        for s_index, item in enumerate(series):
            bar = values.get((group, item.name))
            if bar is None or bar.value is None or not math.isfinite(bar.value):
                continue
            bx = start + s_index * bar_w
            by = y(bar.value)
            hover = f"{group} · {item.name}: {bar.value_text or value_format.format(bar.value)}"
            if bar.note:
                hover += f" ({bar.note})"
            parts.append(f'<g class="bar-col"><title>{escape(hover)}</title>'
                         f'<rect x="{bx + 1:.1f}" y="{by:.1f}" width="{max(1.0, bar_w - 2):.1f}" '
                         f'height="{max(0.0, top + plot_h - by):.1f}" rx="2" '
                         f'fill="{color(bar.color or item.color)}"/>')
            if bar.low is not None and bar.high is not None:
                parts.append(
                    _whisker_v(
                        bx + bar_w / 2,
                        y(bar.high),
                        y(bar.low),
                        half=min(5.0, bar_w / 3),
                        data=_interval_data(bar.low, bar.high),
                    )
                )
            shown = bar.value_text if bar.value_text is not None else value_format.format(bar.value)
            if _text_width(shown, 11) <= bar_w + 4:
                label_y = min(by, y(bar.high) if bar.high is not None else by) - 4
                parts.append(f'<text class="col-value" x="{bx + bar_w / 2:.1f}" y="{label_y:.1f}" '
                             f'text-anchor="middle">{escape(shown)}</text>')
            parts.append('</g>')
        if rotate:
            ly = top + plot_h + 14
            parts.append(f'<text class="group-label" x="{cx:.1f}" y="{ly:.1f}" text-anchor="end" '
                         f'transform="rotate(-35 {cx:.1f} {ly:.1f})">{escape(_clip(group, 32))}'
                         f'<title>{escape(group)}</title></text>')
        else:
            parts.append(f'<text class="group-label" x="{cx:.1f}" y="{top + plot_h + 18:.1f}" '
                         f'text-anchor="middle">{escape(group)}<title>{escape(group)}</title>'
                         f'</text>')
    parts.append(f'<line class="axis" x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" '
                 f'y2="{top + plot_h}"/></svg>')
    return "".join(parts)


@dataclass(frozen=True)
class Segment:
    start: float
    end: float
    color: str
    note: str = ""
    thin: bool = False  # drawn as a thin line (waiting) rather than a full bar (working)


@dataclass(frozen=True)
class Lane:
    label: str
    segments: Sequence[Segment] = ()
    marks: Sequence[tuple[float, str]] = ()  # (time, note): a tick on the lane
    href: str | None = None  # "#id" of a detail on this page


def timeline(lanes: Sequence[Lane], *, label: str, unit: str = "ms", width: int = 1100,
             lane_height: int = 16, max_lanes: int = 80) -> str:
    """A Gantt chart: one lane per item, time running left to right from zero."""
    shown = list(lanes[:max_lanes])
    if not shown:
        return empty_note(f"{label}: nothing to chart")
    times = [t for lane in shown for s in lane.segments for t in (s.start, s.end)]
    times += [t for lane in shown for t, _ in lane.marks]
    upper = max(times) if times else 1.0
    ticks = nice_ticks(0, upper if upper > 0 else 1.0)
    upper = ticks[-1]
    label_width = min(
        200.0, max(50.0, max(_text_width(_clip(line.label, 30), 11) for line in shown) + 10)
    )
    top, bottom, right, gap = 8, 32, 16, 4
    plot_left, plot_w = label_width, width - label_width - right
    height = top + len(shown) * (lane_height + gap) + bottom

    def x(value: float) -> float:
        return plot_left + plot_w * max(0.0, value) / (upper or 1)

    axis_y = top + len(shown) * (lane_height + gap)
    parts = [_svg_open(width, height, label, "timeline")]
    for tick in ticks:
        tx = x(tick)
        parts.append(f'<line class="grid" x1="{tx:.1f}" y1="{top - 2}" x2="{tx:.1f}" '
                     f'y2="{axis_y:.1f}"/>'
                     f'<text class="tick" x="{tx:.1f}" y="{axis_y + 14:.1f}" text-anchor="middle">'
                     f'{escape(_tick_label(tick))}</text>')
    parts.append(f'<text class="axis-label" x="{plot_left + plot_w:.1f}" y="{axis_y + 28:.1f}" '
                 f'text-anchor="end">{escape(unit)}</text>')
    for index, lane in enumerate(shown):
        y = top + index * (lane_height + gap)
        label_svg = (f'<text class="lane-label" x="{plot_left - 6:.1f}" '
                     f'y="{y + lane_height - 4:.1f}" '
                     f'text-anchor="end">{escape(_clip(lane.label, 30))}</text>')
        if lane.href:
            label_svg = f'<a href="{escape(lane.href)}">{label_svg}</a>'
        parts.append(f'<g class="lane">{label_svg}')
        for segment in lane.segments:
            x1, x2 = x(segment.start), x(segment.end)
            if segment.thin:
                parts.append(f'<rect x="{x1:.1f}" y="{y + lane_height / 2 - 1.5:.1f}" '
                             f'width="{max(1.0, x2 - x1):.1f}" height="3" '
                             f'fill="{color(segment.color)}">'
                             f'<title>{escape(segment.note)}</title></rect>')
            else:
                parts.append(f'<rect x="{x1:.1f}" y="{y + 1:.1f}" width="{max(1.5, x2 - x1):.1f}" '
                             f'height="{lane_height - 2}" rx="2" fill="{color(segment.color)}">'
                             f'<title>{escape(segment.note)}</title></rect>')
        for when, note in lane.marks:
            mx = x(when)
            parts.append(f'<line class="lane-mark" x1="{mx:.1f}" y1="{y:.1f}" x2="{mx:.1f}" '
                         f'y2="{y + lane_height:.1f}"><title>{escape(note)}</title></line>')
        parts.append('</g>')
    parts.append(f'<line class="axis" x1="{plot_left:.1f}" y1="{axis_y:.1f}" '
                 f'x2="{plot_left + plot_w:.1f}" y2="{axis_y:.1f}"/></svg>')
    svg = "".join(parts)
    if len(lanes) > max_lanes:
        svg += f'<p class="note">Showing the first {max_lanes} of {len(lanes)} lanes.</p>'
    return svg


@dataclass(frozen=True)
class GridCell:
    color: str
    text: str = ""          # a few characters drawn in the cell
    note: str = ""          # hover text
    href: str | None = None  # "#id" of the cell's detail


def grid(rows: Sequence[str], columns: Sequence[str], cells: Mapping[tuple[str, str], GridCell],
         *, label: str, cell_width: int = 64, cell_height: int = 34,
         row_header: str = "", column_header: str = "") -> str:
    """A heat-map grid; missing cells are drawn as an empty outline."""
    if not rows or not columns:
        return empty_note(f"{label}: nothing to chart")
    left = min(280.0, max(56.0, max(_text_width(_clip(r, 36)) for r in rows) + 14))
    top = 40 if column_header else 26
    width = left + len(columns) * cell_width + 8
    height = top + len(rows) * cell_height + 8
    parts = [_svg_open(width, height, label, "grid")]
    if column_header:
        parts.append(f'<text class="axis-label" x="{left:.1f}" y="12">'
                     f'{escape(column_header)}</text>')
    if row_header:
        parts.append(f'<text class="axis-label" x="4" y="{top - 8}">{escape(row_header)}</text>')
    for c_index, column in enumerate(columns):
        cx = left + c_index * cell_width + cell_width / 2
        parts.append(f'<text class="col-head" x="{cx:.1f}" y="{top - 8}" text-anchor="middle">'
                     f'{escape(_clip(column, max(3, cell_width // 8)))}<title>'
                     f'{escape(column)}</title></text>')
    for r_index, row_name in enumerate(rows):
        y = top + r_index * cell_height
        parts.append(f'<text class="row-head" x="{left - 8:.1f}" y="{y + cell_height / 2 + 4:.1f}" '
                     f'text-anchor="end">{escape(_clip(row_name, 36))}<title>'
                     f'{escape(row_name)}</title></text>')
        for c_index, column in enumerate(columns):
            x = left + c_index * cell_width
            cell = cells.get((row_name, column))
            if cell is None:
                parts.append(f'<rect class="cell-empty" x="{x + 2:.1f}" y="{y + 2:.1f}" '
                             f'width="{cell_width - 4}" height="{cell_height - 4}" rx="4"/>')
                continue
            body = (f'<rect class="cell" x="{x + 2:.1f}" y="{y + 2:.1f}" width="{cell_width - 4}" '
                    f'height="{cell_height - 4}" rx="4" fill="{color(cell.color)}"/>'
                    f'<text class="cell-text" x="{x + cell_width / 2:.1f}" '
                    f'y="{y + cell_height / 2 + 4:.1f}" '
                    f'text-anchor="middle">{escape(_clip(cell.text, max(2, cell_width // 8)))}</tex'
                    f't>'
                    f'<title>{escape(cell.note or cell.text)}</title>')
            if cell.href:
                parts.append(f'<a class="cell-link" href="{escape(cell.href)}">{body}</a>')
            else:
                parts.append(f'<g>{body}</g>')
    parts.append('</svg>')
    return "".join(parts)


# ---------------------------------------------------------------------------- blocks

def empty_note(text: str) -> str:
    return f'<p class="note empty">{escape(text)}</p>'


def legend(items: Iterable[tuple[str, str, str]]) -> str:
    """Swatches: (colour, name, what it means)."""
    entries = "".join(
        f'<li><span class="swatch" style="background:{color(c)}"></span>'
        f'<strong>{escape(name)}</strong>{" — " + escape(meaning) if meaning else ""}</li>'
        for c, name, meaning in items)
    return f'<ul class="legend">{entries}</ul>'


def badge(text: str, tone: str = MUTED) -> str:
    return f'<span class="badge" style="background:{color(tone)}">{escape(text)}</span>'


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, numeric: Sequence[int] = (),
          caption: str = "", row_html: bool = False, css_class: str = "") -> str:
    """A table of plain values (escaped). With `row_html`, cells are trusted markup built
    by these helpers (the caller escapes)."""
    head = "".join(f'<th class="{"num" if i in numeric else ""}">{escape(h)}</th>'
                   for i, h in enumerate(headers))
    body_rows = []
    for row in rows:
        cells = []
        for index, value in enumerate(row):
            shown = (
                value
                if row_html
                else escape(value if isinstance(value, str) else fmt_number(value))
            )
            cells.append(f'<td class="{"num" if index in numeric else ""}">{shown}</td>')
        body_rows.append(f"<tr>{''.join(cells)}</tr>")
    if not body_rows:
        body_rows.append(f'<tr><td colspan="{len(headers)}" class="muted">none</td></tr>')
    cap = f"<caption>{escape(caption)}</caption>" if caption else ""
    return (f'<div class="table-wrap"><table class="{escape(css_class)}">{cap}<thead><tr>'
            f'{head}</tr></thead>'
            f'<tbody>{"".join(body_rows)}</tbody></table></div>')


def facts(items: Iterable[tuple[str, Any]]) -> str:
    """A definition list of label → value (values escaped)."""
    body = "".join(f"<div><dt>{escape(k)}</dt><dd>"
                   f"{escape(v if isinstance(v, str) else fmt_number(v))}</dd></div>"
                   for k, v in items)
    return f'<dl class="facts">{body}</dl>'


def stat_tiles(items: Iterable[tuple[str, Any, str]]) -> str:
    """Big numbers: (label, value, colour). A "mean ± se" value shows its ± part smaller."""
    tiles = []
    for label, value, tone in items:
        text = value if isinstance(value, str) else fmt_number(value)
        main, sep, error = text.partition(" ± ")
        shown = escape(main) + (f' <span class="tile-se">± {escape(error)}</span>' if sep else "")
        tiles.append(f'<div class="tile" style="border-top-color:{color(tone)}"><div '
                     f'class="tile-value">'
                     f'{shown}</div><div class="tile-label">{escape(label)}</div></div>')
    return f'<div class="tiles">{"".join(tiles)}</div>'


def details(summary_html: str, body_html: str, *, element_id: str | None = None,
            open_: bool = False, css_class: str = "") -> str:
    ident = f' id="{escape(element_id)}"' if element_id else ""
    opened = " open" if open_ else ""
    classes = " ".join(filter(None, ("drill", escape(css_class))))
    return (f'<details class="{classes}"{ident}{opened}><summary>{summary_html}</summary>'
            f'<div class="drill-body">{body_html}</div></details>')


def pre(value: Any, css_class: str = "") -> str:
    return f'<pre class="text {escape(css_class)}">{pre_text(value)}</pre>'


def highlight(text: str, spans: Sequence[tuple[int, int, str]],
              labels: Mapping[str, str] | None = None) -> str:
    """Verbatim text with character ranges wrapped in <mark class=...> (escaped pieces).

    Spans are (start, end, css_class) in characters of `text`; overlapping spans are
    clipped so the output stays well nested.
    """
    pieces: list[str] = []
    cursor = 0
    for start, end, css_class in sorted(spans):
        start = max(start, cursor)
        end = min(end, len(text))
        if start >= end:
            continue
        pieces.append(pre_text(text[cursor:start], labels))
        pieces.append(f'<mark class="{escape(css_class)}">{pre_text(text[start:end], labels)}</mark'
                      f'>')
        cursor = end
    pieces.append(pre_text(text[cursor:], labels))
    return "".join(pieces)


def section(element_id: str, title: str, body_html: str, *, intro: str = "") -> str:
    lead = f'<p class="intro">{escape(intro)}</p>' if intro else ""
    return (f'<section id="{escape(element_id)}" class="card"><h2>{escape(title)}</h2>'
            f'{lead}{body_html}</section>')


VERDICT_COLORS = {"pass": GOOD, "fail": BAD, "info": ACCENT}


def verdict_banner(verdict: Mapping[str, Any] | None) -> str:
    """The first thing on the page: PASS / FAIL / INFO and the one-line reason."""
    if not verdict:
        kind, reason = "info", "no verdict recorded for this run"
    else:
        kind = str(verdict.get("kind", "info"))
        reason = str(verdict.get("reason", ""))
    if kind not in VERDICT_COLORS:
        kind = "info"
    return (f'<section class="verdict verdict-{kind}" id="verdict" role="status">'
            f'<span class="verdict-kind">{escape(kind.upper())}</span>'
            f'<span class="verdict-reason">{escape(reason)}</span></section>')


def run_facts(report: Mapping[str, Any]) -> str:
    """Identity of the run from the envelope's `run` block (whatever of it is there)."""
    run = report.get("run") or {}
    target = run.get("target") or {}
    host = run.get("host") or {}
    started = run.get("started_at")
    duration = formatting.duration(run.get("duration_s"))  # the report's, never computed here
    items: list[tuple[str, Any]] = [
        ("run", run.get("id") or "—"),
        ("suite", f"{report.get('suite', '—')} · bench {report.get('bench_version', '—')}"),
    ]
    target_text = " · ".join(
        str(target[k]) for k in ("url", "base_url", "model", "name") if target.get(k)
    )
    if target_text:
        items.append(("target", target_text))
    items += [
        ("started", formatting.when(started)),
        ("duration", duration),
        ("status", run.get("status") or "—"),
        ("seeds", ", ".join(str(s) for s in run.get("seeds") or []) or "—"),
        ("git", (run.get("git_sha") or "—")[:12]),
        ("benchwarden", run.get("package_version") or "—"),
    ]
    if host:
        items.append(
            ("host", " · ".join(f"{k} {v}" for k, v in host.items() if v not in (None, "")))
        )
    if run.get("resumed_from"):
        items.append(("resumed from", run["resumed_from"]))
    return facts(items)


_CSS = """
:root{--fg:#1f2328;--muted:#656d76;--line:#d0d7de;--bg:#f6f8fa;--card:#fff;--accent:#0072B2;
--good:#1a7f37;--bad:#cf222e;--warn:#bf8700;
--mono:ui-monospace,SFMono-Regular,"SF Mono",Menlo,Consolas,"Liberation Mono",monospace;
--sans:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,"Noto Sans",sans-serif}
*{box-sizing:border-box}
html{scroll-behavior:smooth}
[id]{scroll-margin-top:52px}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.5 var(--sans)}
header.top{background:#24292f;color:#fff;padding:20px 0 16px}
header.top .wrap{display:flex;flex-wrap:wrap;align-items:baseline;gap:6px 18px}
header.top h1{margin:0;font-size:22px;font-weight:600;letter-spacing:.2px}
header.top .sub{color:#c9d1d9;font-size:14px}
header.top .brand{font-weight:700;color:#8ddbff;margin-right:4px}
.wrap{max-width:1240px;margin:0 auto;padding:0 24px}
nav.toc{position:sticky;top:0;z-index:5;background:rgba(246,248,250,.94);backdrop-filter:blur(4px);
border-bottom:1px solid var(--line)}
nav.toc .wrap{display:flex;flex-wrap:wrap;gap:4px 18px;padding-top:8px;padding-bottom:8px;
font-size:13px}
nav.toc a{color:var(--muted);text-decoration:none}
nav.toc a:hover{color:var(--accent)}
main{padding:18px 0 40px}
.verdict{display:flex;align-items:center;gap:16px;border-radius:10px;padding:16px 20px;
margin:0 0 18px;
color:#fff;box-shadow:0 1px 2px rgba(0,0,0,.08)}
.verdict-pass{background:var(--good)}.verdict-fail{background:var(--bad)}.verdict-info{background:var(--accent)}
.verdict-kind{font-weight:800;font-size:24px;letter-spacing:1.5px;padding:2px 14px;
border:2px solid rgba(255,255,255,.85);
border-radius:8px}
.verdict-reason{font-size:16px;line-height:1.4}
.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:18px 22px;
margin:0 0 18px}
.card h2{margin:0 0 6px;font-size:18px;font-weight:600}
.card h3{margin:18px 0 6px;font-size:15px;font-weight:600}
.intro{color:var(--muted);margin:0 0 14px;max-width:80ch}
.note{color:var(--muted);font-size:13px;margin:6px 0}
.muted{color:var(--muted)}
.alert{background:#ffebe9;border:1px solid #ffcecb;border-radius:8px;padding:10px 14px;
color:#82071e}
dl.facts{display:grid;grid-template-columns:repeat(auto-fill,minmax(230px,1fr));gap:8px 22px;
margin:0}
dl.facts div{min-width:0}
dl.facts dt{font-size:12px;color:var(--muted);text-transform:uppercase;letter-spacing:.5px}
dl.facts dd{margin:0;font-family:var(--mono);font-size:13px;overflow-wrap:anywhere}
.tiles{display:grid;grid-template-columns:repeat(auto-fill,minmax(170px,1fr));gap:10px;
margin:4px 0 14px}
.tile{border:1px solid var(--line);border-top:4px solid var(--accent);border-radius:8px;
padding:8px 12px;background:#fff}
.tile-value{font-size:20px;font-weight:650;font-variant-numeric:tabular-nums;white-space:nowrap}
.tile-se{font-size:13px;font-weight:500;color:var(--muted)}
.tile-label{font-size:12px;color:var(--muted)}
.table-wrap{overflow-x:auto;margin:6px 0 10px}
table{border-collapse:collapse;font-size:14px;min-width:50%}
caption{text-align:left;color:var(--muted);font-size:13px;padding:0 0 4px}
th,td{padding:6px 12px;border-bottom:1px solid #eaeef2;text-align:left;vertical-align:top}
th{font-size:12px;text-transform:uppercase;letter-spacing:.4px;color:var(--muted);font-weight:600;
border-bottom:2px solid var(--line);white-space:nowrap}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tbody tr:hover{background:#f6f8fa}
td{overflow-wrap:anywhere}
.nowrap{white-space:nowrap}
.legend{list-style:none;display:flex;flex-wrap:wrap;gap:6px 20px;padding:0;margin:8px 0 12px;
font-size:13px}
.legend li{display:flex;align-items:center;gap:6px}
.legend strong{font-weight:600}
.swatch{display:inline-block;width:14px;height:14px;border-radius:3px;flex:none}
.badge{display:inline-block;color:#fff;border-radius:999px;padding:0 9px;font-size:12px;
font-weight:600;
line-height:20px;white-space:nowrap}
svg.chart{display:block;max-width:100%;height:auto;margin:6px 0 10px;font-family:var(--sans);
overflow:visible}
svg .grid{stroke:#eaeef2;stroke-width:1}
svg .axis{stroke:#8c959f;stroke-width:1}
svg .tick,svg .axis-label{font-size:11px;fill:var(--muted)}
svg .bar-label,svg .row-head,svg .lane-label{font-size:12px;fill:var(--fg)}
svg .lane-label{font-size:11px}
svg .col-head,svg .group-label{font-size:12px;fill:var(--fg);font-weight:600}
svg .bar-value{font-size:12px;fill:var(--fg);font-variant-numeric:tabular-nums}
svg .col-value{font-size:11px;fill:var(--fg);font-variant-numeric:tabular-nums}
svg .legend-text{font-size:12px;fill:var(--fg)}
svg .whisker line{stroke:#24292f;stroke-width:1.4}
svg .marker{stroke:var(--bad);stroke-width:1.5;stroke-dasharray:5 3}
svg .marker-label{font-size:11px;fill:var(--bad)}
svg .lane-mark{stroke:#24292f;stroke-width:1.5}
svg .cell-text{font-size:12px;font-weight:650;fill:#fff;pointer-events:none}
svg .cell-empty{fill:none;stroke:var(--line);stroke-dasharray:3 3}
svg a.cell-link rect{transition:opacity .1s}
svg a.cell-link:hover rect{opacity:.8;stroke:#24292f;stroke-width:2}
svg .muted{fill:var(--muted)}
svg .band{fill:#fff1e5;stroke:#f0c79a;stroke-dasharray:3 3}
svg .rule-label{font-size:11px;font-weight:600}
details.drill{border:1px solid var(--line);border-radius:8px;margin:8px 0;background:#fff}
details.drill>summary{cursor:pointer;padding:8px 12px;display:flex;flex-wrap:wrap;gap:6px 12px;
align-items:center;
list-style:none}
details.drill>summary::-webkit-details-marker{display:none}
details.drill>summary::before{content:"▸";color:var(--muted);width:10px}
details.drill[open]>summary::before{content:"▾"}
details.drill[open]>summary{border-bottom:1px solid var(--line);background:#f6f8fa;
border-radius:8px 8px 0 0}
details.drill:target,details.drill.flash{box-shadow:0 0 0 3px rgba(0,114,178,.35)}
.drill-body{padding:10px 14px}
pre.text{font-family:var(--mono);font-size:12.5px;line-height:1.45;background:#f6f8fa;
border:1px solid #eaeef2;
border-radius:6px;padding:10px 12px;margin:4px 0 10px;white-space:pre-wrap;overflow-wrap:anywhere;
max-height:420px;overflow:auto}
.ctl{color:#fff;background:#8c959f;border-radius:3px;padding:0 4px;margin:0 2px;
font:600 10px/1.6 var(--sans);
vertical-align:1px;white-space:nowrap}
mark{border-radius:2px;padding:0 1px}
.elided{display:block;color:var(--muted);font:italic 12px/1.6 var(--sans);margin:2px 0}
mark.same{background:none;color:var(--muted)}
mark.diverge{background:#ffd8b5;color:#6b2b00;outline:2px solid #d55e00}
mark.after{background:#fff1e5}
mark.foreign{background:#ffcecb;color:#82071e;outline:2px solid var(--bad);font-weight:700}
.side{display:grid;grid-template-columns:1fr 1fr;gap:14px}
.side>div{min-width:0}
.side h4,.drill-body h4{margin:6px 0 2px;font-size:13px;color:var(--muted);font-weight:600}
@media (max-width:820px){.side{grid-template-columns:1fr}.wrap{padding:0 12px}}
.kv{font-family:var(--mono);font-size:12.5px}
.chips{display:flex;flex-wrap:wrap;gap:6px;margin:4px 0 8px}
.two-col{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:18px}
@media (max-width:1000px){.two-col{grid-template-columns:1fr}}
footer{color:var(--muted);font-size:12px;padding:0 0 30px}
@media print{nav.toc{display:none}details.drill{break-inside:avoid}}
"""

# Opens a drill-down when a link points at it (a grid cell, a timeline lane), so a
# click lands on the open detail; without script the link still scrolls there.
_SCRIPT = """
(function(){
  function openTarget(){
    var id = decodeURIComponent(location.hash.slice(1));
    if(!id) return;
    var el = document.getElementById(id);
    if(!el) return;
    var node = el;
    while(node){ if(node.tagName === "DETAILS"){ node.open = true; } node = node.parentElement; }
    el.classList.add("flash");
    setTimeout(function(){ el.classList.remove("flash"); }, 1600);
    el.scrollIntoView({block: "start", behavior: "instant"});
  }
  window.addEventListener("hashchange", openTarget);
  document.addEventListener("DOMContentLoaded", openTarget);
})();
"""


def page(*, title: str, report: Mapping[str, Any], sections: Sequence[tuple[str, str, str]],
         subtitle: str = "", embed_data: bool = True) -> str:
    """The whole document. `sections` are (id, nav label, section html)."""
    verdict = report.get("verdict")
    nav = "".join(f'<a href="#{escape(ident)}">{escape(name)}</a>' for ident, name, _ in sections)
    body = "".join(markup for _, _, markup in sections)
    data = (f'<script type="application/json" id="report-data">{json_for_script(report)}</script>'
            if embed_data else "")
    run = report.get("run") or {}
    sub = subtitle or f"run {run.get('id', '—')}"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # The page may run its own inline script and nothing else: no network at all.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>"
        f'<header class="top"><div class="wrap"><h1><span class="brand">benchwarden</span>'
        f'{escape(title)}</h1><span class="sub">{escape(sub)}</span></div></header>'
        f'<nav class="toc"><div class="wrap"><a href="#verdict">verdict</a>{nav}</div></nav>'
        f'<main><div class="wrap">{verdict_banner(verdict)}{body}</div></main>'
        f'<footer><div class="wrap">Self-contained report: every chart is drawn in this file and '
        f'nothing is fetched. Schema {escape(report.get("schema", "—"))}; the report JSON is '
        f'embedded '
        f'in the element <code>#report-data</code>.</div></footer>'
        f"{data}<script>{_SCRIPT}</script></body></html>\n")


__all__ = [
    "ACCENT", "anchor_id", "BAD", "badge", "Bar", "bar_chart", "clip_long_names", "Clipped",
    "clipped_name", "color", "details", "diverging_bars", "empty_note", "escape", "facts", "FAINT",
    "fmt_number", "fmt_percent", "GOOD", "grid", "GridCell", "grouped_bars", "highlight",
    "json_for_script", "Lane", "legend", "MUTED", "NAME_LIMIT", "names_in", "nice_ticks", "page",
    "pre", "pre_text", "Rule", "run_facts", "section", "Segment", "SENTENCE_LIMIT", "Series",
    "SERIES_COLORS", "stat_tiles", "table", "timeline", "verdict_banner", "WARN",
]
