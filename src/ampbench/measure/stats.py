"""Statistics of measured step times (no PyTorch: every framework's cells summarise their steps with these)."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ampbench import progress


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 100]) of a non-empty list."""
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


NOISE_BLOCKS = 5
MIN_BLOCK_STEPS = 2
MIN_NOISE_BLOCKS = 3
"""Blocks a noise estimate needs. The spread of two numbers is no estimate of a spread: at one degree of freedom the
97.5 % t-quantile is 12.7 (4.3 at two, 2.8 at the default five), and the advisor's gain must clear only 2 x the
noise. Cells of 4-5 timed steps had two blocks: an FSDP x2 cell on a busy 2-core CPU read amp-bf16 "1.65x ±16%",
coloured faster, while the same run's other distributions said 0.46-0.92x."""
MIN_NOISE_STEPS = MIN_NOISE_BLOCKS * MIN_BLOCK_STEPS
"""Timed steps a cell needs for a noise estimate: ``MIN_NOISE_BLOCKS`` blocks of ``MIN_BLOCK_STEPS``, whose
throughputs disagree by the noise (:meth:`Timing.throughput_noise`)."""


@dataclass
class Timing:
    step_ms: list[float]
    """Per-step times in ms."""
    total_s: float
    """Wall time of all timed steps, first start to last end."""
    timer: str

    def summary(self, prefix: str = "step_ms") -> dict[str, float]:
        return {f"{prefix}_p10": percentile(self.step_ms, 10), f"{prefix}_p50": percentile(self.step_ms, 50),
                f"{prefix}_p90": percentile(self.step_ms, 90), f"{prefix}_mean": statistics.fmean(self.step_ms)}

    def throughput_row(self, batch_size: int) -> dict[str, Any]:
        """A cell's throughput keys from its timed steps, as every framework's row has them: the step-time
        percentiles, the timer, samples/s over the steps and its noise."""
        return {**self.summary(), "timer": self.timer, "samples_per_s": batch_size * len(self.step_ms) / self.total_s,
                "samples_per_s_noise": self.throughput_noise()}

    def throughput_noise(self, blocks: int = NOISE_BLOCKS) -> float | None:
        """Relative standard deviation of the throughput of consecutive blocks of steps (None: too few steps for
        ``MIN_NOISE_BLOCKS`` blocks).

        Per-step spread overstates noise (one slow step is averaged out over a cell) and the standard
        error of the mean understates it (drift between cells is not independent step jitter); the
        spread of block throughputs sits between the two and catches drift within the cell, which is
        what makes two cells measured a minute apart disagree.
        """
        k = min(blocks, len(self.step_ms) // MIN_BLOCK_STEPS)
        if k < MIN_NOISE_BLOCKS:
            return None
        size = len(self.step_ms) // k
        rates = [size / sum(self.step_ms[i * size:(i + 1) * size]) for i in range(k)]
        return statistics.stdev(rates) / statistics.fmean(rates)


def time_host(fn: Callable[[], object], n: int, on_step: Callable[[int], None] | None = None) -> Timing:
    """Run ``fn`` n times, each timed by the host's clock (for calls that have finished their work when they return:
    a CPU step, a Keras ``train_on_batch`` returning its logs as numbers). ``on_step(i)`` after call i, its own time
    kept out of the next step's."""
    ms = []
    t = time.perf_counter()
    for i in range(n):
        fn()
        now = time.perf_counter()
        ms.append((now - t) * 1e3)
        if on_step is not None:
            on_step(i + 1)
            now = time.perf_counter()  # (the meter's own time is not the next step's)
        t = now
    return Timing(ms, math.fsum(ms) / 1e3, "perf_counter")


def latency_summary(t: Timing, batch_size: int, first_ms: float) -> dict[str, float]:
    """One inference batch size's entry: p50/p90/p99 ms, samples/s over the timed calls, the first call apart."""
    return {"p50_ms": percentile(t.step_ms, 50), "p90_ms": percentile(t.step_ms, 90), "p99_ms": percentile(t.step_ms, 99),
            "samples_per_s": batch_size * len(t.step_ms) / t.total_s, "first_ms": first_ms}


def latencies(forward_at: Callable[[int], Callable[[], object]], batch_sizes: list[int], iters: int, warmup: int,
              first_ms: Callable[[Callable[[], object]], float],
              timed: Callable[[Callable[[], object], int], Timing]) -> dict[str, dict[str, float]]:
    """Inference latency per batch size, as every framework measures it: the batch's forward (``forward_at(bs)``),
    its first call timed apart (``first_ms``), ``warmup - 1`` more untimed, then ``iters`` timed (``timed``: the
    framework's clock -- CUDA events, or the host's where a call has finished when it returns);
    {str(batch): :func:`latency_summary`}."""
    out: dict[str, dict[str, float]] = {}
    for bs in batch_sizes:
        forward = forward_at(bs)
        progress.report("inference", detail=f"batch {bs}")
        first = first_ms(forward)
        for _ in range(max(0, warmup - 1)):
            forward()
        out[str(bs)] = latency_summary(timed(forward, iters), bs, first)
    return out
