"""Can this device run this precision mode? Say why not — never substitute another mode."""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass

import torch

from ampbench.precision.registry import get
from ampbench.precision.state import TF32_OVERRIDE_ENV


@dataclass(frozen=True)
class Support:
    """Answer of :func:`supported`. ``ok`` False means the mode is refused, with ``reason``."""

    ok: bool
    reason: str = ""
    """Why the mode cannot run here (empty when ok)."""
    note: str = ""
    """A caveat when it runs but will not be fast (no Tensor Cores, no bf16 instructions on CPU)."""

    def __bool__(self) -> bool:
        return self.ok


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> dict[str, str]:
    """The first processor's fields from /proc/cpuinfo (empty where unavailable)."""
    info: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    break  # end of the first processor's block
                key, _, value = line.partition(":")
                info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return info


def cpu_flags() -> frozenset[str]:
    """CPU feature flags (x86 "flags"; empty where unavailable)."""
    return frozenset(_cpuinfo().get("flags", "").split())


def cpu_name() -> str:
    """The CPU's model name ("Intel(R) Xeon(R) ..."), or the architecture when unknown."""
    return _cpuinfo().get("model name") or platform.processor() or platform.machine()


ISA_ENV = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
"""oneDNN's cap on the instruction sets its kernels may use (``AVX2`` makes an AVX-512 CPU run as an AVX2 one)."""
ONEDNN_ISAS = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI",
               "AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX", "AVX512_CORE_AMX_FP16")
"""oneDNN's ISA names, smallest first (its dnnl_cpu_isa_t order; AVX10_1_512* are aliases of the FP16/AMX ones)."""
_ISA_ALIASES = {"AVX10_1_512": "AVX512_CORE_FP16", "AVX10_1_512_AMX": "AVX512_CORE_AMX",
                "AVX10_1_512_AMX_FP16": "AVX512_CORE_AMX_FP16"}
_NEEDS = {"avx512f": "AVX512_CORE", "avx512_bf16": "AVX512_CORE_BF16", "avx512_fp16": "AVX512_CORE_FP16",
          "amx_bf16": "AVX512_CORE_AMX", "amx_fp16": "AVX512_CORE_AMX_FP16"}
"""The smallest oneDNN ISA cap under which a CPU flag's instructions can still be used."""


def isa_limit() -> str | None:
    """The ISA cap oneDNN runs under here (ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA), upper-cased; None without one
    (or ``ALL``/``DEFAULT``, which cap nothing)."""
    for name in ISA_ENV:
        value = os.environ.get(name, "").strip().upper()
        value = _ISA_ALIASES.get(value, value)
        if value and value not in ("ALL", "DEFAULT"):
            return value
    return None


def usable(flag: str) -> bool:
    """Whether the CPU has ``flag`` and oneDNN may use it under this process's ISA cap. A cap it does not know
    caps nothing (oneDNN ignores an unknown value too)."""
    if flag not in cpu_flags():
        return False
    limit, needs = isa_limit(), _NEEDS.get(flag)
    if limit is None or needs is None or limit not in ONEDNN_ISAS:
        return True
    return ONEDNN_ISAS.index(limit) >= ONEDNN_ISAS.index(needs)


def cpu_half_hardware() -> dict[str, bool]:
    """Which native half-precision math the CPU has (x86 flags; AVX512-BF16, AMX, AVX512-FP16) and oneDNN may use:
    under ``ONEDNN_MAX_CPU_ISA=AVX2`` an AVX512-BF16 CPU computes bf16 as an AVX2 one does (emulated)."""
    return {flag: usable(flag) for flag in ("avx512_bf16", "amx_bf16", "avx512_fp16", "amx_fp16")}


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


def _fp8_support(device: torch.device) -> Support:
    from ampbench.precision.fp8 import torchao_problem

    if device.type not in ("cpu", "cuda"):
        return Support(False, f"device type {device.type!r} is not supported by ampbench; use cpu or cuda")
    problem = torchao_problem()
    if problem:
        return Support(False, problem)
    if device.type == "cpu":
        return Support(True, note="fp8 matmuls run through torchao on CPU (emulated scaling, CPU scaled-mm): "
                       "numerics like a GPU's, speed says nothing about one")
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
    if recipe.is_fp8:
        return _fp8_support(dev)
    if dev.type == "cpu":
        return _cpu_support(recipe.name, recipe.tf32, half)
    if dev.type == "cuda":
        return _cuda_support(dev, recipe.tf32, half)
    return Support(False, f"device type {dev.type!r} is not supported by ampbench; use cpu or cuda")
