"""train's and diagnose's requests: parsed and checked at construction (in-process; the CLI's one-line errors are
tests/bench/test_golden.py's)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from ampbench.command_options import DataArgs
from ampbench.command_requests import DiagnoseRequest, Launch, Target, TrainRequest
from ampbench.errors import AmpbenchError


def test_a_target_knows_its_framework_and_backend() -> None:
    t = Target("mnist-cnn", preset="tiny")
    assert (t.framework.name, t.backend, t.label, t.what) == ("torch", None, "mnist-cnn", "mnist-cnn")
    with pytest.raises(AmpbenchError, match="PyTorch model"):
        Target("mnist-cnn", backend_given="jax")


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"precision": "amp-fp17"}, "amp-fp17"),
    ({"resume": True}, "--resume needs --checkpoint"),
    ({"grad_reduce_dtype": "bf16"}, "--grad-reduce-dtype applies to --strategy"),
    ({"fp8_skip": "0"}, "fp8"),
    ({"device": "tpu"}, "tpu"),
])
def test_a_train_request_refuses_bad_options(kwargs: dict, says: str) -> None:
    with pytest.raises(AmpbenchError, match=says):
        TrainRequest(Target("mnist-cnn", preset="tiny"), **kwargs)


def test_a_train_request_checks_the_files_it_will_write(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(AmpbenchError, match="--json"):
        TrainRequest(Target("mnist-cnn", preset="tiny"), json_out=tmp_path / "file" / "out.json")
    with pytest.raises(AmpbenchError, match="--checkpoint"):
        TrainRequest(Target("mnist-cnn", preset="tiny"), checkpoint=tmp_path / "file")
    ok = TrainRequest(Target("mnist-cnn", preset="tiny"), json_out=tmp_path / "new" / "out.json", device="cpu")
    assert (ok.compile_mode, ok.fp8()) == ("off", None)
    assert (ok.plan.precision, ok.plan.device, ok.plan.compile) == ("amp-bf16", "cpu", "off")  # (torch: its TrainConfig)


def test_the_launch_and_the_data_options_are_checked() -> None:
    with pytest.raises(AmpbenchError, match="--nproc-per-node must be >= 1"):
        Launch("ddp", nproc=0)
    with pytest.raises(AmpbenchError, match="--nproc-per-node must be >= 1"):
        Launch(None, nproc=0)
    with pytest.raises(AmpbenchError, match="--nproc-per-node 4 applies with --strategy"):
        Launch(None, nproc=4)  # (was dropped unsaid: one process)
    with pytest.raises(AmpbenchError, match="--node-rank"):
        Launch(None, node_rank=1)
    with pytest.raises(AmpbenchError, match="--batches"):
        TrainRequest(Target("mnist-cnn", preset="tiny", data=DataArgs(batches="x.py:make").parsed()))


def test_a_diagnose_request_picks_the_checks_that_apply(tmp_path: Path) -> None:
    r = DiagnoseRequest(Target("mnist-cnn", preset="tiny"), precision="amp-fp16")
    assert "fp8" not in r.wanted and "nonfinite" in r.wanted and r.plan is None
    assert DiagnoseRequest(Target("mnist-cnn"), checks="policy, profile").wanted == ("policy", "profile")
    with pytest.raises(AmpbenchError, match="--checks gradients,activations"):
        DiagnoseRequest(Target("mnist-cnn"), checks="policy", tensorboard=tmp_path / "tb")
    with pytest.raises(AmpbenchError, match="--trace"):
        (tmp_path / "f").write_text("x")
        DiagnoseRequest(Target("mnist-cnn"), checks="profile", trace=tmp_path / "f" / "t.json")


@pytest.mark.skipif(importlib.util.find_spec("keras") is None or importlib.util.find_spec("tensorflow") is None,
                    reason="keras or tensorflow not installed")
def test_another_frameworks_target_gets_its_cell_checked_here() -> None:
    r = TrainRequest(Target("keras-conv-dummy", preset="tiny"), precision="amp-bf16", epochs=1, device="cpu")
    assert r.plan is not None and (r.plan.framework, r.plan.backend) == ("keras", r.target.backend)  # (its cell)
    assert r.target.backend is not None  # (the framework's default backend)
    with pytest.raises(AmpbenchError, match="--loss-scale"):
        TrainRequest(Target("keras-conv-dummy", preset="tiny"), loss_scale="dynamic")
    with pytest.raises(AmpbenchError, match="--epochs must be >= 1"):
        TrainRequest(Target("keras-conv-dummy", preset="tiny"), epochs=0)
    d = DiagnoseRequest(Target("keras-conv-dummy", preset="tiny", backend_given="tensorflow"), precision="amp-bf16")
    assert d.plan is not None and d.wanted


def test_an_adapter_given_as_a_model_is_the_workload_it_names() -> None:
    """``--model hf:gpt2`` said "cannot import module 'hf'": run, predict, train and diagnose take it as
    ``--workloads hf:gpt2`` does; a file or module factory stays a model, and both given stay both (refused later)."""
    from ampbench.command_options import CommandTarget, PredictTargets, TargetArgs

    assert (TargetArgs(model="hf:gpt2").workloads, TargetArgs(model="hf:gpt2").model) == ("hf:gpt2", None)
    assert (PredictTargets(model="timm:resnet18").workloads, PredictTargets(model="timm:resnet18").model) == (
        "timm:resnet18", None)
    assert (CommandTarget(model="HF:bert").workload, CommandTarget(model="HF:bert").model) == ("HF:bert", None)
    assert TargetArgs(model="m.py:cnn").model == "m.py:cnn" and TargetArgs(model="hf.py:cnn").model == "hf.py:cnn"
    both = TargetArgs(workloads="bert", model="hf:gpt2")
    assert (both.workloads, both.model) == ("bert", "hf:gpt2")


def test_predict_takes_an_hf_model_as_its_workload(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import cli

    code, out, err = cli("predict", "--gpu", "h100-sxm", "--model", "hf:gpt2", "--task", "lm", "--input-shape", "32",
                         "-o", "n_layer=1", "-o", "n_embd=64", "-o", "n_head=2", "--precisions", "fp32", "--db",
                         str(tmp_path / "r.db"))
    assert code == 0, err
    assert "hf:gpt2" in out and "cannot import module" not in out + err
