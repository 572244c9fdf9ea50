"""Your model, any shape: vector MLP, token transformer, regression, LM-shaped, --batches dict, --loss;
through `run` (throughput, memory, converge), `train` (the metric improves) and `diagnose`, in fp32 and a
half mode; one-line errors (exit 2) for every misuse, the same in run, train and diagnose."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ampbench.diagnose import diagnose
from ampbench.errors import AmpbenchError
from ampbench.frameworks.torch.train import TrainConfig, train
from ampbench.workloads import create_user_workload, create_workload
from ampbench.workloads.tasks import DataSpec
from tests.conftest import in_process

M = str(Path(__file__).with_name("user_models.py"))

# name: (factory, CLI data options, create_user_workload keywords, metric, higher is better)
SHAPES = {
    "vector-mlp": ("mlp", ["--input-shape", "20", "--num-classes", "3"], dict(input_shape="20", num_classes=3),
                   "accuracy", True),
    "token-transformer": ("token_transformer", ["--input-shape", "24", "--vocab-size", "300", "--num-classes", "2"],
                          dict(input_shape="24", vocab_size=300, num_classes=2), "accuracy", True),
    "regression": ("regressor", ["--input-shape", "16,8", "--num-outputs", "2"], dict(input_shape="16,8", num_outputs=2),
                   "rmse", False),
    "lm": ("causal_lm", ["--input-shape", "16", "--vocab-size", "64", "--task", "lm"],
           dict(input_shape="16", vocab_size=64, task="lm"), "perplexity", False),
    "batches-dict": ("two_inputs", ["--batches", f"{M}:make_batch"], dict(batches=f"{M}:make_batch"), "accuracy", True),
}


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "ampbench", *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


@pytest.mark.parametrize("shape", SHAPES)
def test_must_show_run_measures_every_shape_in_fp32_and_bf16(shape: str, tmp_path: Path) -> None:
    factory, args, _, metric, _ = SHAPES[shape]
    out = tmp_path / "run.json"
    r = cli("run", "--model", f"{M}:{factory}", *args, "--preset", "tiny", "--precisions", "fp32,amp-bf16",
            "--measure", "throughput,memory,converge", "--steps", "3", "--warmup", "1", "--converge-steps", "8",
            "--seeds", "1", "--no-isolate", "--no-report", "--db", str(tmp_path / "r.db"), "--json", str(out))
    assert r.returncode == 0, r.stderr
    rows = json.loads(out.read_text())["rows"]
    assert [(x["precision"], x["status"]) for x in rows] == [("fp32", "ok"), ("amp-bf16", "ok")], rows
    for row in rows:
        assert row["workload"] == f"user:{M}:{factory}" and row["preset"] == "tiny"
        assert row["samples_per_s"] > 0 and row["peak_allocated_bytes"] > 0
        assert row["metric_name"] == metric and row["converge"] and row["converge_verdict"] is not None


@pytest.mark.parametrize("precision", ["fp32", "amp-bf16"])
@pytest.mark.parametrize("shape", SHAPES)
def test_must_show_train_improves_the_metric(shape: str, precision: str) -> None:
    factory, _, kw, metric, higher = SHAPES[shape]
    before = train(create_user_workload(f"{M}:{factory}", preset="small", **kw),
                   TrainConfig(precision=precision, epochs=1, max_steps_per_epoch=1))
    after = train(create_user_workload(f"{M}:{factory}", preset="small", **kw),
                  TrainConfig(precision=precision, epochs=1, max_steps_per_epoch=80))
    assert before.metric_name == after.metric_name == metric
    assert before.test_metric is not None and after.test_metric is not None
    gain = after.test_metric / before.test_metric if higher else before.test_metric / after.test_metric
    assert gain > 1.08, (before.test_metric, after.test_metric)
    assert after.skipped_steps == 0


@pytest.mark.parametrize("shape", SHAPES)
def test_must_show_diagnose_runs_on_user_models(shape: str) -> None:
    factory, _, kw, _, _ = SHAPES[shape]
    d = diagnose(lambda: create_user_workload(f"{M}:{factory}", preset="tiny", **kw), "amp-bf16", steps=3,
                 preset="tiny", checks=("nonfinite", "gradients", "tensorcore"), name=factory)
    assert d.findings and d.precision == "amp-bf16"


def test_diagnose_cli_takes_the_same_options(tmp_path: Path) -> None:
    r = cli("diagnose", "--model", f"{M}:causal_lm", "--input-shape", "16", "--vocab-size", "64", "--task", "lm",
            "--preset", "tiny", "--steps", "2", "--checks", "nonfinite,tensorcore", "-p", "fp32", "--db",
            str(tmp_path / "d.db"))
    assert r.returncode == 0, r.stderr
    assert "user:" in r.stdout and "finding" in r.stdout


def test_batches_dict_is_called_by_keyword_and_the_task_is_inferred() -> None:
    wl = create_user_workload(f"{M}:two_inputs", preset="tiny", batches=f"{M}:make_batch")
    assert wl.input_names == ("feats", "ids") and wl.metric is not None and wl.metric.name == "accuracy"
    assert len(wl.train_data) + len(wl.test_data) == 64  # the tiny preset's samples, in batches of 8
    reg = create_user_workload(f"{M}:mlp", preset="tiny", batches=f"{M}:make_regression_batch", loss=f"{M}:l1_loss")
    assert reg.metric is not None and reg.metric.name == "loss" and not reg.metric.higher_is_better
    with pytest.raises(AmpbenchError, match=r"output \(2, 2\) is not \(2, 3\) predictions"):
        create_user_workload(f"{M}:linear2", preset="tiny", batches=f"{M}:make_regression_batch")
    # A model taking the dict whole fails with the convention named: keyword arguments, the keys in order.
    with pytest.raises(AmpbenchError, match=r"feats=\(2, 8\), ids=\(2,\) failed: TypeError: .*check --batches; a dict "
                                            r"batch is called as model\(\*\*inputs\): forward\(feats, ids\)"):
        create_user_workload(f"{M}:mlp", preset="tiny", batches=f"{M}:make_batch")


def test_synthetic_token_data_stay_in_the_vocabulary_and_learnable() -> None:
    wl = create_user_workload(f"{M}:token_transformer", input_shape="24", vocab_size=300, num_classes=2, preset="tiny")
    ids = wl.train_data.inputs[0]
    assert ids.dtype == torch.int64 and ids.shape[1:] == (24,) and int(ids.min()) >= 1 and int(ids.max()) < 300
    lm = create_user_workload(f"{M}:causal_lm", input_shape="16", vocab_size=64, task="lm", preset="tiny")
    x, y = lm.train_data.inputs[0], lm.train_data.targets
    assert torch.equal(x[:, 1:], y[:, :-1])  # next-token targets


def test_presets_apply_to_user_workloads() -> None:
    assert len(create_user_workload(f"{M}:mlp", input_shape="20", num_classes=3, preset="tiny").train_data) < \
        len(create_user_workload(f"{M}:mlp", input_shape="20", num_classes=3, preset="small").train_data)
    assert create_user_workload(f"{M}:sized", preset="paper").preset == "paper"
    assert len(create_user_workload(f"{M}:sized", preset="tiny").train_data) == 16
    assert create_user_workload(f"{M}:unsized").preset == "custom"
    with pytest.raises(AmpbenchError, match="takes no preset argument"):
        create_user_workload(f"{M}:unsized", preset="tiny")


def test_train_header_names_the_data_and_preset() -> None:
    r = cli("train", "--model", f"{M}:mlp", "--input-shape", "20", "--num-classes", "3", "--preset", "tiny",
            "-p", "fp32", "--max-steps", "2")
    assert r.returncode == 0, r.stderr
    assert "synthetic features 20 -> 3 classes, preset tiny" in r.stdout
    r = cli("train", "--model", f"{M}:unsized", "-p", "fp32", "--max-steps", "2")
    assert r.returncode == 0, r.stderr
    assert "unsized (preset custom)" in r.stdout and "(," not in r.stdout


BAD = [
    (["--model", f"{M}:mlp", "--input-shape", "20", "--num-classes", "4"], "output (2, 3) is not (batch, 4) logits"),
    (["--model", f"{M}:mlp", "--input-shape", "21", "--num-classes", "3"], "forward on a batch of shape (2, 21) failed"),
    (["--model", f"{M}:mlp", "--input-shape", "20"], "give --num-classes N"),
    (["--model", f"{M}:mlp", "--input-shape", "20", "--task", "lm"], "--task lm needs --vocab-size"),
    (["--model", f"{M}:mlp", "--input-shape", "20", "--task", "rank"], "--task 'rank': choose one of"),
    (["--model", f"{M}:mlp", "--input-shape", "20", "--num-classes", "3", "--num-outputs", "1"], "not both"),
    (["--model", f"{M}:causal_lm", "--input-shape", "16", "--vocab-size", "50", "--task", "lm"],
     "is not (batch, 16, 50) next-token logits"),
    (["--model", f"{M}:causal_lm", "--input-shape", "16,2", "--vocab-size", "64", "--task", "lm"],
     "--task lm takes one sequence length"),
    (["--model", f"{M}:token_transformer", "--input-shape", "24", "--vocab-size", "2", "--num-classes", "2"],
     "too small for 2 classes"),
    (["--model", f"{M}:two_inputs", "--batches", f"{M}:nope"], "has no attribute 'nope'"),
    (["--model", f"{M}:two_inputs", "--batches", f"{M}:make_batch", "--input-shape", "8"], "--batches makes the data"),
    (["--model", f"{M}:unsized", "--input-shape", "4"], "returns a Workload"),
    (["--model", f"{M}:mlp", "--input-shape", "20", "--num-classes", "3", "-o", "size=2"], "has no option size"),
    (["--model", f"{M}:mlp", "--input-shape", "20", "--num-classes", "3", "-o", "tokenizer=bpe"], "there is none"),
    (["--model", f"{M}:mlp", "--input-shape", "20", "--num-classes", "3", "-o", "label=stars"],
     "--option label=...: it applies to a CSV in --data-dir; there is none"),
    (["--loss", f"{M}:l1_loss"], "apply to --model only"),
]


EVERY_COMMAND = BAD[:4] + BAD[-3:]  # the rest go through the same checks: train only, to keep CI fast


@pytest.mark.parametrize("command", ["run", "train", "diagnose"])
@pytest.mark.parametrize("args,expect", EVERY_COMMAND)
def test_bad_user_input_one_line_exit_2_in_every_command(command: str, args: list[str], expect: str,
                                                         tmp_path: Path) -> None:
    extra = ["--db", str(tmp_path / "r.db")] if command != "train" else []
    if command == "run" and args[0] == "--loss":
        args = ["--workloads", "mnist-cnn", *args]
    elif args[0] == "--loss":
        args = ["mnist-cnn", *args]
    r = in_process(command, *args, "--preset", "tiny", *extra)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert expect in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parametrize("args,expect", [b for b in BAD if b not in EVERY_COMMAND])
def test_bad_user_input_one_line_exit_2(args: list[str], expect: str) -> None:
    r = in_process("train", *args, "--preset", "tiny")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert expect in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_data_options_refused_for_registered_workloads() -> None:
    with pytest.raises(AmpbenchError, match="for --model and the hf:/timm: adapters, not for mnist-cnn"):
        create_workload("mnist-cnn", "tiny", data=DataSpec.of(input_shape="20"))
    r = in_process("run", "--workloads", "mnist-cnn", "--vocab-size", "10", "--preset", "tiny")
    assert r.returncode == 2 and "--vocab-size applies to --model" in r.stderr


def test_run_help_shows_one_example_per_shape() -> None:
    r = cli("run", "--help")
    assert r.returncode == 0
    for text in ("--input-shape 20 --num-classes 2", "--input-shape 3,224,224", "--vocab-size 30522",
                 "--num-outputs 3", "--task lm", "--batches m.py:make_batch"):
        assert text in r.stdout, text


needs_hf = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                              reason="transformers not installed (pip install 'ampbench[hf]')")


@needs_hf
def test_hf_causal_lm_and_classifier_take_token_inputs() -> None:
    gpt = create_workload("hf:gpt2", "tiny", data=DataSpec.of(task="lm", vocab_size=128, input_shape="16"),
                          n_layer=1, n_embd=32, n_head=2)
    assert gpt.metric is not None and gpt.metric.name == "perplexity"
    r = train(gpt, TrainConfig(precision="amp-bf16", epochs=1, max_steps_per_epoch=3))
    assert r.test_metric is not None and r.skipped_steps == 0
    bert = create_workload("hf:bert", "tiny", data=DataSpec.of(num_classes=3), num_hidden_layers=1, hidden_size=32,
                           num_attention_heads=2, intermediate_size=64)
    assert int(bert.train_data.inputs[0].max()) < 30522  # the config's vocabulary
    out = bert.call_model(bert.model, bert.example_batch(2)[0], prepared=True)
    assert out.shape == (2, 3)
    with pytest.raises(AmpbenchError, match="has no field 'nonsense'"):
        create_workload("hf:bert", "tiny", nonsense=1)


@needs_hf
def test_a_user_factory_s_hf_model_trains_on_the_logits_of_its_model_output() -> None:
    """A factory returning transformers' BertForSequenceClassification was refused ("the model returned
    SequenceClassifierOutput, not a tensor") unless a --loss read it; its logits are taken, as hf: takes them.
    Oracle: the inner model's own logits. In a fresh process, building it printed torch's pytree warnings about
    torchao (imported by transformers) above the command's output."""
    from ampbench.workloads.user import OutputLogits

    wl = create_user_workload(f"{M}:hf_classifier", input_shape="12", vocab_size=100, num_classes=3, preset="tiny")
    assert isinstance(wl.model, OutputLogits) and "the logits of its SequenceClassifierOutput" in wl.description
    wl.model.eval()
    (ids,), _ = wl.example_batch(2)
    assert torch.equal(wl.call_model(wl.model, (ids,), prepared=True), wl.model.inner(ids).logits)
    r = subprocess.run([sys.executable, "-m", "ampbench", "train", "--model", f"{M}:hf_classifier", "--input-shape",
                        "12", "--vocab-size", "100", "--num-classes", "3", "--preset", "tiny", "--max-steps", "2",
                        "--device", "cpu"], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, COLUMNS="200"))
    assert r.returncode == 0, r.stderr
    assert "_pytree" not in r.stderr + r.stdout and "2 steps trained" in r.stdout, (r.stdout, r.stderr)


