"""Pricing from a GPU's measured kernels: on the GPU that measured them a kernel at a measured shape costs its
measured time (oracle: the table itself), between shapes the model interpolates at the table's level, another card
of the same architecture is scaled by the model, other architectures are not priced from it; a store's own table
wins; the interpolation's error is measured by leaving each case out."""

from __future__ import annotations

import csv
import functools
import json
import math
from typing import NamedTuple

import pytest
import torch
import torch.nn.functional as F
from torch import nn

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


class _Row(NamedTuple):
    kind: str
    op: str
    dtype: str
    layout: str
    shape: dict
    us: float


@functools.cache
def _shipped_rows() -> tuple[_Row, ...]:
    """The shipped H200 table's timed rows, read from its CSV as text (the oracle: not the product's reader)."""
    lines = (line for line in shipped()["h200"].read_text().splitlines() if not line.startswith("#"))
    return tuple(_Row(r["kind"], r["op"], r["dtype"], r["layout"], json.loads(r["shape"]), float(r["us"]))
                 for r in csv.DictReader(lines) if r["us"])


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
    assert table_for(lookup("h100-sxm")) is not None and table_for(lookup("rtx-3090")) is None  # (no GA10x table)
    mine = _table([_gemm_row(4096, 4096, 4096, "bf16", 123.0)], device="NVIDIA H100 80GB HBM3")
    with stored_tables([mine]):
        t = table_for(lookup("h100-sxm"))
        assert t is not None and t.gpu.key == "h100-sxm" and len(t.points[("gemm", "bf16")]) == 1
    assert table_for(lookup("h100-sxm")).gpu.key == "h200"  # type: ignore[union-attr]  (the shipped one again)


def test_a_card_only_table_prices_its_own_card_alone() -> None:
    """NeuSight's published kernels ship as tables of their cards alone (``scope: card``): the L4's prices the L4, not
    the RTX 4090 (Ada too, not power-capped); the A100 80GB PCIe's prices the A100 SXM of the same peaks (one card,
    :meth:`~ampbench.measure.gpus.Gpu.same_card`), the V100 PCIe's not the V100 SXM2 (other clocks). A stored table of
    that scope is held to it too; one without it prices its whole architecture."""
    assert {"l4", "t4", "v100-32gb-pcie", "a100-80gb-pcie", "a100-40gb-pcie", "p100-16gb", "p4"} <= set(shipped())
    l4 = table_for(lookup("l4"))
    assert l4 is not None and l4.gpu.key == "l4" and "NeuSight published them" in l4.source
    assert table_for(lookup("rtx-4090")) is None and table_for(lookup("v100-16gb")) is None
    assert table_for(lookup("a100-80gb")).gpu.key == "a100-80gb-pcie"  # type: ignore[union-attr]
    rows = [_gemm_row(4096, 4096, 4096, "fp32", 9000.0)]
    scoped = {**_table(rows, device="NVIDIA GeForce RTX 4080"), "env": {"scope": "card"}}
    with stored_tables([scoped]):
        assert table_for(lookup("rtx-4090")) is None and table_for(lookup("rtx-4080")) is not None
    with stored_tables([_table(rows, device="NVIDIA GeForce RTX 4080")]):
        assert table_for(lookup("rtx-4090")).gpu.key == "rtx-4080"  # type: ignore[union-attr]


def test_the_shipped_h200_table_interpolates_gemms_within_10_percent_left_out() -> None:
    """Leave-one-out over the H200's own table: each GEMM priced from its neighbours alone (oracle: its measured
    time). Convolutions, with fewer cases per family, interpolate worse (stated in docs/predict.md)."""
    table = table_for(lookup("h200"))
    assert table is not None
    errors = table.leave_one_out()
    assert errors["gemm"] <= 0.10 and set(errors) >= {"gemm", "conv", "attention", "optimizer"}


def test_a_predicted_row_says_what_its_kernels_were_priced_from() -> None:
    from ampbench.predict.rows import Machine, Question, predict_target
    from ampbench.workloads import create_workload
    from ampbench.workloads.factory import build_meta

    rows = predict_target("wide-mlp", lambda: build_meta(lambda: create_workload("wide-mlp", "tiny")),
                          Question(("amp-bf16",), 16), Machine(lookup("h200")))
    assert rows[0]["predicted_kernels"].startswith("measured: NVIDIA H200's measured kernels")
    rows = predict_target("wide-mlp", lambda: build_meta(lambda: create_workload("wide-mlp", "tiny")),
                          Question(("amp-bf16",), 16), Machine(lookup("rtx-3090")))
    assert rows[0]["predicted_kernels"].startswith("model:")
    rows = predict_target("wide-mlp", lambda: build_meta(lambda: create_workload("wide-mlp", "tiny")),
                          Question(("fp32",), 16), Machine(lookup("a100-80gb")))
    assert rows[0]["predicted_kernels"].startswith("measured: NVIDIA A100 80GB PCIe's kernels as NeuSight published")


