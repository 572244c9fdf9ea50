"""``ampbench predict --inference``: the forward alone, traced in eval mode without autograd. Its memory is checked
against a peak computed by hand, its ops against what inference runs (no backward, no optimizer, no dropout), its
rows against the training rows of the same cell, and its latency against NeuSight's measured inference forwards."""

from __future__ import annotations

import functools
import statistics
from pathlib import Path

import pytest
import torch
from predict_checks import neusight, references
from torch import nn

from ampbench.data.tensors import TensorData
from ampbench.errors import AmpbenchError
from ampbench.predict.config import PredictConfig
from ampbench.predict.trace import trace_inference, trace_step
from ampbench.workloads.base import Workload
from ampbench.workloads.factory import build_meta
from tests.conftest import cli


def _mlp(dropout: float = 0.0) -> Workload:
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Dropout(dropout), nn.Linear(256, 10))
    x, y = torch.randn(4, 64), torch.zeros(4, dtype=torch.long)
    return Workload("mlp", model, TensorData((x,), y), loss_fn=nn.functional.cross_entropy,
                    make_optimizer=lambda p: torch.optim.SGD(p, lr=0.1), batch_size=32, preset="test")


def test_the_peak_is_the_tensors_a_forward_holds_at_once() -> None:
    """Batch 32: the input (32x64 fp32), then the first Linear's output and ReLU's beside it (32x256 each); the
    first freed before the last Linear writes its 32x10. pure-fp16: the input cast to half, its two 32x256 in half."""
    fp32 = trace_inference(build_meta(lambda: _mlp()), "fp32", 32)
    assert fp32.activation_bytes == 32 * 64 * 4 + 2 * 32 * 256 * 4
    assert fp32.weights_bytes == (64 * 256 + 256 + 256 * 10 + 10) * 4
    half = trace_inference(build_meta(lambda: _mlp()), "pure-fp16", 32)
    assert half.activation_bytes == 32 * 64 * 4 + 32 * 64 * 2 + 2 * 32 * 256 * 2
    assert half.weights_bytes == fp32.weights_bytes // 2
    assert (half.grads_bytes, half.optimizer_bytes, fp32.inference) == (0, 0, True)


def test_inference_runs_the_forward_alone_in_eval_mode() -> None:
    train = trace_step(build_meta(lambda: _mlp(0.1)), "amp-bf16", 32)
    infer = trace_inference(build_meta(lambda: _mlp(0.1)), "amp-bf16", 32)
    assert {o.phase for o in infer.ops} == {"forward"} and {"backward", "optimizer"} <= {o.phase for o in train.ops}
    assert any("dropout" in o.name or "bernoulli" in o.name for o in train.ops)  # (training: dropout on)
    assert not any("dropout" in o.name or "bernoulli" in o.name for o in infer.ops)  # (eval: dropout is the identity)
    forward_flops = sum(o.flops for o in train.ops if o.phase == "forward")
    assert sum(o.flops for o in infer.ops) == forward_flops


def test_predict_inference_rows(tmp_path: Path) -> None:
    config = PredictConfig.from_strings(gpu="a100-80gb", workloads="tabular-mlp", preset="small", batch_size="1024",
                                        precisions="fp32,amp-bf16,pure-bf16", inference=True)
    rows = config.predict()
    training = PredictConfig.from_strings(gpu="a100-80gb", workloads="tabular-mlp", preset="small", batch_size="1024",
                                          precisions="fp32,amp-bf16,pure-bf16").predict()
    for r, t in zip(rows, training):
        assert r["predicted_inference"] is True and r["status"] == "ok" and "predicted_inference" not in t
        assert r["predicted_step_ms"] < t["predicted_step_ms"]  # (no backward, no optimizer)
        assert r["predicted_peak_bytes"] < t["predicted_peak_bytes"] and r["predicted_max_batch"] > t["predicted_max_batch"]
        assert r["predicted_grads_bytes"] == r["predicted_optimizer_bytes"] == 0
    with pytest.raises(AmpbenchError, match="--optimizer-state applies to training"):
        PredictConfig.from_strings(gpu="t4", workloads="tabular-mlp", inference=True, optimizer_state="bf16")
    code, out, err = cli("predict", "--gpu", "t4", "--workloads", "tabular-mlp", "--preset", "tiny", "--inference",
                         "--precisions", "fp32,amp-fp16", "--db", str(tmp_path / "r.db"))
    assert code == 0, err
    assert "inference (the forward alone) predicted on t4" in " ".join(out.split())


