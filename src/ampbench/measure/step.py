"""One full training step of a workload in one precision mode: what every measurement times.

A step is exactly the loop users write with ampbench (and the hand-written loop in
``benchmarks/harness_overhead.py``): zero_grad, forward + loss under the mode's autocast, scaled
backward, unscale + inf check + optimizer step + scale update. Batches are already on the device
(data loading is not part of a step) and cycle over a few distinct batches of the training split.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ampbench.data.tensors import TensorData
from ampbench.distributed import current_rank
from ampbench.distributed.wrap import ddp_bucket_bytes, deferred_sync
from ampbench.execution import Execution, finish_model, graph_ran_compiled, mark_step, prepare_model
from ampbench.measure.memory import StateBytes, state_bytes
from ampbench.measure.trainable import find_unused_under_ddp
from ampbench.precision import MixedPrecision
from ampbench.precision.optimizers import fused_where_supported
from ampbench.workloads.base import Workload

Batch = tuple[tuple[torch.Tensor, ...], torch.Tensor]


def device_batches(data: TensorData, batch_size: int, count: int, device: torch.device, first: int = 0) -> list[Batch]:
    """``count`` distinct batches of ``batch_size`` on ``device`` (from batch index ``first``: each rank of a
    distributed step its own); a split smaller than that is tiled."""
    n = len(data)
    out = []
    for i in range(first, first + count):
        idx = (torch.arange(batch_size) + i * batch_size) % n
        b = data.select(idx).to(device)
        out.append((b.inputs, b.targets))
    return out


def data_loading_ms(data: TensorData, batch_size: int, device: torch.device, count: int = 10, seed: int = 0) -> float:
    """Median ms to gather one shuffled batch from the in-memory split on the host and copy it to
    ``device``, synchronised: the floor of data loading (no decoding, no augmentation), which the
    timed steps leave out. Next to the step time it says whether loading must overlap compute
    once half precision has made the step shorter."""
    g = torch.Generator().manual_seed(seed)
    host = data.to("cpu") if data.device.type != "cpu" else data
    times = []
    for _ in range(count):
        idx = torch.randint(len(host), (batch_size,), generator=g)
        t = time.perf_counter()
        b = host.select(idx).to(device)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append((time.perf_counter() - t) * 1e3)
        del b
    return statistics.median(times)


@dataclass
class TrainStep:
    workload: Workload
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    mp: MixedPrecision
    batches: list[Batch]
    device: torch.device
    batch_size: int
    execution: Execution = field(default_factory=Execution)
    """How the model runs: ``model`` is the compiled module when execution.compiled (``eager_model`` the set-up one)."""
    eager_model: torch.nn.Module | None = field(default=None, repr=False)
    calls: int = 0
    last_loss: torch.Tensor | None = field(default=None, repr=False)
    ran_compiled: bool | None = None
    """Set by a step called with ``probe=True``: whether its forward ran torch.compile'd code."""
    micro_batches: int = 1
    """Batches of ``batch_size`` whose gradients a step accumulates before the optimizer steps (``run --grad-accum``,
    as ``train --grad-accum`` runs them): each one's loss weighted 1/N, DDP's all-reduce deferred to the last where
    the strategy's rule allows (:func:`~ampbench.distributed.wrap.deferred_sync`)."""
    deferred: Any = field(init=False, default=None, repr=False)
    """DDP's ``no_sync`` for the micro-batches before the last (None: each reduced, or nothing to reduce): found once
    for the model, not every step."""

    def __post_init__(self) -> None:
        self.deferred = deferred_sync(self.model, self.mp)

    def __call__(self, after_backward: Callable[[], None] | None = None, eager: bool = False, probe: bool = False,
                 micro_batches: int | None = None) -> None:
        """One step. ``eager``: through the set-up model itself, not its compiled wrapper (for a
        TorchDispatchMode such as the FLOP counter: dynamo stops running a frame's compiled code once
        it was called under one, so the timed steps would silently run eager). ``micro_batches``: this step's
        (default: the step's own; 1: a plain step, what the saved-activation count measures -- one micro-batch's)."""
        n = self.micro_batches if micro_batches is None else micro_batches
        model = self.eager_model if eager and self.eager_model is not None else self.model
        if model is self.model:
            mark_step(self.execution)
        self.optimizer.zero_grad(set_to_none=True)
        deferred = self.deferred if n > 1 else None
        loss: torch.Tensor | None = None
        for i in range(n):
            inputs, targets = self.batches[self.calls % len(self.batches)]
            self.calls += 1
            with deferred() if deferred is not None and i < n - 1 else contextlib.nullcontext():
                with self.mp.autocast():
                    part = self.workload.loss_fn(self.workload.call_model(model, inputs), targets)
                    part = part / n if n > 1 else part  # (equal micro-batches: the whole batch's mean loss)
                if probe and i == 0:
                    self.ran_compiled = graph_ran_compiled(part)
                self.mp.backward(part)
            loss = part.detach() if loss is None else loss + part.detach()
        if after_backward is not None:  # (measurement hook: gradients exist only between backward and step)
            after_backward()
        self.mp.step(self.optimizer)
        self.last_loss = loss

    def state_bytes(self) -> StateBytes | None:
        """Weights, gradients and optimizer state, read between backward and step of one more step.

        Optimizers create their state (Adam's moments) at their first real step; with fp16 dynamic
        scaling starting at 2^16 the first steps are often skipped for overflow, so reading it early
        says "0 bytes of optimizer state" (seen: amp-fp16 "46% less memory" than fp32, 20% with the
        state counted). Call after steps that updated the weights: None if none has yet.
        """
        if not self.updated():
            return None
        held: list[StateBytes] = []
        self(after_backward=self.state_reader(held))
        return held[0]

    def updated(self) -> bool:
        """Whether a step so far updated the weights (not every one was skipped): the optimizer's state exists."""
        totals = self.mp.totals
        return totals["steps"] - totals["skipped_steps"] > 0

    def state_reader(self, into: list[StateBytes]) -> Callable[[], None]:
        """An ``after_backward`` hook appending the weights, gradients and optimizer state to ``into`` (what
        :meth:`state_bytes` reads; a cell reads them in a step it runs anyway, once :meth:`updated`)."""
        buckets = ddp_bucket_bytes(self.model)  # (DDP: its buckets hold the gradients)

        def read() -> None:  # (master-* modes: as the optimizer steps, the half gradients moved to the fp32 masters)
            self.mp.move_grads(self.optimizer)
            into.append(state_bytes(self.model, self.optimizer, self.mp.master_params(), buckets))

        return read



