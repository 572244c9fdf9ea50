"""Convergence parity: the same model, init and data trained K steps in a mode, over S seeds.

Seed s builds the workload with seed s (same init and data for every precision), shuffles with a
generator seeded by s, and trains ``steps`` optimizer steps. Stored per seed: the loss curve, the
loss-scale trajectory, skipped steps, the final loss (mean of the last 10% of steps, less noisy
than the last one), the test loss and metric, and whether it diverged. The verdict against fp32 is
derived when rows are read (``ampbench.store.derive``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from ampbench import progress
from ampbench.data.tensors import TensorData
from ampbench.distributed import current_rank
from ampbench.errors import TrainingDivergedError
from ampbench.execution import Execution, finish_model, mark_step, prepare_model
from ampbench.measure.seeds import eval_batch, final_loss, first_nonfinite, summarize
from ampbench.precision import MixedPrecision
from ampbench.precision.optimizers import fused_where_supported
from ampbench.workloads.base import Workload


@torch.no_grad()
def evaluate(workload: Workload, data: TensorData, mp: MixedPrecision, batch_size: int) -> tuple[float, float | None]:
    """(mean loss, metric) over ``data`` in eval mode, under the mode's forward context."""
    model, metric = workload.model, workload.metric
    was_training = model.training
    model.eval()
    loss_sum = torch.zeros((), dtype=torch.float64, device=data.device)
    m_sum = torch.zeros((), dtype=torch.float64, device=data.device)
    n_batches = m_count = 0
    for inputs, targets in data.batches(batch_size):
        with mp.autocast():
            out = workload.call_model(model, inputs)
            loss_sum += workload.loss_fn(out, targets).double()
            if metric is not None:
                s, c = metric.fn(out, targets)
                m_sum += s.double()
                m_count += c
        n_batches += 1
    model.train(was_training)
    mean_loss = float(loss_sum) / max(n_batches, 1)
    value = metric.finalize(float(m_sum) / m_count) if metric is not None and m_count else None
    return mean_loss, value


def train_seed(workload: Workload, precision: str, device: torch.device, steps: int, batch_size: int, seed: int,
               loss_scale: str | None = None, mp_options: dict[str, Any] | None = None,
               execution: Execution | None = None, meter: Callable[[int], None] | None = None) -> dict[str, Any]:
    """One seed's training (compiled / channels-last as ``execution`` says: a compiled cell's convergence
    is the compiled model's own); ``meter(i)`` after step i (progress)."""
    execution = execution or Execution()
    model = prepare_model(workload.model.to(device), execution, workload.name)
    optimizer = fused_where_supported(workload.make_optimizer(model.parameters()))
    mp = MixedPrecision(precision, loss_scale=loss_scale, device=device, **(mp_options or {}))
    model, optimizer = mp.setup(model, optimizer)
    model.train()
    if execution.compiled:  # each seed's model is new: a clean dynamo state, never its recompile limit (eager fallback)
        torch._dynamo.reset()
    run = finish_model(model, execution)
    data = workload.train_data.to(device)
    rank = current_rank()
    g = torch.Generator().manual_seed(seed if rank == 0 else seed * 1000 + rank)  # distributed: each rank its own order
    losses: list[torch.Tensor] = []
    scales: list[torch.Tensor | float] = []  # (read after the loop: a read per step would be a host sync per step)
    diverged, reason = False, ""
    torch.manual_seed(seed)  # dropout
    try:
        while len(losses) < steps:
            for inputs, targets in data.batches(batch_size, shuffle=True, generator=g, drop_last=len(data) > batch_size):
                optimizer.zero_grad(set_to_none=True)
                mark_step(execution)
                with mp.autocast():
                    loss = workload.loss_fn(workload.call_model(run, inputs), targets)
                scales.append(mp.current_scale())
                mp.backward(loss)
                mp.step(optimizer)
                losses.append(loss.detach().float())
                if meter is not None:
                    meter(len(losses))
                if len(losses) >= steps:
                    break
        mp.check_divergence()  # (a fused optimizer's step reads nothing: a collapsed scale is told here at the latest)
    except TrainingDivergedError as e:
        diverged, reason = True, str(e)
    curve = torch.stack(losses).cpu().tolist() if losses else []
    final = final_loss(curve)
    if not math.isfinite(final):
        diverged = True
        reason = reason or first_nonfinite(curve)
    test_loss = metric = None
    if not diverged and workload.test_data is not None:
        test_loss, metric = evaluate(workload, workload.test_data.to(device), mp, eval_batch(batch_size))
    return {"curve": curve, "scales": [float(s) for s in scales], "final_loss": final, "test_loss": test_loss, "metric": metric,
            "skipped_steps": mp.totals["skipped_steps"], "diverged": diverged, "reason": reason,
            "fp8_layers": mp.fp8_layers.summary() if mp.fp8_layers is not None else None}


def workload_length(workload: Workload, batch_size: int) -> int:
    """The optimizer steps of the workload's own training: its epochs over its training split (full batches
    when the split holds more than one)."""
    data = workload.train_data
    return workload.epochs * data.num_batches(batch_size, drop_last=len(data) > batch_size)


def converge(build: Callable[[int], Workload], precision: str, device: torch.device, steps: int | None, seeds: int,
             batch_size: int | None, base_seed: int = 0, loss_scale: str | None = None,
             mp_options: dict[str, Any] | None = None, execution: Execution | None = None) -> dict[str, Any]:
    """Train ``seeds`` runs (seeds base_seed, base_seed+1, ...) of ``steps`` steps (None: the workload's own
    length, :func:`workload_length`); curves and summaries, with the steps that ran."""
    runs, steps_ran = [], steps
    for k, s in enumerate(range(base_seed, base_seed + seeds)):
        wl = build(s)
        bs = batch_size or wl.batch_size
        n = steps if steps is not None else workload_length(wl, bs)
        meter = progress.Steps("convergence", n, detail=f"seed {k + 1}/{seeds}")
        runs.append(train_seed(wl, precision, device, n, bs, s, loss_scale, mp_options, execution, meter))
        steps_ran = n
    return summarize(runs, steps_ran, base_seed, seeds)