def _powered(rows: list[dict], power: dict[str, float]) -> dict:
    return {**_table(rows), "power_basis": "replay", "power": {k: {"mean_power_w": w} for k, w in power.items()}}


def _add(n: int) -> Op:
    return Op("aten.add", "forward", n, 4 * n, 2 * n, "bf16")


def test_a_steps_energy_is_each_kernel_at_its_kinds_measured_power_and_the_gaps_at_idle() -> None:
    """Oracle: each op priced alone (its GPU time), times its kind's reading, plus the step's GPU-idle time (the host
    issuing) at the idle reading."""
    h200 = lookup("h200")
    rows = [_gemm_row(4096, 4096, 4096, "bf16", 250.0)]
    table = KernelTable.of(_powered(rows, {"gemm/bf16": 650.0, "elementwise/bf16": 420.0, "idle": 110.0}), h200)
    ops = [_op(4096, 4096, 4096), *[_add(1 << 12) for _ in range(40)]]  # (tiny adds: the host sets their pace)
    cost = price(_trace(ops), h200, tf32=False, kernels=table)
    gemm_s = price(_trace(ops[:1]), h200, tf32=False, kernels=table).gpu_s
    adds_s = cost.gpu_s - gemm_s
    assert cost.step_s > cost.gpu_s  # (there is idle time to price)
    assert cost.energy_j == pytest.approx(gemm_s * 650.0 + adds_s * 420.0 + (cost.step_s - cost.gpu_s) * 110.0)
    assert cost.powered_share == pytest.approx(1.0) and cost.power_w == pytest.approx(cost.energy_j / cost.step_s)
    # a kind the sweep did not read: the highest reading (an upper bound), and the share says so
    partial = KernelTable.of(_powered(rows, {"gemm/bf16": 650.0, "idle": 110.0}), h200)
    cost2 = price(_trace(ops), h200, tf32=False, kernels=partial)
    assert cost2.energy_j == pytest.approx(cost.gpu_s * 650.0 + (cost.step_s - cost.gpu_s) * 110.0)
    assert cost2.powered_share == pytest.approx(gemm_s / cost.gpu_s)


def test_another_card_of_the_architecture_draws_in_proportion_to_its_tdp_and_a_table_without_power_prices_none() -> None:
    h200, pcie = lookup("h200"), lookup("h100-pcie")  # 700 W and 350 W boards
    table = KernelTable.of(_powered([_gemm_row(4096, 4096, 4096, "bf16", 250.0)],
                                    {"gemm/bf16": 650.0, "idle": 110.0}), h200)
    assert table.power_for(_op(4096, 4096, 4096), "bf16", pcie) == pytest.approx(325.0)
    assert table.idle_w(pcie) == pytest.approx(55.0) and table.idle_w(h200) == 110.0
    hot = KernelTable.of(_powered([_gemm_row(4096, 4096, 4096, "bf16", 250.0)], {"gemm/bf16": 900.0, "idle": 1.0}), h200)
    assert hot.power_for(_op(4096, 4096, 4096), "bf16", pcie) == 350.0  # (never above the board's rating)
    plain = KernelTable.of(_table([_gemm_row(4096, 4096, 4096, "bf16", 250.0)]), h200)
    assert price(_trace([_op(4096, 4096, 4096)]), h200, tf32=False, kernels=plain).energy_j is None
    old = KernelTable.of({**_table([]), "power": {"gemm": {"mean_power_w": 575.0}}}, h200)  # (a class's window)
    assert old.power_w == {}


