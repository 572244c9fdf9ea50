"""Where a training step's GPU time goes, op by op, beside what ``ampbench predict`` prices each op at.

A whole step predicted 8-15 % too fast (the lent H200's ViT and BERT in AMP, ResNet-50 on NCHW tensors at Lambda's
batches) says nothing of which ops were mispriced. This runs the step the harness runs (:func:`ampbench.measure.step.
build_step`) under torch.profiler and gives each op the predictor traced (``predict/trace.py``: ``aten.addmm``,
``aten.convolution_backward``, ``ampbench_predict.fused_attention``...) the device time of the kernels launched inside
it -- the outermost profiled call of a traced op's name, its nested calls' kernels included (``aten::convolution`` holds
cuDNN's, ``aten::_to_copy`` its ``copy_``'s) -- beside the op's predicted time (:func:`ampbench.predict.cost.op_costs`:
the kernel model, corrected by the GPU architecture's measured kernel table). Kernels under no traced op are listed by
the profiled op that launched them (``not traced``): what the trace misses. Per step: the kernels' total against the
predicted GPU time, and the step (timed without the profiler) against the predicted step -- a step longer than its
kernels is the host's.

On a CPU it runs the same way with CPU tensors, the trace taken with the CPU's autocast rules and kernels
(``--rules cpu``, the default there): the times are the CPU's, but the op counts are the check -- each traced op's calls
a step against the profiler's (``tests/benchmarks/test_op_times.py``).

    python benchmarks/op_times.py --workload vit --preset paper --precision amp-bf16 --batch-size 128 \\
        --out benchmarks/results/h200/after/op_times_vit_amp-bf16.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from ampbench.execution.axes import Execution
from ampbench.execution.checkpointing import checkpoint_blocks
from ampbench.measure.gpus import for_device, lookup
from ampbench.measure.step import build_step
from ampbench.measure.timing import time_steps
from ampbench.precision import get
from ampbench.predict.cost import (
    DIRECT_FUSED_STEP,
    FUSED_OPTIMIZER,
    MEASURED_HOST,
    issue_times,
    op_class,
    op_costs,
    price,
)
from ampbench.predict.cuda_dispatch import CPU_RULES, CUDA_RULES
from ampbench.predict.trace import trace_step
from ampbench.workloads import create_workload
from ampbench.workloads.factory import build_meta

ATTENTION = ("flash", "efficient", "cudnn")
ALIASES: dict[str, str] = {
    **{f"aten::_scaled_dot_product_{k}_attention": "ampbench_predict.fused_attention" for k in ATTENTION},
    **{f"aten::_scaled_dot_product_{k}_attention_backward": "ampbench_predict.fused_attention_backward"
       for k in ATTENTION},
    "aten::_scaled_dot_product_flash_attention_for_cpu": "ampbench_predict.fused_attention",
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": "ampbench_predict.fused_attention_backward",
    "aten::_cudnn_rnn": "ampbench_predict.rnn_layer",
    "aten::_cudnn_rnn_backward": "ampbench_predict.rnn_layer_backward",
}
"""Profiled calls -> the op the trace names for them (its own names for fused attention and cuDNN's RNN: one profiled
``_cudnn_rnn`` runs every layer the trace prices one by one)."""
FUSED_STEPS = ("aten::_fused_adam_", "aten::_fused_adamw_", "aten::_fused_sgd_")
"""torch's fused optimizer kernels: the trace's fused step (``cost.FUSED_OPTIMIZER`` or ``cost.DIRECT_FUSED_STEP``)."""
NOT_TRACED = "not traced: "


@dataclass
class OpTime:
    """An op's time and calls per step, measured or predicted."""

    ms: float = 0.0
    calls: float = 0.0
    cls: str = ""
    host_ms: float = 0.0
    """The host's time issuing it: predicted (``cost.issue_times``), or profiled (its calls' CPU time, the profiler's
    own overhead in it)."""


@dataclass
class Profiled:
    """A profiled step, by the trace's op names (:func:`by_traced_op`)."""

    ops: dict[str, OpTime] = field(default_factory=dict)
    device_ms: float = 0.0
    """Every kernel's time a step (on a CPU: every outermost op's)."""


def traced_name(name: str, traced: set[str]) -> str | None:
    """The trace's name of a profiled call (``aten::addmm`` -> ``aten.addmm``), or None where the trace has no such op."""
    if name in FUSED_STEPS:
        return next((n for n in (DIRECT_FUSED_STEP, FUSED_OPTIMIZER) if n in traced), None)
    alias = ALIASES.get(name) or name.replace("::", ".", 1)
    return alias if alias in traced else None


def _time(ev: Any, gpu: bool, inclusive: bool) -> float:
    """An event's device time (a CPU's: its CPU time), microseconds, with its children's or without."""
    if gpu:
        total = getattr(ev, "device_time_total", None)
        if total is None:
            total = ev.cuda_time_total
        own = getattr(ev, "self_device_time_total", None)
        if own is None:
            own = ev.self_cuda_time_total
        return float(total if inclusive else own)
    return float(ev.cpu_time_total if inclusive else ev.self_cpu_time_total)