def test_timm_adapter_builds_with_the_image_data_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """timm does not import with the CPU torch here: a stand-in module with timm's create_model signature."""
    import types

    calls = {}

    def create_model(name, pretrained=False, num_classes=1000, in_chans=3, **kw):
        calls.update(name=name, pretrained=pretrained, num_classes=num_classes, in_chans=in_chans, **kw)
        return torch.nn.Sequential(torch.nn.Conv2d(in_chans, 4, 3), torch.nn.AdaptiveAvgPool2d(1),
                                   torch.nn.Flatten(), torch.nn.Linear(4, num_classes))

    monkeypatch.setitem(sys.modules, "timm", types.SimpleNamespace(create_model=create_model))
    wl = create_workload("timm:tiny_net", "tiny", data=DataSpec.of(input_shape="1,16,16", num_classes=5), drop_rate=0.1)
    assert calls == dict(name="tiny_net", pretrained=False, num_classes=5, in_chans=1, drop_rate=0.1)
    assert wl.train_data.inputs[0].shape[1:] == (1, 16, 16) and wl.train_data.inputs[0].dtype == torch.uint8
    assert create_workload("timm:tiny_net", "tiny").train_data.inputs[0].shape[1:] == (3, 32, 32)
    with pytest.raises(AmpbenchError, match="is an image model"):
        create_workload("timm:tiny_net", "tiny", data=DataSpec.of(vocab_size=10, input_shape="8", num_classes=2))


