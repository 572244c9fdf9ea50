"""Rich tables of result rows (the CLI prints them; nothing here prints)."""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from rich.console import RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ampbench.execution.axes import Execution, strategy_label
from ampbench.report.accumulation import (
    accumulate_text,
    accumulated_text,
    accumulation_cost,
    checkpointed_text,
    micro_text,
)
from ampbench.report.advisor import advise, batch_ratio_text, versus_fp32, workload_groups
from ampbench.report.combine import batch_figure
from ampbench.report.numbers import SHOWN, bytes_unit, fmt_bytes, sig
from ampbench.report.titled import titled
from ampbench.store.derive import compared_memory, converge_tone, memory_basis
from ampbench.store.row_keys import framework_of, names_frameworks
from ampbench.store.time_to_loss import text as time_to_loss_text


def _num(v: Any, spec: str = ",.1f") -> str:
    return "-" if not isinstance(v, (int, float)) else format(v, spec)


def speedup_text(row: dict[str, Any]) -> tuple[str, str]:
    """(text, verdict) of a row's speedup vs fp32: "2.61x", "1.06x ±12%" (within-cell noise),
    "1.06x (0.98-1.10)" (range over repeats), "2.86x (noise unknown)" (no estimate: cells of under 6 timed steps), or
    for fp32 "1.00x (moved 3%)" (its closing baseline).
    The verdict, "faster", "slower" or "same", counts only differences beyond the noise (the
    advisor's rule), so colours never call noise a win."""
    v = row.get("speedup_vs_fp32")
    if not isinstance(v, (int, float)):
        return "-", "same"
    text = f"{v:.2f}x"
    rng, noise = row.get("speedup_vs_fp32_range"), row.get("speedup_vs_fp32_noise")
    if rng:
        text += f" ({rng[0]:.2f}-{rng[1]:.2f})"
    elif isinstance(noise, (int, float)) and noise >= SHOWN:
        text += f" ±{noise:.0%}"
    elif noise is None and row.get("precision") != "fp32":
        text += " (noise unknown)"
    if row.get("precision") == "fp32":
        drift = row.get("baseline_drift")
        return text + (f" (moved {drift:.0%})" if isinstance(drift, (int, float)) and drift >= SHOWN else ""), "same"
    faster, slower, _ = versus_fp32(row, v)
    if row.get("speedup_vs_fp32_doubt"):
        text += " (doubtful)"  # the note column says why
    return text, "faster" if faster and v >= 1.05 else "slower" if slower and v <= 0.95 else "same"


def has_speedups(rows: list[dict[str, Any]]) -> bool:
    """Whether any row has a speedup vs fp32 (a run without fp32, or whose fp32 failed, has none: its table had a
    column of "-" beside every mode)."""
    return any(isinstance(r.get("speedup_vs_fp32"), (int, float)) for r in rows)


def has_eager_speedups(rows: list[dict[str, Any]]) -> bool:
    """Whether any row has a speedup over fp32 eager (a run all at channels_last has none: no eager fp32 ran)."""
    return any(r.get("speedup_vs_fp32_eager") is not None for r in rows)


def has_savings(rows: list[dict[str, Any]]) -> bool:
    """Whether any row has a memory saving vs fp32, or a note on why its saving is not shown."""
    return any(isinstance(r.get("memory_saving_vs_fp32"), (int, float)) or r.get("memory_saving_vs_fp32_note")
               for r in rows)


def _speedup(row: dict[str, Any]) -> Text:
    text, verdict = speedup_text(row)
    return Text(text, style={"faster": "green", "slower": "red"}.get(verdict, "yellow" if text != "-" else ""))


def _saving(v: Any, row: dict[str, Any] | None = None) -> Text:
    if not isinstance(v, (int, float)):
        return Text(saving_note(row or {}) or "-", style="dim")
    if abs(v) < SHOWN:
        return Text("same")
    return Text(f"-{v:.0%}" if v > 0 else f"+{-v:.0%}", style="green" if v > 0.05 else "red" if v < -0.05 else "")


def times_text(v: Any) -> str:
    """A ratio as "1.23x" ("-" without one)."""
    return f"{v:.2f}x" if isinstance(v, (int, float)) else "-"


