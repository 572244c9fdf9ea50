"""Why no speedup / no memory saving: profile a few steps with torch.profiler and explain.

- time per op class (matmul/conv vs casts vs everything else) from the profiler's self times;
- whether GEMMs/convs ran in half precision (a dispatch-mode census of one step's kernels) and, on
  GPU, on Tensor Core kernels (kernel names);
- launch/dispatch-bound: twice the batch takes barely longer than one (per-op overhead, not
  arithmetic, sets the step time), with kernels per step x the measured cost of dispatching one
  tiny op as the explanation — faster math cannot help then;
- TF32 already on in a plain fp32 baseline (PyTorch enables it for cuDNN convolutions by default);
- memory: weights + grads + optimizer state vs activations (AMP only shrinks activations), and on
  GPU allocated vs reserved.
A Chrome trace of the profiled steps is written for chrome://tracing or Perfetto.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode

from ampbench.cpuinfo import cpu_half_hardware, half_math_claim
from ampbench.diagnose.findings import Finding
from ampbench.distributed.units import blocks
from ampbench.measure import memory as mem
from ampbench.measure.cpu import cpu_peak
from ampbench.measure.step import build_step, device_batches
from ampbench.measure.timing import time_steps
from ampbench.precision import get
from ampbench.precision.tf32_flags import read_tf32
from ampbench.workloads.base import Workload

GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
            "aten::convolution", "aten::_convolution", "aten::conv1d", "aten::conv2d", "aten::conv3d",
            "aten::mkldnn_convolution", "aten::cudnn_convolution", "aten::convolution_backward",
            "aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention",
            "aten::_scaled_dot_product_cudnn_attention", "aten::mkldnn_rnn_layer", "aten::_addmm_activation",
            # CPU kernels without oneDNN (what fp16 convolutions fall to on CPUs without fp16 hardware)
            "aten::_slow_conv2d_forward", "aten::_slow_conv2d_backward", "aten::thnn_conv2d", "aten::slow_conv3d",
            "aten::slow_conv_transpose2d", "aten::slow_conv_dilated2d")
CAST_OPS = ("aten::_to_copy", "aten::to", "aten::copy_", "aten::_to_dtype")
OPTIMIZER_PREFIXES = ("aten::_fused_adam", "aten::_fused_sgd", "aten::_fused_adagrad", "aten::_foreach_")
"""The optimizer's update: the fused kernels and the foreach ops (a step's other foreach op, the unscale and inf
check, is ``aten::_amp_foreach_...``: not one of them)."""
WEIGHT_WORK_SHARE = 0.25
"""A step that barely grows with the batch and spends this share of its op time on casts and the optimizer's update
is set by its work on the weights, not by per-op overhead alone."""
OP_KINDS = {
    **dict.fromkeys(("aten::convolution", "aten::_convolution", "aten::conv1d", "aten::conv2d", "aten::conv3d",
                     "aten::mkldnn_convolution", "aten::cudnn_convolution", "aten::miopen_convolution",
                     "aten::_slow_conv2d_forward", "aten::thnn_conv2d", "aten::slow_conv3d", "aten::slow_conv3d_forward",
                     "aten::slow_conv_dilated2d", "aten::_nnpack_spatial_convolution"), "convolution forward"),
    **dict.fromkeys(("aten::convolution_backward", "aten::_slow_conv2d_backward", "aten::mkldnn_convolution_backward",
                     "aten::slow_conv3d_backward", "aten::slow_conv_dilated2d_backward"), "convolution backward"),
    **dict.fromkeys(("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
                     "aten::_addmm_activation"), "matmul"),
}
"""What an op computes, where precisions run it through different ops: fp32 convolutions on a CPU are
``aten::mkldnn_convolution``, fp16 ones without fp16 hardware ``aten::_slow_conv2d_forward`` -- compared by name, one
read "0.32 ms vs 0.00 ms" beside the other's "0.00 ms vs 0.17 ms"."""
TENSOR_CORE_KERNELS = ("tensorop", "hmma", "xmma", "h884", "h1688", "s1688", "16816", "wgmma", "gmma", "sm80_", "sm90_",
                       "cutlass")
