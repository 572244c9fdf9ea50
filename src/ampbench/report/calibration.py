"""A kernel calibration (``ampbench hw --calibrate``) as a table: per kernel class and dtype, how many kernels were
timed, the best and median TFLOP/s (compute kernels) or GB/s (memory-bound ones), and the board's mean power over
replays of the class's highest-rate kernel in that dtype (tables read otherwise -- a class's whole window, gaps and all
-- show none), and on a GPU the host's median time to issue one call of the class."""

from __future__ import annotations

import statistics
from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.table import Table

from ampbench.measure.kernel_power import IDLE, REPLAY, issue_us, power_key
from ampbench.report.numbers import sig
from ampbench.report.titled import titled

COMPUTE = ("gemm", "bmm", "conv", "attention", "rnn")
"""Classes whose figure of merit is TFLOP/s; the others move bytes (GB/s), launch: microseconds."""


def summary(table: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per (class, dtype): kernels timed, failed, best and median rate, the board's power running them."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in table["kernels"]:
        groups.setdefault((r["kind"], r["dtype"]), []).append(r)
    out = []
    for (kind, dtype), rows in groups.items():
        key = "tflops" if kind in COMPUTE else "us" if kind == "launch" else "gbps"
        rates = [r[key] for r in rows if r.get(key) is not None]
        power = (table.get("power") or {}).get(power_key(kind, dtype), {}).get("mean_power_w") \
            if table.get("power_basis") == REPLAY else None
        issued = [h for h in map(issue_us, rows) if h is not None]
        out.append({"kind": kind, "dtype": dtype, "timed": len(rates), "failed": sum(1 for r in rows if r["error"]),
                    "host_us": statistics.median(issued) if issued else None,
                    "unit": {"tflops": "TFLOP/s", "gbps": "GB/s", "us": "us"}[key],
                    "best": (min(rates) if key == "us" else max(rates)) if rates else None,
                    "median": statistics.median(rates) if rates else None, "power_w": power})
    return out


def calibration_table(table: dict[str, Any]) -> Group:
    idle = (table.get("power") or {}).get(IDLE, {}).get("mean_power_w") if table.get("power_basis") == REPLAY else None
    t = Table(caption=None if idle is None else f"idle between kernels: {idle:.0f} W")
    rows = summary(table)
    issued = any(s["host_us"] is not None for s in rows)  # (a GPU's sweep: the host's issue per call)
    powered = any(s["power_w"] is not None for s in rows)  # (NVML's: a CPU's table had a column of "-")
    # (the unit a column of its own and the rates by sig -- "4,340", not "4.34e+03 GB/s" in each cell: the table wrapped
    # every row in two at 80 columns and cut "elementwise")
    for col in ("class", "dtype", "timed", "best", "median", "unit", *(["power W"] if powered else []),
                *(["issue us"] if issued else [])):
        t.add_column(col, justify="left" if col in ("class", "dtype", "unit") else "right", no_wrap=True)
    for s in rows:
        # (a CPU's rates in GFLOP/s: "0.000523 TFLOP/s" for its LSTM read as nothing)
        scale, unit = (1e3, "GFLOP/s") if s["unit"] == "TFLOP/s" and (s["best"] or 0.0) < 1.0 else (1.0, s["unit"])

        def fmt(v: float | None, scale: float = scale) -> str:
            return "-" if v is None else sig(v * scale)
        t.add_row(s["kind"], s["dtype"], f"{s['timed']}" + (f" ({s['failed']} failed)" if s["failed"] else ""),
                  fmt(s["best"]), fmt(s["median"]), unit,
                  *(["-" if s["power_w"] is None else f"{s['power_w']:.0f}"] if powered else []),
                  *([("-" if s["host_us"] is None else f"{s['host_us']:.1f}")] if issued else []))
    return titled(f"kernel calibration: {escape(str(table['device_name']))}", t)
