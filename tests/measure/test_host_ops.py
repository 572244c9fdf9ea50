"""measure.host_ops: the host's time per op, counted as the prediction's trace counts ops (and its script)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from ampbench.measure.host_ops import measure

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "host_overhead.py"


def test_ops_are_counted_as_the_trace_counts_them_and_divided_per_phase() -> None:
    """depth Linear + ReLU layers: an addmm and a relu each (the weight's transpose is a view: not counted), then the
    loss's pow and mean; the backward more ops than the forward; us per op = the phase's time / its ops; the
    optimizer's time per parameter (a weight and a bias per layer)."""
    m = measure("cpu", depth=3, steps=3, warmup=1)
    assert m.ops["forward"] == 2 * 3 + 2 and m.params == 6
    assert m.ops["backward"] > m.ops["forward"] and m.ops["optimizer"] >= 1
    row = m.as_dict()
    for phase in ("forward", "backward"):
        assert row[f"{phase}_us"] > 0
        assert abs(row[f"{phase}_us_per_op"] - row[f"{phase}_us"] / row["ops"][phase]) < 0.01
    assert abs(row["optimizer_us_per_param"] - row["optimizer_us"] / 6) < 0.01
    assert m.direct_us is not None and m.kernels_us is not None  # (every timed engine step was direct, or it raised)
    beyond = max(0.0, m.direct_us - m.ops["optimizer"] * m.per_op("backward")) / 6  # (its ops priced apart)
    assert abs(row["direct_us_per_param"] - beyond) < 0.01
    assert row["direct_ratio"] == round((m.direct_us - m.kernels_us) / (m.optimizer_us - m.kernels_us), 3)
    f, b, p, d = (float(v) for v in m.host_us().split(","))
    assert (f, b, p, d) == (round(m.per_op("forward"), 1), round(m.per_op("backward"), 1),
                            round(m.optimizer_us_per_param, 1), round(beyond, 2))


def test_the_benchmark_writes_the_device_and_the_cpu_rows(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("host_overhead", SCRIPT)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "h.json"
    assert script.main(["--device", "cpu", "--depth", "2", "--steps", "2", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert [r["device"] for r in data["rows"]] == ["cpu"] and data["rows"][0]["ops"]["forward"] == 6
