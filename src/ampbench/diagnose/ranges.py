"""Gradient and activation magnitudes against what fp16 and bf16 can represent.

Gradients are taken at loss scale 1 in an fp32 backward (their true size), then compared with the
formats: fp16 flushes |g| < 2^-24 to zero, keeps |g| < 2^-14 only as subnormals (fewer bits),
overflows above 65504; bf16 has fp32's exponent range (2^-133 .. 3.4e38) with 8 bits of mantissa.
This is the histogram of Micikevicius et al. 2017 ("Mixed Precision Training", fig. 3), for the
user's model, with the static loss scale it implies and where dynamic scaling settles.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ampbench.diagnose.findings import Finding
from ampbench.measure.step import build_step, device_batches
from ampbench.workloads.base import Workload

FP16_MAX = 65504.0
FP16_MIN_NORMAL = 2.0**-14
FP16_MIN_SUBNORMAL = 2.0**-24
BF16_MAX = float(torch.finfo(torch.bfloat16).max)
BF16_MIN_SUBNORMAL = 2.0**-133
HIST_LO, HIST_HI = -60, 20
"""log2 histogram bins: [2^k, 2^(k+1)) for k in HIST_LO..HIST_HI-1 (below and above clamp to the ends)."""
SCALE_MARGIN = 2.0
"""The recommended static scale leaves this much headroom below fp16's max for the largest gradient."""
ACTIVATION_MARGIN = 16.0
"""Activations within this factor of 65504 are flagged as at risk."""


def log2_histogram(x: torch.Tensor) -> tuple[list[int], int]:
    """(counts per log2 bin HIST_LO..HIST_HI-1, exact zeros) of |x|."""
    a = x.detach().abs().float().flatten()
    zeros = int((a == 0).sum())
    nz = a[a > 0]
    e = torch.floor(torch.log2(nz)).clamp(HIST_LO, HIST_HI - 1).long() - HIST_LO
    return torch.bincount(e, minlength=HIST_HI - HIST_LO).tolist(), zeros


def fractions(x: torch.Tensor) -> dict[str, float]:
    """Shares of the values of ``x`` that fp16/bf16 would flush, keep as subnormal, or overflow."""
    a = x.detach().abs().double().flatten()
    n = max(a.numel(), 1)
    nz = a > 0
    return {
        "fp16_underflow": float(((a < FP16_MIN_SUBNORMAL) & nz).sum()) / n,
        "fp16_subnormal": float(((a >= FP16_MIN_SUBNORMAL) & (a < FP16_MIN_NORMAL)).sum()) / n,
        "fp16_overflow": float((a > FP16_MAX).sum()) / n,
        "bf16_underflow": float(((a < BF16_MIN_SUBNORMAL) & nz).sum()) / n,
        "bf16_overflow": float((a > BF16_MAX).sum()) / n,
        "zeros": float((~nz).sum()) / n,
    }


def recommended_scale(max_abs: float, margin: float = SCALE_MARGIN) -> float:
    """Largest power of two S with max_abs * S * margin <= 65504 (1 if the gradients are already that large)."""
    if not max_abs > 0 or not math.isfinite(max_abs):
        return 1.0
    k = math.floor(math.log2(FP16_MAX / (max_abs * margin)))
    return float(2.0 ** max(0, min(k, 40)))


def _cancels_bias(m: nn.Module) -> bool:
    """Whether ``m`` subtracts each channel's mean of its input (statistics of the batch it is given): a per-channel
    bias added just before it then has no effect on the loss, and its gradient is zero up to rounding."""
    norms = (nn.modules.batchnorm._BatchNorm, nn.modules.instancenorm._InstanceNorm)
    return isinstance(m, norms) and (m.training or not m.track_running_stats)


