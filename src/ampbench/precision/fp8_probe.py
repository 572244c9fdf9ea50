"""Whether this CPU runs fp8 training: decided by what its kernels do, in a child process.

torch's CPU ``torch._scaled_mm`` is oneDNN's fp8 matmul. Which CPUs run it is not a flag list: an AMD EPYC with
AVX512-BF16 and neither AVX512-FP16 nor AMX (refused here by such a list) runs tensorwise and rowwise scaled matmuls
and trains through torchao's ``convert_to_float8_training``, while an AVX2-only EPYC failed "could not create a
primitive descriptor" -- after some calls had taken a fallback that works, so a short probe would pass there. So:

- no AVX-512 usable (an AVX2-only CPU, or oneDNN capped below ``AVX512_CORE`` by ``ONEDNN_MAX_CPU_ISA``, or ATen's
  capability at AVX2 or none): refused by the flags, as before;
- else a child process makes every kind of ``torch._scaled_mm`` call torchao makes (per-tensor and per-row scales,
  fast accumulation or not, e5m2 gradients) at two sizes, ten times each (or as many as take a second), then trains
  two small MLPs through torchao for a few steps in each recipe (tensorwise, rowwise, rowwise with a high-precision
  grad weight), where a crash (a kernel's abort, a segfault) ends the child and not the caller. Its verdict is kept
  in ``$XDG_CACHE_HOME/ampbench/fp8_probe.json`` under the key of what it depends on (CPU, its flags and caps, torch
  and torchao versions): ~5 s once per machine and software on an AVX512-BF16 EPYC. A probe that ran out of time
  is not kept: a machine busy with other work says nothing of its CPU's kernels, and the next run asks again.

An AMX Xeon (AVX512-FP16, AMX-BF16; no AMX-FP16) runs the per-tensor-scaled matmul at ~0.1 GFLOP/s (a reference
kernel: 2.3 s for 256x512x1024, where per-row scales took 3-17 ms): ten calls of each size and a 512-wide MLP made
the probe 87 s there, and past the 180 s limit under a parallel test run, whose verdict -- "did not finish" -- was then
kept as the machine's. Now: 19 s there (a call slower than 1 s is not repeated; the MLPs are 64 and 256 wide).

The child also prints its largest matmul's speed with per-tensor scales, per-row scales and in plain bf16, kept with
the verdict: a kind over 1,000x slower than bf16's (that Xeon's per-tensor kernel, 0.12 GFLOP/s against 1,600) is said
before a run that names its mode (:func:`cpu_fp8_slowness`, ``Support.slow``).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ampbench.cpuinfo import cpu_flags, cpu_name, isa_limit, usable

CHILD_TIMEOUT_S = 180.0
ATEN_ENV = "ATEN_CPU_CAPABILITY"

PROBE = r"""
import sys, time, warnings, logging
warnings.simplefilter("ignore")
logging.disable(logging.WARNING)
import torch


def again(call):  # ten times, or fewer where the kernel is slow (a reference kernel: seconds a call); s a call
    t0 = time.perf_counter()
    for i in range(10):
        call()
        if time.perf_counter() - t0 > 1.0:
            break
    return (time.perf_counter() - t0) / (i + 1)


seconds = {}
for m, k, n in ((16, 32, 64), (256, 512, 1024)):  # torch._scaled_mm as torchao calls it, again and again
    e4m3, w = torch.ones(m, k).to(torch.float8_e4m3fn), torch.ones(n, k).to(torch.float8_e4m3fn).t()
    e5m2 = torch.ones(m, n).to(torch.float8_e5m2)  # (a gradient: the backward's matmuls take e5m2 operands)
    for scales, scale_a, scale_b in (("tensorwise", torch.ones(()), torch.ones(())),
                                     ("rowwise", torch.ones(m, 1), torch.ones(1, n))):
        for fast in (True, False):
            seconds[scales] = again(lambda: torch._scaled_mm(e4m3, w, scale_a=scale_a, scale_b=scale_b,
                                                             out_dtype=torch.bfloat16, use_fast_accum=fast))
    again(lambda: torch._scaled_mm(e5m2, w.t().contiguous(), scale_a=torch.ones(()), scale_b=torch.ones(()),
                                   out_dtype=torch.bfloat16))
