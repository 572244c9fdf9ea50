"""`ampbench train`: real MNIST, checkpoints/resume, user models, one-line errors."""

import json
import subprocess
from pathlib import Path

import pytest
import torch

from ampbench.errors import AmpbenchError
from ampbench.frameworks.torch.train import TrainConfig, train
from ampbench.workloads import create_user_workload, create_workload
from tests.conftest import in_process

MNIST = Path(__file__).resolve().parents[4] / "shared" / "data" / "mnist"
needs_mnist = pytest.mark.skipif(not MNIST.is_dir(), reason=f"{MNIST} not present")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``ampbench train`` in this process (a checkpoint written by one call and resumed by the next is a file either
    way; the command started as a real process: tests/workloads/test_user_models.py)."""
    return in_process(*args)


@needs_mnist
def test_mnist_real_data_modes_agree():
    """90 steps of the small preset's epoch (batch 64) on 8k real MNIST digits; tested on the held-out 2k.

    The full default run (4 epochs) is documented in README: 97.9-98.0% for all three modes.
    """
    acc = {}
    for precision in ("fp32", "amp-bf16", "master-fp16"):
        wl = create_workload("mnist-cnn", "small", data_dir=MNIST)
        assert len(wl.train_data) == 8000 and len(wl.test_data) == 2000
        r = train(wl, TrainConfig(precision=precision, epochs=1, evaluate_train=False, max_steps_per_epoch=90))
        acc[precision] = r.test_metric
    assert min(acc.values()) >= 0.93, acc  # (0.946-0.947 on an AVX2 EPYC; the agreement below is the claim)
    assert max(acc.values()) - min(acc.values()) <= 0.01, acc


def test_cli_train_json_and_resume(tmp_path):
    out = tmp_path / "r.json"
    r = cli("train", "mnist-cnn", "--preset", "tiny", "--precision", "O2", "--epochs", "2",
            "--checkpoint", str(tmp_path / "ck"), "--json", str(out))
    assert r.returncode == 0, r.stderr
    full = json.loads(out.read_text())
    assert full["precision"] == "master-fp16" and full["epochs"] == 2 and "test_accuracy" in full
    assert (tmp_path / "ck" / "checkpoint.pt").exists()
    torch.load(tmp_path / "ck" / "checkpoint.pt", weights_only=True)

    # 1 epoch, then resume to 2: same final loss as the uninterrupted run
    r1 = cli("train", "mnist-cnn", "--preset", "tiny", "--precision", "O2", "--epochs", "1",
             "--checkpoint", str(tmp_path / "ck2"))
    assert r1.returncode == 0, r1.stderr
    r2 = cli("train", "mnist-cnn", "--preset", "tiny", "--precision", "O2", "--epochs", "2",
             "--checkpoint", str(tmp_path / "ck2"), "--resume", "--json", str(tmp_path / "r2.json"))
    assert r2.returncode == 0, r2.stderr
    resumed = json.loads((tmp_path / "r2.json").read_text())
    assert resumed["resumed_from_epoch"] == 1
    assert resumed["final_loss"] == full["final_loss"]
    assert resumed["test_metric"] == full["test_metric"]


USER_MODEL = '''
import torch
from torch import nn

def CNN():
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 28 * 28, 10))

def Broken():
    raise RuntimeError("no weights here")

not_callable = 3
'''


@pytest.fixture
def user_file(tmp_path):
    p = tmp_path / "my_cnn.py"
    p.write_text(USER_MODEL)
    return p


def test_user_model_synthetic_and_real(user_file):
    wl = create_user_workload(f"{user_file}:CNN", "1,28,28", 10, preset="tiny")
    r = train(wl, TrainConfig(precision="amp-bf16", epochs=1))
    assert r.test_metric is not None
    if MNIST.is_dir():
        wl = create_user_workload(f"{user_file}:CNN", data_dir=MNIST, preset="tiny")
        assert len(wl.train_data) == 8000 and wl.train_data.inputs[0].shape[1:] == (1, 28, 28)


@needs_mnist
def test_cli_user_model_on_real_mnist(user_file, tmp_path):
    r = cli("train", "--model", f"{user_file}:CNN", "--input-shape", "1,28,28", "--num-classes", "10",
            "--data-dir", str(MNIST), "--precision", "amp-bf16", "--epochs", "1", "--max-steps", "5",
            "--json", str(tmp_path / "u.json"))
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "u.json").read_text())["test_accuracy"] is not None


@pytest.mark.parametrize("args,expect", [
    (["--model", "nope.py:CNN", "--input-shape", "1,28,28", "--num-classes", "10"], "does not exist"),
    (["--model", "{f}:Missing", "--input-shape", "1,28,28", "--num-classes", "10"], "has no attribute 'Missing'"),
    (["--model", "{f}:Broken", "--input-shape", "1,28,28", "--num-classes", "10"], "factory raised RuntimeError"),
    (["--model", "{f}:not_callable"], "is not callable"),
    (["--model", "no_such_pkg.mod:f"], "cannot import module"),
    (["--model", "{f}"], "expected path/to/file.py:factory"),
    (["--model", "{f}:CNN", "--input-shape", "3,32,32", "--num-classes", "10"], "forward on a batch of shape"),
    (["--model", "{f}:CNN", "--input-shape", "1,x,28", "--num-classes", "10"], "expected positive integers"),
    (["--model", "{f}:CNN"], "give --input-shape"),
    (["mnist-cnn", "--precision", "fp9"], "unknown precision 'fp9'"),
    (["mnist-cnn", "--precision", "tf32", "--preset", "tiny"], "tf32 cannot run on cpu"),
    (["mnist-cnm"], "unknown workload"),
    (["mnist-cnn", "--preset", "huge"], "unknown preset"),
    (["mnist-cnn", "--data-dir", "/nonexistent"], "does not exist"),
    (["--model", "{f}:CNN", "--data-dir", "{f}", "--input-shape", "1,28,28", "--num-classes", "10"],
     "is a file: give the directory that holds it"),  # (a CSV given as itself read "is not a directory")
    (["mnist-cnn", "--resume"], "--resume needs --checkpoint"),
    (["mnist-cnn", "--epochs", "0"], "--epochs 0: must be >= 1"),
    (["mnist-cnn", "--max-steps", "0"], "--max-steps 0: must be >= 1"),  # (it said "max-steps-per-epoch must ...")
    (["mnist-cnn", "--grad-accum", "0"], "--grad-accum 0: must be >= 1"),
    (["mnist-cnn", "--max-grad-norm", "0"], "--max-grad-norm 0.0: must be a finite number > 0"),
    (["mnist-cnn", "--precision", "amp-fp16", "--loss-scale", "static:abc"],
     "--loss-scale 'static:abc': not valid"),  # (it said "Passed MixedPrecision(...)", after announcing the model)
    (["bert", "-o", "task"], "expected KEY=VALUE"),
])
def test_cli_bad_input_one_line_exit_2(args, expect, user_file):
    r = in_process("train", *[a.replace("{f}", str(user_file)) for a in args])
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert expect in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not r.stdout.strip(), r.stdout  # (refused before anything is built and announced)


def test_corrupt_data_dir_is_one_line_error(tmp_path):
    (tmp_path / "t10k-images-idx3-ubyte.gz").write_bytes(b"not gzip at all")
    (tmp_path / "t10k-labels-idx1-ubyte.gz").write_bytes(b"nope")
    r = in_process("train", "mnist-cnn", "--data-dir", str(tmp_path))
    assert r.returncode == 2 and "t10k-images-idx3-ubyte.gz: cannot read" in r.stderr
    assert "Traceback" not in r.stderr


def test_user_factory_returning_a_workload(tmp_path):
    p = tmp_path / "wl.py"
    p.write_text(
        "import torch\nfrom ampbench import Workload\nfrom ampbench.data import TensorData\n"
        "def make():\n"
        "    x = torch.randn(32, 4); y = (x.sum(1) > 0).long()\n"
        "    return Workload(name='mine', model=torch.nn.Linear(4, 2), train_data=TensorData((x,), y), batch_size=8)\n"
    )
    wl = create_user_workload(f"{p}:make")
    assert wl.name == "mine"
    r = train(wl, TrainConfig(precision="fp32", epochs=2))
    assert r.steps == 8 and r.test_metric is None and r.train_metric is not None


def test_bad_resume_checkpoint(tmp_path):
    (tmp_path / "checkpoint.pt").write_bytes(b"garbage")
    wl = create_workload("mnist-cnn", "tiny")
    with pytest.raises(AmpbenchError, match="not a readable checkpoint"):
        train(wl, TrainConfig(precision="fp32", checkpoint_dir=tmp_path, resume=True))


def _train_cli(tmp_path, *extra):  # type: ignore[no-untyped-def]
    return cli("train", "mnist-cnn", "--preset", "tiny", "--precision", "fp32", "--max-steps", "2",
               "--checkpoint", str(tmp_path / "ck"), *extra)


def test_resume_that_would_train_nothing_says_so(tmp_path):
    assert _train_cli(tmp_path, "--epochs", "1").returncode == 0
    r = _train_cli(tmp_path, "--epochs", "1", "--resume")
    assert r.returncode == 2 and "already at epoch 1 of 1: nothing to train" in r.stderr
    assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1  # (said before the header: nothing printed)
    r = _train_cli(tmp_path, "--epochs", "2", "--resume", "--precision", "amp-bf16")
    assert r.returncode == 2 and "written for precision 'fp32', this run is 'amp-bf16'" in r.stderr, r.stderr
    assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1
    r = _train_cli(tmp_path, "--epochs", "2", "--resume")
    assert r.returncode == 0 and "(resumed after epoch 1)" in r.stdout and "2 steps trained" in r.stdout


def test_a_second_run_into_a_checkpoint_directory_is_refused_unless_it_resumes(tmp_path):
    """Without --resume a second `train --checkpoint ck/` replaced ck/checkpoint.pt at its first epoch, without a
    word: the first run's training was lost. Refused, before anything trains; --resume continues it."""
    assert _train_cli(tmp_path, "--epochs", "1").returncode == 0
    ck = tmp_path / "ck" / "checkpoint.pt"
    before = ck.read_bytes()
    r = _train_cli(tmp_path, "--epochs", "1")
    assert r.returncode == 2 and "holds a checkpoint already: --resume continues it" in r.stderr, r.stderr
    assert "epoch" not in r.stdout and ck.read_bytes() == before and len(r.stderr.strip().splitlines()) == 1
    assert _train_cli(tmp_path, "--epochs", "2", "--resume").returncode == 0


