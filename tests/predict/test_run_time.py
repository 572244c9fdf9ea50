"""How long ``ampbench run`` of predicted cells takes: a cell's steps (timed, warm-up, the four more, the energy
window's) at the predicted step time and the overhead around them, and each target's closing fp32."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from predict_checks.run_time import medians

from ampbench.cells import extra_steps
from ampbench.measure.energy import MIN_WINDOW_S
from ampbench.predict.run_time import (
    BUILD_S,
    CELL_OVERHEAD_S,
    FIRST_STEP_EXTRA_S,
    cell_seconds,
    run_cells,
    run_text,
    runs_text,
)

H200 = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "h200" / "truth" / "runs.json"


def test_a_cells_seconds_count_every_step_it_runs() -> None:
    slow = cell_seconds(0.3, steps=20, warmup=3)  # (6 s of timed steps: no energy top-up)
    # (an eager cell: the first step and the memory step, which counts the FLOPs and reads the state's sizes)
    assert slow == pytest.approx(CELL_OVERHEAD_S + FIRST_STEP_EXTRA_S + 0.3 * (2 + 2 + 20))
    fast = cell_seconds(0.01, steps=20, warmup=3)  # (0.2 s timed: the energy window runs 1.8 s more)
    assert fast == pytest.approx(CELL_OVERHEAD_S + FIRST_STEP_EXTRA_S + 0.01 * 24 + (MIN_WINDOW_S - 0.2))
    compiled = cell_seconds(0.3, steps=20, warmup=3, extra=extra_steps(compiled=True))  # (its FLOP step apart)
    assert compiled == pytest.approx(slow + 0.3) and extra_steps(grad_accum=4) == 3


def test_a_run_measures_each_target_s_modes_and_its_fp32_again() -> None:
    rows = [{"status": "ok", "workload": w, "preset": "paper", "batch_size": 8, "precision": p, "predicted_step_ms": ms}
            for w in ("a", "b") for p, ms in (("fp32", 100.0), ("amp-bf16", 20.0))]
    rows.append({"status": "unsupported", "workload": "a", "precision": "fp8-tensorwise"})
    cells = run_cells(rows, steps=20, warmup=3)
    assert len(cells) == 6 and sum(c.closing for c in cells) == 2
    total = sum(c.seconds for c in cells)
    assert total == pytest.approx(2 * (2 * cell_seconds(0.1, 20, 3) + cell_seconds(0.02, 20, 3)) + BUILD_S)
    assert cells[0].seconds == pytest.approx(cell_seconds(0.1, 20, 3) + BUILD_S)  # (only the first cell builds at its turn)
    assert run_text(cells, "h100-sxm").startswith("ampbench run of these 6 cells (each workload's fp32 once more at the "
                                                  f"end: its closing baseline) on h100-sxm: ~{total / 60:.1f} min")
    one = run_cells([r for r in rows if r["workload"] == "a"], steps=20, warmup=3)
    assert runs_text({"h100-sxm": one, "a100-80gb": one}).startswith(
        "ampbench run of these 3 cells (fp32 once more at the end: its closing baseline): ~")


def test_the_constants_are_the_h200_rows_medians() -> None:
    """Oracle: the per-cell constants recomputed from the committed H200 suite's phases (a run without building ahead:
    its build is the one a GPU run now overlaps)."""
    got = medians(json.loads(H200.read_text())["rows"])
    assert got["overhead_s"] == pytest.approx(CELL_OVERHEAD_S, abs=0.05)
    assert got["build_s"] == pytest.approx(BUILD_S, abs=0.05)
    assert got["first_step_extra_s"] == pytest.approx(FIRST_STEP_EXTRA_S, abs=0.005)
