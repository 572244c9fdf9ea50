"""``ampbench hw``: this device, what it supports and why not, peaks, a GEMM benchmark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from ampbench import progress
from ampbench.cli.core import app, console, open_store
from ampbench.cli.declared import Opt
from ampbench.errors import AmpbenchError
from ampbench.paths import check_output_file, write_text_atomic
from ampbench.report.calibration import calibration_table
from ampbench.report.hw import hw_tables
from ampbench.values import parse_list


@app.command("hw")
def hw_cmd(
    device: Annotated[Opt[str], typer.Option(help="cpu, cuda or cuda:N (default: cuda if present).")] = None,
    sizes: Annotated[Opt[str], typer.Option(help="GEMM sizes n (n x n x n), comma-separated.")] = None,
    gemm: Annotated[bool, typer.Option(help="Run the GEMM micro-benchmark.")] = True,
    db: Annotated[Opt[Path], typer.Option(help="Store the probe here (MFU vs measured peak uses it).")] = None,
    json_out: Annotated[Opt[Path], typer.Option("--json", help="Write the probe as JSON.")] = None,
    calibrate: Annotated[bool, typer.Option(
        "--calibrate", help="Time this device's kernels at the shapes models use (GEMMs, convolutions, norms, "
                            "attention, LSTM, optimizers; every dtype it computes in; power per kernel class) and store "
                            "the table: predict prices this GPU from it. <= 5 min on a GPU.")] = False,
    budget: Annotated[float, typer.Option(help="--calibrate: stop timing new kernels after this many seconds.")] = 300.0,
    csv_out: Annotated[Opt[Path], typer.Option("--csv", help="--calibrate: write the kernel table as CSV (with the "
                                                               "environment) here.")] = None,
) -> None:
    """The device, what it supports and why not, TF32 flags, versions, peak TFLOP/s, and a GEMM benchmark; with
    --calibrate, its own kernel table."""

    from ampbench.measure.env import resolve_device  # lazy: torch
    from ampbench.measure.hw import probe  # lazy: torch

    dev = resolve_device(device)
    ns = None
    if sizes is not None:
        try:
            ns = tuple(int(s) for s in parse_list(sizes, "sizes"))
        except ValueError:
            raise AmpbenchError(f"--sizes {sizes!r}: expected integers, e.g. 1024,4096") from None
        if any(n < 1 or n > 65536 for n in ns):
            raise AmpbenchError(f"--sizes must be between 1 and 65536, got {sizes}")
    check_output_file(json_out, "--json", "hw.json")
    if csv_out is not None and not calibrate:
        raise AmpbenchError("--csv writes the kernel table of --calibrate: give --calibrate too")
    if not budget > 0:
        raise AmpbenchError(f"--budget must be > 0 seconds, got {budget:g}")
    check_output_file(csv_out, "--csv", "calibration.csv")
    store = open_store(db)  # a bad --db fails now, not after the GEMM benchmark
    if calibrate:
        _calibrate(dev, store, budget, csv_out)
        return
    p = probe(dev, ns, run_gemm=gemm)
    for shown in hw_tables(p, dev.type):
        console.print(shown)
    store.add_hw(p)
    console.print(f"stored in {escape(str(store.path))}")
    if json_out is not None:
        write_text_atomic(json_out, json.dumps(p, indent=1))
        console.print(f"wrote {escape(str(json_out))}")



def _calibrate(dev: Any, store: Any, budget: float, csv_out: Path | None) -> None:
    from ampbench.measure.calibrate import sweep, to_csv  # lazy: torch

    with console.status("calibrating") as status, progress.reporting_to(
            lambda e: status.update(escape(f"calibrating: {e.detail} {e.i or 0}/{e.n}"))):
        table = sweep(dev, budget_s=budget)
    console.print(calibration_table(table))
    store.add_calibration(table)
    console.print(f"{len(table['kernels'])} kernels in {table['seconds']:.0f} s"
                  + (f" ({table['skipped']} left out past --budget)" if table["skipped"] else "")
                  + f"; stored in {escape(str(store.path))}")
    if csv_out is not None:
        write_text_atomic(csv_out, to_csv(table))
        console.print(f"wrote {escape(str(csv_out))}")
