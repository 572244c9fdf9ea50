"""Host time per op of an eager training step, in the units of the prediction's host model (``predict/cost.py``'s
``Host``: microseconds per traced op, by phase): :func:`ampbench.measure.host_ops.measure` on the device, and on CPU
tensors in the same process (the dispatch alone: what a machine without a GPU can measure), written as JSON.

    python benchmarks/host_overhead.py --device cuda --out benchmarks/results/<gpu>/host_overhead.json
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from ampbench.measure.host_ops import measure


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
    measured = [measure(d, args.depth, args.width, args.batch, args.steps) for d in devices]
    for m in measured:
        print(f"{m.device:8s} " + "  ".join(f"{p} {getattr(m, p + '_us'):.0f} us / {m.ops.get(p, 0)} ops = "
                                             f"{m.per_op(p):.1f}" for p in ("forward", "backward", "optimizer"))
              + f"  direct step {m.direct_us:.0f} us, kernels alone {m.kernels_us:.0f} us (ratio {m.direct_ratio:.3f})"
              + (f"  (predict --host-us {m.host_us()})" if m.device != "cpu" else ""))
    rows = [m.as_dict() for m in measured]
    name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu"
    result = {"benchmark": "host_overhead", "device_name": name, "torch": torch.__version__,
              "python": sys.version.split()[0], "config": vars(args), "rows": rows}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
