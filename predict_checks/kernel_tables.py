"""A GPU's own measured kernels (``ampbench hw --calibrate``'s tables, ``src/ampbench/predict/calibration/<gpu>.csv``)
read as kernel cases the models price: its cuBLAS GEMMs per dtype (op classes ``cublas-fp16``, ``cublas-bf16``,
``cublas-tf32``), what PyTorch itself runs. The Tensor Core constants are fitted on them beside OpenXLA's H100 GEMMs
(:mod:`predict_checks.xla`): XLA's f32 dots on Hopper run well below cuBLAS's TF32 GEMMs at the same shapes (the
lent H200's table: the XLA-fitted TF32 constants priced its GEMMs 35 % too slow), so TF32 is fitted on cuBLAS's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ampbench.measure.calibrate import from_csv
from ampbench.measure.gpus import Gpu
from ampbench.predict import kernels
from ampbench.predict.kernels import Calibration
from ampbench.predict.measured_kernels import TABLES_DIR
from predict_checks.neusight import Case

_RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
TABLES = (TABLES_DIR / "h200.csv", _RESULTS / "h200" / "lease3" / "calibration.csv",
          _RESULTS / "h200" / "truth" / "calibration.csv", _RESULTS / "h200" / "truth" / "calibration_repeat.csv")
"""The committed tables fitted on: the shipped H200 table (the fourth lease's sweep, 2026-11-30: the first with the
host's issue time per call), the third lease's and the two sweeps of the second, all of one GPU at the same shapes --
the Tensor Core constants move along a ridge (efficiency against ``tensor_k_half``) with a few per cent of noise in
17 GEMMs a dtype, so every sweep of a GPU is fitted on, not the last alone. Each file's first comment line names no
GPU: the GPU is read from ``device_name``."""
GPUS = ("h200",)
DTYPES = {"fp16": 2, "bf16": 2, "tf32": 4}


def _gemm(b: int, m: int, n: int, k: int, mode: str, element: int) -> Callable[[Gpu, Calibration], float]:
    return lambda gpu, cal: kernels.gemm_s(gpu, cal, b, m, n, k, mode, element)


def _gpu(path: Path) -> str:
    """The catalogue key of the GPU a table was measured on (its ``device_name``: "NVIDIA H200" -> h200)."""
    name = from_csv(path.read_text())["env"].get("device_name", path.stem)
    key = str(name).lower().replace("nvidia", "").strip().replace(" ", "-")
    assert key in GPUS, (path, name)  # (a new GPU's table: add its key to GPUS)
    return key


def gemm_cases(paths: tuple[Path, ...] = TABLES) -> list[Case]:
    """Every timed plain (row-major) GEMM and batched GEMM in a Tensor Core dtype of the tables (the GPU: the table's
    device_name)."""
    cases = []
    for path in paths:
        for k in from_csv(path.read_text())["kernels"]:
            # (the plain row-major cases: a table's transposed ones, nt/tn, are priced as their plain case's time
            # times what transposing cost, measured_kernels.KernelTable -- not the model's to fit)
            if k["kind"] in ("gemm", "bmm") and k["dtype"] in DTYPES and k["us"] and not k.get("layout"):
                s = k["shape"]
                b, m, n, kk = int(s["batch"]), int(s["m"]), int(s["n"]), int(s["k"])
                cases.append(Case(_gpu(path), f"cublas-{k['dtype']}", f"{b}x{m}x{n}x{kk}", float(k["us"]) * 1e-6,
                                  _gemm(b, m, n, kk, k["dtype"], DTYPES[k["dtype"]])))
    return cases
