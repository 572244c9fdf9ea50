"""benchmarks/rederive_memory.py: an export measured with the old activation counter is re-derived to what the
current counter measures (the run's own figure is the oracle); a row this machine does not reproduce is left as
it was and listed."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from tests.conftest import cli

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "rederive_memory.py"


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("rederive_memory", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_export_of_the_old_counter_is_rederived_to_the_new_one(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    code, _, err = cli("run", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "fp32,amp-bf16",
                       "--measure", "throughput,memory", "--steps", "2", "--warmup", "1", "--no-isolate",
                       "--no-report", "--db", str(tmp_path / "r.db"), "--json", str(out))
    assert code == 0, err
    data = json.loads(out.read_text())
    measured = {r["precision"]: r["activation_bytes"] for r in data["rows"]}
    assert all(isinstance(v, int) and v > 0 for v in measured.values())
    rederive = _script()
    # the export as the old counter wrote it: its activations replayed on the same cells (F.linear's weight.t()
    # counted), one row's weights disagreeing (a machine that saves other tensors: left alone)
    from dataclasses import replace

    run = data["runs"][0]
    cells = {c.key(): c for c in rederive.config_from_identity(run["config"]["identity"]).cells()}
    for r in data["rows"]:
        spec = cells[r.get("repeat_of") or r["cell_key"]]
        r["activation_bytes"] = rederive.remeasure(replace(spec, repeat=0, closing=False),
                                                   int(r["batch_size"]))["old_activation_bytes"]
    old = {r["precision"]: r["activation_bytes"] for r in data["rows"]}
    assert old["fp32"] > measured["fp32"]  # (the old counter counted the Linear weights' views)
    bad = next(r for r in data["rows"] if r["precision"] == "amp-bf16")
    bad["weights_bytes"] += 4
    out.write_text(json.dumps(data))
    assert rederive.main([str(out)]) == 0
    again = json.loads(out.read_text())
    rows = {r["precision"]: r for r in again["rows"]}
    assert rows["fp32"]["activation_bytes"] == measured["fp32"]
    assert rows["amp-bf16"]["activation_bytes"] == old["amp-bf16"]  # (not reproduced: as it was)
    assert again["rederived"]["keys"][3] == "activation_bytes"
    assert len(again["rederived"]["left"]) == 1 and "amp-bf16" in again["rederived"]["left"][0]
