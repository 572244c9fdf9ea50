"""Package namespaces imported on first use (PEP 562), so that ``import ampbench.pkg.mod`` runs only what ``mod``
needs: a Keras cell on TensorFlow or JAX reads the cell identity and the launch protocol without importing torch.

A package's ``__init__`` says ``__getattr__, __dir__ = exports(__name__, {"Name": "module", ...})``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def exports(package: str, names: dict[str, str],
            before: Callable[[], None] | None = None) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: ``names`` maps each public name to the submodule that defines it
    (relative to the package); ``before`` runs once before the first name is looked up (e.g. registrations)."""
    pending = before

    def __getattr__(name: str) -> Any:
        nonlocal pending
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if pending is not None:
            run, pending = pending, None
            run()
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)  # (looked up once)
        return value

    def __dir__() -> list[str]:
        return sorted(names)

    return __getattr__, __dir__
