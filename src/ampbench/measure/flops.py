"""FLOPs per training step (torch.utils.flop_counter with our corrections) and model FLOPs utilisation (MFU)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

from torch.utils.flop_counter import FlopCounterMode

from ampbench.measure.flop_formulas import custom_mapping
from ampbench.measure.peaks import peak_tflops


def count_flops(fn: Callable[[], object]) -> int:
    """Model FLOPs while ``fn`` runs (matmuls, convolutions, attention, recurrent layers; forward + backward).

    torch's counter with the formulas of :mod:`ampbench.measure.flop_formulas` where its own are wrong or
    missing (grouped convolutions' backward, attention on CPU, LSTM/GRU kernels). Elementwise ops are not
    counted (the convention of MFU: PaLM appendix B, nanoGPT's estimate_mfu).
    """
    return count_flops_split(fn)[0]


@dataclass(frozen=True)
class FlopCount:
    """One counted step: its FLOPs, the share in convolutions, and FLOPs per module (each module's name as in
    ``model.named_modules()``, its forward and backward; a module's total includes its children's)."""

    total: int
    conv_share: float | None
    by_module: dict[str, int]

    def share_of(self, modules: list[str]) -> float | None:
        """The share of the FLOPs in these modules (e.g. the Linear layers converted to fp8)."""
        if not self.total:
            return None
        return sum(self.by_module.get(m, 0) for m in set(modules)) / self.total


def count_step(fn: Callable[[], object]) -> FlopCount:
    """The FLOPs while ``fn`` runs (see :func:`count_flops`), split by op kind and by module."""
    counter = FlopCounterMode(display=False, custom_mapping=custom_mapping())
    with counter, warnings.catch_warnings():
        # the counter's module hooks are global: torch.compile warns they fire once more for its wrapper (no FLOPs)
        warnings.filterwarnings("ignore", message=".*global hooks on modules.*")
        fn()
    counts = counter.get_flop_counts()
    total = int(counter.get_total_flops())
    conv = sum(v for op, v in counts.get("Global", {}).items() if "convolution" in str(op))
    by_module: dict[str, int] = {}
    for key, ops in counts.items():  # keys: "Global" and "<root class>.<name>"; a DDP/compile wrapper adds a prefix
        if "." in key:
            name = key.split(".", 1)[1]
            for prefix in ("module.", "_orig_mod."):
                name = name.removeprefix(prefix)
            by_module[name] = by_module.get(name, 0) + int(sum(ops.values()))
    return FlopCount(total, conv / total if total else None, by_module)


def count_flops_split(fn: Callable[[], object]) -> tuple[int, float | None]:
    """(FLOPs, the share of them in convolutions) while ``fn`` runs. A GEMM micro-benchmark says how
    fast matmuls run, not convolutions: the share tells which kind of model a FLOP count is."""
    c = count_step(fn)
    return c.total, c.conv_share


def fp8_peak(device_name: str | None, device_type: str, fp8_share: float) -> float | None:
    """The dense peak an fp8 step can reach: its FLOPs in converted layers at the fp8 peak, the rest (attention,
    the layers left in bf16) at the bf16 peak -- the time-weighted (harmonic) mix, bf16's when nothing converted."""
    fp8, bf16 = peak_tflops(device_name, "fp8", device_type), peak_tflops(device_name, "bf16", device_type)
    if bf16 is None or (fp8 is None and fp8_share > 0):
        return None
    return 1.0 / (fp8_share / fp8 + (1.0 - fp8_share) / bf16) if fp8_share > 0 else bf16  # type: ignore[operator]


def mfu(flops_per_step: int | None, steps: int, seconds: float, device_name: str | None,
        math_mode: str | None, device_type: str = "cuda", fp8_share: float | None = None) -> dict[str, float | None]:
    """achieved TFLOP/s and the fraction of the dense peak for this device and math mode (GPU: the
    table's; CPU: its theoretical peak, :mod:`ampbench.measure.cpu`). fp8 modes with ``fp8_share`` (the share of the
    FLOPs in converted layers): :func:`fp8_peak`, not the fp8 peak whatever ran in fp8."""
    if not flops_per_step or seconds <= 0:
        return {"achieved_tflops": None, "peak_tflops": None, "mfu": None}
    achieved = flops_per_step * steps / seconds / 1e12
    if math_mode == "fp8" and fp8_share is not None:
        peak = fp8_peak(device_name, device_type, fp8_share)
    else:
        peak = peak_tflops(device_name, math_mode, device_type)
    return {"achieved_tflops": achieved, "peak_tflops": peak, "mfu": achieved / peak if peak else None}
