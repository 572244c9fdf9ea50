"""The framework seam: the :class:`Framework` interface every framework implements, and the registry that says which
framework a target, a cell or a row belongs to.

The harness (plan, runner, jobs, estimate), the CLI, the store and the reports never name a framework: they ask this
registry and call the framework through its interface. It sits low (it imports no ampbench module): the
implementations (``ampbench.frameworks.<name>``, one object ``FRAMEWORK`` each) are above the harness and import it
freely; this module loads a framework's package by name, on first use, and nothing else imports one. Adding a
framework is one package and one line in :data:`FRAMEWORKS` (docs/architecture.md, "Adding a framework"). Importing a
framework package must be cheap: the framework itself (keras, a backend) is imported in the cell's process.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # (types only: this module imports no ampbench module when it runs)
    from ampbench.bench.scenario import CellVerbs
    from ampbench.cells import CellSpec
    from ampbench.command_requests import DiagnoseRequest, TrainRequest
    from ampbench.diagnose import Diagnosis


@dataclass(frozen=True)
class WorkloadEntry:
    """One line of ``ampbench list``: a workload a framework brings."""

    name: str
    description: str
    paper: str
    data: str
    """What ``--data-dir`` accepts."""
    options: str = "-"
    """The workload's own options (``--option``)."""


@dataclass(frozen=True)
class Options:
    """What a command was given of the options some framework cannot take, one field each (made by keyword: a name
    that is not an option fails where it is written), so a framework refuses what it cannot do in one line naming the
    flag (:data:`FLAGS`). ``run``, ``train`` and ``diagnose`` fill the fields their command lines have."""

    execution: bool = False
    """run's execution axes: --compile, --memory-format, --cuda-graphs, --checkpointing."""
    compile: bool = False
    """train's --compile."""
    strategy: bool = False
    loss_scale: bool = False
    data_dir: bool = False
    option: bool = False
    """--option (a workload's own options)."""
    checkpoint: bool = False
    """train's --checkpoint or --resume."""
    fp8: bool = False
    """--fp8-skip or --fp8-filter."""
    tensorboard: bool = False
    trace: bool = False
    optimizer_state: bool = False
    grad_accum: bool = False
    """train's --grad-accum."""
    max_grad_norm: bool = False
    """train's --max-grad-norm."""
    checkpointing: bool = False
    """train's --checkpointing."""

    def given(self) -> list[str]:
        """The fields given, in the order of :data:`FLAGS` (the command line's)."""
        return [name for name in FLAGS if getattr(self, name)]


FLAGS = {"execution": "--compile/--memory-format/--cuda-graphs/--checkpointing", "compile": "--compile", "strategy": "--strategy",
         "loss_scale": "--loss-scale", "data_dir": "--data-dir", "option": "--option",
         "checkpoint": "--checkpoint/--resume", "fp8": "--fp8-skip/--fp8-filter", "tensorboard": "--tensorboard",
         "trace": "--trace", "optimizer_state": "--optimizer-state", "grad_accum": "--grad-accum",
         "max_grad_norm": "--max-grad-norm", "checkpointing": "--checkpointing"}
"""Each :class:`Options` field as the command line spells it."""


class CellRunner(Protocol):
    """What measures a cell in the cell's own process (a framework's cell module): the framework's verbs for a cell
    (the harness runs through them the scenario, a max-batch trial and the run's estimate: :mod:`ampbench.bench.jobs`,
    :func:`ampbench.bench.estimate.measure_steps`) and a validation build."""

    def verbs(self, spec: CellSpec) -> CellVerbs[Any, Any]: ...

    def validate(self, spec: CellSpec) -> dict[str, Any]: ...


class TrainView(Protocol):
    """Where ``ampbench train`` shows a framework's training as it runs (the command's console; nothing in a
    library call). Plain text: the view styles it."""

    quiet: bool
    """Set by a framework in a process that must not print (a torchrun rank other than 0)."""

    def begin(self, name: str, about: str, precision: str) -> None:
        """The target (``name``, what it is) and the mode, before the first step."""
        ...

    def note(self, text: str) -> None:
        """A remark on how it trains (e.g. compiled by default)."""
        ...

    def step(self, epoch: str, step: int, steps: int, info: str) -> None:
        """Step ``step`` of ``steps`` of an epoch (``epoch`` like "2/5"), ``info`` the loss, scale and speed."""
        ...

    def event(self, text: str) -> None:
        """A line as training goes (an epoch's end, evaluating)."""
        ...

    def done(self) -> None:
        """Training ended (the live display, if any, stops)."""
        ...


@dataclass(frozen=True)
class TrainOutcome:
    """What ``ampbench train`` prints and writes of a finished training."""

    summary: str
    """The result's line (metrics, final loss, samples/s, steps, skipped steps)."""
    data: dict[str, Any]
    """What ``--json`` writes."""
    warnings: tuple[str, ...] = ()
    exit_code: int | None = None
    """Set when the training ran in other processes whose exit code is the command's (torchrun's ranks)."""
    error: str | None = None
    """Training failed where no one-line refusal could say so (its process died): the command exits 1."""


