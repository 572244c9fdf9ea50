"""Memory the libraries hold (issue 58, item 4): ``hw --calibrate`` reads what each kernel call allocates beside its
result (cuDNN's convolution workspaces), the table carries it, and ``predict`` holds each convolution's workspace with
its output while it runs. Oracles: a fake allocator's counters, the table's own figure at its own shape, and the
peak recomputed by hand from the traced ops."""

from __future__ import annotations

import pytest

from ampbench.measure.calibrate import from_csv, to_csv, transient_bytes
from ampbench.measure.gpus import lookup
from ampbench.predict.kernels import Conv
from ampbench.predict.measured_kernels import KernelTable, stored_tables, table_for
from ampbench.predict.memory import MemoryModel, workspace_bytes
from ampbench.predict.rows import Machine, Question, predict_target
from ampbench.predict.trace import Op, trace_step
from ampbench.workloads import create_workload
from ampbench.workloads.factory import build_meta


class FakeAllocator:
    """Counters as the caching allocator keeps them; ``call`` allocates ``transient`` and frees it, keeps ``result``."""

    def __init__(self, held: int, transient: int, result: int) -> None:
        self.now, self.top, self.transient, self.result = held, held, transient, result

    def settle(self) -> None: ...

    def reset_peak(self) -> None:
        self.top = self.now

    def allocated(self) -> int:
        return self.now

    def peak(self) -> int:
        return self.top

    def call(self) -> object:
        self.now += self.transient + self.result
        self.top = max(self.top, self.now)
        self.now -= self.transient
        return object()


def test_a_calls_transient_bytes_are_its_peak_over_what_it_left() -> None:
    a = FakeAllocator(held=10 * 2**20, transient=3 * 2**30, result=64 * 2**20)
    assert transient_bytes(a.call, a) == 3 * 2**30
    b = FakeAllocator(held=0, transient=0, result=2**20)
    assert transient_bytes(b.call, b) == 0


def _conv_row(op: str, batch: int, workspace: int | None, dtype: str = "fp32", layout: str = "nchw") -> dict:
    return {"kind": "conv", "op": op, "dtype": dtype, "layout": layout, "us": 500.0, "calls": 10, "timer": "cuda_graph",
            "shape": {"batch": batch, "cin": 64, "cout": 64, "size": 56, "kernel": 3, "stride": 1, "groups": 1},
            "flops": 1e9, "bytes": 1e6, "tflops": 2.0, "gbps": 2.0, "error": "", "workspace_bytes": workspace}


def _table(rows: list[dict]) -> dict:
    return {"device_name": "NVIDIA H200", "created_at": "2026-11-27", "env": {"torch": "x", "cudnn": 1}, "kernels": rows}


def test_the_csv_carries_the_workspace_and_an_older_table_has_none() -> None:
    table = _table([_conv_row("conv_fwd", 64, 123_456_789), _conv_row("conv_dgrad", 64, None)])
    back = from_csv(to_csv(table))["kernels"]
    assert [k["workspace_bytes"] for k in back] == [123_456_789, None]
    old = "\n".join(line.rsplit(",", 2)[0] for line in to_csv(table).splitlines())  # (no workspace, issue columns)
    assert [k["workspace_bytes"] for k in from_csv(old)["kernels"]] == [None, None]
    assert [k["host_us"] for k in from_csv(old)["kernels"]] == [None, None]


def _conv_op(batch: int, backward: bool = False) -> Op:
    conv = Conv(batch, 64, 56, 56, 64, 3, 3, 1, 1, 56, 56)
    name = "aten.convolution_backward" if backward else "aten.convolution"
    return Op(name, "backward" if backward else "forward", 1e9, 1e6, 1e6, "fp32", conv=conv,
              products=2 if backward else 1, nchw=True)


