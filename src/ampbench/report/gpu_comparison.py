"""Which GPU gains what: predictions of one cell on several GPUs (``ampbench predict --gpu a,b,c`` or ``all``), the GPUs
side by side as columns -- samples/s and the speedup over that GPU's own fp32, peak memory and the largest batch,
energy per sample at the board's rated power, and with ``--prices`` the cost per million samples -- and the advisor's
picks per precision: the fastest GPU, the cheapest per sample, the most energy-efficient.

Rows are grouped by the cell ``ampbench run`` would measure (:class:`~ampbench.cells.CellId`) less the GPU, so the
same model, batch and precision are compared and nothing else.
"""

from __future__ import annotations

import csv
import functools
import io
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from rich.console import RenderableType
from rich.markup import escape

from ampbench.execution.axes import Execution
from ampbench.report.accumulation import accumulated_step_text, accumulated_text, predicted_split
from ampbench.report.console import Col, fmt_bytes, stack_tables
from ampbench.report.numbers import bytes_unit, sig
from ampbench.report.predictions import at_power, listed

Group = dict[str, dict[str, dict[str, Any]]]
"""mode label -> GPU key -> its predicted row."""


def _mode(r: dict[str, Any]) -> str:
    return str(r["precision"]) + (f" {r['optimizer_state']}" if r.get("optimizer_state") else "")


def compared(rows: list[dict[str, Any]]) -> tuple[list[str], dict[tuple[Any, ...], Group]]:
    """The GPUs in the order first seen, and per (workload, preset, batch, setting) each mode's row per GPU."""
    gpus: list[str] = []
    groups: dict[tuple[Any, ...], Group] = {}
    for r in rows:
        gpu = str(r.get("gpu"))
        if gpu not in gpus:
            gpus.append(gpu)
        batch = f"{r.get('batch_size')}{accumulated_text(r)}{', inference' if r.get('predicted_inference') else ''}"
        if r.get("strategy"):
            batch += f" per GPU, {r['strategy']} x{r['world_size']}"
        key = (r["workload"], r.get("preset"), batch, str(r.get("execution") or {}))
        groups.setdefault(key, {}).setdefault(_mode(r), {})[gpu] = r
    return gpus, groups


def _ok(r: dict[str, Any] | None) -> bool:
    return r is not None and r.get("status") == "ok"


UNFIT_MARK = "*"
UNFIT_NOTE = "*: that GPU's fp32 does not fit this batch (oom)"
"""Marks an "x fp32" whose fp32 row is oom on its GPU (a T4's ResNet-50 at batch 256), and begins the line that says
what that "x fp32" is over (:func:`unfit_note`)."""


Splits = tuple[list[str], list[str], list[str]]
"""(priced, named, none): the GPUs whose fp32 does not fit a batch, by how it trains it (:func:`accumulation_splits`)."""


def accumulation_splits(group: Group, gpus: list[str]) -> Splits:
    """How each of ``gpus`` whose fp32 does not fit the batch trains it all the same, by gradient accumulation
    (``ampbench train --grad-accum``; :func:`~ampbench.report.accumulation.predicted_split`): priced -- "t4 2 x 128
    (612.0 ms a step, 418 samples/s)", predict priced that step and the "x fp32" is over it --, named -- "t4 2 x
    128", a row predicted before accumulated steps were priced: the split alone, the "x fp32" over the step that
    cannot run -- and none -- "t4", no micro-batch fits."""
    out: Splits = ([], [], [])
    for gpu in gpus:
        r = group.get("fp32", {}).get(gpu) or {}
        if not fp32_unfit(group, gpu):
            continue
        parts, step = predicted_split(r), accumulated_step_text(r)
        if parts is None:
            out[2].append(gpu)
        else:
            (out[0] if step else out[1]).append(f"{gpu} {parts[0]} x {parts[1]:,}" + (f" ({step})" if step else ""))
    return out


