"""Step timing: CUDA events on the GPU (synchronised only at the ends), perf_counter on CPU.

Per-step CUDA events do not stall the GPU: each ``record`` is queued on the stream and all are read
after one final ``synchronize``. The total time is taken between the first and last events, so
per-step bookkeeping on the host does not count unless the GPU waited for it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import torch

from ampbench.measure.stats import Timing, percentile, time_host  # noqa: F401  (percentile: imported from here too)


def on_device(device: torch.device) -> contextlib.AbstractContextManager[Any]:
    """``device`` as the current CUDA device inside (a no-op off CUDA). ``torch.cuda.Event.record()`` records on the
    *current* device's stream (torch.cuda.Event docs: "Uses torch.cuda.current_stream() if no stream is specified"),
    and a one-process run never called set_device: with --device cuda:1, events were recorded on GPU 0's idle stream
    and timed the host's enqueueing. Every timing of a cell, of ``hw`` and of inference runs inside this."""
    # ("cuda" without an index is the current device already)
    return torch.cuda.device(device) if device.type == "cuda" and device.index is not None else contextlib.nullcontext()


def time_steps(fn: Callable[[], object], n: int, device: torch.device,
               on_step: Callable[[int], None] | None = None, meter: Any = None) -> Timing:
    """Run ``fn`` n times; per-call times and the total. GPU: CUDA events, one sync at the end. ``on_step(i)``
    after call i (a progress meter: it must not synchronise; on the GPU it sees the host's pace, which the
    queue keeps close to the device's). ``meter``: started after the synchronisation that opens the region (the caller
    stops it: :meth:`ampbench.measure.energy.EnergyMeter.finish`)."""
    if device.type == "cuda":
        with on_device(device):
            torch.cuda.synchronize(device)
            events = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
            if meter is not None:
                meter.start()
            events[0].record()
            for i in range(n):
                fn()
                events[i + 1].record()
                if on_step is not None:
                    on_step(i + 1)
            events[-1].synchronize()  # the only host-device sync of the timed region
            ms = [events[i].elapsed_time(events[i + 1]) for i in range(n)]
        return Timing(ms, events[0].elapsed_time(events[-1]) / 1e3, "cuda_events")
    return time_host(fn, n, on_step)


def captured(fn: Callable[[], object], calls: int, device: torch.device, warmup: int = 2) -> Callable[[], object]:
    """A CUDA graph of ``calls`` calls of ``fn`` (warmed up on a side stream first, as torch.cuda.graph's docs say):
    its replay, one launch for all of them -- a kernel shorter than a Python launch is timed, not its launch."""
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return graph.replay


def time_once(fn: Callable[[], object], device: torch.device) -> float:
    """Milliseconds of one call, synchronised before and after (the first, cold step)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - t) * 1e3
