"""Benchmark harness: plan cells, run each (in a child process when isolated), store every row at once."""

from ampbench.bench.cell import run_cell
from ampbench.bench.plan import DEFAULT_MEASURES, MEASURES, CellSpec, RunConfig
from ampbench.bench.runner import CellEvent, run

__all__ = ["DEFAULT_MEASURES", "MEASURES", "CellEvent", "CellSpec", "RunConfig", "run", "run_cell"]
