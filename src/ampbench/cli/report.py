"""``ampbench report``: one run as a self-contained HTML page, Markdown or CSV."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from ampbench.cli.core import app, console, open_store
from ampbench.cli.declared import Opt
from ampbench.errors import AmpbenchError
from ampbench.paths import STDOUT, check_output_file
from ampbench.report import FORMATS, build_report, write_report

SUFFIXES = {".md": "md", ".markdown": "md", ".csv": "csv", ".html": "html", ".htm": "html"}
"""The format an ``--out`` file's extension names, where ``--format`` is not given."""


@app.command("report")
def report_cmd(
    db: Annotated[Opt[Path], typer.Option(help="Results store.")] = None,
    run: Annotated[Opt[str], typer.Option("--run", help="Run id (or a unique prefix).")] = None,
    latest: Annotated[bool, typer.Option("--latest", help="The latest run (the default).")] = False,
    out: Annotated[Opt[Path], typer.Option("--out", help="File to write (default: <db dir>/reports/RUN.EXT).")] = None,
    fmt: Annotated[Opt[str], typer.Option("--format", help="html | md | csv (default: --out's extension, else "
                                                           "html).")] = None,
    predictions: Annotated[bool, typer.Option("--predictions", help="Every stored prediction (ampbench predict), "
                                                                    "whatever was measured.")] = False,
) -> None:
    """Write the report of a run: one self-contained HTML page (or Markdown / CSV), with advice per workload.
    --out - writes it to standard output."""

    if run is not None and latest:
        raise AmpbenchError("give --run ID or --latest, not both")
    if predictions and (run is not None or latest):
        raise AmpbenchError("give --predictions (every stored prediction) or a run (--run, --latest), not both")
    if fmt is None:  # (--out report.md wrote an HTML page into a .md file)
        fmt = SUFFIXES.get(out.suffix.lower(), "html") if out is not None and str(out) != STDOUT else "html"
    if fmt not in FORMATS:
        raise AmpbenchError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    check_output_file(out, "--out", f"report.{fmt}")
    store = open_store(db, create=False)
    if out is not None and str(out) == STDOUT:
        sys.stdout.write(build_report(store, run, fmt, predictions)[1])
        return
    if out is None and store.read_only:  # (the default place is beside the store)
        raise AmpbenchError(f"--db {store.path} is read-only, and the report goes beside it by default: give --out FILE "
                            "(or --out - to print it)")
    path = write_report(store, out, run, fmt, predictions)
    console.print(f"report: [bold]{escape(str(path))}[/]")

