"""A console table with its title as a line of its own above it.

rich wraps a table's ``title`` to the table's width: a narrow table (three columns of numbers) put a one-line title on
three lines ("GEMM micro-benchmark (random normal n / x n @ n x n)"). As a line of its own the title wraps at the
terminal's width, at spaces, in the style rich gives table titles.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text


def titled(title: str, table: Table) -> Group:
    """``title`` (rich markup, escaped by the caller) above ``table``."""
    return Group(Text.from_markup(title, style="table.title"), table)
