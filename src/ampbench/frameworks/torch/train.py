"""Train a workload in one precision mode: epochs, evaluation, checkpoints each epoch, resume.

Library code: returns a :class:`TrainResult`; progress goes to an optional callback (the CLI draws
a rich progress bar with it).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.distributed as dist
from torch import nn

from ampbench.data.tensors import TensorData
from ampbench.distributed import checkpoint as dcheckpoint
from ampbench.distributed.placement import placement_of
from ampbench.distributed.strategy import check_reduce_dtype, check_strategy, layout
from ampbench.distributed.wrap import deferred_sync
from ampbench.errors import AmpbenchError, ParameterError
from ampbench.execution import Execution, finish_model, prepare_model
from ampbench.measure.converge import evaluate
from ampbench.measure.env import resolve_device
from ampbench.measure.memory import rss
from ampbench.measure.seeds import eval_batch
from ampbench.measure.trainable import find_unused_under_ddp
from ampbench.precision import Fp8Options, MixedPrecision, get
from ampbench.precision.fp8 import import_torchao
from ampbench.precision.optimizer_state import INSTALL as OPTIM_INSTALL
from ampbench.precision.optimizer_state import check as check_optimizer_state
from ampbench.precision.optimizer_state import effective as effective_state
from ampbench.precision.optimizers import fused_where_supported
from ampbench.train_line import accuracy_keys
from ampbench.workloads.base import Workload

CHECKPOINT_NAME = "checkpoint.pt"


@dataclass(frozen=True)
class TrainConfig:
    precision: str
    """Precision mode name or alias."""
    epochs: int | None = None
    """Epochs to train (default: the workload's)."""
    batch_size: int | None = None
    """Batch size (default: the workload's)."""
    seed: int = 0
    """Seeds model init, shuffling and dropout."""
    device: str | None = None
    """cpu / cuda[:N] (default: cuda when available)."""
    loss_scale: str | float | None = None
    """Override the mode's loss scaling (see MixedPrecision)."""
    fp8: Fp8Options | None = None
    """fp8 modes: which Linear layers convert (--fp8-skip, --fp8-filter; None: the recipe's default)."""
    max_grad_norm: float | None = None
    """Clip the gradients' total L2 norm to this each step, unscaled (``MixedPrecision.step``'s ``max_grad_norm``)."""
    checkpoint_dir: Path | None = None
    """Write checkpoint.pt here at the end of every epoch."""
    resume: bool = False
    """Continue from checkpoint_dir/checkpoint.pt."""
    max_steps_per_epoch: int | None = None
    """Cap on optimizer steps per epoch (quick runs, CI)."""
    evaluate_train: bool = True
    """Also evaluate on the whole training split at the end (check_accuracy on both splits)."""
    compile: str = "off"
    """off | on | max-autotune: train the torch.compile'd model (ampbench.execution; evaluation stays eager)."""
    checkpointing: str = "off"
    """off | blocks | selective: the model's repeated blocks recomputed in the backward, whole or what costs no FLOPs
    (:mod:`ampbench.execution.checkpointing`)."""
    strategy: str | None = None
    """ddp | fsdp: train over the ranks of torch.distributed (initialised by the caller, e.g. under torchrun);
    batch_size is per rank, each rank takes its slice of every global batch."""
    grad_reduce_dtype: str | None = None
    optimizer_state: str | None = None
    """The optimizer's state precision (None: the optimizer as built; :mod:`ampbench.precision.optimizer_state`)."""
    grad_accum: int = 1
    """Micro-batches of ``batch_size`` per optimizer step (gradient accumulation): a step's gradients are those of
    ``batch_size x grad_accum`` samples, each micro-batch's loss weighted by its share of them, unscaled and checked
    for inf/NaN once (:meth:`MixedPrecision.backward`); ``max_steps_per_epoch`` counts optimizer steps."""

    def __post_init__(self) -> None:
        Execution(compile=self.compile, checkpointing=self.checkpointing)  # validates the values
        check_optimizer_state(self.precision, self.optimizer_state)

        if check_strategy(self.strategy) is not None:
            layout(self.strategy, get(self.precision), check_reduce_dtype(self.grad_reduce_dtype))  # type: ignore[arg-type]
        elif self.grad_reduce_dtype is not None:
            raise AmpbenchError("--grad-reduce-dtype applies to --strategy ddp or fsdp")
        for name in ("epochs", "batch_size", "max_steps_per_epoch", "grad_accum"):
            v = getattr(self, name)
            if v is not None and v < 1:  # (a ParameterError: the command line names its flag, --epochs)
                raise ParameterError(name, v, "must be >= 1")
        if self.max_grad_norm is not None and not (0 < self.max_grad_norm < float("inf")):
            raise ParameterError("max_grad_norm", self.max_grad_norm, "must be a finite number > 0")
        if self.resume and self.checkpoint_dir is None:
            raise AmpbenchError("--resume needs --checkpoint DIR (where the checkpoint was written)")
        if self.checkpoint_dir is not None and Path(self.checkpoint_dir).exists() and not Path(self.checkpoint_dir).is_dir():
            raise AmpbenchError(f"--checkpoint {self.checkpoint_dir} is a file: give a directory "
                                f"({CHECKPOINT_NAME} is written inside it)")
        held = [Path(self.checkpoint_dir) / n for n in (CHECKPOINT_NAME, dcheckpoint.CURRENT)] if (
            self.checkpoint_dir is not None and not self.resume) else []
        if any(p.exists() for p in held):  # (a second run into the same directory replaced it at its first epoch)
            raise AmpbenchError(f"--checkpoint {self.checkpoint_dir} holds a checkpoint already: --resume continues it "
                                "(with --epochs N beyond its own), another directory keeps it, deleting it starts over")


@dataclass
class Progress:
    epoch: int
    epochs: int
    step: int
    steps: int
    loss: float
    scale: float | None
    """The loss scale; None where the mode scales no loss (fp32, bf16: a "scale 1" said nothing)."""
    samples_per_s: float
    grad_norm: float | None = None
    """The last step's total gradient norm before clipping (with ``max_grad_norm``; inf on a step skipped for it)."""


@dataclass
class TrainResult:
    workload: str
    preset: str
    precision: str
    device: str
    epochs: int
    batch_size: int
    steps: int
    skipped_steps: int
    final_loss: float
    metric_name: str | None
    train_metric: float | None
    test_metric: float | None
    train_loss: float | None
    test_loss: float | None
    samples_per_s: float
    train_seconds: float
    loss_scale: float
    resumed_from_epoch: int = 0
    steps_trained: int = 0
    """Optimizer steps this call ran (``steps`` counts the resumed run's earlier ones too)."""
    compile: str = "off"
    checkpointing: str = "off"
    strategy: str | None = None
    world_size: int = 1
    """Ranks that trained (samples_per_s is global: all ranks together)."""
    compile_s: float | None = None
    """Compiled runs: seconds of the first step (tracing and compiling included), left out of samples_per_s."""
    grad_accum: int = 1
    """Micro-batches of ``batch_size`` per optimizer step (``steps`` counts optimizer steps)."""
    history: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), **accuracy_keys(self.metric_name, self.train_metric, self.test_metric)}


