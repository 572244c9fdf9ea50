"""What ``ampbench run`` says as it goes, as text: the plan's lines, each cell's name, the live progress line fitted to
the terminal, and when a plain (not a terminal) progress line is due. Rich markup where styled; names, paths and
reasons escaped. Torch-free: the command prints the plan before any cell runs.
"""

from __future__ import annotations

import time
from typing import Any

from rich.markup import escape


def plural(n: int, word: str) -> str:
    """'1 cell', '2 cells'."""
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def plan_lines(config: Any, store_path: Any, estimate: Any = None) -> list[str]:
    """``ampbench run: 9 cells (fp32, amp-bf16 x eager, channels_last + 1 closing fp32) on cpu, measuring ...``, then
    the estimate, what was left out of the plan and why, and how fp8 runs (rich markup, names escaped)."""
    cells = config.cells()
    axes_, points = config.axes, config.axes.executions
    closing = sum(c.closing for c in cells)
    extra_cells = (f" x {axes_.repeats} repeats" if axes_.repeats > 1 and any(c.repeat for c in cells) else
                   f" + {closing} closing fp32" if closing else "")
    axes = f" x {', '.join(p.label for p in points)}" if len(points) > 1 or not points[0].is_default else ""
    if axes_.distributed:
        world = axes_.nproc * axes_.nnodes
        axes += " x " + ", ".join(f"{s} x{world}" if s else "1 process" for s in axes_.strategies)
    ran = [s for s in axes_.optimizer_states if any(c.optimizer_state == s for c in cells)]  # (a state no mode takes
    # is left out of every cell: the note below says why)
    if len(ran) > 1:
        axes += " x optimizer states " + ", ".join(s or "as built" for s in ran)
    out = [f"[bold]ampbench run[/]: {plural(len(cells), 'cell')} ({', '.join(axes_.precisions)}{axes}{extra_cells}) "
           f"on [bold]{config.device}[/], measuring {', '.join(config.measure.measures)}; store "
           f"{escape(str(store_path))}"]
    if estimate is not None:
        out.append(f"[dim]{escape(estimate.text())}[/]")
    out += [f"[dim]{escape(note)}[/]" for note in config.left_out()]
    if axes_.fp8_compile:
        out.append("[dim]fp8 on CUDA: the fp8 cells run torch.compile'd (torchao's float8 is built to be compiled), "
                   "beside compiled fp32 and amp-bf16 references; --compile off times fp8 eager[/]")
    return out


def cell_text(s: Any, config: Any) -> str:
    """One cell as the progress lines and the dry run name it (plain text: escape it before rich prints it)."""
    what = f"{s.label} ({s.preset}) {s.precision}" + (f" b{s.batch_size}" if s.batch_size else "") \
        + (f" x{s.grad_accum} micro-batches" if s.grad_accum != 1 else "")
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


PLAIN_AFTER = 5.0
"""Seconds a measure runs before a log (not a terminal: a file, CI) shows it. Under the phase heartbeat's 10 s
(:data:`ampbench.phases.LONG_S`), so a heartbeat is always shown, however late its phase's start was read."""

PLAIN_EVERY = 10.0
"""Seconds between a shown measure's lines in a log."""

PLAIN_LAST_GAP = 1.0
"""A measure's last step gets its own line only this long after its line before: "step 19/20, ~0 s left" then
"step 20/20" a quarter of a second later said one thing twice (the cell's end line follows at once)."""


class PlainProgress:
    """When a plain progress line is due. A log gets each cell's start and end from the command; inside a cell, a
    measure (a phase, a step meter) gets a line once it has run :data:`PLAIN_AFTER` seconds, then one every
    :data:`PLAIN_EVERY` seconds and its last step. A cell's quick phases leave no line (a 3 s cell wrote 16 lines,
    a 29-cell run 460); a slow one is named while it runs, and a stuck one too: the cell's phase heartbeat
    (:mod:`ampbench.phases`) reports a silent phase after 10 s, and that report is due."""

    def __init__(self) -> None:
        self.what: str | None = None
        self.since = 0.0
        self.shown_at: float | None = None
        self.shown = ""

    def start(self) -> None:
        """A new cell: its first measure is new even where it is named as the last cell's last."""
        self.what, self.shown_at = None, None

    def due(self, event: Any, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        if event.what != self.what:  # (a measure is its name: a seed or a heartbeat's detail does not restart it)
            self.what, self.since, self.shown_at = event.what, now, None
        if self.shown_at is None:
            due = now - self.since >= PLAIN_AFTER
        else:
            last = event.n is not None and event.i == event.n
            due = now - self.shown_at >= PLAIN_EVERY or (last and event.text() != self.shown
                                                          and now - self.shown_at >= PLAIN_LAST_GAP)
        if due:
            self.shown_at, self.shown = now, event.text()
        return due


def phases_line(row: dict[str, Any]) -> str:
    """Where a cell's wall time went: ``wall 20.1 s = timed steps 7.9 + setup 3.8 + import 3.2 + ...``, largest
    first, phases under 0.05 s said together ("+ 12 shorter phases 0.1") where they add up to 0.05 s; a cell built
    ahead says how much of it ran while the cell before measured (``wall 9.0 s, 3.1 of it ahead = ...``)."""
    phases = row.get("phases_s") or {}
    shown = sorted(((k, v) for k, v in phases.items() if v >= 0.05), key=lambda kv: -kv[1])
    parts = " + ".join(f"{k.replace('_', ' ')} {v:.1f}" for k, v in shown)
    rest = [v for v in phases.values() if v < 0.05]
    if shown and sum(rest) >= 0.05:  # (the short phases together: "wall 0.9 s = build 0.8" did not add up)
        parts += f" + {len(rest)} shorter phases {sum(rest):.1f}"
    ahead = f", {row['ahead_s']:.1f} of it ahead" if row.get("ahead_s") else ""
    return f"wall {row.get('wall_s') or sum(phases.values()):.1f} s{ahead} = {parts or 'nothing over 0.05 s'}"
