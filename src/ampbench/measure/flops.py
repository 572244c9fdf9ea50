"""FLOPs per training step (torch.utils.flop_counter) and model FLOPs utilisation (MFU)."""

from __future__ import annotations

from collections.abc import Callable

from torch.utils.flop_counter import FlopCounterMode

from ampbench.measure.peaks import peak_tflops


def count_flops(fn: Callable[[], object]) -> int:
    """FLOPs torch's counter sees while ``fn`` runs (matmuls, convolutions, attention; forward + backward).

    Elementwise ops are not counted (the convention of MFU: PaLM appendix B, nanoGPT's estimate_mfu).
    """
    counter = FlopCounterMode(display=False)
    with counter:
        fn()
    return int(counter.get_total_flops())


def mfu(flops_per_step: int | None, steps: int, seconds: float, device_name: str | None,
        math_mode: str | None, device_type: str = "cuda") -> dict[str, float | None]:
    """achieved TFLOP/s and the fraction of the dense peak for this device and math mode (GPU: the
    table's; CPU: its theoretical peak, :mod:`ampbench.measure.cpu`)."""
    if not flops_per_step or seconds <= 0:
        return {"achieved_tflops": None, "peak_tflops": None, "mfu": None}
    achieved = flops_per_step * steps / seconds / 1e12
    peak = peak_tflops(device_name, math_mode, device_type)
    return {"achieved_tflops": achieved, "peak_tflops": peak, "mfu": achieved / peak if peak else None}
