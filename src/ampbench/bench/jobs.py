"""What a launched process runs for the harness (the targets of :class:`ampbench.launch.Job`): a cell, one
max-batch trial, a throughput measurement at a batch size, a validation -- in a child process -- and a cell or a
trial on one torchrun rank. Each takes the JSON payload the parent wrote and returns a JSON-able dict.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ampbench import seam
from ampbench.bench.scenario import CellVerbs, measure_cell, run_trial
from ampbench.cells import CellSpec
from ampbench.launch import ChildProcess, Forked, Job
from ampbench.measure.maxbatch import Trial

HERE = "ampbench.bench.jobs"


def job(kind: str, spec: CellSpec, **extra: Any) -> Job:
    """The job running ``kind`` (a function of this module) for ``spec``."""
    return Job(f"{HERE}:{kind}", {"spec": spec.to_dict(), **extra})


def _spec(payload: dict[str, Any]) -> CellSpec:
    return CellSpec.from_dict(payload["spec"])


def launcher(spec: CellSpec, timeout: float | None) -> ChildProcess | Forked:
    """How an isolated cell (or its validation) gets its process: forked from a fork server that imported its
    framework once (a fresh process, CUDA context and allocator per cell, ~4 s of imports saved a cell on the lent
    H200's host; a Keras CPU cell's server imported keras on the cell's backend), or -- where the framework says a
    fork would not be clean (:meth:`ampbench.seam.Framework.fork_server`: Keras on a GPU) -- started fresh."""
    server = seam.of_cell(spec).fork_server(spec.device, spec.backend)
    if server is None:
        return ChildProcess(timeout)
    return Forked((HERE, *server.modules), timeout, env=server.env, warm=server.warm)


def trial_of(result: dict[str, Any], batch_size: int) -> Trial:
    """A trial's result as the search reads it; a child killed by the OS mid-trial most likely ran out of host
    memory (a miss), any other death stops the search."""
    if "_failed" in result:
        return Trial(batch_size, False, None, result["_failed"], failed=not result.get("_killed", False))
    return Trial(batch_size, bool(result["fits"]), result.get("peak_bytes"), result.get("reason", ""),
                 bool(result.get("failed", False)))


def isolated_trial(spec: CellSpec, batch_size: int, timeout: float | None = None) -> Trial:
    """One max-batch trial in a process of its own (a CUDA OOM cannot fragment the allocator for the next), forked
    from a fork server as a cell is (:func:`launcher`): a fresh interpreter per trial paid torch's imports each time
    -- 16 trials of a small MLP's CPU search took 64 s, ~4 s each, nearly all of it imports."""
    return trial_of(launcher(spec, timeout).run(job("trial", spec, batch_size=batch_size)), batch_size)


def isolated_throughput_at(spec: CellSpec, batch_size: int, timeout: float | None = None) -> dict[str, Any]:
    """The throughput at the batch the search found, in a process of its own (forked as a trial is)."""
    return _ok(launcher(spec, timeout).run(job("throughput", spec, batch_size=batch_size)))


def _ok(result: dict[str, Any]) -> dict[str, Any]:
    return {} if "_failed" in result else result


def framework(spec: CellSpec) -> seam.CellRunner:
    """What measures the cell in this process (``verbs``, ``validate``): its framework's cell
    module (:meth:`ampbench.seam.Framework.cells`), imported here, in the cell's process (a backend is chosen there)."""
    return seam.of_cell(spec).cells()


def verbs(spec: CellSpec) -> CellVerbs[Any, Any]:
    """The cell's verbs, from its framework's cell module (what the scenario, a trial and the estimate run through)."""
    return framework(spec).verbs(spec)


def run_cell(spec: CellSpec, maxbatch_trial: Callable[[CellSpec, int], Trial] | None = None,
             throughput_at: Callable[[CellSpec, int], dict[str, Any]] | None = None) -> dict[str, Any]:
    """Measure one cell in this process, whatever its framework: the scenario (:func:`~ampbench.bench.scenario.
    measure_cell`) through the framework's verbs; the row (its status says how it ended). ``maxbatch_trial`` /
    ``throughput_at`` run the max-batch search's trials and its final throughput (child-process ones from here)."""
    return measure_cell(spec, verbs(spec), maxbatch_trial, throughput_at)


def cell(payload: dict[str, Any]) -> dict[str, Any]:
    """A cell, in its own process, measuring all but a max-batch search: the run searches once this process has ended,
    from its own (:func:`~ampbench.bench.cell_row.search_after`: its trials fork from the run's fork server)."""
    return run_cell(_spec(payload))


def trial(payload: dict[str, Any]) -> dict[str, Any]:
    spec = _spec(payload)
    return run_trial(spec, int(payload["batch_size"]), verbs(spec))


def throughput(payload: dict[str, Any]) -> dict[str, Any]:
    spec = _spec(payload)
    return run_cell(spec.measuring(("throughput",), int(payload["batch_size"])))


def validate_job(specs: list[CellSpec]) -> Job:
    """The job validating ``specs`` (one framework and backend: one process builds them all, in order)."""
    return Job(f"{HERE}:validate", {"specs": [s.to_dict() for s in specs]})


def validate(payload: dict[str, Any]) -> dict[str, Any]:
    """The cells' inputs checked by building them: {"error": one line or ""} for ``payload["spec"]``, or
    {"results": [that, ...]} for ``payload["specs"]`` (a Keras cell adds its warnings, policy, optimizer, weight count
    and layer dtypes)."""
    if "specs" in payload:
        return {"results": [_validate(CellSpec.from_dict(d)) for d in payload["specs"]]}
    return _validate(_spec(payload))


def _validate(spec: CellSpec) -> dict[str, Any]:
    return framework(spec).validate(spec)


def rank_cell(payload: dict[str, Any]) -> dict[str, Any]:
    """A distributed cell on one rank (torchrun; the process group joined): measured like a one-process cell on
    the rank's device, with its own batches."""
    import torch.distributed as dist  # lazy: torch

    if payload.get("crash_rank") == dist.get_rank():  # tests: a rank that dies mid-cell (SIGKILL, as the OOM killer)
        os.kill(os.getpid(), 9)
    spec = replace(_spec(payload), device=payload["device"])
    return run_cell(spec)


def rank_trial(payload: dict[str, Any]) -> dict[str, Any]:
    """One max-batch trial on one rank."""
    spec = replace(_spec(payload), device=payload["device"])
    return run_trial(spec, int(payload["batch_size"]), verbs(spec))

