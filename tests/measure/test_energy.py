"""Energy over the timed steps: NVML's energy counter where the GPU has one, sampled power integrated where not, and
nothing (null, never zero) on a CPU or without NVML. A fake NVML (nvidia-ml-py's API) stands in for a GPU."""

from __future__ import annotations

import sys
import time
import types

import pytest
import torch

from ampbench.measure import energy
from ampbench.measure.energy import NO_ENERGY, Energy, EnergyMeter, _integrate


class FakeNVML(types.ModuleType):
    """nvidia-ml-py's calls the meter makes: a board drawing ``watts`` (its energy counter advancing with the clock,
    in millijoules), or without an energy counter (``counter=False``: NVML_ERROR_NOT_SUPPORTED, as before Volta)."""

    class NVMLError(Exception):
        pass

    def __init__(self, watts: float = 300.0, counter: bool = True) -> None:
        super().__init__("pynvml")
        self.watts, self.counter, self.t0, self.inits, self.shutdowns = watts, counter, time.perf_counter(), 0, 0

    def nvmlInit(self) -> None:
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        return "h"

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:
        return "h"

    def nvmlDeviceGetTotalEnergyConsumption(self, h: str) -> int:
        if not self.counter:
            raise self.NVMLError("Not Supported")
        return int((time.perf_counter() - self.t0) * self.watts * 1e3)

    def nvmlDeviceGetPowerUsage(self, h: str) -> int:
        return int(self.watts * 1e3)


@pytest.fixture
def fake(monkeypatch):  # type: ignore[no-untyped-def]
    def install(**kw: object) -> FakeNVML:
        nvml = FakeNVML(**kw)  # type: ignore[arg-type]
        monkeypatch.setitem(sys.modules, "pynvml", nvml)
        monkeypatch.setattr(energy, "nvml_handle", lambda pynvml, device: "h")
        return nvml
    return install


@pytest.mark.parametrize("counter", [True, False], ids=["energy counter", "power samples"])
def test_a_board_at_constant_power_draws_power_times_time(fake, counter: bool) -> None:  # type: ignore[no-untyped-def]
    nvml = fake(watts=300.0, counter=counter)
    meter = EnergyMeter(torch.device("cuda", 0))
    assert meter.available
    meter.start()
    time.sleep(0.25)
    e = meter.stop()
    assert e is meter.result and e is not None
    assert e.source == ("nvml energy counter" if counter else "nvml power samples")
    assert e.mean_power_w == pytest.approx(300.0, rel=0.05)
    assert e.joules == pytest.approx(300.0 * e.seconds, rel=0.05) and 0.2 < e.seconds < 1.0
    assert nvml.shutdowns == nvml.inits == 1  # (NVML closed again)
    e = Energy(e.joules, e.seconds, e.source, steps=5)
    row = e.row(batch_size=10)
    assert row["joules_per_sample"] == pytest.approx(e.joules / 50) and row["energy_source"] == e.source
    assert row["energy_steps"] == 5
    assert set(row) == set(NO_ENERGY)


def test_no_energy_on_a_cpu_or_without_nvml(fake, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    cpu = EnergyMeter(torch.device("cpu"))
    cpu.start()
    assert cpu.stop() is None and cpu.why == "not a GPU"
    monkeypatch.setitem(sys.modules, "pynvml", None)  # (import fails: nvidia-ml-py not installed)
    gpu = EnergyMeter(torch.device("cuda", 0))
    gpu.start()
    assert gpu.stop() is None and "not installed" in gpu.why
    assert all(v is None for v in NO_ENERGY.values())  # (null columns, never zero)


def test_a_counter_that_goes_backwards_is_no_reading(fake) -> None:  # type: ignore[no-untyped-def]
    nvml = fake()
    meter = EnergyMeter(torch.device("cuda", 0))
    meter.start()
    nvml.t0 += 10.0  # (a reset counter: an energy below the start's)
    assert meter.stop() is None


def test_a_short_timed_window_is_filled_with_the_same_steps_to_the_minimum(fake, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Timed steps shorter than MIN_WINDOW_S: more of the same steps run inside the window (the energy a sample costs
    is read over enough time for NVML's counter), and the row counts them all; a long window adds none."""
    fake(watts=250.0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    calls = []

    def step() -> None:
        calls.append(1)
        time.sleep(0.01)

    meter = EnergyMeter(torch.device("cuda", 0))
    meter.start()
    for _ in range(3):
        step()
    e = meter.finish(step, 3, min_s=0.3)
    assert e is not None and e.steps == len(calls) > 3 and e.seconds >= 0.3
    assert e.row(batch_size=4)["joules_per_sample"] == pytest.approx(e.joules / (4 * e.steps))
    calls.clear()
    meter = EnergyMeter(torch.device("cuda", 0))
    meter.start()
    time.sleep(0.05)
    e = meter.finish(step, 7, min_s=0.01)
    assert e is not None and e.steps == 7 and not calls


def test_power_samples_integrate_by_trapezoids() -> None:
    e = _integrate([(0.0, 100.0), (1.0, 300.0), (3.0, 300.0)])
    assert e == Energy(200.0 + 600.0, 3.0, "nvml power samples")  # (steps: the caller's)
    assert _integrate([(0.0, 100.0)]) is None


def test_a_cpu_cells_energy_columns_are_null_and_its_phases_add_up() -> None:
    """A CPU cell measured for real: its energy columns null (not zero), its phases each >= 0, adding up to its wall
    time, in the cell's order."""
    from ampbench.bench import CellSpec
    from ampbench.bench.jobs import run_cell

    row = run_cell(CellSpec.of(workload="tabular-mlp", model=None, preset="tiny", precision="fp32", batch_size=None,
                               device="cpu", measures=("throughput", "memory"), steps=3, warmup=2))
    assert row["status"] == "ok"
    assert {k: row[k] for k in NO_ENERGY} == NO_ENERGY
    phases = row["phases_s"]
    assert list(phases) == ["open", "build", "setup", "engine", "batches", "environment", "first_step", "memory_step",
                            "warmup",  # (an eager cell counts its FLOPs in its memory step: no flop_count)
                            "timed_steps", "after_steps", "finish", "close"]
    assert all(v >= 0 for v in phases.values()) and sum(phases.values()) == pytest.approx(row["wall_s"], abs=1e-9)