def test_resume_from_another_preset_or_data_is_one_line(tmp_path):
    assert _train_cli(tmp_path, "--epochs", "1").returncode == 0
    ck = tmp_path / "ck"
    r = cli("train", "mnist-cnn", "--preset", "small", "--precision", "fp32", "--checkpoint", str(ck), "--resume",
            "--epochs", "2")
    assert r.returncode == 2 and "was written for preset 'tiny', this run is 'small'" in r.stderr
    assert "epoch" not in r.stdout  # (refused before any progress bar: it is drawn at the first step)
    state = torch.load(ck / "checkpoint.pt", weights_only=True)
    del state["preset"], state["data"]  # a checkpoint without the labels: the size mismatch itself is caught
    torch.save(state, ck / "checkpoint.pt")
    r = cli("train", "mnist-cnn", "--preset", "small", "--precision", "fp32", "--checkpoint", str(ck), "--resume",
            "--epochs", "2")
    assert r.returncode == 2 and "does not fit this model and optimizer" in r.stderr and "epoch" not in r.stdout
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_outputs_are_checked_before_training(tmp_path):
    existing = tmp_path / "file.txt"
    existing.write_text("mine")
    r = _train_cli(tmp_path, "--epochs", "1", "--checkpoint", str(existing))
    assert r.returncode == 2 and "is a file: give a directory" in r.stderr and "epoch" not in r.stdout
    assert existing.read_text() == "mine"
    r = _train_cli(tmp_path, "--epochs", "1", "--json", str(tmp_path))
    assert r.returncode == 2 and "is a directory: give a file path" in r.stderr and "epoch" not in r.stdout


