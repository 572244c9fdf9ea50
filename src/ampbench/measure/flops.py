"""FLOPs per training step (torch.utils.flop_counter) and model FLOPs utilisation (MFU)."""

from __future__ import annotations

import warnings
from collections.abc import Callable

from torch.utils.flop_counter import FlopCounterMode

from ampbench.measure.peaks import peak_tflops


def count_flops(fn: Callable[[], object]) -> int:
    """FLOPs torch's counter sees while ``fn`` runs (matmuls, convolutions, attention; forward + backward).

    Elementwise ops are not counted (the convention of MFU: PaLM appendix B, nanoGPT's estimate_mfu).
    """
    return count_flops_split(fn)[0]


def count_flops_split(fn: Callable[[], object]) -> tuple[int, float | None]:
    """(FLOPs, the share of them in convolutions) while ``fn`` runs. A GEMM micro-benchmark says how
    fast matmuls run, not convolutions: the share tells which kind of model a FLOP count is."""
    counter = FlopCounterMode(display=False)
    with counter, warnings.catch_warnings():
        # the counter's module hooks are global: torch.compile warns they fire once more for its wrapper (no FLOPs)
        warnings.filterwarnings("ignore", message=".*global hooks on modules.*")
        fn()
    total = int(counter.get_total_flops())
    conv = sum(v for op, v in counter.get_flop_counts().get("Global", {}).items() if "convolution" in str(op))
    return total, (conv / total if total else None)


def mfu(flops_per_step: int | None, steps: int, seconds: float, device_name: str | None,
        math_mode: str | None, device_type: str = "cuda") -> dict[str, float | None]:
    """achieved TFLOP/s and the fraction of the dense peak for this device and math mode (GPU: the
    table's; CPU: its theoretical peak, :mod:`ampbench.measure.cpu`)."""
    if not flops_per_step or seconds <= 0:
        return {"achieved_tflops": None, "peak_tflops": None, "mfu": None}
    achieved = flops_per_step * steps / seconds / 1e12
    peak = peak_tflops(device_name, math_mode, device_type)
    return {"achieved_tflops": achieved, "peak_tflops": peak, "mfu": achieved / peak if peak else None}
