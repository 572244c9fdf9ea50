"""``ampbench hw``: what this device is, which precision modes it runs and why not, and a GEMM
micro-benchmark (measured TFLOP/s per math mode and % of the table's dense peak)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import torch

from ampbench.cpuinfo import cpu_half_hardware, half_math_claim
from ampbench.measure import host_ops
from ampbench.measure.cpu import cpu_peak
from ampbench.measure.env import environment
from ampbench.measure.gpus import for_device
from ampbench.measure.peaks import tensor_core_generation
from ampbench.measure.timing import captured, on_device
from ampbench.precision import list_precisions, supported
from ampbench.precision.fp8_probe import cpu_fp8_problem, cpu_fp8_slowness
from ampbench.precision.tf32_flags import tf32_scope

GPU_SIZES = (1024, 2048, 4096, 8192)
CPU_SIZES = (256, 512, 1024)  # an emulated fp16 GEMM at 2048 takes ~30 s a call
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16,
          "fp8": torch.float8_e4m3fn}


GEMM_LAYOUTS = ("nn", "nt", "tn")
"""The operands' layouts a training step's GEMMs take, read as ``torch.mm(a, b)`` of row-major tensors: ``nn`` both
row-major (a Hugging Face ``Conv1D``'s forward, a Linear's data gradient ``grad @ W``), ``nt`` the second a transposed
view (a Linear's forward ``x @ W.t()``), ``tn`` the first one (a Linear's weight gradient ``grad.t() @ x``)."""


def matmul(m: int, n: int, k: int, math_mode: str, device: torch.device, batch: int = 1,
           layout: str = "nn") -> Callable[[], object]:
    """``batch`` x (m x k) @ (k x n) of ``math_mode``: torch.mm (torch.bmm for ``batch`` > 1), or for fp8
    ``torch._scaled_mm`` (e4m3 operands, the second column-major as the fp8 kernels need, unit scales, bf16 out:
    the GEMM fp8 training runs; no batch); ``layout`` (:data:`GEMM_LAYOUTS`): which operand is a transposed view."""
    if layout not in GEMM_LAYOUTS:
        raise ValueError(f"layout {layout!r}: one of {', '.join(GEMM_LAYOUTS)}")
    g = torch.Generator(device=device).manual_seed(0)
    lead = (batch,) if batch > 1 else ()
    a = torch.randn(*lead, *((k, m) if layout == "tn" else (m, k)), device=device, generator=g).to(DTYPES[math_mode])
    b = torch.randn(*lead, *((n, k) if layout == "nt" else (k, n)), device=device, generator=g).to(DTYPES[math_mode])
    a, b = (a.transpose(-2, -1) if layout == "tn" else a), (b.transpose(-2, -1) if layout == "nt" else b)
    if math_mode != "fp8":
        return (lambda: torch.bmm(a, b)) if batch > 1 else (lambda: torch.mm(a, b))
    if batch > 1:
        raise ValueError("an fp8 GEMM here is one torch._scaled_mm: batch must be 1")
    b = b.t().contiguous().t()
    one = torch.ones((), device=device)
    return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)


def fp8_gemm_runs(device: torch.device) -> bool:
    """Whether ``torch._scaled_mm`` runs here (CUDA needs compute capability >= 8.9; a CPU, oneDNN's fp8 matmul:
    what a child process's probe of its calls says, :func:`~ampbench.precision.fp8_probe.cpu_fp8_problem`)."""
    if device.type == "cuda" and torch.cuda.get_device_capability(device) < (8, 9):
        return False
    if device.type == "cpu":
        return cpu_fp8_problem() is None
    try:
        matmul(16, 16, 16, "fp8", device)()
        return True
    except (RuntimeError, AttributeError, NotImplementedError):
        return False


REPLAY_FLOPS = 2.0**36
"""GPU: the GEMMs one timed launch replays are at least this many FLOPs (~69 GFLOP: ~70 us at 1,000 TFLOP/s)."""
MAX_REPLAY_GEMMS = 64


def gemms_per_replay(n: int) -> int:
    """How many n x n x n GEMMs one CUDA-graph replay runs: a 1024^3 bf16 GEMM takes ~3 us on an H100, less than one
    Python launch (~5-10 us), so GEMMs launched one by one time the launch rate, not the GEMM; a replay of K GEMMs
    is one launch for K of them (32 at n = 1024, 1 from n = 4096)."""
    return int(max(1, min(MAX_REPLAY_GEMMS, math.ceil(REPLAY_FLOPS / (2.0 * n**3)))))


def _replayed(mm: Callable[[], object], n: int, device: torch.device) -> tuple[Callable[[], object], int]:
    """(a call, the GEMMs it runs): on CUDA a captured graph of :func:`gemms_per_replay` GEMMs (its replay), on a CPU
    the GEMM itself (a CPU GEMM at these sizes is far longer than a call's overhead)."""
    if device.type != "cuda":
        return mm, 1
    k = gemms_per_replay(n)
    return captured(mm, k, device, warmup=3), k


def gemm_tflops(n: int, math_mode: str, device: torch.device, min_seconds: float = 0.2) -> float:
    """TFLOP/s of an n x n x n matmul (2n^3 FLOPs) on random normal data, after warm-up (GPU: replays of a CUDA graph
    of several GEMMs, so the GEMMs and not their launches are timed)."""
    with on_device(device), tf32_scope(math_mode == "tf32"):
        fn, per_call = _replayed(matmul(n, n, n, math_mode, device), n, device)
        t0 = time.perf_counter()
        for _ in range(3):  # warm-up; an emulated half GEMM on a CPU can take seconds: one call is enough then
            fn()
            if time.perf_counter() - t0 > min_seconds:
                break
        iters, seconds = time_calls(fn, device, min_seconds)
    return 2.0 * n**3 * per_call * iters / seconds / 1e12


def event_seconds(fn: Callable[[], object], n: int) -> float:
    """Seconds of ``n`` calls of ``fn`` queued between two CUDA events (no sync inside)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(n):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def time_calls(fn: Callable[[], object], device: torch.device, min_seconds: float,
               max_iters: int = 100_000) -> tuple[int, float]:
    """(calls, seconds) of back-to-back calls lasting at least ``min_seconds``.

    GPU: the calls are queued between two CUDA events with no sync inside, doubling the count
    until the span is long enough (a call is a graph replay of several GEMMs: see :func:`_replayed`).
    CPU: perf_counter around calls until the time is up.
    """
    if device.type == "cuda":
        iters = 1
        while True:
            seconds = event_seconds(fn, iters)
            if seconds >= min_seconds or iters >= max_iters:
                return iters, seconds
            iters = min(max_iters, iters * 2 if seconds <= 0 else max(iters * 2, int(iters * min_seconds / seconds) + 1))
    iters, t0 = 0, time.perf_counter()
    while True:  # (at least one call, so a rate is never 0 / 0)
        fn()
        iters += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= min_seconds or iters >= max_iters:
            return iters, elapsed


def gemm_speedups(gemm: list[dict[str, Any]]) -> dict[str, float]:
    """Measured TFLOP/s of each math mode / fp32's, at the largest size both were measured at (a mode timed at fewer
    sizes -- a CPU's reference fp8 kernel -- against fp32 at its own largest)."""
    fp32 = {g["size"]: g["tflops"] for g in gemm if g["math_mode"] == "fp32" and g["tflops"]}
    out: dict[str, float] = {}
    for mode in dict.fromkeys(g["math_mode"] for g in gemm if g["math_mode"] != "fp32"):
        both = [g for g in gemm if g["math_mode"] == mode and g["size"] in fp32]
        if both:
            g = max(both, key=lambda g: g["size"])
            out[mode] = g["tflops"] / fp32[g["size"]]
    return out


def gemm_modes(device: torch.device) -> list[str]:
    fp8 = ["fp8"] if fp8_gemm_runs(device) else []
    if device.type == "cpu":
        return ["fp32", "bf16", "fp16", *fp8]
    major, _ = torch.cuda.get_device_capability(device)
    return ["fp32", "tf32", "fp16", "bf16", *fp8] if major >= 8 else ["fp32", "fp16"]


def probe(device: torch.device, sizes: tuple[int, ...] | None = None, run_gemm: bool = True) -> dict[str, Any]:
    """Facts about ``device`` plus the GEMM benchmark (one entry per math mode x size)."""
    with on_device(device):
        return _probe(device, sizes, run_gemm)


def _probe(device: torch.device, sizes: tuple[int, ...] | None, run_gemm: bool) -> dict[str, Any]:
    env = environment(device)
    out: dict[str, Any] = {"device": str(device), "device_name": env["device_name"], "env": env}
    modes = {}
    for p in list_precisions():
        s = supported(p, device)
        modes[p] = {"ok": s.ok, "reason": s.reason, "note": s.note}
    out["precisions"] = modes
    if device.type == "cuda":
        cap = torch.cuda.get_device_capability(device)
        entry = for_device(env["device_name"])
        out.update(capability=f"{cap[0]}.{cap[1]}", tensor_cores=tensor_core_generation(cap),
                   peaks=dict(entry.tflops) if entry else None, peaks_source=entry.source if entry else None)
        out["half_can_be_faster"] = cap[0] >= 7
        out["verdict"] = (f"Tensor Cores: {out['tensor_cores']}" if cap[0] >= 7 else
                          "no Tensor Cores: fp16 saves memory but gives little speed")
    else:
        hw = cpu_half_hardware()
        peak = cpu_peak()
        out.update(capability=None, tensor_cores=None, cpu_half_hardware=hw,
                   peaks=dict(peak.tflops) if peak else None, peaks_source=peak.source if peak else None)
        out["half_can_be_faster"] = any(hw.values())
        out["verdict"] = half_math_claim(hw, peak.flops_per_cycle if peak else None)
    # the host's time per op (what a launch-bound step is made of; predict --host-us takes the CUDA figures)
    out["host_ops"] = host_ops.measure(device, steps=50, warmup=10).as_dict()
    gemm = []
    if run_gemm:
        peaks = out.get("peaks") or {}
        # (a CPU whose per-tensor fp8 matmul is a reference kernel -- an AMX Xeon's, 0.12 GFLOP/s: 17 s a call at
        # n=1,024, most of this command's 43 s -- times it at the first size only, and says so)
        slow_fp8 = cpu_fp8_slowness("tensorwise") if device.type == "cpu" else ""
        timed_fp8, skipped_fp8 = False, []
        for n in sizes or (GPU_SIZES if device.type == "cuda" else CPU_SIZES):
            for mode in gemm_modes(device):
                if mode == "fp8" and n % 16:  # torch._scaled_mm needs every dim divisible by 16 on CUDA
                    out.setdefault("notes", []).append(f"fp8 GEMM not run at n={n}: fp8 GEMMs need sizes that are "
                                                       "multiples of 16")
                    continue
                if mode == "fp8" and slow_fp8 and timed_fp8:
                    skipped_fp8.append(f"{n:,}")
                    continue
                timed_fp8 = timed_fp8 or mode == "fp8"
                tf = gemm_tflops(n, mode, device)
                top = peaks.get(mode)
                gemm.append({"size": n, "math_mode": mode, "tflops": tf, "peak_tflops": top,
                             "fraction_of_peak": tf / top if top else None})
        if skipped_fp8:
            out.setdefault("notes", []).append(f"fp8 GEMM not run at n={', '.join(skipped_fp8)}: {slow_fp8}")
    over = [g for g in gemm if (g["fraction_of_peak"] or 0.0) > 1.0]
    if over:  # (a rate above the peak proves the peak wrong here -- a clock read below the one it runs at: every
        # fraction of it is then overstated, not only those above 1 -- so none is shown; the rates stand)
        top = max(over, key=lambda g: g["fraction_of_peak"])
        out.setdefault("notes", []).append(
            f"{top['math_mode']} GEMM at n={top['size']:,} ran {top['fraction_of_peak']:.2f}x its peak above: this "
            "device runs faster than the peak assumes (a CPU's clock read as nominal where no cpufreq says its "
            "turbo, as in a virtual machine), so the peaks are lower bounds here and no % of them is shown")
        for g in gemm:
            g["fraction_of_peak"] = None
    out["gemm"] = gemm
    if gemm:
        out["gemm_vs_fp32"] = gemm_speedups(gemm)
        halves = {m: r for m, r in out["gemm_vs_fp32"].items() if m in ("fp16", "bf16", "fp8")}
        if halves:
            best = max(halves, key=lambda m: halves[m])
            top = max(g["size"] for g in gemm)
            at = {m: max(g["size"] for g in gemm if g["math_mode"] == m) for m in halves}
            said = ", ".join((f"{m} {r:.2f}x" if r >= 0.01 else f"{m} {r:.2g}x")  # (an emulated fp16 GEMM at 1/200
                             + (f" (at n={at[m]})" if at[m] != top else "")  # of fp32's rate read "0.00x")
                             for m, r in halves.items())
            out["verdict"] += (f". Measured GEMM vs fp32 at n={top}: {said}: "
                               + (f"{best} is faster here" if halves[best] > 1.05 else
                                  "no lower precision is faster here"))
    out["created_at"] = env.get("time") or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return out
