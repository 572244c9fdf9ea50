"""``ampbench hw --calibrate``: the kernel table's cases, their FLOPs and bytes (oracles: counted by hand and by
torch's FLOP counter), the sweep on this CPU (the GPU's dtypes and case list at CPU sizes: the same code), the store
and the CSV round trip."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from ampbench.measure import calibrate as cal
from ampbench.measure.flop_formulas import custom_mapping
from ampbench.store import Store


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


def test_the_budget_leaves_cases_out_and_says_how_many() -> None:
    todo = cal.cases(cal.CPU_SIZES, ["fp32"])
    table = cal.sweep(torch.device("cpu"), cases=todo, min_s=0.0, budget_s=1e-9)
    assert table["skipped"] == len(todo) - len(table["kernels"]) and table["skipped"] > 0


def test_the_table_is_stored_and_its_csv_reads_back(tmp_path) -> None:  # type: ignore[no-untyped-def]
    table = cal.sweep(torch.device("cpu"), cases=cal.cases(cal.CPU_SIZES, ["fp32"])[:6], min_s=0.0)
    table["power"] = {"gemm": {"mean_power_w": 321.5, "seconds": 1.0, "busy_share": 0.9}}
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
