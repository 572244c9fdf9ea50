"""The kernel table's console summary: a class's power in a dtype where the sweep read it over replays, none from a
table that read each class's whole window (gaps and all)."""

from __future__ import annotations

from rich.console import Console

from ampbench.report.calibration import calibration_table, summary


def _table(basis: str, power: dict) -> dict:
    rows = [{"kind": "gemm", "op": "mm", "dtype": d, "us": 10.0, "tflops": t, "gbps": None, "error": ""}
            for d, t in (("bf16", 700.0), ("fp32", 50.0))]
    return {"device_name": "NVIDIA H200", "kernels": rows, "power": power, "power_basis": basis}


def test_power_per_kind_and_dtype_only_from_replays() -> None:
    replay = _table("replay", {"gemm/bf16": {"mean_power_w": 655.0}, "idle": {"mean_power_w": 98.0}})
    assert {s["dtype"]: s["power_w"] for s in summary(replay)} == {"bf16": 655.0, "fp32": None}
    old = _table("", {"gemm": {"mean_power_w": 575.0}})
    assert {s["power_w"] for s in summary(old)} == {None}
    console = Console(width=100, record=True)
    console.print(calibration_table(replay))
    text = console.export_text()
    assert "655" in text and "idle between kernels: 98 W" in text