class TrainLog(Protocol):
    """Where :func:`train` logs each step and epoch (e.g. :class:`ampbench.tensorboard.TrainLogger`)."""

    def step(self, global_step: int, scalars: Mapping[str, float]) -> None: ...

    def epoch(self, epoch: int, scalars: Mapping[str, float | None]) -> None: ...


def _resume(config: TrainConfig, ckpt_path: Path | None, workload: Workload, model: nn.Module,
            optimizer: torch.optim.Optimizer, mp: MixedPrecision, epochs: int) -> tuple[int, list[dict[str, Any]]]:
    """``--resume``: model, optimizer, mixed-precision state and RNG from the checkpoint; (epoch reached, history)."""
    if mp.placement.strategy:
        assert config.checkpoint_dir is not None
        state = dcheckpoint.load(config.checkpoint_dir, model, optimizer, mp)
        _check_resumable({**state, "model": 1, "optimizer": 1, "mp": 1}, config.checkpoint_dir, workload, mp.name,
                         mp.optimizer_state)
        torch.set_rng_state(state["rng"])
        start_epoch, history = int(state["epoch"]), list(state.get("history", []))
        _check_unfinished(config.checkpoint_dir, start_epoch, epochs)
    else:
        assert ckpt_path is not None
        state = _read_checkpoint(ckpt_path)
        _check_resumable(state, ckpt_path, workload, mp.name, mp.optimizer_state)
        try:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            mp.load_state_dict(state["mp"])
            torch.set_rng_state(state["rng"])
        except (RuntimeError, KeyError, ValueError, TypeError) as e:
            raise AmpbenchError(f"--resume: {ckpt_path} does not fit this model and optimizer ("
                                f"{str(e).strip().splitlines()[0][:160]}): was it written with another preset, "
                                "--option or model?") from None
        start_epoch, history = int(state["epoch"]), list(state.get("history", []))
        _check_unfinished(ckpt_path, start_epoch, epochs)
    return start_epoch, history


