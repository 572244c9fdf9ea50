"""The frameworks ampbench measures, listed once: each is a package behind :class:`~ampbench.frameworks.base.Framework`.

Everything outside the framework packages (plan, runner, jobs, estimate, CLI, store, reports) asks this registry which
framework a target, a cell or a row belongs to, and never names one. Adding a framework is one package
(``ampbench/frameworks/<name>/`` with a ``FRAMEWORK`` object) and one line in :data:`FRAMEWORKS`
(docs/architecture.md, "Adding a framework").

Cheap to import: a framework package's ``__init__`` imports no framework (its cells import it, in their process).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from ampbench.frameworks.base import Framework, Options, WorkloadEntry

FRAMEWORKS = {"torch": "ampbench.frameworks.torch", "keras": "ampbench.frameworks.keras"}
"""name -> package; the first is the default (a target no other framework claims is a PyTorch model)."""
DEFAULT = next(iter(FRAMEWORKS))

__all__ = [
    "DEFAULT",
    "FRAMEWORKS",
    "Framework",
    "Options",
    "WorkloadEntry",
    "all_frameworks",
    "backend_key",
    "from_entries",
    "get",
    "of_cell",
    "of_command",
    "of_model",
    "of_workload",
    "resolve_backend",
    "row_keys",
]


def get(name: str | None) -> Framework:
    """The framework called ``name`` (None: the default)."""
    name = name or DEFAULT
    if name not in FRAMEWORKS:
        raise KeyError(f"unknown framework {name!r}; known: {', '.join(FRAMEWORKS)}")
    return importlib.import_module(FRAMEWORKS[name]).FRAMEWORK  # type: ignore[no-any-return]


def all_frameworks() -> list[Framework]:
    return [get(name) for name in FRAMEWORKS]


def _others() -> list[Framework]:
    return [get(name) for name in FRAMEWORKS if name != DEFAULT]


def of_workload(workload: str | None) -> Framework:
    """The framework of a registered workload (or adapter); the default for anything no other framework claims."""
    if workload is not None:
        for fw in _others():
            if fw.owns_workload(workload):
                return fw
    return get(DEFAULT)


def of_model(model: str, preset: str | None, seed: int, backend_given: str | None = None) -> Framework:
    """The framework of a ``--model`` factory: one with backends when a backend was given, or the first that
    recognises the model (its file's imports, else the object its factory returns), else the default."""
    for fw in _others():
        if fw.owns_model(model, preset, seed, backend_given is not None and bool(fw.backends)):
            return fw
    return get(DEFAULT)


def of_command(workload: str | None, model: str | None, backend_given: str | None, preset: str | None,
               seed: int) -> tuple[Framework, str | None]:
    """(framework, backend) of a ``train`` or ``diagnose`` target; a backend given for a framework without the
    target is one line."""
    fw = of_model(model, preset, seed, backend_given) if model is not None else of_workload(workload)
    return fw, resolve_backend(backend_given, {fw.name}, "this target is a PyTorch model")


def resolve_backend(given: str | None, owners: set[str], otherwise: str) -> str | None:
    """The backend the targets of ``owners`` (framework names) run on: each framework with backends resolves ``given``
    for its own targets (its default when not given); a backend given where no such framework has a target is one
    line ending in ``otherwise``."""
    backend = None
    for fw in all_frameworks():
        if fw.backends:
            backend = fw.backend(given, fw.name in owners, otherwise) or backend
    return backend


def backend_key(framework: str) -> str:
    """The key (and row column) a cell's backend is stored under: ``<framework>_backend`` (keras_backend), so stored
    keys and rows read the same whatever framework is added."""
    return f"{framework}_backend"


def key_entries(framework: str, backend: str | None) -> dict[str, Any]:
    """What a cell's framework adds to its key: nothing for the default framework; ``<framework>_backend`` for
    another (the key a Keras cell has always had)."""
    if framework == DEFAULT and backend is None:
        return {}
    return {backend_key(framework): backend}


def from_entries(d: Mapping[str, Any]) -> tuple[str, str | None]:
    """(framework, backend) of a flat cell dict or a stored row: its ``framework`` entry (with
    ``<framework>_backend``, or ``backend`` in a cell's full dict), or the framework whose ``<framework>_backend``
    entry it holds (keys never held ``framework``), else the default (rows from before the column)."""
    name = d.get("framework")
    if name in FRAMEWORKS:
        return name, d.get(backend_key(name), d.get("backend"))
    for other in FRAMEWORKS:
        if other != DEFAULT and d.get(backend_key(other)) is not None:
            return other, d[backend_key(other)]
    return DEFAULT, None


def of_cell(spec: Any) -> Framework:
    return get(spec.framework)


def row_types() -> dict[str, type]:
    """What each framework's row keys hold (the store validates rows by it)."""
    out: dict[str, type] = {}
    for fw in all_frameworks():
        out.update(fw.row_types())
    return out


def row_keys() -> dict[str, str]:
    """The row keys the frameworks add, each documented (the store's ROW_KEYS include them)."""
    out: dict[str, str] = {}
    for fw in all_frameworks():
        out.update(fw.row_keys())
    return out
