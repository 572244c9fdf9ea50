"""One measurement scenario: a cell's sequence of measurements, written once for every framework.

:func:`measure_cell` is what a cell's process runs, whatever the framework: the row's identity, the framework's
setup (its device facts; a mode it cannot run refused), the workload built, the max-batch search first (its trials'
processes must not share the device with this cell's model), throughput and memory, convergence over seeds (averaged
here, a cell whose every seed diverged is ``diverged``), inference latency, the framework's closing facts -- and how
each way a cell can end becomes its status (``unsupported``, ``diverged``, ``oom``, ``error``). A framework provides
only the verbs (:class:`CellVerbs`): what building, a timed step, a convergence run or an inference pass is for it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ampbench import phases, progress
from ampbench.bench.cell_row import (
    add_warnings,
    base_row,
    record_failure,
    search_cell_max_batch,
    trial_failed,
    trial_fits,
)
from ampbench.cells import CellSpec
from ampbench.errors import AmpbenchError, TrainingDivergedError, UnsupportedPrecisionError
from ampbench.launch import turn
from ampbench.store.sqlite import utcnow


class OverBudget(RuntimeError):
    """The cell's peak memory exceeded ``--memory-budget``: the row's status is ``oom``."""


def check_budget(spec: CellSpec, peak: int | None, what: str = "memory") -> None:
    """Every framework's cell ends the same way over ``--memory-budget``: :class:`OverBudget` (the row keeps what was
    measured so far, its status oom; nothing more is measured)."""
    budget = spec.measure.memory_budget
    if budget is not None and peak is not None and peak > budget:
        raise OverBudget(f"{what} peak {peak / 2**20:,.0f} MiB > --memory-budget {budget / 2**20:,.0f} MiB")


@dataclass(frozen=True)
class EstimatedSteps:
    """What the run's estimate measures of one cell (:meth:`CellVerbs.estimate_steps`)."""

    build_s: float
    """Building the workload."""
    length: int
    """The workload's convergence length in steps, at the cell's batch."""
    step_s: float
    """One training step after the first."""
    first_s: float | None = None
    """The first step, counted apart where the framework traces and compiles its train function then (Keras); None
    where it is a step like the others."""
    eval_batches: int = 0
    """The batches one evaluation of the test split takes after each convergence seed (0 without one): a language
    model's test split can cost more than its training (hf:gpt2, 30 steps of 8: 103 batches, 15 s of 22)."""
    batch_size: int | None = None
    """The batch the step was timed at (the cell's, else its workload's): where the max-batch search starts; None
    where the framework does not say (its search is then not counted)."""


W = TypeVar("W")
"""A framework's workload (PyTorch's :class:`ampbench.workloads.Workload`, Keras's ``KerasWorkload``)."""
T = TypeVar("T")
"""What a framework's timed steps leave for inference and the closing facts (PyTorch's ``TrainStep``, a Keras model)."""


