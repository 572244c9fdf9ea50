"""Keras cells for real, on the torch and TensorFlow backends (JAX where installed): rows, policies, warnings.

Each cell runs in a process of its own (the backend is chosen before keras is imported), launched as a real run
launches it (:func:`ampbench.bench.runner.launcher`: on a CPU, forked from a server that imported keras on the cell's
backend).
"""

import importlib.util
import json
import math
from pathlib import Path

import pytest

from ampbench.bench.jobs import job, launcher, validate_job
from ampbench.cells import CellSpec
from tests.conftest import cli

HERE = Path(__file__).parent
MODELS = HERE / "models.py"
BACKENDS = [pytest.param(b, marks=pytest.mark.skipif(importlib.util.find_spec(b) is None or
                                                     importlib.util.find_spec("keras") is None,
                                                     reason=f"keras or {b} not installed"))
            for b in ("torch", "tensorflow", "jax")]
MLP_PARAMS = (20 * 32 + 32) + (32 * 2 + 2)
"""The test MLP's weights, counted by hand from its layers (the oracle of keras_params and weights_bytes)."""


def _validate(backend: str, precisions: tuple[str, ...], **flat: object) -> dict[str, dict]:
    """Each precision's validation of the test MLP, all in one process of ``backend`` (as a run validates its
    targets): built one after another, each must still be under its own policy."""
    specs = [CellSpec.of(device="cpu", workload=None, model=f"{MODELS}:mlp", preset="tiny", precision=p, batch_size=None,
                         input_shape="20", num_classes=2, keras_backend=backend, **flat) for p in precisions]
    return dict(zip(precisions, launcher(specs[0], 300).run(validate_job(specs))["results"], strict=True))


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_policy_is_really_applied(backend):
    seen = _validate(backend, ("amp-fp16", "fp32", "pure-bf16", "amp-bf16"))
    for p, r in seen.items():
        assert r["error"] == "", r
        *hidden, pinned = r["layers"].items()
        assert pinned[1] == ["float32", "float32"]  # the output Activation(dtype='float32') stays float32
        compute = {"fp32": "float32", "amp-fp16": "float16", "amp-bf16": "bfloat16", "pure-bf16": "bfloat16"}[p]
        variables = "bfloat16" if p == "pure-bf16" else "float32"
        assert [d for name, d in hidden if name.startswith("dense")] == [[compute, variables]] * 2, (p, r["layers"])
        assert (r["optimizer"] == "LossScaleOptimizer") == (p == "amp-fp16")
        assert r["params"] == MLP_PARAMS


# Every measure on every mode on Keras's default backend; the others run the two policies that differ most (the
# loss-scaled one and float32) on the measures whose code paths are the backend's own (a cell is a process importing
# its backend: each costs seconds in CI).
CLI_RUNS = {"torch": ("fp32,amp-fp16,amp-bf16", "throughput,memory,converge,inference"),
            "tensorflow": ("fp32,amp-fp16", "throughput,memory,inference"),
            "jax": ("fp32,amp-fp16", "throughput,memory,inference")}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_keras_file_benchmarked_from_the_cli(backend, tmp_path):
    out = tmp_path / "run.json"
    precisions, measures = CLI_RUNS[backend]
    code, stdout, err = cli("run", "--device", "cpu", "--model", f"{MODELS}:mlp", "--input-shape", "20",
                            "--num-classes", "2", "--keras-backend", backend, "--precisions", precisions,
                            "--preset", "tiny", "--measure", measures, "--steps", "4",
                            "--warmup", "2", "--converge-steps", "12", "--seeds", "2", "--db", str(tmp_path / "r.db"),
                            "--json", str(out), "--no-report")
    assert code == 0, (stdout, err)
    rows = {r["precision"]: r for r in json.loads(out.read_text())["rows"]}
    assert set(rows) == set(precisions.split(","))
    for p, r in rows.items():
        assert r["status"] == "ok", r["reason"]
        assert (r["framework"], r["keras_backend"], r["keras_version"]) == ("keras", backend, "3.15.1")
        assert r["keras_policy"] == {"fp32": "float32", "amp-fp16": "mixed_float16", "amp-bf16": "mixed_bfloat16"}[p]
        assert r["loss_scaled"] is (p == "amp-fp16")
        assert r["loss_scale"] == (2.0 ** 15 if p == "amp-fp16" else 1.0)  # (no overflow in 6 steps of this MLP)
        assert r["keras_output_dtype"] == "float32" and r["memory_source"] == "cpu rss growth"
        assert r["keras_params"] == MLP_PARAMS and r["weights_bytes"] == 4 * MLP_PARAMS  # float32 variables
        # the throughput from the whole timed span agrees with the one from the per-step times (an independent sum)
        assert r["samples_per_s"] == pytest.approx(r["batch_size"] * 1e3 / r["step_ms_mean"], rel=0.25)
        assert r["skipped_steps"] == 0 and math.isfinite(r["final_loss"])
        if "converge" in measures:
            conv = r["converge"]
            assert conv["steps"] == 12 and len(conv["final_losses"]) == 2 and not any(conv["diverged"])
            assert all(0.0 <= m <= 1.0 for m in conv["metrics"])
            assert r["converge_verdict"] in (("baseline",) if p == "fp32" else ("parity", "worse", "better"))
        assert set(r["inference"]) == {"1", str(r["batch_size"])}
    assert rows["amp-fp16"]["math_mode"] == "fp16" and rows["fp32"]["math_mode"] == "fp32"
    assert "keras/" in stdout  # the framework (keras/<backend>), in the table's title


