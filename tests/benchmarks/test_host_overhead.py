"""benchmarks/host_overhead.py: the host's time per op, counted as the prediction's trace counts ops."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "host_overhead.py"


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("host_overhead", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ops_are_counted_as_the_trace_counts_them_and_divided_per_phase(tmp_path: Path) -> None:
    """depth Linear + ReLU layers: an addmm and a relu each (the weight's transpose is a view: not counted), then the
    loss's pow and mean; the backward more ops than the forward; us per op = the phase's time / its ops."""
    out = tmp_path / "h.json"
    assert _script().main(["--device", "cpu", "--depth", "3", "--steps", "3", "--out", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["ops"]["forward"] == 2 * 3 + 2
    assert row["ops"]["backward"] > row["ops"]["forward"] and row["ops"]["optimizer"] >= 1
    for phase in ("forward", "backward", "optimizer"):
        assert row[f"{phase}_us"] > 0
        assert abs(row[f"{phase}_us_per_op"] - row[f"{phase}_us"] / row["ops"][phase]) < 0.01
