"""The host's time to issue an op of an eager training step, in the units of the prediction's host model
(``predict/cost.py``'s :class:`~ampbench.predict.cost.Host`: microseconds per traced op, by phase).

A stack of tiny ``nn.Linear`` + ReLU layers (width 8, batch 8: every kernel a few microseconds, so the host sets the
pace) runs forward, backward and an AdamW step (fused on CUDA, as the engine runs it) on the device; each phase is
timed on the host without a sync (the GPU's queue never fills: ~300 launches a step), and its ops are counted as the
prediction's trace counts them (views and the trace's zero-cost ops left out: their time is inside the figures).
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


@dataclass(frozen=True)
class HostOps:
    """One measurement: microseconds per counted op of each phase, and the optimizer step per parameter."""

    device: str
    ops: dict[str, int]
    forward_us: float
    backward_us: float
    optimizer_us: float
    params: int

    def per_op(self, phase: str) -> float:
        return getattr(self, f"{phase}_us") / max(1, self.ops.get(phase, 0))

    @property
    def optimizer_us_per_param(self) -> float:
        return self.optimizer_us / self.params

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "forward_us_per_op": round(self.per_op("forward"), 2),
                "backward_us_per_op": round(self.per_op("backward"), 2),
                "optimizer_us_per_param": round(self.optimizer_us_per_param, 2), "host_us": self.host_us()}

    def host_us(self) -> str:
        """``predict --host-us`` for this host: forward and backward us per op, us per fused-optimizer parameter."""
        return f"{self.per_op('forward'):.1f},{self.per_op('backward'):.1f},{self.optimizer_us_per_param:.1f}"


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


def measure(device: torch.device | str, depth: int = 24, width: int = 8, batch: int = 8, steps: int = 200,
            warmup: int = 20) -> HostOps:
    """Median host time of each phase over ``steps`` steps (each after a sync), with its ops counted once."""
    device = torch.device(device)
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    model = nn.Sequential(*layers).to(device)
    fused = device.type == "cuda"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=fused, foreach=None if fused else True)
    x = torch.randn(batch, width, device=device)

    def sync() -> None:
        if fused:
            torch.cuda.synchronize(device)

    def step(times: dict[str, list[float]] | None, count: _Count | None = None) -> None:
        t0 = time.perf_counter()
        loss = model(x).square().mean()
        t1 = time.perf_counter()
        if count:
            count.phase = "backward"
        loss.backward()
        t2 = time.perf_counter()
        if count:
            count.phase = "optimizer"
        opt.step()
        opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        if times is not None:
            times["forward"].append(t1 - t0)
            times["backward"].append(t2 - t1)
            times["optimizer"].append(t3 - t2)

    for _ in range(warmup):
        step(None)
    count = _Count()
    with count:
        step(None, count)
    times: dict[str, list[float]] = {"forward": [], "backward": [], "optimizer": []}
    for _ in range(steps):
        sync()
        step(times)
    sync()
    us = {phase: statistics.median(ts) * 1e6 for phase, ts in times.items()}
    return HostOps(str(device), dict(count.ops), round(us["forward"], 1), round(us["backward"], 1),
                   round(us["optimizer"], 1), 2 * depth)
