"""Does the harness report the throughput a user would measure by hand? ampbench's samples/s vs a hand loop's.

Same workload, model, data and process; each round runs ampbench's in-process cell
(``ampbench.bench.jobs.run_cell``, throughput only) and a hand-written loop, in alternating order so drift
hits both alike. The hand loop is what a user writes around the same engine: data already on the
device, ``batches()`` of the training split, warm-up, then ``perf_counter`` around N steps (with a
synchronise on GPU). A second hand loop uses plain torch (torch.autocast, no ampbench) for context;
the engine's own cost vs torch.amp is ``engine_overhead.py``'s subject.

Target (issue #4): ampbench / hand >= 0.98, i.e. the harness adds no measurable overhead and
loses no throughput to its timing (per-step CUDA events, percentiles).

    python benchmarks/harness_overhead.py --device cpu --out benchmarks/results/cpu/harness_overhead.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

from ampbench.bench.jobs import run_cell
from ampbench.cells import CellSpec
from ampbench.measure.env import environment
from ampbench.precision import MixedPrecision, get
from ampbench.precision.tf32_flags import tf32_scope
from ampbench.workloads import create_workload


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def hand_loop(workload: str, preset: str, precision: str, steps: int, warmup: int, device: torch.device,
              plain_torch: bool = False) -> float:
    wl = create_workload(workload, preset, seed=0)
    model = wl.model.to(device)
    opt = wl.make_optimizer(model.parameters())
    data = wl.train_data.to(device)
    bs = wl.batch_size
    recipe = get(precision)
    if plain_torch:
        dtype = recipe.compute_dtype

        def step(x: tuple[torch.Tensor, ...], y: torch.Tensor) -> None:
            # the mode's own math: cuDNN runs fp32 convolutions in TF32 by default (torch.backends.cudnn.allow_tf32 is
            # True), so an unscoped plain loop would time TF32 against ampbench's true-fp32 fp32 mode
            with tf32_scope(recipe.tf32):
                opt.zero_grad(set_to_none=True)
                with torch.autocast(device.type, dtype=dtype, enabled=recipe.is_half):
                    loss = wl.loss_fn(model(*wl.prepare(x)), y)
                loss.backward()
                opt.step()
    else:
        mp = MixedPrecision(precision, device=device)
        model, opt = mp.setup(model, opt)

        def step(x: tuple[torch.Tensor, ...], y: torch.Tensor) -> None:
            opt.zero_grad(set_to_none=True)
            with mp.autocast():
                loss = wl.loss_fn(model(*wl.prepare(x)), y)
            mp.backward(loss)
            mp.step(opt)

    batches = []
    while len(batches) < steps + warmup:
        batches.extend(data.batches(bs, drop_last=True))
    for x, y in batches[:warmup]:
        step(x, y)
    _sync(device)
    t = time.perf_counter()
    for x, y in batches[warmup:warmup + steps]:
        step(x, y)
    _sync(device)
    return bs * steps / (time.perf_counter() - t)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--workloads", default="mnist-cnn:small,tabular-mlp:small")
    ap.add_argument("--precisions", default=None, help="default: fp32,amp-bf16 (+amp-fp16 on GPU)")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    precisions = (args.precisions or ("fp32,amp-bf16,amp-fp16" if device.type == "cuda" else "fp32,amp-bf16")).split(",")
    results = []
    for item in args.workloads.split(","):
        workload, _, preset = item.partition(":")
        for precision in precisions:
            ours, hand, plain = [], [], []
            spec = CellSpec.of(workload=workload, model=None, preset=preset or "small", precision=precision,
                            batch_size=None, device=str(device), measures=("throughput",), steps=args.steps,
                            warmup=args.warmup)
            for r in range(args.rounds):
                order = [0, 1, 2] if r % 2 == 0 else [2, 1, 0]
                for which in order:
                    if which == 0:
                        row = run_cell(spec)
                        if row["status"] != "ok":
                            print(f"{workload} {precision}: {row['status']} {row['reason']}", file=sys.stderr)
                            return 1
                        ours.append(row["samples_per_s"])
                    elif which == 1:
                        hand.append(hand_loop(workload, spec.preset, precision, args.steps, args.warmup, device))
                    else:
                        plain.append(hand_loop(workload, spec.preset, precision, args.steps, args.warmup, device, True))
            ratios = [o / h for o, h in zip(ours, hand)]
            res = {"workload": workload, "preset": spec.preset, "precision": precision,
                   "ampbench_samples_per_s": statistics.median(ours), "hand_samples_per_s": statistics.median(hand),
                   "plain_torch_samples_per_s": statistics.median(plain), "ratio": statistics.median(ratios),
                   "ratios": ratios, "ratio_vs_plain_torch": statistics.median(ours) / statistics.median(plain)}
            results.append(res)
            print(f"{workload:12s} {precision:9s} ampbench {res['ampbench_samples_per_s']:10,.0f}  hand "
                  f"{res['hand_samples_per_s']:10,.0f}  ratio {res['ratio']:.3f} (rounds {min(ratios):.3f}.."
                  f"{max(ratios):.3f})  vs plain torch {res['ratio_vs_plain_torch']:.3f}", flush=True)
    env = environment(device)
    out = {"benchmark": "harness_overhead", "device": str(device), "device_name": env["device_name"],
           "torch": torch.__version__, "steps": args.steps, "warmup": args.warmup, "rounds": args.rounds,
           "target": "ratio >= 0.98", "results": results, "env": env}
    if args.out:
        from pathlib import Path

        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=1))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
