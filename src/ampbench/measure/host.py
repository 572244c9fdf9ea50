"""Host memory of this process, without PyTorch: RSS and its high-water mark (what a CPU cell's peak is).

Linux lets a process reset its high-water mark (VmHWM) by writing "5" to /proc/self/clear_refs; where that is
not possible a sampling thread reads RSS instead. Used by PyTorch cells (:mod:`ampbench.measure.memory`) and by
framework cells that must not import torch (a Keras cell on TensorFlow or JAX).
"""

from __future__ import annotations

import re
import threading

import psutil


def _vm_hwm() -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            m = re.search(r"VmHWM:\s+(\d+) kB", f.read())
        return int(m.group(1)) * 1024 if m else None
    except OSError:
        return None


def _reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def rss() -> int:
    return int(psutil.Process().memory_info().rss)


class _RssSampler:
    """Fallback peak-RSS reader where VmHWM cannot be reset: samples every ``interval`` seconds."""

    def __init__(self, interval: float = 0.002) -> None:
        self.interval, self.peak = interval, rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        proc = psutil.Process()
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, int(proc.memory_info().rss))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.peak, rss())


class RssPeak:
    """Peak RSS growth over a baseline from :meth:`start` on (the kernel's high-water mark, or sampled)."""

    def __init__(self) -> None:
        self._sampler: _RssSampler | None = None
        self._base = 0

    def start(self, base: int | None = None) -> None:
        self._base = rss() if base is None else base
        if not _reset_hwm() or _vm_hwm() is None:
            self._sampler = _RssSampler()

    def restart(self) -> None:
        """Forget the high-water mark so far (the baseline stays): the peak from here on."""
        if self._sampler is not None:
            self._sampler.stop()
            self._sampler = None
        self.start(self._base)

    def growth(self) -> int:
        """Bytes the peak RSS grew by over the baseline (>= 0)."""
        top = self._sampler.stop() if self._sampler is not None else (_vm_hwm() or rss())
        self._sampler = None
        return max(0, top - self._base)
