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
    compared = [t for t in tables if len(t.devices) > 1]
    for t in compared:
        key = Col("device", [escape(d) for d in t.devices], justify="left", wraps=True)
        cols = [Col(p, [_cell(t.cells.get((d, p))) for d in t.devices]) for p in t.precisions]
        # (stacked to the terminal: no precision name wrapped, no figure cut)
        for table in stack_tables(f"{escape(t.title)}: samples/s relative to {escape(t.reference)}", key, cols,
                                  console.width):
            console.print(table)
    # a setting measured on one device has nothing beside it: a table of "1.00x" per setting said nothing (and a
    # store of two devices that share no setting said "only one device has results")
    alone = [t for t in tables if len(t.devices) == 1]
    if alone:
        console.print(alone_text(alone, compared), soft_wrap=True)
    _predicted(store, sorted({t.workload for t in tables}), precs)


def alone_text(alone: list[Any], compared: list[Any]) -> str:
    """The settings measured on one device only, a line per device (three named, the count of the rest), and what
    would compare them."""
    by_device: dict[str, list[str]] = {}
    for t in alone:
        by_device.setdefault(t.devices[0], []).append(t.title)
    devices = sorted({d for t in (*alone, *compared) for d in t.devices})
    head = ("only one device has results here" if len(devices) == 1 else
            "no setting was measured on both devices here" if not compared and len(devices) == 2 else
            f"no setting was measured on two of the {len(devices)} devices here" if not compared else
            f"{len(alone)} of the {len(alone) + len(compared)} settings {'was' if len(alone) == 1 else 'were'} "
            "measured on one device only")
    lines = [f"[dim]{head}: ampbench results shows their figures; run the same workload, preset and batch on another "
             "device, or ampbench import another machine's export, to compare[/]"]
    for d, titles in by_device.items():
        more = f" and {len(titles) - 3} more" if len(titles) > 3 else ""
        lines.append(f"[dim]  {escape(d)} only: {escape('; '.join(titles[:3]))}{more}[/]")
    return "\n".join(lines)


def _predicted(store: Any, workloads: list[str] | None, precisions: list[str] | None) -> None:
    """Stored predictions of the compared workloads, beside the GPU measurement of the same cell where there is one."""
    lines = [p for p in predictions_table(store.predictions(workloads), merge_repeats(store.rows(workloads=workloads)))
             if precisions is None or p["precision"] in precisions]
    if lines:
        from ampbench.report.console import predicted_table  # lazy: torch (the advisor's CPU facts)

        for table in predicted_table(lines, console.width):
            console.print(table)


def _cell(c: Any) -> Text:
    """A device's throughput in one mode: relative to the reference (green faster, red slower) and samples/s."""
    if c is None:
        return Text("-")
    rel = "" if c.relative is None else f"{c.relative:.2f}x "
    style = "green" if (c.relative or 1) > 1.05 else "red" if (c.relative or 1) < 0.95 else ""
    return Text.assemble((rel, style), (f"({c.samples_per_s:,.0f}/s)", "dim"))
