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


def _one_line_summaries() -> None:
    """`ampbench --help` lists each command with its docstring's first paragraph, and typer's rich help keeps that
    paragraph's source line breaks (a summary wrapped in the source broke mid-sentence there): each command's short
    help is its first paragraph on one line."""
    for command in app.registered_commands:
        doc = command.callback.__doc__ if command.callback else None
        if command.short_help is None and doc:
            command.short_help = " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())


_one_line_summaries()


def _literal_help() -> None:
    """Option help is text, not rich markup: typer's rich help read "needs ampbench[tensorboard]" as a markup tag and
    printed "needs ampbench". Each option's and argument's help is escaped once, here."""
    for command in app.registered_commands:
        if command.callback is None:
            continue
        hints = typing.get_type_hints(command.callback, include_extras=True)
        for p in inspect.signature(command.callback).parameters.values():
            hint = p.annotation if not isinstance(p.annotation, str) else hints.get(p.name)
            for info in (*getattr(hint, "__metadata__", ()), p.default):
                if isinstance(info, ParameterInfo) and info.help and "[" in info.help:
                    info.help = escape(info.help)


_literal_help()

__all__ = ["app", "main"]
