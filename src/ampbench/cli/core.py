"""The typer app, its consoles and ``main``: how every command ends.

Every user error is one line on stderr and exit code 2, never a traceback. Text that comes from users or data
(names, paths, reasons) is escaped before rich prints it: ``ampbench[timm]`` stays as written.

Exit codes: 0 success (for ``run``: every cell ok, or a status that is a measurement -- oom, diverged,
unsupported); 1 ``run`` finished but some cells errored (a crash, a timeout, data that failed while running), or
``compare --runs --fail-if-slower`` found a cell slower beyond the noise; 2 bad input, found before any work started;
130 interrupted.
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Optional

import click
import typer
import typer.main
from rich.console import Console
from rich.markup import escape

import ampbench
from ampbench.errors import AmpbenchError, ParameterError
from ampbench.store import Store

app = typer.Typer(
    name="ampbench",
    help="Mixed precision training for PyTorch, measured: every precision mode side by side.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
class _Console(Console):
    """Text is soft-wrapped (a message is one line at any width: a terminal wraps it for the eye, a log keeps it
    whole); tables and other renderables are laid out to the width (results tables stack to fit it)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if "width" not in kwargs:  # (rich froze the width COLUMNS had when the console was made -- at import; it is
            self._width = None  # read when printing: a process that sets COLUMNS later, a test, gets its width)

    def print(self, *objects: Any, **kwargs: Any) -> None:
        kwargs.setdefault("soft_wrap", all(isinstance(o, str) for o in objects))
        super().print(*objects, **kwargs)


# Width: the terminal's, else COLUMNS, else 80 (rich's rule).
console = _Console()
err_console = _Console(stderr=True)

_invocation: list[str] = []


def invocation() -> list[str]:
    """The arguments of the command being run (``train --strategy`` runs the same command again in each rank)."""
    return list(_invocation)


@contextlib.contextmanager
def working(text: str) -> Iterator[None]:
    """What runs now, for as long as it runs: a spinner in a terminal; in a log (where a spinner shows nothing, and
    minutes can pass) a line as it starts."""
    if console.is_terminal:
        with console.status(text):
            yield
    else:
        console.print(f"  [dim]{text} ...[/]", highlight=False)
        yield


