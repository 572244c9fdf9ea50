"""The default suites and what a run measures by default on each kind of device."""

from __future__ import annotations

from dataclasses import dataclass

from ampbench.errors import AmpbenchError
from ampbench.workloads.base import PRESETS


@dataclass(frozen=True)
class SuiteEntry:
    workload: str
    preset: str
    native_only: bool = False
    """Run only the modes this device has math hardware for (and fp32): emulated ones would take hours."""


# CPU: finishes in a few minutes on 2 cores (fp16 convolutions are ~45x slower than fp32 on CPUs without
# AVX512-FP16/AMX-FP16, which is itself a finding). bert small is the GEMM-bound entry: what the CPU's
# half-precision hardware (AVX512-BF16, AMX) can do for a real model, next to ampbench hw's GEMM speedup; in
# emulated modes its matmuls run ~100x slower than fp32, so those are left out of it (and said so). GPU: models big
# enough to keep the GPU busy, so the ratios say something about real training.
CPU_SUITE = (SuiteEntry("mnist-cnn", "small"), SuiteEntry("tabular-mlp", "small"), SuiteEntry("bert", "tiny"),
             SuiteEntry("bert", "small", native_only=True))
GPU_SUITE = (SuiteEntry("conv-dummy", "paper"), SuiteEntry("resnext", "small"), SuiteEntry("bert", "small"),
             SuiteEntry("unet", "small"), SuiteEntry("lstm-lm", "small"))
# 5 workloads x (8 modes + closing fp32) = 45 cells; at ~10-15 s per isolated cell (process start, CUDA init, build,
# warm-up, 50 steps) that is the ~10 minutes the suite is meant to take. Not yet timed on a GPU.
CPU_STEPS, CPU_WARMUP = 20, 3
GPU_STEPS, GPU_WARMUP = 50, 10


def default_steps(device: str) -> tuple[int, int]:
    """(timed steps, warm-up steps) a cell runs on this kind of device unless told."""
    return (GPU_STEPS, GPU_WARMUP) if device.startswith("cuda") else (CPU_STEPS, CPU_WARMUP)


def check_preset(preset: str, flag: str = "--preset") -> str:
    """tiny | small | paper, else one line naming them (the one check every entry point uses)."""
    if preset not in PRESETS:
        raise AmpbenchError(f"{flag} {preset!r}: choose one of {', '.join(PRESETS)}")
    return preset


def with_presets(workloads: list[str], preset: str | None, device: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The workloads and their presets: given ones at --preset (default small), or the device's default suite."""
    if preset is not None:
        check_preset(preset)
    if workloads:
        return tuple(workloads), tuple(preset or "small" for _ in workloads)
    suite = _suite(device, preset)
    return tuple(e.workload for e in suite), tuple(e.preset for e in suite)


def _suite(device: str, preset: str | None) -> tuple[SuiteEntry, ...]:
    """The device's default suite; with --preset every entry at that preset (entries that become the same, once)."""
    suite = GPU_SUITE if device.startswith("cuda") else CPU_SUITE
    if preset is None:
        return suite
    out: list[SuiteEntry] = []
    for e in suite:
        entry = SuiteEntry(e.workload, preset, e.native_only)
        if all((o.workload, o.preset) != (entry.workload, entry.preset) for o in out):
            out.append(entry)
    return tuple(out)


def native_only_entries(workloads: list[str], preset: str | None, precisions_given: bool,
                        device: str) -> tuple[str, ...]:
    """The default suite's native-only entries ('workload:preset'), unless the user named workloads or modes."""
    if workloads or precisions_given:
        return ()
    return tuple(f"{e.workload}:{e.preset}" for e in _suite(device, preset) if e.native_only)