def _fp32_grads(wl: Workload, device: torch.device,
                batch_size: int) -> tuple[nn.Module, dict[str, torch.Tensor], dict[str, str]]:
    """One fp32 forward/backward at loss scale 1; gradients w.r.t. each leaf module's output too; and the biases a
    norm cancels: bias parameter name -> the norm module the bias's module's output went straight into (the very
    tensor, not a copy: a ReLU between them keeps the bias), named with its class ("1 (BatchNorm2d)")."""

    model = wl.model.to(device).float().train()
    (inputs, targets), = device_batches(wl.train_data, batch_size, 1, device)
    act_grads: dict[str, torch.Tensor] = {}
    handles = []
    biased: dict[int, tuple[torch.Tensor, str]] = {}  # id(output) -> (the output, kept alive so ids stay its; module)
    cancelled: dict[str, str] = {}

    def on_output(name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            if _cancels_bias(module) and args and isinstance(args[0], torch.Tensor):
                fed = biased.get(id(args[0]))
                if fed is not None and fed[0] is args[0]:
                    cancelled[f"{fed[1]}.bias"] = f"{name} ({type(module).__name__})"
            if isinstance(output, torch.Tensor) and isinstance(getattr(module, "bias", None), nn.Parameter):
                biased[id(output)] = (output, name)
            if isinstance(output, torch.Tensor) and output.requires_grad:
                output.register_hook(lambda g: act_grads.__setitem__(name, g.detach()))

        return hook

    for name, m in model.named_modules():
        if name and not list(m.children()):
            handles.append(m.register_forward_hook(on_output(name)))
    try:
        model.zero_grad(set_to_none=True)
        loss = wl.loss_fn(wl.call_model(model, inputs), targets)
        loss.backward()
    finally:
        for h in handles:
            h.remove()
    return model, act_grads, cancelled


def scaled_fractions(values: torch.Tensor, scale: float) -> dict[str, float]:
    """fp16's shares of ``values`` (true gradients, float64) once multiplied by a loss scale ``scale``."""
    return {k: v for k, v in fractions(values * scale).items() if k.startswith("fp16_")}


def gradient_ranges(wl: Workload, device: torch.device, batch_size: int, in_use_scale: float | None = None) -> dict[str, Any]:
    """True gradients (fp32, loss scale 1) against fp16/bf16; ``in_use_scale``: the loss scale the diagnosed
    configuration trains at, whose fp16 shares are added as ``at_scale_in_use``."""
    model, act_grads, cancelled = _fp32_grads(wl, device, batch_size)
    params = []
    all_grads = []
    for name, p in model.named_parameters():
        if p.grad is None:
            continue
        g = p.grad.detach()
        all_grads.append(g.flatten())
        hist, zeros = log2_histogram(g)
        # (shares first: "zeros" is then the count of exact zeros, as for the whole-model histograms)
        params.append({"name": name, "numel": g.numel(), "max_abs": float(g.abs().max()),
                       **fractions(g), "histogram": hist, "zeros": zeros, "cancelled_by": cancelled.get(name),
                       "fp16_underflow_at_scale_in_use": None if in_use_scale is None else
                       scaled_fractions(g.double(), in_use_scale)["fp16_underflow"]})
    layers = []
    for name, g in act_grads.items():
        hist, zeros = log2_histogram(g)
        layers.append({"name": name, "numel": g.numel(), "max_abs": float(g.abs().max()), **fractions(g),
                       "histogram": hist, "zeros": zeros})
    flat = torch.cat(all_grads) if all_grads else torch.zeros(1)
    acts = torch.cat([g.flatten() for g in act_grads.values()]) if act_grads else torch.zeros(1)
    max_abs = max(float(flat.abs().max()), float(acts.abs().max()))
    scale = recommended_scale(max_abs)
    both = torch.cat([flat.double(), acts.double()])
    nonzero = both[both != 0].abs()
    under_at_scale = float((nonzero * scale < FP16_MIN_SUBNORMAL).sum()) / max(both.numel(), 1)
    hist_p, zeros_p = log2_histogram(flat)
    hist_a, zeros_a = log2_histogram(acts)
    return {"bins_log2": list(range(HIST_LO, HIST_HI)), "param_histogram": hist_p, "param_zeros": zeros_p,
            "activation_grad_histogram": hist_a, "activation_grad_zeros": zeros_a,
            "params": params, "layers": layers, "max_abs": max_abs, "overall": fractions(both),
            "recommended_scale": scale, "fp16_underflow_at_recommended_scale": under_at_scale,
            "at_scale_in_use": None if in_use_scale is None else {"scale": in_use_scale,
                                                                  **scaled_fractions(both, in_use_scale)}}


def gradient_findings(r: dict[str, Any], settled: dict[str, Any] | None, half: str | None = "fp16",
                      scaling: str = "none") -> list[Finding]:
    """Findings about the true gradients for the diagnosed configuration: ``half`` is its 16-bit format (None for
    fp32), ``scaling`` its loss scaling ("dynamic", "static:S" or "none"). A finding whose fix is what the
    configuration already does is information, not a warning: with a loss scale in use, underflow is judged at
    that scale (``r['at_scale_in_use']``)."""
    out = []
    o = r["overall"]
    s = r["recommended_scale"]
    settled_txt = ""
    if settled:  # growth needs growth_interval (2000) clean steps: in a short run the scale only backs off
        settled_txt = (f"; amp-fp16's dynamic scaler (from 2^16) was at {settled['scale']:g} after {settled['steps']} "
                       f"steps ({settled['skipped_steps']} skipped for overflow)")
    data = {"recommended_scale": s, "overall": o, "dynamic": settled, "at_scale_in_use": r.get("at_scale_in_use")}
    used = r.get("at_scale_in_use") if half == "fp16" and scaling != "none" else None
    if half != "fp16":  # bf16 has fp32's exponent range; fp32 needs nothing: fp16's limits are what-ifs here
        what = "bf16 has fp32's exponent range" if half == "bf16" else "fp32 stores them as they are"
        out.append(Finding("info", "gradients", f"gradients need no loss scaling here ({what}); in fp16 "
                           f"{o['fp16_underflow']:.0%} would underflow and {o['fp16_subnormal']:.0%} be subnormals "
                           f"without scaling", f"largest |g| {r['max_abs']:.3g}; an fp16 mode would need a loss scale "
                           f"of about {s:g}{settled_txt}", "", data))
    elif used is not None and used["fp16_underflow"] <= 0.01 and used["fp16_subnormal"] <= 0.05:
        out.append(Finding("info", "gradients", f"gradients fit fp16 at the loss scale in use ({scaling}: "
                           f"{used['scale']:g}): {used['fp16_underflow']:.1%} underflow, {used['fp16_subnormal']:.0%} "
                           f"subnormal", f"without scaling {o['fp16_underflow']:.0%} would underflow and "
                           f"{o['fp16_subnormal']:.0%} be subnormals; largest |g| {r['max_abs']:.3g}; recommended "
                           f"static scale {s:g}{settled_txt}", "", data))
    elif used is not None:  # scaling is on, and not enough at the scale it uses
        under = used["fp16_underflow"]
        fix = (f"a larger scale: loss_scale='static:{s:g}' (the largest gradient still fits fp16 at it)"
               if s > used["scale"] else "bf16 (fp32's exponent range): a larger scale would overflow the largest gradient")
        at = f"at the loss scale in use ({scaling}: {used['scale']:g})"
        title = (f"{at} {under:.1%} of gradient values still underflow in fp16 and {used['fp16_subnormal']:.0%} are "
                 "subnormals" if under > 0.01 else  # (else it is the subnormals that are too many)
                 f"{at} {used['fp16_subnormal']:.0%} of gradient values are fp16 subnormals (below 2^-14: fewer bits); "
                 f"{under:.1%} underflow")
        out.append(Finding("error" if under > 0.2 else "warning", "gradients", title,
                           f"largest |g| {r['max_abs']:.3g}; at scale {s:g}, {r['fp16_underflow_at_recommended_scale']:.1%}"
                           f" would still underflow{settled_txt}", fix, data))
    elif o["fp16_underflow"] > 0.01:
        out.append(Finding(
            "error" if o["fp16_underflow"] > 0.2 else "warning", "gradients",
            f"{o['fp16_underflow']:.0%} of gradient values are below 2^-24 and become 0 in fp16 without loss scaling",
            f"largest |gradient| {r['max_abs']:.3g}; {o['fp16_subnormal']:.0%} more are fp16 subnormals; at scale "
            f"{s:g}, {r['fp16_underflow_at_recommended_scale']:.1%} would still underflow{settled_txt}",
            f"scale the loss: MixedPrecision('master-fp16', loss_scale='static:{s:g}') or 'dynamic' (the default of the "
            "fp16 modes); or use bf16 (same exponent range as fp32)", data))
    elif o["fp16_subnormal"] > 0.05:
        out.append(Finding("warning", "gradients",
                           f"{o['fp16_subnormal']:.0%} of gradient values are fp16 subnormals (below 2^-14: fewer bits)",
                           f"recommended static loss scale {s:g}{settled_txt}",
                           f"loss_scale='static:{s:g}' or 'dynamic'", data))
    else:
        out.append(Finding("info", "gradients", f"gradients fit fp16 (largest |g| {r['max_abs']:.3g}); recommended static "
                           f"loss scale {s:g}{settled_txt}", "", "", data))
    if o["fp16_overflow"] > 0:
        out.append(Finding("error", "gradients", f"{o['fp16_overflow']:.2%} of gradient values exceed 65504 at loss scale 1",
                           "they are inf in fp16 even before scaling", "use bf16, or clip/rescale the loss", data))
    out += _parameter_findings(r["params"], s, used["scale"] if used is not None else None, half)
    return out


def _parameter_findings(params: list[dict[str, Any]], s: float, scale: float | None,
                        half: str | None) -> list[Finding]:
    """The parameters (three at most) most of whose gradient underflows in fp16 -- at the loss scale in use where
    there is one (``scale``; it was judged unscaled: "100% of its gradient underflows, fix: loss scale >= 262144"
    beside "gradients fit fp16 at the loss scale in use (dynamic: 65536)"). A bias a BatchNorm cancels is said apart:
    its gradient is zero up to rounding, and flushing it loses nothing."""
    if half != "fp16":
        return []

    def lost(p: dict[str, Any]) -> float:
        at = p.get("fp16_underflow_at_scale_in_use")
        return float(at if scale is not None and at is not None else p["fp16_underflow"])

    at = "" if scale is None else f" at the loss scale in use ({scale:g})"
    out = []
    for p in sorted(params, key=lambda p: -lost(p))[:3]:
        if lost(p) <= 0.5:
            continue
        norm = p.get("cancelled_by")
        if norm:
            owner = p["name"].removesuffix(".bias")
            out.append(Finding("info", "gradients", f"{p['name']}: its gradient is zero up to rounding (max |g| "
                               f"{p['max_abs']:.3g}): {owner}'s output goes straight into {norm}, which subtracts each "
                               "channel's mean, bias and all", f"{lost(p):.0%} of it underflows in fp16{at}; that loses "
                               "nothing", f"bias=False on {owner} (the norm's own shift does its job)"))
            continue
        fix = (f"loss scale >= {s:g}" if scale is None or s > scale else
               "bf16 (fp32's exponent range): a larger loss scale would overflow the largest gradient")
        out.append(Finding("warning", "gradients", f"{p['name']}: {lost(p):.0%} of its gradient underflows in fp16{at}",
                           f"max |g| {p['max_abs']:.3g}", fix))
    return out


def dynamic_settle(wl: Workload, device: torch.device, batch_size: int, steps: int) -> dict[str, Any]:
    """Where amp-fp16's dynamic loss scale (from 2^16) is after ``steps`` steps on this model (it backs off on
    overflow; it grows only after 2000 clean steps, so this is where it settles downwards)."""

    step = build_step(wl, "amp-fp16", batch_size, device, "dynamic")
    for _ in range(steps):
        step()
    return {"scale": step.mp.scale, "steps": steps, "skipped_steps": step.mp.totals["skipped_steps"]}


@torch.no_grad()
def activation_ranges(wl: Workload, device: torch.device, batch_size: int) -> list[dict[str, Any]]:
    """Per leaf module: max |output| in an fp32 forward pass (the largest activation fp16 must hold) and the
    log2 histogram of |output| (bins ``HIST_LO..HIST_HI``, as the gradients')."""

    model = wl.model.to(device).float().eval()
    (inputs, _), = device_batches(wl.train_data, batch_size, 1, device)
    seen: list[dict[str, Any]] = []
    handles = []

    def hook(name: str, kind: str) -> Callable[..., None]:
        def fn(module: nn.Module, args: Any, output: Any) -> None:
            outs = [output] if isinstance(output, torch.Tensor) else [o for o in output if isinstance(o, torch.Tensor)] \
                if isinstance(output, (tuple, list)) else []
            floats = [o.detach() for o in outs if o.is_floating_point() and o.numel()]
            if floats:
                hist, zeros = log2_histogram(torch.cat([o.flatten().float() for o in floats]))
                seen.append({"name": name, "type": kind, "max_abs": max(float(o.abs().max()) for o in floats),
                             "histogram": hist, "zeros": zeros})

        return fn

    for name, m in model.named_modules():
        if name and not list(m.children()):
            handles.append(m.register_forward_hook(hook(name, type(m).__name__)))
    try:
        wl.call_model(model, inputs)
    finally:
        for h in handles:
            h.remove()
        model.train()
    return seen


def activation_findings(acts: list[dict[str, Any]], verify: Callable[[str], str] | None = None) -> list[Finding]:
    """``verify(module)``: the fix diagnose tried and saw work for a module whose output overflows
    (:class:`ampbench.diagnose.fixes.FixChecker`); without it no module-level fix is offered (keeping the module
    in fp32 alone cannot help: its output is cast back to fp16)."""
    out = []
    for a in acts:
        if a["max_abs"] > FP16_MAX:
            fix = verify(a["name"]) if verify is not None else (
                "not verified: bf16 has fp32's range (keep_fp32 on this module alone casts its output back to fp16, "
                "which overflows again)")
            out.append(Finding("error", "activations", f"{a['name']} ({a['type']}) outputs |x| up to {a['max_abs']:.3g}: "
                               "inf in fp16", "fp16's largest value is 65504", fix,
                               {"layer": a["name"], "max_abs": a["max_abs"]}))
        elif a["max_abs"] > FP16_MAX / ACTIVATION_MARGIN:
            out.append(Finding("warning", "activations", f"{a['name']} ({a['type']}) outputs |x| up to {a['max_abs']:.3g}, "
                               f"within {FP16_MAX / a['max_abs']:.1f}x of fp16's max",
                               "a larger batch, input or a few training steps can push it over 65504",
                               "bf16 has fp32's range (its output does not overflow yet, so no fix could be verified; "
                               "keeping this module in fp32 would not help: its output is cast back to fp16)",
                               {"layer": a["name"], "max_abs": a["max_abs"]}))
    if not out and acts:
        top = max(acts, key=lambda a: a["max_abs"])
        out.append(Finding("info", "activations", f"activations fit fp16: largest |x| {top['max_abs']:.3g} in "
                           f"{top['name']} ({top['type']})"))  # ("in 1" named a Sequential's layer by its index alone)
    return out
