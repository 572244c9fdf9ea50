"""Tensor Core GEMMs and convolutions priced on measured kernels: the constants fitted on OpenXLA's measured H100 GEMMs
(bf16, TF32) and on the lent H200's measured convolutions, other GPUs scaled by their measured matmul ceiling (the MAMF
table). Oracles: the published CSVs' numbers, read here by hand."""

from __future__ import annotations

import csv
import json
import math
import statistics
from pathlib import Path

import pytest
from predict_checks import fit, kernel_tables, mamf, xla

from ampbench.measure.gpus import lookup
from ampbench.predict import kernels
from ampbench.predict.kernels import CEILINGS_FILE, calibration
from ampbench.predict.measured_kernels import TABLES_DIR

REFS = Path(__file__).resolve().parents[2] / "references"


def _mamf() -> dict[tuple[str, str], float]:
    with open(REFS / "mamf" / "mamf.csv", newline="") as f:
        out = {(r["accelerator"], r["dtype"]): float(r["achieved_tflops"]) / float(r["theoretical_tflops"])
               for r in csv.DictReader(f) if r["achieved_tflops"]}
    out["NVIDIA H200 SXM", "bf16"] = out["NVIDIA H100 SXM", "bf16"]  # (the H100 row's note: the H200 is the same)
    return out


def test_a_gpus_tensor_core_share_is_the_h100s_scaled_by_their_measured_ceilings() -> None:
    m = _mamf()
    h100 = m["NVIDIA H100 SXM", "bf16"]  # 794.5 of 989
    a100 = lookup("a100-80gb")
    assert a100 is not None
    assert kernels.ceiling_ratio(a100, "bf16") == pytest.approx(m["NVIDIA A100 SXM", "bf16"] / h100, abs=1e-4)
    assert kernels.ceiling_ratio(a100, "fp16") == kernels.ceiling_ratio(a100, "bf16")  # (fp16: bf16's)
    h200, b200, l4 = lookup("h200"), lookup("b200"), lookup("l4")
    assert h200 is not None and b200 is not None and l4 is not None
    assert kernels.ceiling_ratio(h200, "bf16") == 1.0  # (the table's note: the H200 is the H100 SXM's row)
    assert kernels.ceiling_ratio(h200, "fp8") == pytest.approx(m["NVIDIA H200 SXM", "fp8_e4m3fn"] / h100, abs=1e-4)
    assert kernels.ceiling_ratio(l4, "bf16") == 1.0  # (not in the table: the H100's)
    both = [m[a, "fp8_e4m3fn"] / m[a, "bf16"] for a, d in m if d == "bf16" and a.startswith("NVIDIA")
            and (a, "fp8_e4m3fn") in m]
    assert kernels.ceiling_ratio(a100, "fp8") == pytest.approx(
        m["NVIDIA A100 SXM", "bf16"] / h100 * statistics.median(both), abs=1e-3)
    assert json.loads(CEILINGS_FILE.read_text()) == mamf.ceilings()  # (the committed table is the references' now)


def test_a_tf32_gemm_runs_at_its_own_share_and_twice_the_pipeline_depth() -> None:
    """4096^3 in TF32 on an H100 SXM: 32 x 32 tiles of 128x128 in ceil(1024 / 132) = 8 waves, each tile
    2 x 128 x 128 x 4096 FLOPs at the per-SM TF32 rate times ``tf32_gemm_efficiency`` and K / (K + 2 tensor_k_half)."""
    cal, gpu = calibration(), lookup("h100-sxm")
    assert gpu is not None
    k = 4096
    per_sm = 494.5e12 * cal.tf32_gemm_efficiency / 132 * k / (k + 2 * cal.tensor_k_half)
    assert kernels.gemm_compute_s(gpu, cal, 1, k, k, k, "tf32") == pytest.approx(8 * 2 * 128 * 128 * k / per_sm)
    per_sm_bf16 = 989.5e12 * cal.tensor_gemm_efficiency / 132 * k / (k + cal.tensor_k_half)
    assert kernels.gemm_compute_s(gpu, cal, 1, k, k, k, "bf16") == pytest.approx(8 * 2 * 128 * 128 * k / per_sm_bf16)


def test_the_xla_cases_are_the_published_kernel_times() -> None:
    cases = xla.kernel_cases()
    assert len(cases) == 750 and {c.op_class for c in cases} == {"tensor-bf16", "tensor-tf32"}
    first = cases[0]  # sm_90,1,1024,2048,256,bf16xbf16->bf16,139519467775467
    assert first.shape == "1x1024x2048x256" and first.op_class == "tensor-bf16"
    assert first.measured_s == pytest.approx(2 * 1024 * 2048 * 256 / 139519467775467)
    assert all(c.gpu == "h100-sxm" for c in cases)


def test_the_fitted_gemms_within_10_percent_median_and_xlas_tf32_slower_than_cublass() -> None:
    """The fitted model on the kernels it was fitted on (in-sample: whole steps are the checks, elsewhere): XLA's bf16
    GEMMs and the H200's cuBLAS ones within 10% median; XLA's f32 dots (TF32), not fitted on, run slower than cuBLAS's
    TF32 GEMMs, so the model fitted on cuBLAS's prices them too fast."""
    errors = {e.op_class: e for e in fit.errors(xla.kernel_cases() + kernel_tables.gemm_cases(), calibration())}
    assert errors["tensor-bf16"].median <= 0.10 and errors["tensor-bf16"].p90 <= 0.20
    assert all(errors[f"cublas-{d}"].median <= 0.10 for d in ("fp16", "bf16", "tf32"))
    assert errors["tensor-tf32"].signed_median < -0.15 and "tensor-tf32" in fit.NOT_FITTED


def test_the_tensor_core_convolution_share_is_the_h200s_measured_one() -> None:
    assert calibration().tensor_conv_efficiency == fit.tensor_conv_share(TABLES_DIR / "h200.csv", calibration())
    gpu = lookup("a100-80gb")
    assert gpu is not None
    conv = kernels.Conv(64, 64, 56, 56, 64, 3, 3, 1, 1, 56, 56)  # (a ResNet 3x3, channels-last: no layout change)
    g, m, n, k = conv.gemm()
    cal = calibration()
    compute = kernels.gemm_compute_s(gpu, cal, g, m, n, k, "bf16", cal.tensor_conv_efficiency)
    io = 2 * (64 * 64 * 56 * 56 * 2 + 64 * k)
    assert kernels.conv_s(gpu, cal, conv, "bf16", 2) == pytest.approx(
        max(compute, kernels.memory_s(gpu, cal, io)) + cal.kernel_us * 1e-6)
    assert math.isclose(kernels.implicit_efficiency(kernels.Conv(8, 64, 56, 56, 64, 1, 1, 1, 1, 56, 56), "bf16", cal),
                        1.0)  # (a 1x1 convolution is a GEMM)
