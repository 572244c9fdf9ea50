"""The package's layers, checked: no import cycle between modules, and each layer imports only what is below it.

Read from the source (every ``import`` and ``from ... import``, at module level or inside a function: a cycle
through a function-level import is still a cycle a maintainer has to think about), not from what happens to be
imported at run time. Imports under ``if TYPE_CHECKING:`` are left out: they name types for the reader and the type
checker and never run (the seam's protocols type the layers above them so).
"""

from __future__ import annotations

import ast
import re
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
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                       and "TYPE_CHECKING" in ast.unparse(block.test) for n in ast.walk(block)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
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
        "ampbench.report": ("ampbench.cli", "ampbench.launch", "ampbench.bench.runner", "ampbench.frameworks.torch.cell"),
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


def test_no_module_imports_another_s_private_names() -> None:
    """A name with a leading underscore is its module's own: another module that needs it gets a public name."""
    private = sorted((c, m, n) for c in MODULES for m, n in IMPORTS[c]
                     if m != c and n.startswith("_") and not n.startswith("__"))
    assert not private, f"private names imported across modules: {private}"


def test_a_cell_loop_that_assumes_no_framework() -> None:
    """The runner loops over cells, resumes and stores: what a cell runs (the PyTorch engine today, a Keras model
    later) comes from the job a launcher starts, not from the loop."""
    loop = {t for t in _edges("ampbench.bench.runner")}
    assert not any(t.startswith(("ampbench.precision.engine", "ampbench.measure.step", "ampbench.execution")) for t in loop)


def _package(module: str) -> str:
    """The package a module belongs to (a package's ``__init__`` is its own package)."""
    return module if (SRC.parent / module.replace(".", "/") / "__init__.py").exists() else module.rpartition(".")[0]


def test_no_import_cycle_between_packages() -> None:
    """Packages import one another one way only (a cycle hidden by function-level imports is still a cycle): the
    cell identity (bench.cells) is below the store, evaluate lives in measure, ..."""
    graph: dict[str, set[str]] = defaultdict(set)
    for m in MODULES:
        for t in _edges(m):
            a, b = _package(m), _package(t)
            if a != b and not b.startswith(a + ".") and not a.startswith(b + "."):
                graph[a].add(b)

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            v = todo.pop()
            if v == goal:
                return True
            if v not in seen:
                seen.add(v)
                todo.extend(graph[v])
        return False

    cycles = sorted({tuple(sorted((a, b))) for a in list(graph) for b in graph[a] if reaches(b, a)})
    assert not cycles, f"packages importing each other: {cycles}"


FRAMEWORK_PACKAGES = ("ampbench.frameworks.torch", "ampbench.frameworks.keras")


