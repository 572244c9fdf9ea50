"""Benchmark harness: plan cells, run each (in a child process when isolated), store every row at once.

What a cell is (its spec and key, and the identity rows are grouped by) is :mod:`ampbench.cells`, below the store
and the harness. Here: ``config`` what a run is (sections, checked once), ``jobs`` what launched processes run (each
cell through its framework, :mod:`ampbench.seam`), ``rows`` a cell's row for every framework, ``ranks`` a
distributed cell, ``estimate`` the run's expected length, ``runner`` the loop over cells with resume and the store.

Names are imported on first use (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"DEFAULT_MEASURES": "ampbench.cells", "MEASURES": "ampbench.cells", "CellSpec": "ampbench.cells",
            "CellId": "ampbench.cells", "RunConfig": "ampbench.bench.config", "CellEvent": "ampbench.bench.runner",
            "run": "ampbench.bench.runner"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'ampbench.bench' has no attribute {name!r}")
