"""Fitting the kernel models' constants on measured kernels, and their errors per op class and GPU.

The protocol (the predict issue's and NeuSight's own): fit on some GPUs (:data:`~predict_checks.neusight.FIT_GPUS`:
P4, P100, T4, V100), report the error on the others (A100, H100, L4) apart; a constant is never fitted to a figure it is
then checked against. The fit is coordinate descent over a grid of values per constant, minimising, over every
(GPU, op class) of the fitting GPUs, the median absolute log error plus a quarter of its 90th percentile.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ampbench.predict.kernels import Calibration
from predict_checks.neusight import Case

FITTED: dict[str, tuple[tuple[float, ...], tuple[str, ...]]] = {
    # the bandwidth first, on the purest measure of it (elementwise kernels); the rest built on it
    "memory_efficiency": ((0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9), ("elementwise",)),
    "hbm_efficiency": ((0.7, 0.75, 0.8, 0.85, 0.9, 0.95), ("elementwise",)),
    "gemm_efficiency": ((0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0), ("linear", "bmm", "conv")),
    "tile_128x64": ((0.6, 0.7, 0.8, 0.9, 1.0), ("linear", "bmm", "conv")),
    "tile_64x64": ((0.4, 0.5, 0.6, 0.7, 0.8, 0.9), ("linear", "bmm", "conv")),
    "tile_32x32": ((0.2, 0.3, 0.4, 0.5, 0.6), ("linear", "bmm", "conv")),
    "k_half": ((0.0, 8.0, 16.0, 32.0, 64.0, 128.0), ("linear", "bmm", "conv")),
    "norm_passes": ((2.0, 2.5, 3.0, 3.5, 4.0), ("layernorm",)),
    "softmax_passes": ((2.0, 2.5, 3.0, 3.5, 4.0), ("softmax",)),
    "winograd_efficiency": ((0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0, 1.2), ("conv",)),
    "clock_share": ((0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0), ("linear", "bmm", "conv", "layernorm", "softmax")),
}
"""The constants fitted, the values tried (refined around the best after the first rounds), and the op classes each
one moves (only those are re-priced when it changes)."""


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


def fit(cases: list[Case], start: Calibration | None = None, rounds: int = 12, refine: bool = False) -> Calibration:
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
        for name, (values, classes) in FITTED.items():
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
