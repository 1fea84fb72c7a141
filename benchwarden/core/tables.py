"""Terminal tables that stay readable at any width: a word is never broken or cut.

rich fits a table too wide for the console by narrowing its columns, and a column
narrower than its longest word breaks that word: at 80 columns the arms headline printed
`33,334` samples as `33,33` over `4`, and the contamination grid of a run with two dozen
rungs drew empty boxes. Every console made by `core.reports.console()` carries
`FitTables`, so every table printed through it is fitted, whoever built it:

- a table whose columns fit at their natural width is printed as rich lays it out;
- one that fits with every column at least as wide as its longest word is printed with
  those widths fixed (the room left goes to the columns that wrap), so words wrap whole;
- one that does not is printed in parts of consecutive columns, each part repeating the
  first column (the row's name) and titled "part i of k", in the original column order.

Invariants: every cell is printed exactly once per part that holds its column, with its
words whole whenever its column's longest word fits beside the first column; nothing is
cut with an ellipsis (a column that asked for "crop" or "ignore" explicitly keeps it);
the table handed in is never changed except that cutting columns fold.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence

from rich.cells import cell_len
from rich.console import Console, ConsoleRenderable, RenderHook
from rich.measure import Measurement
from rich.table import Column, Table
from rich.text import Text


def fold_table(table: Table) -> Table:
    """`table` with every column that would cut ("ellipsis", rich's default) folding."""
    for column in table.columns:
        if column.overflow == "ellipsis":
            column.overflow = "fold"
    return table


def fitted(table: Table, console: Console, width: int | None = None) -> list[Table]:
    """`table` as tables that each fit `width` (the console's by default) without breaking
    a word: the table itself when it fits as it is, else copies (see the module's note)."""
    width = console.width if width is None else width
    columns = table.columns
    if not columns or _upper_bound(table) <= width:
        return [table]
    spans = [_span(console, table, column) for column in columns]
    pads = [_padding(table, index, len(columns)) for index in range(len(columns))]
    if sum(most for _, most in spans) + sum(pads) + _borders(table, len(columns)) <= width:
        return [table]
    parts = _parts([least + pad for (least, _), pad in zip(spans, pads, strict=True)], table, width)
    made = []
    for number, part in enumerate(parts, start=1):
        room = width - _borders(table, len(part)) - sum(_padding(table, i, len(part))
                                                      for i in range(len(part)))
        widths = _share(room, [spans[index] for index in part])
        block = copy.copy(table)
        block.columns = [dataclasses.replace(columns[index], width=chosen, _index=position)
                         for position, (index, chosen) in enumerate(zip(part, widths, strict=True))]
        if len(parts) > 1:
            block.title = _part_title(table.title, number, len(parts))
            if number < len(parts):
                block.caption = None
        made.append(block)
    return made


def _upper_bound(table: Table) -> float:
    """A width no narrower than the table's natural one, from the cells' lengths alone
    (markup counts, so it can only be over): most tables that fit skip measuring."""
    total = 0.0
    for index, column in enumerate(table.columns):
        widest = _length(column.header)
        for cell in column.cells:
            widest = max(widest, _length(cell))
        total += widest + _padding(table, index, len(table.columns))
    return total + _borders(table, len(table.columns))


def _length(cell: object) -> float:
    if isinstance(cell, str):
        return cell_len(cell)
    if isinstance(cell, Text):
        return cell.cell_len
    return float("inf")


def _span(console: Console, table: Table, column: Column) -> tuple[int, int]:
    """The column's content width: (its longest word, its longest line), headers included."""
    options = console.options
    least, most = 1, 1
    cells: list[object] = [column.header] if table.show_header else []
    cells.extend(column.cells)
    if table.show_footer:
        cells.append(column.footer)
    for cell in cells:
        measured = Measurement.get(console, options, cell)  # type: ignore[arg-type]
        least = max(least, measured.minimum)
        most = max(most, measured.maximum)
    if column.no_wrap:
        least = most
    if column.width is not None:
        least = most = column.width
    least = max(least, column.min_width or 0)
    most = max(least, min(most, column.max_width or most))
    return least, most


def _padding(table: Table, index: int, count: int) -> int:
    _, right, _, left = table.padding
    if not table.pad_edge:
        left = 0 if index == 0 else left
        right = 0 if index == count - 1 else right
    return left + right


def _borders(table: Table, count: int) -> int:
    if not table.box:
        return 0
    return count - 1 + (2 if table.show_edge else 0)


def _parts(least: Sequence[int], table: Table, width: int) -> list[list[int]]:
    """Consecutive columns after the first, as many to a part as fit beside the first at
    their least width (at least one a part, so a column too wide for any part still
    prints, folded)."""
    if len(least) == 1:
        return [[0]]
    parts: list[list[int]] = []
    current = [0]
    used = least[0]
    for index in range(1, len(least)):
        if len(current) > 1 and used + least[index] + _borders(table, len(current) + 1) > width:
            parts.append(current)
            current, used = [0], least[0]
        current.append(index)
        used += least[index]
    parts.append(current)
    return parts


def _share(room: int, spans: Sequence[tuple[int, int]]) -> list[int]:
    """Widths from each column's least, the room left given first to the first column
    (the row's name, on one line where it can be) and then to the columns that want more
    (up to their natural width), in proportion to how much more each wants."""
    widths = [least for least, _ in spans]
    first = min(spans[0][1] - widths[0], max(0, room - sum(widths)))
    widths[0] += first
    wants = [most - least for least, most in spans]
    wants[0] -= first
    spare = room - sum(widths)
    wanted = sum(wants)
    if spare <= 0 or wanted == 0:
        return widths
    if spare >= wanted:
        return [most for _, most in spans]
    given = [want * spare // wanted for want in wants]
    left = spare - sum(given)
    for index in sorted(range(len(wants)), key=lambda i: wants[i] - given[i], reverse=True):
        if left == 0:
            break
        if given[index] < wants[index]:
            given[index] += 1
            left -= 1
    return [width + extra for width, extra in zip(widths, given, strict=True)]


def _part_title(title: object, number: int, count: int) -> str | Text:
    note = f"part {number} of {count}"
    if title is None or title == "":
        return note
    if isinstance(title, Text):
        titled = title.copy()
        titled.append(f" · {note}")
        return titled
    return f"{title} · {note}"


class FitTables(RenderHook):
    """A console render hook: every table printed folds rather than cuts, and is fitted
    to the console's width (`fitted`)."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def process_renderables(
        self, renderables: list[ConsoleRenderable]
    ) -> list[ConsoleRenderable]:
        processed: list[ConsoleRenderable] = []
        for renderable in renderables:
            if isinstance(renderable, Table):
                processed.extend(fitted(fold_table(renderable), self.console))
            else:
                processed.append(renderable)
        return processed


__all__ = ["FitTables", "fitted", "fold_table"]
