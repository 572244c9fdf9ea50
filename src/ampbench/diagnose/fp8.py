"""fp8 diagnostics: per converted layer, what its fp8 casts do to the numbers over K training steps.

For every torchao ``Float8Linear`` of an fp8 mode, on each step: the amax and dynamic scale of its input,
weight and output gradient (as the layer's own recipe casts them: e4m3 or e5m2, per tensor or per row),
the share of values clipped at the format's maximum (448 for e4m3, 57344 for e5m2; zero while the
scales are dynamic and finite: torchao scales amax onto the maximum), the share of non-zero values that
become 0 (underflow: an outlier sets the scale and crushes the rest), and the layer's output error
against the same matmul in bf16 on the same input. The layers whose error is largest are named with
the fix: keep them in bf16 (``--fp8-skip``), or scale per row (``fp8-rowwise``) when one outlier sets a
per-tensor scale.

The statistics re-quantize the recipe's casts here (a few lines, below) rather than read torchao's
internals: torchao exposes no per-cast statistics, and its private tensor subclasses change between
releases.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from ampbench.diagnose.findings import Finding
from ampbench.measure.step import build_step
from ampbench.workloads.base import Workload

FP8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}
ERROR_WARN = 0.10
"""Output error vs bf16 above this (10%) is a finding; e4m3 alone gives ~2-4% on well-scaled inputs."""
UNDERFLOW_WARN = 0.01


def cast_stats(x: torch.Tensor, dtype: torch.dtype, rowwise: bool) -> dict[str, float]:
    """amax, scale, saturated and underflow shares, relative error of ``x`` cast to ``dtype`` with a dynamic
    scale (per tensor, or per row along the last dimension)."""
    x = x.detach().float().reshape(-1, x.shape[-1])
    fmax = FP8_MAX[dtype]
    amax = x.abs().amax(dim=-1, keepdim=True) if rowwise else x.abs().amax().reshape(1, 1)
    scale = torch.where(amax > 0, fmax / amax.clamp_min(1e-30), torch.ones_like(amax))
    xs = x * scale
    q = xs.clamp(-fmax, fmax).to(dtype).float()
    nonzero = x != 0
    n_nonzero = int(nonzero.sum())
    err = float((q / scale - x).norm() / x.norm().clamp_min(1e-30))
    return {
        "amax": float(amax.max()),
        "scale": float(scale.min()),
        "saturated": float((xs.abs() > fmax * (1 + 1e-5)).float().mean()) if torch.isfinite(xs).all() else 1.0,
        "underflow": float(((q == 0) & nonzero).sum() / n_nonzero) if n_nonzero else 0.0,
        "error": err if math.isfinite(err) else float("inf"),
    }


def _rowwise(cast_config: Any) -> bool:
    return "AXISWISE" in str(getattr(cast_config, "scaling_granularity", "")).upper()


class _LayerWatch:
    """Hooks on one Float8Linear: statistics of its casts and its output error, per step."""

    def __init__(self, name: str, module: nn.Module) -> None:
        cfg = module.config
        self.name = name
        self.casts = {"input": (cfg.cast_config_input.target_dtype, _rowwise(cfg.cast_config_input)),
                      "weight": (cfg.cast_config_weight.target_dtype, _rowwise(cfg.cast_config_weight)),
                      "grad_output": (cfg.cast_config_grad_output.target_dtype, _rowwise(cfg.cast_config_grad_output))}
        self.steps: list[dict[str, Any]] = []
        self._x: torch.Tensor | None = None
        self.handles = [module.register_forward_pre_hook(self._pre), module.register_forward_hook(self._post),
                        module.register_full_backward_hook(self._back)]

    def _pre(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        self._x = args[0].detach()

    def _post(self, module: nn.Module, args: tuple[Any, ...], out: torch.Tensor) -> None:
        x, w = self._x, module.weight.detach()
        assert x is not None
        ref = F.linear(x.to(torch.bfloat16), w.to(torch.bfloat16),
                       None if module.bias is None else module.bias.detach().to(torch.bfloat16)).float()
        error = float((out.detach().float() - ref).norm() / ref.norm().clamp_min(1e-30))
        step = {"output_error": error if math.isfinite(error) else float("inf")}
        for what, t in (("input", x), ("weight", w)):
            step[what] = cast_stats(t, *self.casts[what])
        self.steps.append(step)
        self._x = None

    def _back(self, module: nn.Module, grad_input: Any, grad_output: tuple[torch.Tensor, ...]) -> None:
        if grad_output and grad_output[0] is not None and self.steps:
            self.steps[-1]["grad_output"] = cast_stats(grad_output[0], *self.casts["grad_output"])

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"layer": self.name, "steps": len(self.steps),
                               "formats": {k: f"{str(d).replace('torch.float8_', '')}{' rowwise' if r else ''}"
                                           for k, (d, r) in self.casts.items()}}
        errors = [s["output_error"] for s in self.steps]
        out["output_error"] = max(errors) if errors else None
        for what in self.casts:
            rows = [s[what] for s in self.steps if what in s]
            if rows:
                out[what] = {"amax_min": min(r["amax"] for r in rows), "amax_max": max(r["amax"] for r in rows),
                             "scale_min": min(r["scale"] for r in rows), "scale_max": max(r["scale"] for r in rows),
                             "saturated": max(r["saturated"] for r in rows), "underflow": max(r["underflow"] for r in rows),
                             "error": max(r["error"] for r in rows)}
        return out


def fp8_layer_stats(wl: Workload, precision: str, device: torch.device, batch_size: int, steps: int,
                    mp_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Train ``steps`` steps in the fp8 mode with every converted layer watched."""

    step = build_step(wl, precision, batch_size, device, mp_options=mp_options)
    plan = step.mp.fp8_layers
    watches = [_LayerWatch(n, m) for n, m in step.model.named_modules() if type(m).__name__ == "Float8Linear"]
    try:
        for _ in range(steps):
            step()
    finally:
        for w in watches:
            for h in w.handles:
                h.remove()
    layers = sorted((w.summary() for w in watches), key=lambda s: -(s["output_error"] or 0.0))
    return {"layers": layers, "plan": plan.summary() if plan is not None else "", "steps": steps,
            "skipped": dict(plan.skipped) if plan is not None else {}}


