"""A diagnosis as ``ampbench diagnose`` prints it: what was diagnosed, then the findings, most important first, each
with its detail and fix (rich markup; every text from the model or the data escaped)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rich.markup import escape

STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}


def findings_lines(d: Any, label: str, wanted: tuple[str, ...]) -> Iterator[str]:
    yield (f"[bold]{escape(label)}[/] in [bold cyan]{d.precision}[/] on {escape(d.device_name)} ({d.device}), "
           f"batch {d.batch_size}: {', '.join(wanted)}")
    for i, f in enumerate(d.findings, 1):
        yield f"[{STYLE.get(f.severity, '')}]{i:>2}. {f.severity.upper():<7}[/] {escape(f.title)}"
        if f.detail:
            yield f"[dim]             {escape(f.detail)}[/]"
        if f.fix:
            yield f"             [green]fix:[/] {escape(f.fix)}"
