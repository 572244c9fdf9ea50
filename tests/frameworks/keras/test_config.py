"""Keras targets in a run's config: detection, the backend option, what is refused (in-process, no keras import)."""

from pathlib import Path

import pytest

from ampbench.bench.config import RunConfig
from ampbench.errors import AmpbenchError
from ampbench.frameworks.keras import backends
from ampbench.frameworks.keras.policy import POLICIES, policy_of, refusal
from ampbench.frameworks.keras.workloads import imports_keras
from ampbench.precision import list_precisions, resolve
from tests.conftest import cli

HERE = Path(__file__).parent
KERAS_MODEL = f"{HERE / 'models.py'}:mlp"
TORCH_MODEL = f"{HERE / 'torch_models.py'}:mlp"


def test_keras_names_are_aliases_of_the_same_recipes():
    assert [resolve(n) for n in ("float32", "mixed_float16", "mixed_bfloat16", "float16", "bfloat16")] == \
        ["fp32", "amp-fp16", "amp-bf16", "pure-fp16", "pure-bf16"]
    assert {p: policy_of(p) for p in POLICIES}["amp-fp16"] == "mixed_float16"


def test_every_mode_has_a_policy_or_a_reason():
    for p in list_precisions():
        assert (p in POLICIES) == (refusal(p) is None)
    assert "amp-fp16 (mixed_float16)" in refusal("master-fp16")
    assert "torchao" in refusal("fp8-rowwise")


def test_a_keras_model_is_told_from_its_source():
    assert imports_keras(KERAS_MODEL) and not imports_keras(TORCH_MODEL)
    cells = RunConfig.from_strings(device="cpu", model=KERAS_MODEL, precisions="fp32,mixed_float16",
                                   input_shape="20", num_classes=2).cells()
    assert {c.backend for c in cells} == {"torch"}  # (the default backend)
    assert [c.precision for c in cells if not c.closing] == ["fp32", "amp-fp16"]
    cells = RunConfig.from_strings(device="cpu", workloads="keras-conv-dummy,conv-dummy", preset="tiny",
                                   precisions="fp32", backend="tensorflow").cells()
    assert {c.workload: (c.framework, c.backend) for c in cells} == {"keras-conv-dummy": ("keras", "tensorflow"),
                                                                     "conv-dummy": ("torch", None)}


def test_the_backend_is_part_of_the_cell():
    one, = [c for c in RunConfig.from_strings(device="cpu", workloads="keras-conv-dummy", preset="tiny",
                                              precisions="fp32", backend="torch").cells()]
    two, = [c for c in RunConfig.from_strings(device="cpu", workloads="keras-conv-dummy", preset="tiny",
                                              precisions="fp32", backend="tensorflow").cells()]
    assert one.key() != two.key() and one.cell_id() != two.cell_id()
    assert one.cell_id().to_row()["framework"] == "keras"


@pytest.mark.parametrize("args, says", [
    (["--workloads", "keras-conv-dummy", "--keras-backend", "tensorflw"], "unknown backend. Did you mean 'tensorflow'?"),
    (["--workloads", "conv-dummy", "--keras-backend", "tensorflow"], "applies to Keras models"),
    (["--workloads", "keras-conv-dummy", "--precisions", "fp32,master-fp16"], "master-fp16 is not a Keras recipe"),
    (["--workloads", "keras-conv-dummy", "--precisions", "fp8-tensorwise"], "fp8-tensorwise is not a Keras recipe"),
    (["--workloads", "keras-conv-dummy", "--compile", "on"],
     "--compile/--memory-format/--cuda-graphs/--checkpointing is a PyTorch option"),
    (["--workloads", "keras-conv-dummy", "--strategy", "ddp"], "--strategy is a PyTorch option"),
    (["--workloads", "keras-conv-dummy", "--loss-scale", "static:128"], "dynamic only"),
    (["--model", KERAS_MODEL, "--input-shape", "20", "--num-classes", "2", "--precisions", "master-bf16"],
     "master-bf16 is not a Keras recipe"),
])
def test_bad_keras_input_is_one_line_and_exit_2(args, says, tmp_path):
    code, out, err = cli("run", "--device", "cpu", "--preset", "tiny", "--db", str(tmp_path / "r.db"), *args)
    assert code == 2, (out, err)
    assert says in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_missing_backend_names_the_install(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "jax" else real(name, *a))
    problem = backends.missing("jax")
    assert problem == ("--keras-backend jax: jax is not installed; install with: pip install 'ampbench[keras]' jax  "
                       "(jax[cuda12] on a GPU)")
    with pytest.raises(AmpbenchError, match="jax is not installed"):
        backends.check_installed("jax")


