"""``ampbench diagnose`` of a Keras model: the checks that apply, on made-up trajectories and for real."""

import json
import math
import re
from pathlib import Path

import pytest

from ampbench.frameworks.keras.diagnose import SEARCH_STEPS, nonfinite_findings
from tests.conftest import cli

MODELS = Path(__file__).with_name("models.py")


def test_start_up_skips_are_the_scale_search_not_a_fault():
    # 2 skipped steps at the start (scale 2^15 -> 2^13), then every step applied
    applied = [0, 0, 1, 2, 3, 4, 5, 6, 7, 8]
    f, = nonfinite_findings([0.7] * 10, [16384.0, 8192.0] + [8192.0] * 8, applied, "mixed_float16", True)
    assert f.severity == "info" and "2 skipped in the scale's start-up search" in f.title and "8192" in f.title


def test_skips_that_keep_coming_and_a_nan_loss_are_reported():
    n = SEARCH_STEPS + 4
    applied = list(range(1, SEARCH_STEPS + 1)) + [SEARCH_STEPS] * 4  # the last 4 steps skipped
    losses = [0.5] * (n - 1) + [math.nan]
    found = {f.severity: f for f in nonfinite_findings(losses, [1.0] * n, applied, "mixed_float16", True)}
    assert set(found) == {"error", "warning"}
    assert found["error"].data == {"step": n} and "4 of" in found["warning"].title
    assert found["warning"].data["skipped_steps"] == list(range(SEARCH_STEPS + 1, n + 1))


def _diagnose(model: str, tmp_path: Path, *extra: str) -> tuple[int, str, str, dict]:
    out = tmp_path / "d.json"
    code, stdout, err = cli("diagnose", "--model", f"{MODELS}:{model}", "--input-shape", "20", "--num-classes", "2",
                            "--device", "cpu", "--steps", "6", "--preset", "tiny", "--db", str(tmp_path / "r.db"),
                            "--json", str(out), *extra)
    return code, stdout, err, json.loads(out.read_text()) if out.exists() else {}


def test_a_half_output_layer_and_tensor_core_dims(tmp_path):
    code, out, err, d = _diagnose("half_output", tmp_path)
    assert code == 0, (out, err)
    titles = [f["title"] for f in d["findings"]]
    assert d["findings"][0]["severity"] == "warning" and "computes in float16 under mixed_float16" in titles[0]
    assert "dense_1.input dim = 20 is not a multiple of 8" in titles  # the 20-feature input of the first Dense
    assert any(t.startswith("no inf/NaN loss in 6 steps under mixed_float16") for t in titles)
    # a line as each check ends, as it ends (the child reported once, at the end), and its finding count is the check's
    done = re.findall(r"check (\d)/3: (\w+) done in [\d.]+ s \((\d+) findings?\)", out)
    assert [(i, c) for i, c, _ in done] == [("1", "policy"), ("2", "tensorcore"), ("3", "nonfinite")], out
    assert {c: int(n) for _, c, n in done} == {c: sum(f["check"] == c for f in d["findings"])
                                                 for c in ("policy", "tensorcore", "nonfinite")}


def test_a_float16_overflow_is_an_error_and_bf16_has_the_range(tmp_path):
    code, out, err, d = _diagnose("overflow", tmp_path, "--checks", "nonfinite")
    assert code == 0, (out, err)
    first = d["findings"][0]
    assert first["severity"] == "error" and first["data"] == {"step": 1} and "under mixed_float16" in first["title"]
    code, out, err, d = _diagnose("overflow", tmp_path, "--checks", "nonfinite", "-p", "mixed_bfloat16")
    assert code == 0 and [f["severity"] for f in d["findings"]] == ["info"], d


@pytest.mark.parametrize("extra, says", [
    (["--checks", "gradients"], "--checks gradients: the gradient-range check hooks a PyTorch module's backward"),
    (["--trace", "t.json"], "--trace is a PyTorch option"),
    (["-p", "master-fp16"], "master-fp16 is not a Keras recipe"),
])
def test_what_does_not_apply_to_a_keras_model_is_one_line(extra, says, tmp_path):
    code, out, err = cli("diagnose", "--model", f"{MODELS}:mlp", "--input-shape", "20", "--num-classes", "2",
                         "--device", "cpu", "--db", str(tmp_path / "r.db"), *extra)
    assert code == 2 and says in err and err.count("\n") == 1, (out, err)


def _linted(tmp_path, model: str) -> list[dict]:  # type: ignore[no-untyped-def]
    """lint_dims of the Keras model the lines ``model`` build (into ``model``), in a process of its own on the torch
    backend."""
    import os
    import subprocess
    import sys

    script = tmp_path / "lint.py"
    script.write_text("import json\nimport keras\nfrom keras import layers\n"
                      f"from ampbench.frameworks.keras.diagnose import lint_dims\n{model}\n"
                      "print(json.dumps(lint_dims(model)))\n")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "KERAS_BACKEND": "torch"})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_looked_up_vocabulary_is_not_a_gemm_dimension_a_reversed_one_is(tmp_path):
    """keras.layers.Embedding's rows are gathered (no Tensor Core GEMM has them as a dimension): not flagged; a
    ReversibleEmbedding's reverse call is the output projection, whose N is its input_dim: flagged, padded to 64."""
    issues = _linted(tmp_path, "tokens = keras.Input((8,), dtype='int32')\n"
                               "looked_up = layers.Embedding(30522, 64, name='lookup')(tokens)\n"
                               "rev = layers.ReversibleEmbedding(30522, 64, name='tied')\n"
                               "h = rev(tokens) + looked_up\n"
                               "model = keras.Model(tokens, rev(keras.ops.mean(h, axis=1), reverse=True))")
    assert issues == [{"layer": "tied", "dim": "input_dim", "value": 30522, "multiple": 64, "padded": 30528}]


def test_the_output_layers_units_are_the_tasks_width_not_one_to_choose(tmp_path):
    """A Dense(10) head under a softmax Activation: its 10 units are the classes -- marked as the output (the fix says
    pad and slice, or leave it; it said "make units 16 ... change the width"); a hidden Dense(30) is any width."""
    from ampbench.diagnose.tensorcore import tensorcore_findings

    issues = _linted(tmp_path, "x = keras.Input((24,))\n"
                               "h = layers.Dense(30, name='hidden')(x)\n"
                               "h = layers.BatchNormalization(name='norm')(h)\n"
                               "out = layers.Activation('softmax', dtype='float32')(layers.Dense(10, name='head')(h))\n"
                               "model = keras.Model(x, out)")
    assert issues == [{"layer": "hidden", "dim": "units", "value": 30, "multiple": 8, "padded": 32},
                      {"layer": "head", "dim": "input dim", "value": 30, "multiple": 8, "padded": 32},
                      {"layer": "head", "dim": "units", "value": 10, "multiple": 8, "padded": 16, "output": True}]
    fixes = [f.fix for f in tensorcore_findings(issues, on_gpu=True)]
    assert fixes[0].startswith("make units 32") and fixes[2].startswith("the model's output layer: 10 is its number")