def build_step(workload: Workload, precision: str, batch_size: int, device: torch.device,
               loss_scale: str | float | None = None, n_batches: int = 4, keep_fp32: list[str] | None = None,
               mp_options: dict[str, Any] | None = None, execution: Execution | None = None,
               phase: Callable[[str, str], None] | None = None, micro_batches: int = 1) -> TrainStep:
    """Move the workload's model to ``device``, set it up for ``precision``, stage batches there.
    ``mp_options``: more MixedPrecision keywords (the fp8 modes' ``fp8_skip``/``fp8_filter``).
    ``execution``: channels-last and torch.compile (:mod:`ampbench.execution`; default eager). A
    compiled step starts from a clean dynamo state (torch._dynamo.reset(), counters cleared): caches and
    graph-break records of earlier steps in this process do not carry over. ``phase(name, text)``: told as each part
    after the model's move starts -- ``engine`` (the optimizer and the precision engine set up), ``batches`` (staged
    on the device) -- so a cell's phases say where its setup went (:func:`ampbench.phases.enter`). ``micro_batches``:
    batches a step accumulates (:attr:`TrainStep.micro_batches`; at least that many distinct ones are staged)."""
    execution = execution or Execution()
    say = phase or (lambda name, text: None)
    model = prepare_model(workload.model.to(device), execution, workload.name)
    say("engine", "setting up the optimizer and the precision engine")
    optimizer = fused_where_supported(workload.make_optimizer(model.parameters()))  # (steps with no host sync)
    mp = MixedPrecision(precision, loss_scale=loss_scale, device=device, keep_fp32=keep_fp32 or (), **(mp_options or {}))
    find_unused_under_ddp(workload, mp.placement)
    model, optimizer = mp.setup(model, optimizer)  # (under ddp: the DDP wrapper)
    model.train()
    if execution.compiled:
        from torch._dynamo.utils import counters  # lazy: torch._dynamo

        torch._dynamo.reset()
        counters.clear()  # (reset keeps them: graph-break reasons of earlier cells would be this cell's)
    run = finish_model(model, execution)
    rank = current_rank()
    say("batches", "staging the batches on the device")
    n_batches = max(n_batches, micro_batches)
    batches = device_batches(workload.train_data, batch_size, n_batches, device, first=rank * n_batches)
    return TrainStep(workload, run, optimizer, mp, batches, device, batch_size, execution, model,
                     micro_batches=micro_batches)