class CellVerbs(Generic[W, T]):
    """A framework's work for one cell, called by :func:`measure_cell` in the scenario's order. A framework overrides
    the verbs it has; the defaults do nothing (``open``, ``finish``, ``close``) or say the measure is not available.
    Typed by the framework's workload ``W`` and what its timed steps leave ``T`` (``TorchCell(CellVerbs[Workload,
    TrainStep])``): the scenario passes them from verb to verb without looking inside."""

    def open(self, spec: CellSpec, row: dict[str, Any]) -> contextlib.AbstractContextManager[Any]:
        """Set the cell's framework up and fill the device's facts in ``row``; raise to refuse the cell. Returns the
        context the measurements run in (a CUDA device made current)."""
        return contextlib.nullcontext()

    def build_ahead(self, spec: CellSpec) -> None:
        """Before the cell's turn (its process started while the previous cell measures: :mod:`ampbench.launch.turn`):
        build what needs no device and disturbs no measurement, for :meth:`build` to return. Default: nothing."""

    def build(self, spec: CellSpec, row: dict[str, Any]) -> W:
        """The cell's workload (its model sizes into ``row`` where the framework counts them)."""
        raise NotImplementedError

    def batch_size(self, workload: W) -> int:
        """The workload's own batch size (``--batch-size`` overrides it)."""
        raise NotImplementedError

    def metric_name(self, workload: W) -> str | None:
        raise NotImplementedError

    def throughput_memory(self, workload: W, spec: CellSpec, batch_size: int, row: dict[str, Any]) -> T:
        """Time the steps and measure the memory into ``row``; returns what :meth:`inference` runs (its model)."""
        raise AmpbenchError("this framework does not measure throughput")

    def converge(self, workload: W, spec: CellSpec, batch_size: int, row: dict[str, Any]) -> dict[str, Any]:
        """The convergence runs (``final_losses``, ``metrics``, ``diverged``, ``reasons`` per seed)."""
        raise AmpbenchError("this framework does not measure convergence")

    def inference(self, trained: T, workload: W, sizes: list[int], iters: int) -> dict[str, Any]:
        raise AmpbenchError("this framework does not measure inference")

    def finish(self, trained: T | None, row: dict[str, Any]) -> None:
        """The row's closing facts (its environment, the math its GEMMs ran in) where ``open`` did not fill them."""

    def close(self) -> None:
        """Release what the cell held (run whether it ended well or not)."""

    def is_oom(self, e: BaseException) -> bool:
        """Whether an exception the measurements raised is the device running out of memory."""
        return False

    # -- the jobs around the scenario: a max-batch trial, the run's estimate ------------------------------------------
    def trial_peak(self, spec: CellSpec, batch_size: int) -> tuple[int | None, int | None]:
        """A max-batch trial's work (:func:`run_trial`): the workload built afresh and ``maxbatch_trial_steps`` full
        steps at ``batch_size``; returns (the peak the fit rule reads, the device's memory -- None on a CPU). What it
        raises is the trial's: a miss where :meth:`is_oom` says so, else a failed trial."""
        raise AmpbenchError("this framework does not search the max batch")

    def estimate_process(self, spec: CellSpec) -> float:
        """Ready this process for the run's estimate (:func:`ampbench.bench.estimate.measure_steps`; every cell of the
        job is of this framework and ``spec``'s backend); the seconds it took that every fresh process of the
        framework's cells pays too (a backend's import), 0 where a cell pays nothing of it."""
        return 0.0

    def estimate_steps(self, spec: CellSpec) -> EstimatedSteps:
        """The estimate's measurement of one cell: its workload built (timed), its convergence length, one training
        step timed after a first one. What it raises leaves the cell out of the estimate."""
        raise AmpbenchError("this framework does not time steps for an estimate")


def run_trial(spec: CellSpec, batch_size: int, verbs: CellVerbs[Any, Any]) -> dict[str, Any]:
    """One max-batch trial (meant for a fresh process), whatever the framework: fits when nothing ran out of memory
    and the peak stays under (1 - margin) x the limit (GPU: the card's memory or --memory-budget; CPU: --memory-budget,
    required)."""
    progress.report("max batch", detail=f"trial at batch {batch_size}")
    try:
        used, total = verbs.trial_peak(spec, batch_size)
    except Exception as e:
        return trial_failed(e, verbs.is_oom(e))
    return trial_fits(spec, used, total)


def measure_cell(spec: CellSpec, verbs: CellVerbs[Any, Any], maxbatch_trial: Callable[[CellSpec, int], Any] | None = None,
                 throughput_at: Callable[[CellSpec, int], dict[str, Any]] | None = None) -> dict[str, Any]:
    """Measure one cell in this process through ``verbs``; its row (the status says how it ended).
    ``maxbatch_trial`` / ``throughput_at`` run the max-batch search's trials and its final throughput (the harness
    passes child-process versions)."""
    row = base_row(spec)
    with phases.clock() as clock:
        _measure_and_judge(spec, verbs, row, maxbatch_trial, throughput_at)
        row["phases_s"] = clock.stop()
    row["wall_s"] = phases.add_up(row["phases_s"])
    row["created_at"] = utcnow()
    return row