def unfit_note(splits: Splits) -> str:
    """:data:`UNFIT_NOTE` and what each marked "x fp32" is over: fp32's accumulated step where predict priced one
    (:func:`accumulation_splits`), else the step at a batch fp32 cannot run."""
    priced, named, none = splits
    said = []
    if priced:
        said.append("x fp32 is over fp32 training that batch a step by gradient accumulation (ampbench train "
                    f"--batch-size M --grad-accum N): {', '.join(priced)}")
    if named or none or not priced:
        said.append(f"{'elsewhere ' if priced else ''}x fp32 is the ratio of step times all the same, at a batch fp32 "
                    "cannot run")
    if named:
        said.append("its fp32 trains that batch a step by gradient accumulation (ampbench train --batch-size M "
                    f"--grad-accum N, M within its largest batch): {', '.join(named)}")
    return f"{UNFIT_NOTE}: " + "; ".join(said)


def fp32_unfit(group: Group, gpu: str) -> bool:
    """That GPU's fp32 of this cell is predicted not to fit its batch."""
    return (group.get("fp32", {}).get(gpu) or {}).get("status") == "oom"


def ratio_text(r: dict[str, Any], unfit: bool = False) -> str:
    """" (3.12x)": the row's x that GPU's fp32 (none: ""); ``unfit``: that fp32 does not fit (marked: " (3.12x*)")."""
    x = r.get("predicted_speedup_vs_fp32")
    mark = UNFIT_MARK if unfit and r.get("precision") != "fp32" else ""
    return "" if x is None else f" ({x:.2f}x{mark})"


def speed_text(r: dict[str, Any], unit: str = "", unfit: bool = False) -> str:
    """samples/s (x that GPU's fp32) ±the row's error band; ``unfit``: that fp32 does not fit (marked)."""
    band = r.get("predicted_error_pct")
    return f"{r['predicted_samples_per_s']:,.0f}{unit}{ratio_text(r, unfit)}" + (f" ±{band}%" if band is not None else "")


def memory_text(r: dict[str, Any], unit: str | None = None) -> str:
    """Predicted peak memory / the largest batch that fits (``unit``: the column's)."""
    batch = r.get("predicted_max_batch")
    return fmt_bytes(r.get("predicted_peak_bytes"), unit) + ("" if batch is None else f" / {batch:,}")


def energy_text(r: dict[str, Any]) -> str:
    j = r.get("predicted_joules_per_sample")
    return "-" if j is None else sig(j * 1e3)


def usd_text(r: dict[str, Any]) -> str:
    usd = r.get("predicted_usd_per_million_samples")
    return "-" if usd is None else sig(usd)


FIGURES: tuple[tuple[str, Callable[[dict[str, Any]], str], Callable[[dict[str, Any]], bool]], ...] = (
    ("samples/s (x that GPU's fp32) ±error", speed_text, lambda r: r.get("status") == "ok"),
    ("peak memory / max batch", memory_text, lambda r: r.get("status") in ("ok", "oom")),
    ("energy per sample, mJ", energy_text, lambda r: r.get("status") == "ok"),
    ("USD per million samples (--prices)", usd_text, lambda r: r.get("status") == "ok"),
)


def comparison_tables(rows: list[dict[str, Any]], width: int) -> list[RenderableType | str]:
    """Per cell and figure, a table: the modes down, the GPUs across (stacked to fit ``width``); a mode a GPU cannot
    run reads its status there (its reason is in the rows)."""
    gpus, groups = compared(rows)
    priced = any(r.get("usd_per_hour") is not None for r in rows)
    out: list[RenderableType | str] = []
    unfit: Splits | None = None
    for (workload, preset, batch, _), group in groups.items():
        modes = list(group)
        key = Col("mode", modes, justify="left")
        for head, cell, shown in FIGURES:
            if head.startswith("USD") and not priced:
                continue
            cols = []
            for gpu in gpus:
                if head.startswith("USD") and not any((group[m].get(gpu) or {}).get("usd_per_hour") for m in modes):
                    continue  # (a GPU without a price: no cost column)
                show = cell
                if cell is memory_text:  # (a column's sizes in one unit)
                    show = functools.partial(memory_text, unit=bytes_unit(
                        (group[m].get(gpu) or {}).get("predicted_peak_bytes") for m in modes))
                if cell is speed_text and fp32_unfit(group, gpu):
                    show = functools.partial(speed_text, unfit=True)
                    at = f"{workload} ({preset}) batch {batch} on " if len(groups) > 1 else ""
                    unfit = tuple([*sofar, *(at + s for s in new)] for sofar, new in  # type: ignore[assignment]
                                  zip(unfit or ([], [], []), accumulation_splits(group, [gpu])))
                texts = []
                for m in modes:
                    r = group[m].get(gpu)
                    texts.append("" if r is None else show(r) if shown(r) else str(r.get("status")))
                cols.append(Col(gpu, texts))
            if not cols:
                continue
            title = f"{escape(str(workload))} ({escape(str(preset))}), batch {batch}: {head}, predicted per GPU"
            out += stack_tables(title, key, cols, width)
    if unfit is not None:
        out.append(escape(unfit_note(unfit)))
    out.append("±error: how far predictions like each row missed published measurements (docs/predict.md); a gap "
               "between two GPUs smaller than both their errors is not a difference. energy: the GPU alone, at the "
               "power its architecture's kernel table measured where one did, else at its rated power (TDP: an upper "
               "bound); predicted_energy_basis in --json/--csv says which; x fp32: over the same GPU's fp32")
    return out


