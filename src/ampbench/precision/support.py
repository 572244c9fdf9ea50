"""Can this device run this precision mode? Say why not — never substitute another mode."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass

import torch

from ampbench.cpuinfo import cpu_flags, cpu_half_hardware, cpu_name, isa_limit, usable  # noqa: F401  (re-exported)
from ampbench.precision.fp8 import torchao_problem
from ampbench.precision.fp8_probe import cpu_fp8_problem, cpu_fp8_slowness
from ampbench.precision.registry import get
from ampbench.precision.tf32_flags import TF32_OVERRIDE_ENV


@dataclass(frozen=True)
class Support:
    """Answer of :func:`supported`. ``ok`` False means the mode is refused, with ``reason``."""

    ok: bool
    reason: str = ""
    """Why the mode cannot run here (empty when ok)."""
    note: str = ""
    """A caveat when it runs but will not be fast (no Tensor Cores, no bf16 instructions on CPU)."""
    slow: str = ""
    """Where a kernel the mode needs was timed far slower here than its math needs (a reference kernel: an fp8 matmul
    on a CPU, :func:`~ampbench.precision.fp8_probe.cpu_fp8_slowness`), what that means: said before a run starts."""

    def __bool__(self) -> bool:
        return self.ok


def _cpu_support(recipe_name: str, tf32: bool, half: torch.dtype | None) -> Support:
    if tf32:
        return Support(False, "TF32 is an NVIDIA Tensor Core math mode (CUDA, compute capability >= 8.0); "
                       "there is none on CPU. Use fp32")
    if half is None:
        return Support(True)
    hw = cpu_half_hardware()
    if half == torch.bfloat16 and not (hw["avx512_bf16"] or hw["amx_bf16"]):
        note = (f"CPU ({platform.machine()}) has no AVX512-BF16/AMX-BF16: bf16 math is emulated and "
                "slower than fp32 here")
    elif half == torch.float16 and not (hw["avx512_fp16"] or hw["amx_fp16"]):
        note = (f"CPU ({platform.machine()}) has no AVX512-FP16/AMX-FP16: fp16 math is emulated and "
                "slower than fp32 here")
    else:
        note = ""
    return Support(True, note=note)


def _fp8_support(device: torch.device, recipe_name: str) -> Support:
    if device.type not in ("cpu", "cuda"):
        return Support(False, f"device type {device.type!r} is not supported by ampbench; use cpu or cuda")
    problem = torchao_problem()
    if problem:
        return Support(False, problem)
    if device.type == "cpu":
        kernel = cpu_fp8_problem()
        if kernel:
            return Support(False, kernel)
        slow = cpu_fp8_slowness("tensorwise" if recipe_name == "fp8-tensorwise" else "rowwise")
        return Support(True, note="fp8 matmuls run through torchao on CPU (emulated scaling, CPU scaled-mm): "
                       "numerics like a GPU's, speed says nothing about one" + (f"; {slow}" if slow else ""), slow=slow)
    base = _cuda_support(device, False, torch.bfloat16)
    if not base.ok:
        return base
    index = device.index if device.index is not None else torch.cuda.current_device()
    major, minor = torch.cuda.get_device_capability(index)
    if (major, minor) < (8, 9):
        return Support(False, f"fp8 Tensor Cores need compute capability >= 8.9 (Ada, Hopper or newer); "
                       f"{torch.cuda.get_device_name(index)} is {major}.{minor}")
    return Support(True)


def _cuda_support(device: torch.device, tf32: bool, half: torch.dtype | None) -> Support:
    if not torch.cuda.is_available():
        return Support(False, "CUDA is not available (no NVIDIA GPU or a CPU-only torch build); use --device cpu")
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index >= torch.cuda.device_count():
        return Support(False, f"cuda:{index} does not exist ({torch.cuda.device_count()} GPU(s) visible)")
    major, minor = torch.cuda.get_device_capability(index)
    cc = f"{major}.{minor}"
    gpu = torch.cuda.get_device_name(index)
    if tf32 and major < 8:
        return Support(False, f"TF32 needs compute capability >= 8.0; {gpu} is {cc}")
    if half == torch.bfloat16 and major < 8:
        return Support(False, f"bf16 needs compute capability >= 8.0 (Ampere or newer); {gpu} is {cc}")
    if not tf32 and half is None:
        forced = [k for k in TF32_OVERRIDE_ENV if os.environ.get(k, "0") not in ("", "0")]
        if forced:
            return Support(False, f"{', '.join(forced)} is set: cuBLAS/cuDNN would use TF32, so this would "
                           "not be true fp32. Unset it, or run the tf32 mode")
    if half == torch.float16 and major < 7:
        return Support(True, note=f"{gpu} (CC {cc}) has no Tensor Cores: fp16 saves memory but gives little speed")
    return Support(True)


def supported(name: str, device: str | torch.device = "cpu") -> Support:
    """Whether ``device`` can run precision mode ``name`` (name or alias), and why not.

    >>> supported("tf32", "cpu").ok
    False
    """
    recipe = get(name)
    dev = torch.device(device)
    half = recipe.compute_dtype if recipe.is_half else None
    if dev.type == "meta":  # shapes and dtypes only: ampbench predict traces a step there (nothing is computed)
        return Support(True, note="meta tensors: a traced step, nothing computed (ampbench predict)")
    if recipe.is_fp8:
        return _fp8_support(dev, recipe.name)
    if dev.type == "cpu":
        return _cpu_support(recipe.name, recipe.tf32, half)
    if dev.type == "cuda":
        return _cuda_support(dev, recipe.tf32, half)
    return Support(False, f"device type {dev.type!r} is not supported by ampbench; use cpu or cuda")
