"""``ampbench train``: one workload (or your --model) in one precision mode, one or many ranks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape

from ampbench.cli import options as o
from ampbench.cli.core import app, console, err_console, plural
from ampbench.cli.render import workload_header
from ampbench.errors import AmpbenchError
from ampbench.paths import check_output_dir, check_output_file, write_text_atomic


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
) -> None:
    """Train a workload (or your --model) in one precision mode; evaluate train/test metrics at the end."""
    from ampbench import frameworks
    from ampbench.precision import resolve
    from ampbench.workloads import build_target

    resolve(precision)  # fail fast on a bad name, before building data
    fw, resolved = frameworks.of_command(workload, model, backend, preset, seed)
    data = o.data_options(input_shape, vocab_size, num_classes, num_outputs, task, batches, loss, data_dir, val_fraction,
                          option)
    if fw.train_job() is not None:  # another framework's model: trained under its recipe, in a process of its own
        return _train_apart(fw, resolved, workload, model, precision, preset, epochs, batch_size, seed, device, max_steps,
                            data, json_out, {
            "--loss-scale": loss_scale is not None, "--compile": compile is not None, "--strategy": strategy is not None,
            "--checkpoint/--resume": checkpoint is not None or resume, "--tensorboard": tensorboard is not None,
            "--fp8-skip/--fp8-filter": fp8_skip is not None or fp8_filter is not None,
            "--data-dir/--option": data_dir is not None or bool(option)})
    from ampbench.frameworks.torch.train import TrainConfig
    from ampbench.launch import check_nodes, is_rank
    from ampbench.precision import Fp8Options
    auto_compile = compile is None
    compile = _train_compile(compile, precision, device)
    if strategy is not None and nproc_per_node < 1:
        raise AmpbenchError(f"--nproc-per-node must be >= 1, got {nproc_per_node}")
    check_nodes(strategy, nnodes, node_rank, rdzv_endpoint)
    rank_worker = strategy is not None and is_rank()  # a rank torchrun started
    config = TrainConfig(precision=precision, epochs=epochs, batch_size=batch_size, seed=seed, device=device,
                         loss_scale=loss_scale, checkpoint_dir=checkpoint, resume=resume, max_steps_per_epoch=max_steps,
                         compile=compile.strip(), strategy=strategy, grad_reduce_dtype=grad_reduce_dtype,
                         fp8=Fp8Options.for_modes([precision], fp8_skip, fp8_filter))
    _check_outputs(checkpoint if not resume else None, json_out, tensorboard)  # (--resume: train() checks it exists)
    data.check_targets([workload] if workload else [], model)  # type: ignore[attr-defined]
    if strategy is not None and not rank_worker:  # validated here, once; then torchrun starts the ranks
        build_target(workload, model, preset, data, seed)  # type: ignore[arg-type]
        raise typer.Exit(_launch_train_ranks(nproc_per_node, nnodes, node_rank, rdzv_endpoint))
    if rank_worker:
        _join_process_group(device)
    wl = build_target(workload, model, preset, data, seed)  # type: ignore[arg-type]
    result = _train_here(wl, config, tensorboard, compiled_by_default=auto_compile and compile == "on")
    _print_result(result, tensorboard, json_out)


def _check_outputs(checkpoint: Path | None, json_out: Path | None, tensorboard: Path | None) -> None:
    """The files and directories the training will write, checked before it starts (one line each)."""
    check_output_dir(checkpoint, "--checkpoint", "checkpoint.pt")
    check_output_file(json_out, "--json")
    if tensorboard is not None:
        from ampbench.tensorboard import open_dir

        open_dir(tensorboard)


def _train_here(wl: Any, config: Any, tensorboard: Path | None, compiled_by_default: bool) -> Any:
    """Train ``wl`` in this process with a progress bar (and TensorBoard scalars when asked)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from ampbench.frameworks.torch.train import train
    from ampbench.precision import resolve

    console.print(f"{workload_header(wl)} in [bold cyan]{resolve(config.precision)}[/]")
    if compiled_by_default:
        console.print("[dim]fp8 on CUDA: training the torch.compile'd model (torchao's float8 is built to be compiled); "
                      "--compile off trains it eager[/]")

    with Progress(TextColumn("epoch {task.fields[epoch]}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TextColumn("{task.fields[info]}"), TimeRemainingColumn(), console=console, transient=False) as bar:
        task = bar.add_task("train", total=None, epoch="-", info="")

        def on_progress(p) -> None:  # type: ignore[no-untyped-def]
            bar.update(task, total=p.steps, completed=p.step, epoch=f"{p.epoch}/{p.epochs}",
                       info=f"loss {p.loss:.4f}  scale {p.scale:g}  {p.samples_per_s:,.0f} samples/s")

        log = None
        if tensorboard is not None:
            from ampbench.tensorboard import TrainLogger

            log = TrainLogger(tensorboard)
        try:
            result = train(wl, config, on_progress, log=log)
        finally:
            if log is not None:
                log.close()
    return result


def _print_result(result: Any, tensorboard: Path | None, json_out: Path | None) -> None:
    """The trained model's line (metrics, loss, speed, steps), the TensorBoard hint and the JSON file."""
    import json

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


def _train_compile(value: str | None, precision: str, device: str) -> str:
    """--compile as given; without it off, except fp8 on CUDA: on (torchao's float8 is built to be compiled)."""
    from ampbench.bench.config import fp8_compiles_by_default
    from ampbench.measure.env import resolve_device

    if value is not None:
        return value.strip()
    return "on" if fp8_compiles_by_default(False, str(resolve_device(device)), [precision]) else "off"


def _launch_train_ranks(nproc: int, nnodes: int, node_rank: int, endpoint: str | None) -> int:
    """`ampbench train --strategy S`: the same command in ``nproc`` ranks per machine started by torchrun (global
    rank 0 prints); the launcher dies with this process and the ranks with the launcher. Returns its exit code."""
    from ampbench.cli.core import invocation
    from ampbench.launch import relaunch

    return relaunch(invocation(), nproc, nnodes, node_rank, endpoint)


def _join_process_group(device: str | None) -> None:
    """A rank of `ampbench train --strategy`: dies with its launcher, joins the process group on its device; ranks
    other than 0 print nothing."""
    import torch.distributed as dist

    from ampbench.launch import die_with_launcher, join_process_group

    die_with_launcher()  # no rank outlives its launcher
    join_process_group(device)
    if dist.get_rank() != 0:
        console.quiet = True



def _train_apart(fw: Any, backend: str | None, workload: str | None, model: str | None, precision: str,
                 preset: str | None, epochs: int | None, batch_size: int | None, seed: int, device: str | None,
                 max_steps: int | None, data: Any, json_out: Path | None, given: dict[str, bool]) -> None:
    """``ampbench train`` of another framework's model: every check here, then the epochs in a child process (its
    backend, its ``train_job``)."""
    import json

    from ampbench.launch import ChildProcess, Job

    spec = fw.command_spec(backend, workload, model, precision, preset, batch_size, device, seed, data, given)
    what, precision = workload or f"--model {model}", spec.precision
    for flag, v in (("--epochs", epochs), ("--batch-size", batch_size), ("--max-steps", max_steps)):
        if v is not None and v < 1:
            raise AmpbenchError(f"{flag} must be >= 1, got {v}")
    data.check_targets([workload] if workload else [], model)
    check_output_file(json_out, "--json")
    shown: list[str] = []

    def on_progress(e: Any) -> None:
        line = f"{e.what} {e.detail}".strip()
        if line not in shown and not console.quiet:
            shown.append(line)
            console.print(escape(line))

    console.print(f"[bold]{escape(what)}[/] ({escape(fw.describe(backend))}, preset {escape(spec.preset)}) in "
                  f"[bold cyan]{precision}[/]")
    r = ChildProcess(on_progress=on_progress).run(Job(fw.train_job(), {"spec": spec.to_dict(), "epochs": epochs,
                                                                      "max_steps": max_steps}))
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
