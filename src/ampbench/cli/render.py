"""What the commands print: the plan's header and its cells, live progress, result tables and advice lines.

Library code returns data; this is where it becomes terminal text (escaped: names, paths and reasons are text,
never rich markup).
"""

from __future__ import annotations

import time
from typing import Any

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ampbench.cli.core import console, plural
from ampbench.tensorboard import RunLogger


def workload_header(wl: Any) -> str:
    about = ", ".join(p for p in (wl.description, f"preset {wl.preset}") if p)
    return f"[bold]{escape(wl.name)}[/] ({escape(about)})"


def plan_header(config: Any, store_path: Any, estimate: Any = None) -> None:
    """``ampbench run: 9 cells (fp32, amp-bf16 x eager, channels_last + 1 closing fp32) on cpu, measuring ...``."""
    cells = config.cells()
    axes_, points = config.axes, config.axes.executions
    closing = sum(c.closing for c in cells)
    extra_cells = (f" x {axes_.repeats} repeats" if axes_.repeats > 1 and any(c.repeat for c in cells) else
                   f" + {closing} closing fp32" if closing else "")
    axes = f" x {', '.join(p.label for p in points)}" if len(points) > 1 or not points[0].is_default else ""
    if axes_.distributed:
        world = axes_.nproc * axes_.nnodes
        axes += " x " + ", ".join(f"{s} x{world}" if s else "1 process" for s in axes_.strategies)
    if len(axes_.optimizer_states) > 1:
        axes += " x optimizer states " + ", ".join(s or "as built" for s in axes_.optimizer_states)
    console.print(f"[bold]ampbench run[/]: {plural(len(cells), 'cell')} ({', '.join(axes_.precisions)}{axes}{extra_cells}) "
                  f"on [bold]{config.device}[/], measuring {','.join(config.measure.measures)}; store "
                  f"{escape(str(store_path))}")
    if estimate is not None:
        console.print(f"[dim]{escape(estimate.text())}[/]")
    for note in config.left_out():
        console.print(f"[dim]{escape(note)}[/]")
    if axes_.fp8_compile:
        console.print("[dim]fp8 on CUDA: the fp8 cells run torch.compile'd (torchao's float8 is built to be compiled), "
                      "beside compiled fp32 and amp-bf16 references; --compile off times fp8 eager[/]")


def cell_text(s: Any, config: Any) -> str:
    """One cell as the progress lines and the dry run name it (plain text: escape it before rich prints it)."""
    what = f"{s.label} ({s.preset}) {s.precision}" + (f" b{s.batch_size}" if s.batch_size else "")
    if s.strategy:
        reduce = s.distribution.grad_reduce_dtype
        what += f" {s.strategy} x{s.world_size}" + (f" reduce {reduce}" if reduce else "")
    if not s.execution.is_default:
        what += f" {s.execution.label}"
    if s.optimizer_state:
        what += f" {s.optimizer_state} optimizer states"
    if s.closing:
        what += " [closing baseline]"
    elif config.axes.repeats > 1 and "throughput" in config.measure.measures:
        what += f" [repeat {s.repeat + 1}/{config.axes.repeats}]"
    return what


def run_with_progress(config: Any, store: Any, resume: bool, label: str | None,
                      tensorboard: Any = None) -> tuple[Any, list[dict[str, Any]]]:
    """:func:`ampbench.bench.run` with a live bar (the cell count, and inside the running cell what it measures,
    step i/N and an ETA) and one line per finished cell. Not a terminal: plain lines, a progress line when the
    measure changes or every ``PLAIN_EVERY`` seconds. ``tensorboard``: a directory each finished cell is written
    to as a TensorBoard run (and the run's ratios at its end)."""

    from ampbench.bench import run  # lazy: torch
    from ampbench.report.console import STATUS_STYLE  # lazy: torch

    board = RunLogger(tensorboard) if tensorboard is not None else None
    live = console.is_terminal
    budget = max(20, console.width - BAR_COLUMNS)  # the description's share of the line: the rest is the bar's
    with Progress(TextColumn("{task.description}"), BarColumn(bar_width=BAR_WIDTH), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True, disable=not live) as bar:
        task = bar.add_task("starting", total=len(config.cells()))
        plain = _PlainProgress()

        def on_event(ev: Any) -> None:
            what = escape(cell_text(ev.spec, config))
            if ev.phase == "start":
                bar.update(task, description=escape(progress_line(cell_text(ev.spec, config), "", budget)))
                if not live:
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
                detail = escape(f"{r['samples_per_s']:,.0f} samples/s" if st == "ok" and r.get("samples_per_s") else
                                r.get("reason") or "")
                bar.console.print(f"  [{STATUS_STYLE.get(st, '')}]{st:<11}[/] {what}  [dim]{detail}[/]",
                                  highlight=False)

        info, rows = run(config, store, resume=resume, label=label, on_event=on_event)
    if board is not None:
        board.ratios(rows)
        console.print(f"TensorBoard: {plural(len(board.written), 'cell')} written under {escape(str(tensorboard))} "
                      f"(tensorboard --logdir {escape(str(tensorboard))})")
    return info, rows


BAR_WIDTH = 10
BAR_COLUMNS = BAR_WIDTH + 24
"""What the live line gives the bar, the done/total count and the elapsed time (with the spaces between)."""


def progress_line(what: str, inside: str, budget: int) -> str:
    """``running <cell>: <what the cell measures, step i/N, ~ETA left>`` in ``budget`` characters: the cell's name is
    shortened first (from its middle), so the step count and the ETA at the end always show; then "running"
    goes; a measure longer than the line keeps its end (the ETA)."""
    full = f"running {what}: {inside}" if inside else f"running {what}"
    if len(full) <= budget:
        return full
    if not inside:
        return _middle(f"running {what}", budget)
    room = budget - len(inside) - 2
    if room >= 12:
        return f"{_middle(what, room)}: {inside}"
    return inside if len(inside) <= budget else "…" + inside[-(budget - 1):]


def _middle(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    keep = max(1, width - 1)
    return text[: keep - keep // 2] + "…" + text[len(text) - keep // 2:] if keep // 2 else text[:keep] + "…"


PLAIN_EVERY = 10.0
"""Seconds between progress lines of one measure when the output is not a terminal (a log file, CI)."""


class _PlainProgress:
    """When a plain progress line is due: the measure (or seed, or trial) changed, or PLAIN_EVERY seconds passed."""

    def __init__(self) -> None:
        self.last: tuple[str, str] | None = None
        self.at = 0.0

    def due(self, event: Any) -> bool:
        now = time.monotonic()
        key = (event.what, event.detail)
        if key != self.last or now - self.at >= PLAIN_EVERY or event.i == event.n:
            self.last, self.at = key, now
            return True
        return False


def results_tables(rows: list[dict[str, Any]]) -> None:
    from ampbench.report.console import results_tables as tables  # lazy: torch

    for table in tables(rows, console.width):
        console.print(table)
