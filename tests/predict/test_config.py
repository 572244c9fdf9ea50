"""ampbench.predict.config.PredictConfig: the predict command as a library -- every check at construction, before
anything is traced; the rows it predicts are the command's (the CLI only prints and stores them)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ampbench.errors import AmpbenchError
from ampbench.predict import config as predict_config
from ampbench.predict.config import PredictConfig
from tests.conftest import cli

PLANTED = str(Path(__file__).parents[1] / "bench" / "planted.py")


def test_the_rows_are_the_command_s(tmp_path: Path) -> None:
    config = PredictConfig.from_strings(gpu="a100-80gb", workloads="tabular-mlp", preset="tiny",
                                        precisions="fp32,amp-bf16", batch_size="8,16")
    assert [t.label for t in config.targets] == ["tabular-mlp"] and config.batch_sizes == (8, 16)
    rows = config.predict()
    out = tmp_path / "p.json"
    code, _, err = cli("predict", "--gpu", "a100-80gb", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions",
                       "fp32,amp-bf16", "--batch-size", "8,16", "--db", str(tmp_path / "r.db"), "--json", str(out))
    assert code == 0, err
    by_cli = json.loads(out.read_text())
    keys = ("workload", "precision", "batch_size", "status", "predicted_step_ms", "predicted_peak_bytes")
    assert [[r[k] for k in keys] for r in rows] == [[r[k] for k in keys] for r in by_cli]
    assert [(r["batch_size"], r["precision"]) for r in rows] == [(8, "fp32"), (8, "amp-bf16"), (16, "fp32"),
                                                                   (16, "amp-bf16")]


@pytest.mark.parametrize("kw, said", [
    ({"gpu": "a200"}, "--gpu 'a200' is not known"),
    ({"gpu": "t4", "precisions": ","}, "--precisions is empty"),
    ({"gpu": "t4", "batch_size": "0"}, "--batch-size must be >= 1"),
    ({"gpu": "t4", "workloads": "bert", "model": "x.py:f"}, "give --workloads or --model, not both"),
    ({"gpu": "t4", "workloads": "nope"}, "unknown workload 'nope'"),
])
def test_bad_input_is_refused_at_construction_before_any_trace(kw: dict[str, str], said: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    def traced(*a: object, **k: object) -> None:
        raise AssertionError("traced before the checks")

    monkeypatch.setattr(predict_config, "predict_target", traced)
    with pytest.raises(AmpbenchError, match=said.replace("(", r"\(")):
        PredictConfig.from_strings(**{"workloads": "tabular-mlp", "preset": "tiny", **kw})


@pytest.mark.parametrize("name, said", [
    ("h100", "did you mean h100-pcie, h100-nvl or h100-sxm?"), ("h10-sxm", "did you mean h100-sxm?"),
    ("H100", "did you mean h100-pcie, h100-nvl or h100-sxm?"),
    # (difflib's closest spelling of a100-sxm was h100-sxm: the A100s are what it means)
    ("a100-sxm", "did you mean a100-40gb, a100-80gb, a100-40gb-pcie or a100-80gb-pcie?"),
    # the driver's name (a results table's heading, nvidia-smi): the card it names first
    ("NVIDIA A100-SXM4-80GB", "did you mean a100-80gb, a100-40gb, "),
    ("NVIDIA H100 80GB HBM3", "did you mean h100-sxm, h100-pcie or h100-nvl?"),
    ("NVIDIA GeForce RTX 4090", "did you mean rtx-4090?")])
def test_a_gpu_name_that_is_not_one_suggests_the_ones_it_may_mean(name: str, said: str) -> None:
    with pytest.raises(AmpbenchError, match=re.escape(said)):
        PredictConfig.from_strings(gpu=name, workloads="tabular-mlp", preset="tiny")


def test_a_prices_key_that_is_not_a_gpu_suggests_too(tmp_path) -> None:  # type: ignore[no-untyped-def]
    prices = tmp_path / "p.json"
    prices.write_text('{"h100": 2.0}')
    with pytest.raises(AmpbenchError, match=re.escape("'h100' is not a known GPU (did you mean h100-pcie, h100-nvl "
                                                      "or h100-sxm?")):
        PredictConfig.from_strings(gpu="h100-sxm", workloads="tabular-mlp", preset="tiny", prices=prices)


@pytest.mark.parametrize("model, data, said", [
    ("frozen", ["--input-shape", "3,4,4", "--num-classes", "5"], "the model has no trainable parameter"),
    ("sparse_bag", ["--input-shape", "8", "--vocab-size", "100", "--num-classes", "2"],
     "EmbeddingBag 'bag' has sparse=True (sparse gradients), which Adam cannot step"),
])
def test_a_training_step_the_model_cannot_take_is_one_line(model: str, data: list[str], said: str,
                                                           tmp_path: Path) -> None:
    """As run checks it (the trace failed at autograd or at Adam's step, exit 1 with a traceback); its forward alone
    (--inference) is still predicted."""
    args = ["predict", "--gpu", "t4", "--model", f"{PLANTED}:{model}", *data, "--precisions", "fp32",
            "--db", str(tmp_path / "r.db")]
    code, _, err = cli(*args)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err
    code, out, err = cli(*args, "--inference")
    assert code == 0 and "fp32" in out, err

