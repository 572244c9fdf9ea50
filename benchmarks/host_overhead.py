"""Host time per op of an eager training step, in the units of the prediction's host model (``predict/cost.py``'s
``HOST_US``: microseconds per traced op, by phase).

A stack of tiny ``nn.Linear`` + ReLU layers (width 8, batch 8: every kernel a few microseconds, so the host sets the
pace) runs forward, backward and a fused AdamW step on the device; each phase is timed on the host without a sync (the
GPU queue never fills: ~300 launches a step), and its ops are counted as the prediction's trace counts them (views and
the zero-cost ops of ``predict/trace.py`` left out) by a dispatch counter. microseconds per counted op = phase time /
its ops. The same on CPU tensors in the same process says how the host's dispatch alone compares (a machine without a
GPU can measure that much).

    python benchmarks/host_overhead.py --device cuda --out benchmarks/results/<gpu>/host_overhead.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from ampbench.predict.trace import ZERO_COST, _is_view


class _Count(TorchDispatchMode):
    """aten ops as the prediction's trace counts them, per phase."""

    def __init__(self) -> None:
        super().__init__()
        self.phase = "forward"
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = func._overloadpacket.__name__ if hasattr(func, "_overloadpacket") else str(func)
        if name not in ZERO_COST and not (hasattr(func, "_schema") and _is_view(func)):
            self.ops[self.phase] += 1
        return func(*args, **(kwargs or {}))


def measure(device: str, depth: int, width: int, batch: int, steps: int) -> dict[str, Any]:
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    model = nn.Sequential(*layers).to(device)
    fused = device.startswith("cuda")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=fused, foreach=None if fused else True)
    x = torch.randn(batch, width, device=device)
    sync = torch.cuda.synchronize if fused else (lambda: None)

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

    for _ in range(20):
        step(None)
    count = _Count()
    with count:
        step(None, count)
    times: dict[str, list[float]] = {"forward": [], "backward": [], "optimizer": []}
    for _ in range(steps):
        sync()
        step(times)
    sync()
    out: dict[str, Any] = {"device": device, "ops": dict(count.ops)}
    for phase, ts in times.items():
        us = statistics.median(ts) * 1e6
        out[f"{phase}_us"] = round(us, 1)
        out[f"{phase}_us_per_op"] = round(us / max(1, count.ops[phase]), 2)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--depth", type=int, default=24)
    ap.add_argument("--width", type=int, default=8)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    devices = [args.device] + (["cpu"] if args.device != "cpu" else [])
    rows = [measure(d, args.depth, args.width, args.batch, args.steps) for d in devices]
    for r in rows:
        print(f"{r['device']:8s} " + "  ".join(f"{p} {r[p + '_us']:.0f} us / {r['ops'].get(p, 0)} ops = "
                                             f"{r[p + '_us_per_op']:.1f}" for p in ("forward", "backward", "optimizer")))
    name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu"
    result = {"benchmark": "host_overhead", "device_name": name, "torch": torch.__version__,
              "python": sys.version.split()[0], "config": vars(args), "rows": rows}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