def by_traced_op(events: Any, traced: dict[str, str], steps: int, gpu: bool) -> Profiled:
    """Each traced op's time and calls a step: its outermost profiled calls' times, children included (a nested call
    of a traced name is inside its parent's); kernels outside every traced op under the launching call's name, prefixed
    :data:`NOT_TRACED` (a CPU's: every call's own time outside the traced ops -- Python's and the framework's).
    ``traced``: the trace's op names -> their class."""
    out = Profiled()
    names = set(traced)
    for ev in events:
        if gpu and "cuda" in str(getattr(ev, "device_type", "")).lower():
            continue  # (a kernel's own event: its time is its launching call's)
        mine = traced_name(ev.name, names)
        above = ev.cpu_parent
        inside = False
        while above is not None:
            if traced_name(above.name, names) is not None:
                inside = True
                break
            above = above.cpu_parent
        if inside:
            continue
        if mine is not None:
            op = out.ops.setdefault(mine, OpTime(cls=traced[mine]))
            op.ms += _time(ev, gpu, inclusive=True) / 1e3 / steps
            op.host_ms += ev.cpu_time_total / 1e3 / steps
            op.calls += 1 / steps
            out.device_ms += _time(ev, gpu, inclusive=True) / 1e3 / steps
        else:  # (its own time only: its traced children's is theirs)
            own = _time(ev, gpu, inclusive=False) / 1e3 / steps
            host = ev.self_cpu_time_total / 1e3 / steps
            if own > 0 or (gpu and host > 0):
                op = out.ops.setdefault(NOT_TRACED + ev.name, OpTime(cls="not traced"))
                op.ms += own
                op.host_ms += host
                op.calls += 1 / steps
                out.device_ms += own
    return out


def predicted_ops(costs: list[Any], issues: list[tuple[float, ...]]) -> dict[str, OpTime]:
    out: dict[str, OpTime] = {}
    for c, issue in zip(costs, issues):
        op = out.setdefault(c.op.name, OpTime(cls=op_class(c.op)))
        op.ms += c.gpu_s * 1e3
        op.host_ms += sum(issue) * 1e3
        op.calls += 1
    return out


def measure(workload: str, preset: str, precision: str, batch_size: int | None, channels_last: bool,
            device: torch.device, steps: int, rules: str, gpu_key: str | None,
            options: dict[str, Any], checkpointing: str = "off") -> dict[str, Any]:
    """The step measured op by op on ``device`` and predicted for ``gpu_key`` (see the module's docstring)."""
    wl = create_workload(workload, preset, **options)
    batch = batch_size or wl.batch_size
    target = lookup(gpu_key) if gpu_key else None
    if target is None:
        raise SystemExit(f"op_times: GPU {gpu_key!r} is not in the catalogue (ampbench list gpus)")
    mode = get(precision)
    engine = "fp32" if mode.name == "tf32" else mode.name
    meta = build_meta(lambda: create_workload(workload, preset, **options))
    if checkpointing != "off":  # (as predict traces a checkpointed step: its blocks under torch.utils.checkpoint)
        checkpoint_blocks(meta.model, workload, policy=checkpointing)
    trace = trace_step(meta, engine, batch, channels_last=channels_last,
                       rules=CPU_RULES if rules == "cpu" else CUDA_RULES, kernels=rules != "cpu")
    costs, modes, table, _ = op_costs(trace, target, mode.tf32)
    step_cost = price(trace, target, tf32=mode.tf32)
    predicted = predicted_ops(costs, issue_times(trace, costs, modes, table, MEASURED_HOST))
    execution = Execution(memory_format="channels_last" if channels_last else "contiguous", checkpointing=checkpointing)
    step = build_step(wl, precision, batch, device, execution=execution)
    for _ in range(3):
        step()
    step_ms = time_steps(step, max(steps, 5), device).summary()["step_ms_p50"]
    gpu = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step()
        if gpu:
            torch.cuda.synchronize(device)
    events = prof.events()
    measured = by_traced_op(events, {k: v.cls for k, v in predicted.items()}, steps, gpu)
    kernels = kernel_times(events, steps)
    rows = []
    for name in sorted(set(predicted) | set(measured.ops)):
        p, m = predicted.get(name, OpTime()), measured.ops.get(name, OpTime())
        rows.append({"op": name, "class": p.cls or m.cls, "measured_ms": round(m.ms, 4),
                     "predicted_ms": round(p.ms, 4), "measured_calls": round(m.calls, 2),
                     "predicted_calls": round(p.calls, 2), "profiled_host_ms": round(m.host_ms, 4),
                     "predicted_host_ms": round(p.host_ms, 4)})
    classes: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(CLASS_KEYS, 0.0))
    for r in rows:
        for k in CLASS_KEYS:
            classes[r["class"]][k] += r[k]
    return {
        "benchmark": "op_times", "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if gpu else "cpu", "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version() if gpu else None, "predicted_for": target.key,
        "priced_from": step_cost.kernels or "the model alone",
        "cell": {"workload": workload, "preset": preset, "precision": precision, "batch_size": batch,
                 "memory_format": execution.memory_format, "checkpointing": checkpointing, "options": options,
                 "steps": steps, "rules": rules},
        "measured_step_ms": step_ms, "predicted_step_ms": step_cost.step_s * 1e3,
        "measured_device_ms": measured.device_ms, "predicted_gpu_ms": step_cost.gpu_s * 1e3,
        "kernels_ms": sum(k["ms"] for k in kernels),
        "predicted_host_ms": step_cost.host_s * 1e3,
        "profiled_host_ms": sum(v.host_ms for v in measured.ops.values()),
        "classes": {k: {kk: round(vv, 4) for kk, vv in v.items()} for k, v in sorted(classes.items())},
        "ops": sorted(rows, key=lambda r: -abs(r["measured_ms"] - r["predicted_ms"])),
        "kernels": kernels[:KERNELS_KEPT],
    }


