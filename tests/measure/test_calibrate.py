"""``ampbench hw --calibrate``: the kernel table's cases, their FLOPs and bytes (oracles: counted by hand and by
torch's FLOP counter), the sweep on this CPU (the GPU's dtypes and case list at CPU sizes: the same code), the store
and the CSV round trip."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from ampbench.measure import calibrate as cal
from ampbench.measure.energy import Energy
from ampbench.measure.flop_formulas import custom_mapping
from ampbench.measure.gpus import lookup
from ampbench.predict.measured_kernels import KernelTable
from ampbench.store import Store

SHIPPED = Path(__file__).resolve().parents[2] / "src" / "ampbench" / "predict" / "calibration"
BENCH_H200 = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "h200"


def test_a_gemm_cases_flops_and_bytes_are_its_shapes() -> None:
    c = cal.gemm_case(64, 32, 16, "bf16")
    assert c.flops == 2 * 64 * 32 * 16 and c.bytes == (64 * 16 + 16 * 32 + 64 * 32) * 2
    b = cal.gemm_case(8, 4, 2, "fp32", batch=3)
    assert b.kind == "bmm" and b.flops == 3 * 2 * 8 * 4 * 2 and b.bytes == 3 * (8 * 2 + 2 * 4 + 8 * 4) * 4


@pytest.mark.parametrize("shape", [cal.ConvShape(2, 8, 16, 12, 3), cal.ConvShape(2, 8, 8, 12, 3, 2, 8),
                                   cal.ConvShape(1, 4, 6, 9, 7, 2), cal.ConvShape(2, 16, 32, 5, 1)])
@pytest.mark.parametrize("op", ["conv_fwd", "conv_dgrad", "conv_wgrad"])
def test_a_convolutions_flops_are_what_torchs_counter_counts(shape: cal.ConvShape, op: str) -> None:
    """Forward, data gradient and weight gradient each one convolution's FLOPs (torch's flop counter with the run's
    formulas for grouped backward: an independent count of the same call), and the output side the call produces."""
    case = cal.conv_case(shape, "fp32", op, channels_last=op == "conv_dgrad")
    fn = case.make(torch.device("cpu"))
    with FlopCounterMode(display=False, custom_mapping=custom_mapping()) as counter:  # (grouped backward corrected)
        out = fn()
    assert counter.get_total_flops() == case.flops
    if op == "conv_fwd":
        assert out.shape[-1] == shape.out


@pytest.mark.parametrize(("op", "source", "result"), [("to_fp32", torch.bfloat16, torch.float32),
                                                      ("to_half", torch.float32, torch.bfloat16)])
def test_a_cast_case_converts_its_direction_and_counts_both_sides_bytes(op: str, source: torch.dtype,
                                                                       result: torch.dtype) -> None:
    """Autocast's two casts: a bf16 tensor to fp32 and an fp32 one to bf16, each moving 2 + 4 bytes an element (oracle:
    the call's own input and output)."""
    case = cal.elementwise_case(op, 1000, "bf16")
    out = case.make(torch.device("cpu"))()
    assert out.dtype == result and out.numel() == 1000 and case.bytes == 1000 * (source.itemsize + result.itemsize)


