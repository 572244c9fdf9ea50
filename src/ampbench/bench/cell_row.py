"""A cell's row before and after it is measured, for every framework: the identity filled in, a failure as a status,
and what the timed steps say (diverged, skipped steps).
"""

from __future__ import annotations

import math
import time
import traceback
from collections.abc import Callable
from typing import Any

from ampbench import phases, progress
from ampbench.cells import CellSpec
from ampbench.errors import AmpbenchError
from ampbench.measure.maxbatch import Trial, measure_max_batch
from ampbench.store.row_keys import empty_row


def base_row(spec: CellSpec) -> dict[str, Any]:
    """The row of a cell before it is measured: identity filled in, status error until something says otherwise."""

    row = empty_row()
    row.update(**spec.cell_id().to_row(), measures=list(spec.measures), device=spec.device, steps=spec.measure.steps,
               warmup=spec.measure.warmup, status="error", reason="", repeat=spec.repeat, repeat_of=spec.repeat_of(),
               closing_baseline=spec.closing)
    return row


def record_failure(row: dict[str, Any], e: BaseException, oom: bool) -> None:
    """A cell's exception as its row's status: oom (``oom``: the framework said so), else error with the exception's
    first line and where it was raised."""
    if oom:
        row.update(status="oom", reason=first_line(e))
        return

    tb = traceback.extract_tb(e.__traceback__)
    where = f" (at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno})" if tb else ""
    row.update(status="error", reason=first_line(e) + where)


def judge_timed_steps(row: dict[str, Any], loss: float, skipped_timed: int, timed: int, calls: int, scale: float,
                      hint: str = "") -> None:
    """What the timed steps say about the cell, for every framework: a non-finite loss, or every timed step skipped
    for inf/NaN gradients, is ``diverged`` (their speed means nothing); some skipped timed steps are a warning on an
    ok row (they did not train, yet samples/s counts them). ``row`` holds ``skipped_steps`` (all steps so far)."""
    skipped = row.get("skipped_steps") or 0
    if math.isfinite(loss) and skipped_timed >= timed:
        row.update(status="diverged", reason=f"every timed step was skipped for inf/NaN gradients ({skipped} skipped "
                                             f"in {calls} steps, loss scale {scale:g})")
    elif not math.isfinite(loss):
        row.update(status="diverged", reason=f"training loss is {loss} after {calls} steps ({skipped} skipped, loss "
                                             f"scale {scale:g})" + (f"; likely cause: {hint}" if hint else ""))
    elif skipped_timed > 0:
        row["warnings"] = [*(row.get("warnings") or []), (
            f"{skipped_timed} of the {timed} timed steps were skipped for inf/NaN gradients ({skipped} skipped in "
            f"{calls} steps, loss scale {scale:g}): they did not train, yet samples/s counts them")]


def add_warnings(row: dict[str, Any], warnings: list[str] | None) -> None:
    """Append ``warnings`` to the row's (a measurement never replaces what an earlier one warned of)."""
    if warnings:
        row["warnings"] = [*(row.get("warnings") or []), *warnings]


def first_line(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    text = msg[0] if msg else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


# -- the max-batch search, for every framework ---------------------------------------------------------------------
def search_cell_max_batch(spec: CellSpec, batch_size: int, trial: Callable[[CellSpec, int], Any] | None,
                          throughput_at: Callable[[CellSpec, int], dict[str, Any]] | None) -> tuple[dict[str, Any], str]:
    """The search's row keys and the error that stopped it (the driver every framework's cells use)."""

    if trial is None:
        raise AmpbenchError("maxbatch needs a trial runner (run it through ampbench.bench.run)")
    return measure_max_batch(lambda b: trial(spec, b), batch_size, spec.measure.maxbatch_limit,
                             (lambda b: throughput_at(spec, b)) if throughput_at else None)


SEARCHED = ("ok", "diverged")
"""How a cell must have ended for :func:`search_after` to search its largest batch (a diverged cell's memory still
says what fits)."""


def search_after(spec: CellSpec, row: dict[str, Any], trial: Callable[[int], Trial],
                 throughput_at: Callable[[int], dict[str, Any]]) -> dict[str, Any]:
    """``row`` (the cell's other measures, measured in its own process or ranks, which have ended) with the max-batch
    search run from here, each trial and the throughput at the batch found in a process of its own: the trials fork
    from this process's fork server (the cell's process started one of its own for them, ~2 s of imports a cell on a
    2-core Xeon; on a GPU host, torch's CUDA imports too) and own the device alone. The search's seconds are the row's
    ``maxbatch`` phase (its ``phases_s`` still add up to ``wall_s``). A row that failed before its batch was known, or
    whose cell errored, is not searched."""
    row["measures"] = list(spec.measures)
    if row.get("status") not in SEARCHED or not row.get("batch_size"):
        return row
    t0 = time.perf_counter()
    progress.report("max batch")
    keys, error = measure_max_batch(trial, int(row["batch_size"]), spec.measure.maxbatch_limit, throughput_at)
    add_warnings(row, keys.pop("warnings", None))
    row.update(keys)
    if error:  # (the trials so far stay in the row)
        row.update(status="error", reason=f"maxbatch trial failed: {error}")
    took = time.perf_counter() - t0
    if row.get("phases_s") is not None:
        row["phases_s"] = {**row["phases_s"], "maxbatch": float(row["phases_s"].get("maxbatch") or 0.0) + took}
        row["wall_s"] = phases.add_up(row["phases_s"])
    else:
        row["wall_s"] = float(row.get("wall_s") or 0.0) + took
    return row


def without_search(spec: CellSpec) -> CellSpec:
    """The cell measuring all but its max-batch search (which :func:`search_after` runs once its process has ended)."""
    return spec.measuring(tuple(m for m in spec.measures if m != "maxbatch"))


def trial_failed(e: BaseException, oom: bool) -> dict[str, Any]:
    """A max-batch trial that raised: a miss when the framework says it ran out of memory, else a failed trial (the
    search stops)."""
    if oom:
        return {"fits": False, "peak_bytes": None, "reason": first_line(e)}
    return {"fits": False, "failed": True, "peak_bytes": None, "reason": first_line(e)}


def allowed_bytes(spec: CellSpec, device_total: int | None) -> float | None:
    """The most a max-batch trial may hold: (1 - margin) x the smaller of --memory-budget and the GPU's memory
    (``device_total``; None on a CPU); None without either."""
    limits = [x for x in (spec.measure.memory_budget, device_total) if x is not None]
    if not limits:
        return None
    return (1.0 - spec.measure.margin_on(spec.device)) * min(limits)  # (a cell made outside a run: the device's)


def trial_fits(spec: CellSpec, used: int | None, device_total: int | None) -> dict[str, Any]:
    """The fit rule of a max-batch trial, for every framework: a batch fits when its peak ``used`` stays under
    (1 - margin) x the limit -- the smaller of --memory-budget and the GPU's memory (``device_total``; None on a CPU,
    where --memory-budget is required)."""
    allowed = allowed_bytes(spec, device_total)
    if allowed is None:
        return {"fits": False, "failed": True, "peak_bytes": used, "reason": "maxbatch on CPU needs --memory-budget"}
    fits = used is not None and used <= allowed
    return {"fits": fits, "peak_bytes": used,
            "reason": "" if fits else (f"peak {used / 2**20:,.0f} MiB > {allowed / 2**20:,.0f} MiB allowed" if used is not None
                                       else "no peak measured")}