def eager_speedup_text(row: dict[str, Any]) -> str:
    """speedup_vs_fp32_eager: every change of the row against fp32 eager ("-" without that cell)."""
    return times_text(row.get("speedup_vs_fp32_eager"))


def compile_note(row: dict[str, Any]) -> str:
    """What torch.compile cost and met in a compiled row ("" for eager rows)."""
    if not isinstance(row.get("compile_s"), (int, float)):
        return ""
    parts = [f"compile {row['compile_s']:.1f} s" + (f" (cache {row['compile_cache']})" if row.get("compile_cache") else "")
             + (" (fp8 on CUDA: compiled by default)" if row.get("compiled_by_default") else "")]
    if row.get("graph_breaks"):
        parts.append(f"{row['graph_breaks']} graph break(s)")
    if row.get("recompiles_timed"):
        parts.append(f"{row['recompiles_timed']} recompile(s) in timed steps")
    return ", ".join(parts)


def measured_energy_text(row: dict[str, Any]) -> str:
    """Joules a sample measured (3 significant digits), with the prediction where one is attached; "-" when
    none was measured (a CPU, no NVML)."""
    j, p = row.get("joules_per_sample"), row.get("predicted_joules_per_sample")
    if not isinstance(j, (int, float)):
        return "-"
    # (sig, not :.3g: 1.0003 J was "1" in a column of 0.337 and 0.185)
    return sig(j) + (f" (pred {sig(p)})" if isinstance(p, (int, float)) else "")


MEMORY_HEADS = {"exact": "memory (exact)", "rss": "memory (rss)", "peak": "peak mem"}


def memory_head(rows: list[dict[str, Any]]) -> tuple[str, bool]:
    """(column header, whether each figure needs its own label): one basis for every row is said in the header;
    a table mixing them (exact split beside RSS growth) labels each figure."""
    bases = {memory_basis(r) for r in rows}
    return (MEMORY_HEADS[bases.pop()], False) if len(bases) == 1 else ("memory", True)


def memory_text(row: dict[str, Any], label: bool = True) -> str:
    """The compared memory, labelled with what it is: "(exact)", "(rss)" (approximate), "(peak)"."""
    text = fmt_bytes(compared_memory(row))
    return f"{text} ({memory_basis(row)})" if label and text != "-" else text


def saving_note(row: dict[str, Any]) -> str:
    """Why there is no memory saving for an RSS-based row, in two words (the note says the rest)."""
    note = row.get("memory_saving_vs_fp32_note") or ""
    return "" if not note else "within noise" if "within" in note else "noise unknown"


def max_batch_text(row: dict[str, Any]) -> str:
    """A row's largest batch: ">=" where the search stopped at its limit, "-" where none was searched."""
    return "-" if row.get("max_batch") is None else batch_figure(row)


STATUS_STYLE = {"ok": "green", "oom": "magenta", "error": "red", "diverged": "red", "unsupported": "dim"}


@dataclass
class Col:
    """A table column: its header, its cells, and whether its text may wrap (notes) or must stay whole (numbers)."""

    header: str
    cells: list[Any]
    justify: str = "right"
    wraps: bool = False

    def min_width(self) -> int:
        """Narrowest this column can be: a whole cell (numbers are never cut), the header's longest word; a
        wrapping column takes 24, or its longest word up to 24 (a longer one -- a layer list, a path -- folds: were
        it whole, the columns beside it would be squeezed below theirs)."""
        words = [len(w) for w in self.header.split()] or [0]
        texts = [c.plain if isinstance(c, Text) else str(c) for c in self.cells]
        if self.wraps:
            return max(max(words), min(24, max((len(t) for t in texts), default=0)))
        return max(max(words), max((len(t) for t in texts), default=0))

    def natural_width(self) -> int:
        """Widest it needs: its header or its longest cell on one line."""
        texts = [c.plain if isinstance(c, Text) else str(c) for c in self.cells]
        return max(len(self.header), max((len(t) for t in texts), default=0))


CELL_OVERHEAD = 3
"""Columns a table cell takes beyond its text: padding on both sides and one border."""


