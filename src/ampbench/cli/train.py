"""``ampbench train``: one workload (or your --model) in one precision mode, one or many ranks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from ampbench.cli import options as o
from ampbench.cli.core import app, console, err_console, invocation, plural
from ampbench.cli.render import workload_header
from ampbench.errors import AmpbenchError
from ampbench.launch import ChildProcess, Job, become_rank, is_rank, relaunch
from ampbench.paths import write_text_atomic
from ampbench.tensorboard import TrainLogger


@app.command("train", epilog=o.MODEL_EXAMPLES)
def train_cmd(
    workload: o.WorkloadArg = None,
    precision: o.mode_option("Precision mode or alias.") = "amp-bf16",
    preset: o.PresetOpt = None,
    epochs: Annotated[Optional[int], typer.Option(help="Epochs (default: the workload's).")] = None,  # noqa: UP045
    batch_size: o.BatchSizeOpt = None,
    data_dir: o.DataDirOpt = None,
    val_fraction: o.ValFractionOpt = None,
    checkpoint: Annotated[Optional[Path], typer.Option(help="Directory for checkpoint.pt, written each epoch.")] = None,  # noqa: UP045
    resume: Annotated[bool, typer.Option(help="Resume from --checkpoint DIR.")] = False,
    seed: Annotated[int, typer.Option(help="Seed for init, data order and dropout.")] = 0,
    json_out: o.json_option("the final metrics") = None,
    device: o.DeviceOpt = None,
    loss_scale: o.LossScaleOpt = None,
    max_steps: Annotated[Optional[int], typer.Option(help="Cap on steps per epoch (quick runs).")] = None,  # noqa: UP045
    model: o.ModelOpt = None,
    input_shape: o.InputShapeOpt = None,
    vocab_size: o.VocabSizeOpt = None,
    num_classes: o.NumClassesOpt = None,
    num_outputs: o.NumOutputsOpt = None,
    task: o.TaskOpt = None,
    batches: o.BatchesOpt = None,
    loss: o.LossOpt = None,
    option: o.OptionOpt = None,
    fp8_skip: o.Fp8SkipOpt = None,
    fp8_filter: o.Fp8FilterOpt = None,
    compile: Annotated[o.Opt[str], typer.Option("--compile", help="off | on | max-autotune: train the torch.compile'd "
                                              "model (the first step, which compiles, is timed apart). Default off; "
                                              "on for fp8 on CUDA.")] = None,
    strategy: Annotated[o.Opt[str], typer.Option("--strategy", help="ddp | fsdp: train over --nproc-per-node ranks "
                                               "(torchrun); --batch-size is per rank.")] = None,
    nproc_per_node: o.NprocOpt = 2,
    grad_reduce_dtype: Annotated[o.Opt[str], typer.Option("--grad-reduce-dtype", help="With --strategy: fp32 | bf16 | "
                                                        "fp16 (default: the gradients' own dtype).")] = None,
    nnodes: o.NnodesOpt = 1,
    node_rank: o.NodeRankOpt = 0,
    rdzv_endpoint: o.RdzvOpt = None,
    tensorboard: o.TensorboardOpt = None,
    backend: o.BackendOpt = None,
    optimizer_state: o.OptimizerStateOpt = None,
) -> None:
    """Train a workload (or your --model) in one precision mode; evaluate train/test metrics at the end."""
    from ampbench.command_requests import Launch, Target, TrainRequest, data_options  # lazy: torch

    data = data_options(input_shape, vocab_size, num_classes, num_outputs, task, batches, loss, data_dir, val_fraction,
                        option)
    request = TrainRequest(
        Target(workload, model, preset, seed, data, backend_given=backend), precision=precision, epochs=epochs,
        batch_size=batch_size, max_steps=max_steps, device=device, json_out=json_out, checkpoint=checkpoint,
        resume=resume, tensorboard=tensorboard, launch=Launch(strategy, nproc_per_node, nnodes, node_rank, rdzv_endpoint),
        loss_scale=loss_scale, compile=compile, fp8_skip=fp8_skip, fp8_filter=fp8_filter,
        grad_reduce_dtype=grad_reduce_dtype, optimizer_state=optimizer_state)
    if request.apart_spec is not None:  # another framework's model: trained under its recipe, in a process of its own
        return _train_apart(request)
    _train_pytorch(request)


def _train_pytorch(request: Any) -> None:
    """A PyTorch target: trained here, or over the ranks torchrun starts (``--strategy``)."""
    from ampbench.frameworks.torch.train import TrainConfig  # lazy: torch
    from ampbench.precision.optimizer_state import check_built  # lazy: torch
    from ampbench.workloads import build_target  # lazy: torch

    t, launch = request.target, request.launch
    compile = request.compile_mode
    rank_worker = launch.given() and is_rank()  # a rank torchrun started
    config = TrainConfig(precision=request.precision, epochs=request.epochs, batch_size=request.batch_size,
                         seed=t.seed, device=request.device, loss_scale=request.loss_scale,
                         checkpoint_dir=request.checkpoint, resume=request.resume,
                         max_steps_per_epoch=request.max_steps, compile=compile, strategy=launch.strategy,
                         grad_reduce_dtype=request.grad_reduce_dtype, fp8=request.fp8(),
                         optimizer_state=request.optimizer_state)
    if launch.given() and not rank_worker:  # validated here, once; then torchrun starts the ranks
        build_target(t.workload, t.model, t.preset, t.data, t.seed)
        # the same command in launch.nproc ranks per machine (the launcher dies with this process, the ranks with it)
        raise typer.Exit(relaunch(invocation(), launch.nproc, launch.nnodes, launch.node_rank, launch.rdzv_endpoint))
    if rank_worker and become_rank(request.device) != 0:
        console.quiet = True  # (rank 0 prints)
    wl = build_target(t.workload, t.model, t.preset, t.data, t.seed)
    check_built(wl.make_optimizer, wl.model.parameters(), request.precision, request.optimizer_state)  # (before the bar)
    result = _train_here(wl, config, request.tensorboard, compiled_by_default=request.compile is None and compile == "on")
    _print_result(result, request.tensorboard, request.json_out)


def _train_here(wl: Any, config: Any, tensorboard: Path | None, compiled_by_default: bool) -> Any:
    """Train ``wl`` in this process with a progress bar (and TensorBoard scalars when asked)."""

    from ampbench.frameworks.torch.train import train  # lazy: torch
    from ampbench.precision import resolve  # lazy: torch

    console.print(f"{workload_header(wl)} in [bold cyan]{resolve(config.precision)}[/]")
    if compiled_by_default:
        console.print("[dim]fp8 on CUDA: training the torch.compile'd model (torchao's float8 is built to be compiled); "
                      "--compile off trains it eager[/]")

    bar = Progress(TextColumn("epoch {task.fields[epoch]}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                   TextColumn("{task.fields[info]}"), TimeRemainingColumn(), console=console, transient=False)
    task: list[Any] = []  # (the bar is drawn at the first step: every refusal before it prints alone)

    def on_progress(p) -> None:  # type: ignore[no-untyped-def]
        if not task:
            bar.start()
            task.append(bar.add_task("train", total=p.steps, epoch="-", info=""))
        bar.update(task[0], total=p.steps, completed=p.step, epoch=f"{p.epoch}/{p.epochs}",
                   info=f"loss {p.loss:.4f}  scale {p.scale:g}  {p.samples_per_s:,.0f} samples/s")

    log = None
    if tensorboard is not None:
        log = TrainLogger(tensorboard)
    try:
        result = train(wl, config, on_progress, log=log)
    finally:
        if task:
            bar.stop()
        if log is not None:
            log.close()
    return result


def _print_result(result: Any, tensorboard: Path | None, json_out: Path | None) -> None:
    """The trained model's line (metrics, loss, speed, steps), the TensorBoard hint and the JSON file."""

    m = result.metric_name or "metric"
    fmt = (lambda v: f"{v:.2%}") if m in ("accuracy", "exact_match", "pixel_accuracy") else (lambda v: f"{v:.4g}")
    parts = [f"train {m} {fmt(result.train_metric)}" if result.train_metric is not None else "",
             f"test {m} {fmt(result.test_metric)}" if result.test_metric is not None else ""]
    resumed = f" (resumed at epoch {result.resumed_from_epoch})" if result.resumed_from_epoch else ""
    if result.compile_s is not None:
        resumed += f" (compiled: first step {result.compile_s:.1f} s, left out of samples/s)"
    if result.strategy:
        resumed += f" ({result.strategy} x{result.world_size}: samples/s of all ranks)"
    console.print(escape(f"{result.precision} on {result.device}{resumed}: {'  '.join(p for p in parts if p)}  "
                         f"final loss {result.final_loss:.4f}  {result.samples_per_s:,.0f} samples/s  "
                         f"{plural(result.steps_trained, 'step')} trained, skipped steps {result.skipped_steps}"))
    if tensorboard is not None and not console.quiet:
        console.print(f"TensorBoard: tensorboard --logdir {escape(str(tensorboard))}")
    if json_out is not None and not console.quiet:  # (one rank writes it)
        write_text_atomic(json_out, json.dumps(result.to_dict(), indent=2))
        console.print(f"wrote {escape(str(json_out))}")


