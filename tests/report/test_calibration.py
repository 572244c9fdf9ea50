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
    assert "655" in text and "idle between kernels: 98 W" in text and "power W" in text
    console = Console(width=100, record=True)
    console.print(calibration_table(old))  # (no power read, a CPU's sweep: no column of "-")
    assert "power W" not in console.export_text()


def test_a_gpus_issue_time_per_class_shows_where_the_sweep_timed_it() -> None:
    """The median of the class's single calls (its forward+backward cases, autograd around them, left out); a table
    without issue times has no such column."""
    table = _table("", {})
    table["kernels"] = [{**r, "host_us": h} for r, h in zip(table["kernels"], (9.0, 11.0))] + [
        {"kind": "softmax", "op": "softmax_fwd_bwd", "dtype": "bf16", "us": 5.0, "tflops": None, "gbps": 1.0,
         "error": "", "host_us": 400.0}]
    assert {(s["kind"], s["dtype"]): s["host_us"] for s in summary(table)} == {
        ("gemm", "bf16"): 9.0, ("gemm", "fp32"): 11.0, ("softmax", "bf16"): None}
    console = Console(width=100, record=True)
    console.print(calibration_table(table))
    text = console.export_text()
    assert "issue us" in text and "11.0" in text
    console = Console(width=100, record=True)
    console.print(calibration_table(_table("", {})))
    assert "issue us" not in console.export_text()


def test_the_h200_tables_summary_fits_80_columns_one_line_a_class() -> None:
    """The lent H200's sweep (its CSV's rows, rates as the sweep stores them): every class and dtype one line at 80
    columns, "elementwise" whole, rates without an exponent (it printed "4.34e+03 GB/s", each row wrapped in two)."""
    import csv

    from ampbench.measure import calibrate as cal
    from ampbench.predict.measured_kernels import TABLES_DIR

    text = (TABLES_DIR / "h200.csv").read_text()
    table = cal.from_csv(text)
    raw = list(csv.DictReader(line for line in text.splitlines() if not line.startswith("#")))
    for k, r in zip(table["kernels"], raw, strict=True):
        k.update(tflops=float(r["tflops"]) if r["tflops"] else None, gbps=float(r["gbps"]) if r["gbps"] else None)
    table["device_name"] = "NVIDIA H200"
    console = Console(width=80, record=True)
    console.print(calibration_table(table))
    lines = console.export_text().splitlines()
    rows = [line for line in lines if line.startswith("│")]
    assert len(rows) == len(summary(table)) and max(len(line) for line in lines) <= 80
    assert "e+" not in console.export_text() and "issue us" in lines[2]
    (elementwise,) = [line for line in rows if "elementwise" in line and "fp32" in line]
    assert elementwise.split("│")[4:7] == [" 4,336 ", "  4,266 ", " GB/s    "]  # (4336, 4266 GB/s in the CSV)


def test_a_cpus_sub_teraflop_rates_are_said_in_gflops() -> None:
    """A CPU's LSTM at 0.000523 TFLOP/s reads 0.523 GFLOP/s; a class at 1 TFLOP/s or more stays in TFLOP/s."""
    table = _table("", {})
    table["kernels"] = [{"kind": "rnn", "op": "lstm_fwd", "dtype": "fp32", "us": 9.0, "tflops": 0.000523, "gbps": None,
                         "error": ""}, *table["kernels"]]
    console = Console(width=80, record=True)
    console.print(calibration_table(table))
    rows = {line.split("│")[1].strip() + "/" + line.split("│")[2].strip(): line.split("│")[4:7]
            for line in console.export_text().splitlines() if line.startswith("│")}
    assert rows["rnn/fp32"] == [" 0.523 ", "  0.523 ", " GFLOP/s "]
    assert rows["gemm/bf16"] == ["   700 ", "    700 ", " TFLOP/s "]

