"""``ampbench train`` and ``ampbench diagnose`` of a PyTorch model: the torch framework's verbs
(:class:`ampbench.seam.Framework`), in the command's process -- or, for ``train --strategy``, in the ranks torchrun
starts with the same command line.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ampbench.command_requests import DiagnoseRequest, TrainRequest
from ampbench.diagnose import diagnose as run_checks
from ampbench.errors import AmpbenchError, UnsupportedPrecisionError
from ampbench.execution.checkpointing import check_blocks
from ampbench.frameworks.torch.train import TrainConfig, check_resume, epoch_steps
from ampbench.frameworks.torch.train import train as train_workload
from ampbench.launch import become_rank, is_rank, relaunch
from ampbench.measure.env import resolve_device
from ampbench.measure.trainable import check_trainable, unused_note, unused_parameters
from ampbench.paths import check_output_dir
from ampbench.precision import get, half_gradients, resolve, supported
from ampbench.precision.optimizer_state import check as check_optimizer_state
from ampbench.precision.optimizer_state import check_built
from ampbench.seam import TrainOutcome, TrainView
from ampbench.tensorboard import TrainLogger, open_dir
from ampbench.train_line import train_line
from ampbench.workloads import build_target


def train_plan(request: TrainRequest) -> Any:
    """The :class:`~ampbench.frameworks.torch.train.TrainConfig` the request says, checked with the files it will
    write (before any data is built)."""

    compile = request.compile_mode  # (a bad --device fails here)
    device = resolve_device(request.device)
    support = supported(resolve(request.precision), device)
    if not support.ok:  # (it failed once the model was built and announced)
        raise UnsupportedPrecisionError(f"{resolve(request.precision)} cannot run on {device}: {support.reason}")
    if request.resume and request.checkpoint is None:
        raise AmpbenchError("--resume needs --checkpoint DIR (where the checkpoint was written)")
    if request.grad_reduce_dtype is not None and not request.launch.given():
        raise AmpbenchError("--grad-reduce-dtype applies to --strategy ddp or fsdp")
    fp8 = request.fp8()  # (refused unless the mode is an fp8 one)
    check_optimizer_state(request.precision, request.optimizer_state)
    check_output_dir(request.checkpoint if not request.resume else None, "--checkpoint", "checkpoint.pt")
    if request.tensorboard is not None:
        open_dir(request.tensorboard)
    return TrainConfig(precision=request.precision, epochs=request.epochs, batch_size=request.batch_size,
                       seed=request.target.seed, device=request.device, loss_scale=request.loss_scale,
                       checkpoint_dir=request.checkpoint, resume=request.resume,
                       max_steps_per_epoch=request.max_steps, compile=compile, strategy=request.launch.strategy,
                       grad_reduce_dtype=request.grad_reduce_dtype, fp8=fp8, optimizer_state=request.optimizer_state,
                       grad_accum=request.grad_accum, max_grad_norm=request.max_grad_norm,
                       checkpointing=(request.checkpointing or "off").strip())


def train(request: TrainRequest, config: Any, view: TrainView) -> TrainOutcome:
    """Train here, or (``--strategy``, in the command's own process) start torchrun's ranks running the same
    command: its exit code is the outcome's."""
    t, launch = request.target, request.launch
    rank_worker = launch.given() and is_rank()  # a rank torchrun started
    if launch.given() and not rank_worker:  # validated here, once; then torchrun starts the ranks
        wl = build_target(t.workload, t.model, t.preset, t.data, t.seed)
        check_trainable(wl.model, wl.make_optimizer, wl.name)
        world = launch.nproc * launch.nnodes
        check_resume(config, wl, resolve(config.precision), world)  # (before any rank starts)
        epoch_steps(wl, config.batch_size or wl.batch_size, config.grad_accum, world)  # (one step fits an epoch)
        # the same command in launch.nproc ranks per machine (the launcher dies with this process, the ranks with it)
        code = relaunch(list(request.argv), launch.nproc, launch.nnodes, launch.node_rank, launch.rdzv_endpoint)
        return TrainOutcome("", {}, exit_code=code)
    if rank_worker and become_rank(request.device) != 0:
        view.quiet = True  # (rank 0 prints)
    wl = build_target(t.workload, t.model, t.preset, t.data, t.seed)
    if config.checkpointing != "off":  # (no repeated blocks: refused before the header, as the other options)
        check_blocks(wl.model, wl.name, config.checkpointing)
    check_trainable(wl.model, wl.make_optimizer, wl.name)
    check_built(wl.make_optimizer, wl.model.parameters(), request.precision, request.optimizer_state)  # (before the bar)
    mode, device = resolve(config.precision), resolve_device(request.device)
    check_resume(config, wl, mode, launch.nproc * launch.nnodes if launch.given() else 1)  # (before the header)
    view.begin(wl.name, ", ".join(p for p in (wl.description, f"preset {wl.preset}") if p), mode)
    note = supported(mode, device).note
    if note:  # (a mode that runs here but not fast: emulated fp16 on most CPUs; run and diagnose said it, train not)
        view.note(f"{mode} on {device}: {note}")
    unused = unused_parameters(wl) if config.strategy == "ddp" else None
    if unused:  # (the ranks' own warnings are silenced: rank 0 says it here; train() tells DDP)
        view.note(unused_note(unused))
    half_grads = accumulates_in_half(mode, config.grad_accum)
    if half_grads:
        view.note(half_grads)
    if request.compile is None and config.compile == "on":
        view.note("fp8 on CUDA: training the torch.compile'd model (torchao's float8 is built to be compiled); "
                  "--compile off trains it eager")

    def on_progress(p: Any) -> None:
        view.step(f"{p.epoch}/{p.epochs}", p.step, p.steps,
                  f"loss {p.loss:.4f}  " + ("" if p.scale is None else f"scale {p.scale:g}  ")
                  + ("" if p.grad_norm is None else f"grad norm {p.grad_norm:.3g}  ") + f"{p.samples_per_s:,.0f} samples/s")

    log = TrainLogger(request.tensorboard) if request.tensorboard is not None else None
    try:
        result = train_workload(wl, config, on_progress, log=log)
    finally:
        view.done()
        if log is not None:
            log.close()
    return TrainOutcome(summary(result), result.to_dict())


def accumulates_in_half(mode: str, grad_accum: int) -> str | None:
    """The line that says a pure-half mode sums its micro-batches' gradients in its half dtype (None: it does not
    accumulate, or sums in fp32)."""
    if grad_accum == 1 or not half_gradients(mode):
        return None
    half = "bf16" if get(mode).param_dtype == torch.bfloat16 else "fp16"
    return (f"--grad-accum {grad_accum}: {mode} sums the micro-batches' gradients in {half}, its parameters' dtype "
            f"(each sum rounded to {half}); master-{half} sums them in fp32")


def summary(result: Any) -> str:
    """The trained model's line: metrics, loss, speed, steps."""
    resumed = f" (resumed after epoch {result.resumed_from_epoch})" if result.resumed_from_epoch else ""
    if result.grad_accum > 1:
        per = " per rank" if result.strategy else ""
        resumed += (f" (gradients accumulated over {result.grad_accum} micro-batches of {result.batch_size}{per}: "
                    f"{result.grad_accum * result.batch_size}{per} a step)")
    if result.checkpointing != "off":
        resumed += f" (checkpointing {result.checkpointing})"
    if result.compile_s is not None:
        resumed += f" (compiled: first step {result.compile_s:.1f} s, left out of samples/s)"
    if result.strategy:
        resumed += f" ({result.strategy} x{result.world_size}: samples/s of all ranks)"
    return train_line(f"{result.precision} on {result.device}{resumed}", result.metric_name, result.train_metric,
                      result.test_metric, result.final_loss, result.samples_per_s, result.steps_trained,
                      result.skipped_steps)


def diagnose_plan(request: DiagnoseRequest) -> None:
    return None  # (every check and option is PyTorch's: the request checked them)


def diagnose(request: DiagnoseRequest, plan: None, trace: Path | None,
             progress: Callable[[str], None] | None = None) -> Any:
    t = request.target

    def build():  # type: ignore[no-untyped-def]  (the checks call it once, and validate everything first)
        return build_target(t.workload, t.model, t.preset, t.data, t.seed)

    return run_checks(build, request.precision, steps=request.steps, preset=t.preset or "small",
                      batch_size=request.batch_size, device=request.device, seed=t.seed, checks=request.wanted,
                      trace=trace, name=t.label, mp_options=request.mp_options(), on_progress=progress)
