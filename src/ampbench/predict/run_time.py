"""How long ``ampbench run`` of the predicted cells would take on the predicted GPU: each cell's steps at their
predicted time, plus what a cell costs around its steps.

A cell runs, besides its ``steps`` timed ones: the first step (cuDNN's and cuBLAS's first-call work on top of a step),
the memory step and the FLOP-count step, ``warmup - 1`` warm-up steps, one more step to read the weights', gradients'
and optimizer's bytes, and -- on a GPU, where energy is read over at least
:data:`~ampbench.measure.energy.MIN_WINDOW_S` -- untimed steps until the timed window reaches it. Around them, at its
turn: its CUDA context, the model's move and the engine's set-up, the teardown (:data:`CELL_OVERHEAD_S`). Before its
turn (``--build-ahead``, on for GPU runs): the cell's process, forked from the run's fork server (torch, the harness and
torch._dynamo imported there once) when the cell before it starts, builds its workload (:data:`BUILD_S`) while that
cell measures -- so a cell's turn starts when the one before ends or its own build does, whichever is later: the run
takes ``BUILD_S + sum(max(turn of cell i, BUILD_S of cell i + 1))``. Each workload's fp32 runs once more at the end
(the closing baseline).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from ampbench.bench.suites import GPU_STEPS, GPU_WARMUP
from ampbench.cells import extra_steps
from ampbench.measure.energy import MIN_WINDOW_S

CELL_OVERHEAD_S = 0.43
"""Seconds a GPU cell costs at its turn outside its steps, with torch._dynamo imported in the fork server: the median,
over the 18 cells of the fourth H200 lease (``benchmarks/results/h200/rest/runs.json``, 2026-11-30), of their
``open``, ``cuda_init``, ``setup``, ``batches``, ``environment``, ``after_steps``, ``finish``, ``close`` and
``teardown``, plus the ``engine`` phase of its cells whose process had imported torch._dynamo before it (the two
``hf:`` cells: transformers imports it; 0.003 s). Every other cell's ``engine`` there was 3.4-4.0 s: torch.optim's
first optimizer importing torch._dynamo, which the fork server imports once since (``predict_checks/run_time.py``
derives it, ``tests/predict/test_run_time.py`` recomputes it). Derived, not yet checked: the 5.8 s of the second
lease's suite and the 4.8 s of the third's each held that import; the next lease's suite checks it."""
BUILD_S = 1.8
"""The second lease's suite cells' median ``build`` (``benchmarks/results/h200/truth/runs.json``): the workload built on
the host -- at the run's first cell's turn, each later cell's while the one before measures."""
FIRST_STEP_EXTRA_S = 0.43
"""The first step's time over a step's (the same cells' median: cuDNN's and cuBLAS's first calls)."""


@dataclass(frozen=True)
class CellTime:
    workload: str
    precision: str
    step_s: float
    seconds: float
    closing: bool = False


def cell_seconds(step_s: float, steps: int = GPU_STEPS, warmup: int = GPU_WARMUP,
                 overhead_s: float = CELL_OVERHEAD_S, extra: int | None = None) -> float:
    """One GPU cell's wall time for a step of ``step_s`` (``extra``: its :func:`~ampbench.cells.extra_steps`, an eager
    cell's by default). :data:`CELL_OVERHEAD_S`'s rows still held a step of their own reading the state's sizes in
    their ``after_steps`` (4 extra steps then; read in the memory step since 2026-11-29): one step a cell over, until
    a lent GPU's rows re-derive it."""
    energy_top_up = max(0.0, MIN_WINDOW_S - steps * step_s)
    extra = extra_steps() if extra is None else extra
    return overhead_s + FIRST_STEP_EXTRA_S + step_s * (extra + max(0, warmup - 1) + steps) + energy_top_up


def _extra_of(row: dict[str, Any]) -> int:
    """A predicted row's cell's :func:`extra_steps` (its compile and accumulation as the row names them)."""
    return extra_steps(str(row.get("compile") or "off") != "off", int(row.get("grad_accum") or 1))


