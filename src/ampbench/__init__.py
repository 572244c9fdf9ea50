"""ampbench: mixed precision training for PyTorch and Keras, done right and measured.

The public names below are imported on first use (PEP 562): ``import ampbench.x`` loads ``x`` and what it needs,
never torch for a module that does not use it (a Keras cell on TensorFlow or JAX runs without torch).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_PUBLIC = {
    "AmpbenchError": "ampbench.errors",
    "TrainingDivergedError": "ampbench.errors",
    "UnsupportedPrecisionError": "ampbench.errors",
    "LossScaleConfig": "ampbench.precision",
    "MixedPrecision": "ampbench.precision",
    "list_precisions": "ampbench.precision",
    "supported": "ampbench.precision",
    "Workload": "ampbench.workloads",
    "create_workload": "ampbench.workloads",
    "list_workloads": "ampbench.workloads",
}

__all__ = sorted([*_PUBLIC, "__version__"])


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'ampbench' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # (looked up once)
    return value


def __dir__() -> list[str]:
    return __all__
