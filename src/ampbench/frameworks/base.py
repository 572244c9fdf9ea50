"""What a framework is to ampbench: the :class:`Framework` interface every framework package implements.

The harness (plan, runner, jobs, estimate), the CLI, the store and the reports never name a framework: they ask
the registry (:mod:`ampbench.frameworks`) which framework a target, a cell or a row belongs to, and call it through
this interface. A framework package (``ampbench.frameworks.<name>``) exposes one object, ``FRAMEWORK``, that
satisfies it; importing the package must be cheap (no framework import: that happens in the cell's process).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


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
    """What a command was given, as a framework sees it: each option that some framework cannot take, by flag
    (``--strategy``: given or not), so a framework can refuse what it cannot do in one line."""

    given: dict[str, bool]


@runtime_checkable
class Framework(Protocol):
    """A framework ampbench measures: recognise its targets, check a config, and name the modules that run its
    cells, trials, validations, estimates, training and diagnosis (each in the process the launcher starts)."""

    name: str
    """The row's ``framework`` column (torch, keras)."""
    cell_module: str
    """Import path of the module a cell's process runs: ``run_cell(spec, maxbatch_trial=, throughput_at=)``,
    ``run_trial(spec, batch_size)``, ``validate(spec) -> {"error": ...}`` and ``measure_steps(payload)``."""
    own_process: bool
    """Its cells always run in a process of their own (a backend chosen before the framework is imported)."""
    backends: tuple[str, ...]
    """The backends it runs on (empty: none to choose); a cell's backend is stored as ``<name>_backend``."""
    backend_help: str
    """The help of its ``--<name>-backend`` option (frameworks with backends)."""

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

    def train_job(self) -> str | None:
        """``module:function`` that trains one of its models in a process of its own (payload: the cell and
        epochs/max_steps), or None when ``ampbench train`` runs in the command's process."""
        ...

    def diagnose_job(self) -> str | None:
        """``module:function`` that diagnoses one of its models in a process of its own, or None (in-process)."""
        ...

    def command_spec(self, backend: str | None, workload: str | None, model: str | None, precision: str,
                     preset: str | None, batch_size: int | None, device: str | None, seed: int, data: Any,
                     given: dict[str, bool]) -> Any:
        """The cell a ``train`` or ``diagnose`` of one of its targets runs in its own process, checked first (the
        options it cannot take: ``given``, flag -> given; the mode; the backend installed)."""
        ...

    def check_checks(self, wanted: tuple[str, ...], what: str) -> None:
        """One line for a diagnose check it cannot run on ``what``."""
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