KERNELS_KEPT = 40
CLASS_KEYS = ("measured_ms", "predicted_ms", "profiled_host_ms", "predicted_host_ms")


def kernel_times(events: Any, steps: int) -> list[dict[str, Any]]:
    """The device's kernels a step by name, longest first (a CPU's: none): the check that every kernel was given to an
    op (their total is ``measured_device_ms`` on a GPU), and what the ops ran -- cuDNN's layout conversions around an
    NCHW convolution, a GEMM's tile."""
    by: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for ev in events:
        if "cuda" in str(getattr(ev, "device_type", "")).lower():
            by[ev.name][0] += ev.time_range.elapsed_us() / 1e3 / steps
            by[ev.name][1] += 1 / steps
    return [{"kernel": k, "ms": round(v[0], 4), "calls": round(v[1], 2)}
            for k, v in sorted(by.items(), key=lambda kv: -kv[1][0])]


def show(result: dict[str, Any], top: int = 20) -> str:
    c = result["cell"]
    ckpt = f" checkpointing {c['checkpointing']}" if c.get("checkpointing", "off") != "off" else ""
    lines = [f"{c['workload']} ({c['preset']}) {c['precision']} batch {c['batch_size']} {c['memory_format']}{ckpt} on "
             f"{result['device_name']}, predicted for {result['predicted_for']} ({result['priced_from']})",
             f"step {result['measured_step_ms']:.2f} ms measured, {result['predicted_step_ms']:.2f} predicted; "
             f"kernels {result['measured_device_ms']:.2f} ms a step, predicted GPU time "
             f"{result['predicted_gpu_ms']:.2f} (host {result['predicted_host_ms']:.2f})"
             + (f"; the kernels' own events {result['kernels_ms']:.2f} ms" if result["kernels"] else ""),
             f"host: profiled {result['profiled_host_ms']:.2f} ms a step (the profiler's overhead in it), predicted "
             f"{result['predicted_host_ms']:.2f}",
             f"{'class':16s} {'measured ms':>12s} {'predicted':>10s} {'error':>7s} {'host prof.':>11s} {'predicted':>10s}"]
    for k, v in result["classes"].items():
        err = f"{v['predicted_ms'] / v['measured_ms'] - 1:+.0%}" if v["measured_ms"] > 0 else ""
        lines.append(f"{k:16s} {v['measured_ms']:12.3f} {v['predicted_ms']:10.3f} {err:>7s} "
                     f"{v['profiled_host_ms']:11.3f} {v['predicted_host_ms']:10.3f}")
    lines.append(f"{'op':48s} {'measured ms':>12s} {'predicted':>10s} {'calls':>13s}")
    for r in result["ops"][:top]:
        lines.append(f"{r['op'][:48]:48s} {r['measured_ms']:12.3f} {r['predicted_ms']:10.3f} "
                     f"{r['measured_calls']:6g}/{r['predicted_calls']:<6g}")
    if result["kernels"]:
        lines.append(f"{'kernel':80s} {'ms':>8s} {'calls':>6s}")
        lines += [f"{k['kernel'][:80]:80s} {k['ms']:8.3f} {k['calls']:6g}" for k in result["kernels"][:top // 2]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", required=True)
    ap.add_argument("--preset", default="small")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--checkpointing", choices=("off", "blocks", "selective"), default="off")
    ap.add_argument("--steps", type=int, default=5, help="profiled steps")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--gpu", default=None, help="the catalogue GPU to predict for (default: the device's; h200 on a CPU)")
    ap.add_argument("--rules", choices=("cuda", "cpu"), default=None,
                    help="the trace's autocast rules and kernels (default: the device's)")
    ap.add_argument("-o", "--option", action="append", default=[], help="workload option KEY=VALUE")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    card = for_device(torch.cuda.get_device_name(device)) if gpu else None
    key = args.gpu or (card.key if card is not None else "h200")
    options = {}
    for o in args.option:
        k, _, v = o.partition("=")
        options[k] = int(v) if v.lstrip("-").isdigit() else v
    result = measure(args.workload, args.preset, args.precision, args.batch_size, args.channels_last, device,
                     args.steps, args.rules or ("cuda" if gpu else "cpu"), key, options, args.checkpointing)
    print(show(result))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