def fitted_widths(cols: list[Col], width: int) -> list[int]:
    """Each column's width in a table of ``width``: its natural width, less one at a time from the column with the
    most room above its minimum (a wrapping header or note) until the table fits; never below a minimum."""
    widths = [c.natural_width() for c in cols]
    minimum = [c.min_width() for c in cols]
    excess = 1 + sum(w + CELL_OVERHEAD for w in widths) - width
    while excess > 0:
        room, i = max((w - m, i) for i, (w, m) in enumerate(zip(widths, minimum)))
        if room <= 0:
            break
        widths[i] -= 1
        excess -= 1
    return widths


def stack_tables(title: str, key: Col | list[Col], cols: list[Col], width: int) -> list[RenderableType]:
    """The columns as one table when they fit ``width``, else as several stacked tables each led by the ``key``
    column(s) -- every column that tells the rows apart (the precision; the optimizer state, batch, execution where
    they vary) --, in the columns' order: at 80 columns a results table is two or three narrow tables, headers wrapped
    at spaces, no number cut. The title is a line of its own above the first (rich wraps a table's title to the
    table's width: a three-column table's title took three lines at 100 columns)."""
    keys = key if isinstance(key, list) else [key]
    lead = 1 + sum(k.min_width() + CELL_OVERHEAD for k in keys)
    groups: list[list[Col]] = [[]]
    used = lead
    for col in cols:
        need = col.min_width() + CELL_OVERHEAD
        if groups[-1] and used + need > width:
            groups.append([])
            used = lead
        groups[-1].append(col)
        used += need
    tables = []
    for i, group in enumerate(groups):
        table = Table()
        for col, w in zip((*keys, *group), fitted_widths([*keys, *group], width)):
            # (widths decided here, not by rich: its collapse can take a column below its minimum and then widen it
            # back past the terminal; no_wrap would cut the header too: headers wrap at their spaces)
            table.add_column(col.header, justify=col.justify, overflow="fold", width=w)  # type: ignore[arg-type]
        for r in range(len(keys[0].cells)):
            table.add_row(*(col.cells[r] for col in (*keys, *group)))
        tables.append(titled(title, table) if i == 0 else table)
    return tables


NOTE_COLUMN_MAX = 120
"""The longest note a results table keeps in a column beside its row; a longer one is a line below the table."""