@dataclass(frozen=True)
class Ranking:
    """The GPUs of one cell and mode ranked by a figure."""

    best: list[str]
    """The GPUs at the best value (several: predicted exactly alike)."""
    tied: list[str]
    """The others whose error band overlaps the best's, nearest first."""
    value: float
    compared: int
    """GPUs with the figure."""
    launch_bound: bool
    """Every best GPU's step is launch-bound: the host sets its pace, not the GPU."""

    @property
    def leaders(self) -> list[str]:
        return [*self.best, *self.tied]


def rank(group: dict[str, dict[str, Any]], value: Callable[[dict[str, Any]], float | None],
         low: bool) -> Ranking | None:
    """The GPUs best by ``value``: those at the best value, and those tied with it -- each row's ``±error`` band
    overlapping the best's (a prediction can be off by its band either way: two bands that overlap are not a
    difference, two that do not are); None with fewer than two GPUs to compare."""
    found = [(gpu, v, (r.get("predicted_error_pct") or 0) / 100, r) for gpu, r in group.items()
             if _ok(r) and (v := value(r)) is not None]
    if len(found) < 2:
        return None
    top = (min if low else max)(v for _, v, _, _ in found)
    best = [f for f in found if math.isclose(f[1], top, rel_tol=1e-9)]
    band = max(b for _, _, b, _ in best)
    tied = sorted((f for f in found if f not in best and (f[1] * (1 - f[2]) <= top * (1 + band) if low
                                                            else f[1] * (1 + f[2]) >= top * (1 - band))),
                  key=lambda f: abs(f[1] - top))
    return Ranking([g for g, *_ in best], [g for g, *_ in tied], top, len(found),
                   all(r.get("predicted_bound") == "launch" for *_, r in best))


SHOWN = 3
"""GPUs an advice line names before "N more" (every one: --json/--csv, the HTML report)."""


def _said(what: str, r: Ranking, figure: str, shown: int | None = SHOWN, why_alike: bool = False) -> str:
    """One pick: the best GPU and those tied with it, or that none leads (all within the error band, or several
    predicted alike) -- and, for speed, why when the best are launch-bound."""
    why = (" (launch-bound: the host issues the ops slower than the GPU runs them, so the GPU does not set the pace)"
           if why_alike and r.launch_bound and len(r.best) > 1 else "")
    if len(r.leaders) == r.compared:
        return f"{what}: none beyond the error band (the best {figure}){why}"
    if len(r.best) > 1:
        text = f"{what}: {len(r.best)} GPUs alike ({listed(r.best, shown)}) ({figure}){why}"
    else:
        text = f"{what} {r.best[0]} ({figure})"
    return text + (f", tied within the error band with {listed(r.tied, shown)}" if r.tied else "")


