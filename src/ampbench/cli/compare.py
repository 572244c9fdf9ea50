"""``ampbench compare``: throughput across devices, one table per setting."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.text import Text

from ampbench.cli.core import app, console, open_store
from ampbench.cli.declared import Opt
from ampbench.errors import AmpbenchError
from ampbench.report import ONLY_PREDICTIONS
from ampbench.report.compare import compare_table
from ampbench.report.predictions import predicted_table
from ampbench.report.predictions import table as predictions_table
from ampbench.store.derive import merge_repeats
from ampbench.values import parse_list


@app.command("compare")
def compare_cmd(
    db: Annotated[Opt[Path], typer.Option(help="Results store.")] = None,
    workloads: Annotated[Opt[str], typer.Option(help="Only these workloads (comma-separated).")] = None,
    precision: Annotated[Opt[str], typer.Option("--precisions", "--precision",
                                                  help="Only these modes (comma-separated).")] = None,
    reference: Annotated[Opt[str], typer.Option(help="Device name to normalise to (default: the slowest in fp32).")] = None,
) -> None:
    """Throughput across GPUs: rows = devices, columns = precisions, relative to a reference device."""
    from ampbench.precision import resolve  # lazy: torch
    from ampbench.report.console import Col, stack_tables  # lazy: torch (the advisor's CPU facts)

    store = open_store(db, create=False)
    precs = [resolve(p) for p in parse_list(precision, "precision")] or None
    wanted = parse_list(workloads, "workloads") or None
    tables = compare_table(merge_repeats(store.rows()), reference, wanted, precs)
    if not tables:
        if store.latest_run() is None and store.predictions(wanted):
            console.print(ONLY_PREDICTIONS)
            _predicted(store, wanted, precs)
            return
        raise AmpbenchError(f"no ok results to compare in {store.path} (import other machines' exports first)")
    for t in tables:
        key = Col("device", [escape(d) for d in t.devices], justify="left", wraps=True)
        cols = [Col(p, [_cell(t.cells.get((d, p))) for d in t.devices]) for p in t.precisions]
        # (stacked to the terminal: no precision name wrapped, no figure cut)
        for table in stack_tables(f"{escape(t.title)}: samples/s relative to {escape(t.reference)}", key, cols,
                                  console.width):
            console.print(table)
    alone = sum(len(t.devices) == 1 for t in tables)
    if alone:  # (said once, not under every table: a one-machine store printed it once per setting)
        which = "" if alone == len(tables) else f" for {alone} of the {len(tables)} settings"
        console.print(f"[dim]only one device has results{which} here: ampbench import other machines' exports to "
                      "compare[/]")
    _predicted(store, sorted({t.workload for t in tables}), precs)


def _predicted(store: Any, workloads: list[str] | None, precisions: list[str] | None) -> None:
    """Stored predictions of the compared workloads, beside the GPU measurement of the same cell where there is one."""
    lines = [p for p in predictions_table(store.predictions(workloads), merge_repeats(store.rows(workloads=workloads)))
             if precisions is None or p["precision"] in precisions]
    if lines:
        console.print(predicted_table(lines))


def _cell(c: Any) -> Text:
    """A device's throughput in one mode: relative to the reference (green faster, red slower) and samples/s."""
    if c is None:
        return Text("-")
    rel = "" if c.relative is None else f"{c.relative:.2f}x "
    style = "green" if (c.relative or 1) > 1.05 else "red" if (c.relative or 1) < 0.95 else ""
    return Text.assemble((rel, style), (f"({c.samples_per_s:,.0f}/s)", "dim"))
