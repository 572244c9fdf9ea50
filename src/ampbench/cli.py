"""Command line: thin layer over the library (parse, validate, print).

Every user error is one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

import ampbench
from ampbench.errors import AmpbenchError

app = typer.Typer(
    name="ampbench",
    help="Mixed precision training for PyTorch, measured: every precision mode side by side.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)


def _version(value: bool) -> None:
    if value:
        import torch

        console.print(f"ampbench {ampbench.__version__} (torch {torch.__version__})")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        Optional[bool],  # noqa: UP045 (typer needs Optional on py3.10)
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = None,
) -> None:
    """ampbench: how much faster, how much less memory, does it still converge, which mode to use."""


@app.command("list")
def list_cmd(
    what: Annotated[str, typer.Argument(help="What to list: precisions, workloads or all.")] = "all",
) -> None:
    """List precision modes (aliases, what each does) and workloads (presets, data, paper config)."""
    choices = ("all", "precisions", "workloads")
    if what not in choices:
        raise AmpbenchError(f"cannot list {what!r}: choose one of {', '.join(choices)}")
    if what in ("all", "precisions"):
        _list_precisions()
    if what in ("all", "workloads"):
        _list_workloads()


def _list_workloads() -> None:
    from ampbench.workloads import PRESETS, get_spec, list_workloads

    table = Table(title=f"Workloads (presets: {', '.join(PRESETS)})", title_justify="left")
    table.add_column("name", style="bold cyan", no_wrap=True)
    table.add_column("what it is", overflow="fold")
    table.add_column("paper preset", overflow="fold")
    table.add_column("--data-dir", overflow="fold")
    table.add_column("options")
    for name in list_workloads():
        spec = get_spec(name)
        table.add_row(name, spec.description, spec.paper, spec.data, ", ".join(spec.options()) or "-")
    table.add_row("timm:<model>", "any timm model (optional extra: ampbench[timm])", "-", "-", "-")
    table.add_row("hf:<config>", "HF transformers sequence classifier from a config (extra: ampbench[hf])",
                  "-", "-", "-")
    table.add_row("--model F:fn", "your own model: file.py:factory or package.module:factory", "-",
                  "MNIST IDX / CIFAR-10", "-")
    console.print(table)


def _list_precisions() -> None:
    from ampbench.precision import get, list_precisions, supported
    table = Table(title="Precision modes", title_justify="left")
    table.add_column("name", style="bold cyan", no_wrap=True)
    table.add_column("aliases", no_wrap=True)
    table.add_column("loss scale", no_wrap=True)
    table.add_column("what it does")
    table.add_column("on this machine")
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    for name in list_precisions():
        recipe = get(name)
        sup = supported(name, device)
        here = f"[green]ok[/] ({device})" if sup.ok else f"[red]no[/]: {sup.reason}"
        if sup.ok and sup.note:
            here += f" [yellow]{sup.note}[/]"
        table.add_row(name, ", ".join(recipe.aliases), recipe.default_loss_scale, recipe.summary, here)
    console.print(table)


def _parse_options(items: list[str] | None) -> dict[str, object]:
    out: dict[str, object] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise AmpbenchError(f"--option {item!r}: expected KEY=VALUE (e.g. --option task=span)")
        out[key.replace("-", "_")] = int(value) if value.isdigit() else value
    return out


def load_workload(workload: str | None, model: str | None, preset: str, data_dir: Path | None, seed: int,
                  input_shape: str | None, num_classes: int | None, options: list[str] | None):
    """A workload by name, or the user's ``--model`` (exactly one of the two)."""
    from ampbench.workloads import create_user_workload, create_workload

    if (workload is None) == (model is None):
        raise AmpbenchError("give a WORKLOAD name (see: ampbench list workloads) or --model file.py:factory, not both")
    if model is not None:
        if options:
            raise AmpbenchError("--option applies to named workloads, not --model")
        return create_user_workload(model, input_shape, num_classes, data_dir, preset, seed)
    if input_shape is not None or num_classes is not None:
        raise AmpbenchError("--input-shape/--num-classes apply to --model only")
    return create_workload(workload, preset, data_dir, seed, **_parse_options(options))