@dataclass(frozen=True)
class _Pick:
    """One of a mode's picks: what it ranks, its ranking, and the figure that ranks it (a unit and how it is written)."""

    what: str
    ranking: Ranking
    text: Callable[[str], str]
    """The figure's text from its number's text (``"58,603"`` -> ``"58,603 samples/s"``)."""
    number: Callable[[float], str]
    extra: tuple[str, ...] = ()
    """What else the figure says that must be alike for modes to share a line (the energy's power basis)."""

    @property
    def key(self) -> tuple[Any, ...]:
        r = self.ranking
        if len(r.leaders) == r.compared:  # (none leads: said without names, whichever GPU is nominally best)
            return self.what, "none", r.launch_bound and len(r.best) > 1, self.extra
        return self.what, tuple(r.best), tuple(r.tied), r.launch_bound, self.extra


def _picks(per_gpu: dict[str, dict[str, Any]], shown: int | None = SHOWN) -> list[_Pick] | None:
    """A mode's picks: the fastest GPU, the cheapest per sample (priced GPUs), the most energy-efficient; None with
    fewer than two GPUs to compare."""
    fastest = rank(per_gpu, lambda r: r.get("predicted_samples_per_s"), low=False)
    if fastest is None:
        return None
    picks = [_Pick("fastest", fastest, lambda n: f"{n} samples/s", lambda v: f"{v:,.0f}")]
    cheapest = rank(per_gpu, lambda r: r.get("predicted_usd_per_million_samples"), low=True)
    if cheapest is not None:
        picks.append(_Pick("cheapest per sample", cheapest, lambda n: f"USD {n} per million", sig))
    frugal = rank(per_gpu, lambda r: r.get("predicted_joules_per_sample"), low=True)
    if frugal is not None:
        power = _energy_power(frugal, per_gpu, shown)
        picks.append(_Pick("most energy-efficient", frugal, lambda n: f"{n} mJ/sample {power}",
                           lambda v: sig(v * 1e3), (power,)))
    return picks


def advice(rows: list[dict[str, Any]], shown: int | None = SHOWN) -> Iterator[str]:
    """Per cell predicted on two GPUs or more: the fastest GPU, the cheapest per sample (priced GPUs) and the most
    energy-efficient, per mode; GPUs whose error band overlaps the best's are named as tied, nearest first (plain
    text; ``shown``: GPUs named before "N more", None: all). Modes with the same picks share a line, their figures
    as a range (eight lines that named the same GPUs, mode after mode, said one thing eight times)."""
    _, groups = compared(rows)
    for (workload, preset, batch, _), group in groups.items():
        alike: dict[tuple[Any, ...], list[tuple[str, list[_Pick]]]] = {}
        for mode, per_gpu in group.items():
            picks = _picks(per_gpu, shown)
            if picks is not None:
                alike.setdefault(tuple(p.key for p in picks), []).append((mode, picks))
        for same in alike.values():
            modes = [m for m, _ in same]
            label = f"every mode ({', '.join(modes)})" if len(same) == len(group) > 2 else ", ".join(modes)
            said = []
            for i, pick in enumerate(same[0][1]):
                values = [picks[i].ranking.value for _, picks in same]
                lo, hi = pick.number(min(values)), pick.number(max(values))
                said.append(_said(pick.what, pick.ranking, pick.text(lo if lo == hi else f"{lo}-{hi}"), shown,
                                  why_alike=pick.what == "fastest"))
            yield f"{workload} ({preset}, batch {batch}) {label}: " + "; ".join(said)


def _energy_power(frugal: Ranking, per_gpu: dict[str, dict[str, Any]], shown: int | None = SHOWN) -> str:
    """The power the best energy per sample was priced at; the GPUs priced at another (a measured kernel table's power
    beside a rated TDP, an upper bound) named, since their figures are not alike (``shown`` of them and "N more":
    ``--gpu all`` named 28 in one line)."""
    basis = " or ".join(sorted({at_power(per_gpu[g]) for g in frugal.best}))
    others = [g for g, r in per_gpu.items() if _ok(r) and r.get("predicted_joules_per_sample") is not None
              and g not in frugal.best and at_power(r) != basis]
    return basis + (f"; {listed(others, shown)} {at_power(per_gpu[others[0]])}" if others else "")