def results_tables(rows: list[dict[str, Any]], width: int = 160) -> list[RenderableType]:
    """One table per (workload, preset, batch size, device): a row per precision, ratios vs fp32; stacked into
    several narrower tables when its columns do not fit ``width``."""
    tables = []

    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return r.get("workload") or "", r.get("preset") or "", r.get("device_name") or "", r.get("run_id") or ""

    for (workload, preset, dev, run_id), group in groupby(sorted(rows, key=key), key=key):
        group = list(group)
        # what "mem vs fp32" compares, labelled (CPU PyTorch: the exact split; the RSS peak is in the JSON/HTML)
        sizes = {(r.get("batch_size"), int(r.get("grad_accum") or 1)) for r in group}  # (micro-batches: a batch's part)
        ((size, _),) = sizes if len(sizes) == 1 else ((None, 1),)
        at = f", batch {size:,}{accumulated_text(group[0])}" if isinstance(size, int) else ""
        about, shared_by_all, tail = [preset], [], ""  # (the title's parts: composed once the columns are known)
        axes = len({Execution.of(r) for r in group}) > 1 or not all(Execution.of(r).is_default for r in group)
        dist = any(r.get("strategy") for r in group)
        mem_head, label_each = memory_head(group)
        keys = [Col("precision", [Text(r.get("precision") or "?", style="bold cyan") for r in group], "left")]
        # (the framework said where a row is not the default framework's: "torch" on every row of every PyTorch table
        # took a column of an 80-wide terminal)
        frameworks = {framework_of(r) for r in group}
        cols = []
        if names_frameworks(group) and len(frameworks) > 1:
            cols.append(Col("framework", [Text(framework_of(r)) for r in group], "left"))
        elif names_frameworks(group):  # (one framework, not PyTorch: said once in the title, not on every row)
            about.append(next(iter(frameworks)))
        # the columns that tell rows of one precision apart lead every part of a stacked table, beside the precision
        apart = [Col("execution", [Text(Execution.of(r).label) for r in group], "left")] if axes else []
        if dist:
            apart.append(Col("strategy", [Text(strategy_label(r) or "1 process") for r in group], "left"))
        if any(r.get("optimizer_state") for r in group):  # (--optimizer-state: which optimizer each row stepped with)
            apart.append(Col("optimizer states", [Text(r.get("optimizer_state") or "as built") for r in group], "left"))
        batch = Col("batch", [_num(r.get("batch_size"), ",") + micro_text(r) for r in group])
        if len(sizes) > 1:
            apart.append(batch)
        varies = [c for c in apart if len({str(x) for x in c.cells}) > 1]
        keys += varies
        for c in apart:  # (an execution or strategy every row shares is said once in the title: "channels_last" on
            # every row of an H200 table was a column that said one thing)
            if c in varies:
                continue
            if c.header in ("execution", "strategy"):
                shared_by_all.append(str(c.cells[0]))
            else:
                cols.append(c)
        if any(r.get("scaling_efficiency") is not None for r in group):  # (CUDA only: none on a CPU)
            cols.append(Col("scaling", [_num(r.get("scaling_efficiency"), ".2f") for r in group]))
        status = [r.get("status") or "?" for r in group]
        cols += [Col("status", [Text(st, style=STATUS_STYLE.get(st, "")) for st in status], "left"),
                 *([] if batch in keys or at else [batch])]  # (one batch: said in the title)
        # (speed and memory columns where a row has them: a --measure converge run's table was five columns of "-")
        if any(r.get("samples_per_s") is not None or r.get("step_ms_p50") is not None for r in group):
            cols.append(Col("samples/s", [_num(r.get("samples_per_s"), ",.0f") for r in group]))
            if has_speedups(group):  # (none without an fp32 row that ran: the run's header said why)
                cols.append(Col("speedup", [_speedup(r) for r in group]))
        if axes and has_eager_speedups(group):
            cols.append(Col("vs fp32 eager", [eager_speedup_text(r) for r in group]))
        if any(r.get("speedup_vs_tf32") is not None for r in group):
            cols.append(Col("vs tf32", [times_text(r.get("speedup_vs_tf32")) for r in group]))
        if any(r.get("joules_per_sample") is not None for r in group):
            cols.append(Col("energy J/sample", [measured_energy_text(r) for r in group]))
        if any(r.get("step_ms_p50") is not None for r in group):
            cols.append(Col("step p50 ms", [_num(r.get("step_ms_p50"), ",.2f") for r in group]))
        if any(compared_memory(r) is not None for r in group):
            cols.append(Col(mem_head, [memory_text(r, label_each) for r in group]))
            if has_savings(group):
                cols.append(Col("mem vs fp32", [_saving(r.get("memory_saving_vs_fp32"), r) for r in group]))
        if any(r.get("skipped_steps") for r in group):  # (a column of zeros was a table of its own at 80 columns: the
            # title says none was skipped)
            cols.append(Col("skipped", [_num(r.get("skipped_steps"), ",") for r in group]))
        elif any(r.get("skipped_steps") == 0 for r in group) and not any(r.get("status") == "diverged" for r in group):
            tail = "  [dim]no step skipped[/]"  # (not where a row diverged: its note counts the steps it skipped)
        if any(r.get("max_batch") is not None for r in group):
            cells = []
            for r in group:
                ratio = batch_ratio_text(r)
                cells.append(max_batch_text(r) + (f" ({ratio})" if ratio else ""))
            cols.append(Col("max batch", cells))
        if any(r.get("converge_verdict") for r in group):
            verdicts = [r.get("converge_verdict") or "-" for r in group]
            style = {"good": "green", "unsure": "yellow", "bad": "red"}
            cols.append(Col("converge", [Text(v, style=style[converge_tone(v)]) for v in verdicts]))
        if any(r.get("fp32_loss_target") is not None for r in group):  # (speed and convergence together)
            cols.append(Col("to fp32 loss", [time_to_loss_text(r) for r in group]))
        if any(r.get("inference") for r in group):
            cells = []
            for r in group:
                inf = r.get("inference") or {}
                cells.append(" / ".join(_num(inf[s].get("p50_ms"), ",.2f") for s in sorted(inf, key=int)) or "-")
            cols.append(Col("infer p50 ms (b=1 / large)", cells))
        # a note part several rows share ("one RSS reading per cell: ..." under four modes) is said once below the
        # table, naming its rows; what is a row's own stays beside it (a column) or below it, led by its row
        parts = [[r["reason"]] if r.get("reason") else
                 [n for n in (*(r.get("warnings") or []), r.get("speedup_vs_fp32_doubt"), compile_note(r),
                              r.get("memory_saving_vs_fp32_note")) if n] for r in group]
        counted = Counter(p for ps in parts for p in dict.fromkeys(ps))
        shared = [p for p in dict.fromkeys(p for ps in parts for p in ps) if counted[p] > 1]
        notes = [Text("; ".join(p for p in dict.fromkeys(ps) if p not in shared), style="dim") for ps in parts]
        said = {n.plain for n in notes if n.plain}
        below = False
        title = (f"{escape(workload)} ({escape(', '.join(about))}){at} on {escape(dev)}"
                 + "".join(f" · {escape(x)}" for x in shared_by_all) + f"  [dim]run {escape(run_id)}[/]{tail}")
        laid = stack_tables(title, keys, cols, width)
        if said:
            # (a note column that gets a table of its own is a column of empty rows beside a wrapped paragraph, and
            # a paragraph in a column makes its row ten lines tall: such notes go below the table, each led by its row)
            with_note = stack_tables(title, keys, [*cols, Col("note", notes, "left", wraps=True)], width)
            below = len(with_note) > len(laid) or max(len(t) for t in said) > NOTE_COLUMN_MAX
            if not below:
                laid = with_note
        tables += laid

        # (each row's key cells: its precision, and its execution, state, batch where they vary)
        who = [" · ".join(str(k.cells[i].plain if isinstance(k.cells[i], Text) else k.cells[i]) for k in keys)
               for i in range(len(group))]
        for part in shared:  # (one note on several rows: said once, not a wrapped column of copies)
            which = [who[i] for i, ps in enumerate(parts) if part in ps]
            tables.append(Text(f"note ({', '.join(which)}): {part}", style="dim"))
        if below:
            tables += [Text(f"note ({who[i]}): {n.plain}", style="dim") for i, n in enumerate(notes) if n.plain]
    return tables