def test_a_workload_factory_without_a_preset_is_refused_only_for_a_preset_the_user_gave(tmp_path) -> None:
    """run and predict pass "small" when the user gave no --preset: that is the cell's label, not a preset asked
    for; an explicit --preset is refused for a factory that takes none (as diagnose always did)."""
    from tests.conftest import cli

    f = tmp_path / "wf.py"
    f.write_text("import torch\nfrom torch import nn\nfrom ampbench.data.tensors import TensorData\n"
                 "from ampbench.workloads.base import Workload\n\n\ndef build():\n"
                 "    return Workload('mine', nn.Sequential(nn.Linear(8, 4)), TensorData((torch.randn(64, 8),), "
                 "torch.randint(0, 4, (64,))), batch_size=16)\n")
    db = str(tmp_path / "r.db")
    run = ["run", "--precisions", "fp32", "--steps", "2", "--warmup", "1", "--no-isolate", "--no-report"]
    for args in (run, ["predict", "--gpu", "t4", "--precisions", "fp32"]):
        code, _, err = cli(*args, "--model", f"{f}:build", "--db", db)
        assert code == 0, (args, err)
        code, _, err = cli(*args, "--model", f"{f}:build", "--preset", "small", "--db", db)
        assert code == 2 and "takes no preset argument" in err and len(err.strip().splitlines()) == 1, (args, err)