GEMM_PACKETS = ("mm", "addmm", "bmm", "baddbmm", "convolution", "convolution_backward", "_addmm_activation")
LAUNCH_BOUND_SHARE = 0.5
"""Fallback test (when 2x the batch does not fit): per-op dispatch cost >= half the step."""
LAUNCH_BOUND_SCALING = 1.3
"""Launch-bound when twice the batch takes less than 1.3x the time."""


class _KernelCensus(TorchDispatchMode):
    """Counts ops reaching the dispatcher (≈ kernels launched) and the dtypes GEMMs/convs ran in."""

    def __init__(self) -> None:
        super().__init__()
        self.ops = 0
        self.gemm_dtypes: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.ops += 1
        name = func.overloadpacket.__name__
        if name in GEMM_PACKETS:
            t = next((a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), None)
            if t is not None:
                self.gemm_dtypes[str(t.dtype).removeprefix("torch.")] += 1
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def _quiet_native_stderr() -> Iterator[None]:
    """Kineto prints "USDT ... profiler_start/stop" lines straight to fd 2 on some builds: silence fd 2 around
    the profiler's start and stop only (Python errors raised there still propagate as exceptions)."""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def dispatch_cost_us(device: torch.device, n: int = 2000) -> float:
    """Microseconds to dispatch (and on GPU launch) one tiny elementwise op: the per-op floor."""
    x = torch.ones(8, device=device)
    for _ in range(50):
        x.add_(0)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t = time.perf_counter()
    for _ in range(n):
        x.add_(0)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - t) / n * 1e6


def _profiled(step: Any, steps: int, device: torch.device, trace: Path | None = None) -> Any:
    """torch.profiler over ``steps`` steps (already warm); the profile, its Chrome trace written to ``trace``."""

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    prof = profile(activities=activities)
    with _quiet_native_stderr():
        prof.start()
    try:
        for _ in range(steps):
            step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    finally:
        with _quiet_native_stderr():
            prof.stop()
    if trace is not None:
        # (through a .tmp renamed over it: the profiler logs a file it cannot open and returns as if it wrote it, so
        # the trace is said written only where it is)
        trace.parent.mkdir(parents=True, exist_ok=True)
        tmp = trace.with_name(trace.name + ".tmp")
        tmp.unlink(missing_ok=True)
        prof.export_chrome_trace(str(tmp))
        if tmp.is_file():
            tmp.replace(trace)
    return prof


def _self_us(ev: Any, gpu: bool) -> float:
    return (getattr(ev, "self_device_time_total", 0) or getattr(ev, "self_cuda_time_total", 0)) if gpu else \
        ev.self_cpu_time_total


def _op_ms_per_step(prof: Any, gpu: bool, steps: int) -> dict[str, float]:
    return {ev.key: _self_us(ev, gpu) / 1e3 / steps for ev in prof.key_averages() if ev.key.startswith("aten::")}


def versus_fp32(wl: Workload, device: torch.device, batch_size: int, steps: int, step_ms: float,
                op_ms: dict[str, float], top: int = 5) -> dict[str, Any]:
    """The same profile of fp32 on the same model and data: step times and the ops whose time moved most."""

    base = build_step(wl, "fp32", batch_size, device)
    for _ in range(3):
        base()
    fp32_ms = time_steps(base, steps, device).summary()["step_ms_p50"]
    fp32_ops = _op_ms_per_step(_profiled(base, steps, device), device.type == "cuda", steps)
    return {"step_ms": step_ms, "fp32_step_ms": fp32_ms, "ratio": step_ms / max(fp32_ms, 1e-9),
            "ops": moved_ops(op_ms, fp32_ops, top)}


