"""``ampbench train``: one workload (or your --model) in one precision mode, one or many ranks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from ampbench.cli import options as o
from ampbench.cli.core import app, console, err_console, invocation
from ampbench.paths import write_text_atomic


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
        grad_reduce_dtype=grad_reduce_dtype, optimizer_state=optimizer_state, argv=tuple(invocation()))
    outcome = request.target.framework.train(request, request.plan, ConsoleView())
    if outcome.exit_code is not None:  # (trained by torchrun's ranks: theirs is the command's exit code)
        raise typer.Exit(outcome.exit_code)
    _print_outcome(outcome, request.tensorboard, request.json_out)


class ConsoleView:
    """The console's :class:`ampbench.seam.TrainView`: a progress bar drawn at the first step (every refusal before
    it prints alone), lines as training goes."""

    def __init__(self) -> None:
        self.bar = Progress(TextColumn("epoch {task.fields[epoch]}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                            TextColumn("{task.fields[info]}"), TimeRemainingColumn(), console=console, transient=False)
        self.task: list[Any] = []

    @property
    def quiet(self) -> bool:
        return console.quiet

    @quiet.setter
    def quiet(self, value: bool) -> None:
        console.quiet = value

    def begin(self, name: str, about: str, precision: str) -> None:
        console.print(f"[bold]{escape(name)}[/] ({escape(about)}) in [bold cyan]{escape(precision)}[/]")

    def note(self, text: str) -> None:
        console.print(f"[dim]{escape(text)}[/]")

    def step(self, epoch: str, step: int, steps: int, info: str) -> None:
        if not self.task:
            self.bar.start()
            self.task.append(self.bar.add_task("train", total=steps, epoch="-", info=""))
        self.bar.update(self.task[0], total=steps, completed=step, epoch=epoch, info=info)

    def event(self, text: str) -> None:
        if not console.quiet:
            console.print(escape(text))

    def done(self) -> None:
        if self.task:
            self.bar.stop()


def _print_outcome(outcome: Any, tensorboard: Path | None, json_out: Path | None) -> None:
    """The trained model's line, the TensorBoard hint and the JSON file (one rank writes it); a training whose
    process died: its error, exit 1."""
    if outcome.error:
        err_console.print(f"[red]error:[/] {escape(outcome.error)}")
        raise typer.Exit(1)
    for note in outcome.warnings:
        err_console.print(f"[yellow]warning:[/] {escape(note)}")
    console.print(escape(outcome.summary))
    if tensorboard is not None and not console.quiet:
        console.print(f"TensorBoard: tensorboard --logdir {escape(str(tensorboard))}")
    if json_out is not None and not console.quiet:
        write_text_atomic(json_out, json.dumps(outcome.data, indent=2))
        console.print(f"wrote {escape(str(json_out))}")
