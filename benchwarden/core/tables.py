"""Terminal tables that fold a long cell onto the next line instead of cutting it.

rich cuts a cell that cannot fit with "…" (`samp…`, `contamin…`): in a CI log at 80
columns a run id or a column heading was lost, and a cut run id then failed in `show` as
an ambiguous prefix. Every console made by `core.reports.console()` carries
`FoldTables`, so every table printed through it folds, whoever built the table.

Invariant: nothing printed through such a console is ever cut with an ellipsis; a column
that asked for another overflow ("crop", "ignore") explicitly keeps it.
"""

from __future__ import annotations

from rich.console import ConsoleRenderable, RenderHook
from rich.table import Table


def fold_table(table: Table) -> Table:
    """`table` with every column that would cut ("ellipsis", rich's default) folding."""
    for column in table.columns:
        if column.overflow == "ellipsis":
            column.overflow = "fold"
    return table


class FoldTables(RenderHook):
    """A console render hook: every table printed folds rather than cuts."""

    def process_renderables(
        self, renderables: list[ConsoleRenderable]
    ) -> list[ConsoleRenderable]:
        for renderable in renderables:
            if isinstance(renderable, Table):
                fold_table(renderable)
        return renderables


__all__ = ["FoldTables", "fold_table"]
