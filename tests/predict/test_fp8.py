"""fp8 predictions: torchao's Float8Linear traced on meta, its scaled matmuls priced as CUDA runs them.

Oracles: the trace against the layer's own shapes (three GEMMs a layer, each 2*M*K*N FLOPs on 1-byte operands; the
high-precision grad-weight recipe keeps one in bf16), and the GEMM prices against published H100 measurements
(nothing fitted on them)."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from ampbench.measure.gpus import lookup
from ampbench.precision.fp8 import torchao_problem
from ampbench.predict import kernels
from ampbench.predict.cost import price_op
from ampbench.predict.trace import _Recorder

from ..conftest import cli

PROBLEM = torchao_problem("fp8 predictions")
pytestmark = pytest.mark.skipif(PROBLEM is not None, reason=str(PROBLEM))

M, K, N = 64, 96, 128
RECIPES = {"tensorwise": 3, "rowwise": 3, "rowwise_with_gw_hp": 2}
"""torchao recipe -> the layer's GEMMs that run in fp8 (forward, grad input, grad weight; gw-hp keeps the last)."""


def _linear_ops(recipe: str | None, m: int = M, k: int = K, n: int = N) -> list:
    """A bf16 linear's forward and backward (torchao's Float8Linear under ``recipe``; None: the bf16 layer), traced as
    the model's own ops (what torch.compile compiles)."""
    model = nn.Sequential(nn.Linear(k, n, bias=False)).to("meta", torch.bfloat16)
    if recipe is not None:
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
        convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name(recipe))
    x = torch.randn(m, k, device="meta", dtype=torch.bfloat16, requires_grad=True)
    rec = _Recorder(FlopCounterMode(display=False).flop_registry)
    rec.in_model = True
    grad = torch.randn(m, n, device="meta", dtype=torch.bfloat16)  # (a materialised gradient, not sum()'s broadcast)
    with rec:
        rec.phase = "forward"
        y = model(x)
        rec.phase = "backward"
        y.backward(grad)
    return rec.ops


def _traced(recipe: str) -> list:
    return [o for o in _linear_ops(recipe) if o.gemm is not None]


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_float8_linear_gemms_are_traced_as_fp8_scaled_matmuls(recipe: str) -> None:
    gemms = _traced(recipe)
    assert len(gemms) == 3
    fp8 = [o for o in gemms if o.dtype == "fp8"]
    assert len(fp8) == RECIPES[recipe]
    assert all(o.dtype == "bf16" for o in gemms if o.dtype != "fp8")
    for o in gemms:  # every GEMM of a linear is 2*M*K*N, whichever dimension it reduces over
        assert o.flops == 2 * M * K * N
        _, m, n, k = o.gemm
        operands = m * k + k * n
        if o.dtype == "fp8":  # the fp8 payloads (1 byte) and the scales, not the bf16 the wrapper reports
            assert operands <= o.bytes_read <= operands + 4 * (m + n)
        else:
            assert o.bytes_read == 2 * operands
        assert o.bytes_written == 2 * m * n  # (the output in bf16)


# float8_experimental PR 38 / PR 100 (github.com/meta-pytorch/float8_experimental), NVIDIA H100, cuBLASLt alone:
# LLaMa 2 70B's single-GPU shapes (M, K, N), the forward GEMM, seconds: bf16 and fp8 (e4m3, tensorwise scales).
H100_GEMMS = {
    (16384, 8192, 1280): (6.04e-4, 2.43e-4),
    (16384, 1024, 8192): (5.00e-4, 2.51e-4),
    (16384, 8192, 7168): (3.57e-3, 1.39e-3),
    (16384, 3584, 8192): (1.59e-3, 7.45e-4),
}
MISSED = {  # predicted / published - 1 today: these bf16 GEMMs ran at 46-55% of the H100 SXM's dense peak, where
    # OpenXLA's measured H100 GEMMs and the MAMF table (what the constants are fitted and scaled on) reach 75-80%;
    # the fp8 ones are met (nothing here is fitted on)
    ((16384, 8192, 1280), "bf16"): -0.24, ((16384, 1024, 8192), "bf16"): -0.20, ((16384, 8192, 7168), "bf16"): -0.30,
    ((16384, 3584, 8192), "bf16"): -0.19}


@pytest.mark.parametrize("shape, math", [
    pytest.param(s, m, marks=pytest.mark.xfail(strict=True, reason=f"predicted {MISSED[(s, m)]:+.0%}"))
    if (s, m) in MISSED else (s, m) for s in H100_GEMMS for m in ("bf16", "fp8")])
