"""The energy a GPU drew over the timed steps, from NVML (nvidia-ml-py): joules per sample and mean power.

NVML's total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``: millijoules since the driver loaded, Volta and
newer) is read right after the synchronisation that starts the timed region and right after the one that ends it.
Where the GPU has no such counter, a thread samples the board's power (``nvmlDeviceGetPowerUsage``, milliwatts) every
:data:`SAMPLE_S` and integrates it (trapezoids) over the same window. Neither is there on a CPU, without NVML or
without the driver's permission: then no energy is measured, and the row's columns stay null -- never zero.

Why our own meter rather than a library's: pynvml is the well-kept library here, and this is the ~60 lines that put
its two readings around exactly the timed region (codecarbon and zeus measure a whole program or a window of their
own, and are not on the offline GPU machine).
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from typing import Any

import torch

from ampbench.measure.env import nvml_handle

SAMPLE_S = 0.01
"""Seconds between power samples where the GPU has no energy counter."""
MIN_WINDOW_S = 2.0
"""The shortest window energy is read over: NVML's counter advances in steps (on the H200, windows of 0.6 s of one
cell's kernels read 549 and 698 W for amp-bf16 and amp-fp16, 4 % apart in speed); a cell whose timed steps are shorter
runs more of the same steps, untimed, inside the window (:meth:`EnergyMeter.finish`)."""


@dataclass(frozen=True)
class Energy:
    """What the GPU drew over a window: joules, the window's seconds and how it was read."""

    joules: float
    seconds: float
    source: str
    """``nvml energy counter`` or ``nvml power samples``."""

    @property
    def mean_power_w(self) -> float:
        return self.joules / self.seconds if self.seconds > 0 else float("nan")

    steps: int = 0
    """Training steps inside the window (the timed ones and those run to fill :data:`MIN_WINDOW_S`)."""

    def row(self, batch_size: int) -> dict[str, Any]:
        """The row's energy keys (``batch_size`` samples a step)."""
        samples = batch_size * self.steps
        return {"energy_j": self.joules, "joules_per_sample": self.joules / samples if samples else None,
                "mean_power_w": self.mean_power_w, "energy_window_s": self.seconds, "energy_steps": self.steps,
                "energy_source": self.source}


NO_ENERGY = {"energy_j": None, "joules_per_sample": None, "mean_power_w": None, "energy_window_s": None,
             "energy_steps": None, "energy_source": None}
"""The row's energy keys where none was measured (a CPU, no NVML)."""


class EnergyMeter:
    """Reads the GPU's energy between :meth:`start` and :meth:`stop` (:data:`NO_ENERGY` keys when it cannot)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.nvml: Any = None
        self.handle: Any = None
        self.why = ""
        self._t0 = 0.0
        self._e0: float | None = None
        self._samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.result: Energy | None = None
        """What :meth:`stop` read (None before it, or when nothing could be read)."""
        if device.type != "cuda":
            self.why = "not a GPU"
            return
        try:
            import pynvml  # nvidia-ml-py; lazy: pynvml
        except ImportError:
            self.why = "nvidia-ml-py not installed"
            return
        try:
            pynvml.nvmlInit()
            self.handle = nvml_handle(pynvml, device)
        except Exception as e:  # no driver, no permission: no energy, said so
            self.why = f"NVML unavailable: {e}"
            return
        self.nvml = pynvml

    @property
    def available(self) -> bool:
        return self.nvml is not None

    def _energy_mj(self) -> float | None:
        try:
            return float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        except Exception:  # (NVML_ERROR_NOT_SUPPORTED before Volta)
            return None

    def _power_w(self) -> float | None:
        try:
            return float(self.nvml.nvmlDeviceGetPowerUsage(self.handle)) / 1e3
        except Exception:
            return None

    def start(self) -> None:
        """Call right after the synchronisation that starts the region."""
        if not self.available:
            return
        self._e0 = self._energy_mj()
        self._t0 = time.perf_counter()
        if self._e0 is None:  # no counter: sample the power until stop()
            self._samples = []
            self._stop.clear()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._sample_once()
            self._thread.start()

    def _sample_once(self) -> None:
        p = self._power_w()
        if p is not None:
            self._samples.append((time.perf_counter(), p))

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self._sample_once()

    def stop(self, steps: int = 0) -> Energy | None:
        """Call right after the synchronisation that ends the region (``steps``: the training steps in it): the
        energy drawn since :meth:`start` (also kept as :attr:`result`)."""
        if not self.available:
            return None
        try:
            self.result = self._read(steps)
        finally:
            self.close()
        return self.result

    def finish(self, step: Any, steps: int, min_s: float = MIN_WINDOW_S) -> Energy | None:
        """End a window that :meth:`start` opened before ``steps`` calls of ``step`` (already synchronised): first
        more calls, untimed, until it has lasted ``min_s``, then synchronise and read. The energy a sample costs is
        then read over at least ``min_s`` of the same steps."""
        if not self.available:
            return None
        while time.perf_counter() - self._t0 < min_s:  # (the host runs ahead of the GPU: no sync per step)
            step()
            steps += 1
        torch.cuda.synchronize(self.device)
        return self.stop(steps)

    def _read(self, steps: int) -> Energy | None:
        seconds = time.perf_counter() - self._t0
        if self._e0 is not None:
            e1 = self._energy_mj()
            if e1 is None or e1 < self._e0:
                return None
            return Energy((e1 - self._e0) / 1e3, seconds, "nvml energy counter", steps)
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample_once()
        return _integrate(self._samples, steps)

    def close(self) -> None:
        if self.nvml is not None:
            with contextlib.suppress(Exception):
                self.nvml.nvmlShutdown()
            self.nvml = None


def _integrate(samples: list[tuple[float, float]], steps: int = 0) -> Energy | None:
    """Joules from (time, watts) samples by trapezoids (over ``steps`` training steps); None from fewer than two."""
    if len(samples) < 2:
        return None
    joules = sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in zip(samples, samples[1:]))
    return Energy(joules, samples[-1][0] - samples[0][0], "nvml power samples", steps)
