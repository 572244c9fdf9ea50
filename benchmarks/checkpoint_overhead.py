"""The host time activation checkpointing adds, per checkpointed block and per op inside one, beyond what
``predict``'s host model already prices (each traced op at the host's forward or backward time per op, the recompute's
ops included): the checkpoint's own Python around each block (saving the RNG and autocast state, its saved-tensor
hooks, the recompute's frame), and under ``selective`` torch's dispatch modes that see every op of the block's forward
and again in the recompute (caching, then serving or recomputing).

Stacks of tiny blocks (``nn.Linear`` + ReLU layers, width 8, batch 8: every kernel a few microseconds, the host sets
the pace) of 2, 3, 4 and 6 layers a block, 24 layers in all, train eagerly without checkpointing and with each
policy, side by side in turns; each phase is timed on the host and its ops counted as the trace counts them. A
policy's extra -- its forward + backward less its own ops at the plain step's us per op -- is fitted as ``blocks x
per_block + block ops x per_op`` on the stacks of 2 and 4 layers a block (each a multiple of the plain forward's us
per op: what ``predict`` scales by its host's figure, ``predict/cost.py``'s ``CHECKPOINT_HOST``) and checked on those
of 3 and 6 (``held_out``: the fit's error there).

    python benchmarks/checkpoint_overhead.py --out benchmarks/results/cpu/checkpoint_overhead.json
    python benchmarks/checkpoint_overhead.py --workload bert --batch 2 --steps 150   # a real model's blocks, checked
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from typing import Any

import torch
from torch import nn

from ampbench.distributed.units import blocks
from ampbench.execution.checkpointing import checkpoint_blocks
from ampbench.measure.host_ops import _Count, measure
from ampbench.predict.cost import CHECKPOINT_HOST
from ampbench.workloads import create_workload

POLICIES = ("off", "blocks", "selective")


def _model(layers: int, per_block: int, width: int, device: torch.device, policy: str) -> nn.Module:
    torch.manual_seed(0)
    stack = nn.Sequential(*(nn.Sequential(*(m for _ in range(per_block) for m in (nn.Linear(width, width), nn.ReLU())))
                            for _ in range(layers // per_block)))  # (blocks of several layers: checkpoint_blocks')
    model = nn.Sequential(stack).to(device)
    if policy != "off":
        checkpoint_blocks(model, "the stack", policy=policy)
    return model


def _in_turns(models: dict[str, Any], step: Any, steps: int) -> tuple[dict[str, list[float]], dict[str, _Count]]:
    """Each policy's model warmed up, its ops counted over one step, then ``steps`` steps each in turns: the medians of
    their forward and backward (microseconds) and the counts. ``step(model, count)``: one step's (forward, backward)
    seconds, ``count``'s phase turned to the backward between them."""
    counts = {}
    for p, m in models.items():
        for _ in range(10):
            step(m)
        counts[p] = _Count()
        with counts[p]:
            step(m, counts[p])
    times: dict[str, list[tuple[float, float]]] = {p: [] for p in POLICIES}
    for i in range(steps * len(POLICIES)):
        p = POLICIES[i % len(POLICIES)]
        times[p].append(step(models[p]))
    return {p: [statistics.median(t[k] for t in ts) * 1e6 for k in (0, 1)] for p, ts in times.items()}, counts


def _measure(device: torch.device, layers: int, per_block: int, width: int, batch: int,
             steps: int) -> dict[str, Any]:
    """One stack: each policy's forward and backward (medians over ``steps`` turns) and counted ops."""
    models = {p: _model(layers, per_block, width, device, p) for p in POLICIES}
    x = torch.randn(batch, width, device=device)

    def step(model: nn.Module, count: _Count | None = None) -> tuple[float, float]:
        t0 = time.perf_counter()
        loss = model(x).square().mean()
        t1 = time.perf_counter()
        if count is not None:
            count.phase = "backward"
        loss.backward()
        t2 = time.perf_counter()
        model.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return t1 - t0, t2 - t1

    us, counts = _in_turns(models, step, steps)
    per_op = [us["off"][k] / counts["off"].ops[phase] for k, phase in enumerate(("forward", "backward"))]
    block_ops = counts["off"].ops["forward"] - 2  # (the loss's square and mean: outside the blocks)
    out: dict[str, Any] = {"layers_per_block": per_block, "blocks": layers // per_block, "block_ops": block_ops,
                           "forward_us_per_op": round(per_op[0], 2), "backward_us_per_op": round(per_op[1], 2),
                           "ops": {p: dict(c.ops) for p, c in counts.items()},
                           "us": {p: [round(v, 1) for v in u] for p, u in us.items()}}
    for p in POLICIES[1:]:
        priced = counts[p].ops["forward"] * per_op[0] + counts[p].ops["backward"] * per_op[1]
        out[f"{p}_extra_us"] = round(sum(us[p]) - priced, 1)
    return out


