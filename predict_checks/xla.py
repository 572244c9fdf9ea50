"""OpenXLA's measured H100 GEMMs (``references/xla_matmul/matmul_flops.csv``, Apache-2.0): 375 batched-GEMM shapes
(b in 1, 2, 4; m, n, k in 256 ... 4096), each in bf16 and in f32 -- which XLA runs as TF32 on the Tensor Cores (the
README: 297 of the 375 beat the H100's fp32 peak) -- read as kernel cases the models price (op classes ``tensor-bf16``
and ``tensor-tf32``, GPU ``h100-sxm``: the figures fit an H100 SXM, not the PCIe card). What the Tensor Core
constants are fitted on (:mod:`predict_checks.fit`)."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

from ampbench.measure.gpus import Gpu
from ampbench.predict import kernels
from ampbench.predict.kernels import Calibration
from predict_checks.neusight import Case

ROOT = Path(__file__).resolve().parents[1] / "references" / "xla_matmul"
GPU = "h100-sxm"
DTYPES = {"bf16xbf16->bf16": ("tensor-bf16", "bf16", 2), "f32xf32->f32": ("tensor-tf32", "tf32", 4)}
"""XLA's dtype key -> (op class, math mode, bytes per element)."""


def _gemm(b: int, m: int, n: int, k: int, mode: str, element: int) -> Callable[[Gpu, Calibration], float]:
    return lambda gpu, cal: kernels.gemm_s(gpu, cal, b, m, n, k, mode, element)


def kernel_cases(root: Path = ROOT) -> list[Case]:
    """Every measured GEMM: its kernel time is ``2 b m n k / flops_per_s`` (a whole number of nanoseconds)."""
    cases = []
    with open(root / "matmul_flops.csv", newline="") as f:
        for r in csv.DictReader(f):
            op_class, mode, element = DTYPES[r["dtypes"]]
            b, m, n, k = (int(r[x]) for x in "bmnk")
            cases.append(Case(GPU, op_class, f"{b}x{m}x{n}x{k}", 2 * b * m * n * k / int(r["flops_per_s"]),
                              _gemm(b, m, n, k, mode, element)))
    return cases