def moved_ops(op_ms: dict[str, float], fp32_ops: dict[str, float], top: int = 5) -> list[dict[str, Any]]:
    """The ``top`` kinds of op (:data:`OP_KINDS`; an op of no kind is its own) whose time per step moved most from
    fp32's: each with its milliseconds here and in fp32, and the op that took most of them on each side."""
    def by_kind(ops: dict[str, float]) -> dict[str, tuple[float, str]]:  # kind -> (its ms, the op that took most)
        kinds: dict[str, list[str]] = {}
        for name in ops:
            kinds.setdefault(OP_KINDS.get(name, name), []).append(name)
        return {k: (sum(ops[n] for n in names), max(names, key=ops.__getitem__)) for k, names in kinds.items()}

    here, fp32 = by_kind(op_ms), by_kind(fp32_ops)
    moved = sorted(set(here) | set(fp32), key=lambda k: -abs(here.get(k, (0.0,))[0] - fp32.get(k, (0.0,))[0]))
    return [{"op": k, "ms": here.get(k, (0.0,))[0], "fp32_ms": fp32.get(k, (0.0,))[0],
             "kernel": here[k][1] if k in here else None, "fp32_kernel": fp32[k][1] if k in fp32 else None}
            for k in moved[:top]]


def profile_steps(wl: Workload, precision: str, device: torch.device, batch_size: int, steps: int,
                  trace: Path | None, baseline: Workload | None = None,
                  mp_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Profile ``steps`` steps of ``wl`` in ``precision``; with ``baseline`` (a fresh build of the same
    workload) the same in fp32, to say where a half-precision step gains or loses its time."""

    peaks = mem.PeakMemory(device)
    peaks.start()  # (the peak of this mode's steps only: read before the 2x batch, the profiler and the fp32 baseline)
    step = build_step(wl, precision, batch_size, device, mp_options=mp_options)
    for _ in range(3):
        step()
    census = _KernelCensus()
    with census:
        step()
    with mem.saved_activations(step.eager_model or step.model) as act:
        step()
    timing = time_steps(step, steps, device)
    peak = peaks.peak()
    sb = step.state_bytes()  # after real steps: Adam's state exists (None if every step was skipped)
    step_ms = timing.summary()["step_ms_p50"]
    scaling = _batch_scaling(step, wl, batch_size, steps)
    prof = _profiled(step, steps, device, trace)
    gpu = device.type == "cuda"
    by_class = Counter()  # microseconds of self time
    tc_kernels = gemm_kernels = 0
    for ev in prof.key_averages():
        name = ev.key
        t = _self_us(ev, gpu)
        if gpu and getattr(ev, "device_type", None) is not None and "CUDA" in str(ev.device_type):
            low = name.lower()
            if "gemm" in low or "conv" in low or "xmma" in low or "cutlass" in low:
                gemm_kernels += ev.count
                if any(k in low for k in TENSOR_CORE_KERNELS):
                    tc_kernels += ev.count
        if not name.startswith("aten::"):
            continue
        cls = "gemm" if name in GEMM_OPS else "cast" if name in CAST_OPS else \
            "optimizer" if name.startswith(OPTIMIZER_PREFIXES) else "other"
        by_class[cls] += t
    total = sum(by_class.values()) or 1.0
    static = sb.weights + sb.grads + sb.optimizer if sb is not None else None
    out: dict[str, Any] = {
        "step_ms": step_ms, "kernels_per_step": census.ops, "dispatch_us": dispatch_cost_us(device),
        "share": {k: v / total for k, v in by_class.items()}, "gemm_dtypes": dict(census.gemm_dtypes),
        "tensor_core_kernels": tc_kernels if gpu else None, "gemm_kernels": gemm_kernels if gpu else None,
        "memory": {**(sb.as_row() if sb is not None else {}), "activation_bytes": act[0],
                   "static_share": static / max(static + act[0], 1) if static is not None else None,
                   "peak_bytes": peak["allocated"], "peak_is": "allocator peak" if gpu else "RSS growth",
                   "blocks": len(blocks(step.eager_model or step.model))},
        "tf32": {"matmul": read_tf32().matmul, "cudnn": read_tf32().cudnn}, "trace": str(trace) if trace else None,
        "trace_written": trace is not None and trace.is_file(),
        "precision": precision, "device": str(device), "fallbacks": list(step.mp.fallbacks),
        "cpu_half_hardware": None, "cpu_flops_per_cycle": None,
    }
    if not gpu:  # what the CPU's half math can do: the same probe as `ampbench hw`
        peak = cpu_peak()
        out["cpu_half_hardware"] = cpu_half_hardware()
        out["cpu_flops_per_cycle"] = peak.flops_per_cycle if peak else None
    if baseline is not None:
        out["vs_fp32"] = versus_fp32(baseline, device, batch_size, steps, step_ms, _op_ms_per_step(prof, gpu, steps))
    if gpu:  # (read after this mode's timed steps: the 2x batch, the profiler and the fp32 baseline came later)
        out["memory"]["allocated_bytes"], out["memory"]["reserved_bytes"] = peak["allocated"], peak["reserved"]
    out["launch_share"] = census.ops * out["dispatch_us"] / 1e3 / max(step_ms, 1e-9)
    out["batch_scaling"] = scaling
    out["launch_bound"] = scaling < LAUNCH_BOUND_SCALING if scaling is not None else out["launch_share"] >= LAUNCH_BOUND_SHARE
    return out


SCALING_STEPS = 5
"""Steps per batch size in each of the batch-scaling rounds (at most ``--steps``): the median of 5 rounds' ratios
settles a ratio of ~1 against ~2. Each round took ``--steps`` at both sizes until 2026-11-29 -- 300 step-equivalents
at the default 20, 6 of the 8.5 minutes a pure-fp16 diagnosis of a small transformer took on this CPU."""


def _batch_scaling(step: Any, wl: Workload, batch_size: int, steps: int, rounds: int = 5) -> float | None:
    """Step time at twice the batch / step time at the batch. ~1: per-op overhead sets the time (launch-bound);
    ~2: the arithmetic does. The two are timed in alternating rounds and the median of the per-round ratios
    is taken, so a clock or scheduling change mid-measurement moves both. None if 2x does not fit."""

    steps = min(steps, SCALING_STEPS)
    small = step.batches
    try:
        big = device_batches(wl.train_data, 2 * batch_size, 2, step.device)
        ratios = []
        for _ in range(rounds):
            step.batches = small
            t_small = time_steps(step, steps, step.device).summary()["step_ms_p50"]
            step.batches = big
            t_big = time_steps(step, steps, step.device).summary()["step_ms_p50"]
            ratios.append(t_big / max(t_small, 1e-9))
    except torch.OutOfMemoryError:
        return None
    finally:
        step.batches = small
    return statistics.median(ratios)


def _moved(ops: list[dict[str, Any]], slower: bool) -> str:
    picked = [o for o in ops if (o["ms"] > o["fp32_ms"]) == slower][:3]

    def said(o: dict[str, Any]) -> str:
        text = f"{o['op']} {o['ms']:,.2f} ms vs {o['fp32_ms']:,.2f} ms"
        mine, theirs = o.get("kernel"), o.get("fp32_kernel")
        return text + (f" ({mine} here, {theirs} in fp32)" if mine and theirs and mine != theirs else "")

    return ", ".join(said(o) for o in picked)


def versus_fp32_findings(p: dict[str, Any]) -> list[Finding]:
    """Why this mode is slower (or faster) than fp32 here: the ops whose time moved, and what the hardware
    does in this dtype (on CPU from the same probe as ``ampbench hw``)."""

    v = p.get("vs_fp32")
    if not v:
        return []
    name, ratio = p["precision"], v["ratio"]
    dtype = {torch.float16: "fp16", torch.bfloat16: "bf16"}.get(get(name).compute_dtype)
    said = f"{v['step_ms']:,.2f} ms vs {v['fp32_step_ms']:,.2f} ms per step"
    data = {"ratio": ratio, "step_ms": v["step_ms"], "fp32_step_ms": v["fp32_step_ms"], "ops": v["ops"]}
    if 1 / 1.1 < ratio < 1.1:
        return [Finding("info", "profile", f"{name} runs at fp32's speed here ({said})",
                        f"per step, the ops that moved most: {_moved(v['ops'], True) or _moved(v['ops'], False)}",
                        "", data)]
    if ratio <= 1 / 1.1:
        return [Finding("info", "profile", f"{name} is {1 / ratio:.2f}x faster than fp32 here ({said})",
                        f"per step, the gain is in: {_moved(v['ops'], False)}", "", data)]
    slow = [o for o in v["ops"] if o["ms"] > o["fp32_ms"]]
    gemm_slow = any(o["op"] in GEMM_OPS or o["op"] in OP_KINDS.values() for o in slow[:2])
    cast_slow = any(o["op"] in CAST_OPS for o in slow[:2])
    why, fix = "", ""
    if p["device"].startswith("cpu") and dtype is not None:
        hw = p.get("cpu_half_hardware") or {}
        claim = half_math_claim(hw, p.get("cpu_flops_per_cycle"))
        mine = next((c for c in claim.split("; ") if c.startswith(dtype)), claim)
        why = f"this CPU: {mine}"
        if gemm_slow and "emulated" in mine:
            other = "bf16" if dtype == "fp16" else "fp16"
            alt = next((c for c in claim.split("; ") if c.startswith(other) and "emulated" not in c), None)
            why += f": its {dtype} matmuls/convolutions have no fast kernel, which a GPU's Tensor Cores do have"
            fix = (f"on this CPU use fp32 or the {other} modes ({alt})" if alt else "on this CPU use fp32") + \
                  "; this slowdown says nothing about a GPU"
    elif gemm_slow:
        why = "the matmuls/convolutions themselves got slower: no fast half-precision kernel for these shapes"
        fix = "see the tensorcore findings (dimensions that are multiples of 8) and the Tensor Core kernel share"
    if cast_slow and not fix:
        fix = "autocast re-casts the fp32 weights every step: master-*/pure-* keep half weights (no per-step casts)"
    if p.get("fallbacks"):
        why = (why + "; " if why else "") + "kernel fallbacks in use: " + "; ".join(p["fallbacks"])
    return [Finding("warning", "profile", f"{name} is {ratio:.2f}x slower than fp32 here ({said})",
                    f"per step, the ops that got slower: {_moved(v['ops'], True)}" + (f". {why}" if why else ""),
                    fix, data)]


def profile_findings(p: dict[str, Any], half: bool) -> list[Finding]:
    out = versus_fp32_findings(p)
    share = p["share"]
    ms = p["step_ms"]
    weights = share.get("cast", 0) + share.get("optimizer", 0)
    if p["launch_bound"] and p.get("batch_scaling") is not None and weights >= WEIGHT_WORK_SHARE:
        # (an MoE's amp-bf16 step on this CPU: doubling the batch cost 1.20x, its 286 ops' dispatch ~5% of the step,
        # casts 29% and Adam 6% of op time -- "launch-bound: per-op overhead sets the step time" named one of its
        # causes, and not the largest)
        sc = p["batch_scaling"]
        out.append(Finding(
            "warning", "profile", f"the step barely grows with the batch: doubling it costs {sc:.2f}x the time, not "
            f"~2x (~{min(max(2 - sc, 0.0), 1.0):.0%} of the {ms:.2f} ms step is paid whatever the batch)",
            f"what a step pays whatever the batch: its work on the weights -- dtype casts {share.get('cast', 0):.0%} "
            f"and the optimizer's update {share.get('optimizer', 0):.0%} of op time -- and the overhead of its "
            f"{p['kernels_per_step']} ops (dispatching them ≈ {p['launch_share']:.0%} of the step); faster "
            "(half-precision) math shortens little of it",
            "use a larger batch (the same work on the weights, spread over more samples); master-*/pure-* keep half "
            "weights (no per-step casts)",
            {"kernels_per_step": p["kernels_per_step"], "dispatch_us": p["dispatch_us"], "step_ms": ms,
             "weight_work_share": weights}))
    elif p["launch_bound"]:
        sc = p.get("batch_scaling")
        said = f"doubling the batch costs {sc:.2f}x the time, not ~2x; " if sc is not None else ""
        out.append(Finding(
            "warning", "profile", f"launch-bound: {said}{p['kernels_per_step']} kernels per step x "
            f"{p['dispatch_us']:.1f} µs to dispatch one ≈ {p['launch_share']:.0%} of the {ms:.2f} ms step",
            "the model is too small for its batch: per-op overhead, not arithmetic, sets the step time, so faster "
            "(half-precision) math cannot shorten it",
            "use a larger batch, fuse ops (torch.compile), or CUDA graphs; expect no speedup from mixed precision here",
            {"kernels_per_step": p["kernels_per_step"], "dispatch_us": p["dispatch_us"], "step_ms": ms}))
    optimizer = f", optimizer {share['optimizer']:.0%}" if share.get("optimizer") else ""
    out.append(Finding("info", "profile", f"time by op class: matmul/conv {share.get('gemm', 0):.0%}, casts "
                       f"{share.get('cast', 0):.0%}{optimizer}, elementwise/other {share.get('other', 0):.0%} "
                       f"(step {ms:.2f} ms)",
                       "only the matmul/conv share gets faster with half precision"))
    if share.get("cast", 0) > 0.15:
        out.append(Finding("warning", "profile", f"{share['cast']:.0%} of op time is dtype casts (aten::_to_copy)",
                           "autocast re-casts weights every step", "master-*/pure-* keep half weights (no per-step casts)"))
    dtypes = p["gemm_dtypes"]
    if half and dtypes and not any(d in dtypes for d in ("float16", "bfloat16")):
        out.append(Finding("error", "profile", f"no GEMM/conv ran in half precision ({dtypes})",
                           "the mode is not reaching the heavy ops", "check that the forward runs inside mp.autocast()"))
    elif dtypes:
        out.append(Finding("info", "profile", "GEMM/conv dtypes: " + ", ".join(f"{k} x{v}" for k, v in dtypes.items())))
    if p.get("tensor_core_kernels") is not None and p.get("gemm_kernels"):
        tc = p["tensor_core_kernels"] / p["gemm_kernels"]
        out.append(Finding("warning" if half and tc < 0.5 else "info", "profile",
                           f"{tc:.0%} of GEMM/conv kernels are Tensor Core kernels",
                           "names of the CUDA kernels the profiler saw", "see the tensorcore check for dimensions"))
    if p["device"].startswith("cuda") and (p["tf32"]["matmul"] or p["tf32"]["cudnn"]):
        out.append(Finding("info", "profile", f"TF32 is on in this process (matmul {p['tf32']['matmul']}, cuDNN "
                           f"{p['tf32']['cudnn']})", "PyTorch enables TF32 for cuDNN convolutions by default: a plain "
                           "fp32 baseline already uses Tensor Cores for convs, so AMP's speedup over it is smaller"))
    m = p["memory"]
    if (m["static_share"] or 0.0) > 0.6:
        out.append(Finding("warning" if half else "info", "profile",
                           f"memory is dominated by weights, grads and optimizer state ({m['static_share']:.0%}; "
                           f"activations {m['activation_bytes'] / 2**20:,.1f} MiB)",
                           "autocast keeps fp32 weights, grads and Adam state; it only halves activations",
                           "master-*/pure-* halve weights and grads; a larger batch grows the activations AMP saves on"))
    elif m["static_share"] is not None and m["static_share"] < 0.4:
        checkpoint = (f"--checkpointing blocks (run, train, predict) recomputes each of its {m['blocks']} repeated "
                      "blocks in the backward and holds one block's activations at a time, for about a forward of "
                      "them more (--checkpointing selective: only what costs no FLOPs recomputed, less saved)"
                      if m.get("blocks") else "activation checkpointing (torch.utils.checkpoint around the model's "
                      "large stages) holds fewer of them, for a forward more")
        out.append(Finding("info", "profile", f"memory is dominated by saved activations ({1 - m['static_share']:.0%}; "
                           f"{m['activation_bytes'] / 2**20:,.1f} MiB)",
                           "they grow with the batch: what sets the largest batch",
                           ("a half precision stores most of them in 16 bits (" + ("done in this mode" if half else "amp-*/"
                            "master-*/pure-* halve them") + "); ") + checkpoint))
    if "reserved_bytes" in m and m["reserved_bytes"] > 1.5 * max(m["allocated_bytes"], 1):
        out.append(Finding("info", "profile", f"reserved {m['reserved_bytes'] / 2**20:,.0f} MiB vs allocated "
                           f"{m['allocated_bytes'] / 2**20:,.0f} MiB", "the caching allocator holds freed blocks",
                           "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True reduces fragmentation"))
    if p.get("trace") and p.get("trace_written", True):  # (a stored profile from before the key: it was written)
        out.append(Finding("info", "profile", f"Chrome trace: {p['trace']}", "open in chrome://tracing or ui.perfetto.dev"))
    elif p.get("trace"):
        out.append(Finding("warning", "profile", f"Chrome trace not written: the profiler could not write {p['trace']}",
                           "give --trace a path in a writable directory"))
    return out
