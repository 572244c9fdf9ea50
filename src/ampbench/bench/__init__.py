"""Benchmark harness: plan cells, run each (in a child process when isolated), store every row at once.

``cells`` says what a cell is (its spec and key, and the identity rows are grouped by), ``config`` what a run is
(sections, checked once), ``cell`` measures one cell in this process, ``jobs`` is what launched processes run,
``ranks`` a distributed cell, ``runner`` the loop over cells with resume and the store.

Names are imported on first use (PEP 562): readers low in the stack (the store's derived ratios, reports) import
:mod:`ampbench.bench.cells` -- the cell identity -- without pulling in the runner, which imports them.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"run_cell": "cell", "DEFAULT_MEASURES": "cells", "MEASURES": "cells", "CellSpec": "cells", "CellId": "cells",
            "RunConfig": "config", "CellEvent": "runner", "run": "runner"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"ampbench.bench.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'ampbench.bench' has no attribute {name!r}")