def _check_unfinished(path: Path, epoch: int, epochs: int) -> None:
    """A checkpoint at the last epoch asked for has nothing left to train."""
    if epoch >= epochs:
        raise AmpbenchError(f"--resume: {path} is already at epoch {epoch} of {epochs}: nothing to train; give "
                            f"--epochs N with N > {epoch} to train further")


def _read_checkpoint(ckpt_path: Path, mmap: bool = False) -> Any:
    """A one-file checkpoint's contents (``mmap``: its tensors left on disk until read: the metadata alone)."""
    if not ckpt_path.exists():
        raise AmpbenchError(f"--resume: no checkpoint at {ckpt_path}")
    try:
        # map_location cpu, as distributed/checkpoint.py: torch.set_rng_state takes a CPU ByteTensor only (mapped
        # to CUDA it raised, and was reported as a checkpoint that "does not fit"); model, optimizer and mp states
        # are copied onto their parameters' devices by their load_state_dict
        return torch.load(ckpt_path, map_location="cpu", weights_only=True, mmap=mmap)
    except Exception as e:
        if "torchao" in str(e):  # (torchao's state classes load once torchao.optim is imported: --optimizer-state)
            raise AmpbenchError(f"--resume: {ckpt_path} holds torchao's low-precision optimizer states (written "
                                "with --optimizer-state): resume with the same --optimizer-state") from None
        raise AmpbenchError(f"--resume: {ckpt_path} is not a readable checkpoint ({type(e).__name__}: {e})") from None


def epoch_steps(workload: Workload, batch_size: int, accum: int, world: int = 1) -> tuple[int, int]:
    """(micro-batches, optimizer steps) an epoch of the training split holds at ``batch_size`` per rank over ``world``
    ranks, ``accum`` micro-batches a step; an AmpbenchError where not one step fits (``train --strategy`` asks it
    before torchrun starts the ranks)."""
    n = len(workload.train_data)
    micro_batches = workload.train_data.num_batches(batch_size) if world == 1 else n // (batch_size * world)
    if micro_batches < 1:
        raise AmpbenchError(f"{workload.name}: the training split is empty; nothing to train" if n == 0 else
                            f"--batch-size {batch_size}: {workload.name}'s training split holds {n} samples, fewer "
                            f"than one batch of {batch_size} on each of {world} ranks; give --batch-size <= "
                            f"{n // world}")
    steps_per_epoch = micro_batches // accum  # (an epoch's last micro-batches short of a whole step are left out)
    if steps_per_epoch < 1:
        raise AmpbenchError(f"--grad-accum {accum}: {workload.name}'s training split holds {micro_batches} batch"
                            f"{'es' if micro_batches > 1 else ''} of {batch_size}{' per rank' if world > 1 else ''}, "
                            f"fewer than one optimizer step's {accum}; give --grad-accum <= {micro_batches} or a "
                            "smaller --batch-size")
    return micro_batches, steps_per_epoch


def check_resume(config: TrainConfig, workload: Workload, precision: str, world_size: int = 1) -> None:
    """``--resume``'s refusals that need no model or optimizer set up -- a checkpoint missing, unreadable, or of
    another workload, precision, preset, data, optimizer states (a distributed one: strategy or ranks), or already at
    the last epoch --, said before the command prints anything or starts a rank (:func:`train` checks them again as
    it loads). ``world_size``: the ranks a distributed run starts."""
    if not config.resume or config.checkpoint_dir is None:
        return
    if effective_state(precision, config.optimizer_state) is not None:  # (torchao's state classes: readable by a
        # weights-only load once torchao.optim is imported -- the engine imports it later, as it builds the optimizer)
        import_torchao("torchao.optim", "low-precision optimizers", OPTIM_INSTALL)
    if config.strategy:
        path = config.checkpoint_dir
        state = {**dcheckpoint.about(path), "model": 1, "optimizer": 1, "mp": 1}
        dcheckpoint.check_placement(state, f"--resume: {path}", config.strategy, world_size)
    else:
        path = config.checkpoint_dir / CHECKPOINT_NAME
        state = _read_checkpoint(path, mmap=True)
    _check_resumable(state, path, workload, precision, config.optimizer_state)
    _check_unfinished(path, int(state["epoch"]), config.epochs or workload.epochs)