def fp8_findings(r: dict[str, Any], precision: str) -> list[Finding]:
    layers = r["layers"]
    if not layers:
        return [Finding("warning", "fp8", f"{precision} converted no layer: {r['plan']}",
                        "every Linear stayed bf16, so this mode is amp-bf16 here",
                        "--fp8-filter dims converts layers below torchao's size thresholds; see the skip reasons")]
    out: list[Finding] = []
    for s in layers:
        sat = max(s.get(k, {}).get("saturated", 0.0) for k in ("input", "weight", "grad_output"))
        under = {k: s[k]["underflow"] for k in ("input", "weight", "grad_output") if k in s}
        worst = max(under, key=lambda k: under[k]) if under else None
        err = s["output_error"] or 0.0
        if sat > 0:
            out.append(Finding("error", "fp8", f"{s['layer']}: {sat:.1%} of values clipped at the fp8 maximum",
                               "a non-finite amax or scale: the cast saturates instead of scaling",
                               f"keep this layer in bf16: --fp8-skip {s['layer']}", s))
        elif worst is not None and under[worst] > UNDERFLOW_WARN:
            fix = f"keep this layer in bf16: --fp8-skip {s['layer']}"
            if "rowwise" not in s["formats"].get(worst, ""):
                fix += " (fp8-rowwise helps when the large values sit in a few rows only)"
            out.append(Finding("warning", "fp8", f"{s['layer']}: {under[worst]:.1%} of its {worst} values underflow "
                               f"to 0 in {precision}", f"amax {s[worst]['amax_max']:.3g}: one large value sets the "
                               f"scale and the small ones round to 0 (output error {err:.1%} vs bf16)", fix, s))
        elif err > ERROR_WARN:
            out.append(Finding("warning", "fp8", f"{s['layer']}: output error {err:.1%} vs bf16 in {precision}",
                               "no underflow: the fp8 mantissa alone loses this much here",
                               f"keep this layer in bf16: --fp8-skip {s['layer']}", s))
    top = ", ".join(f"{s['layer']} {s['output_error']:.1%}" for s in layers[:3])
    out.append(Finding("info", "fp8", f"fp8 layers ({r['plan']}); largest output error vs bf16: {top}",
                       f"over {r['steps']} steps; saturation stays 0 while scales are dynamic and finite", "",
                       {"layers": len(layers)}))
    return out
