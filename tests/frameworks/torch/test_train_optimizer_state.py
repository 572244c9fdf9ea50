"""``ampbench train`` and ``ampbench diagnose`` with --optimizer-state: trained with torchao's states, checkpointed
with them and resumed only with the same states (one line otherwise, whichever way it differs); the checks that
train run with them. torchao's update eagerly here (tests/precision/test_optimizer_state.py says why)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ampbench.precision.optimizer_state import missing
from tests.conftest import cli

pytestmark = pytest.mark.skipif(missing() is not None, reason=str(missing()))
MODEL = str(Path(__file__).resolve().parents[2] / "bench" / "state_model.py") + ":build"
ARGS = ["--model", MODEL, "--input-shape", "64", "--num-classes", "64", "--preset", "tiny", "--max-steps", "2"]


@pytest.fixture(autouse=True)
def _eager_torchao(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHDYNAMO_DISABLE", "1")


def test_train_checkpoints_the_states_and_resumes_only_with_the_same(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    code, out, err = cli("train", *ARGS, "--precision", "pure-bf16", "--optimizer-state", "8bit", "--epochs", "1",
                         "--checkpoint", str(ck), "--json", str(tmp_path / "a.json"))
    assert code == 0, err
    assert json.loads((tmp_path / "a.json").read_text())["steps"] == 2
    # resumed by a fresh process, which has not imported torchao when it reads the checkpoint before the header (the
    # in-process call above had: a fresh one was told "resume with the same --optimizer-state" though it did)
    import os
    import subprocess
    import sys

    fresh = subprocess.run([sys.executable, "-m", "ampbench", "train", *ARGS, "--precision", "pure-bf16",
                            "--optimizer-state", "8bit", "--epochs", "2", "--checkpoint", str(ck), "--resume"],
                           capture_output=True, text=True, timeout=300, env={**os.environ, "TORCHDYNAMO_DISABLE": "1"})
    assert fresh.returncode == 0 and "resumed after epoch 1" in fresh.stdout, fresh.stderr[-2000:]
    for other, said in ((["--optimizer-state", "4bit"], "written with optimizer states 8bit, this run asks for 4bit: "
                                                        "resume with --optimizer-state 8bit"),
                        ([], "written with optimizer states 8bit, this run asks for the optimizer as built")):
        code, _, err = cli("train", *ARGS, "--precision", "pure-bf16", *other, "--epochs", "3", "--checkpoint", str(ck),
                           "--resume")
        assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("args, said", [
    (["--precision", "amp-bf16", "--optimizer-state", "bf16-sr"], "--optimizer-state 'bf16-sr': bf16-sr rounds bf16"),
    (["--precision", "pure-bf16", "--optimizer-state", "fp32"], "fp32 states need fp32 weights (master-bf16"),
    (["--precision", "amp-bf16", "--optimizer-state", "7bit"], "--optimizer-state '7bit': choose from"),
])
def test_train_refuses_a_state_that_does_not_apply_in_one_line(args: list[str], said: str) -> None:
    code, _, err = cli("train", *ARGS, *args)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err


def test_diagnose_trains_its_checks_with_the_states(tmp_path: Path) -> None:
    code, out, err = cli("diagnose", *ARGS[:-2], "--precision", "amp-bf16", "--optimizer-state", "4bit", "--steps", "3",
                         "--checks", "nonfinite", "--db", str(tmp_path / "r.db"), "--json", str(tmp_path / "d.json"))
    assert code == 0, err
    assert "no NaN/Inf in 3 steps of amp-bf16" in out
    code, _, err = cli("diagnose", "resnext", "--preset", "tiny", "--precision", "amp-bf16", "--optimizer-state", "8bit",
                       "--steps", "2", "--checks", "nonfinite", "--db", str(tmp_path / "r.db"))
    assert code == 2 and "this workload's optimizer is torch.optim.SGD" in err, err
