"""``ampbench results``: stored rows with their ratios vs fp32."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ampbench.cli.core import app, console, err_console, open_store
from ampbench.cli.declared import Opt
from ampbench.cli.render import results_tables
from ampbench.errors import AmpbenchError
from ampbench.modes import resolve
from ampbench.report import ALL_PREDICTIONS, ONLY_PREDICTIONS
from ampbench.report.console import predicted_table
from ampbench.report.predictions import table as predictions_table
from ampbench.report.run_text import plural
from ampbench.store import derive, to_csv
from ampbench.store.exchange import clean_json
from ampbench.values import parse_list


@app.command("results")
def results_cmd(
    db: Annotated[Opt[Path], typer.Option(help="Results store.")] = None,
    run: Annotated[Opt[str], typer.Option("--run", help="Run id (or a unique prefix); default: the latest run.")] = None,
    all_runs: Annotated[bool, typer.Option("--all", help="Rows of every run.")] = False,
    workloads: Annotated[Opt[str], typer.Option(help="Only these workloads (comma-separated).")] = None,
    precisions: Annotated[Opt[str], typer.Option("--precisions", "--precision",
                                                   help="Only these modes (comma-separated).")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table | json | csv.")] = "table",
    predictions: Annotated[bool, typer.Option("--predictions", help="The stored predictions (ampbench predict) "
                                                                    "instead of the measured rows.")] = False,
) -> None:
    """List stored results (with speedup / memory saving vs fp32)."""
    if fmt not in ("table", "json", "csv"):
        raise AmpbenchError(f"--format {fmt!r}: choose table, json or csv")
    if run is not None and all_runs:
        raise AmpbenchError("give --run ID or --all, not both")
    store = open_store(db, create=False)
    if predictions:
        if run is not None:
            raise AmpbenchError("--predictions lists every stored prediction; --run picks a measured run: give one")
        _only_predictions(store, fmt, parse_list(workloads, "workloads") or None, measured=True)
        return
    run_id = None
    if not all_runs:
        info = store.run(run) if run is not None else store.latest_run()
        if info is None:
            _only_predictions(store, fmt)
            return
        run_id = info.run_id
    precs = [resolve(p) for p in parse_list(precisions, "precisions")] or None
    rows = derive(store.rows(run_id, parse_list(workloads, "workloads") or None), store.hw())  # ratios need fp32
    if precs:
        rows = [r for r in rows if r["precision"] in precs]
    if store.skipped_rows:
        err_console.print(f"[yellow]warning:[/] {plural(store.skipped_rows, 'stored row')} with malformed values "
                          "skipped (from an import before rows were validated)", highlight=False)
    if fmt == "json":
        sys.stdout.write(json.dumps(clean_json(rows), indent=1) + "\n")
    elif fmt == "csv":
        sys.stdout.write(to_csv(rows))
    else:
        if not rows:
            console.print("no rows match")
        results_tables(rows)



def _only_predictions(store: Any, fmt: str, workloads: list[str] | None = None, measured: bool = False) -> None:
    """The stored predictions (of ``workloads``), labelled so: a store with no measured run, or ``--predictions``
    (none at all: one line, exit 2)."""
    predictions = store.predictions(workloads)
    if not predictions:
        if measured:
            raise AmpbenchError(f"no predictions{' of ' + ', '.join(workloads) if workloads else ''} in {store.path}: "
                                "ampbench predict stores them")
        raise AmpbenchError(f"no results in {store.path} yet: run `ampbench run` first (or ampbench import FILE)")
    if fmt == "json":
        sys.stdout.write(json.dumps(clean_json(predictions), indent=1) + "\n")
    elif fmt == "csv":
        sys.stdout.write(to_csv(predictions))
    else:
        console.print(ALL_PREDICTIONS if measured else ONLY_PREDICTIONS)
        for table in predicted_table(predictions_table(predictions, store.rows() if measured else []), console.width):
            console.print(table)
