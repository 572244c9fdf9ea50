"""The CPU as a device: its half-precision hardware, its theoretical peak, and what they mean.

One probe for every hardware claim ampbench makes about a CPU: ``ampbench hw``, the ``env`` of every
row, the advisor, the reports and ``diagnose`` all read these functions (never their own guesses).

Theoretical peak = cores x clock x FLOPs per cycle per core, per math mode (cf. the GPU table in
:mod:`ampbench.measure.peaks`). FLOPs per cycle per core, from the vendors' optimisation manuals:

- fp32, AVX-512 with two 512-bit FMA units (Intel Xeon Scalable Gold/Platinum and newer, AMD Zen 5):
  2 FMA x 16 lanes x 2 = 64. AMD Zen 4 runs AVX-512 on two 256-bit FMA pipes: 32. AVX2 + FMA: 32.
- bf16: AMX-BF16 (Intel Sapphire Rapids and newer): 1024 (a TDPBF16PS tile op, 16x16x32 multiply-adds,
  every 16 cycles; Intel: "1,024 BF16 FLOPs per cycle per core"). AVX512-BF16 (VDPBF16PS: two
  multiply-adds per fp32 lane): twice the core's fp32 rate. Without either, bf16 math is converted
  to fp32 and runs at most at the fp32 rate.
- fp16: AMX-FP16 (Granite Rapids): 1024; AVX512-FP16 (32 fp16 lanes per FMA): twice the fp32 rate;
  otherwise at most the fp32 rate (F16C conversions).

What the numbers assume is said with them (``CpuPeak.source``): the clock is the maximum the OS
reports (cpufreq), or, in virtual machines that hide it, the nominal clock in /proc/cpuinfo -- then
turbo can run above it and a measured rate can exceed the "peak". AVX-512 and AMX code often runs
below the maximum clock, so real peaks are lower. Cores = the threads torch uses, capped at the
physical cores this process may run on.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Any

import psutil
import torch

from ampbench.cpuinfo import cpu_flags, cpu_half_hardware, cpu_name, cpuinfo_fields, isa_limit, usable

AMX_FLOPS_PER_CYCLE = 1024.0


@dataclass(frozen=True)
class CpuPeak:
    tflops: dict[str, float]
    """math mode (fp32, bf16, fp16) -> theoretical peak TFLOP/s of the cores this process uses."""
    flops_per_cycle: dict[str, float]
    """math mode -> FLOPs per cycle per core (see the module docstring)."""
    cores: int
    clock_ghz: float
    source: str
    """What the numbers assume (microarchitecture, clock and where it came from, cores)."""
    units: dict[str, str] = field(default_factory=dict)
    """math mode -> the instructions the peak is for (AMX, AVX512-BF16, AVX-512 FMA, emulated)."""

    def to_dict(self) -> dict[str, Any]:
        return {"tflops": dict(self.tflops), "flops_per_cycle": dict(self.flops_per_cycle), "cores": self.cores,
                "clock_ghz": self.clock_ghz, "source": self.source, "units": dict(self.units)}


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def clock_ghz() -> tuple[float | None, str]:
    """(GHz, where it came from): cpufreq's maximum, else the nominal MHz of /proc/cpuinfo."""
    try:
        with open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", encoding="ascii") as f:
            return int(f.read().strip()) / 1e6, "maximum clock (cpufreq)"
    except (OSError, ValueError):
        pass
    mhz = cpuinfo_fields().get("cpu MHz")
    try:
        return float(mhz) / 1e3, ("nominal clock from /proc/cpuinfo (no cpufreq here, e.g. a virtual machine: "
                                  "turbo can run above it, so measured rates can exceed this peak)")
    except (TypeError, ValueError):
        return None, "clock unknown"


def cores_used() -> int:
    """The cores torch's threads run on: its thread count, capped at the physical cores we may use."""
    physical = psutil.cpu_count(logical=False) or os.cpu_count() or 1
    try:
        allowed = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        allowed = os.cpu_count() or 1
    return max(1, min(torch.get_num_threads(), physical, allowed))


def fp32_flops_per_cycle() -> tuple[float | None, str]:
    """fp32 FLOPs per cycle per core and the microarchitecture assumption behind it."""
    info, flags = cpuinfo_fields(), cpu_flags()
    vendor, family = info.get("vendor_id", ""), _int(info.get("cpu family"))
    if usable("avx512f"):
        if vendor == "AuthenticAMD" and family == 25:
            return 32.0, "AMD Zen 4: AVX-512 on two 256-bit FMA pipes"
        if vendor == "AuthenticAMD":
            return 64.0, "AMD Zen 5 or newer: two 512-bit FMA pipes"
        return 64.0, ("AVX-512 with two FMA units per core (Xeon Gold/Platinum and newer; some Silver/Bronze "
                      "parts have one, half this)")
    if "avx2" in flags and "fma" in flags:
        return 32.0, "AVX2 with two FMA units per core"
    return None, "no AVX2/AVX-512 FMA: peak not estimated"


@functools.lru_cache(maxsize=4)
def _cpu_peak(threads: int, limit: str | None) -> CpuPeak | None:
    fp32, arch = fp32_flops_per_cycle()
    ghz, clock_src = clock_ghz()
    if fp32 is None or ghz is None:
        return None
    hw = cpu_half_hardware()
    per: dict[str, float] = {"fp32": fp32}
    units = {"fp32": "AVX-512 FMA" if usable("avx512f") else "AVX2 FMA"}
    for mode, amx, vec, vec_name in (("bf16", "amx_bf16", "avx512_bf16", "AVX512-BF16"),
                                     ("fp16", "amx_fp16", "avx512_fp16", "AVX512-FP16")):
        if hw[amx]:
            per[mode], units[mode] = AMX_FLOPS_PER_CYCLE, f"AMX-{mode.upper()}"
        elif hw[vec]:
            per[mode], units[mode] = 2 * fp32, vec_name
        else:
            per[mode], units[mode] = fp32, "none: converted to fp32 (at most the fp32 rate)"
    cores = cores_used()
    source = (f"{cores} core(s) x {ghz:.2f} GHz ({clock_src}) x FLOPs/cycle/core "
              + ", ".join(f"{m} {v:g} ({units[m]})" for m, v in per.items()) + f"; {arch}")
    return CpuPeak({m: cores * ghz * v / 1e3 for m, v in per.items()}, per, cores, ghz, source, units)


def cpu_peak() -> CpuPeak | None:
    """The theoretical peak of this CPU for the threads torch uses now (None when it cannot be estimated)."""
    return _cpu_peak(torch.get_num_threads(), isa_limit())


def half_hardware_summary(hw: dict[str, bool] | None = None) -> str:
    """'AMX-BF16, AVX512-BF16' / 'none': the native half-precision math of a CPU (flags as recorded)."""
    hw = cpu_half_hardware() if hw is None else hw
    names = [n for k, n in (("amx_bf16", "AMX-BF16"), ("amx_fp16", "AMX-FP16"), ("avx512_bf16", "AVX512-BF16"),
                            ("avx512_fp16", "AVX512-FP16")) if hw.get(k)]
    return ", ".join(names) or "none"


def cpu_facts() -> dict[str, Any]:
    """What every CPU row's env records about the hardware (the same probe as ``ampbench hw``)."""
    peak = cpu_peak()
    return {"cpu": cpu_name(), "cpu_half_hardware": cpu_half_hardware(),
            "cpu_peak": peak.to_dict() if peak is not None else None, "cpu_isa_limit": isa_limit(),
            "aten_cpu_capability": torch.backends.cpu.get_cpu_capability()}