@pytest.mark.parametrize("command, args, says", [
    ("diagnose", ["keras-conv-dummy", "--checks", "profile"], "--checks profile: the profile check reads torch.profiler"),
    ("diagnose", ["conv-dummy", "--keras-backend", "torch"], "--keras-backend torch applies to Keras models"),
    ("train", ["keras-conv-dummy", "--compile", "on"], "--compile is a PyTorch option: Keras compiles its own train step"),
    ("train", ["keras-conv-dummy", "--loss-scale", "static:8"], "--loss-scale is a PyTorch option"),
    ("train", ["keras-conv-dummy", "--checkpoint", "ck"], "--checkpoint/--resume is a PyTorch option"),
    ("train", ["keras-conv-dummy", "--max-grad-norm", "1"], "--max-grad-norm is a PyTorch option: Keras clips in its "
     "optimizer: build your model's optimizer with global_clipnorm"),
    ("train", ["keras-conv-dummy", "--checkpointing", "blocks"], "--checkpointing is a PyTorch option: it recomputes "
     "PyTorch modules' activations"),
    ("train", ["keras-conv-dummy", "--grad-accum", "4"],
     "--grad-accum is a PyTorch option: Keras 3 accumulates in its optimizer: build your model's optimizer with "
     "gradient_accumulation_steps=N"),
    ("train", ["keras-conv-dummy", "-p", "master-fp16"], "master-fp16 is not a Keras recipe"),
    ("train", ["keras-conv-dummy", "-p", "tf32"], "--precision tf32: TF32 is an NVIDIA Tensor Core math mode"),
    ("train", ["conv-dummy", "--keras-backend", "jax"], "--keras-backend jax applies to Keras models"),
    ("train", ["keras-conv-dummy", "--keras-backend", "mxnet"], "--keras-backend 'mxnet': unknown backend"),
    ("train", ["keras-conv-dummy", "--input-shape", "20"], "--input-shape applies to --model"),
    ("train", ["keras-conv-dummy", "--data-dir", "."], "--data-dir: keras-conv-dummy trains on its own random images "
     "by design; a Keras --model takes --data-dir"),
    ("train", ["keras-conv-dummy", "-o", "label=y"], "--option is a PyTorch option: workload options are PyTorch "
     "workloads' (a Keras --model takes a CSV's: label, text, tokenizer)"),
])
def test_train_and_diagnose_say_what_they_take_of_a_keras_model(command, args, says, tmp_path):
    code, out, err = cli(command, *args, "--device", "cpu", *(["--db", str(tmp_path / "r.db")] if command == "diagnose" else []))
    assert code == 2 and says in err and err.count("\n") == 1, (out, err)


def test_keras_workloads_are_listed():
    code, out, _ = cli("list", "workloads")
    assert code == 0 and "keras-conv-dummy" in out


def test_ratios_compare_a_keras_row_with_fp32_on_its_own_backend():
    from ampbench.cells import CellSpec
    from ampbench.store.derive import derive

    def row(precision: str, backend: str | None, sps: float) -> dict:
        spec = CellSpec.of(device="cpu", workload="keras-conv-dummy" if backend else "conv-dummy", preset="tiny",
                           precision=precision, batch_size=8, keras_backend=backend)
        r = spec.cell_id().to_row()
        r.update(run_id="r", device="cpu", device_name="cpu", status="ok", samples_per_s=sps, repeat=0)
        return r

    rows = derive([row("fp32", "torch", 100.0), row("fp32", "tensorflow", 400.0), row("amp-fp16", "tensorflow", 200.0),
                   row("amp-fp16", "torch", 50.0), row("fp32", None, 1000.0)])
    got = {(r["keras_backend"], r["precision"]): r["speedup_vs_fp32"] for r in rows}
    assert got[("tensorflow", "amp-fp16")] == pytest.approx(0.5) and got[("torch", "amp-fp16")] == pytest.approx(0.5)
    assert {r["framework"] for r in rows} == {"keras", "torch"}


def test_the_float32_output_fix_is_written_for_the_layer_the_model_has() -> None:
    """Stand-ins named as Keras's layers (the fix reads the class name, units and activation): a logits Dense is not
    told to add a sigmoid."""
    from ampbench.frameworks.keras.workloads import float32_output

    def linear(x):  # type: ignore[no-untyped-def]
        return x

    def sigmoid(x):  # type: ignore[no-untyped-def]
        return x

    def softmax(x):  # type: ignore[no-untyped-def]
        return x

    Dense = type("Dense", (), {})
    Activation = type("Activation", (), {})
    Flatten = type("Flatten", (), {})
    logits, binary, soft = Dense(), Dense(), Activation()
    logits.units, logits.activation = 4, linear
    binary.units, binary.activation = 1, sigmoid
    soft.activation = softmax
    assert float32_output(logits) == "build it as layers.Dense(4, dtype='float32')"
    assert float32_output(binary) == "build it as layers.Dense(1, activation='sigmoid', dtype='float32')"
    assert float32_output(soft) == "build it as layers.Activation('softmax', dtype='float32')"
    assert float32_output(Flatten()) == "add layers.Activation('linear', dtype='float32') after it (Flatten)"