@pytest.mark.parametrize("layout", ["", "nt", "tn"])
def test_a_gemm_case_runs_its_layout(layout: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plain case multiplies row-major operands; ``nt`` a transposed view as the second (a Linear's forward),
    ``tn`` as the first (its weight gradient). Oracle: the operands torch.mm is handed, and their product made
    contiguous."""
    case = cal.gemm_case(8, 4, 6, "fp32", layout=layout)
    assert case.layout == layout and case.flops == 2 * 8 * 4 * 6
    seen: list[torch.Tensor] = []
    mm = torch.mm
    monkeypatch.setattr(torch, "mm", lambda a, b: (seen.extend((a, b)), mm(a, b))[1])
    out = case.make(torch.device("cpu"))()
    a, b = seen
    assert a.shape == (8, 6) and b.shape == (6, 4)
    assert (not a.is_contiguous()) == (layout == "tn") and (not b.is_contiguous()) == (layout == "nt")
    assert torch.allclose(out, a.contiguous() @ b.contiguous())


def test_the_gpu_case_list_runs_on_this_cpu_at_cpu_sizes() -> None:
    """The GPU's dtypes (tf32, fp16 too) through every kind of case at CPU sizes: each case timed or its error said;
    fp32 and bf16 ones all timed, with rates that are rates."""
    todo = cal.cases(cal.CPU_SIZES, ["fp32", "tf32", "fp16", "bf16"], conv_dtypes=["fp32", "bf16"])
    assert {c.kind for c in todo} == set(cal.CLASSES)
    table = cal.sweep(torch.device("cpu"), cases=todo, min_s=0.0)
    assert len(table["kernels"]) == len(todo) and table["skipped"] == 0
    for r in table["kernels"]:
        assert (r["us"] is None) == bool(r["error"]), r
        if r["dtype"] in ("fp32", "bf16"):
            assert r["us"] and r["us"] > 0 and r["timer"] == "perf_counter", r
            if r["flops"]:
                assert math.isclose(r["tflops"], r["flops"] / r["us"] / 1e6)
    assert table["host_ops"] and table["env"]["device_name"] == table["device_name"]
    assert all(r["host_us"] is None for r in table["kernels"])  # (a CPU computes on the host: no issue apart)


def test_the_issue_time_is_the_median_of_calls_timed_one_by_one() -> None:
    """Oracle: a call that sleeps 2 ms costs its host >= 2 ms to issue, and it is called ISSUES times."""
    calls = []

    def fn() -> None:
        calls.append(1)
        time.sleep(0.002)

    us = cal.issue_us(fn, torch.device("cpu"))
    assert len(calls) == cal.ISSUES and 2000 <= us < 2000 + 50_000


def test_the_budget_leaves_cases_out_and_says_how_many() -> None:
    todo = cal.cases(cal.CPU_SIZES, ["fp32"])
    table = cal.sweep(torch.device("cpu"), cases=todo, min_s=0.0, budget_s=1e-9)
    assert table["skipped"] == len(todo) - len(table["kernels"]) and table["skipped"] > 0


def test_the_table_is_stored_and_its_csv_reads_back(tmp_path) -> None:  # type: ignore[no-untyped-def]
    table = cal.sweep(torch.device("cpu"), cases=cal.cases(cal.CPU_SIZES, ["fp32"])[:6], min_s=0.0)
    table["power"] = {"gemm/fp32": {"mean_power_w": 321.5, "seconds": 2.0}, "idle": {"mean_power_w": 88.0}}
    table["power_basis"] = "replay"
    store = Store(tmp_path / "r.db")
    store.add_calibration(table)
    (back,) = store.calibrations(table["device_name"])
    assert back["kernels"] == table["kernels"]
    text = cal.to_csv(table)
    assert text.startswith("# ampbench kernel calibration") and f"# device_name: {table['device_name']}" in text
    read = cal.from_csv(text)
    assert read["device_name"] == table["device_name"]
    for a, b in zip(read["kernels"], table["kernels"], strict=True):
        assert (a["kind"], a["op"], a["dtype"], a["shape"]) == (b["kind"], b["op"], b["dtype"], b["shape"])
        assert math.isclose(a["us"], b["us"], rel_tol=1e-3)
        assert a["power_w"] == (321.5 if a["kind"] == "gemm" else None)
        assert a["host_us"] is None
    # a GEMM timed with a transposed operand reads back as such, and prices as such (its ratio over the plain case)
    laid = cal.sweep(torch.device("cpu"), cases=[c for c in cal.cases(cal.CPU_SIZES, ["fp32"])
                                                 if c.kind == "gemm" and c.shape["m"] == 64], min_s=0.0)
    assert sorted(k["layout"] for k in cal.from_csv(cal.to_csv(laid))["kernels"]) == ["", "nt", "tn"]
    points = KernelTable.of(cal.from_csv(cal.to_csv(laid)), lookup("h200")).points
    assert set(points) == {("gemm", "fp32"), ("gemm_layout", "fp32", "nt"), ("gemm_layout", "fp32", "tn")}
    # a GPU's rows carry the host's issue time per call: it reads back
    issued = {**table, "kernels": [{**k, "host_us": 12.5} for k in table["kernels"]]}
    assert {k["host_us"] for k in cal.from_csv(cal.to_csv(issued))["kernels"]} == {12.5}
    assert read["power_basis"] == "replay" and read["power"] == {"gemm/fp32": {"mean_power_w": 321.5},
                                                                 "idle": {"mean_power_w": 88.0}}
    # a table whose power was read over each class's whole window (the first H200 sweep's: gaps included) reads
    # back without power: nothing prices energy from it
    old = cal.from_csv("\n".join(line for line in text.splitlines() if "power_basis" not in line))
    assert old["power"] == {} and old["power_basis"] == ""
    assert cal.from_csv((BENCH_H200 / "truth" / "calibration.csv").read_text())["power"] == {}
    # the shipped table (the third lease's sweep) read its power over replays: every kind and dtype it timed, and idle
    shipped = cal.from_csv((SHIPPED / "h200.csv").read_text())
    assert shipped["power_basis"] == "replay"
    assert {f"{k['kind']}/{k['dtype']}" for k in shipped["kernels"] if k["us"]} <= set(shipped["power"])
    kinds = [v["mean_power_w"] for k, v in shipped["power"].items() if k != "idle"]
    assert 50 < shipped["power"]["idle"]["mean_power_w"] < min(kinds) <= max(kinds) <= 1.05 * 700  # (its 700 W limit)


class FakeMeter:
    """An energy meter of a board at constant ``watts`` (the wall clock between start and stop), counting the calls
    of ``calls`` made while it reads."""

    def __init__(self, watts: float, calls: list[int] | None = None) -> None:
        self.watts, self.calls, self.available = watts, calls, True
        self.t0 = 0.0
        self.inside = 0

    def start(self) -> None:
        self.t0 = time.perf_counter()
        self.before = self.calls[0] if self.calls else 0

    def stop(self, steps: int = 0) -> Energy:
        seconds = time.perf_counter() - self.t0
        self.inside = (self.calls[0] if self.calls else 0) - self.before
        return Energy(self.watts * seconds, seconds, "fake")

    def close(self) -> None:
        pass


def test_replayed_energy_reads_the_calls_alone_for_the_window() -> None:
    calls = [0]

    def fn() -> None:
        calls[0] += 1
        time.sleep(0.002)

    meter = FakeMeter(250.0, calls)
    energy = cal.replayed_energy(fn, 0.002, torch.device("cpu"), meter, window_s=0.1)
    assert energy is not None and energy.seconds >= 0.1 and energy.mean_power_w == pytest.approx(250.0)
    assert meter.inside == calls[0] >= 0.1 / 0.002 * 0.5  # every call inside the reading; enough of them
    # a call slower than it timed (clocks down): more of the same until the window is full
    slow = FakeMeter(100.0, calls)
    assert cal.replayed_energy(fn, 1e-5, torch.device("cpu"), slow, window_s=0.05).seconds >= 0.05  # type: ignore[union-attr]


def test_the_sweep_reads_power_per_kind_and_dtype_and_idle_where_a_meter_reads() -> None:
    todo = [c for c in cal.cases(cal.CPU_SIZES, ["fp32", "bf16"], conv_dtypes=["fp32"])
            if c.kind in ("gemm", "elementwise", "norm")]
    made: list[FakeMeter] = []

    def meter() -> FakeMeter:
        made.append(FakeMeter(300.0 + 10 * len(made)))
        return made[-1]

    table = cal.sweep(torch.device("cpu"), cases=todo, min_s=0.0, meter=meter, power_window_s=0.02)  # type: ignore[arg-type]
    keys = {f"{r['kind']}/{r['dtype']}" for r in table["kernels"] if r["us"]}
    assert table["power_basis"] == "replay" and set(table["power"]) == keys | {"idle"}
    for key, p in table["power"].items():
        assert p["seconds"] >= 0.02 and p["mean_power_w"] >= 300.0, key
        if key != "idle":  # the case that represents its kind and dtype: the highest rate of those long enough
            kind, dtype = key.split("/")
            rows = [r for r in table["kernels"] if (r["kind"], r["dtype"]) == (kind, dtype) and r["us"]]
            rate = "tflops" if kind in cal.MATH_KINDS else "gbps"
            eligible = [r for r in rows if r["us"] >= cal.POWER_MIN_US and r[rate]]
            chosen = max(eligible, key=lambda r: r[rate]) if eligible else max(rows, key=lambda r: r["us"])
            assert (p["op"], p["shape"]) == (chosen["op"], chosen["shape"])
    assert len({p["mean_power_w"] for p in table["power"].values()}) == len(table["power"])  # a meter per reading
    csv_power = {(r["kind"], r["dtype"]): r["power_w"] for r in cal.from_csv(cal.to_csv(table))["kernels"]}
    assert all(csv_power[tuple(k.split("/"))] == pytest.approx(p["mean_power_w"], abs=0.06)
               for k, p in table["power"].items() if k != "idle")
    # no meter that reads (a CPU): no power, no basis
    assert cal.sweep(torch.device("cpu"), cases=todo[:2], min_s=0.0)["power"] == {}


def test_a_kinds_power_is_read_on_its_highest_rate_case_not_its_longest() -> None:
    """The lent H200's longest convolution (ConvNeXt's depthwise 7x7 weight gradient) drew 563 W where whole convnet
    steps drew 650-700: a kind's power is read on the case at its highest rate (FLOP/s, or bytes/s for memory kinds)
    of those long enough to time their kernels, the longest only where none is."""
    def case(kind: str, op: str, flops: float, nbytes: float) -> cal.Case:
        return cal.Case(kind, op, "fp16", {}, flops, nbytes)

    def timed(c: cal.Case, us: float | None) -> cal.Timed:
        return cal.Timed(c.kind, c.op, c.dtype, "", c.shape, c.flops, c.bytes, us, 1, "cuda_graph")

    depthwise, dense, tiny = case("conv", "dw", 1e9, 1e8), case("conv", "dense", 3e11, 1e8), case("conv", "t", 1e10, 1e3)
    items = [(depthwise, timed(depthwise, 1324.0)), (dense, timed(dense, 600.0)), (tiny, timed(tiny, 5.0))]
    assert cal.power_case(items)[0] is dense  # (500 TFLOP/s; 5 us at 2,000: too short; 1.3 ms at 0.8: the longest)
    norm_slow, norm_fast = case("norm", "bn", 0, 1e8), case("norm", "ln", 0, 1e8)
    assert cal.power_case([(norm_slow, timed(norm_slow, 700.0)), (norm_fast, timed(norm_fast, 40.0))])[0] is norm_fast
    assert cal.power_case([(tiny, timed(tiny, 5.0)), (depthwise, timed(depthwise, 9.0))])[0] is depthwise  # (none long)


def test_hw_calibrate_on_the_command_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import cli

    code, out, err = cli("hw", "--device", "cpu", "--csv", str(tmp_path / "c.csv"))
    assert code == 2 and "--csv writes the kernel table of --calibrate" in err
    code, out, err = cli("hw", "--device", "cpu", "--calibrate", "--budget", "0")
    assert code == 2 and "--budget must be > 0" in err
    code, out, err = cli("hw", "--device", "cpu", "--calibrate", "--budget", "2", "--db", str(tmp_path / "r.db"),
                         "--csv", str(tmp_path / "c.csv"))
    assert code == 0, err
    assert "kernel calibration" in out and (tmp_path / "c.csv").read_text().count("\n") > 5
    assert Store(tmp_path / "r.db").calibrations()