def _save(config: TrainConfig, ckpt_path: Path | None, workload: Workload, model: nn.Module,
          optimizer: torch.optim.Optimizer, mp: MixedPrecision, epoch: int, history: list[dict[str, Any]]) -> None:
    """The checkpoint of an epoch (every rank's shards under a strategy, one file otherwise), if one is kept."""
    about = {"workload": workload.name, "precision": mp.name, "epoch": epoch, "preset": workload.preset,
             "data": workload.description, "optimizer_state": mp.optimizer_state}
    if config.checkpoint_dir is not None and mp.placement.strategy:
        dcheckpoint.save(config.checkpoint_dir, model, optimizer, mp,
                         extra={**about, "rng": torch.get_rng_state(), "history": history})
    elif ckpt_path is not None:
        ckpt_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = ckpt_path.with_suffix(".tmp")
        torch.save({**about, "model": model.state_dict(), "optimizer": optimizer.state_dict(), "mp": mp.state_dict(),
                    "rng": torch.get_rng_state(), "history": history}, tmp)
        tmp.replace(ckpt_path)  # atomic: a kill mid-save keeps the previous checkpoint


def train(workload: Workload, config: TrainConfig, on_progress: Callable[[Progress], None] | None = None,
          progress_every: float = 0.5, log: TrainLog | None = None) -> TrainResult:
    """Train ``workload`` as ``config`` says. Checkpoints load with ``torch.load(weights_only=True)``.

    ``log``: each step's loss, loss scale, found-inf, skipped steps and learning rate, and each epoch's loss,
    samples/s, memory and test loss/metric (evaluated after every epoch when a log is given). Rank 0 logs."""
    device = resolve_device(config.device)
    if config.strategy and device.type == "cuda":  # a rank: its own device (torch.cuda.set_device by the launcher's rank)
        device = torch.device("cuda", torch.cuda.current_device())
    epochs = config.epochs or workload.epochs
    batch_size = config.batch_size or workload.batch_size
    torch.manual_seed(config.seed)
    execution = Execution(compile=config.compile, checkpointing=config.checkpointing)
    model = prepare_model(workload.model.to(device), execution, workload.name)
    optimizer = fused_where_supported(workload.make_optimizer(model.parameters()))  # (steps with no host sync)
    mp = MixedPrecision(config.precision, loss_scale=config.loss_scale, device=device, fp8=config.fp8,
                        placement=placement_of(config.strategy, config.grad_reduce_dtype),
                        optimizer_state=config.optimizer_state)
    find_unused_under_ddp(workload, mp.placement)
    model, optimizer = mp.setup(model, optimizer)
    world, rank = (dist.get_world_size(), dist.get_rank()) if mp.placement.strategy else (1, 0)
    workload.model = model  # (evaluation and checkpoints use the set-up model itself; under ddp its DDP wrapper)
    run = finish_model(model, execution)
    train_data = workload.train_data.to(device)
    test_data = workload.test_data.to(device) if workload.test_data is not None else None

    ckpt_path = config.checkpoint_dir / CHECKPOINT_NAME if config.checkpoint_dir else None
    start_epoch, history = _resume(config, ckpt_path, workload, model, optimizer, mp, epochs) if config.resume else (0, [])
    accum = config.grad_accum
    micro_batches, steps_per_epoch = epoch_steps(workload, batch_size, accum, world)
    if config.max_steps_per_epoch:
        steps_per_epoch = min(steps_per_epoch, config.max_steps_per_epoch)
    steps_before = mp.totals["steps"]
    deferred = deferred_sync(run, mp) if accum > 1 else None  # (once: not a question for every step)
    model.train()
    train_seconds, samples, loss = 0.0, 0, torch.zeros(())
    compile_s, compile_samples = None, 0
    for epoch in range(start_epoch, epochs):
        g = torch.Generator().manual_seed(config.seed * 100_003 + epoch)  # order depends on (seed, epoch) only
        t0 = last_report = time.perf_counter()
        epoch_samples = 0
        compiling = (0.0, 0)  # (this epoch's compiling first step: seconds and samples, left out of its progress rate)
        micro = train_data.batches(batch_size * world, shuffle=True, generator=g, drop_last=world > 1)
        for step in range(steps_per_epoch):
            group = [next(micro) for _ in range(accum)]
            if world > 1:  # every rank shuffles alike (same generator) and takes its slice of the global batch
                part = slice(rank * batch_size, (rank + 1) * batch_size)
                group = [(tuple(t[part] for t in inputs), targets[part]) for inputs, targets in group]
            step_samples = sum(int(targets.shape[0]) for _, targets in group)
            first = execution.compiled and compile_s is None
            if first:
                t_first = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            loss = _accumulate(workload, run, mp, group, step_samples, deferred)
            mp.step(optimizer, max_grad_norm=config.max_grad_norm)
            if log is not None and rank == 0 and mp.last_step is not None:
                log.step(mp.totals["steps"], {**mp.last_step.scalars(), "lr": optimizer.param_groups[0]["lr"]})
            epoch_samples += step_samples * world
            if first:  # the compile happens in the first step: timed apart, not in samples_per_s
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                compile_s, compile_samples = time.perf_counter() - t_first, step_samples * world
                compiling = (compile_s, compile_samples)
            now = time.perf_counter()
            if on_progress is not None and (now - last_report >= progress_every or step + 1 == steps_per_epoch):
                last_report = now
                norm = mp.last_step.grad_norm_tensor if mp.last_step is not None else None
                on_progress(Progress(epoch + 1, epochs, step + 1, steps_per_epoch, float(loss.detach()),
                                     mp.scale if mp.loss_scale.kind != "none" else None,
                                     _rate(epoch_samples, now - t0, compiling[1], compiling[0]),
                                     None if norm is None else float(norm)))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        elapsed = time.perf_counter() - t0
        train_seconds += elapsed
        samples += epoch_samples
        history.append({"epoch": epoch + 1, "loss": float(loss.detach()), "seconds": elapsed,
                        "skipped_steps": mp.totals["skipped_steps"], "loss_scale": mp.scale})
        if log is not None:  # (every rank evaluates: under fsdp a forward is collective; rank 0 logs)
            rate = _rate(epoch_samples, elapsed, compiling[1], compiling[0])  # (the compiling step left out)
            scalars = _epoch_scalars(workload, test_data, mp, batch_size, history[-1], rate, optimizer, device)
            if rank == 0:
                log.epoch(epoch + 1, scalars)
        _save(config, ckpt_path, workload, model, optimizer, mp, epoch + 1, history)

    eval_bs = eval_batch(batch_size)
    train_loss, train_metric = evaluate(workload, train_data, mp, eval_bs) if config.evaluate_train else (None, None)
    test_loss, test_metric = evaluate(workload, test_data, mp, eval_bs) if test_data is not None else (None, None)
    return TrainResult(
        workload=workload.name, preset=workload.preset, precision=mp.name, device=str(device), epochs=epochs,
        batch_size=batch_size, steps=mp.totals["steps"], skipped_steps=mp.totals["skipped_steps"],
        final_loss=float(loss.detach()) if history else float("nan"),
        metric_name=workload.metric.name if workload.metric else None, train_metric=train_metric,
        test_metric=test_metric, train_loss=train_loss, test_loss=test_loss,
        samples_per_s=_rate(samples, train_seconds, compile_samples, compile_s or 0.0), train_seconds=train_seconds,
        loss_scale=mp.scale, resumed_from_epoch=start_epoch, steps_trained=mp.totals["steps"] - steps_before,
        compile=config.compile, checkpointing=config.checkpointing, strategy=mp.placement.strategy, world_size=world,
        compile_s=compile_s, grad_accum=accum,
        history=history,
    )


