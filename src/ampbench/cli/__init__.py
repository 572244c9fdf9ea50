"""The command line: a thin layer over the library -- each command parses, builds the config its library call takes
(where every check lives), calls it and renders what comes back.

``app`` is the typer app and ``main`` the console-script entry (exit codes: :mod:`ampbench.cli.core`); ``options``
declares the options several commands share; ``render`` prints; one module per command.
"""

import inspect
import typing

from rich.markup import escape
from typer.models import ParameterInfo

# isort: off
# Registration order is the order `ampbench --help` lists the commands.
from ampbench.cli.core import app, main
from ampbench.cli import listing, train, run, predict, results, exchange, diagnose, report, compare, hw  # noqa: F401
# isort: on


def _help_as_written() -> None:
    """Each command's help as its source says it, once, at registration: ``ampbench --help`` lists a command with
    its docstring's first paragraph, whose source line breaks typer's rich help kept (a summary broke mid-sentence:
    "knows." alone on a line) -- its short help is that paragraph on one line; and an option's help is text, not
    rich markup (typer read "needs ampbench[tensorboard]" as a tag and printed "needs ampbench") -- escaped."""
    for command in app.registered_commands:
        if command.callback is None:
            continue
        doc = command.callback.__doc__
        if command.short_help is None and doc:
            command.short_help = " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())
        hints = typing.get_type_hints(command.callback, include_extras=True)
        for p in inspect.signature(command.callback).parameters.values():
            hint = p.annotation if not isinstance(p.annotation, str) else hints.get(p.name)
            for info in (*getattr(hint, "__metadata__", ()), p.default):
                if isinstance(info, ParameterInfo) and info.help and "[" in info.help:
                    info.help = escape(info.help)


_help_as_written()

__all__ = ["app", "main"]
