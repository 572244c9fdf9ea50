"""The command line: a thin layer over the library -- each command parses, builds the config its library call takes
(where every check lives), calls it and renders what comes back.

``app`` is the typer app and ``main`` the console-script entry (exit codes: :mod:`ampbench.cli.core`); ``options``
declares the options several commands share; ``render`` prints; one module per command.
"""

# isort: off
# Registration order is the order `ampbench --help` lists the commands.
from ampbench.cli.core import app, main
from ampbench.cli import listing, train, run, predict, results, exchange, diagnose, report, compare, hw  # noqa: F401
# isort: on

__all__ = ["app", "main"]