def test_a_model_kept_by_the_presets_check_is_built_again_on_meta_for_predict() -> None:
    """``predict`` checks the preset (the factory's model built on the CPU and kept for the next build), then builds
    on meta: the kept CPU model is not taken there -- it met meta data, failed its check, and the whole build was done
    again on the CPU with a real forward. Oracle: the devices of what the meta build holds, and nothing left kept."""
    from ampbench.workloads.factory import build_meta
    from ampbench.workloads.user_callables import MADE, made_by

    spec = f"{M}:mlp"
    kept = made_by(spec, "small", 0)
    assert next(kept.parameters()).device.type == "cpu" and (spec, "small", 0) in MADE
    wl = build_meta(lambda: create_user_workload(spec, input_shape="20", num_classes=3, preset="small"))
    assert all(p.is_meta for p in wl.model.parameters()) and wl.model is not kept
    assert (spec, "small", 0) not in MADE


def test_a_model_on_meta_is_checked_on_meta_though_its_data_are_drawn_on_the_cpu() -> None:
    """A module built on meta with data drawn on the CPU (a --data-dir's, a token chain's): the check forward takes
    the batch on meta -- a convolution refused the mix of devices, and the build fell back to the CPU."""
    from ampbench.workloads.user import build_module_workload

    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 3))
    wl = build_module_workload(model, "--model x", DataSpec.of(input_shape="3,8,8", num_classes=3))
    x, y = wl.example_batch(2)
    assert not x[0].is_meta and not y.is_meta  # (the premise: the data are real)
    assert all(p.is_meta for p in wl.model.parameters())
