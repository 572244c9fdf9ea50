"""The per-cell constants of :mod:`ampbench.predict.run_time`, derived from a lent GPU's measured rows: what a cell
costs around its steps, its build, its first step's extra (the medians over the rows' ``phases_s``). The product keeps
the numbers; this derivation lives beside the tests, which recompute them from the committed rows."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from statistics import median
from typing import Any

STEP_PHASES = ("first_step", "memory_step", "flop_count", "warmup", "timed_steps", "energy_steps")
"""A cell's phases that run its steps (priced from the step time)."""
AHEAD_PHASES = ("process_start", "import", "build", "waiting")
"""A cell's phases that a GPU run pays before the cell's turn, or once (the fork server's imports): not per cell."""


def overhead_s(phases: Mapping[str, float]) -> float:
    """The seconds a cell's row spent around its steps that a GPU run pays per cell: its phases but the steps' and
    those run ahead."""
    return sum(v for k, v in phases.items() if k not in STEP_PHASES and k not in AHEAD_PHASES)


def medians(rows: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """``overhead_s``, ``build_s`` and ``first_step_extra_s``: the medians over measured GPU rows with phases (what
    ``CELL_OVERHEAD_S``, ``BUILD_S`` and ``FIRST_STEP_EXTRA_S`` are, for the H200's rows)."""
    rows = [r for r in rows if r.get("phases_s") and r.get("status") == "ok"]
    return {"overhead_s": median(overhead_s(r["phases_s"]) for r in rows),
            "build_s": median(r["phases_s"].get("build", 0.0) for r in rows),
            "first_step_extra_s": median((r["first_step_ms"] - r["step_ms_p50"]) / 1e3 for r in rows)}


def preloaded_overhead_s(rows: Iterable[Mapping[str, Any]]) -> float:
    """``overhead_s`` as a cell pays it with torch._dynamo imported in the fork server (``CELL_OVERHEAD_S`` since
    2026-11-30): the median over ``rows`` of each one's overhead less its ``engine`` phase (torch.optim's first
    optimizer imported torch._dynamo there), plus the median ``engine`` of the rows whose process had imported it
    already (``hf:`` cells: transformers imports it)."""
    rows = [r for r in rows if r.get("phases_s") and r.get("status") == "ok"]
    preloaded = [r["phases_s"].get("engine", 0.0) for r in rows if str(r["workload"]).startswith("hf:")]
    return median(overhead_s(r["phases_s"]) - r["phases_s"].get("engine", 0.0) for r in rows) + median(preloaded)