def test_resume_loads_the_rng_state_on_the_cpu_whatever_the_device(tmp_path, monkeypatch):
    """On CUDA, torch.load(map_location=device) put the saved CPU RNG ByteTensor on the GPU, torch.set_rng_state
    refused it and --resume always failed ("does not fit this model"). Emulated here: a loader that, like CUDA, turns
    the RNG state into something set_rng_state refuses unless the checkpoint is mapped to the CPU."""
    real = torch.load

    def load(path, map_location=None, **kw):  # type: ignore[no-untyped-def]
        state = real(path, map_location="cpu", **kw)
        if map_location != "cpu":  # (what a map_location of the run's device does to the RNG state on CUDA)
            state["rng"] = state["rng"].to(torch.int64)
        return state

    monkeypatch.setattr(torch, "load", load)
    wl = create_workload("tabular-mlp", "tiny")
    cfg = TrainConfig(precision="amp-bf16", epochs=1, checkpoint_dir=tmp_path, max_steps_per_epoch=2,
                      evaluate_train=False)
    train(wl, cfg)
    r = train(create_workload("tabular-mlp", "tiny"), TrainConfig(precision="amp-bf16", epochs=2, checkpoint_dir=tmp_path,
                                                                  resume=True, max_steps_per_epoch=2,
                                                                  evaluate_train=False))
    assert r.resumed_from_epoch == 1


