"""Statistics of measured step times (no PyTorch: every framework's cells summarise their steps with these)."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


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

    def throughput_noise(self, blocks: int = NOISE_BLOCKS) -> float | None:
        """Relative standard deviation of the throughput of consecutive blocks of steps (None: too few steps).

        Per-step spread overstates noise (one slow step is averaged out over a cell) and the standard
        error of the mean understates it (drift between cells is not independent step jitter); the
        spread of block throughputs sits between the two and catches drift within the cell, which is
        what makes two cells measured a minute apart disagree.
        """
        k = min(blocks, len(self.step_ms) // MIN_BLOCK_STEPS)
        if k < 2:
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
