"""A console table with its title as a line of its own above it.

rich wraps a table's ``title`` to the table's width: a narrow table (three columns of numbers) put a one-line title on
three lines ("GEMM micro-benchmark (random normal n / x n @ n x n)"). As a line of its own the title wraps at the
terminal's width, in the style rich gives table titles -- between its parts (written two spaces apart: "bert (small),
batch 32 on AMD EPYC  run 2026...  no step skipped"), a part kept whole on a line where it fits ("no step" and
"skipped" were on two lines).
"""

from __future__ import annotations

from collections.abc import Iterator

from rich.console import Console, ConsoleOptions, Group
from rich.table import Table
from rich.text import Text

PART = "  "
"""What separates a title's parts."""


class _Title:
    """A title's parts, laid out greedily on lines of the width (a part wider than the width wraps at its spaces)."""

    def __init__(self, text: Text) -> None:
        self.text = text

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        width = options.max_width
        if self.text.cell_len <= width:
            yield self.text
            return
        line: Text | None = None
        for part in self.text.split(PART):
            if line is not None and line.cell_len + len(PART) + part.cell_len <= width:
                line.append(PART)
                line.append_text(part)
                continue
            if line is not None:
                yield line
            line = part.copy()
        if line is not None:
            yield line


def titled(title: str, table: Table) -> Group:
    """``title`` (rich markup, escaped by the caller) above ``table``."""
    return Group(_Title(Text.from_markup(title, style="table.title")), table)
