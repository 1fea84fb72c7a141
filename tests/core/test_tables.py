"""Tables fitted to the console (`core.tables`): a word is never broken or cut, a table
too wide is printed in parts that each repeat the row's name, and a table that fits is
printed exactly as rich prints it."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Table

from benchwarden.core.reports import console as report_console
from benchwarden.core.tables import FitTables, fitted

BOX = re.compile(r"[│┃┏┓┗┛┡┩└┘┌┐━─┳┻╇╈┼┬┴├┤╋]+")
ELLIPSIS = "…"


def rendered(table: Table, width: int, *, fit: bool = True) -> str:
    made = Console(record=True, width=width, highlight=False, soft_wrap=False,
                   color_system=None)
    if fit:
        made.push_render_hook(FitTables(made))
    made.print(table)
    return made.export_text()


def tokens(text: str) -> list[str]:
    return BOX.sub(" ", text).split()


def make_table(headers: list[str], rows: list[list[str]], title: str | None = "t") -> Table:
    table = Table(title=title)
    for header in headers:
        table.add_column(header)
    for row in rows:
        table.add_row(*row)
    return table


WORD_BODY = st.text(alphabet="abcxyz0123456789,.%()±-", min_size=0, max_size=14)


@st.composite
def tables(draw):
    """Tables whose every word is unique (it names its row, column and place), so a word
    found whole in the output was printed whole, not pieced from another cell's."""
    columns = draw(st.integers(1, 12))
    rows = draw(st.integers(1, 5))

    def cell(row: int, column: int) -> str:
        words = draw(st.integers(1, 4))
        return " ".join(f"{draw(WORD_BODY)}r{row}c{column}w{k}" for k in range(words))

    headers = [cell(-1, column) for column in range(columns)]
    body = [[cell(row, column) for column in range(columns)] for row in range(rows)]
    return headers, body


@settings(max_examples=150, deadline=None)
@given(drawn=tables(), width=st.integers(30, 200))
def test_every_word_is_printed_whole_and_no_line_is_wider_than_the_console(drawn, width):
    headers, body = drawn
    table = make_table(headers, body)
    text = rendered(table, width)
    words = [word for row in [headers, *body] for cell in row for word in cell.split()]
    longest = {column: max(len(word) for row in [headers, *body] for word in row[column].split())
               for column in range(len(headers))}
    # a part holds the first column and one other at least: 7 = the borders and padding
    fits = all(longest[0] + longest[column] + 7 <= width for column in longest)
    assert ELLIPSIS not in text
    if fits:
        printed = set(tokens(text))
        assert [word for word in words if word not in printed] == []
        assert max(map(len, text.splitlines())) <= width


@settings(max_examples=150, deadline=None)
@given(drawn=tables(), width=st.integers(30, 200))
def test_the_parts_hold_every_column_once_in_order_and_each_repeats_the_first(drawn, width):
    headers, body = drawn
    parts = fitted(make_table(headers, body), Console(width=width), width)
    shown = [column.header for part in parts for column in part.columns[1:]]
    if len(headers) == 1:
        assert [[column.header for column in part.columns] for part in parts] == [headers]
        return
    assert shown == headers[1:]
    for part in parts:
        assert part.columns[0].header == headers[0]
        assert [list(column.cells) for column in part.columns][0] == [row[0] for row in body]
    if len(parts) > 1:
        assert [part.title for part in parts] == [f"t · part {n} of {len(parts)}"
                                                 for n in range(1, len(parts) + 1)]


@settings(max_examples=100, deadline=None)
@given(drawn=tables(), width=st.integers(30, 200))
def test_a_table_that_fits_is_printed_as_rich_prints_it(drawn, width):
    headers, body = drawn
    plain = rendered(make_table(headers, body), 10_000, fit=False)
    natural = max(map(len, plain.splitlines()))
    if natural <= width:
        assert rendered(make_table(headers, body), width) == rendered(
            make_table(headers, body), width, fit=False)


def test_a_count_too_wide_for_rich_s_own_fit_is_no_longer_broken_at_80_columns():
    headers = ["arm", "samples", "success", "cost-eq tokens", "per task [BCa 95 %]",
               "raw tokens", "turns", "duration s", "covered/partial/missing", "imputed $"]
    row = ["cli", "33,334", "55% [55, 56]", "6,370 ± 9", "6,370 [6,354, 6,388]",
           "13,291 ± 33", "7.5 ± 0.0", "21.0 ± 0.1", "200/0/0 of 200", "0.0256 ± 0.0001"]
    broken = tokens(rendered(make_table(headers, [row]), 80, fit=False))
    assert "33,334" not in broken  # rich alone prints it as "33,33" over "4"
    printed = tokens(rendered(make_table(headers, [row]), 80))
    assert all(word in printed for cell in row for word in cell.split())
    assert printed.count("cli") == 2  # two parts, each naming the row


def test_the_report_console_fits_its_tables(monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    made = report_console()
    made.begin_capture()
    made.print(make_table(["name"] + [f"column{i}" for i in range(9)],
                          [["row"] + [f"value{i:04d}" for i in range(9)]], title=None))
    text = made.end_capture()
    assert "part 1 of" in text and all(f"value{i:04d}" in text for i in range(9))
    assert max(map(len, text.splitlines())) <= 60


def test_a_column_that_may_not_wrap_keeps_its_line_whole():
    table = Table()
    table.add_column("key")
    table.add_column("id", no_wrap=True)
    table.add_column("prose")
    table.add_row("k", "run-20261130T120000Z-abcdef", " ".join(["word"] * 30))
    text = rendered(table, 60)
    assert "run-20261130T120000Z-abcdef" in text
    assert max(map(len, text.splitlines())) <= 60