# -- ampbench predict's tables -------------------------------------------------------------------------------------
def _times(v: Any) -> str:
    return "-" if v is None else f"{v:.2f}"


# (header, cell of an ok row); the memory split (weights, grads, optimizer, activations) sums to the peak with the
# workspace and the largest temporary
PREDICTED_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("ms/step", lambda r: f"{r['predicted_step_ms']:,.2f}"),
    ("samples/s", lambda r: f"{r['predicted_samples_per_s']:,.0f}"),
    ("x fp32", lambda r: _times(r["predicted_speedup_vs_fp32"])),
    ("x tf32", lambda r: _times(r["predicted_speedup_vs_tf32"])),
    ("x eager", lambda r: _times(r.get("predicted_speedup_vs_eager"))),
    ("± error", lambda r: f"±{r['predicted_error_pct']}%"),
    ("mJ/sample", lambda r: "-" if r.get("predicted_joules_per_sample") is None
     else sig(r["predicted_joules_per_sample"] * 1e3)),
    ("USD/M samples", lambda r: "-" if r.get("predicted_usd_per_million_samples") is None
     else sig(r["predicted_usd_per_million_samples"])),
    ("peak memory", "predicted_peak_bytes"),
    ("max batch", lambda r: "-" if r["predicted_max_batch"] is None else f"{r['predicted_max_batch']:,}"),
    ("MFU", lambda r: f"{r['predicted_mfu']:.0%}"),
    ("bound", lambda r: r["predicted_bound"]),
    ("weights", "predicted_weights_bytes"),
    ("grads", "predicted_grads_bytes"),
    ("optimizer", "predicted_optimizer_bytes"),
    ("activations", "predicted_activation_bytes"),
)
"""Column heads and how a row's cell is written: a function, or the key of a byte count (a column's byte counts are
written in one unit: the one its largest fills)."""
_PREDICTED_MEMORY = {"peak memory", "max batch", "weights", "grads", "optimizer", "activations"}