def test_a_predicted_rows_energy_says_what_it_was_priced_at() -> None:
    """Per sample: the step's energy over its samples -- at measured power where the architecture's table read it
    (the row's mean power times the step, over the batch), at TDP otherwise (an architecture without a table: the
    L4's Ada)."""
    from ampbench.predict.rows import TDP_BASIS, Machine, Question, predict_target
    from ampbench.workloads import create_workload
    from ampbench.workloads.factory import build_meta

    def rows_on(gpu: str) -> dict:
        (row,) = predict_target("wide-mlp", lambda: build_meta(lambda: create_workload("wide-mlp", "tiny")),
                                Question(("amp-bf16",), 16), Machine(lookup(gpu)))
        return row

    at_tdp = rows_on("l4")
    assert at_tdp["predicted_energy_basis"] == TDP_BASIS and at_tdp["predicted_power_w"] == lookup("l4").tdp_w
    assert at_tdp["predicted_joules_per_sample"] == pytest.approx(
        lookup("l4").tdp_w * at_tdp["predicted_step_ms"] / 1e3 / 16)
    shipped = rows_on("h200")  # (the shipped H200 table read power over replays: its idle 124 W .. its kinds' 713 W)
    assert shipped["predicted_energy_basis"].startswith("measured power: NVIDIA H200's measured kernels")
    assert 124.0 <= shipped["predicted_power_w"] <= 713.0
    mine = _powered([_gemm_row(4096, 4096, 4096, "bf16", 250.0)],
                    {"gemm/bf16": 600.0, "elementwise/bf16": 400.0, "optimizer/fp32": 450.0, "idle": 100.0})
    mine["device_name"] = "NVIDIA H200"
    with stored_tables([mine]):
        row = rows_on("h200")
    assert row["predicted_energy_basis"].startswith("measured power: NVIDIA H200's measured kernels")
    assert 100.0 <= row["predicted_power_w"] <= 600.0
    assert row["predicted_step_energy_j"] == pytest.approx(row["predicted_power_w"] * row["predicted_step_ms"] / 1e3)
    assert row["predicted_joules_per_sample"] == pytest.approx(row["predicted_step_energy_j"] / 16)


def _issued(kind: str, op: str, host_us: float, us: float = 5.0) -> dict:
    row = {"kind": kind, "op": op, "dtype": "bf16", "layout": "", "us": us, "shape": {}, "flops": 0.0,
           "bytes": 1024.0, "host_us": host_us}
    return _gemm_row(64, 64, 64, "bf16", us) | {"host_us": host_us} if kind == "gemm" else row


def test_a_kinds_issue_beyond_the_per_op_mix_is_added_to_the_host_where_the_table_timed_it() -> None:
    """Oracle: the kinds' medians by hand. The per-op figure was measured on a GEMM + elementwise mix, so an op of a
    kind adds its kind's issue time less the mean of those two; the forward+backward cases (autograd around them) are
    left out of the medians; the optimizer's step is priced apart; a table without issue times adds nothing."""
    h200 = lookup("h200")
    rows = [_issued("gemm", "mm", 10.0), _issued("gemm", "mm", 14.0), _issued("elementwise", "add_fwd", 6.0),
            _issued("softmax", "softmax_fwd", 40.0), _issued("softmax", "softmax_fwd", 44.0),
            _issued("softmax", "softmax_fwd_bwd", 500.0)]
    table = KernelTable.of(_table(rows), h200)
    assert table.host_us == {"gemm": 12.0, "elementwise": 6.0, "softmax": 42.0}
    soft = Op("aten._softmax", "forward", 0, 4096, 4096, "bf16")
    assert table.host_extra_us(soft, "bf16") == pytest.approx(42.0 - (12.0 + 6.0) / 2)
    assert table.host_extra_us(_add(8), "bf16") == pytest.approx(6.0 - 9.0)  # (cheaper than the mix)
    assert table.host_extra_us(Op("aten.add", "optimizer", 0, 8, 8, "fp32"), "fp32") == 0.0
    plain = KernelTable.of(_table([_gemm_row(64, 64, 64, "bf16", 5.0)]), h200)
    assert plain.host_us == {} and plain.host_extra_us(soft, "bf16") == 0.0
    ops = [Op("aten._softmax", "forward", 0, 4096, 4096, "bf16") for _ in range(50)]  # (host-bound: tiny kernels)
    with_issue = price(_trace(ops), h200, tf32=False, kernels=table)
    without = price(_trace(ops), h200, tf32=False, kernels=plain)
    assert with_issue.host_s - without.host_s == pytest.approx(50 * 33.0e-6)
    assert with_issue.step_s > without.step_s


class _Attention(nn.Module):
    """One scaled-dot-product attention over ``heads`` heads of ``dim``, causal or not, between two Linear layers."""

    def __init__(self, heads: int, dim: int, causal: bool) -> None:
        super().__init__()
        self.heads, self.dim, self.causal = heads, dim, causal
        self.qkv, self.out = nn.Linear(heads * dim, 3 * heads * dim), nn.Linear(heads * dim, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, self.dim).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.out(y.transpose(1, 2).reshape(b, s, -1).mean(1))


def _attention_rows(shape: dict, dtype: str, us: dict[str, float]) -> list[dict]:
    return [{"kind": "attention", "op": op, "dtype": dtype, "layout": "", "us": t, "shape": shape, "flops": 0.0,
             "bytes": 0.0} for op, t in us.items()]