def run_cells(rows: Iterable[dict[str, Any]], steps: int = GPU_STEPS, warmup: int = GPU_WARMUP) -> list[CellTime]:
    """The cells a run of the predicted rows' targets would measure on their GPU (one GPU's rows), each with the
    seconds it adds to the run: every ok row's cell, and each target's fp32 again (its closing baseline) where it has
    fp32 and another mode. The first cell adds its build and its turn; every other cell its turn or the next cell's
    build, whichever is longer (the next cell builds while it measures); the last its turn."""
    out: list[CellTime] = []
    by_target: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("status") == "ok" and r.get("predicted_step_ms"):
            by_target.setdefault((r["workload"], r.get("preset"), r.get("batch_size")), []).append(r)
    for (workload, _, _), group in by_target.items():
        for r in group:
            step = r["predicted_step_ms"] / 1e3
            out.append(CellTime(workload, r["precision"], step, cell_seconds(step, steps, warmup, extra=_extra_of(r))))
        fp32 = next((r for r in group if r["precision"] == "fp32"), None)
        if fp32 is not None and len(group) > 1:
            step = fp32["predicted_step_ms"] / 1e3
            out.append(CellTime(workload, "fp32", step, cell_seconds(step, steps, warmup, extra=_extra_of(fp32)),
                                closing=True))
    out = [replace(c, seconds=max(c.seconds, BUILD_S)) if i < len(out) - 1 else c for i, c in enumerate(out)]
    if out:  # (the run's first cell builds at its turn; every later one while the cell before it measures)
        out[0] = replace(out[0], seconds=out[0].seconds + BUILD_S)
    return out


def around_s(cells: list[CellTime], steps: int = GPU_STEPS, warmup: int = GPU_WARMUP) -> float:
    """The seconds of a run of ``cells`` spent around their steps: their turns' overheads, the first cell's build and
    any build longer than the turn it overlaps."""
    return sum(c.seconds for c in cells) - sum(cell_seconds(c.step_s, steps, warmup, overhead_s=0.0)
                                               - FIRST_STEP_EXTRA_S for c in cells)


def _these(n: str, closing: int) -> str:
    """"these 9 cells (fp32 once more at the end: its closing baseline)": a table of 8 modes read "9 cells" with
    nothing saying which the ninth was. ``closing``: how many workloads' fp32 runs again."""
    why = ("" if not closing else " (fp32 once more at the end: its closing baseline)" if closing == 1 else
           " (each workload's fp32 once more at the end: its closing baseline)")
    return f"these {n} cells{why}"


def run_text(cells: list[CellTime], gpu: str) -> str:
    """``ampbench run of these 63 cells: ~9.8 min on h100-sxm (steps 4.1, around them 8.1; ...)``."""
    total = sum(c.seconds for c in cells)
    around = around_s(cells)
    these = "this cell" if len(cells) == 1 else _these(str(len(cells)), sum(c.closing for c in cells))
    return (f"ampbench run of {these} on {gpu}: ~{total / 60:.1f} min ({(total - around) / 60:.1f} in "
            f"their steps at the predicted step times, {around / 60:.1f} around them: {CELL_OVERHEAD_S:g} s a cell at "
            f"its turn -- the lent H200 host's CUDA context, set-up and teardown -- and each workload's {BUILD_S:g} s "
            "build while the cell before measures)")


def runs_text(per_gpu: dict[str, list[CellTime]]) -> str:
    """Several GPUs' runs of the same cells, in one line: the range, and which GPU is at each end."""
    totals = {gpu: sum(c.seconds for c in cells) for gpu, cells in per_gpu.items() if cells}
    fast, slow = min(totals, key=lambda g: totals[g]), max(totals, key=lambda g: totals[g])
    counts = sorted({len(cells) for cells in per_gpu.values() if cells})
    n = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"  # (a GPU that cannot run a mode: fewer)
    these = _these(n, max(sum(c.closing for c in cells) for cells in per_gpu.values()))
    return (f"ampbench run of {these}: ~{totals[fast] / 60:.1f} min on {fast} to ~{totals[slow] / 60:.1f} min on "
            f"{slow} ({len(totals)} GPUs; {CELL_OVERHEAD_S:g} s a cell around its steps, the lent H200 host's)")