def _bytes_of(key: str, unit: str, row: dict[str, Any]) -> str:
    return fmt_bytes(row[key], unit)


def _predicted_cell(head: str, cell: Any, row: dict[str, Any], first: bool) -> str:
    """An ok row's figure; an ``oom`` row's memory figures (what did not fit, and the largest batch that does), no
    speed; a refused row its status, in the first column."""
    if row["status"] == "ok":
        return str(cell(row))
    if row["status"] == "oom":
        return "oom" if head == "ms/step" else (str(cell(row)) if head in _PREDICTED_MEMORY else "")
    return row["status"] if first else ""


def _predicted_mode(row: dict[str, Any], states: str = "", execution: bool = True) -> str:
    """A predicted row's mode: its precision, the optimizer state it keeps when not the built one (+ ``states``), the
    execution when not eager ("amp-bf16 8bit", "fp32 · compile+cuda-graphs") unless ``execution`` is False (the
    table's title says it)."""
    ex = Execution.of(row)
    state = f" {row['optimizer_state']}{states}" if row.get("optimizer_state") else ""
    return f"{row['precision']}{state}" + ("" if ex.is_default or not execution else f" · {ex.label}")


_FIGURE = re.compile(r"^(?P<label>.+): (?P<pct>\d+)%$")
"""A band's part that is one figure ("kernels of this op mix on Hopper (...): 21%"): merged into a range."""


def top_level_parts(text: str, sep: str = "; ") -> list[str]:
    """``text`` split at each ``sep`` outside parentheses ("launch-bound steps (the host sets them; a faster host runs
    them faster): 23%" is one part: split at every "; " it was two lines, each half a sentence)."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        c = text[i]
        depth += (c == "(") - (c == ")")
        if depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            i = start = i + len(sep)
            continue
        i += 1
    return [*parts, text[start:]]


def mfu_over_peak_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Why a predicted MFU is over 100% (a fp32 convnet on an A100: 114-128%), where one is: MFU counts the model's
    FLOPs, and cuDNN's Winograd convolutions do fewer multiplications than those (NeuSight's measured fp32 3x3
    convolutions on an A100 reached up to 2.06x its fp32 peak so counted). Without the line it reads as a bug."""
    over = [r for r in rows if r.get("status") == "ok" and (r.get("predicted_mfu") or 0) > 1
            and r.get("predicted_math_mode") == "fp32"]  # (the only math the model prices Winograd in)
    if not over:
        return []
    which = ", ".join(dict.fromkeys(f"{r['workload']} {_predicted_mode(r)} {r['predicted_mfu']:.0%}" for r in over))
    return [escape(f"MFU over 100% ({which}): MFU counts the model's FLOPs over the peak of its math; cuDNN's "
                   "Winograd convolutions (3x3, stride 1, fp32) compute them with fewer multiplications, so a "
                   "convolution can run above the peak so counted")]


def error_band_lines(rows: list[dict[str, Any]]) -> list[str]:
    """What the ± error of the predicted rows is made of (rich markup, escaped). One basis: one line. Several (a band
    per op mix and kind of math): each reference once, a line each, its figure a range over the rows, and the modes
    it applies to where it is not all of them (seven lines of near-copies said the same sources again and again)."""
    bases = list(dict.fromkeys(r["predicted_error_basis"] for r in rows if r.get("predicted_error_basis")))
    if len(bases) == 1:
        return [f"± error: the typical |error| of predictions like these ({escape(bases[0])})"]
    if not bases:
        return []
    parts: dict[str, tuple[list[int], list[str]]] = {}  # label (or whole part) -> (its figures, the modes it is of)
    every: list[str] = []
    for r in rows:
        if not r.get("predicted_error_basis"):
            continue
        mode = r["precision"]
        every.append(mode)
        for part in top_level_parts(r["predicted_error_basis"]):
            m = _FIGURE.match(part)
            figures, modes = parts.setdefault(m["label"] if m else part, ([], []))
            if m:
                figures.append(int(m["pct"]))
            modes.append(mode)
    everyone = list(dict.fromkeys(every))
    lines = ["± error: the typical |error| of predictions like these; a row's is the largest of these that apply to it:"]
    for label, (figures, modes) in parts.items():
        text = label
        if figures:
            lo, hi = min(figures), max(figures)
            text += f": {lo}%" if lo == hi else f": {lo}-{hi}% (by op mix)"
        of = list(dict.fromkeys(modes))
        if set(of) != set(everyone):
            text += f" [{', '.join(of)}]"
        lines.append(f"  {escape(text)}")
    return lines