@pytest.mark.parametrize("precision", ["fp32", "amp-bf16"])
def test_an_attention_kernel_at_a_measured_shape_costs_its_measured_time(precision: str) -> None:
    """A traced attention at a shape the table measured costs what the table measured there: the forward its ``_fwd``
    row, the backward its ``_fwd_bwd`` row less that, causal or not (oracle: the rows; each kind a different time, so
    a causal op priced from the full kernel's row, or a backward from a forward's, shows). It did not: the causal
    half was left out twice (a causal kernel priced at ~2x its measured time) and every backward was modelled at 2.5x
    the forward's FLOPs where the op is priced at its traced 2x (0.8x its measured time)."""
    from ampbench.predict.trace import trace_step
    from ampbench.workloads.factory import build_meta
    from tests.predict.test_cuda_dispatch import Workload_of

    h200, (b, heads, s, d) = lookup("h200"), (4, 8, 512, 64)
    dtype = "fp32" if precision == "fp32" else "bf16"
    shape = {"batch": b, "heads": heads, "seq": s, "dim": d}
    us = {"sdpa_causal_fwd": 700.0, "sdpa_causal_fwd_bwd": 2600.0, "sdpa_fwd": 1100.0, "sdpa_fwd_bwd": 3900.0}
    table = KernelTable.of(_table(_attention_rows(shape, dtype, us)), h200)
    for causal, name in ((True, "sdpa_causal"), (False, "sdpa")):
        model = _Attention(heads, d, causal)
        trace = trace_step(build_meta(lambda m=model: Workload_of(m, (torch.zeros(b, s, heads * d),))), precision, b)
        ops = {o.name.rsplit(".", 1)[-1]: o for o in trace.ops if "fused_attention" in o.name}
        assert set(ops) == {"fused_attention", "fused_attention_backward"} and ops["fused_attention"].causal is causal
        fwd = price(_trace([ops["fused_attention"]]), h200, tf32=False, kernels=table).gpu_s
        bwd = price(_trace([ops["fused_attention_backward"]]), h200, tf32=False, kernels=table).gpu_s
        assert fwd == pytest.approx(us[f"{name}_fwd"] * 1e-6, rel=1e-9), name
        assert bwd == pytest.approx((us[f"{name}_fwd_bwd"] - us[f"{name}_fwd"]) * 1e-6, rel=1e-9), name


def test_the_shipped_h200_table_prices_gpt2s_attention_at_what_it_measured_there() -> None:
    """GPT-2 at its paper preset (batch 16, 1,024 tokens, 12 heads of 64: the shape the H200's sweep timed, causal):
    its attention priced from the shipped table is the table's own row (oracle: the CSV, read here as text)."""

    from ampbench.predict.trace import trace_step
    from ampbench.workloads.factory import build_meta

    pytest.importorskip("transformers")
    from ampbench.workloads import create_workload

    h200 = lookup("h200")
    rows = {(r.op, r.dtype): r.us for r in _shipped_rows()
            if r.kind == "attention" and r.shape == {"batch": 16, "dim": 64, "heads": 12, "seq": 1024}}
    trace = trace_step(build_meta(lambda: create_workload("gpt2", "paper")), "amp-bf16", 16)
    fwd = next(o for o in trace.ops if o.name.endswith("fused_attention"))
    bwd = next(o for o in trace.ops if o.name.endswith("fused_attention_backward"))
    assert fwd.causal and bwd.causal
    assert price(_trace([fwd]), h200, tf32=False).gpu_s == pytest.approx(rows["sdpa_causal_fwd", "bf16"] * 1e-6)
    assert price(_trace([bwd]), h200, tf32=False).gpu_s == pytest.approx(
        (rows["sdpa_causal_fwd_bwd", "bf16"] - rows["sdpa_causal_fwd", "bf16"]) * 1e-6)