class Commands(Protocol):
    """A framework's ``train`` and ``diagnose`` verbs (its command module, imported when a command runs one)."""

    def train_plan(self, request: TrainRequest) -> Any:
        """The request checked for this framework -- the options it cannot take refused in one line -- before any
        data is built; returns what :meth:`train` runs (the framework's own: a PyTorch TrainConfig, a Keras cell)."""
        ...

    def train(self, request: TrainRequest, plan: Any, view: TrainView) -> TrainOutcome:
        """Train the request's target by ``plan``, showing its progress on ``view``; the result as the command
        prints and writes it."""
        ...

    def diagnose_plan(self, request: DiagnoseRequest) -> Any:
        """The request checked for this framework (the checks it cannot run refused)."""
        ...

    def diagnose(self, request: DiagnoseRequest, plan: Any, trace: Path | None,
                 progress: Callable[[str], None] | None = None) -> Diagnosis:
        """The request's diagnosis; ``trace``: where the profile check writes its Chrome trace; ``progress``: a line
        as each check starts and ends, where the framework can say (a check runs for minutes on a slow device)."""
        ...


@dataclass(frozen=True)
class ForkServer:
    """How a framework's cells on one device get their processes: forked from a server that imported ``modules``
    once (:class:`ampbench.launch.Forked`), with ``env`` set before those imports -- what the framework reads once,
    at import, and every cell would set first itself (Keras's backend, the devices it may see)."""

    modules: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    warm: tuple[str, ...] = ()
    """Modules imported after ``modules`` where a child forked after them can still use CUDA (each cell would import
    them itself: torch._dynamo, which torch.optim's first optimizer imports -- 3.4-5.3 s a cell on the lent H200);
    dropped, the server started again without them, where they would not (:func:`ampbench.launch.zygote.main`)."""


@runtime_checkable
class Framework(Protocol):
    """A framework ampbench measures: recognise its targets, check a config, give its cell module (the verbs of
    the measurement scenario), and train and diagnose one of its models (in the command's process or one of its
    own: the framework's choice, invisible to the command)."""

    name: str
    """The row's ``framework`` column (torch, keras)."""
    cell_module: str
    """Import path of its :class:`CellRunner` module, which a fork server imports ahead of the cells it forks; in the
    cell's own process :meth:`cells` gives it typed."""
    own_process: bool
    """Its cells always run in a process of their own (a backend chosen before the framework is imported)."""
    backends: tuple[str, ...]
    """The backends it runs on (empty: none to choose); a cell's backend is stored as ``<name>_backend``."""
    backend_help: str
    """The help of its ``--<name>-backend`` option (frameworks with backends)."""
    predicted: bool
    """``ampbench predict`` traces its training steps (PyTorch's: the step traced on meta as CUDA runs it)."""

    def cells(self) -> CellRunner:
        """Its cell module, imported now (in the cell's process: a backend is chosen before the framework loads)."""
        ...

    def owns_workload(self, workload: str) -> bool:
        """Whether ``workload`` (a registered name) is one of this framework's."""
        ...

    def owns_model(self, model: str, preset: str | None, seed: int, backend_given: bool) -> bool:
        """Whether the ``--model`` factory ``model`` makes this framework's model (``backend_given``: the command
        named a backend of this framework)."""
        ...

    def backend(self, given: str | None, owned: bool, otherwise: str) -> str | None:
        """The backend its targets run on: ``given`` (checked) or its default; None when the command has no target of
        this framework (then a given backend is one line ending in ``otherwise``)."""
        ...

    def missing(self, backend: str | None) -> str | None:
        """Why ``backend`` cannot run here (not installed: the extra to install), or None."""
        ...

    def fork_server(self, device: str, backend: str | None) -> ForkServer | None:
        """What a fork server for its cells on ``device`` (and ``backend``) preloads, or None where each cell must
        start a fresh interpreter (an import that touches the GPU: a fork after it is undefined)."""
        ...

    def check(self, what: str, precisions: tuple[str, ...] | list[str], options: Options) -> None:
        """One line (AmpbenchError) for a mode it has no recipe for, or an option it cannot take, for ``what``."""
        ...

    def precisions(self, modes: tuple[str, ...]) -> tuple[str, ...]:
        """The default modes of a run with one of its targets: those of ``modes`` it has a recipe for."""
        ...

    def workloads(self) -> list[WorkloadEntry]:
        """The workloads it brings, for ``ampbench list``."""
        ...

    def describe(self, backend: str | None) -> str:
        """How tables name a cell of this framework on ``backend`` (torch, keras/tensorflow)."""
        ...

    def setting(self, backend: str | None) -> str | None:
        """How a report names its cells' setting in place of PyTorch's execution axes, or None to show those."""
        ...

    def commands(self) -> Commands:
        """Its ``train`` and ``diagnose`` verbs, imported now (a command's process: the framework may load)."""
        ...

    def diagnose_checks(self) -> tuple[str, ...] | None:
        """The diagnose checks it runs (None: every check)."""
        ...

    def row_keys(self) -> dict[str, str]:
        """The row keys only its rows fill, each with its documentation (merged into the store's ROW_KEYS)."""
        ...

    def row_types(self) -> dict[str, type]:
        """What each of its row keys holds when not null (str, int, bool, float): the store validates rows by it."""
        ...


FRAMEWORKS = {"torch": "ampbench.frameworks.torch", "keras": "ampbench.frameworks.keras"}
"""name -> package; the first is the default (a target no other framework claims is a PyTorch model)."""
DEFAULT = next(iter(FRAMEWORKS))

__all__ = [
    "DEFAULT",
    "FLAGS",
    "FRAMEWORKS",
    "CellRunner",
    "Commands",
    "Framework",
    "Options",
    "TrainOutcome",
    "TrainView",
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


def of_cell(spec: CellSpec) -> Framework:
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