def predicted_tables(rows: list[dict[str, Any]], gpu: Any, width: int) -> list[RenderableType | str]:
    """``ampbench predict``'s console output, in order: one table per workload and batch (stacked to fit ``width``,
    no number cut), a refused precision a row with its status and its reason in a line below, then what the error
    band and the GPU's figures are (lines are rich markup, escaped)."""
    out: list[RenderableType | str] = []
    groups: dict[tuple[str, str, int, int], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["workload"], r["preset"], r["batch_size"], int(r.get("grad_accum") or 1)), []).append(r)
    compiled = any(r.get("compile", "off") != "off" or r.get("cuda_graphs", "off") != "off" for r in rows)
    priced = any(r.get("predicted_usd_per_million_samples") is not None for r in rows)
    columns = [c for c in PREDICTED_COLUMNS if (c[0] != "x tf32" or "tf32" in gpu.tflops)
               and (c[0] != "x eager" or compiled) and (c[0] != "USD/M samples" or priced)]
    for (workload, preset, batch, _), group in groups.items():
        # (an execution every row shares is said once, in the title: "fp32 · channels_last" on each of eight rows
        # took 16 columns of every stacked part)
        (shared,) = executions if len(executions := {Execution.of(r) for r in group}) == 1 else (None,)
        at = f", {shared.label}" if shared is not None and not shared.is_default else ""
        common = bool(at)
        key = Col("mode", [_predicted_mode(r, execution=not common) for r in group], justify="left")
        cols = []
        for i, (head, cell) in enumerate(columns):
            if isinstance(cell, str):  # (a byte count: the column in one unit)
                cell = functools.partial(_bytes_of, cell, bytes_unit(r.get(cell) for r in group))
            cols.append(Col(head, [_predicted_cell(head, cell, r, i == 0) for r in group]))
        what = "inference (the forward alone) predicted" if group[0].get("predicted_inference") else "predicted"
        if group[0].get("strategy"):
            what = f"{group[0]['strategy']} x{group[0]['world_size']} (batch per GPU; samples/s of all) " + what
        title = (f"{escape(workload)} ({escape(preset)}), batch {batch}{escape(accumulated_text(group[0]))}{escape(at)}: "
                 f"{what} on {escape(gpu.key)}  "
                 "[dim](no GPU ran it)[/]")
        out += stack_tables(title, key, cols, width)
        for r in group:
            if r["status"] != "ok":
                # (a baseline that does not fit: the others' "x fp32" is over the step that trains its batch by
                # gradient accumulation where one was priced, else the ratio of step times at a batch it cannot run)
                base = ""
                if r["status"] == "oom" and r["precision"] in ("fp32", "tf32") and not r.get("optimizer_state") \
                        and any(o["status"] == "ok" for o in group):
                    base = (f"; x {r['precision']} is over the step that trains this batch by gradient accumulation" if
                            r.get("predicted_accumulated_step_ms") else
                            f"; x {r['precision']} compares with its step at this batch all the same, which cannot run")
                split = accumulate_text(r) if r["status"] == "oom" else None
                checkpointed = checkpointed_text(r)  # (the other way to the batch: the activations recomputed)
                if checkpointed:
                    split = (f"{split}; " if split else "") + checkpointed
                out.append(f"  {escape(_predicted_mode(r, ' optimizer states'))}: {escape(r.get('reason') or '')}"
                           f"{escape(base)}{escape(f'; {split}' if split else '')}")
    out += mfu_over_peak_lines(rows)
    out += error_band_lines(rows)
    out.append(f"peaks, memory and bandwidth: {escape(gpu.source)}. Method, constants and "
               "the error on published results: docs/predict.md")
    for host in dict.fromkeys(r["predicted_host"] for r in rows if r.get("predicted_host")):
        out.append(f"host issuing the ops: {escape(host)} (--host-us for yours)")
    for kernels in dict.fromkeys(r["predicted_kernels"] for r in rows if r.get("predicted_kernels")):
        out.append(f"kernels priced from: {escape(kernels)} (ampbench hw --calibrate measures yours)")
    return out