def mark_ranks(rows: list[dict[str, Any]]) -> None:
    """Each row compared with other GPUs gets ``predicted_speed_rank`` (1: the fastest; GPUs predicted alike share
    a rank) and ``predicted_tied_with_fastest`` (its band overlaps the fastest's): the full lists the advice lines
    shorten, for --json and --csv."""
    _, groups = compared(rows)
    for group in groups.values():
        for per_gpu in group.values():
            fastest = rank(per_gpu, lambda r: r.get("predicted_samples_per_s"), low=False)
            if fastest is None:
                continue
            speeds = sorted({r["predicted_samples_per_s"] for r in per_gpu.values() if _ok(r)}, reverse=True)
            for gpu, r in per_gpu.items():
                if _ok(r):
                    r["predicted_speed_rank"] = 1 + sum(1 for v in speeds if v > r["predicted_samples_per_s"] * (1 + 1e-9))
                    r["predicted_tied_with_fastest"] = gpu in fastest.leaders


def compared_cells(predictions: list[dict[str, Any]]) -> list[tuple[str, list[str], Group]]:
    """The cells predicted on two GPUs or more, each with its title and GPUs (for the reports)."""
    gpus, groups = compared(predictions)
    out = []
    for (workload, preset, batch, _), group in groups.items():
        present = [g for g in gpus if any(g in per for per in group.values())]
        if len(present) > 1:
            out.append((f"{workload} ({preset}), batch {batch}", present, group))
    return out


def markdown(predictions: list[dict[str, Any]], escape_md: Callable[[Any], str]) -> list[str]:
    """The comparison as Markdown tables (the report's "Which GPU" section): per cell, samples/s (x fp32) by GPU."""
    lines: list[str] = []
    for title, gpus, group in compared_cells(predictions):
        lines += ["", f"**{escape_md(title)}: samples/s (x that GPU's fp32) ±error, predicted per GPU**", "",
                  "| mode | " + " | ".join(escape_md(g) for g in gpus) + " |",
                  "| --- | " + " | ".join("---:" for _ in gpus) + " |"]
        for mode, per_gpu in group.items():
            cells = [(speed_text(r, unfit=fp32_unfit(group, g)) if _ok(r) else str(r.get("status")))
                     if (r := per_gpu.get(g)) else "" for g in gpus]
            lines.append(f"| {escape_md(mode)} | " + " | ".join(cells) + " |")
        if any(fp32_unfit(group, g) for g in gpus):
            lines += ["", f"_{escape_md(unfit_note(accumulation_splits(group, gpus)))}_"]
    return lines


def chart_data(group: Group) -> dict[str, dict[str, tuple[float, float | None]]]:
    """mode -> GPU -> (predicted samples/s, x that GPU's fp32), ok rows only."""
    return {mode: {g: (r["predicted_samples_per_s"], r.get("predicted_speedup_vs_fp32")) for g, r in per.items()
                   if _ok(r)} for mode, per in group.items()}


CSV_FIGURES = (("samples_per_s", "predicted_samples_per_s"), ("speedup_vs_fp32", "predicted_speedup_vs_fp32"),
               ("peak_bytes", "predicted_peak_bytes"), ("max_batch", "predicted_max_batch"),
               ("joules_per_sample", "predicted_joules_per_sample"),
               ("usd_per_million_samples", "predicted_usd_per_million_samples"),
               ("error_pct", "predicted_error_pct"), ("speed_rank", "predicted_speed_rank"),
               ("tied_with_fastest", "predicted_tied_with_fastest"))


def wide_csv(rows: list[dict[str, Any]]) -> str:
    """The GPUs side by side as CSV: a line per cell and mode, per GPU its status and figures (``<gpu> samples_per_s``,
    ...); empty where a GPU has no such row or figure."""
    gpus, groups = compared(rows)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["workload", "preset", "batch", "mode", *(f"{g} {name}" for g in gpus for name in ("status", *dict(CSV_FIGURES)))])
    for (workload, preset, batch, _), group in groups.items():
        for mode, per_gpu in group.items():
            cells: list[Any] = []
            for g in gpus:
                r = per_gpu.get(g) or {}
                cells += [r.get("status", ""), *(("" if r.get(key) is None else r[key]) for _, key in CSV_FIGURES)]
            w.writerow([workload, preset, batch, mode, *cells])
    return buf.getvalue()


