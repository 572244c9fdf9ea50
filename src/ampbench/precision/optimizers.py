"""Which implementation an optimizer steps with, and the fused one where torch has it.

torch's fused Adam, AdamW, SGD and Adagrad take ``found_inf`` and skip an overflowing step inside their own kernel,
so :class:`~ampbench.precision.MixedPrecision` steps them with no host sync (see docs/precision.md, "Host syncs");
the foreach and for-loop implementations need the host to decide whether to call ``step()``. The harness and the
trainer build the workloads' optimizers fused where torch supports the parameters' device and dtypes (the same
update rule, in one kernel) and record which implementation a row was measured with (``optimizer_impl``).
"""

from __future__ import annotations

import inspect

import torch

FUSABLE: tuple[type[torch.optim.Optimizer], ...] = (torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD,
                                                    torch.optim.Adagrad)
"""torch's optimizers with a fused implementation that takes ``found_inf``/``grad_scale``."""


DIRECTLY = ", stepped directly"
"""What a row's ``optimizer_impl`` adds when every timed step ran the fused kernel from the engine
(:mod:`ampbench.precision.fused_step`), not through ``optimizer.step()``."""


def implementation(optimizer: torch.optim.Optimizer) -> str:
    """``"AdamW (fused)"``, ``"SGD (foreach)"``, ``"Adam (for-loop)"``; a class torch has no such flags for: its
    name alone. ``foreach=None`` is torch's default: foreach when every parameter is on CUDA, else the for-loop."""
    name, d = type(optimizer).__name__, optimizer.defaults
    if type(optimizer).__module__.startswith("torchao."):  # (ampbench.precision.optimizer_state.is_torchao)
        if getattr(optimizer, "bf16_stochastic_round", False):
            name = "AdamW" if getattr(optimizer, "is_adamw", True) else "Adam"
            return f"{name} with bf16 stochastic rounding (torchao)"
        return f"{name} (torchao)"
    if "foreach" not in d and "fused" not in d:
        return name
    if d.get("fused"):
        return f"{name} (fused)"
    foreach = d.get("foreach")
    if foreach is None:
        params = [p for g in optimizer.param_groups for p in g["params"]]
        foreach = bool(params) and all(p.device.type == "cuda" for p in params)
    return f"{name} ({'foreach' if foreach else 'for-loop'})"


def fused_where_supported(optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """``optimizer`` rebuilt with ``fused=True`` (same class, param groups and hyper-parameters) when it is one of
    :data:`FUSABLE`, has no state yet and torch's fused kernel takes its parameters' devices and dtypes; otherwise
    ``optimizer`` itself (a user's own class, a ``differentiable`` one, one already stepped)."""
    cls = type(optimizer)
    d = optimizer.defaults
    if cls not in FUSABLE or d.get("fused") or d.get("differentiable") or optimizer.state:
        return optimizer
    takes = set(inspect.signature(cls.__init__).parameters)
    defaults = {k: v for k, v in d.items() if k in takes and k not in ("fused", "foreach")}
    groups = [{k: v for k, v in g.items() if k not in ("fused", "foreach")} for g in optimizer.param_groups]
    try:
        return cls(groups, **defaults, fused=True)
    except (RuntimeError, ValueError, TypeError):  # a device or dtype the fused kernels do not take
        return optimizer
