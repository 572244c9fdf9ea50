"""A Keras cell on TensorFlow (or JAX) never imports torch: read from ``sys.modules`` in the cell's own process.

``ampbench/__init__`` and the package namespaces import their names on first use, the cell identity and the row
helpers are torch-free, and the Keras cell reads the CPU's facts from :mod:`ampbench.cpuinfo`.
"""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ampbench.cells import CellSpec

MODELS = Path(__file__).with_name("models.py")
CELL = """
import json, sys
from ampbench.bench.jobs import cell
rows = [cell({"spec": spec}) for spec in json.loads(sys.argv[1])]
print(json.dumps({"torch": "torch" in sys.modules, "rows": [[r["status"], r["reason"]] for r in rows]}))
"""


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("keras") is None,
                    reason="keras or tensorflow not installed")
def test_a_keras_cell_on_tensorflow_imports_no_torch() -> None:
    specs = [CellSpec.of(device="cpu", workload="keras-conv-dummy", preset="tiny", precision="amp-bf16", batch_size=None,
                         keras_backend="tensorflow", steps=2, warmup=1, measures=("throughput", "memory", "inference")),
             CellSpec.of(device="cpu", workload=None, model=f"{MODELS}:two_inputs", batches=f"{MODELS}:make_tuple",
                         preset="tiny", precision="fp32", batch_size=None, keras_backend="tensorflow", steps=2, warmup=1,
                         measures=("throughput", "converge"), converge_steps=3, seeds=1)]
    r = subprocess.run([sys.executable, "-c", CELL, json.dumps([s.to_dict() for s in specs])], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["rows"] == [["ok", ""], ["ok", ""]], out
    assert out["torch"] is False