def test_no_framework_is_named_outside_the_frameworks() -> None:
    """Outside ``ampbench.frameworks``, nothing imports a framework's package (the registry and its interface are
    what the harness, CLI, store and reports use), and no code asks whether a cell or target is Keras's."""
    imported = sorted((m, t) for m in MODULES if not m.startswith("ampbench.frameworks") for t in _edges(m)
                      if t.startswith(FRAMEWORK_PACKAGES))
    assert not imported, f"framework packages imported outside ampbench.frameworks: {imported}"
    named = []
    for m, path in MODULES.items():
        if m.startswith("ampbench.frameworks"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr.startswith("keras"):
                named.append((m, node.attr))
            if isinstance(node, ast.Name) and node.id.startswith(("keras", "is_keras")):
                named.append((m, node.id))
            if isinstance(node, ast.Compare) and "sys.modules" not in ast.unparse(node) and any(  # (a module loaded)
                    isinstance(c, ast.Constant) and c.value in ("keras", "torch") for c in [node.left, *node.comparators]):
                named.append((m, ast.unparse(node)))
    assert not named, f"framework decisions outside ampbench.frameworks: {sorted(set(named))}"


def test_the_frameworks_implement_the_interface() -> None:
    from ampbench import seam
    from ampbench.seam import Framework

    for fw in seam.all_frameworks():
        assert isinstance(fw, Framework), fw
        wanted = [*Framework.__annotations__, *(n for n, v in vars(Framework).items() if callable(v) and not n.startswith("_"))]
        missing = [name for name in wanted if not hasattr(fw, name)]
        assert not missing, (fw.name, missing)


def test_the_frameworks_modules_implement_their_protocols() -> None:
    """A framework's cell module and command module are its seam.CellRunner and seam.Commands (modules, as the type
    checker reads them): each of the protocol's methods a function with the protocol's parameters, in order."""
    import inspect

    from ampbench import seam

    for fw in seam.all_frameworks():
        for module, protocol in ((fw.cells(), seam.CellRunner), (fw.commands(), seam.Commands)):
            for name, method in vars(protocol).items():
                if name.startswith("_") or not callable(method):
                    continue
                wanted = list(inspect.signature(method).parameters)[1:]  # (less self)
                got = getattr(module, name, None)
                assert callable(got), (fw.name, module.__name__, name)
                assert len(inspect.signature(got).parameters) == len(wanted), (fw.name, module.__name__, name)


def test_every_command_function_stays_short() -> None:
    """A command parses, calls the library and renders: under 80 lines each (the rest lives in helpers or the
    library)."""
    long = []
    for m, path in MODULES.items():
        if not m.startswith("ampbench.cli"):
            continue
        for node in ast.parse(path.read_text()).body:
            command = isinstance(node, ast.FunctionDef) and any("command" in ast.unparse(d) for d in node.decorator_list)
            if command and node.end_lineno - node.lineno + 1 >= 80:  # type: ignore[attr-defined,operator]
                long.append((m, node.name, node.end_lineno - node.lineno + 1))  # type: ignore[attr-defined,operator]
    assert not long, f"command functions of 80 lines or more: {long}"


# -- function-level imports: only to defer a heavy package, and saying which -------------------------------------------

HEAVY = ("torch", "numpy", "keras", "tensorflow", "jax", "torchao", "transformers", "timm", "tensorboard", "pynvml",
         "matplotlib")
HEAVY_SUBMODULES = ("torch._dynamo", "torch.distributed.checkpoint", "torch.distributed.fsdp", "torch.utils.flop_counter")
LAZY_COMMENT = re.compile(r"#.*\blazy: ([\w., ]+)")


def _lazy_names() -> dict[str, dict[str, str]]:
    """package -> {name: module defining it} for the packages whose ``__init__`` imports names on first use (PEP 562)."""
    import ampbench
    import ampbench.bench
    import ampbench.execution
    import ampbench.workloads

    lazy = {"ampbench": dict(ampbench._PUBLIC), "ampbench.bench": dict(ampbench.bench._EXPORTS)}
    for pkg in (ampbench.execution, ampbench.workloads):
        lazy[pkg.__name__] = {k: f"{pkg.__name__}.{v}" for k, v in pkg._NAMES.items()}
    lazy["ampbench.workloads"]["*"] = "ampbench.workloads.factory"  # the first name looked up registers every family
    return lazy


def _targets(module: str, node: ast.Import | ast.ImportFrom, lazy: dict[str, dict[str, str]]) -> list[str]:
    """The modules an import statement loads (resolving relative imports and lazily exported names)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        parts = module.split(".") if MODULES[module].name == "__init__.py" else module.split(".")[:-1]
        base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
    out = []
    for a in node.names:
        if f"{base}.{a.name}" in MODULES:
            out.append(f"{base}.{a.name}")
        elif a.name in lazy.get(base, {}):
            out += [lazy[base][a.name], *([lazy[base]["*"]] if "*" in lazy[base] else [])]
        else:
            out.append(base)
    return out


def _module_level_imports(module: str, lazy: dict[str, dict[str, str]]) -> set[str]:
    """What importing ``module`` runs: its module-level imports (``if TYPE_CHECKING:`` blocks excluded)."""
    out: set[str] = set()

    def walk(body: list[ast.stmt]) -> None:
        for n in body:
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                out.update(_targets(module, n, lazy))
            elif isinstance(n, ast.If) and "TYPE_CHECKING" not in ast.unparse(n.test):
                walk(n.body)
                walk(n.orelse)
            elif isinstance(n, ast.Try):
                for block in (n.body, *(h.body for h in n.handlers), n.orelse, n.finalbody):
                    walk(block)

    walk(ast.parse(MODULES[module].read_text()).body)
    return out


def _heavy_closure(start: str, top: dict[str, set[str]]) -> set[str]:
    """The heavy packages importing ``start`` loads (through ampbench modules' module-level imports and parents)."""
    seen, todo, heavy = set(), [start], set()
    while todo:
        x = todo.pop()
        if x in seen:
            continue
        seen.add(x)
        todo += [p for p in (".".join(x.split(".")[:i]) for i in range(1, x.count(".") + 1)) if p in MODULES]
        if x in MODULES:
            todo += top[x]
        else:
            heavy.update(h for h in (*HEAVY, *HEAVY_SUBMODULES) if x == h or x.startswith(h + "."))
    return heavy | ({"numpy"} if "torch" in heavy else set())  # (torch imports numpy)


def test_function_level_imports_defer_a_heavy_package_and_say_which() -> None:
    """An import inside a function is there to keep a heavy package (torch, numpy, keras, tensorflow, ...) out of a
    module that does not need it at import time -- the CLI starts without torch, a Keras cell on TensorFlow runs
    without it -- and its comment says which (``# lazy: torch``). Any other import belongs at the top of the module."""
    lazy = _lazy_names()
    top = {m: _module_level_imports(m, lazy) for m in MODULES}
    own = {m: _heavy_closure(m, top) for m in MODULES}
    needless, unsaid = [], []
    for m, path in MODULES.items():
        lines = path.read_text().splitlines()
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                deferred = set().union(*(_heavy_closure(t, top) for t in _targets(m, node, lazy))) - own[m]
                where = f"{m}:{node.lineno} {ast.unparse(node)}"
                if not deferred:
                    needless.append(where)
                    continue
                above = lines[node.lineno - 2].strip()
                said = [LAZY_COMMENT.search(x) for x in (lines[node.lineno - 1], lines[node.end_lineno - 1],
                                                          above if above.startswith("#") else "")]
                named = {w.strip() for m_ in said if m_ for w in m_.group(1).split(",")}
                if "torch" in deferred:
                    deferred -= {"numpy"}  # (implied)
                if named != deferred:
                    unsaid.append(f"{where}: defers {sorted(deferred)}, says {sorted(named)}")
    assert not needless, "function-level imports that defer no heavy package (move them up):\n" + "\n".join(needless)
    assert not unsaid, "function-level imports whose `# lazy: ...` comment is missing or wrong:\n" + "\n".join(unsaid)


def test_the_command_line_starts_without_torch() -> None:
    """``ampbench --help`` and every bad-input error come back without importing torch or numpy (read in a fresh
    interpreter)."""
    import subprocess
    import sys

    code = "import sys, ampbench.cli; print(sorted(m for m in ('torch', 'numpy', 'keras') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


def test_the_package_holds_the_product_and_not_its_checks() -> None:
    """References, fitting and the checks on our GPU runs read files only a checkout has (references/,
    benchmarks/results/): they live in predict_checks/, beside the tests, which the product never imports."""
    src = Path(__file__).resolve().parents[1] / "src" / "ampbench"
    for path in src.rglob("*.py"):
        text = path.read_text()
        assert "import predict_checks" not in text and "from predict_checks" not in text, path
        assert '"benchmarks" / "results"' not in text and '/ "references" /' not in text, path
    left = {p.stem for p in (src / "predict").glob("*.py")} & {"references", "compile_references", "fit", "neusight",
                                                                "measured", "llama3", "fsdp_references",
                                                                "fp8_step_references"}
    assert not left, left


def test_the_options_a_framework_may_refuse_are_declared_once() -> None:
    """seam.Options is the one list of options some framework cannot take: each field has its flag (FLAGS), and Keras
    -- whose own workloads take none of them (a Keras --model takes --data-dir) -- a reason for each; a command names
    them by keyword, so a misspelt one fails."""
    import dataclasses

    import pytest

    from ampbench.errors import AmpbenchError
    from ampbench.frameworks.keras.policy import TORCH_ONLY, refuse_torch_only
    from ampbench.seam import FLAGS, Options

    fields = [f.name for f in dataclasses.fields(Options)]
    assert list(FLAGS) == fields and set(TORCH_ONLY) == set(fields)
    assert Options().given() == [] and Options(trace=True, strategy=True).given() == ["strategy", "trace"]
    with pytest.raises(TypeError):
        Options(stratgey=True)  # type: ignore[call-arg]
    refuse_torch_only("x", Options())
    with pytest.raises(AmpbenchError, match=r"^--fp8-skip/--fp8-filter is a PyTorch option: fp8 runs through"):
        refuse_torch_only("x", Options(fp8=True))
