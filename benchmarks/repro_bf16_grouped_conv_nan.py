"""Minimal reproducer: NaN gradients of a grouped convolution under CPU bf16 autocast.

Seen on a 2-core CPU with AMX (amx_bf16, amx_tile): ``resnext`` tiny in amp-bf16 intermittently got NaN
gradients in ``blocks.3.conv2.weight`` -- a grouped 3x3 convolution (32 -> 32 channels, 4 groups,
stride 2, padding 1) whose input is 1x1 spatially. Run on an AMX Xeon (2026-12-07, torch 2.13.0): the
default kernel for the weight gradient, ``brgconv_bwd_w:avx10_1_512_amx``, was off by more than 10 % in 859 of
2,000 calls and inf in 20; with AMX disabled, none (``results/cpu/repro_bf16_grouped_conv_nan_amx.json``; the
AVX512-BF16 EPYC's, none either: ``results/cpu/repro_bf16_grouped_conv_nan.json``). The engine now checks that
gradient when a half mode is set up on a CPU and, where it is wrong, runs such a call as its kernel's center tap
(``ampbench.precision.strided_conv``).

It runs that one convolution forward and backward under ``torch.autocast("cpu", torch.bfloat16)``
many times on random inputs and counts non-finite (and far-off) gradients against an fp32 reference,
three ways, each in a fresh process:
  default             oneDNN picks its best kernel (AMX where the CPU has it)
  no AMX              ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 (oneDNN's AVX512-BF16 kernels instead)
  kernels             ONEDNN_VERBOSE=1: which oneDNN kernels ran (e.g. brg_conv_bwd_w:avx512_core_amx)
If "default" shows NaNs and "no AMX" none, the AMX kernel is the cause. Usage:

    python benchmarks/repro_bf16_grouped_conv_nan.py [--trials 500] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import Counter

CASE = dict(channels=32, groups=4, kernel=3, stride=2, padding=1, batch=8, size=1)


def trials(n: int) -> dict[str, object]:
    import torch
    from torch import nn

    torch.manual_seed(0)
    c = CASE
    conv = nn.Conv2d(c["channels"], c["channels"], c["kernel"], stride=c["stride"], padding=c["padding"],
                     groups=c["groups"], bias=False)
    nonfinite = far = 0
    worst = 0.0
    for _ in range(n):
        x = torch.randn(c["batch"], c["channels"], c["size"], c["size"], requires_grad=True)
        conv.weight.grad = None
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = conv(x)
        (y.float() ** 2).sum().backward()
        g_w, g_x = conv.weight.grad.clone(), x.grad.clone()
        conv.weight.grad, x.grad = None, None
        (conv(x) ** 2).sum().backward()  # fp32 reference
        ref_w = conv.weight.grad
        if not (torch.isfinite(g_w).all() and torch.isfinite(g_x).all()):
            nonfinite += 1
            continue
        err = float((g_w - ref_w).abs().max() / ref_w.abs().max().clamp_min(1e-12))
        worst = max(worst, err)
        far += err > 0.1  # bf16 has 8 bits of mantissa: ~1% is normal, 10% is a wrong result
    return {"trials": n, "nonfinite": nonfinite, "relative_error_over_10pct": far, "worst_relative_error": worst}


def _child(env: dict[str, str], n: int) -> dict[str, object]:
    out = subprocess.run([sys.executable, __file__, "--child", str(n)], capture_output=True, text=True,
                         env={**os.environ, **env}, timeout=1800)
    lines = out.stdout.strip().splitlines()
    result: dict[str, object] = json.loads(lines[-1]) if out.returncode == 0 and lines else {
        "error": (out.stderr.strip().splitlines() or ["?"])[-1]}
    if env.get("ONEDNN_VERBOSE"):
        # "onednn_verbose,v1,primitive,exec,cpu,convolution,<kernel>,<pass>,...": kernel per pass
        kernels = Counter(f"{f[7]}: {f[6]}" for f in (ln.split(",") for ln in out.stdout.splitlines())
                          if len(f) > 7 and f[3] == "exec" and f[5] == "convolution")
        result = {"kernels": dict(kernels)}
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=500)
    ap.add_argument("--out", default=None)
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(trials(args.child)))
        return 0
    import torch

    from ampbench.measure.cpu import half_hardware_summary
    from ampbench.precision.support import cpu_name

    report = {
        "cpu": cpu_name(), "half_hardware": half_hardware_summary(), "torch": torch.__version__,
        "threads": torch.get_num_threads(), "case": CASE,
        "default": _child({}, args.trials),
        "no_amx": _child({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}, args.trials),
        "kernels": _child({"ONEDNN_VERBOSE": "1"}, 3)["kernels"],
    }
    print(json.dumps(report, indent=1))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
