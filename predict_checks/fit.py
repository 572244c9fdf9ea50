"""Fitting the kernel models' constants on measured kernels, and their errors per op class and GPU.

The protocol: fit on every measured kernel of the references -- NeuSight's fp32 kernels on all 8 GPUs
(:data:`~predict_checks.neusight.FIT_GPUS`), OpenXLA's bf16 GEMMs on an H100 SXM (:mod:`predict_checks.xla`) and the
lent H200's cuBLAS GEMMs in fp16, bf16 and TF32 (:mod:`predict_checks.kernel_tables`) -- and check on whole training
steps only (NeuSight's, DeepLearningExamples' published results, our own GPU runs:
``benchmarks/predict_references.py``); a constant is never fitted to a figure it is then checked against. The fit is
coordinate descent over a grid of values per constant, minimising, over every (GPU, op class), the median absolute log
error plus a quarter of its 90th percentile: the fp32 constants on the fp32 kernels first, then the Tensor Core ones
on the Tensor Core GEMMs (:func:`fit_all`).
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ampbench.predict.kernels import Calibration
from predict_checks.neusight import Case

HALF = ("tensor-bf16", "cublas-fp16", "cublas-bf16")
"""Measured fp16/bf16 Tensor Core GEMMs: XLA's on an H100 SXM, cuBLAS's in a lent GPU's table."""
TF32 = ("cublas-tf32",)
"""Measured TF32 GEMMs fitted on: cuBLAS's only (XLA's f32 dots, ``tensor-tf32``, run slower than cuBLAS's TF32 at
the same shapes: reported, not fitted on)."""
NOT_FITTED = ("tensor-tf32",)
"""Measured kernels reported beside the fitted ones, not fitted on."""
GEMM = ("linear", "bmm", "conv", *HALF, *TF32)
"""The op classes whose time is a GEMM's (NeuSight's fp32 ones, the Tensor Core ones)."""
FITTED: dict[str, tuple[tuple[float, ...], tuple[str, ...]]] = {
    # the bandwidth first, on the purest measure of it (elementwise kernels); the rest built on it
    "capped_streaming_efficiency": ((0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9), ("elementwise",)),
    "streaming_efficiency": ((0.7, 0.75, 0.8, 0.85, 0.9, 0.95), ("elementwise",)),
    "gemm_efficiency": ((0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0), ("linear", "bmm", "conv")),
    "tensor_gemm_efficiency": ((0.6, 0.7, 0.8, 0.9, 1.0), HALF),
    "tf32_gemm_efficiency": ((0.5, 0.6, 0.7, 0.8, 0.9, 1.0), TF32),
    "tensor_k_half": ((16.0, 32.0, 64.0, 128.0, 256.0, 512.0), (*HALF, *TF32)),
    "tile_128x64": ((0.6, 0.7, 0.8, 0.9, 1.0), GEMM),
    "tile_64x64": ((0.4, 0.5, 0.6, 0.7, 0.8, 0.9), GEMM),
    "tile_32x32": ((0.2, 0.3, 0.4, 0.5, 0.6), GEMM),  # (fitted on the fp32 kernels: the Tensor Core ones come after)
    "k_half": ((0.0, 8.0, 16.0, 32.0, 64.0, 128.0), ("linear", "bmm", "conv")),
    "norm_passes": ((2.0, 2.5, 3.0, 3.5, 4.0), ("layernorm",)),
    "softmax_passes": ((2.0, 2.5, 3.0, 3.5, 4.0), ("softmax",)),
    "winograd_efficiency": ((0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0, 1.2), ("conv",)),
    "clock_share": ((0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0), ("linear", "bmm", "conv", "layernorm", "softmax")),
}
"""The constants fitted, the values tried (refined around the best after the first rounds), and the op classes each
one moves (only those are re-priced when it changes)."""
TENSOR = ("tensor_gemm_efficiency", "tf32_gemm_efficiency", "tensor_k_half")
"""Fitted second, on the Tensor Core GEMMs alone, the rest held: a few dozen cuBLAS cases must not move the shared
tile constants that tens of thousands of fp32 kernels set."""
SIMT = tuple(name for name in FITTED if name not in TENSOR)


@dataclass(frozen=True)
class Errors:
    """|predicted / measured - 1| of one (GPU, op class)."""

    gpu: str
    op_class: str
    n: int
    median: float
    p90: float
    signed_median: float

    @staticmethod
    def of(gpu: str, op_class: str, errors: Iterable[float]) -> Errors:
        e = np.asarray(list(errors))
        return Errors(gpu, op_class, len(e), float(np.median(np.abs(e))), float(np.percentile(np.abs(e), 90)),
                      float(np.median(e)))


