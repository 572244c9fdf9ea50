"""Pricing from a GPU's measured kernels: on the GPU that measured them a kernel at a measured shape costs its
measured time (oracle: the table itself), between shapes the model interpolates at the table's level, another card
of the same architecture is scaled by the model, other architectures are not priced from it; a store's own table
wins; the interpolation's error is measured by leaving each case out."""

from __future__ import annotations

import math

import pytest

from ampbench.measure.gpus import lookup
from ampbench.predict import kernels
from ampbench.predict.cost import price
from ampbench.predict.kernels import calibration
from ampbench.predict.measured_kernels import KernelTable, shipped, stored_tables, table_for
from ampbench.predict.trace import Op, Trace


def _table(rows: list[dict], device: str = "NVIDIA H200") -> dict:
    return {"device_name": device, "created_at": "2026-11-27", "env": {"torch": "x", "cudnn": 1}, "kernels": rows}


def _gemm_row(m: int, n: int, k: int, dtype: str, us: float) -> dict:
    return {"kind": "gemm", "op": "mm", "dtype": dtype, "layout": "", "us": us,
            "shape": {"batch": 1, "m": m, "n": n, "k": k}, "flops": 2.0 * m * n * k, "bytes": 0.0}


def _op(m: int, n: int, k: int, dtype: str = "bf16") -> Op:
    return Op("aten.mm", "forward", 2 * m * n * k, 2 * (m * k + k * n), 2 * m * n, dtype, gemm=(1, m, n, k))


def _trace(ops: list[Op]) -> Trace:
    return Trace(ops, 8, 0, 0, 0, 0, 0, 0, "SGD", False)


def test_a_kernel_at_a_measured_shape_costs_its_measured_time_on_that_gpu() -> None:
    h200 = lookup("h200")
    rows = [_gemm_row(4096, 4096, 4096, "bf16", 250.0), _gemm_row(1024, 1024, 1024, "bf16", 9.0)]
    table = KernelTable.of(_table(rows), h200)
    cost = price(_trace([_op(4096, 4096, 4096)]), h200, tf32=False, kernels=table)
    assert cost.gpu_s == pytest.approx(250e-6, rel=1e-9) and cost.measured_share == 1.0
    assert cost.kernels.startswith("NVIDIA H200's measured kernels (2026-11-27")
    model = price(_trace([_op(4096, 4096, 4096)]), h200, tf32=False, kernels=None)
    assert model.kernels == "" and model.gpu_s == pytest.approx(
        kernels.gemm_s(h200, calibration(), 1, 4096, 4096, 4096, "bf16", 2))


def test_between_measured_shapes_the_ratio_is_the_neighbours_and_another_card_scales_by_the_model() -> None:
    h200, h100 = lookup("h200"), lookup("h100-sxm")
    rows = [_gemm_row(4096, 4096, 4096, "bf16", 250.0), _gemm_row(1024, 1024, 1024, "bf16", 9.0)]
    table = KernelTable.of(_table(rows), h200)
    r_big, r_small = (p.ratio for p in table.points[("gemm", "bf16")])
    mid = table.ratio(("gemm", "bf16"), tuple(math.log2(2048) for _ in range(3)) + (0.0,))
    assert min(r_big, r_small) <= mid <= max(r_big, r_small)  # (a weighted geometric mean of the two)
    on_h100 = price(_trace([_op(4096, 4096, 4096)]), h100, tf32=False, kernels=table).gpu_s
    assert on_h100 == pytest.approx(r_big * kernels.gemm_s(h100, calibration(), 1, 4096, 4096, 4096, "bf16", 2))
    assert table.ratio_for(_op(64, 64, 64, "fp16"), "fp16") is None  # (no fp16 kernel measured: the model's time)


def test_tables_price_their_architecture_only_and_a_stores_own_table_comes_first() -> None:
    assert "h200" in shipped()
    assert table_for(lookup("h100-sxm")) is not None and table_for(lookup("a100-80gb")) is None
    mine = _table([_gemm_row(4096, 4096, 4096, "bf16", 123.0)], device="NVIDIA H100 80GB HBM3")
    with stored_tables([mine]):
        t = table_for(lookup("h100-sxm"))
        assert t is not None and t.gpu.key == "h100-sxm" and len(t.points[("gemm", "bf16")]) == 1
    assert table_for(lookup("h100-sxm")).gpu.key == "h200"  # type: ignore[union-attr]  (the shipped one again)


def test_the_shipped_h200_table_interpolates_gemms_within_10_percent_left_out() -> None:
    """Leave-one-out over the H200's own table: each GEMM priced from its neighbours alone (oracle: its measured
    time). Convolutions, with fewer cases per family, interpolate worse (stated in docs/predict.md)."""
    table = table_for(lookup("h200"))
    assert table is not None
    errors = table.leave_one_out()
    assert errors["gemm"] <= 0.10 and set(errors) >= {"gemm", "conv", "attention", "optimizer"}


def test_a_predicted_row_says_what_its_kernels_were_priced_from() -> None:
    from ampbench.predict.run import predict_target
    from ampbench.workloads import create_workload
    from ampbench.workloads.factory import build_meta

    rows = predict_target("wide-mlp", lambda: build_meta(lambda: create_workload("wide-mlp", "tiny")), ["amp-bf16"],
                          lookup("h200"), 16)
    assert rows[0]["predicted_kernels"].startswith("measured: NVIDIA H200's measured kernels")
    rows = predict_target("wide-mlp", lambda: build_meta(lambda: create_workload("wide-mlp", "tiny")), ["amp-bf16"],
                          lookup("a100-80gb"), 16)
    assert rows[0]["predicted_kernels"].startswith("model:")
