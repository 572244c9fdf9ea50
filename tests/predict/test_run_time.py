"""How long ``ampbench run`` of predicted cells takes: a cell's steps (timed, warm-up, the four more, the energy
window's) at the predicted step time and the overhead around them, and each target's closing fp32."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from predict_checks.run_time import medians, preloaded_overhead_s

from ampbench.cells import extra_steps
from ampbench.measure.energy import MIN_WINDOW_S
from ampbench.predict import run_time
from ampbench.predict.run_time import (
    BUILD_S,
    CELL_OVERHEAD_S,
    FIRST_STEP_EXTRA_S,
    around_s,
    cell_seconds,
    run_cells,
    run_text,
    runs_text,
)

H200 = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "h200" / "truth" / "runs.json"
REST = H200.parents[1] / "rest" / "runs.json"


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
    fp32, amp = cell_seconds(0.1, 20, 3), cell_seconds(0.02, 20, 3)
    assert fp32 > amp > BUILD_S  # (every turn longer than the next cell's build: the builds hidden but the first)
    assert total == pytest.approx(2 * (2 * fp32 + amp) + BUILD_S)
    assert cells[0].seconds == pytest.approx(fp32 + BUILD_S)  # (only the first cell builds at its turn)
    assert run_text(cells, "h100-sxm").startswith("ampbench run of these 6 cells (each workload's fp32 once more at the "
                                                  f"end: its closing baseline) on h100-sxm: ~{total / 60:.1f} min")
    one = run_cells([r for r in rows if r["workload"] == "a"], steps=20, warmup=3)
    assert runs_text({"h100-sxm": one, "a100-80gb": one}).startswith(
        "ampbench run of these 3 cells (fp32 once more at the end: its closing baseline): ~")


def test_a_turn_shorter_than_the_next_build_waits_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Oracle: the run's timeline walked cell by cell -- cell i + 1 forked as cell i's turn starts, its turn at the
    later of cell i's end and its own build's. (A GPU cell's turn is at least its energy window, 2 s: longer than the
    suite's median build; a build of 5 s -- hf:gpt2's is ~4 -- outlasts a short turn.)"""
    monkeypatch.setattr(run_time, "BUILD_S", 5.0)
    BUILD_S = run_time.BUILD_S
    rows = [{"status": "ok", "workload": f"w{i}", "preset": "tiny", "batch_size": 8, "precision": "amp-bf16",
             "predicted_step_ms": ms} for i, ms in enumerate((0.5, 300.0, 0.5, 0.5))]
    cells = run_cells(rows, steps=20, warmup=3)
    turns = [cell_seconds(r["predicted_step_ms"] / 1e3, 20, 3) for r in rows]
    assert turns[0] < BUILD_S < turns[1]  # (a tiny cell's turn, shorter than a build)
    start, ready = BUILD_S, 0.0  # (the first cell built at its turn)
    for turn in turns:
        start = max(start, ready)
        ready = start + BUILD_S  # (the next cell's build, from this turn's start)
        start += turn
    assert sum(c.seconds for c in cells) == pytest.approx(start)
    assert around_s(cells, 20, 3) == pytest.approx(start - sum(t - CELL_OVERHEAD_S - FIRST_STEP_EXTRA_S for t in turns))


def test_the_constants_are_the_h200_rows_medians() -> None:
    """Oracle: the per-cell constants recomputed from the committed H200 rows' phases -- the second lease's suite (its
    build, which a GPU run now overlaps, and its first step), the fourth lease's cells (the overhead at a cell's turn
    with torch._dynamo imported in the fork server: their engine phase was that import)."""
    got = medians(json.loads(H200.read_text())["rows"])
    assert got["build_s"] == pytest.approx(BUILD_S, abs=0.05)
    assert got["first_step_extra_s"] == pytest.approx(FIRST_STEP_EXTRA_S, abs=0.005)
    rest = json.loads(REST.read_text())["rows"]
    assert preloaded_overhead_s(rest) == pytest.approx(CELL_OVERHEAD_S, abs=0.005)
    assert medians(rest)["overhead_s"] > CELL_OVERHEAD_S + 3  # (the import, 3.4-4.0 s of each own workload's cell)
