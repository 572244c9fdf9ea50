"""The maximum achievable matmul FLOP/s per accelerator (``references/mamf/mamf.csv``: Stas Bekman's MAMF table,
numbers only, CC BY-SA source), turned into the derived table the product reads
(``src/ampbench/predict/matmul_ceilings.json``): per GPU of our catalogue, how its best measured Tensor Core GEMM
compares with the H100 SXM's, on which the Tensor Core constants are fitted (XLA's measured GEMMs,
:mod:`predict_checks.xla`).

A GPU's ratio for a dtype is ``its MAMF / its dense datasheet peak`` over the H100 SXM's bf16 one: the kernel model
multiplies the fitted Tensor Core efficiency by it, so an A100 SXM (86.9 % of its peak against the H100's 80.3 %) gets
1.08x the H100's share of its own peak and a B200 (77.6 %) 0.97x. fp16 takes bf16's. fp8 where the table has the GPU's
fp8 row; elsewhere the GPU's bf16 ratio times the median fp8-over-bf16 share of the GPUs that have both.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from statistics import median
from typing import Any

from ampbench.predict.kernels import CEILINGS_FILE

ROOT = Path(__file__).resolve().parents[1] / "references" / "mamf"
BASE = ("NVIDIA H100 SXM", "bf16")
"""The row the Tensor Core constants' fit stands for (XLA's GEMMs were measured on an H100 SXM)."""

GPUS: dict[str, tuple[str, ...]] = {
    "NVIDIA A100 SXM": ("a100-40gb", "a100-80gb"),
    "NVIDIA A100 PCIe": ("a100-40gb-pcie", "a100-80gb-pcie"),
    "NVIDIA H100 SXM": ("h100-sxm",),
    "NVIDIA H200 SXM": ("h200",),
    "NVIDIA B200 SXM": ("b200",),
}
"""MAMF's accelerator names -> our catalogue's keys (the GPUs both list; GH200, GB200, B300 are not in the catalogue)."""
SAME_AS: dict[tuple[str, str], tuple[str, str]] = {("NVIDIA H200 SXM", "bf16"): ("NVIDIA H100 SXM", "bf16")}
"""Rows the table leaves to another: its H100 SXM bf16 row's note says the H200 is the same."""
DTYPES = {"bf16": "bf16", "fp8_e4m3fn": "fp8"}


def efficiencies(root: Path = ROOT) -> dict[tuple[str, str], float]:
    """(accelerator, dtype) -> MAMF / dense datasheet peak, NVIDIA rows (as published)."""
    out: dict[tuple[str, str], float] = {}
    with open(root / "mamf.csv", newline="") as f:
        for r in csv.DictReader(f):
            if r["accelerator"].startswith("NVIDIA") and r["dtype"] in DTYPES and r["achieved_tflops"]:
                out[r["accelerator"], DTYPES[r["dtype"]]] = float(r["achieved_tflops"]) / float(r["theoretical_tflops"])
    for row, same in SAME_AS.items():
        out.setdefault(row, out[same])
    return out


def ceilings(root: Path = ROOT) -> dict[str, Any]:
    """The derived table: per catalogue GPU, {"bf16": ratio, "fp8": ratio} to the H100 SXM's bf16 share of peak, and
    the fp8-over-bf16 share for GPUs without an fp8 row."""
    eff = efficiencies(root)
    base = eff[BASE]
    both = [eff[a, "fp8"] / eff[a, "bf16"] for a, d in eff if d == "bf16" and (a, "fp8") in eff]
    ratios = {key: {d: round(eff[a, d] / base, 4) for d in ("bf16", "fp8") if (a, d) in eff}
              for a, keys in GPUS.items() for key in keys if (a, "bf16") in eff}
    return {"ratios": ratios, "fp8_over_bf16": round(median(both), 4), "base": f"{BASE[0]} {BASE[1]}",
            "source": "references/mamf/mamf.csv (Stas Bekman's ML Engineering book, MAMF table; numbers only)",
            "written_by": "predict_checks/mamf.py (benchmarks/kernel_references.py --fit)"}


def save(path: Path = CEILINGS_FILE) -> dict[str, Any]:
    table = ceilings()
    path.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    return table
