"""The host's time to issue an op of an eager training step, in the units of the prediction's host model
(``predict/cost.py``'s :class:`~ampbench.predict.cost.Host`: microseconds per traced op, by phase).

A stack of tiny ``nn.Linear`` + ReLU layers (width 8, batch 8: every kernel a few microseconds, so the host sets the
pace) runs forward, backward and a fused AdamW step on the device; each phase is timed on the host without a sync
(the GPU's queue never fills: ~300 launches a step), and its ops are counted as the prediction's trace counts them
(views and the trace's zero-cost ops left out: their time is inside the figures). The optimizer is timed three ways,
in turns: through ``optimizer.step()`` (torch's Python: a hand-written loop's step), as the engine steps it
(:class:`~ampbench.precision.fused_step.FusedStep`: the same kernels from lists made once), and its kernels alone.
``ampbench hw`` reports it (``predict --host-us`` takes the CUDA figures); ``benchmarks/host_overhead.py`` writes it.
On CPU tensors it is the dispatch alone (with kernels of a few microseconds): what a machine without a GPU can say.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from ampbench.measure.op_kinds import counted
from ampbench.precision.fused_step import FusedStep


@dataclass(frozen=True)
class HostOps:
    """One measurement: microseconds per counted op of each phase, and the optimizer step per parameter."""

    device: str
    ops: dict[str, int]
    forward_us: float
    backward_us: float
    optimizer_us: float
    params: int
    direct_us: float | None = None
    """The optimizer step as the engine takes it (its direct fused step), microseconds; None where it was not timed."""
    kernels_us: float | None = None
    """The step's kernels alone (``_foreach_add_`` and ``_fused_adamw_`` on lists made beforehand) and zero_grad: on a
    CPU the kernels compute here, which on a GPU is the device's time, not the host's."""

    def per_op(self, phase: str) -> float:
        return getattr(self, f"{phase}_us") / max(1, self.ops.get(phase, 0))

    @property
    def optimizer_us_per_param(self) -> float:
        return self.optimizer_us / self.params

    @property
    def direct_us_per_param(self) -> float | None:
        """The engine's direct step per parameter, beyond its ops' dispatch (each at the backward's us per op: the
        prediction prices the ops apart, :meth:`ampbench.predict.cost.Host.optimizer_s`)."""
        if self.direct_us is None:
            return None
        return max(0.0, self.direct_us - self.ops.get("optimizer", 0) * self.per_op("backward")) / self.params

    @property
    def direct_share(self) -> float | None:
        """The engine's direct step per parameter over ``optimizer.step()``'s, as ``predict`` prices the two (its ops
        apart): on a GPU host, ``predict``'s :data:`~ampbench.predict.cost.DIRECT_STEP_RATIO`."""
        direct = self.direct_us_per_param
        return None if direct is None else direct / self.optimizer_us_per_param

    @property
    def direct_ratio(self) -> float | None:
        """The engine's direct step over ``optimizer.step()``, the kernels' own time taken out of both (a CPU host
        computes them: what the CPU can say of the share; a GPU host's is :attr:`direct_share`)."""
        if self.direct_us is None or self.kernels_us is None:
            return None
        return (self.direct_us - self.kernels_us) / (self.optimizer_us - self.kernels_us)

    def as_dict(self) -> dict[str, Any]:
        direct, ratio, share = self.direct_us_per_param, self.direct_ratio, self.direct_share
        return {**asdict(self), "forward_us_per_op": round(self.per_op("forward"), 2),
                "backward_us_per_op": round(self.per_op("backward"), 2),
                "optimizer_us_per_param": round(self.optimizer_us_per_param, 2),
                "direct_us_per_param": None if direct is None else round(direct, 2),
                "direct_ratio": None if ratio is None else round(ratio, 3),
                "direct_share": None if share is None else round(share, 3), "host_us": self.host_us()}

    def host_us(self) -> str:
        """``predict --host-us`` for this host: forward and backward us per op, us per parameter of a fused
        ``optimizer.step()`` and of the engine's direct step."""
        direct = self.direct_us_per_param
        return (f"{self.per_op('forward'):.1f},{self.per_op('backward'):.1f},{self.optimizer_us_per_param:.1f}"
                + (f",{direct:.2f}" if direct is not None else ""))


class _Count(TorchDispatchMode):
    """aten ops as the prediction's trace counts them, per phase."""

    def __init__(self) -> None:
        super().__init__()
        self.phase = "forward"
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if counted(func):
            self.ops[self.phase] += 1
        return func(*args, **(kwargs or {}))


HOWS = ("optimizer", "direct", "kernels")
"""How the optimizer steps, in turns: ``optimizer.step()``, the engine's direct step, the kernels alone."""


def measure(device: torch.device | str, depth: int = 24, width: int = 8, batch: int = 8, steps: int = 200,
            warmup: int = 20) -> HostOps:
    """Median host time of each phase over ``steps`` steps (each after a sync), with its ops counted once."""
    device = torch.device(device)
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    model = nn.Sequential(*layers).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    direct = FusedStep(opt)
    x = torch.randn(batch, width, device=device)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    params = list(model.parameters())
    group = opt.param_groups[0]

    def kernels(grads: list[torch.Tensor]) -> Any:
        """The step's two kernels alone, as a call on lists made here, before the timed part (the state exists by
        then: the turns start with ``optimizer.step()``)."""
        state = [opt.state[p] for p in params]
        steps_, exp_avgs, exp_avg_sqs = ([s[k] for s in state] for k in ("step", "exp_avg", "exp_avg_sq"))

        def call() -> None:
            with torch.no_grad():
                torch._foreach_add_(steps_, 1)
                torch._fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, [], steps_, lr=group["lr"],
                                    beta1=group["betas"][0], beta2=group["betas"][1], weight_decay=group["weight_decay"],
                                    eps=group["eps"], amsgrad=False, maximize=False)
        return call

    def step(times: dict[str, list[float]] | None, count: _Count | None = None, how: str = "optimizer") -> None:
        t0 = time.perf_counter()
        loss = model(x).square().mean()
        t1 = time.perf_counter()
        if count:
            count.phase = "backward"
        loss.backward()
        if how == "kernels":
            call = kernels([p.grad for p in params])
        t2 = time.perf_counter()
        if count:
            count.phase = "optimizer"
        if how == "kernels":
            call()
        elif how == "direct" and direct.step(None):
            pass
        elif how != "direct" or times is None:
            opt.step()
        else:  # (a direct step declined: the figure would be torch's)
            raise AssertionError("the engine's direct step declined this optimizer")
        opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        if times is not None:
            if how == "optimizer":
                times["forward"].append(t1 - t0)
                times["backward"].append(t2 - t1)
            times[how].append(t3 - t2)

    for i in range(warmup):
        step(None, how=HOWS[i % 3])
    count = _Count()
    with count:
        step(None, count)
    times: dict[str, list[float]] = {"forward": [], "backward": [], "optimizer": [], "direct": [], "kernels": []}
    for i in range(3 * steps):
        sync()
        step(times, how=HOWS[i % 3])
    sync()
    us = {phase: statistics.median(ts) * 1e6 for phase, ts in times.items()}
    return HostOps(str(device), dict(count.ops), round(us["forward"], 1), round(us["backward"], 1),
                   round(us["optimizer"], 1), 2 * depth, round(us["direct"], 1), round(us["kernels"], 1))
