"""Whether a non-finite parameter gradient is the precision's or the kernel's: the module's gradient computed again.

``diagnose`` names the module whose parameter gradient first went NaN/Inf and says what to look at. But a kernel can
compute wrong: on an AMX Xeon (torch 2.13's oneDNN), a bf16 convolution's weight gradient for a 3x3 stride-2 layer
over a 1x1 input came out wrong in 45-100% of calls -- inf at times, garbage the rest, where the same call capped
below AMX (``ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16``) or in fp32 was right every time. ResNeXt tiny's last block has
such a layer: its bf16 steps were skipped for "inf/NaN gradients", and diagnose answered "train in fp32" as if bf16's
range were at fault.

So, where the first non-finite value is a parameter gradient: the step's batch is run again up to that module, its
input and the gradient coming into its output are kept, and the parameter's gradient is computed from them
:data:`REPEATS` times in the step's own precision and once in fp32 (a float copy of the module, the same values
upcast: the oracle). A kernel is at fault where fp32's gradient is finite and within the half dtype's range, yet a
half call gave NaN/Inf or a gradient off from fp32's by more than the engine's own check allows
(:func:`ampbench.precision.strided_conv.off_from`, 5 % of fp32's largest value). Where every call agrees
with fp32's, the values are at fault, not the kernel -- that is said too.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ampbench.precision.strided_conv import off_from

REPEATS = 8
"""Calls of the half kernel (a fault that comes and goes shows in some of them)."""


def capture(model: nn.Module, module_name: str, run: Callable[[], torch.Tensor], scale: float) -> tuple[Any, Any] | None:
    """The input of ``module_name`` and the gradient coming into its output when ``run`` (the step's forward and loss)
    runs again, the loss times ``scale`` (the step's loss scale); None where the module has no single tensor output."""
    module = model.get_submodule(module_name) if module_name != "(model)" else model
    seen: dict[str, Any] = {}

    def pre(m: nn.Module, args: Any, kwargs: Any) -> None:
        seen["args"], seen["kwargs"] = args, kwargs

    def post(m: nn.Module, args: Any, kwargs: Any, out: Any) -> None:
        if isinstance(out, torch.Tensor) and out.requires_grad:
            seen["out"] = out

    handles = [module.register_forward_pre_hook(pre, with_kwargs=True),
               module.register_forward_hook(post, with_kwargs=True)]
    try:
        loss = run()
    finally:
        for h in handles:
            h.remove()
    if "out" not in seen:
        return None
    (gy,) = torch.autograd.grad(loss * scale, seen["out"])
    args = tuple(_detached(a) for a in seen["args"])
    kwargs = {k: _detached(v) for k, v in seen["kwargs"].items()}
    return (args, kwargs), gy.detach()


def _detached(v: Any) -> Any:
    return v.detach() if isinstance(v, torch.Tensor) else v


def _gradient(module: nn.Module, param: str, inputs: tuple[Any, Any], gy: torch.Tensor,
              context: Callable[[], Any]) -> torch.Tensor:
    args, kwargs = inputs
    p = module.get_parameter(param)
    with context():
        y = module(*args, **kwargs)
    (g,) = torch.autograd.grad(y, p, gy.to(y.dtype))
    return g.detach().float()


def _up(v: Any) -> Any:
    return v.float() if isinstance(v, torch.Tensor) and v.is_floating_point() else v


def recompute(model: nn.Module, module_name: str, param: str, inputs: tuple[Any, Any], gy: torch.Tensor,
              context: Callable[[], Any]) -> dict[str, Any]:
    """The parameter's gradient from the kept ``inputs`` and ``gy``: :data:`REPEATS` times as the step computes it
    (``context``: the step's autocast), once in fp32; the verdict (:func:`verdict`)."""
    module = model.get_submodule(module_name) if module_name != "(model)" else model
    leaf = param[len(module_name) + 1:] if module_name != "(model)" else param
    dtype = module.get_parameter(leaf).dtype
    halves = [_gradient(module, leaf, inputs, gy, context) for _ in range(REPEATS)]
    fp32 = copy.deepcopy(module).float()
    fp32.__dict__.pop("forward", None)  # (a forward set on the instance -- a kernel fallback's -- closes over the
    # half module, which a deep copy keeps: the class's own forward is the math, in fp32)
    args, kwargs = inputs
    up = (tuple(_up(a) for a in args), {k: _up(v) for k, v in kwargs.items()})
    reference = _gradient(fp32, leaf, up, gy.float(), contextlib.nullcontext)
    return verdict(halves, reference, halves_dtype(dtype, inputs))


def halves_dtype(param_dtype: torch.dtype, inputs: tuple[Any, Any]) -> torch.dtype:
    """The narrowest floating dtype among the parameter and the module's inputs (autocast keeps fp32 weights and
    computes in the inputs' half dtype)."""
    dtypes = [param_dtype] + [a.dtype for a in inputs[0] if isinstance(a, torch.Tensor) and a.is_floating_point()]
    return min(dtypes, key=lambda d: torch.finfo(d).bits)


def verdict(halves: list[torch.Tensor], reference: torch.Tensor, dtype: torch.dtype) -> dict[str, Any]:
    """``fault``: fp32's gradient is finite and within ``dtype``'s range, yet a half call was non-finite or off from it
    (:func:`~ampbench.precision.strided_conv.off_from`); with the counts and the largest error. Not a fault where fp32's
    gradient is itself non-finite or beyond the half range (the values are at fault: the precision's, or the
    model's)."""
    top = float(reference.abs().max()) if reference.numel() else 0.0
    finite = bool(torch.isfinite(reference).all())
    in_range = finite and top <= torch.finfo(dtype).max
    whole = [h for h in halves if bool(torch.isfinite(h).all())]
    nonfinite = len(halves) - len(whole)
    errors = [float((h - reference).abs().max()) for h in whole]
    off = sum(off_from(h, reference) for h in whole)
    return {"fault": bool(in_range and (nonfinite or off)), "calls": len(halves), "nonfinite": nonfinite, "off": off,
            "max_error": max(errors, default=None), "fp32_max": top, "fp32_finite": finite, "in_range": in_range,
            "dtype": str(dtype).removeprefix("torch.")}
