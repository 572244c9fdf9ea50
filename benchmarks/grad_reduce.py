"""fp32 vs bf16 gradient reduction under DDP, side by side in one run: bytes per step and step time.

One `ampbench run` (the harness itself: torchrun ranks per cell, merged rows) of a workload in the
given precisions, strategy ddp over N ranks, --grad-reduce-dtype fp32,bf16, with interleaved repeats
(repeat r of every cell before repeat r+1 of any), plus the one-process cells it always includes.
Printed and written: per precision, the bytes one rank sends per step in each reduce dtype (counted
from dtypes and sizes) and the step time of bf16 reduction over fp32's, median and per-repeat range.

    python benchmarks/grad_reduce.py --device cpu --out benchmarks/results/cpu/grad_reduce.json

On a CPU with gloo the all-reduce goes through loopback TCP between processes on one machine: what
halving the bytes buys there says little about NVLink/InfiniBand (a GPU run of this script does).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from ampbench.bench import RunConfig, run
from ampbench.measure.env import environment, resolve_device
from ampbench.store import Store


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--workload", default="bert")
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--precisions", default="fp32,amp-bf16")
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    device = resolve_device(args.device)
    precisions = tuple(args.precisions.split(","))
    config = RunConfig.of(device=str(device), workloads=(args.workload,), presets=(args.preset,), precisions=precisions,
                       strategies=(None, "ddp"), nproc=args.nproc, grad_reduce_dtypes=("fp32", "bf16"),
                       steps=args.steps, warmup=3, repeats=args.repeats, extra={"isolate": True})
    with tempfile.TemporaryDirectory() as tmp:
        _, rows = run(config, Store(Path(tmp) / "r.db"))
    results = []
    print(f"{args.workload} ({args.preset}), ddp x{args.nproc}, {device}: gradient reduction fp32 vs bf16, "
          f"{args.repeats} interleaved repeats")
    for p in precisions:
        cell = {r["grad_reduce_dtype"]: r for r in rows if r["precision"] == p and r.get("strategy") == "ddp"}
        a, b = cell.get("fp32"), cell.get("bf16")
        if not a or not b or a["status"] != "ok" or b["status"] != "ok":
            print(f"  {p}: not measured ({(a or {}).get('reason') or (b or {}).get('reason')})")
            continue
        ratios = [y / x for x, y in zip(a.get("samples_per_s_repeats") or [a["samples_per_s"]],
                                         b.get("samples_per_s_repeats") or [b["samples_per_s"]]) if x and y]
        res = {"precision": p, "bytes_per_step_fp32": a["comm_bytes_per_step"], "bytes_per_step_bf16": b["comm_bytes_per_step"],
               "step_ms_p50_fp32": a["step_ms_p50"], "step_ms_p50_bf16": b["step_ms_p50"],
               "samples_per_s_fp32": a["samples_per_s"], "samples_per_s_bf16": b["samples_per_s"],
               "speed_bf16_over_fp32": statistics.median(ratios), "speed_ratio_range": [min(ratios), max(ratios)],
               "ratio_of_median_speeds": b["samples_per_s"] / a["samples_per_s"],
               "scaling_efficiency_fp32": a.get("scaling_efficiency"), "scaling_efficiency_bf16": b.get("scaling_efficiency")}
        results.append(res)
        print(f"  {p}: bytes/step {res['bytes_per_step_fp32']:,} -> {res['bytes_per_step_bf16']:,} "
              f"({res['bytes_per_step_bf16'] / res['bytes_per_step_fp32']:.2f}x); step p50 {a['step_ms_p50']:.2f} -> "
              f"{b['step_ms_p50']:.2f} ms; samples/s bf16-reduce / fp32-reduce: median of the paired repeats "
              f"{res['speed_bf16_over_fp32']:.2f}x (repeats {min(ratios):.2f}-{max(ratios):.2f}), of the median speeds "
              f"{res['ratio_of_median_speeds']:.2f}x")
    if args.out:
        env = environment(device)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"device": str(device), "device_name": env.get("device_name"), "torch": env.get("torch"),
                                        "workload": args.workload, "preset": args.preset, "nproc": args.nproc,
                                        "steps": args.steps, "repeats": args.repeats, "results": results,
                                        "rows": rows}, indent=1, default=str))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