def test_a_batch_norm_is_priced_at_its_own_layouts_measured_kernel() -> None:
    """The H200 ran NCHW half batch norms 1.9-2.5x slower than channels-last ones of the same shape; both were one key
    at one position, so every batch norm was priced at a mean of the two (a traced one sits a few bytes off the case:
    its weights and statistics). Oracle: synthetic rows of one shape, each
    layout a different time, and a traced ``nn.BatchNorm2d`` on NCHW and on channels-last input."""
    from ampbench.predict.trace import trace_step
    from ampbench.workloads.factory import build_meta
    from tests.predict.test_cuda_dispatch import Workload_of

    h200, (b, c, size) = lookup("h200"), (8, 64, 32)
    us = {("nhwc", "batch_norm_fwd"): 50.0, ("nhwc", "batch_norm_fwd_bwd"): 140.0,
          ("nchw", "batch_norm_fwd"): 90.0, ("nchw", "batch_norm_fwd_bwd"): 300.0}
    rows = [{"kind": "norm", "op": op, "dtype": "fp32", "layout": layout, "us": t,
             "shape": {"batch": b, "channels": c, "size": size}, "flops": 0.0, "bytes": 0.0}
            for (layout, op), t in us.items()]
    table = KernelTable.of(_table(rows), h200)
    for channels_last, layout in ((False, "nchw"), (True, "nhwc")):
        model = nn.Sequential(nn.BatchNorm2d(c), nn.Flatten(), nn.Linear(c * size * size, 10))
        trace = trace_step(build_meta(lambda m=model: Workload_of(m, (torch.zeros(b, c, size, size),))), "fp32", b,
                           channels_last=channels_last)
        norms = [o for o in trace.ops if "batch_norm" in o.name]
        assert {o.phase for o in norms} == {"forward", "backward"} and all(o.nchw is not channels_last for o in norms)
        for o in norms:
            # (the case's modelled bytes are the norm's elements read and written, the traced op's a few more: its
            # weights and statistics -- within 1 %)
            got = price(_trace([o]), h200, tf32=False, kernels=table).gpu_s
            fwd = us[layout, "batch_norm_fwd"]
            want = fwd if o.phase == "forward" else us[layout, "batch_norm_fwd_bwd"] - fwd
            assert got == pytest.approx(want * 1e-6, rel=0.01), (layout, o.name)


def _elementwise_row(op: str, dtype: str, elements: int, us: float) -> dict:
    return {"kind": "elementwise", "op": f"{op}_fwd", "dtype": dtype, "layout": "", "us": us,
            "shape": {"elements": elements}, "flops": 0.0, "bytes": 6.0 * elements}  # (2-byte add, either cast: 6 n)