def _accumulate(workload: Workload, model: nn.Module, mp: MixedPrecision,
                group: list[tuple[tuple[torch.Tensor, ...], torch.Tensor]], samples: int,
                deferred: Callable[[], Any] | None = None) -> torch.Tensor:
    """One optimizer step's forwards and backwards, a micro-batch at a time; the step's loss (detached where there
    are several micro-batches: their losses weighted by their share of the ``samples``, summed).

    A micro-batch's mean loss weighted by its share of the step's samples makes the accumulated gradients those of
    the whole batch's mean loss (a short last batch weighs less). Under DDP the micro-batches before the last run
    under ``no_sync`` (their gradients add up on each rank; the last backward all-reduces the sum: one reduction a
    step) -- except in master-* modes, whose backward moves the half gradients into the fp32 masters (and clears them)
    before the next one, so a skipped reduction would never happen: there, and under FSDP2 (whose skipped
    reduce-scatters would hold every unsharded gradient), every micro-batch's gradients are reduced as its backward
    ends. ``deferred``: :func:`~ampbench.distributed.wrap.deferred_sync`'s answer for this model, found once a
    training (None: every micro-batch reduced)."""
    if len(group) == 1:  # (no accumulation: the step as it always was, no extra op)
        (inputs, targets), = group
        with mp.autocast():
            loss = workload.loss_fn(workload.call_model(model, inputs), targets)
        mp.backward(loss)
        return loss
    total: torch.Tensor | None = None
    for i, (inputs, targets) in enumerate(group):
        with deferred() if deferred is not None and i < len(group) - 1 else contextlib.nullcontext():
            with mp.autocast():
                loss = workload.loss_fn(workload.call_model(model, inputs), targets) * (int(targets.shape[0]) / samples)
            mp.backward(loss)
        total = loss.detach() if total is None else total + loss.detach()
    assert total is not None
    return total


