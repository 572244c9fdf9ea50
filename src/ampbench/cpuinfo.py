"""What the CPU is and which half-precision instructions it may use here (x86 flags, oneDNN's ISA cap).

Torch-free (a Keras cell on TensorFlow or JAX labels its CPU with these too); :mod:`ampbench.precision.support` says
what they mean for each precision mode.
"""

from __future__ import annotations

import functools
import os
import platform


@functools.lru_cache(maxsize=1)
def cpuinfo_fields() -> dict[str, str]:
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
    return frozenset(cpuinfo_fields().get("flags", "").split())


def cpu_name() -> str:
    """The CPU's model name ("Intel(R) Xeon(R) ..."), or the architecture when unknown."""
    return cpuinfo_fields().get("model name") or platform.processor() or platform.machine()


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


def half_math_claim(hw: dict[str, bool], flops_per_cycle: dict[str, float] | None = None) -> str:
    """What a CPU's half-precision hardware lets one expect, from its flags and (when known) the peak
    FLOPs per cycle of :func:`ampbench.measure.cpu.cpu_peak`: the same words in ``hw``, the advisor and ``diagnose``."""
    fpc = flops_per_cycle or {}
    parts = []
    for mode, amx, vec in (("bf16", "amx_bf16", "avx512_bf16"), ("fp16", "amx_fp16", "avx512_fp16")):
        unit = f"AMX-{mode.upper()}" if hw.get(amx) else f"AVX512-{mode.upper()}" if hw.get(vec) else None
        if unit is None:
            parts.append(f"{mode} math is emulated (converted to fp32: slower than fp32)")
            continue
        ratio = fpc.get(mode, 0) / fpc["fp32"] if fpc.get("fp32") else None
        parts.append(f"{mode} matmuls run on {unit}" + (f" (peak {ratio:g}x fp32's)" if ratio else ""))
    return "; ".join(parts)