def test_a_cast_is_priced_at_the_measured_cast_of_its_direction_and_only_that() -> None:
    """The H200 cast a half tensor to fp32 at half the rate of an add of the same bytes; a cast was priced between
    the two. Oracle: synthetic rows of one size -- an add, a widening cast, each its own time -- and the casts autocast
    traces in an amp-bf16 step (a Linear's weight narrowed to bf16, its output widened for a LayerNorm): the widening
    one at exactly the size costs the cast row's time; a narrowing one, with no narrowing case in the table, the add's
    ratio (what every elementwise op gets); with a narrowing case, that case's."""
    from ampbench.predict.measured_kernels import cast_direction
    from ampbench.predict.trace import trace_step
    from ampbench.workloads.factory import build_meta
    from tests.predict.test_cuda_dispatch import Workload_of

    h200, n = lookup("h200"), 1 << 20
    model = nn.Sequential(nn.Linear(1024, n // 64), nn.LayerNorm(n // 64), nn.Linear(n // 64, 10))  # (norm: in fp32)
    trace = trace_step(build_meta(lambda: Workload_of(model, (torch.zeros(64, 1024),))), "amp-bf16", 64)
    casts = [o for o in trace.ops if cast_direction(o) is not None]
    assert {cast_direction(o) for o in casts} == {"widen", "narrow"}
    assert all(o.name == "aten._to_copy" and o.bytes_written == {"widen": 2, "narrow": 0.5}[cast_direction(o)]
               * o.bytes_read for o in casts)
    widen = next(o for o in casts if cast_direction(o) == "widen" and o.bytes_read + o.bytes_written == 6 * n)
    narrow = max((o for o in casts if cast_direction(o) == "narrow"), key=lambda o: o.bytes_read)
    adds = [_elementwise_row("add", "bf16", n, 40.0)]
    table = KernelTable.of(_table([*adds, _elementwise_row("to_fp32", "bf16", n, 90.0)]), h200)
    assert price(_trace([widen]), h200, tf32=False, kernels=table).gpu_s == pytest.approx(90e-6, rel=1e-9)
    add_only = KernelTable.of(_table(adds), h200)
    assert price(_trace([narrow]), h200, tf32=False, kernels=table).gpu_s == pytest.approx(
        price(_trace([narrow]), h200, tf32=False, kernels=add_only).gpu_s, rel=1e-9)
    with_narrow = KernelTable.of(_table([*adds, _elementwise_row("to_half", "bf16", n, 70.0)]), h200)
    assert with_narrow.ratio_for(narrow, "bf16") == pytest.approx(with_narrow.points[("elementwise", "narrow")][0].ratio)


class _Conv(nn.Module):
    """A 3x3 convolution (ResNet-50's 64 -> 64 at 56 pixels) after a 1x1, its output averaged over the image: the
    gradient reaching its backward arrives NCHW whatever the model's layout."""

    def __init__(self) -> None:
        super().__init__()
        self.pre, self.conv = nn.Conv2d(64, 64, 1), nn.Conv2d(64, 64, 3, padding=1, bias=False)
        self.out = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.conv(self.pre(x)).mean((2, 3)))


@pytest.mark.parametrize("channels_last", [True, False])
@pytest.mark.parametrize("precision", ["fp32", "amp-fp16", "amp-bf16"])
def test_a_convolution_is_priced_at_the_shipped_tables_kernels_of_its_layout(precision: str,
                                                                            channels_last: bool) -> None:
    """On the H200, at a shape its sweep timed: the forward costs the ``conv_fwd`` row of its layout, the backward the
    ``conv_dgrad`` and ``conv_wgrad`` rows (oracle: the CSV, read here as text). The backward of a channels-last
    model's convolution had been priced NCHW -- 2.1x its measured time in fp16 -- where its output's gradient arrived
    NCHW (cuDNN takes the layout from the input and the weight)."""

    from ampbench.predict.trace import trace_step
    from ampbench.workloads.factory import build_meta
    from tests.predict.test_cuda_dispatch import Workload_of

    h200, dtype = lookup("h200"), {"fp32": "fp32", "amp-fp16": "fp16", "amp-bf16": "bf16"}[precision]
    layout = "nhwc" if channels_last else "nchw"
    shape = {"batch": 64, "cin": 64, "cout": 64, "groups": 1, "kernel": 3, "size": 56, "stride": 1}
    us = {r.op: r.us * 1e-6 for r in _shipped_rows()
          if r.kind == "conv" and r.dtype == dtype and r.layout == layout and r.shape == shape}
    trace = trace_step(build_meta(lambda: Workload_of(_Conv(), (torch.zeros(64, 64, 56, 56),))), precision, 64,
                       channels_last=channels_last)
    fwd, bwd = (next(o for o in trace.ops if o.name == name and o.conv is not None and o.conv.r == 3)
                for name in ("aten.convolution", "aten.convolution_backward"))
    assert fwd.nchw is bwd.nchw is not channels_last and bwd.products == 2
    assert price(_trace([fwd]), h200, tf32=False).gpu_s == pytest.approx(us["conv_fwd"])
    assert price(_trace([bwd]), h200, tf32=False).gpu_s == pytest.approx(us["conv_dgrad"] + us["conv_wgrad"])


class _Then(nn.Module):
    """``layer`` between a producer (so its input needs a gradient, as the sweep's cases do) and a small head."""

    def __init__(self, before: nn.Module, layer: nn.Module, head: nn.Module) -> None:
        super().__init__()
        self.before, self.layer, self.head = before, layer, head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.layer(self.before(x))
        y = y[0] if isinstance(y, tuple) else y  # (an LSTM's output sequence)
        return self.head(y.mean((2, 3)) if y.dim() == 4 else y.mean(1) if y.dim() == 3 else y)


class _Softmax(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, -1)


_KINDS = {  # kind -> (the sweep's op, its shape, a model around one such layer, its input, the traced op's name)
    "layer_norm": ("layer_norm", {"rows": 16384, "width": 768}, lambda: _Then(
        nn.Linear(768, 768), nn.LayerNorm(768, bias=False), nn.Linear(768, 10)), (16384, 768), "native_layer_norm"),
    "softmax": ("softmax", {"rows": 16384, "width": 768}, lambda: _Then(nn.Linear(768, 768), _Softmax(),
                                                                        nn.Linear(768, 10)), (16384, 768), "_softmax"),
    "group_norm": ("group_norm", {"batch": 16, "channels": 256, "groups": 32, "size": 64}, lambda: _Then(
        nn.Conv2d(256, 256, 1), nn.GroupNorm(32, 256, affine=True), nn.Linear(256, 10)), (16, 256, 64, 64),
        "native_group_norm"),
    "lstm": ("lstm", {"batch": 128, "hidden": 2048, "inputs": 1024, "seq": 20}, lambda: _Then(
        nn.Linear(1024, 1024), nn.LSTM(1024, 2048, batch_first=True), nn.Linear(2048, 10)), (128, 20, 1024),
        "rnn_layer"),
}


@pytest.mark.parametrize("precision", ["fp32", "pure-bf16"])
@pytest.mark.parametrize("kind", list(_KINDS))
def test_every_memory_bound_and_recurrent_kind_at_a_measured_shape_costs_the_tables_time(kind: str,
                                                                                         precision: str) -> None:
    """Each kind the H200's sweep timed, traced as a model runs it at the very shape the sweep timed, priced from the
    shipped table: the forward its ``_fwd`` row, the backward its ``_fwd_bwd`` row less that (oracle: the CSV as text;
    within 0.5 %: a traced norm also moves its weights and statistics, which the case's modelled bytes leave out). The
    attention, convolution, batch norm and cast tests above hold the kinds that were wrong."""

    from ampbench.predict.trace import trace_step
    from ampbench.workloads.factory import build_meta
    from tests.predict.test_cuda_dispatch import Workload_of

    op, shape, make, size, traced = _KINDS[kind]
    dtype = "fp32" if precision == "fp32" else "bf16"
    us = {r.op: r.us * 1e-6 for r in _shipped_rows()
          if r.op.startswith(op + "_fwd") and r.dtype == dtype and r.shape == shape}
    trace = trace_step(build_meta(lambda: Workload_of(make(), (torch.zeros(size),))), precision, size[0])
    ops = [o for o in trace.ops if o.name.rsplit(".", 1)[-1] in (traced, f"{traced}_backward", "_softmax_backward_data"
                                                              if traced == "_softmax" else "")]
    assert {o.phase for o in ops} == {"forward", "backward"}, [o.name for o in ops]
    h200 = lookup("h200")
    for o in ops:
        want = us[f"{op}_fwd"] if o.phase == "forward" else us[f"{op}_fwd_bwd"] - us[f"{op}_fwd"]
        assert price(_trace([o]), h200, tf32=False).gpu_s == pytest.approx(want, rel=0.005), (o.name, o.phase)


def test_a_linear_layers_gemms_carry_the_layouts_they_run() -> None:
    """``nn.Linear``: its forward ``x @ W.t()`` (nt), its data gradient ``grad @ W`` (nn), its weight gradient
    ``grad.t() @ x`` (tn) -- in fp32 and under autocast, whose cast weight is transposed as a view (oracle: the
    formulas, by shape: (m, n, k) of each)."""
    from ampbench.predict.trace import trace_step
    from ampbench.workloads.factory import build_meta
    from tests.predict.test_cuda_dispatch import Workload_of

    for precision in ("fp32", "amp-bf16"):
        model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
        trace = trace_step(build_meta(lambda m=model: Workload_of(m, (torch.zeros(32, 64),))), precision, 32)
        got = sorted((o.phase, o.gemm[1:], o.gemm_layout) for o in trace.ops if o.gemm_layout)
        assert got == sorted([("forward", (32, 128, 64), "nt"), ("forward", (32, 10, 128), "nt"),
                              ("backward", (32, 128, 10), "nn"), ("backward", (10, 128, 32), "tn"),
                              ("backward", (128, 64, 32), "tn")]), (precision, got)
        assert all(o.gemm_layout == "" for o in trace.ops if o.gemm is None)


def _layout_row(m: int, n: int, k: int, dtype: str, us: float, layout: str = "") -> dict:
    return {**_gemm_row(m, n, k, dtype, us), "layout": layout}


def test_a_gemm_is_priced_at_its_layouts_cost_over_the_plain_case() -> None:
    """A table that timed a GEMM plain and transposed prices a transposed op of that shape at the transposed time; at
    a shape timed plain only, at the plain time there times what transposing cost at the nearest timed shape; a plain
    op, or a table without transposed cases (the shipped one), as before. Oracle: the rows."""
    h200 = lookup("h200")
    rows = [_layout_row(4096, 4096, 4096, "tf32", 400.0), _layout_row(4096, 4096, 4096, "tf32", 520.0, "tn"),
            _layout_row(1024, 1024, 1024, "tf32", 12.0)]
    table = KernelTable.of(_table(rows), h200)

    def op(n: int, layout: str) -> Op:
        return Op("aten.mm", "backward", 2 * n**3, 8 * n * n, 4 * n * n, "fp32", gemm=(1, n, n, n), gemm_layout=layout)

    def cost(o: Op, t: KernelTable | None = table) -> float:
        return price(_trace([o]), h200, tf32=True, kernels=t).gpu_s

    assert cost(op(4096, "tn")) == pytest.approx(520e-6) and cost(op(4096, "nn")) == pytest.approx(400e-6)
    assert cost(op(1024, "tn")) == pytest.approx(12e-6 * 520 / 400) and cost(op(1024, "nn")) == pytest.approx(12e-6)
    assert cost(op(4096, "nt")) == pytest.approx(400e-6)  # (nt not timed: the plain time)
    plain = KernelTable.of(_table([rows[0], rows[2]]), h200)
    assert cost(op(4096, "tn"), plain) == pytest.approx(400e-6)


class _ConvAt(nn.Module):
    """A convolution of ``shape`` (the sweep's dict) after a 1x1 of its input channels (so the input needs a gradient,
    as the sweep's data-gradient case has it)."""

    def __init__(self, shape: dict) -> None:
        super().__init__()
        c, k = shape["cin"], shape["kernel"]
        self.pre = nn.Conv2d(c, c, 1)
        self.conv = nn.Conv2d(c, shape["cout"], k, shape["stride"], k // 2, groups=shape["groups"], bias=False)
        self.out = nn.Linear(shape["cout"], 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.conv(self.pre(x)).mean((2, 3)))


def test_every_convolution_the_h200_timed_costs_its_rows_in_every_layout_and_mode() -> None:
    """Each of the shipped table's convolution shapes, traced in fp32, amp-fp16 and amp-bf16, channels-last and NCHW:
    the forward costs its ``conv_fwd`` row, the backward ``conv_dgrad`` + ``conv_wgrad`` (oracle: the CSV as text).
    Dense, 1x1, strided, grouped, depthwise and the 3-channel stems alike."""

    from ampbench.predict.trace import trace_step
    from ampbench.workloads.factory import build_meta
    from tests.predict.test_cuda_dispatch import Workload_of

    h200 = lookup("h200")
    rows = {(json.dumps(r.shape, sort_keys=True), r.op, r.dtype, r.layout): r.us * 1e-6 for r in _shipped_rows()
            if r.kind == "conv"}
    shapes = sorted({k[0] for k in rows})
    assert len(shapes) >= 12  # (the third lease's sweep; later ones time more)
    checked = 0
    for key in shapes:
        shape = json.loads(key)
        for precision, dtype in (("fp32", "fp32"), ("amp-fp16", "fp16"), ("amp-bf16", "bf16")):
            for channels_last, layout in ((True, "nhwc"), (False, "nchw")):
                x = torch.zeros(shape["batch"], shape["cin"], shape["size"], shape["size"])
                trace = trace_step(build_meta(lambda s=shape, x=x: Workload_of(_ConvAt(s), (x,))), precision,
                                   shape["batch"], channels_last=channels_last)
                ops = [o for o in trace.ops if o.conv is not None and (o.conv.c, o.conv.k, o.conv.r, o.conv.stride) == (
                    shape["cin"], shape["cout"], shape["kernel"], shape["stride"])]
                assert {o.name for o in ops} == {"aten.convolution", "aten.convolution_backward"}, (shape, precision)
                for o in ops:
                    want = rows[key, "conv_fwd", dtype, layout] if o.name == "aten.convolution" else (
                        rows[key, "conv_dgrad", dtype, layout] + rows[key, "conv_wgrad", dtype, layout])
                    got = price(_trace([o]), h200, tf32=False).gpu_s
                    assert got == pytest.approx(want, rel=1e-6), (shape, precision, layout, o.name)
                    checked += 1
    assert checked == len(shapes) * 3 * 2 * 2


def test_a_pure_fp16_batch_norm_is_priced_at_pytorchs_own_kernel_not_cudnns() -> None:
    """PyTorch gives cuDNN a half batch norm only with fp32 weights (amp-fp16, master-fp16: the table's fp16 cases);
    pure-fp16's fp16 weights take its own kernel, priced at the table's bf16 case (the kernel bf16 runs on: 2x cuDNN
    fp16's time on the H200). Oracle: synthetic rows, each dtype its own time, and traced BatchNorm2d steps."""
    from ampbench.predict.trace import trace_step
    from ampbench.workloads.factory import build_meta
    from tests.predict.test_cuda_dispatch import Workload_of

    h200, (b, c, size) = lookup("h200"), (8, 64, 32)
    us = {("fp16", "batch_norm_fwd"): 50.0, ("fp16", "batch_norm_fwd_bwd"): 140.0,
          ("bf16", "batch_norm_fwd"): 100.0, ("bf16", "batch_norm_fwd_bwd"): 260.0}
    rows = [{"kind": "norm", "op": op, "dtype": dtype, "layout": "nhwc", "us": t,
             "shape": {"batch": b, "channels": c, "size": size}, "flops": 0.0, "bytes": 0.0}
            for (dtype, op), t in us.items()]
    table = KernelTable.of(_table(rows), h200)
    for precision, weights, priced_as in (("amp-fp16", "fp32", "fp16"), ("pure-fp16", "fp16", "bf16"),
                                          ("pure-bf16", "bf16", "bf16")):
        model = nn.Sequential(nn.Conv2d(c, c, 1), nn.BatchNorm2d(c), nn.Flatten(), nn.Linear(c * size * size, 10))
        trace = trace_step(build_meta(lambda m=model: Workload_of(m, (torch.zeros(b, c, size, size),))), precision, b,
                           channels_last=True)
        norms = [o for o in trace.ops if "batch_norm" in o.name]
        assert norms and all(o.weight_dtype == weights for o in norms), precision
        for o in norms:
            fwd = us[priced_as, "batch_norm_fwd"]
            want = fwd if o.phase == "forward" else us[priced_as, "batch_norm_fwd_bwd"] - fwd
            assert price(_trace([o]), h200, tf32=False, kernels=table).gpu_s == pytest.approx(want * 1e-6, rel=0.01), (
                precision, o.name)
