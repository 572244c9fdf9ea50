"""A Keras cell on TensorFlow (or JAX) never imports torch: read from ``sys.modules`` in the cell's own process.

``ampbench/__init__`` and the package namespaces import their names on first use, the cell identity and the row
helpers are torch-free, the Keras cell reads the CPU's facts from :mod:`ampbench.cpuinfo`, and a ``--model`` on
synthetic data reads arrays made by torch's generator in a process of its own -- the values a PyTorch model gets.
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
                         measures=("throughput", "converge"), converge_steps=3, seeds=1),
             CellSpec.of(device="cpu", workload=None, model=f"{MODELS}:mlp", input_shape="20", num_classes=2, preset="tiny",
                         precision="fp32", batch_size=None, keras_backend="tensorflow", steps=2, warmup=1,
                         measures=("throughput",))]
    r = subprocess.run([sys.executable, "-c", CELL, json.dumps([s.to_dict() for s in specs])], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["rows"] == [["ok", ""]] * 3, out
    assert out["torch"] is False


def test_synthetic_data_of_a_keras_model_are_the_pytorch_models_values() -> None:
    """Oracle: the arrays a Keras ``--model`` trains on (made in a helper process and read back) equal, bit for bit,
    what :func:`~ampbench.workloads.tasks.synthesize` gives a PyTorch model in this process, images prepared."""
    import numpy as np

    from ampbench.frameworks.keras.workloads import _synthetic
    from ampbench.workloads.tasks import DataSpec, synthesize

    for spec in (DataSpec.of("3,8,8", num_classes=4),):  # (images: the prepared values, the hardest case)
        spec = spec.resolve("test")
        x_tr, y_tr, x_te, y_te = _synthetic(spec, "tiny", 7, 16)
        train, test, prepare = synthesize(spec, "tiny", 7, 16)
        for x, y, part in ((x_tr, y_tr, train), (x_te, y_te, test)):
            want = prepare(part.inputs) if prepare is not None else part.inputs
            assert x.dtype == want[0].numpy().dtype and np.array_equal(x, want[0].numpy())
            assert np.array_equal(y, part.targets.numpy())
        assert len(x_tr) > len(x_te) > 0
