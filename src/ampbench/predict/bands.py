"""How far to trust a prediction: the error measured on references of its kind, beside the figure.

``error_bands.json`` (written by ``benchmarks/predict_references.py --write-bands`` from the references,
``predict_checks.error_bands``; a test checks it is current) holds the |error| of the kernel models per GPU generation
and op class, and of whole training steps per generation. A prediction's band is its op mix weighted over the kernel
errors of its GPU's generation (the nearest generation with references where its own has none), and never below what
whole steps of that generation missed by; with Tensor Core math (tf32, fp16, bf16), never below what the published
AMP/TF32 results missed by either (no half-precision kernel is among the measured references), and never below the
median miss of the whole steps measured on GPUs of the same generation in the same kind of math, FP32/TF32 or AMP
(Lambda's ResNet-50 on twelve GPUs, DeepLearningExamples' results, the GPU-set steps of our lent H200: a generation's
own, not the nearest's). A compiled step's band
adds what the predicted compile gains missed by on published ones (:mod:`predict_checks.compile_references`): its
error compounds the eager step's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ampbench.measure.gpus import Gpu

BANDS_FILE = Path(__file__).with_name("error_bands.json")

GENERATIONS: tuple[tuple[tuple[int, int], str], ...] = (
    ((6, 0), "Pascal"), ((7, 0), "Volta"), ((7, 5), "Turing"), ((8, 0), "Ampere (A100)"), ((8, 6), "Ampere (GA10x)"),
    ((8, 9), "Ada"), ((9, 0), "Hopper"), ((10, 0), "Blackwell"))
"""A compute capability's generation: the last entry at or below it."""

KERNEL_CLASSES = {"matmul/conv": ("linear", "bmm", "conv"), "attention": ("linear", "bmm"),
                  "normalisation": ("layernorm", "softmax"), "elementwise": ("elementwise",),
                  "optimizer": ("elementwise",)}
"""A step's op class -> the measured kernel classes that tell its error (fused attention: its GEMMs')."""


def math_group(mode: str) -> str:
    """The kind of math a mode's or a precision's steps are grouped by in the published steps: ``fp32`` (fp32, TF32)
    or ``half`` (fp16, bf16, fp8 -- AMP and the half modes)."""
    return "fp32" if mode in ("fp32", "tf32") else "half"


def generation(capability: tuple[int, int]) -> str:
    return [name for cc, name in GENERATIONS if cc <= capability][-1] if capability >= (6, 0) else "Pascal"


@dataclass(frozen=True)
class Band:
    typical: float
    """The expected |error| (a median, as a fraction)."""
    basis: str

    def as_row(self) -> dict[str, Any]:
        return {"predicted_error_pct": round(100 * self.typical), "predicted_error_basis": self.basis}


@cache
def _table() -> dict[str, Any]:
    return json.loads(BANDS_FILE.read_text()) if BANDS_FILE.is_file() else {"kernels": {}, "steps": {}, "amp": {}}


def _nearest(table: dict[str, Any], gen: str) -> str | None:
    """``gen`` if the table has it, else the nearest generation (by order) that it has."""
    names = [name for _, name in GENERATIONS]
    if gen in table:
        return gen
    have = [n for n in names if n in table]
    if not have:
        return None
    i = names.index(gen)
    return min(have, key=lambda n: (abs(names.index(n) - i), -names.index(n)))


def band(gpu: Gpu, op_split: dict[str, float], math_mode: str, bound: str | None = None,
         compiled: bool = False, grouped: bool = False) -> Band:
    """The band of a prediction on ``gpu`` whose GPU time splits as ``op_split``, whose GEMMs run in ``math_mode`` and
    whose step is set by ``bound`` (``launch``: the host issuing its ops; the GPU's references do not tell that error,
    our workloads measured on a lent GPU do); ``compiled``: a torch.compile'd or CUDA-graph step; ``grouped``: a model
    with grouped or depthwise convolutions, whose published steps missed by far more (ResNeXts, EfficientNets): their
    errors on this generation in this kind of math, else over every generation they were measured on."""
    table = _table()
    gen = generation(gpu.capability)
    parts, basis = [], []
    kgen = _nearest(table["kernels"], gen)
    if kgen is not None:
        per_class = table["kernels"][kgen]
        typical = 0.0
        for cls, share in op_split.items():
            values = [per_class[k]["median"] for k in KERNEL_CLASSES.get(cls, ("elementwise",)) if k in per_class]
            typical += share * (sum(values) / len(values) if values else max(v["median"] for v in per_class.values()))
        parts.append(typical)
        gpus = ", ".join(table["kernels_gpus"][kgen])
        basis.append(f"kernels of this op mix on {kgen} ({gpus}{', fitted on' if kgen in table['fitted_gens'] else ''}):"
                     f" {typical:.0%}")
    sgen = _nearest(table["steps"], gen)
    if sgen is not None:
        parts.append(table["steps"][sgen]["median"])
        basis.append(f"fp32 training steps on {sgen}: median {table['steps'][sgen]['median']:.0%}, worst "
                     f"{table['steps'][sgen]['worst']:.0%}")
    if math_mode != "fp32" and table["amp"]:
        parts.append(table["amp"]["median"])
        basis.append(f"published AMP/TF32 results: median {table['amp']['median']:.0%}, worst {table['amp']['worst']:.0%}")
    group = math_group(math_mode)
    published = table.get("published_steps", {}).get(gen, {}).get(group)
    if published:
        parts.append(published["median"])
        basis.append(f"published {'FP32/TF32' if group == 'fp32' else 'AMP'} steps on {gen} "
                     f"({table['published_steps_source']}): median {published['median']:.0%}, worst "
                     f"{published['worst']:.0%}")
    by_gen = table.get("grouped_steps", {})
    grouped_here = (by_gen.get(gen, {}).get(group) or by_gen.get("all", {}).get(group)) if grouped else None
    if grouped_here:
        where = gen if by_gen.get(gen, {}).get(group) else ", ".join(g for g in by_gen if g != "all")
        parts.append(grouped_here["median"])
        basis.append(f"published {'FP32/TF32' if group == 'fp32' else 'AMP'} steps of networks with grouped or "
                     f"depthwise convolutions on {where} ({table['grouped_steps_source']}): median "
                     f"{grouped_here['median']:.0%}, worst {grouped_here['worst']:.0%}")
    host = table.get("launch")
    if bound == "launch" and host:
        parts.append(host["median"])
        basis.append(f"launch-bound steps measured on {host['gpus']} (the host sets them; a faster host runs them "
                     f"faster): median {host['median']:.0%}, worst {host['worst']:.0%}")
    if math_mode == "fp8":  # (tests/predict/test_fp8.py: the fp8 GEMM against published H100 cuBLASLt times)
        basis.append("fp8: GEMMs checked alone on published H100 times (-6% to -26%), a compiled linear's fp8 gain on "
                     "torchao's (+4% for a large layer, -48% for a small one); no published fp8 training step to check "
                     "a whole step against")
    if gen != kgen:
        basis.append(f"no reference on {gen}: {kgen}'s")
    typical = max(parts) if parts else 1.0
    gains = table.get("compiled")
    if compiled and gains:
        typical += gains["median"]
        basis.append(f"compiled: + the predicted compile gains' error on published ones ({gains['source']}): median "
                     f"{gains['median']:.0%}, worst {gains['worst']:.0%}; the host's launch and graph costs are priors")
    return Band(typical, "; ".join(basis) or "no reference")


def reload() -> None:
    """Read ``error_bands.json`` again (after its references rewrote it)."""
    _table.cache_clear()