def errors(cases: list[Case], cal: Calibration) -> list[Errors]:
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for c in cases:
        groups[c.gpu, c.op_class].append(c.error(cal))
    return [Errors.of(gpu, op_class, e) for (gpu, op_class), e in sorted(groups.items())]


def _score(cases: list[Case], cal: Calibration) -> dict[tuple[str, str], float]:
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for c in cases:
        groups[c.gpu, c.op_class].append(abs(math.log(max(c.predicted_s(cal) / c.measured_s, 1e-9))))
    return {k: float(np.median(v) + 0.25 * np.percentile(v, 90)) for k, v in groups.items()}


def fit_all(cases: list[Case], start: Calibration | None = None, rounds: int = 12, refine: bool = False) -> Calibration:
    """The two stages: :data:`SIMT` on the fp32 kernels, then :data:`TENSOR` on the Tensor Core GEMMs (the classes
    :data:`NOT_FITTED` left out of both)."""
    tensor = set(HALF) | set(TF32)
    simt = [c for c in cases if c.op_class not in tensor and c.op_class not in NOT_FITTED]
    cal = fit(simt, start, rounds, refine, names=SIMT)
    return fit([c for c in cases if c.op_class in tensor], cal, rounds, refine, names=TENSOR)


def fit(cases: list[Case], start: Calibration | None = None, rounds: int = 12, refine: bool = False,
        names: tuple[str, ...] = tuple(FITTED)) -> Calibration:
    """The constants of :data:`FITTED` that price ``cases`` (the fitting GPUs' only) best: a first round over each
    constant's grid, then rounds refining around the best (x0.8 ... x1.25, three significant digits) until none moves
    (``refine``: refining rounds only, from ``start``). The result is a fixed point: one more round changes nothing."""
    cal = start or Calibration()
    by_class: dict[str, list[Case]] = defaultdict(list)
    for c in cases:
        by_class[c.op_class].append(c)
    scores = {cls: _score(cs, cal) for cls, cs in by_class.items()}

    def total(s: dict[str, dict[tuple[str, str], float]]) -> float:
        values = [v for per in s.values() for v in per.values()]
        return sum(values) / len(values)

    for r in range(rounds):
        moved = False
        for name, (values, classes) in ((n, FITTED[n]) for n in names):
            current = getattr(cal, name)
            grid = r == 0 and not refine
            tried = values if grid else sorted({_round(current * f) for f in (0.8, 0.9, 1.1, 1.25)} | {current})
            best_value, best_total = current, total(scores)
            for v in tried:
                trial = dataclasses.replace(cal, **{name: v})
                s = dict(scores)
                for cls in classes:
                    if cls in by_class:
                        s[cls] = _score(by_class[cls], trial)
                t = total(s)
                if t < best_total - 1e-9:
                    best_value, best_total = v, t
            if best_value != current:
                moved = True
                cal = dataclasses.replace(cal, **{name: best_value})
                for cls in classes:
                    if cls in by_class:
                        scores[cls] = _score(by_class[cls], cal)
        if not moved and r > 0:
            break
    return cal


def _round(x: float) -> float:
    return float(f"{x:.3g}")


def tensor_conv_share(table_path: Path, cal: Calibration) -> float:
    """``tensor_conv_efficiency``: over a GPU's measured kernel table (``ampbench hw --calibrate``'s CSV), the median of
    the GEMM model's time of each dense windowed fp16/bf16 channels-last convolution's implicit GEMM over its measured
    time (forward, data and weight gradients alike: the same GEMM's work)."""
    from ampbench.measure.calibrate import from_csv
    from ampbench.measure.gpus import lookup
    from ampbench.predict import kernels
    from ampbench.predict.measured_kernels import _conv_of, conv_family

    table = from_csv(table_path.read_text())
    gpu = lookup(table_path.stem)
    assert gpu is not None, table_path
    shares = []
    for k in table["kernels"]:
        if k["kind"] != "conv" or not k["us"] or k["dtype"] not in ("fp16", "bf16") or k["layout"] != "nhwc":
            continue
        conv = _conv_of(k["shape"])
        if conv_family(conv) != "dense":
            continue
        g, m, n, kk = conv.gemm()
        modelled = kernels.gemm_compute_s(gpu, cal, g, m, n, kk, k["dtype"]) + cal.kernel_us * 1e-6
        shares.append(modelled / (k["us"] * 1e-6))
    return _round(float(np.median(shares)))
