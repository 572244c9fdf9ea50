"""The advisor's data-loading line: said where loading a batch takes a tenth of the advised mode's step or more,
with what a loop that loads each batch before its step would run at (recomputed here by hand); checked on the lent
H200's committed suite run, whose wide MLP loads a batch in most of its amp step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ampbench.report.advisor import advise
from ampbench.report.data_loading import DATA_SHARE, data_advice
from ampbench.store import derive
from tests.report.conftest import _row

H200_SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "h200" / "lease3" / "runs.json"


def _rows(fp32_ms: float, amp_ms: float, data_ms: float, **kw: object) -> list[dict]:
    return [_row("r", "w", "fp32", 64_000 / fp32_ms, step_ms_mean=fp32_ms, data_ms_per_batch=data_ms, **kw),
            _row("r", "w", "amp-bf16", 64_000 / amp_ms, step_ms_mean=amp_ms, data_ms_per_batch=data_ms, **kw)]


def test_the_line_says_what_a_loop_loading_in_series_would_run_at() -> None:
    line = data_advice(_rows(100.0, 20.0, 10.0), "amp-bf16")
    assert line == ("data loading: a batch took 10 ms to gather and copy to the device (the floor: from memory, no "
                    "decoding) against amp-bf16's 20 ms step (50%); a loop that loads each batch before its step runs "
                    f"amp-bf16 at {110 / 30:.2f}x fp32, not 5.00x -- overlap loading with compute: "
                    "DataLoader(num_workers > 0, pin_memory=True), .to(device, non_blocking=True), prefetch the next batch")


def test_said_from_a_tenth_of_the_step_and_only_for_a_measured_advised_mode() -> None:
    step = 20.0
    assert data_advice(_rows(100.0, step, DATA_SHARE * step * 0.99), "amp-bf16") is None
    assert data_advice(_rows(100.0, step, DATA_SHARE * step), "amp-bf16") is not None
    assert data_advice(_rows(100.0, step, 10.0), None) is None  # (nothing advised)
    assert data_advice(_rows(100.0, step, 10.0), "pure-bf16") is None  # (no row of it)
    fp32_only = data_advice(_rows(100.0, step, 30.0), "fp32")
    assert fp32_only is not None and "30%" in fp32_only and "x fp32" not in fp32_only  # (no gain to compare)
    no_data = [{**r, "data_ms_per_batch": None} for r in _rows(100.0, step, 10.0)]
    assert data_advice(no_data, "amp-bf16") is None


def test_accumulated_steps_load_every_micro_batch() -> None:
    """run --grad-accum 4: four batches loaded a step; per sample the loop's time is (step + 4 x data) / (4 x B)."""
    rows = _rows(400.0, 80.0, 5.0, grad_accum=4)
    line = data_advice(rows, "amp-bf16")
    assert line is not None and "(25%)" in line and f"at {420 / 100:.2f}x fp32, not 5.00x" in line


def test_the_advice_carries_it_on_the_h200_suite() -> None:
    """The third lease's wide MLP (batch 4096): the line's figures are the stored rows' own, recomputed from the
    export file (the advised mode's step and loading floor, fp32's merged row from the same derive)."""
    doc = json.loads(H200_SUITE.read_text())
    rows = [r for r in derive(doc["rows"]) if r["workload"] == "wide-mlp" and r["run_id"].startswith("20261127-1450")]
    a = advise(rows)
    best = next(r for r in rows if r["precision"] == a.recommended)
    base = next(r for r in rows if r["precision"] == "fp32")
    share = best["data_ms_per_batch"] / best["step_ms_mean"]
    assert share > 0.5 and a.data is not None and f"({share:.0%})" in a.data
    series = (base["step_ms_mean"] + base["data_ms_per_batch"]) / (best["step_ms_mean"] + best["data_ms_per_batch"])
    assert f"at {series:.2f}x fp32, not {base['step_ms_mean'] / best['step_ms_mean']:.2f}x" in a.data
    assert series == pytest.approx(6.0, abs=0.3)  # (~6x in series, against ~10x from the steps alone)