def test_keras_conv_dummy_is_the_torch_conv_dummy():
    from ampbench.frameworks.keras.workloads import CONV_DUMMY, CONV_DUMMY_BATCH, CONV_DUMMY_EPOCHS
    from ampbench.workloads import build_target
    from ampbench.workloads.data_options import DataOptions
    from ampbench.workloads.vision import CONV_DUMMY as TORCH_CONV_DUMMY
    from ampbench.workloads.vision import ConvDummy

    assert CONV_DUMMY == TORCH_CONV_DUMMY
    for preset in ("tiny", "small"):
        wl = build_target("conv-dummy", None, preset, DataOptions(), 0)
        assert (wl.batch_size, wl.epochs) == (CONV_DUMMY_BATCH[preset], CONV_DUMMY_EPOCHS[preset])
    spec = CellSpec.of(device="cpu", workload="keras-conv-dummy", preset="tiny", precision="fp32", batch_size=None,
                       keras_backend="torch")
    r = launcher(spec, 300).run(job("validate", spec))
    assert r["params"] == sum(p.numel() for p in ConvDummy(*CONV_DUMMY["tiny"][:2]).parameters())


def test_a_half_output_layer_is_warned_about(tmp_path):
    code, out, err = cli("run", "--device", "cpu", "--model", f"{MODELS}:half_output", "--input-shape", "20",
                         "--num-classes", "2", "--precisions", "fp32,amp-fp16", "--dry-run", "--db", str(tmp_path / "r.db"))
    assert code == 0, err
    # the fix is written for the layer the model has (it named a sigmoid Activation for every model)
    assert "warning:" in err and ("computes in float16 under mixed_float16: build it as layers.Dense(2, "
                                  "dtype='float32') so the output") in err, err


@pytest.mark.parametrize("model, extra, says", [
    ("not_a_model", [], "the factory returned list, not a keras.Model"),
    ("torch", ["--keras-backend", "torch"], "(a torch.nn.Module is measured as a PyTorch model: drop --keras-backend)"),
    ("mlp", ["--num-classes", "3"], "output has 2 units; --num-classes 3 needs 3"),
    ("mlp", ["-o", "colour=red"], "--model has no option colour (options: tokenizer, text, label)"),
    ("mlp", ["-o", "label=y"], "--option label=...: it applies to a CSV in --data-dir; there is none"),
])
def test_a_bad_keras_model_is_one_line_and_exit_2(model, extra, says, tmp_path):
    target = f"{HERE / 'torch_models.py'}:mlp" if model == "torch" else f"{MODELS}:{model}"
    args = ["--input-shape", "20", *(["--num-classes", "2"] if "--num-classes" not in extra else [])]
    code, out, err = cli("run", "--device", "cpu", "--model", target, *args, *extra, "--precisions", "fp32",
                         "--dry-run", "--db", str(tmp_path / "r.db"))
    assert code == 2, (out, err)
    assert says in err and err.count("\n") == 1


