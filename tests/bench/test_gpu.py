"""GPU paths of the harness (skipped without CUDA): CUDA events, allocator peaks, NVML, OOM as a status."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ampbench.bench import CellSpec
from ampbench.bench.jobs import run_cell

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def _spec(precision: str, **kw: object) -> CellSpec:
    base = dict(workload="mnist-cnn", model=None, preset="tiny", precision=precision, batch_size=None, device="cuda:0",
                measures=("throughput", "memory", "inference"), steps=10, warmup=2)
    base.update(kw)
    return CellSpec.of(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("precision", ["fp32", "amp-fp16", "master-fp16"])
def test_cuda_cell(precision: str) -> None:
    row = run_cell(_spec(precision))
    assert row["status"] == "ok", row["reason"]
    assert row["timer"] == "cuda_events"
    assert row["peak_allocated_bytes"] > 0 and row["peak_reserved_bytes"] >= row["peak_allocated_bytes"]
    assert row["gpu_used_bytes"] >= row["peak_reserved_bytes"]  # the device also holds the CUDA context
    assert row["env"]["capability"] and row["env"]["cuda"]
    assert row["math_mode"] == ("fp32" if precision == "fp32" else "fp16")
    if row["peak_tflops"] is not None:
        assert 0 < row["mfu"] < 1
    if row["env"].get("nvml") == "ok":  # energy over the timed steps from NVML: a board's power, never zero
        assert row["energy_source"] in ("nvml energy counter", "nvml power samples")
        assert 10 < row["mean_power_w"] < 2000 and row["energy_j"] > 0
        # the window holds the timed steps and, where those are short, more of the same steps run to fill it
        # (measure/energy.py): a sample's joules are over the window's steps, not the timed ones
        assert row["energy_steps"] >= row["steps"]
        samples = row["batch_size"] * (row["grad_accum"] or 1) * row["energy_steps"]
        assert abs(row["joules_per_sample"] * samples - row["energy_j"]) < 1e-9 * row["energy_j"] + 1e-12
        assert abs(row["mean_power_w"] * row["energy_window_s"] - row["energy_j"]) < 1e-9 * row["energy_j"]
    assert abs(sum(row["phases_s"].values()) - row["wall_s"]) < 1e-6


def test_cuda_oom_is_a_status() -> None:
    planted = str(Path(__file__).with_name("planted.py"))
    row = run_cell(_spec("fp32", workload=None, model=f"{planted}:gpu_hog", input_shape="3,4,4", num_classes=5,
                         batch_size=4))
    assert row["status"] == "oom" and "out of memory" in row["reason"].lower(), row["reason"]
