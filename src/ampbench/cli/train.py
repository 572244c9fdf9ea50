"""``ampbench train``: one workload (or your --model) in one precision mode, one or many ranks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from ampbench.cli import declared
from ampbench.cli.core import app, console, err_console, invocation
from ampbench.cli.examples import MODEL_EXAMPLES
from ampbench.command_options import CommandTarget, DataArgs, TrainDistribution, TrainSettings
from ampbench.paths import write_text_atomic


@app.command("train", epilog=MODEL_EXAMPLES)
@declared.command
def train_cmd(target: CommandTarget, data: DataArgs, settings: TrainSettings, distribution: TrainDistribution) -> None:
    """Train a workload (or your --model) in one precision mode; evaluate train/test metrics at the end."""
    from ampbench.command_requests import TrainRequest  # lazy: torch

    request = TrainRequest.of(target, data, settings, distribution, argv=tuple(invocation()))
    outcome = request.target.framework.commands().train(request, request.plan, ConsoleView())
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