def _workload(name: str, preset: str, batch: int, steps: int, options: dict[str, Any]) -> dict[str, Any]:
    """A registered workload's own repeated blocks (``--workload``), each policy beside plain CPU steps in turns: the
    extra measured (its forward + backward less its own ops at the plain step's us per op, absolute microseconds)
    against what ``predict`` prices it at here (``CHECKPOINT_HOST`` in this CPU's plain CPU-tensor op time, the tiny
    stack's -- the unit ``Host.python_us`` is on a GPU host): not fitted on, a check of the stacks' fit on a real
    model's blocks."""
    models = {}
    for p in POLICIES:
        torch.manual_seed(0)
        models[p] = wl = create_workload(name, preset, **options)
        if p != "off":
            checkpoint_blocks(wl.model, name, policy=p)
    first = models["off"]
    inputs, targets = next(first.train_data.subset(0, batch).batches(batch))
    x = first.prepare(inputs)

    def step(wl: Any, count: _Count | None = None) -> tuple[float, float]:
        t0 = time.perf_counter()
        loss = wl.loss_fn(wl.call_model(wl.model, x, prepared=True), targets)
        t1 = time.perf_counter()
        if count is not None:
            count.phase = "backward"
        loss.backward()
        t2 = time.perf_counter()
        wl.model.zero_grad(set_to_none=True)
        return t1 - t0, t2 - t1

    us, counts = _in_turns(models, step, steps)
    per_op = [us["off"][k] / counts["off"].ops[phase] for k, phase in enumerate(("forward", "backward"))]
    unit = measure("cpu", steps=steps).per_op("forward")  # (the stack's plain CPU-tensor op: predict's python_us)
    n = len(blocks(first.model))
    out: dict[str, Any] = {"workload": name, "preset": preset, "batch": batch, "n_blocks": n, "stack_op_us": round(unit, 2),
                           "forward_us_per_op": round(per_op[0], 2), "backward_us_per_op": round(per_op[1], 2),
                           "ops": {p: dict(c.ops) for p, c in counts.items()}}
    for p in POLICIES[1:]:
        c = counts[p].ops
        measured = sum(us[p]) - (c["forward"] * per_op[0] + c["backward"] * per_op[1])
        recomputed = c["backward"] - counts["off"].ops["backward"]  # (the blocks' forward ops, again in the backward)
        priced = (CHECKPOINT_HOST[p].per_block * n + CHECKPOINT_HOST[p].per_op * recomputed) * unit
        out[p] = {"extra_us": round(measured, 1), "priced_us": round(priced, 1), "ratio": round(measured / priced, 2)}
    return out


def fit(rows: list[dict[str, Any]], policy: str) -> dict[str, float]:
    """``extra = blocks x per_block + block_ops x per_op`` over the stacks (least squares), in forward ops' time."""
    a = torch.tensor([[r["blocks"], r["block_ops"]] for r in rows], dtype=torch.float64)
    scale = statistics.mean(r["forward_us_per_op"] for r in rows)
    b = torch.tensor([[r[f"{policy}_extra_us"] / scale] for r in rows], dtype=torch.float64)
    per_block, per_op = torch.linalg.lstsq(a, b).solution.flatten().tolist()
    return {"per_block": round(per_block, 2), "per_op": round(per_op, 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--width", type=int, default=8)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--workload", default=None, help="a registered workload's own blocks instead of the stacks "
                    "(CPU; measured against predict's price, not fitted on)")
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("-o", "--option", action="append", default=[], help="workload option KEY=VALUE (bert: seq_len=8)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    device = torch.device(args.device)
    if args.workload is not None:
        options = {k: int(v) if v.isdigit() else v for k, _, v in (o.partition("=") for o in args.option)}
        got = _workload(args.workload, args.preset, args.batch, args.steps, options)
        for p in POLICIES[1:]:
            print(f"{args.workload} ({args.preset}), {got['n_blocks']} blocks, {p}: extra {got[p]['extra_us']:.0f} us "
                  f"measured, {got[p]['priced_us']:.0f} priced ({got[p]['ratio']:.2f}x)")
        if args.out:
            with open(args.out, "w") as f:
                json.dump({"benchmark": "checkpoint_overhead", "torch": torch.__version__,
                           "machine": platform.processor() or platform.machine(), "config": vars(args), **got}, f,
                          indent=1)
        return 0
    rows = [_measure(device, args.layers, k, args.width, args.batch, args.steps) for k in (2, 3, 4, 6)]
    fitted_on = [r for r in rows if r["layers_per_block"] in (2, 4)]
    fitted = {p: fit(fitted_on, p) for p in POLICIES[1:]}
    held_out = {p: {r["layers_per_block"]: round((r["blocks"] * f["per_block"] + r["block_ops"] * f["per_op"])
                                                 * r["forward_us_per_op"] / r[f"{p}_extra_us"] - 1, 3)
                    for r in rows if r not in fitted_on} for p, f in fitted.items()}
    for r in rows:
        print(f"{r['blocks']} blocks of {r['layers_per_block']} layers: plain {r['forward_us_per_op']} us per forward "
              f"op; extra us blocks {r['blocks_extra_us']}, selective {r['selective_extra_us']}")
    print(f"fitted on 2 and 4 layers a block, in forward ops' time: {fitted}; held out (3, 6): predicted extra over "
          f"measured - 1: {held_out}")
    result = {"benchmark": "checkpoint_overhead", "device": str(device), "torch": torch.__version__,
              "python": sys.version.split()[0], "machine": platform.processor() or platform.machine(),
              "config": vars(args), "rows": rows, "fitted": fitted, "held_out": held_out}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
