"""``ampbench compare``: throughput across devices, one table per setting."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from ampbench.cli import options as o
from ampbench.cli.core import app, console, open_store
from ampbench.errors import AmpbenchError
from ampbench.report.compare import compare_table
from ampbench.report.predictions import table as predictions_table
from ampbench.store.derive import merge_repeats


@app.command("compare")
def compare_cmd(
    db: Annotated[o.Opt[Path], typer.Option(help="Results store.")] = None,
    workloads: Annotated[o.Opt[str], typer.Option(help="Only these workloads (comma-separated).")] = None,
    precision: Annotated[o.Opt[str], typer.Option("--precisions", "--precision",
                                                  help="Only these modes (comma-separated).")] = None,
    reference: Annotated[o.Opt[str], typer.Option(help="Device name to normalise to (default: the slowest in fp32).")] = None,
) -> None:
    """Throughput across GPUs: rows = devices, columns = precisions, relative to a reference device."""
    from ampbench.bench.config import parse_list  # lazy: torch
    from ampbench.precision import resolve  # lazy: torch

    store = open_store(db, create=False)
    precs = [resolve(p) for p in parse_list(precision, "precision")] or None
    tables = compare_table(merge_repeats(store.rows()), reference, parse_list(workloads, "workloads") or None, precs)
    if not tables:
        raise AmpbenchError(f"no ok results to compare in {store.path} (import other machines' exports first)")
    for t in tables:
        table = Table(title=f"{escape(t.title)}: samples/s relative to {escape(t.reference)}", title_justify="left")
        table.add_column("device", style="bold")
        for p in t.precisions:
            table.add_column(p, justify="right")
        for d in t.devices:
            cells = []
            for p in t.precisions:
                c = t.cells.get((d, p))
                if c is None:
                    cells.append("-")
                else:
                    rel = "" if c.relative is None else f"{c.relative:.2f}x "
                    style = "green" if (c.relative or 1) > 1.05 else "red" if (c.relative or 1) < 0.95 else ""
                    cells.append(f"[{style}]{rel}[/][dim]({c.samples_per_s:,.0f}/s)[/]" if style else
                                 f"{rel}[dim]({c.samples_per_s:,.0f}/s)[/]")
            table.add_row(escape(d), *cells)
        console.print(table)
        if len(t.devices) == 1:
            console.print("[dim]only one device has results here: ampbench import other machines' exports to compare[/]")
    _predicted(store, sorted({t.workload for t in tables}), precs)


def _predicted(store: Any, workloads: list[str], precisions: list[str] | None) -> None:
    """Stored predictions of the compared workloads, beside the GPU measurement of the same cell where there is one."""
    lines = [p for p in predictions_table(store.predictions(workloads), merge_repeats(store.rows(workloads=workloads)))
             if precisions is None or p["precision"] in precisions]
    if not lines:
        return
    table = Table(title="predicted (ampbench predict; no GPU ran these) beside measured", title_justify="left")
    for col in ("workload", "GPU", "setting", "mode", "predicted/s", "measured/s", "error"):
        table.add_column(col, justify="left" if col in ("workload", "GPU", "setting", "mode") else "right",
                         overflow="fold")
    for p in lines:
        table.add_row(escape(f"{p['workload']} ({p['preset']})"), escape(str(p["gpu"])), escape(p["setting"]), p["precision"],
                      f"{p['predicted_samples_per_s']:,.0f}",
                      "-" if p["measured_samples_per_s"] is None else f"{p['measured_samples_per_s']:,.0f}",
                      "-" if p["error"] is None else f"{p['error']:+.0%}")
    console.print(table)

