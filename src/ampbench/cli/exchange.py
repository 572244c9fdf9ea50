"""``ampbench export`` / ``ampbench import``: move results between machines."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from ampbench.cli.core import app, console, open_store
from ampbench.cli.declared import Opt
from ampbench.paths import STDOUT, check_output_file
from ampbench.report.run_text import plural
from ampbench.store import export_data, import_document, json_text, read_export, write_json


@app.command("export")
def export_cmd(
    out: Annotated[Path, typer.Option("--out", help="JSON file to write.")],
    db: Annotated[Opt[Path], typer.Option(help="Results store.")] = None,
    run: Annotated[Opt[list[str]], typer.Option("--run", help="Run id(s) to export (default: all).")] = None,
) -> None:
    """Write runs and rows (and the store's kernel tables, hw --calibrate's, and its predictions) as JSON, to move
    them to another machine (ampbench import). --out - writes them to standard output."""

    check_output_file(out, "--out", "results.json")
    store = open_store(db, create=False)
    ids = [store.run(r).run_id for r in run] if run else None
    data = export_data(store, ids)
    if str(out) == STDOUT:  # (as report's --out -: it wrote a file named "-" into the working directory)
        sys.stdout.write(json_text(data) + "\n")
        return
    write_json(data, out)
    tables = f", {plural(len(data['calibrations']), 'kernel table')}" if data["calibrations"] else ""
    tables += f", {plural(len(data['predictions']), 'prediction')}" if data["predictions"] else ""
    console.print(f"wrote {plural(len(data['runs']), 'run')}, {plural(len(data['rows']), 'row')}{tables} to "
                  f"{escape(str(out))}")


@app.command("import")
def import_cmd(
    files: Annotated[list[Path], typer.Argument(help="Files written by ampbench export or run --json.")],
    db: Annotated[Opt[Path], typer.Option(help="Results store.")] = None,
) -> None:
    """Add exported results (e.g. from other GPUs) to the store; rows already there are kept as they are."""

    documents = [(f, read_export(f)) for f in files]  # (every file checked before the store is opened or written)
    store = open_store(db)
    for f, document in documents:
        done = import_document(store, document, f)
        kept = (f"; {plural(done.differing, 'stored row')} differ{'s' if done.differing == 1 else ''} from the file's "
                "and {} kept as stored (import never overwrites: import into another --db to keep both)".format(
                    "was" if done.differing == 1 else "were")) if done.differing else ""
        tables = f", {plural(done.calibrations, 'new kernel table')}" if done.calibrations else ""
        tables += f", {plural(done.predictions, 'new prediction')}" if done.predictions else ""
        console.print(escape(f"{f}: {plural(done.runs, 'new run')}, {plural(done.rows, 'new row')}{tables}{kept}"))