# ---- NeuSight's measured inference forwards (fp32, TF32 off) --------------------------------------------------------
@functools.cache
def _inference_errors() -> dict[str, list[float]]:
    pytest.importorskip("transformers")
    out: dict[str, list[float]] = {}
    for st, error in neusight.inference_errors():
        out.setdefault(st.gpu, []).append(error)
    return out


INFERENCE_MISSES = {  # (measured here; the kernel constants are fitted on every GPU's kernels, these forwards on none)
    # (h100-sxm was median 21%, worst 23%, too fast: met since Hopper is priced from the H200's measured kernels;
    # p100-16gb median 17% too fast when the constants were fitted on four GPUs: met since they are fitted on eight)
    # (l4 was median 25%, worst 38%, too slow from the fitted model: met -- 12%, 22% -- since it is priced from its
    # own kernels as NeuSight published them, predict/calibration/l4.csv.gz)
    "p4": "median 39%: predicted too fast (BERT-large's forward: -39%, -49%), from its own kernels as NeuSight "
          "published them as from the fitted model (40%)",
}


@pytest.mark.parametrize("gpu", [pytest.param(g, marks=pytest.mark.xfail(strict=True, reason=INFERENCE_MISSES[g]))
                                 if g in INFERENCE_MISSES else g
                                 for g in ("a100-40gb-pcie", "h100-sxm", "l4", "v100-32gb-pcie", "t4", "p100-16gb", "p4")])
def test_inference_forwards_median_within_15_percent(gpu: str) -> None:
    errors = sorted(abs(e) for e in _inference_errors()[gpu])
    assert statistics.median(errors) <= 0.15, (gpu, [f"{e:+.0%}" for e in _inference_errors()[gpu]])


# ---- DeepLearningExamples' ResNet-50 inference tables (V100 16GB, T4; FP32 and mixed precision) ---------------------
DLE_MISSES = {
    ("t4", "fp32"): "+15% to +25%: predicted too slow (the T4's fp32 convolutions at batch 64-256; +27% to +35% from the "
                    "fitted model, before its own convolutions' forwards as NeuSight published them priced it)",
    # (v100-16gb amp-fp16 was -14% to -17%, too fast, at the Tensor Core prior: met since the Tensor Core convolutions'
    # share is the lent H200's measured one)
    ("t4", "amp-fp16"): "+16% to +18%: predicted too slow (the T4's Tensor Core convolutions at the H200's measured "
                        "share of the GEMM rate, the T4 not in the MAMF table: the H100's GEMM share)",
}


@pytest.mark.parametrize("key", [pytest.param(k, id="-".join(k), marks=pytest.mark.xfail(strict=True, reason=DLE_MISSES[k]))
                                 if k in DLE_MISSES else pytest.param(k, id="-".join(k))
                                 for k in references.INFERENCE_LATENCY_MS])
def test_resnet50_inference_latency_within_15_percent_where_the_gpu_dominates(key: tuple[str, str]) -> None:
    """Batches 64-256 (below 16 the published latency is the benchmark loop's 10-13 ms floor, not the GPU's)."""
    gpu, precision = key
    published = references.INFERENCE_LATENCY_MS[key]
    errors = {b: references.predicted_inference_ms(gpu, precision, b) / published[b] - 1 for b in (64, 128, 256)}
    assert all(abs(e) <= 0.15 for e in errors.values()), {b: f"{e:+.0%}" for b, e in errors.items()}