@pytest.mark.parametrize(("precision", "scaled"), [("amp-bf16", False), ("fp32", False), ("amp-fp16", True)])
def test_progress_reports_a_loss_scale_only_where_the_mode_scales_the_loss(precision: str, scaled: bool) -> None:
    """amp-bf16's bar said "scale 1": no loss is scaled there, so no scale is said; amp-fp16's dynamic one is."""
    seen = []
    wl = create_workload("tabular-mlp", "tiny")
    train(wl, TrainConfig(precision=precision, epochs=1, evaluate_train=False, max_steps_per_epoch=2),
          on_progress=seen.append)
    assert seen and all((p.scale is not None) == scaled for p in seen)
    if scaled:
        assert seen[-1].scale in (65536.0, 32768.0)  # (its dynamic scale, backed off once where a step overflowed)


def test_train_says_a_mode_runs_slowly_here_as_run_and_diagnose_do():
    """amp-fp16 on a CPU without fp16 hardware is emulated: run and diagnose said so, train trained without a word."""
    from ampbench.precision import supported

    note = supported("amp-fp16", "cpu").note
    r = cli("train", "mnist-cnn", "--preset", "tiny", "--precision", "amp-fp16", "--max-steps", "2", "--epochs", "1")
    assert r.returncode == 0, r.stderr
    # (a CPU with AVX512-FP16 or AMX-FP16: no note; the summary line "amp-fp16 on cpu: train accuracy ..." is no note)
    notes = [line for line in r.stdout.splitlines() if line.startswith("amp-fp16 on cpu:") and "final loss" not in line]
    assert notes == ([f"amp-fp16 on cpu: {note}"] if note else []), r.stdout
    r = cli("train", "mnist-cnn", "--preset", "tiny", "--precision", "fp32", "--max-steps", "2", "--epochs", "1")
    notes = [line for line in r.stdout.splitlines() if line.startswith("fp32 on cpu:") and "final loss" not in line]
    assert r.returncode == 0 and notes == [], r.stdout  # (fp32 runs at full speed everywhere: no note)


@pytest.mark.parametrize("command", ["train", "diagnose"])
def test_a_model_with_nothing_to_train_is_one_line_before_the_first_step(command: str) -> None:
    """(train failed at autograd's "element 0 of tensors does not require grad" after its header, exit 1)"""
    planted = Path(__file__).parents[2] / "bench" / "planted.py"
    r = in_process(command, "--model", f"{planted}:frozen", "--input-shape", "3,4,4", "--num-classes", "5",
                   "--preset", "tiny", "--device", "cpu")
    assert r.returncode == 2 and "the model has no trainable parameter" in r.stderr, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "epoch" not in r.stdout
