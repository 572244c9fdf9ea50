"""The package's layers, checked: no import cycle between modules, and each layer imports only what is below it.

Read from the source (every ``import`` and ``from ... import``, at module level or inside a function: a cycle
through a function-level import is still a cycle a maintainer has to think about), not from what happens to be
imported at run time.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "ampbench"


def _modules() -> dict[str, Path]:
    out = {}
    for p in SRC.rglob("*.py"):
        name = ".".join(p.relative_to(SRC.parent).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = p
    return out


MODULES = _modules()


def _imports() -> dict[str, set[tuple[str, str]]]:
    """module -> {(imported module, imported name)} for every ampbench import in its source."""
    graph: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ampbench"):
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    graph[name].add((sub, "") if sub in MODULES else (node.module, alias.name))
            elif isinstance(node, ast.Import):
                graph[name].update((a.name, "") for a in node.names if a.name.startswith("ampbench"))
    return graph


IMPORTS = _imports()


def _edges(name: str) -> set[str]:
    return {m for m, _ in IMPORTS[name] if m in MODULES and m != name}


def test_no_import_cycle_between_modules() -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in _edges(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(MODULES):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def _reaches(package: str) -> dict[str, set[str]]:
    return {m: {t for t in _edges(m) if not t.startswith(package)} for m in MODULES if m.startswith(package)}


def test_each_layer_imports_only_what_is_below_it() -> None:
    rules = {  # package -> packages it must never import
        "ampbench.distributed": ("ampbench.bench", "ampbench.launch", "ampbench.cli", "ampbench.report"),
        "ampbench.launch": ("ampbench.bench", "ampbench.precision", "ampbench.workloads", "ampbench.measure",
                            "ampbench.distributed", "ampbench.store", "ampbench.cli", "ampbench.report"),
        "ampbench.precision": ("ampbench.bench", "ampbench.launch", "ampbench.cli", "ampbench.workloads",
                               "ampbench.report", "ampbench.store"),
        "ampbench.workloads": ("ampbench.bench", "ampbench.launch", "ampbench.cli", "ampbench.precision",
                               "ampbench.report", "ampbench.store", "ampbench.distributed"),
        "ampbench.data": ("ampbench.workloads", "ampbench.bench", "ampbench.cli", "ampbench.precision"),
        "ampbench.store": ("ampbench.cli", "ampbench.report", "ampbench.launch"),
        "ampbench.report": ("ampbench.cli", "ampbench.launch", "ampbench.bench.runner", "ampbench.bench.cell"),
    }
    broken = {}
    for package, forbidden in rules.items():
        for module, targets in _reaches(package).items():
            bad = sorted(t for t in targets if any(t == f or t.startswith(f + ".") for f in forbidden))
            if bad:
                broken[module] = bad
    assert not broken, f"imports across the layers: {broken}"


def test_the_workload_registry_is_a_leaf() -> None:
    assert {t for t in _edges("ampbench.workloads.registry") if t.startswith("ampbench.workloads")} <= {
        "ampbench.workloads.base"}


def test_the_cli_uses_public_names_only() -> None:
    private = {(m, n) for c in MODULES if c.startswith("ampbench.cli") for m, n in IMPORTS[c]
               if not m.startswith("ampbench.cli") and (n.startswith("_") or any(p.startswith("_") for p in m.split(".")))}
    assert not private, f"the CLI imports private names: {sorted(private)}"


def test_a_cell_loop_that_assumes_no_framework() -> None:
    """The runner loops over cells, resumes and stores: what a cell runs (the PyTorch engine today, a Keras model
    later) comes from the job a launcher starts, not from the loop."""
    loop = {t for t in _edges("ampbench.bench.runner")}
    assert not any(t.startswith(("ampbench.precision.engine", "ampbench.measure.step", "ampbench.execution")) for t in loop)