@contextlib.contextmanager
def warned_once() -> Iterator[None]:
    """Inside, each warning (its category, text and where it was raised) is shown once. Python's own "once" keeps its
    record in the raising module, and a user's ``--model`` file is imported afresh for each build: a model traced for
    41 GPUs printed its warning 84 times."""
    shown: set[tuple[Any, ...]] = set()
    before = warnings.showwarning

    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        key = (category, str(message), filename, lineno)
        if key not in shown:
            shown.add(key)
            before(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = before


def open_store(db: Path | None, create: bool = True) -> Any:
    """The results store; ``create=False`` for commands that only read (a missing file is an error, not a new store).
    Closed when the command ends (:func:`main`): a command run in a process that goes on (the Python API, tests, a
    notebook) leaves no connection holding the file -- an unmount, a move or a delete of it is not refused as busy."""
    store = Store(db, create=create)
    _opened.append(store)
    return store


_opened: list[Any] = []


def _version(value: bool) -> None:
    if value:
        import torch  # lazy: torch

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


FLAGS = {"optimizer_state": "--optimizer-state", "fp8_filter": "--fp8-filter", "fp8_skip": "--fp8-skip",
         "max_steps_per_epoch": "--max-steps"}
"""The Python API's parameter names as the command line spells them (:class:`~ampbench.errors.ParameterError`)."""


def _no_such_option(e: click.exceptions.NoSuchOption) -> str:
    """Click's message, where it misleads, said better: an option spelling a positional argument (``train
    --workload mnist-cnn``: "Did you mean '--tensorboard'?") names the argument; a near miss that is the option's
    singular or plural (``run --workload``) is the one suggestion, not one of difflib's ("'--tensorboard',
    '--workloads'")."""
    wanted = e.option_name.lstrip("-").replace("-", "_")
    command = e.ctx.command if e.ctx else None
    for param in command.params if command else ():
        if isinstance(param, click.Argument) and param.name in (wanted, wanted.rstrip("s")):
            arg = param.name.upper()
            assert e.ctx is not None
            return (f"No such option '{e.option_name}': {param.name} is {e.ctx.info_name}'s argument, given without a "
                    f"flag: {e.ctx.command_path} {arg} [OPTIONS]")
    near = [p for p in e.possibilities or () if p.lstrip("-").replace("-", "_") in (wanted + "s", wanted.rstrip("s"))]
    if near:
        return f"No such option '{e.option_name}'. Did you mean {near[0]!r}?"
    return e.format_message()


def _option_taken_as_value(argv: list[str], group: click.Command | None = None) -> str | None:
    """An option that takes a value, followed by another of the command's options (``train --compile --max-steps
    20``): click takes the second as the first's value and says "unexpected extra argument (20)" -- or, with no
    value after it, goes on with it (``--checkpoint --resume`` wrote a directory named "--resume"). The line that
    says so, or None. ``group``: the app's click command, built once by :func:`main` for both."""
    group = group or typer.main.get_command(app)
    command = group.commands.get(argv[0]) if argv and isinstance(group, click.Group) else None
    if command is None:
        return None
    options = [p for p in command.params if isinstance(p, click.Option)]
    known = {name for p in options for name in (*p.opts, *p.secondary_opts)} | {"--help"}  # (click's own)
    valued = {name for p in options if not p.is_flag and not p.count for name in p.opts}
    i = 1
    while i < len(argv):
        token = argv[i]
        if token == "--":
            break
        if token in valued and i + 1 < len(argv):
            following = argv[i + 1]
            if following.split("=", 1)[0] in known:
                return (f"{token} needs a value, and the option {following} follows it: give {token} VALUE "
                        f"(see: ampbench {argv[0]} --help)")
            i += 1
        i += 1
    return None


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: AmpbenchError -> one line on stderr, exit code 2."""
    global _invocation
    _invocation = list(sys.argv[1:] if argv is None else argv)
    try:
        group = typer.main.get_command(app)  # (what app() builds each call: built once for the check and the run)
        taken = _option_taken_as_value(_invocation, group)
        if taken:
            err_console.print(f"[red]error:[/] {escape(taken)}", highlight=False, soft_wrap=True)
            sys.exit(2)
        code = group(args=_invocation, standalone_mode=False, prog_name="ampbench")
        if isinstance(code, int) and code:  # typer.Exit(N) inside a command comes back as N without standalone mode
            sys.exit(code)
    except AmpbenchError as e:
        text = e.with_flag(FLAGS.get(e.param, "--" + e.param.replace("_", "-"))) if isinstance(e, ParameterError) \
            else str(e)
        err_console.print(f"[red]error:[/] {escape(text)}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except sqlite3.DatabaseError as e:  # a store damaged while in use (opening one checks it first)
        err_console.print(f"[red]error:[/] the results store failed while in use: {escape(str(e))}; check it with "
                          "`sqlite3 FILE 'PRAGMA integrity_check'`", highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Abort:
        err_console.print("aborted")
        sys.exit(130)
    except Exception as e:  # click usage errors (bad option, missing argument)
        if type(e).__name__ == "NoArgsIsHelpError":  # help was printed
            sys.exit(0)
        if isinstance(e, click.exceptions.UsageError):
            msg = _no_such_option(e) if isinstance(e, click.exceptions.NoSuchOption) else e.format_message()
            cmd = e.ctx.command_path if e.ctx else "ampbench"
            hint = f" (see: {cmd} --help)"
            err_console.print(f"[red]error:[/] {escape(msg + hint)}", highlight=False, soft_wrap=True)
            sys.exit(2)
        if isinstance(e, click.exceptions.ClickException):
            err_console.print(f"[red]error:[/] {escape(e.format_message())}", highlight=False, soft_wrap=True)
            sys.exit(e.exit_code)
        raise
    finally:
        while _opened:  # (a store a command opened, closed however it ended)
            _opened.pop().close()