def test_h100_gemm_against_published_cublaslt_times(shape: tuple[int, int, int], math: str) -> None:
    m, k, n = shape
    gpu, cal = lookup("h100-sxm"), kernels.calibration()
    published = H100_GEMMS[shape][0 if math == "bf16" else 1]
    predicted = kernels.gemm_s(gpu, cal, 1, m, n, k, math, 2 if math == "bf16" else 1)
    assert abs(predicted / published - 1) <= 0.15, f"{predicted * 1e3:.3f} ms vs {published * 1e3:.3f} ms"


def test_fp8_gemm_is_priced_at_the_fp8_rate() -> None:
    """The traced fp8 GEMM costs what the kernel model gives a GEMM of its shape at the fp8 peak; bf16 twice that
    where compute-bound (H100: 1,979 vs 989.5 dense TFLOP/s) times the share of its peak fp8 reaches over bf16's
    (the MAMF table: 1,402.6 of 1,979 against 794.5 of 989)."""
    gpu, cal = lookup("h100-sxm"), kernels.calibration()
    op = _traced("tensorwise")[0]
    assert op.dtype == "fp8"
    big = dataclasses.replace(op, gemm=(1, 8192, 8192, 8192), flops=2 * 8192**3, bytes_read=2 * 8192**2,
                              bytes_written=2 * 8192**2)
    fp8 = price_op(big, gpu, False, cal).gpu_s
    bf16 = price_op(dataclasses.replace(big, dtype="bf16"), gpu, False, cal).gpu_s
    assert fp8 == pytest.approx(kernels.gemm_s(gpu, cal, 1, 8192, 8192, 8192, "fp8", 1))
    assert bf16 / fp8 == pytest.approx(2.0 * (1402.6 / 1979) / (794.5 / 989), rel=0.02)


TORCHAO_SPEEDUPS = {(1024, 2048, 1024): 0.80, (4096, 8192, 16384): 1.39}
"""torchao's float8 README ("Performance"): a bf16 linear's compiled forward and backward over the tensorwise
Float8Linear's, GPU kernel time, on an H100 (benchmarks/float8/float8_roofline.py), at M, K, N."""


@pytest.mark.parametrize("shape", [
    pytest.param((1024, 2048, 1024), marks=pytest.mark.xfail(strict=True, reason=(
        "predicted 0.42x: each of the 12 cast kernels of a small layer priced ~4-5 us (a 3 us kernel prior and the "
        "memory efficiency fitted on eager kernels); the published 0.80x leaves ~1.5 us a kernel"))),
    (4096, 8192, 16384)], ids=lambda s: "x".join(map(str, s)))
def test_compiled_fp8_linear_speedup_against_torchaos_published(shape: tuple[int, int, int]) -> None:
    """The compiled step's fp8 gain where torchao published it: the bf16 linear's GPU time over the tensorwise
    Float8Linear's, both compiled (Inductor fuses each operand's amax, scale and cast), within 15%."""
    from ampbench.predict.cost import Compiled, price
    from ampbench.predict.trace import Trace

    gpu, compiled = lookup("h100-sxm"), Compiled(fuse=True, graphs=False)

    def gpu_s(recipe: str | None) -> float:
        trace = Trace(_linear_ops(recipe, *shape), shape[0], 0, 0, 0, 0, 0, 0, "none", False)
        return price(trace, gpu, False, compiled=compiled).gpu_s

    speedup = gpu_s(None) / gpu_s("tensorwise")
    assert speedup == pytest.approx(TORCHAO_SPEEDUPS[shape], rel=0.15)


def test_predict_fp8_rows_refusals_and_options(tmp_path) -> None:
    db = str(tmp_path / "r.db")
    code, out, err = cli("predict", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions",
                         "amp-bf16,fp8-tensorwise", "--fp8-filter", "dims", "--gpu", "h100-sxm,a100-80gb", "--db", db,
                         "--json", str(tmp_path / "p.json"))
    assert code == 0, err
    rows = json.loads((tmp_path / "p.json").read_text())
    h100 = {r["precision"]: r for r in rows if r["gpu"] == "h100-sxm"}
    a100 = {r["precision"]: r for r in rows if r["gpu"] == "a100-80gb"}
    fp8 = h100["fp8-tensorwise"]
    assert fp8["status"] == "ok" and fp8["predicted_step_ms"] > 0 and fp8["predicted_math_mode"] == "fp8"
    assert fp8["compile"] == "off" and any("eager" in n for n in fp8["notes"])
    assert a100["fp8-tensorwise"]["status"] == "unsupported"
    assert "compute capability >= 8.9" in a100["fp8-tensorwise"]["reason"]
    code, _, err = cli("predict", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "amp-bf16",
                       "--fp8-filter", "dims", "--gpu", "h100-sxm", "--db", db)
    assert code == 2 and "apply to the fp8 modes" in err and "Traceback" not in err