def _measure_and_judge(spec: CellSpec, verbs: CellVerbs[Any, Any], row: dict[str, Any],
                       maxbatch_trial: Callable[[CellSpec, int], Any] | None,
                       throughput_at: Callable[[CellSpec, int], dict[str, Any]] | None) -> None:
    """The measurements into ``row``, and how they ended as its status."""
    try:
        if turn.held():  # started before its turn: the host's work now, the device's once the previous cell has ended
            phases.enter("build", "building the workload (while the previous cell runs)")
            verbs.build_ahead(spec)
            phases.enter("waiting", "waiting for the previous cell to end", say=False, beat=False)
            turn.wait()
        phases.enter("open", "opening the device")
        with verbs.open(spec, row):
            row["status"] = "ok"  # a measurement may still say diverged; an exception below says otherwise
            _measure(spec, verbs, row, maxbatch_trial, throughput_at)
    except UnsupportedPrecisionError as e:
        row.update(status="unsupported", reason=str(e))
    except TrainingDivergedError as e:
        row.update(status="diverged", reason=str(e))
    except OverBudget as e:
        row.update(status="oom", reason=str(e))
    except AmpbenchError as e:
        row.update(status="error", reason=str(e))
    except Exception as e:
        record_failure(row, e, verbs.is_oom(e))
    finally:
        phases.enter("close", "releasing the device")
        verbs.close()


def _measure(spec: CellSpec, verbs: CellVerbs[W, T], row: dict[str, Any],
             maxbatch_trial: Callable[[CellSpec, int], Any] | None,
             throughput_at: Callable[[CellSpec, int], dict[str, Any]] | None) -> None:
    phases.enter("build", "building the workload")
    wl = verbs.build(spec, row)
    batch_size = spec.batch_size or verbs.batch_size(wl)
    row.update(batch_size=batch_size, metric_name=verbs.metric_name(wl))
    measures = set(spec.measures)
    if "maxbatch" in measures:  # first: the trials' processes must not share the device with this cell's model
        phases.enter("maxbatch", "max batch")
        keys, error = search_cell_max_batch(spec, batch_size, maxbatch_trial, throughput_at)
        add_warnings(row, keys.pop("warnings", None))
        row.update(keys)
        if error:  # (the trials so far stay in the row)
            raise AmpbenchError(f"maxbatch trial failed: {error}")
    trained: T | None = None
    if measures & {"throughput", "memory", "inference"}:
        phases.enter("setup", "setting up the model")
        trained = verbs.throughput_memory(wl, spec, batch_size, row)
    if "converge" in measures:
        phases.enter("converge", "convergence")
        conv = verbs.converge(wl, spec, batch_size, row)
        row["converge"] = conv
        finals = [x for x in conv["final_losses"] if math.isfinite(x)]
        row["final_loss"] = sum(finals) / len(finals) if finals else float("nan")
        metrics = [m for m in conv["metrics"] if m is not None]
        row["metric"] = sum(metrics) / len(metrics) if metrics else None
        if all(conv["diverged"]) and row["status"] != "diverged":  # (a throughput divergence already has its reason)
            row.update(status="diverged", reason="every converge seed diverged: " + next(
                (r for r in conv["reasons"] if r), "non-finite loss"))
    if "inference" in measures and trained is not None and row["status"] != "diverged":
        large = spec.measure.inference_batch or batch_size
        phases.enter("inference", "inference")
        row["inference"] = verbs.inference(trained, wl, sorted({1, large}), max(spec.measure.steps, 10))
    phases.enter("finish", "closing facts")
    verbs.finish(trained, row)