def _epoch_scalars(workload: Workload, test_data: TensorData | None, mp: MixedPrecision, batch_size: int,
                   done: dict[str, Any], samples_per_s: float, optimizer: torch.optim.Optimizer,
                   device: torch.device) -> dict[str, float | None]:
    """An epoch's log: its last loss, samples/s, loss scale, skipped steps, learning rate, memory (the CUDA
    allocator's peak so far, or this process's resident memory on a CPU) and the test split's loss and metric."""

    out: dict[str, float | None] = {
        "loss": done["loss"], "samples_per_s": samples_per_s if done["seconds"] > 0 else None,
        "loss_scale": done["loss_scale"], "skipped_steps": done["skipped_steps"], "lr": optimizer.param_groups[0]["lr"],
    }
    if device.type == "cuda":
        out["memory_peak_allocated_bytes"] = torch.cuda.max_memory_allocated(device)
    else:
        out["memory_rss_bytes"] = rss()
    if test_data is not None:
        test_loss, metric = evaluate(workload, test_data, mp, eval_batch(batch_size))
        out["test_loss"] = test_loss
        if workload.metric is not None:
            out[f"test_{workload.metric.name}"] = metric
    return out


def _rate(samples: int, seconds: float, compile_samples: int, compile_s: float) -> float:
    """Samples/s without the compiling first step (with it when that was the only step)."""
    if samples > compile_samples and seconds > compile_s:
        return (samples - compile_samples) / (seconds - compile_s)
    return samples / seconds if seconds > 0 else 0.0


def _check_resumable(state: Any, path: Path, workload: Workload, precision: str, optimizer_state: str | None) -> None:
    """The checkpoint is ampbench's, of this workload, precision, preset, data and optimizer-state precision."""
    if not isinstance(state, dict) or not {"model", "optimizer", "mp", "rng", "epoch"} <= set(state):
        raise AmpbenchError(f"--resume: {path} is not an ampbench training checkpoint (written by ampbench train "
                            "--checkpoint DIR)")
    mine = {"workload": workload.name, "precision": precision, "preset": workload.preset, "data": workload.description}
    for key, value in mine.items():
        saved = state.get(key)
        if saved is not None and saved != value:
            hint = " (give the same --data-dir)" if key == "data" else ""
            raise AmpbenchError(f"--resume: {path} was written for {key} {saved!r}, this run is {value!r}{hint}")
    saved_state = state.get("optimizer_state")  # (None: the optimizer as built, and every checkpoint before the key)
    if saved_state != optimizer_state:
        flag = f"--optimizer-state {saved_state}" if saved_state else "no --optimizer-state"
        raise AmpbenchError(f"--resume: {path} was written with optimizer states {saved_state or 'as built'}, this run "
                            f"asks for {optimizer_state or 'the optimizer as built'}: resume with {flag}")