a, b = torch.ones(m, k, dtype=torch.bfloat16), torch.ones(k, n, dtype=torch.bfloat16)
again(lambda: a @ b)
seconds["bf16"] = again(lambda: a @ b)  # (the largest size's, the last of each kind: warm)
print("GFLOPS", {kind: 2 * m * k * n / s / 1e9 for kind, s in seconds.items()}, flush=True)
try:
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training
except ImportError:
    sys.exit(0)  # (the kernels run; fp8 training itself needs torchao, which ampbench checks apart)
for recipe in ("tensorwise", "rowwise", "rowwise_with_gw_hp"):
    for width, batch in ((64, 32), (256, 64)):
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.ReLU(), torch.nn.Linear(2 * width, width))
        convert_to_float8_training(m.to(torch.bfloat16), config=Float8LinearConfig.from_recipe_name(recipe))
        opt = torch.optim.SGD(m.parameters(), lr=1e-3)
        x = torch.randn(batch, width, dtype=torch.bfloat16)
        for _ in range(4):
            loss = m(x).float().pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
        if not torch.isfinite(loss):
            sys.exit(f"{recipe}: the loss of a {width}-wide MLP is not finite after 4 fp8 steps")
"""


def flags_problem() -> str | None:
    """Refused without asking the kernels: no AVX-512 that oneDNN or ATen may use (the AVX2 case, where a probe
    passes and later calls fail)."""
    aten = os.environ.get(ATEN_ENV, "").strip().lower()
    if usable("avx512f") and aten not in ("avx2", "default"):
        return None
    cap = isa_limit()
    where = (f"under ONEDNN_MAX_CPU_ISA={cap}" if cap and not usable("avx512f") else
             f"under {ATEN_ENV}={aten}" if aten in ("avx2", "default") else "on this CPU")
    return (f"no fp8 matmul kernel {where}: without AVX-512, oneDNN's fp8 matmul (torch._scaled_mm on CPU) fails "
            "after its first calls (seen on an AVX2-only EPYC); run the fp8 modes on a CUDA GPU with compute "
            "capability >= 8.9 or on a CPU with AVX-512")


def probe_key() -> str:
    """What the verdict depends on: the CPU, its flags and caps, torch's and torchao's versions."""
    try:
        torchao = importlib.metadata.version("torchao")
    except importlib.metadata.PackageNotFoundError:
        torchao = ""
    parts = [cpu_name(), " ".join(sorted(cpu_flags())), str(isa_limit()), os.environ.get(ATEN_ENV, ""),
             torch.__version__, torchao, sys.executable]
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()[:16]


def _cache_path() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ampbench" / "fp8_probe.json"


TIMED_OUT = "the fp8 probe did not finish"
"""How a verdict that ran out of time begins (:func:`run_probe`): not kept (:func:`cpu_fp8_problem`)."""


@dataclass(frozen=True)
class Probe:
    """What the child said: ``verdict`` None when it trained, else why not in one line; ``gflops``: the GFLOP/s its
    largest matmul ran at with per-tensor scales (``tensorwise``), per-row scales (``rowwise``) and in plain bf16
    (``bf16``), where it got that far."""

    verdict: str | None
    gflops: dict[str, float] = field(default_factory=dict)


def _gflops(stdout: str) -> dict[str, float]:
    for line in (stdout or "").splitlines():
        if line.startswith("GFLOPS "):
            try:
                said = ast.literal_eval(line[len("GFLOPS "):])
                return {str(k): float(v) for k, v in said.items()}
            except (ValueError, SyntaxError, AttributeError, TypeError):
                return {}
    return {}


def run_probe(code: str = PROBE, timeout: float = CHILD_TIMEOUT_S) -> Probe:
    """The child's verdict (its error, its signal, its timeout in one line; None when it trained) and its speeds."""
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONWARNINGS": "ignore"})
    except subprocess.TimeoutExpired:
        return Probe(f"{TIMED_OUT} in {timeout:.0f} s")
    gflops = _gflops(done.stdout)
    if done.returncode == 0:
        return Probe(None, gflops)
    if done.returncode < 0:
        return Probe(f"the fp8 probe crashed (signal {-done.returncode})", gflops)
    lines = [x.strip() for x in (done.stderr or "").splitlines() if x.strip()]
    said = (lines[-1] if lines else f"exit code {done.returncode}")[:160]
    return Probe(f"the fp8 probe failed: {said}", gflops)


