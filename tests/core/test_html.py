"""The HTML page shell and chart helpers: escaping, safe JSON islands, no network."""

from __future__ import annotations

import html as stdlib_html
import json
import re
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.core import html as h

HOSTILE = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "\"'><svg onload=alert(1)>",
           "a\u2028b\u2029c", "</script><script>alert(1)</script>", "<!--", "&amp;"]


class _Collector(HTMLParser):
    """Collects tags, attributes and text so tests can see what a browser would build."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.script_text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        (self.script_text if self._in_script else self.text).append(data)


def parse(markup: str) -> _Collector:
    collector = _Collector()
    collector.feed(markup)
    collector.close()
    return collector


@pytest.mark.parametrize("hostile", HOSTILE)
def test_escape_makes_text_inert(hostile: str) -> None:
    parsed = parse(f"<p title=\"{h.escape(hostile)}\">{h.escape(hostile)}</p>")
    assert [tag for tag, _ in parsed.tags] == ["p"]
    assert parsed.tags[0][1]["title"] == hostile
    assert "".join(parsed.text) == hostile


@given(st.text())
def test_pre_text_adds_no_element_but_its_own_spans(text: str) -> None:
    parsed = parse(f"<pre>{h.pre_text(text)}</pre>")
    assert {tag for tag, _ in parsed.tags} <= {"pre", "span"}
    assert all(attrs.get("class") == "ctl" for tag, attrs in parsed.tags if tag == "span")


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20))
@settings(max_examples=200)
def test_json_island_round_trips_and_cannot_close_its_script(value) -> None:
    island = h.json_for_script(value)
    assert "<" not in island and ">" not in island and "&" not in island
    assert "\u2028" not in island and "\u2029" not in island
    assert json.loads(island) == value


@pytest.mark.parametrize("hostile", HOSTILE)
def test_json_island_in_a_page_stays_one_script(hostile: str) -> None:
    page = h.page(title="t", report={"verdict": {"kind": "pass", "reason": hostile},
                                     "payload": [hostile, {hostile: hostile}]}, sections=[])
    parsed = parse(page)
    scripts = [attrs for tag, attrs in parsed.tags if tag == "script"]
    assert len(scripts) == 2  # the data island and the page's own helper
    assert not any(tag in ("img", "svg") for tag, _ in parsed.tags)
    island = re.search(r'id="report-data">(.*?)</script>', page, re.S).group(1)
    assert json.loads(island)["payload"] == [hostile, {hostile: hostile}]


def test_verdict_banner_shows_kind_and_escaped_reason() -> None:
    banner = h.verdict_banner({"kind": "fail", "reason": "<b>3 diverged</b>"})
    assert 'verdict-fail' in banner and ">FAIL<" in banner
    assert "&lt;b&gt;3 diverged&lt;/b&gt;" in banner


def test_verdict_banner_without_verdict_is_info_not_pass() -> None:
    assert "verdict-info" in h.verdict_banner(None)
    assert "verdict-info" in h.verdict_banner({"kind": "<script>", "reason": "x"})


def test_colors_come_only_from_a_hex_table() -> None:
    assert h.color("#0072B2") == "#0072B2"
    for bad in ("red", "#12345g", "#fff\" onload=\"x", "url(x)"):
        with pytest.raises(ValueError):
            h.color(bad)


@given(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6))
def test_nice_ticks_cover_the_range_in_increasing_order(a: float, b: float) -> None:
    low, high = min(a, b), max(a, b)
    ticks = h.nice_ticks(low, high)
    assert ticks == sorted(ticks)
    assert ticks[0] <= low + 1e-6
    assert ticks[-1] >= high - 1e-6 or high == low


def test_highlight_marks_ranges_and_escapes_each_piece() -> None:
    text = "same <prefix> then DIFF"
    out = h.highlight(text, [(19, 20, "diverge"), (20, len(text), "after")])
    assert out == ("same &lt;prefix&gt; then <mark class=\"diverge\">D</mark>"
                   "<mark class=\"after\">IFF</mark>")
    # overlapping spans are clipped, never nested
    nested = h.highlight("abcdef", [(0, 4, "x"), (2, 6, "y")])
    assert nested == '<mark class="x">abcd</mark><mark class="y">ef</mark>'


def test_control_characters_are_drawn_not_hidden() -> None:
    out = h.pre_text("a\x01b\x04\u2028")
    assert "\x01" not in out and "\x04" not in out and "\u2028" not in out
    assert ">SOH<" in out and ">EOT<" in out and ">LS<" in out
    assert ">reasoning end<" in h.pre_text("\x01", {"\x01": "reasoning end"})


def test_charts_are_svg_with_escaped_labels() -> None:
    hostile = "<script>alert(1)</script>"
    charts = [
        h.bar_chart([h.Bar(hostile, 0.5, 0.4, 0.6), h.Bar("b", None)], label=hostile),
        h.grouped_bars(
            ["g1", hostile],
            [h.Series(hostile, h.ACCENT)],
            {("g1", hostile): h.Bar("x", 2.0, 1.0, 3.0)},
            label="grouped",
        ),
        h.timeline(
            [h.Lane(hostile, [h.Segment(0, 10, h.ACCENT, hostile)], [(0.0, hostile)])],
            label="timeline",
        ),
        h.grid(
            [hostile], ["c"], {(hostile, "c"): h.GridCell(h.GOOD, "✓", hostile, "#x")}, label="grid"
        ),
    ]
    for chart in charts:
        parsed = parse(chart)
        assert parsed.tags[0][0] == "svg"
        assert "script" not in {tag for tag, _ in parsed.tags}
        assert "<script>" not in chart


def test_bar_chart_draws_one_whisker_per_interval() -> None:
    chart = h.bar_chart([h.Bar("a", 0.5, 0.3, 0.7), h.Bar("b", 0.2), h.Bar("c", 0.9, 0.8, 1.0)],
                        label="rates", max_value=1.0)
    assert chart.count('class="whisker"') == 2
    assert chart.count("<rect") == 3


def test_timeline_caps_the_lanes_it_draws() -> None:
    lanes = [h.Lane(f"slot {i}", [h.Segment(i, i + 1, h.ACCENT)]) for i in range(100)]
    chart = h.timeline(lanes, label="t", max_lanes=10)
    assert chart.count('class="lane"') == 10
    assert "first 10 of 100" in chart


def test_empty_charts_say_so() -> None:
    assert "nothing to chart" in h.bar_chart([], label="x")
    assert "nothing to chart" in h.grid([], [], {}, label="x")


def test_page_has_no_external_reference() -> None:
    page = h.page(
        title="t",
        report={"run": {"target": {"url": "https://example.invalid/v1"}}},
        sections=[("a", "a", h.section("a", "A", h.bar_chart([h.Bar("x", 1.0)], label="x")))],
    )
    parsed = parse(page)
    for tag, attrs in parsed.tags:
        for name in ("src", "href", "action", "data", "poster"):
            value = attrs.get(name) or ""
            assert not re.match(r"\s*(https?:)?//", value, re.I), (tag, name, value)
    assert "@import" not in page and "@font-face" not in page and "url(" not in page
    assert "Content-Security-Policy" in page


def test_table_escapes_plain_cells() -> None:
    out = h.table(("a", "b"), [("<i>x</i>", 1234)], numeric=(1,))
    assert "&lt;i&gt;x&lt;/i&gt;" in out and "1,234" in out


def test_numbers_for_people() -> None:
    assert h.fmt_number(None) == "—"
    assert h.fmt_number(1234567) == "1,234,567"
    assert h.fmt_number(0.12345) == "0.12"
    assert h.fmt_percent(0.5) == "50.0%"
    assert stdlib_html.unescape(h.escape("<&>\"'")) == "<&>\"'"


def test_diverging_bars_put_negative_values_left_of_zero_and_shade_the_band() -> None:
    chart = h.diverging_bars([h.Bar("up", 0.02), h.Bar("down", -0.01)], label="diffs",
                             rules=[h.Rule(0.007, "band")], shade=(-0.007, 0.007))
    assert chart.count('class="band"') == 1
    zero = float(re.search(r'<line class="axis" x1="([\d.]+)"', chart).group(1))
    bars = re.findall(r'<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)"', chart)
    (up_x, up_w), (down_x, down_w) = [(float(x), float(w)) for x, w in bars]
    assert abs(up_x - zero) < 0.2 and up_w > 0
    assert abs(down_x + down_w - zero) < 0.2


def test_a_bar_colour_overrides_its_series_colour_in_grouped_bars() -> None:
    chart = h.grouped_bars(
        ["g"], [h.Series("s", h.ACCENT)], {("g", "s"): h.Bar("g", 1.0, color=h.BAD)}, label="x"
    )
    assert f'fill="{h.BAD}"' in chart
    plain = h.grouped_bars(["g"], [h.Series("s", h.WARN)], {("g", "s"): h.Bar("g", 1.0)}, label="x")
    assert plain.count(f'fill="{h.WARN}"') == 2  # legend swatch and bar


def test_details_are_linkable_and_escaped() -> None:
    out = h.details("<b>s</b>", "body", element_id='x" onclick="y')
    assert 'id="x&quot; onclick=&quot;y"' in out
    assert out.startswith('<details class="drill"')