@app.command("train")
def train_cmd(
    workload: Annotated[Optional[str], typer.Argument(help="Workload name (ampbench list workloads).")] = None,  # noqa: UP045
    precision: Annotated[str, typer.Option("--precision", "-p", help="Precision mode or alias.")] = "amp-bf16",
    preset: Annotated[str, typer.Option(help="tiny | small | paper.")] = "small",
    epochs: Annotated[Optional[int], typer.Option(help="Epochs (default: the workload's).")] = None,  # noqa: UP045
    batch_size: Annotated[Optional[int], typer.Option(help="Batch size (default: the workload's).")] = None,  # noqa: UP045
    data_dir: Annotated[Optional[Path], typer.Option(help="Real data (format per workload).")] = None,  # noqa: UP045
    checkpoint: Annotated[Optional[Path], typer.Option(help="Directory for checkpoint.pt, written each epoch.")] = None,  # noqa: UP045
    resume: Annotated[bool, typer.Option(help="Resume from --checkpoint DIR.")] = False,
    seed: Annotated[int, typer.Option(help="Seed for init, data order and dropout.")] = 0,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="Write the final metrics as JSON.")] = None,  # noqa: UP045
    device: Annotated[Optional[str], typer.Option(help="cpu, cuda or cuda:N (default: cuda if present).")] = None,  # noqa: UP045
    loss_scale: Annotated[Optional[str], typer.Option(help="none | dynamic | hysteresis[:N] | static:V.")] = None,  # noqa: UP045
    max_steps: Annotated[Optional[int], typer.Option(help="Cap on steps per epoch (quick runs).")] = None,  # noqa: UP045
    model: Annotated[Optional[str], typer.Option("--model", help="Your model: file.py:factory or pkg.mod:factory.")] = None,  # noqa: UP045
    input_shape: Annotated[Optional[str], typer.Option(help="C,H,W of synthetic inputs for --model.")] = None,  # noqa: UP045
    num_classes: Annotated[Optional[int], typer.Option(help="Classes of synthetic data for --model.")] = None,  # noqa: UP045
    option: Annotated[Optional[list[str]], typer.Option("--option", "-o", help="Workload option KEY=VALUE.")] = None,  # noqa: UP045
) -> None:
    """Train a workload (or your --model) in one precision mode; evaluate train/test metrics at the end."""
    import json

    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from ampbench.precision import resolve
    from ampbench.train import TrainConfig, train

    resolve(precision)  # fail fast on a bad name, before building data
    config = TrainConfig(precision=precision, epochs=epochs, batch_size=batch_size, seed=seed, device=device,
                         loss_scale=loss_scale, checkpoint_dir=checkpoint, resume=resume, max_steps_per_epoch=max_steps)
    wl = load_workload(workload, model, preset, data_dir, seed, input_shape, num_classes, option)
    console.print(f"[bold]{wl.name}[/] ({wl.description}, preset {wl.preset}) in [bold cyan]{resolve(precision)}[/]")
    with Progress(TextColumn("epoch {task.fields[epoch]}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TextColumn("{task.fields[info]}"), TimeRemainingColumn(), console=console, transient=False) as bar:
        task = bar.add_task("train", total=None, epoch="-", info="")

        def on_progress(p) -> None:  # type: ignore[no-untyped-def]
            bar.update(task, total=p.steps, completed=p.step, epoch=f"{p.epoch}/{p.epochs}",
                       info=f"loss {p.loss:.4f}  scale {p.scale:g}  {p.samples_per_s:,.0f} samples/s")

        result = train(wl, config, on_progress)
    m = result.metric_name or "metric"
    fmt = (lambda v: f"{v:.2%}") if m in ("accuracy", "exact_match", "pixel_accuracy") else (lambda v: f"{v:.4g}")
    parts = [f"train {m} {fmt(result.train_metric)}" if result.train_metric is not None else "",
             f"test {m} {fmt(result.test_metric)}" if result.test_metric is not None else ""]
    console.print(f"{result.precision} on {result.device}: {'  '.join(p for p in parts if p)}  "
                  f"final loss {result.final_loss:.4f}  {result.samples_per_s:,.0f} samples/s  "
                  f"skipped steps {result.skipped_steps}")
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(result.to_dict(), indent=2))
        console.print(f"wrote {json_out}")


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: AmpbenchError -> one line on stderr, exit code 2."""
    try:
        app(args=argv, standalone_mode=False, prog_name="ampbench")
    except AmpbenchError as e:
        err_console.print(f"[red]error:[/] {e}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        err_console.print("aborted")
        sys.exit(130)
    except Exception as e:  # click usage errors (bad option, missing argument)
        import click

        if type(e).__name__ == "NoArgsIsHelpError":  # help was printed
            sys.exit(0)
        if isinstance(e, click.exceptions.UsageError):
            msg = e.format_message()
            cmd = e.ctx.command_path if e.ctx else "ampbench"
            hint = f" (see: {cmd} --help)"
            err_console.print(f"[red]error:[/] {msg}{hint}", highlight=False, soft_wrap=True)
            sys.exit(2)
        if isinstance(e, click.exceptions.ClickException):
            err_console.print(f"[red]error:[/] {e.format_message()}", highlight=False, soft_wrap=True)
            sys.exit(e.exit_code)
        raise