# -- the advisor's lines ---------------------------------------------------------------------------------------------
def advice_lines(rows: list[dict[str, Any]]) -> Iterator[str]:
    """One coloured line per workload: the advisor's pick and its evidence; where the workload ran at several batch
    sizes, the line says the pick per batch (once, where every batch gives the same)."""
    by_workload: dict[tuple[str, str], list[tuple[Any, Any]]] = {}
    for group in workload_groups(rows):
        wl, preset = group[0]["workload"], group[0].get("preset") or ""
        # ("64 x 4": the micro-batches a step, beside the plain 64)
        by_workload.setdefault((wl, preset), []).append((f"{group[0].get('batch_size')}{micro_text(group[0])}",
                                                         advise(group)))
    for (wl, preset), advices in by_workload.items():
        head = f"{escape(wl)} ({escape(preset)})"

        def pick(a: Any) -> str:
            return f"[bold green]{escape(a.recommended)}[/]" if a.recommended else "[bold red]no recommendation[/]"

        said = {(a.recommended, a.label, a.evidence) for _, a in advices}
        if len(said) == 1:
            a = advices[0][1]
            batches = "" if len(advices) == 1 else f" at batch {', '.join(str(b) for b, _ in advices)}"
            yield f"{head}{batches}: {pick(a)} [dim]({escape(a.label)})[/] {escape(a.reason)}"
        else:
            yield f"{head}: " + "; ".join(f"batch {b}: {pick(a)} [dim]({escape(a.label)})[/] {escape(a.reason)}"
                                          for b, a in advices)
        for b, a in advices:
            at = f" batch {b}" if len(advices) > 1 else ""
            if a.combination is not None:
                yield f"{head}{at} fastest combination: [bold green]{escape(a.combination)}[/] " \
                      f"{escape(a.combination_evidence or '')}"
            if a.least_memory is not None:
                yield f"{head}{at} {escape(a.least_memory)}"
            if a.distributed is not None:
                yield f"{head}{at} distributed: {escape(a.distributed)}"
            if a.optimizer_states is not None:
                yield f"{head}{at} {escape(a.optimizer_states)}"
            for line in (a.half_type, a.energy, a.data):
                if line is not None:
                    yield f"{head}{at} {escape(line)}"
    for line in accumulation_cost(rows):  # (run --grad-accum 1,N: the accumulated step beside the plain one)
        yield escape(line)


def predicted_table(lines: list[dict[str, Any]], width: int) -> list[Any]:
    """Predictions (``report.predictions.table`` lines) as console tables, one per workload and setting (its title),
    a row per GPU and mode, each beside the GPU measurement of the same cell where the store holds one; stacked to
    ``width`` (one table of eight columns cut "workload" and "predicted/s" in two at 80 columns, four lines a row)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for p in lines:
        groups.setdefault((f"{p['workload']} ({p['preset']})", p["setting"]), []).append(p)
    out: list[Any] = []
    for (workload, setting), group in groups.items():
        measured = any(p["measured_samples_per_s"] is not None for p in group)
        keys = [Col("GPU", [Text(str(p["gpu"])) for p in group], "left"),
                Col("mode", [Text(p["precision"]) for p in group], "left")]
        cols = [Col("predicted/s", [f"{p['predicted_samples_per_s']:,.0f}" if p["status"] == "ok"
                                    else Text(str(p["status"])) for p in group]),
                Col("±", ["-" if p.get("predicted_error_pct") is None else f"{p['predicted_error_pct']}%"
                          for p in group])]
        if measured:
            cols += [Col("measured/s", ["-" if p["measured_samples_per_s"] is None
                                        else f"{p['measured_samples_per_s']:,.0f}" for p in group]),
                     Col("error", ["-" if p["error"] is None else f"{p['error']:+.0%}" for p in group])]
        title = (f"{escape(workload)}, {escape(setting)}: predicted{' beside measured' if measured else ''}  "
                 "[dim](ampbench predict; no GPU ran these)[/]")
        out += stack_tables(title, keys, cols, width)
    return out
