"""Benchmark harness: plan cells, run each (in a child process when isolated), store every row at once.

Names are imported on first use (PEP 562): readers low in the stack (the store's derived ratios, reports) import
:mod:`ampbench.bench.cells` -- the cell identity -- without pulling in the runner, which imports them.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"run_cell": "cell", "DEFAULT_MEASURES": "plan", "MEASURES": "plan", "CellSpec": "plan", "RunConfig": "plan",
            "CellEvent": "runner", "run": "runner", "CellId": "cells"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"ampbench.bench.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'ampbench.bench' has no attribute {name!r}")