def test_a_convolutions_workspace_is_its_measured_one_per_byte_of_its_tensors() -> None:
    io = 4 * 2 * 64 * 64 * 56 * 56  # (batch 64: input and output, fp32)
    table = KernelTable.of(_table([_conv_row("conv_fwd", 64, 3 * io), _conv_row("conv_dgrad", 64, io),
                                   _conv_row("conv_wgrad", 64, 2 * io)]), lookup("h200"))
    assert table.workspace_for(_conv_op(64), "fp32") == pytest.approx(3 * io)  # (its own shape: its own figure)
    assert table.workspace_for(_conv_op(128), "fp32") == pytest.approx(6 * io)  # (twice the tensors: twice)
    assert table.workspace_for(_conv_op(64, backward=True), "fp32") == pytest.approx(2 * io)  # (the larger product)
    assert table.workspace_for(_conv_op(64), "bf16") == 0.0  # (no bf16 convolution measured)
    mm = Op("aten.mm", "forward", 1e9, 1e6, 1e6, "fp32", gemm=(1, 64, 64, 64))
    assert table.workspace_for(mm, "fp32") == 0.0


def test_the_step_holds_each_convolutions_workspace_with_its_output() -> None:
    """Oracle: the temporaries recomputed by hand from the small trace's ops (its batch: every op's output plus a
    fixed 1 GiB for a convolution)."""
    build = lambda: build_meta(lambda: create_workload("unet", "tiny"))  # noqa: E731
    small, large = trace_step(build(), "fp32", 4), trace_step(build(), "fp32", 8)
    model = MemoryModel(small, large)
    ws = 2**30
    with_ws = model.with_workspaces(lambda o: ws if o.conv is not None and o.products else 0.0)
    h200 = lookup("h200")
    plain, held = model.cost(h200, 4), with_ws.cost(h200, 4)
    by_hand = max(o.live + (ws if o.conv is not None and o.products else 0) for o in small.ops
                  if o.phase != "optimizer")  # (the fused optimizer: no tensor of its own)
    assert held.peak - held.workspace == pytest.approx(by_hand, rel=1e-6)
    assert held.peak - plain.peak == held.temporary - plain.temporary > 0
    assert held.workspace == plain.workspace == workspace_bytes(h200)
    assert with_ws.max_batch(held.usable, held.workspace) <= model.max_batch(plain.usable, plain.workspace)


def test_a_predicted_row_holds_the_workspaces_its_gpus_table_measured() -> None:
    """The peak grows by what the workspaces add where the step holds the most with them (each op's workspace held
    with what the step holds after it). Oracle: the workspaces priced op by op here, on the row's own trace."""
    build = lambda: build_meta(lambda: create_workload("unet", "tiny"))  # noqa: E731

    def row(gpu: str) -> dict:
        (r,) = predict_target("unet", build, Question(("fp32",), 4), Machine(lookup(gpu)))
        return r

    before, ampere = row("h200"), row("a100-80gb")  # (the shipped table measured no workspace: as before the column)
    mine = _table([_conv_row(op, 8, 2**30, "fp32", layout) for op in ("conv_fwd", "conv_dgrad", "conv_wgrad")
                   for layout in ("nchw", "nhwc")])
    with stored_tables([mine]):
        after, ampere_after = row("h200"), row("a100-80gb")
    assert ampere_after["predicted_peak_bytes"] == ampere["predicted_peak_bytes"]  # (Hopper's table: not Ampere's)
    table = KernelTable.of(mine, lookup("h200"))
    ops = [o for o in trace_step(build(), "fp32", 4).ops if o.phase != "optimizer"]
    largest = max(table.workspace_for(o, "fp32") for o in ops)
    grew = after["predicted_peak_bytes"] - before["predicted_peak_bytes"]
    shipped = table_for(lookup("h200"))  # (before: the shipped table's workspaces, where it measured any)
    assert shipped is not None
    by_hand = max(o.live + table.workspace_for(o, "fp32") for o in ops) - max(
        o.live + shipped.workspace_for(o, "fp32") for o in ops)
    assert largest > 0 and 0 < grew <= largest + 1
    assert grew == pytest.approx(by_hand, abs=1)
