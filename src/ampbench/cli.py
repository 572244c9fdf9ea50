"""Command line: thin layer over the library (parse, validate, print).

Every user error is one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import sys
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
    what: Annotated[str, typer.Argument(help="What to list: precisions or all.")] = "all",
) -> None:
    """List precision modes (with aliases and what each does)."""
    from ampbench.precision import get, list_precisions, supported

    choices = ("all", "precisions")
    if what not in choices:
        raise AmpbenchError(f"cannot list {what!r}: choose one of {', '.join(choices)}")
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
