from __future__ import annotations

import math
from pathlib import Path

import pytest

from ampbench.store import DERIVED_KEYS, ROW_KEYS, Store

EVIL = "<script>alert(1)</script>"


def _row(run: str, workload: str, precision: str, sps: float | None, device_name: str = "NVIDIA A100-SXM4-80GB",
         status: str = "ok", reason: str = "", **kw: object) -> dict[str, object]:
    r = {k: None for k in ROW_KEYS if k not in DERIVED_KEYS}
    r.update(run_id=run, cell_key=f"{workload}-{precision}-{device_name}", workload=workload, preset="small",
             precision=precision, batch_size=64, device="cuda:0", device_name=device_name, status=status, reason=reason,
             created_at="2026-11-21T00:00:00+00:00", samples_per_s=sps, measures=["throughput", "memory", "converge"],
             step_ms_p50=None if sps is None else 64_000 / sps, step_ms_p90=None if sps is None else 66_000 / sps,
             # (a measured cell's noise, as 20 timed steps measure it; under 0.5 %: no "±" in the tables)
             steps=20, samples_per_s_noise=None if sps is None else 0.002,
             env={"device": "cuda:0", "capability": "8.0", "torch": "2.11", "tf32_matmul": False, "tf32_cudnn": False,
                  "hostname": "gpu-box", "driver": "550.54", "cuda": "12.4", "cudnn": 90100})
    r.update(kw)
    return r


def _converge(scale: float, seeds: int = 3, steps: int = 50, fp16: bool = False) -> dict[str, object]:
    losses = [[scale * (2.3 * math.exp(-i / 15) + 0.1 + 0.01 * s) for i in range(steps)] for s in range(seeds)]
    return {"steps": steps, "seeds": list(range(seeds)), "curve_steps": list(range(1, steps + 1)), "losses": losses,
            "loss_scales": [[65536.0 / (2 if i > 20 else 1) if fp16 else 1.0 for i in range(steps)] for _ in range(seeds)],
            "final_losses": [x[-1] for x in losses], "test_losses": [x[-1] for x in losses],
            "metrics": [0.9 + 0.001 * s for s in range(seeds)], "skipped_steps": [1 if fp16 else 0] * seeds,
            "diverged": [False] * seeds, "reasons": [""] * seeds}


@pytest.fixture
def report_store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "r.db")
    run = s.create_run({"identity": {}}, device="cuda:0", device_name="NVIDIA A100-SXM4-80GB", hostname="gpu-box",
                       label="nightly <b>").run_id
    mem = dict(weights_bytes=100 * 2**20, grads_bytes=100 * 2**20, optimizer_bytes=200 * 2**20)
    rows = [
        _row(run, "resnext", "fp32", 1000.0, peak_allocated_bytes=4 * 2**30, peak_reserved_bytes=5 * 2**30,
             activation_bytes=3 * 2**30, max_batch=590, converge=_converge(1.0), final_loss=0.12, metric=0.9,
             inference={"1": {"p50_ms": 2.0, "p90_ms": 2.2, "p99_ms": 2.5}, "64": {"p50_ms": 9.0, "p90_ms": 9.5,
                                                                                    "p99_ms": 10.0}},
             model_bytes_fp32=400 * 2**20, model_bytes_half=200 * 2**20, achieved_tflops=50.0, mfu=0.16, **mem),
        _row(run, "resnext", "amp-fp16", 2900.0, peak_allocated_bytes=int(2.2 * 2**30), peak_reserved_bytes=3 * 2**30,
             activation_bytes=int(1.5 * 2**30), max_batch=1120, converge=_converge(1.0, fp16=True), skipped_steps=1,
             inference={"1": {"p50_ms": 1.5, "p90_ms": 1.6, "p99_ms": 1.9}, "64": {"p50_ms": 4.0, "p90_ms": 4.2,
                                                                                    "p99_ms": 4.6}}, **mem),
        _row(run, "resnext", "pure-fp16", None, status="diverged",
             reason="training loss is nan after 25 steps; <img src=x onerror=alert(2)>"),
        _row(run, "resnext", "tf32", None, status="unsupported", reason="TF32 needs compute capability >= 8.0"),
        _row(run, EVIL, "fp32", 500.0, peak_allocated_bytes=2**30, measures=["throughput"]),
        _row(run, EVIL, "amp-bf16", 600.0, peak_allocated_bytes=2**29, measures=["throughput"]),
    ]
    for r in rows:
        s.add(r)
    other = s.create_run({"identity": {}}, device="cuda:0", device_name="Tesla V100-SXM2-16GB", hostname="old").run_id
    for r in (_row(other, "resnext", "fp32", 400.0, device_name="Tesla V100-SXM2-16GB"),
              _row(other, "resnext", "amp-fp16", 1100.0, device_name="Tesla V100-SXM2-16GB")):
        s.add(r)
    s.latest_run_id = run  # type: ignore[attr-defined]
    return s
