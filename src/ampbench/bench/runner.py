"""Run a plan: every cell in turn, each row committed to the store the moment it is done.

``kill -9`` of the run loses only the cell in flight; ``resume=True`` continues the latest run
with the same options and runs only the cells it has no row for.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from ampbench import phases, progress, seam
from ampbench.bench.cell_row import base_row, search_after, without_search
from ampbench.bench.config import RunConfig
from ampbench.bench.jobs import framework, isolated_throughput_at, isolated_trial, job, launcher, run_cell, trial_of, validate_job
from ampbench.bench.ranks import run_cell_distributed
from ampbench.cells import CellSpec
from ampbench.distributed.strategy import check_reduce_dtype, layout
from ampbench.errors import AmpbenchError
from ampbench.launch import Forked, Inline, Started
from ampbench.measure.env import device_name
from ampbench.measure.maxbatch import Trial
from ampbench.precision import get
from ampbench.store.derive import derive
from ampbench.store.sqlite import RunInfo, Store, utcnow


@dataclass
class CellEvent:
    """Progress callback payload: ``phase`` is "start", "progress" (inside the cell: ``progress`` says what runs),
    "skip" (already stored) or "done" (``row``)."""

    phase: str
    index: int
    total: int
    spec: CellSpec
    row: dict[str, Any] | None = None
    progress: progress.Event | None = None


def inprocess_trial(spec: CellSpec, batch_size: int) -> Trial:
    return trial_of(Inline().run(job("trial", spec, batch_size=batch_size)), batch_size)


def execute(spec: CellSpec, isolate: bool, timeout: float | None = None, node_rank: int = 0,
            endpoint: str | None = None) -> dict[str, Any]:
    """One cell's row: in a child process when ``isolate`` (trials of maxbatch always are, on GPU); a
    distributed cell in ``nproc`` ranks started by torchrun (always isolated; ``node_rank``/``endpoint``
    with several machines)."""
    if spec.strategy is not None:
        t0 = time.perf_counter()
        row = run_cell_distributed(spec, timeout, node_rank=node_rank, endpoint=endpoint)
        return _with_launch(row, time.perf_counter() - t0)
    if not isolate and not seam.of_cell(spec).own_process:  # (own_process: it imports a backend of its choice)
        gpu = spec.device.startswith("cuda")
        trial = (lambda s, b: isolated_trial(s, b, timeout)) if gpu else inprocess_trial
        return run_cell(spec, maxbatch_trial=trial, throughput_at=lambda s, b: run_cell(s.measuring(("throughput",), b)))
    row = _failed_or_row(spec, *launcher(spec, timeout).run_stamped(job("cell", without_search(spec))))
    return searched(spec, row, timeout)


def searched(spec: CellSpec, row: dict[str, Any], timeout: float | None) -> dict[str, Any]:
    """An isolated cell's row (its process measured all but the max-batch search: :func:`~ampbench.bench.cell_row.
    without_search`) with the search run from here, each trial forked from this run's fork server."""
    if "maxbatch" not in spec.measures:
        return row
    return search_after(spec, row, lambda b: isolated_trial(spec, b, timeout),
                        lambda b: isolated_throughput_at(spec, b, timeout))


def _failed_or_row(spec: CellSpec, r: dict[str, Any], launch: dict[str, float] | None = None) -> dict[str, Any]:
    """The row a child process returned, its phases with the launch's around them (its wall time the child's, from
    spawn to exit), or the row of a child that died (killed by the OS: oom)."""
    if "_failed" in r:
        row = base_row(spec)
        killed_oom = r.get("_killed") and "SIGKILL" in r["_failed"]
        row.update(status="oom" if killed_oom else "error", reason=r["_failed"], created_at=utcnow())
        return row
    if launch is not None and r.get("phases_s") is not None:
        turn_at = launch.pop("turn_at", None)
        r["phases_s"] = phases.launched(r["phases_s"], **launch)
        r["wall_s"] = phases.add_up(r["phases_s"])
        if turn_at is not None:  # (started before its turn: the seconds it lived while the previous cell measured)
            r["ahead_s"] = max(0.0, turn_at - launch["spawned_at"])
    return r


def _with_launch(row: dict[str, Any], wall_s: float) -> dict[str, Any]:
    """A distributed cell: rank 0's phases, and what starting and ending the ranks took (``launch``: torchrun, the
    process group, the teardown) as the rest of the time the launcher waited."""
    if row.get("phases_s"):
        row["phases_s"]["launch"] = max(0.0, wall_s - phases.add_up(row["phases_s"]))
        row["wall_s"] = phases.add_up(row["phases_s"])
    else:
        row["wall_s"] = wall_s
    return row


def strategy_problem(spec: CellSpec) -> str | None:
    """Why the cell's (strategy, precision) pair cannot run (e.g. fsdp with fp8), or None."""
    if spec.strategy is None:
        return None

    try:
        layout(spec.strategy, get(spec.precision), check_reduce_dtype(spec.distribution.grad_reduce_dtype))
    except AmpbenchError as e:
        return str(e)
    return None


def needs_validation(spec: CellSpec) -> bool:
    """Cells whose inputs must be checked before the run: those only a real build checks
    (:attr:`CellSpec.inputs_need_a_build`), a framework's own process (its backend installed), an optimizer state
    precision (the workload's optimizer must be an Adam or AdamW: checked on a meta build), workload options (their
    values are checked as the model is built: ``-o size=huge`` for bert was an error row of a run that had started,
    exit 1, where the option's name was refused before it), and checkpointing (the model must have repeated blocks:
    a meta build)."""
    return (spec.inputs_need_a_build or seam.of_cell(spec).own_process or spec.optimizer_state is not None
            or bool(spec.data.options) or spec.execution.checkpointing != "off")


def validate_inputs(config: RunConfig) -> list[str]:
    """Build each workload that needs it once (import, factory, data read and checked, a forward on 2
    samples for --model) and raise its AmpbenchError: bad input exits 2 before any cell runs.

    In a child process when cells are isolated: a model that crashes the interpreter must become a
    row of the run, not kill the run before it starts.
    """
    seen = set()
    notes: list[str] = []
    own: dict[tuple[str, str | None], list[CellSpec]] = {}
    for spec in config.cells():
        target = (spec.workload, spec.model, spec.preset, spec.execution.memory_format, spec.execution.checkpointing,
                  spec.framework, spec.backend, spec.optimizer_state)
        if target in seen or not needs_validation(spec):
            continue
        seen.add(target)
        if seam.of_cell(spec).own_process:  # built in a process of its backend, under the run's loss-scaled mode
            own.setdefault((spec.framework, spec.backend), []).append(spec)
            continue
        if not config.launch.isolated(config.device):
            r = framework(spec).validate(spec)
            if r["error"]:
                raise AmpbenchError(r["error"])
            continue
        r = launcher(spec, config.launch.cell_timeout).run(job("validate", spec))
        if r.get("_failed"):  # the interpreter died building it (a crashing model): its cells will say so
            continue
        if r.get("error"):
            raise AmpbenchError(r["error"])
    for specs in own.values():
        notes.extend(_validate_in_own_process(config, specs))
    return notes


def _validate_in_own_process(config: RunConfig, specs: list[CellSpec]) -> list[str]:
    """Build the targets of a framework that runs in a process of its own (its backend installed, each factory its
    model, a step on 2 samples), all in one process of that backend (its import paid once), each under the run's
    most demanding mode (amp-fp16 when the run has it: a float32-output check); their warnings. An AmpbenchError for
    bad input (the first target's, in the run's order)."""
    problem = seam.of_cell(specs[0]).missing(specs[0].backend)
    if problem:
        raise AmpbenchError(problem)
    probes = []
    for spec in specs:
        modes = config.precisions_of(spec.workload, spec.preset)
        precision = next((p for p in ("amp-fp16", "amp-bf16") if p in modes), spec.precision)
        probes.append(replace(spec, precision=precision, device="cpu"))
    r = launcher(probes[0], config.launch.cell_timeout).run(validate_job(probes))
    if r.get("_failed"):
        return []
    for one in r["results"]:
        if one.get("error"):
            raise AmpbenchError(one["error"])
    return [w for one in r["results"] for w in one.get("warnings") or []]


def cell_endpoint(config: RunConfig, cells: list[CellSpec], index: int) -> str | None:
    """Several machines: the rendezvous endpoint of cell ``index``: node 0's port + the cell's ordinal among the
    distributed cells, so a launcher still closing the previous cell's rendezvous is never joined by the next."""
    endpoint = config.launch.endpoint
    if not endpoint or cells[index].strategy is None:
        return None
    host, _, port = str(endpoint).rpartition(":")
    ordinal = sum(1 for c in cells[:index] if c.strategy is not None)
    return f"{host}:{int(port) + ordinal}"


def lend_ranks(config: RunConfig, on_cell: Callable[[CellSpec, dict[str, Any]], None] | None = None) -> int:
    """Node K > 0 of a run over several machines: start this machine's ranks of every distributed cell, in the
    plan's order, meeting node 0's at its endpoint; node 0 merges and stores the rows. ``on_cell``: each cell's spec
    and this machine's row of it (its ranks' status: a failure here is why node 0's cell failed or waited). Returns
    the cells joined."""
    timeout = config.launch.cell_timeout
    node_rank = config.launch.node_rank
    joined = 0
    cells = config.cells()
    for i, spec in enumerate(cells):
        if spec.strategy is not None and strategy_problem(spec) is None and config.support(spec.precision).ok:
            row = execute(spec, True, timeout, node_rank=node_rank, endpoint=cell_endpoint(config, cells, i))
            joined += 1
            if on_cell is not None:
                on_cell(spec, row)
    return joined


def find_resumable(store: Store, config: RunConfig) -> RunInfo:
    mine = config.identity()
    runs = store.runs()
    for info in reversed(runs):
        if info.config.get("identity") == mine:
            return info
    raise AmpbenchError(f"--resume: no earlier run in {store.path} with these options; run again without --resume "
                        "(or with the same options as the run to continue)" + _unlike_latest(runs, mine))


def _unlike_latest(runs: list[RunInfo], mine: dict[str, Any]) -> str:
    """How the latest run's options differ from these ("; the latest run, ID, had precisions fp32 (these: fp32,
    amp-bf16)"): an option changed by mistake is the usual reason a resume finds nothing."""
    if not runs:
        return ""
    latest = runs[-1]
    theirs = latest.config.get("identity") or {}

    def shown(v: Any) -> str:
        return "-" if v is None or v == [] else ", ".join(map(str, v)) if isinstance(v, list) else str(v)

    moved = [f"{k} {shown(theirs.get(k))} (these: {shown(mine.get(k))})" for k in sorted(set(theirs) | set(mine))
             if theirs.get(k) != mine.get(k)]
    if not moved:
        return ""
    more = f" and {len(moved) - 3} more" if len(moved) > 3 else ""
    return f"; the latest run, {latest.run_id}, had {'; '.join(moved[:3])}{more}"


def run(config: RunConfig, store: Store, *, resume: bool = False, label: str | None = None,
        on_event: Callable[[CellEvent], None] | None = None) -> tuple[RunInfo, list[dict[str, Any]]]:
    """Run (or resume) ``config``; returns the run and its rows with derived keys (speedup_vs_fp32, ...)."""
    isolate = config.launch.isolated(config.device)
    timeout = config.launch.cell_timeout
    device = torch.device(config.device)
    if resume:
        info = find_resumable(store, config)
    else:
        info = store.create_run({"identity": config.identity(), "extra": config.launch.to_dict()}, device=config.device,
                                device_name=device_name(device), hostname=socket.gethostname(), label=label)
    cells = config.cells()
    done = store.cell_keys(info.run_id)

    def problem(spec: CellSpec) -> str | None:
        """Why the cell cannot run here (no process needed to know it), or None."""
        sup = config.support(spec.precision)
        return strategy_problem(spec) or (None if sup.ok else sup.reason)

    ahead = Ahead(config, timeout)
    try:
        for i, spec in enumerate(cells):
            key = spec.key()
            if key in done:
                if on_event:
                    on_event(CellEvent("skip", i, len(cells), spec))
                continue
            if on_event:
                on_event(CellEvent("start", i, len(cells), spec))
            why = problem(spec)
            if why:
                row = base_row(spec)
                row.update(status="unsupported", reason=why, device_name=device_name(device), created_at=utcnow(),
                           wall_s=0.0)
            else:
                inside = None if on_event is None else (
                    lambda e, i=i, spec=spec: on_event(CellEvent("progress", i, len(cells), spec, progress=e)))
                with progress.reporting_to(inside):  # in this process, or followed in its child process / ranks
                    started = ahead.take(i, spec)
                    if started is not None:  # (the next cell's process starts while this one measures)
                        following = next((j for j in range(i + 1, len(cells))
                                          if cells[j].key() not in done and problem(cells[j]) is None), None)
                        if following is not None:
                            ahead.start(following, cells[following])
                        row = searched(spec, _failed_or_row(spec, *started.wait()), timeout)
                    else:
                        row = execute(spec, isolate, timeout, endpoint=cell_endpoint(config, cells, i))
            row.update(run_id=info.run_id, cell_key=key)
            store.add(row)
            if on_event:
                on_event(CellEvent("done", i, len(cells), spec, row))
    finally:
        ahead.cancel()
    store.finish_run(info.run_id)
    return store.run(info.run_id), derive(store.rows(info.run_id), store.hw())


class Ahead:
    """The cells whose process starts before their turn (:mod:`ampbench.launch.turn`): isolated single-process cells
    of a fork-served framework when the run builds ahead (GPU runs by default). :meth:`take` gives cell i's started
    process -- the one started ahead, or one started now -- or None where the cell is launched otherwise."""

    def __init__(self, config: RunConfig, timeout: float | None) -> None:
        self.on = config.launch.ahead(config.device)
        self.timeout = timeout
        self.held: dict[int, Started] = {}

    def applies(self, spec: CellSpec) -> bool:
        return self.on and spec.strategy is None and isinstance(launcher(spec, self.timeout), Forked)

    def _start(self, spec: CellSpec, held: bool) -> Started | None:
        if not self.applies(spec):
            return None
        forked = launcher(spec, self.timeout)
        assert isinstance(forked, Forked)
        return forked.start(job("cell", without_search(spec)), held=held)

    def take(self, i: int, spec: CellSpec) -> Started | None:
        return self.held.pop(i, None) or self._start(spec, held=False)

    def start(self, i: int, spec: CellSpec) -> None:
        started = self._start(spec, held=True)
        if started is not None:
            self.held[i] = started

    def cancel(self) -> None:
        """The run stopped: end the processes still waiting for a turn."""
        for started in self.held.values():
            started.cancel()
        self.held.clear()