@pytest.mark.parametrize("precision, scaled", [("fp32", False), ("mixed_float16", True)])
def test_train_a_keras_model(precision, scaled, tmp_path):
    out = tmp_path / "train.json"
    code, stdout, err = cli("train", "--model", f"{MODELS}:mlp", "--input-shape", "20", "--num-classes", "2",
                            "-p", precision, "--preset", "small", "--epochs", "2", "--max-steps", "20", "--device", "cpu",
                            "--json", str(out))
    assert code == 0, (stdout, err)
    r = json.loads(out.read_text())
    # steps: 2 epochs x min(--max-steps 20, the split's batches): small = 4096 samples, a fifth held out, batch 64
    assert r["steps"] == 2 * min(20, (4096 - 4096 // 5) // 64) and len(r["history"]) == 2
    assert (r["framework"], r["keras_backend"], r["loss_scaled"]) == ("keras", "torch", scaled)
    assert r["keras_policy"] == ("mixed_float16" if scaled else "float32")
    assert r["loss_scale"] == (2.0 ** 15 if scaled else 1.0) and r["skipped_steps"] == 0
    assert r["history"][1]["loss"] < r["history"][0]["loss"] and r["test_accuracy"] > 0.8  # it learned
    for h in r["history"]:  # each epoch's loss printed as it ended
        assert f"epoch {h['epoch']}/2 loss {h['loss']:.4f}  loss scale {h['loss_scale']:g}" in stdout


@pytest.mark.parametrize("backend", BACKENDS[:2])
def test_a_keras_model_trains_on_the_data_dirs_table_and_images(backend, tmp_path):
    """--data-dir was refused for every Keras target ("the real-data readers feed PyTorch workloads"): a Keras --model
    trains on what a PyTorch model gets from the same readers, images channels-last, read in a process of its own on
    TensorFlow (the cell's never imports torch). Oracle: the same readers' arrays, on the PyTorch side."""
    import numpy as np

    from ampbench.workloads.user import write_real
    from tests.data.test_imagefolder import _folder

    table = tmp_path / "table"
    table.mkdir()
    rows = [(str(i % 5), "a" if i % 3 else "b", "yes" if i % 5 > 1 else "no") for i in range(60)]
    (table / "t.csv").write_text("n,city,label\n" + "".join(",".join(r) + "\n" for r in rows))
    out = tmp_path / "t.json"
    code, stdout, err = cli("train", "--model", f"{MODELS}:table", "--data-dir", str(table), "-p", "fp32", "--epochs",
                            "2", "--device", "cpu", "--keras-backend", backend, "--json", str(out))
    assert code == 0, (stdout, err)
    assert "t.csv: 60 rows, 3 features (city one-hot), label 'label' (2 classes)" in stdout
    assert json.loads(out.read_text())["framework"] == "keras"
    if backend == "torch":  # (-o label is the CSV reader's, the same for every backend: checked once)
        (table / "t.csv").write_text("n,outcome,city\n" + "".join(f"{r[0]},{r[2]},{r[1]}\n" for r in rows))
        code, stdout, err = cli("train", "--model", f"{MODELS}:table", "--data-dir", str(table), "-o", "label=outcome",
                                "-p", "fp32", "--epochs", "1", "--device", "cpu", "--keras-backend", backend)
        assert code == 0 and "label 'outcome' (2 classes)" in stdout, (stdout, err)  # (-o label: not the last column)
    pets = _folder(tmp_path / "pets", {"cat": 4, "dog": 4, "fox": 4}, size=(12, 16))
    code, stdout, err = cli("train", "--model", f"{MODELS}:small_conv", "--data-dir", str(pets), "-p", "fp32",
                            "--epochs", "1", "--device", "cpu", "--keras-backend", backend)
    assert code == 0 and "12 images of 3 classes" in stdout and "at 3x12x12" in stdout, (stdout, err)
    npz = tmp_path / "x.npz"
    said = write_real({"data": {"input_shape": (3, 12, 12), "vocab_size": None, "num_classes": None,
                                "num_outputs": None, "task": None}, "data_dir": str(pets), "where": "m",
                       "val_fraction": None, "options": {}, "out": str(npz), "channels_last": True})
    with np.load(npz) as f:
        assert f["x_train_0"].shape[1:] == (12, 12, 3) and said["data"]["num_classes"] == 3


def test_a_max_batch_trial_fits_by_its_measured_peak():
    spec = CellSpec.of(device="cpu", workload="keras-conv-dummy", preset="tiny", precision="fp32", batch_size=None,
                       keras_backend="torch", memory_budget=2**30, maxbatch_trial_steps=2)
    roomy = launcher(spec, 300).run(job("trial", spec, batch_size=8))
    assert roomy["fits"] is True and roomy["peak_bytes"] > 0, roomy
    tight = launcher(spec, 300).run(job("trial", spec.with_flat(memory_budget=roomy["peak_bytes"] // 2),
                                      batch_size=8))
    assert tight["fits"] is False and not tight.get("failed") and "MiB allowed" in tight["reason"], tight


def test_a_cell_over_the_budget_ends_as_a_pytorch_one_does():
    """oom, with what was measured so far, and nothing more measured (it marked oom and went on to converge)."""
    spec = CellSpec.of(device="cpu", workload="keras-conv-dummy", preset="tiny", precision="fp32", batch_size=8,
                       keras_backend="torch", memory_budget=1, measures=("throughput", "memory", "converge"), steps=2,
                       warmup=1, converge_steps=5, seeds=1)
    row = launcher(spec, 300).run(job("cell", spec))
    assert row["status"] == "oom" and "memory peak" in row["reason"] and "> --memory-budget 0 MiB" in row["reason"]
    assert row["samples_per_s"] and row["peak_allocated_bytes"] > 1 and row["converge"] is None, row


def test_out_of_memory_is_told_apart_on_every_backend():
    from ampbench.frameworks.keras.memory import is_oom

    class ResourceExhaustedError(Exception):
        pass

    assert is_oom(ResourceExhaustedError("OOM when allocating tensor with shape[50,128,255,255]"))
    assert is_oom(RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8.00GiB"))
    assert is_oom(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert not is_oom(ValueError("Input 0 of layer dense is incompatible with the layer"))


def test_a_compiled_factory_keeps_its_own_optimizer():
    spec = CellSpec.of(device="cpu", workload=None, model=f"{MODELS}:compiled", preset="tiny", precision="fp32",
                       batch_size=None, input_shape="20", num_classes=2, keras_backend="torch")
    r = launcher(spec, 300).run(job("validate", spec))
    assert r["error"] == "" and r["optimizer"] == "SGD", r


@pytest.mark.parametrize("make, code_wanted, says", [
    ("make_batch", 0, ""),
    ("make_three", 2, "return (inputs, targets), got tuple"),
])
def test_keras_batches_from_the_users_make_batch(make, code_wanted, says, tmp_path):
    code, out, err = cli("run", "--device", "cpu", "--model", f"{MODELS}:mlp", "--batches", f"{MODELS}:{make}",
                         "--precisions", "fp32", "--dry-run", "--db", str(tmp_path / "r.db"))
    assert code == code_wanted and says in err, (out, err)


@pytest.mark.parametrize("backend", BACKENDS[:1])  # (the arrays are made before any backend sees them)
def test_a_two_input_model_is_measured_from_a_tuple_of_arrays(backend, tmp_path):
    """make_batch returning ((a, b), y): every measure runs (was: numpy's 'inhomogeneous shape' in every cell)."""
    out = tmp_path / "run.json"
    code, stdout, err = cli("run", "--device", "cpu", "--model", f"{MODELS}:two_inputs", "--batches",
                            f"{MODELS}:make_tuple", "--keras-backend", backend, "--precisions", "amp-fp16",
                            "--preset", "tiny", "--measure", "throughput,memory,converge,inference", "--steps", "3",
                            "--warmup", "1", "--converge-steps", "6", "--seeds", "1", "--db", str(tmp_path / "r.db"),
                            "--json", str(out), "--no-report")
    assert code == 0, (stdout, err)
    rows = {r["precision"]: r for r in json.loads(out.read_text())["rows"]}
    params = (8 * 16 + 16) + (4 * 8 + 8) + (24 * 2 + 2)  # counted by hand from the layers
    assert set(rows) == {"amp-fp16"}
    for r in rows.values():
        assert r["status"] == "ok", r["reason"]
        assert r["keras_params"] == params and math.isfinite(r["final_loss"])
        assert r["converge"]["steps"] == 6 and set(r["inference"]) == {"1", str(r["batch_size"])}


STRUCTURES = [
    ("two_inputs", "make_list", {}),
    ("two_inputs", "make_dict", {}),
    ("two_outputs", "make_two_targets", {}),  # a loss per output (the factory's compile)
    ("two_regressions", "make_two_values", {"loss": f"{MODELS}:mse"}),  # one loss for both outputs
]


def run_cells(payload: dict) -> dict:
    """A job: several Keras cells one after another in this process (each structure's cell, as a run's own process
    would measure it; one backend import for all of them)."""
    from ampbench.bench.jobs import cell

    return {"rows": [cell({"spec": d}) for d in payload["specs"]]}


def test_inputs_and_outputs_as_lists_and_dicts_train():
    from ampbench.launch import Job

    specs = [CellSpec.of(device="cpu", workload=None, model=f"{MODELS}:{model}", batches=f"{MODELS}:{make}", **extra,
                         preset="tiny", precision="amp-bf16", batch_size=None, keras_backend="torch", steps=2, warmup=1,
                         measures=("throughput",)) for model, make, extra in STRUCTURES]
    r = launcher(specs[0], 600).run(Job(f"{__name__}:run_cells", {"specs": [s.to_dict() for s in specs]}))
    assert "_failed" not in r, r
    for (model, make, _), row in zip(STRUCTURES, r["rows"], strict=True):
        assert row["status"] == "ok" and math.isfinite(row["final_loss"]), (model, make, row["reason"])


@pytest.mark.parametrize("model, make, says", [
    ("two_inputs", None, "the model has 2 inputs; give --batches file.py:make_batch"),
    ("two_regressions", "make_two_values", "the model has 2 outputs; compile it in the factory"),
    ("two_inputs", "ragged", "the first dimension of every array must be the batch size"),
])
def test_structures_that_cannot_be_measured_are_one_line(model, make, says, tmp_path):
    args = ["--batches", f"{MODELS}:{make}"] if make else []
    code, out, err = cli("run", "--device", "cpu", "--model", f"{MODELS}:{model}", *args, "--precisions", "fp32",
                         "--dry-run", "--db", str(tmp_path / "r.db"))
    assert code == 2 and says in err and err.count("\n") == 1, (out, err)


def test_a_keras_model_built_in_another_module_is_a_keras_target(tmp_path):
    """elsewhere.py never imports keras; the object its factory returns is a keras.Model: measured as one."""
    from ampbench.bench import RunConfig
    from ampbench.frameworks.keras.workloads import imports_keras

    target = f"{HERE / 'elsewhere.py'}:build"
    assert not imports_keras(target)
    cells = RunConfig.from_strings(device="cpu", model=target, precisions="fp32", input_shape="20", num_classes=2).cells()
    assert {c.backend for c in cells} == {"torch"}
    out = tmp_path / "run.json"
    code, stdout, err = cli("run", "--device", "cpu", "--model", target, "--input-shape", "20", "--num-classes", "2",
                            "--precisions", "fp32", "--preset", "tiny", "--measure", "throughput", "--steps", "2",
                            "--warmup", "1", "--db", str(tmp_path / "r.db"), "--json", str(out), "--no-report")
    assert code == 0, (stdout, err)
    (r,) = json.loads(out.read_text())["rows"]
    assert r["status"] == "ok" and r["framework"] == "keras" and r["keras_params"] == MLP_PARAMS


def test_a_keras_run_is_estimated(monkeypatch):
    """A Keras-only run gets an estimate from its own backend's measurement (was: a spinner, then nothing), its
    max-batch search measured (was: "not counted", the trials' batch unknown; then one trial of a model built afresh
    took longer than the trials may, and the search was still not counted): the measurement's trials from the MLP's
    batch of 8 reach the limit, 64 (8, 32, then 2x: 4x would pass it). Whether a search is then priced depends on its
    peaks growing, which a CPU's resident high-water mark in one process may hide (said "not counted" then)."""
    from ampbench.bench import RunConfig
    from ampbench.bench import estimate as est
    from ampbench.bench.estimate import ENV_OFF, run_estimate

    monkeypatch.delenv(ENV_OFF, raising=False)
    measured: list[dict] = []
    priced = est.estimate

    def seen(cells, r, start_s, own=None, *args, **kwargs):  # (the Keras measurement, as the estimate is given it)
        measured.extend((own or {}).values())
        return priced(cells, r, start_s, own, *args, **kwargs)

    monkeypatch.setattr(est, "estimate", seen)
    config = RunConfig.from_strings(device="cpu", model=f"{MODELS}:mlp", input_shape="20", num_classes=2,
                                    precisions="fp32,amp-bf16", preset="tiny", measure="throughput,maxbatch", steps=3,
                                    warmup=1, memory_budget="2GiB", maxbatch_limit=64)
    e = run_estimate(config, isolate=True)
    assert e is not None and e.seconds > 0 and "Keras" not in e.text()
    (keras,) = measured
    (target,) = keras["targets"].values()
    for precision in ("fp32", "amp-bf16"):
        assert [p[0] for p in target["search"][precision]["points"]] == [8, 32, 64], target["search"]