SLOW = 1000.0
"""An fp8 matmul this many times slower than the same CPU's bf16 matmul is a reference kernel, not a fast path: said
before a run (:func:`cpu_fp8_slowness`). An AMX Xeon ran per-tensor scales at 0.12 GFLOP/s, per-row at 75 and bf16 at
1,400-1,600: the per-row kernel, 1/21 of bf16's (an AVX-512 kernel beside AMX), is slow, not broken; the per-tensor
one, 1/13,000, turns a step of seconds into minutes."""


def cpu_fp8_slowness(scales: str) -> str:
    """Where this CPU's fp8 matmul with ``scales`` (tensorwise, rowwise) runs over :data:`SLOW` times slower than its
    bf16 matmul, as the probe timed them: what that means for a step ("" where it does not, or was not timed)."""
    if cpu_fp8_problem() is not None:
        return ""
    rates = _entry().gflops
    fp8, bf16 = rates.get(scales), rates.get("bf16")
    if not fp8 or not bf16 or bf16 / fp8 < SLOW:
        return ""
    kind = "per-tensor" if scales == "tensorwise" else "per-row"
    layer = 2 * 1024**3 / (fp8 * 1e9)  # (one matmul of a 1024-wide Linear layer over 1,024 tokens)
    other = "rowwise" if scales == "tensorwise" else "tensorwise"
    return (f"this CPU's {kind}-scaled fp8 matmul ran at {fp8:.2g} GFLOP/s, 1/{bf16 / fp8:,.0f} of its bf16 matmul's "
            f"{bf16:,.0f} (a reference kernel): each Linear layer the mode converts runs its 3 matmuls a step at that "
            f"rate, ~{layer:,.0f} s each for a 1,024-wide layer over 1,024 tokens (fp8-{other}'s matmul: "
            f"{rates.get(other, 0.0):.3g} GFLOP/s)")


def cpu_fp8_problem() -> str | None:
    """Why this CPU cannot train in fp8 (None when it can): the flags' refusal, else the child's verdict (cached
    on disk per :func:`probe_key`, unless it ran out of time: asked again by the next process)."""
    refused = flags_problem()
    return refused if refused is not None else _entry().verdict


def forget() -> None:
    """Forget what this process read or probed (the next question reads the kept verdict again, or probes)."""
    _entry.cache_clear()


@functools.cache
def _entry() -> Probe:
    """The child's verdict and speeds on this machine: read back where kept, else probed (and kept, unless it ran out
    of time). A kept entry of an earlier ampbench (the verdict alone, without speeds) is probed again once."""
    key, path = probe_key(), _cache_path()
    try:
        cached = json.loads(path.read_text())
        kept = cached.get(key) if isinstance(cached, dict) else None
        if isinstance(kept, dict) and "verdict" in kept:
            return Probe(kept["verdict"], {str(k): float(v) for k, v in (kept.get("gflops") or {}).items()})
    except (OSError, ValueError, TypeError, AttributeError):
        cached = {}
    probe = run_probe()
    verdict = probe.verdict
    if verdict is not None and verdict.startswith(TIMED_OUT):
        return Probe(f"fp8 training on this CPU could not be checked: {verdict} (a busy machine? the next run probes "
                     "again); run the fp8 modes on a CUDA GPU with compute capability >= 8.9", probe.gflops)
    if verdict is not None:
        verdict = (f"this CPU's fp8 matmul (torch._scaled_mm on CPU, oneDNN's) does not run fp8 training: {verdict}; "
                   "run the fp8 modes on a CUDA GPU with compute capability >= 8.9")
    try:  # (best effort: a read-only home probes again next time)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        entry = {"verdict": verdict, "gflops": probe.gflops}
        tmp.write_text(json.dumps({**(cached if isinstance(cached, dict) else {}), key: entry}))
        os.replace(tmp, path)
    except OSError:
        pass
    return Probe(verdict, probe.gflops)