def ddp_lines(rows: list[dict[str, Any]]) -> Iterator[str]:
    """Per GPU of a many-GPU prediction: the fabric, the communication a step runs (DDP's all-reduce and what of it
    the backward does not hide; FSDP's all-gather and reduce-scatter) -- one figure where every mode's is the same, the
    modes that share a figure named before it where they differ (the layout's dtypes, the reductions a step, the
    compute that hides them) --, the scaling efficiency per mode (plain text)."""
    by: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("strategy") and r.get("status") == "ok":
            by.setdefault(str(r["gpu"]), []).append(r)
    for gpu, group in by.items():
        r, modes = group[0], _fabric_modes(group)
        eff = ", ".join(f"{m} {x['predicted_scaling_efficiency']:.2f}" for x, m in zip(group, modes))
        n = int(r.get("grad_accum") or 1)
        if r["strategy"] == "fsdp":
            units = r.get("predicted_fsdp_units") or 1
            shape = ("one unit, as run wraps a model without repeated blocks: nothing overlaps them" if units == 1 else
                     f"{units} units as run wraps the model, the root and {units - 1} blocks: each block's overlap its "
                     "neighbours' compute")
            each = f"; each of {n} micro-batches gathers and reduce-scatters anew" if n > 1 else ""
            comm = _by_figure(group, modes, "all-gathers and reduce-scatters", f" ({shape}{each})",
                              lambda x: f"{x['predicted_allgather_ms']:,.2f} ms and {x['predicted_reduce_scatter_ms']:,.2f}"
                                        f" ms a step, {x['predicted_comm_ms']:,.2f} ms of them waited on")
        else:
            comm = _by_figure(group, modes, "the gradients' all-reduce", "" if n == 1 else _reductions(group, modes, n),
                              lambda x: f"{x['predicted_allreduce_ms']:,.2f} ms a step, {x['predicted_comm_ms']:,.2f} "
                                        "ms of it past the backward")
        yield (f"{gpu}: {r['strategy']} x{r['world_size']} ({r['gpus_per_node']} per machine x {r['nodes']}) over "
               f"{r['interconnect']} (bus {r['predicted_bus_gbs']:,.0f} GB/s): {comm}; "
               f"scaling efficiency (one GPU's step / this step) {eff}")


def _fabric_modes(group: list[dict[str, Any]]) -> list[str]:
    """Each row's mode in a fabric's line: its execution said too where the GPU's rows are of several ("amp-bf16 ·
    selective-checkpointing")."""
    executions = [Execution.of(x) for x in group]
    several = len(set(executions)) > 1
    return [_mode(r) + (f" · {ex.label}" if several and not ex.is_default else "") for r, ex in zip(group, executions)]


def _by_figure(group: list[dict[str, Any]], modes: list[str], what: str, how: str,
               figure: Callable[[dict[str, Any]], str]) -> str:
    """"<what><how>: <figure>" where every row's figure is the same; "<what><how>: fp32, amp-bf16 <figure>;
    master-bf16 <figure>" where they differ (``modes``: :func:`_fabric_modes`)."""
    figures: dict[str, list[str]] = {}
    for r, mode in zip(group, modes):
        figures.setdefault(figure(r), []).append(mode)
    if len(figures) == 1:
        return f"{what}{how}: {next(iter(figures))}"
    return f"{what}{how}: " + "; ".join(f"{', '.join(m)} {f}" for f, m in figures.items())


def _reductions(group: list[dict[str, Any]], modes: list[str], n: int) -> str:
    """" (once, in the last of 4 micro-batches' backward; master-bf16 in each one's)" of an accumulating step's rows
    (``predicted_reductions``: the times a step reduces its gradients)."""
    each = [m for r, m in zip(group, modes) if int(r.get("predicted_reductions") or 1) > 1]
    parts = [f"once, in the last of {n} micro-batches' backward"] if len(each) < len(group) else []
    if each:
        parts.append(f"{', '.join(each)} in each micro-batch's" if parts else f"in each of {n} micro-batches' backward")
    return f" ({'; '.join(parts)})"
