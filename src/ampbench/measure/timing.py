"""Step timing: CUDA events on the GPU (synchronised only at the ends), perf_counter on CPU.

Per-step CUDA events do not stall the GPU: each ``record`` is queued on the stream and all are read
after one final ``synchronize``. The total time is taken between the first and last events, so
per-step bookkeeping on the host does not count unless the GPU waited for it.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch


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


def time_steps(fn: Callable[[], object], n: int, device: torch.device,
               on_step: Callable[[int], None] | None = None) -> Timing:
    """Run ``fn`` n times; per-call times and the total. GPU: CUDA events, one sync at the end. ``on_step(i)``
    after call i (a progress meter: it must not synchronise; on the GPU it sees the host's pace, which the
    queue keeps close to the device's)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        events = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
        events[0].record()
        for i in range(n):
            fn()
            events[i + 1].record()
            if on_step is not None:
                on_step(i + 1)
        events[-1].synchronize()  # the only host-device sync of the timed region
        ms = [events[i].elapsed_time(events[i + 1]) for i in range(n)]
        return Timing(ms, events[0].elapsed_time(events[-1]) / 1e3, "cuda_events")
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


def time_once(fn: Callable[[], object], device: torch.device) -> float:
    """Milliseconds of one call, synchronised before and after (the first, cold step)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - t) * 1e3
