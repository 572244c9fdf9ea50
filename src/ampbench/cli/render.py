"""What the commands print: the plan's header and its cells, live progress, result tables and advice lines.

Library code returns data; this is where it becomes terminal text (escaped: names, paths and reasons are text,
never rich markup).
"""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ampbench.cli.core import console
from ampbench.report.console import STATUS_STYLE, max_batch_text
from ampbench.report.console import results_tables as tables
from ampbench.report.run_text import (
    BAR_COLUMNS,
    BAR_WIDTH,
    PlainProgress,
    cell_text,
    phases_line,
    plan_lines,
    plural,
    progress_line,
)
from ampbench.tensorboard import RunLogger
from ampbench.train_line import metric_text


def plan_header(config: Any, store_path: Any, estimate: Any = None) -> None:
    for line in plan_lines(config, store_path, estimate):
        console.print(line)


def cell_line(status: str, label: str, what: str, detail: str) -> str:
    """A finished cell's line: its ``label`` in its status's colour, the cell (``what``: markup-escaped), the detail."""
    line = f"  [{STATUS_STYLE.get(status, '')}]{label:<11}[/] {what}"
    return f"{line}  [dim]{escape(detail)}[/]" if detail else line


def ok_detail(row: dict[str, Any]) -> str:
    """What a finished ok cell measured, in a few words: its speed, its final loss (and metric) where it trained to
    converge, its largest batch (a --measure converge cell has no speed: its line said nothing; the verdict needs
    fp32's cell, in the table at the end)."""
    said = [f"{row['samples_per_s']:,.0f} samples/s"] if row.get("samples_per_s") else []
    if row.get("converge") and row.get("final_loss") is not None:
        # (the loss is the training loss of the last steps, the metric the held-out split's: "final loss 3.816,
        # perplexity 26.9" read as one figure twice -- exp(3.816) is 45)
        metric = f", test {row['metric_name']} {metric_text(row['metric_name'], row['metric'])}" \
            if row.get("metric") is not None and row.get("metric_name") else ""
        said.append(f"after {row['converge'].get('steps')} steps: train loss {row['final_loss']:.4g}{metric}")
    if row.get("max_batch") is not None:
        said.append(f"max batch {max_batch_text(row)}")
    return ", ".join(said)


def run_with_progress(config: Any, store: Any, resume: bool, label: str | None,
                      tensorboard: Any = None, verbose: bool = False) -> tuple[Any, list[dict[str, Any]]]:
    """:func:`ampbench.bench.run` with a live bar (the cell count, and inside the running cell what it measures,
    step i/N and an ETA) and one line per finished cell. Not a terminal: plain lines, a cell's start and end, and
    inside it a measure that has run ``PLAIN_AFTER`` seconds (:class:`~ampbench.report.run_text.PlainProgress`).
    ``tensorboard``: a directory each finished cell is written to as a TensorBoard run (and the run's ratios at its end)."""

    from ampbench.bench import run  # lazy: torch

    board = RunLogger(tensorboard) if tensorboard is not None else None
    live = console.is_terminal
    budget = max(20, console.width - BAR_COLUMNS)  # the description's share of the line: the rest is the bar's
    with Progress(TextColumn("{task.description}"), BarColumn(bar_width=BAR_WIDTH), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True, disable=not live) as bar:
        task = bar.add_task("starting", total=len(config.cells()))
        plain = PlainProgress()

        def on_event(ev: Any) -> None:
            what = escape(cell_text(ev.spec, config))
            if ev.phase == "start":
                bar.update(task, description=escape(progress_line(cell_text(ev.spec, config), "", budget)))
                if not live:
                    plain.start()
                    console.print(f"  [dim]running {what}[/]", highlight=False)
            elif ev.phase == "progress":
                text = ev.progress.text()
                inside = escape(text)
                line = progress_line(cell_text(ev.spec, config), text, budget)
                shown = text if line.endswith(text) else line  # (the measure's part in cyan)
                bar.update(task, description=f"{escape(line[:len(line) - len(shown)])}[cyan]{escape(shown)}[/]")
                if not live and plain.due(ev.progress):
                    console.print(f"  [dim]  {inside}[/]", highlight=False)
            elif ev.phase == "skip":
                bar.advance(task)
                bar.console.print(f"  [dim]done before: {what}[/]")
            else:
                bar.advance(task)
                r = ev.row
                if board is not None:
                    board.cell(r)
                st = r["status"]
                bar.console.print(cell_line(st, st, what, ok_detail(r) if st == "ok" else r.get("reason") or ""),
                                  highlight=False)
                if verbose and r.get("phases_s"):
                    bar.console.print(f"  [dim]{escape(phases_line(r))}[/]", highlight=False)

        info, rows = run(config, store, resume=resume, label=label, on_event=on_event)
    if board is not None:
        board.ratios(rows)
        console.print(f"TensorBoard: {plural(len(board.written), 'cell')} written under {escape(str(tensorboard))} "
                      f"(tensorboard --logdir {escape(str(tensorboard))})")
    return info, rows


def results_tables(rows: list[dict[str, Any]]) -> None:
    for table in tables(rows, console.width):
        console.print(table)