def _train_apart(request: Any) -> None:
    """``ampbench train`` of another framework's model (checked by the request): the epochs in a child process (its
    backend, its ``train_job``)."""
    fw, spec, t = request.target.framework, request.apart_spec, request.target
    what = t.workload or f"--model {t.model}"
    shown: list[str] = []

    def on_progress(e: Any) -> None:
        line = f"{e.what} {e.detail}".strip()
        if line not in shown and not console.quiet:
            shown.append(line)
            console.print(escape(line))

    console.print(f"[bold]{escape(what)}[/] ({escape(fw.describe(t.backend))}, preset {escape(spec.preset)}) in "
                  f"[bold cyan]{spec.precision}[/]")
    r = ChildProcess(on_progress=on_progress).run(Job(fw.train_job(), {"spec": spec.to_dict(), "epochs": request.epochs,
                                                                      "max_steps": request.max_steps}))
    json_out = request.json_out
    if "_failed" in r:
        err_console.print(f"[red]error:[/] training {escape(what)} failed: {escape(r['_failed'])}")
        raise typer.Exit(1)
    if r.get("error"):
        raise AmpbenchError(r["error"])
    for note in r.get("warnings") or []:
        err_console.print(f"[yellow]warning:[/] {escape(note)}")
    console.print(escape(r.pop("summary")))
    if json_out is not None:
        write_text_atomic(json_out, json.dumps(r, indent=2))
        console.print(f"wrote {escape(str(json_out))}")
