"""``ampbench hw``: this device, what it supports and why not, peaks, a GEMM benchmark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from ampbench.cli import options as o
from ampbench.cli.core import app, console, open_store
from ampbench.errors import AmpbenchError
from ampbench.paths import check_output_file, write_text_atomic
from ampbench.report.hw import hw_tables


@app.command("hw")
def hw_cmd(
    device: Annotated[o.Opt[str], typer.Option(help="cpu, cuda or cuda:N (default: cuda if present).")] = None,
    sizes: Annotated[o.Opt[str], typer.Option(help="GEMM sizes n (n x n x n), comma-separated.")] = None,
    gemm: Annotated[bool, typer.Option(help="Run the GEMM micro-benchmark.")] = True,
    db: Annotated[o.Opt[Path], typer.Option(help="Store the probe here (MFU vs measured peak uses it).")] = None,
    json_out: Annotated[o.Opt[Path], typer.Option("--json", help="Write the probe as JSON.")] = None,
) -> None:
    """The device, what it supports and why not, TF32 flags, versions, peak TFLOP/s, and a GEMM benchmark."""

    from ampbench.bench.config import parse_list  # lazy: torch
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
    store = open_store(db)  # a bad --db fails now, not after the GEMM benchmark
    p = probe(dev, ns, run_gemm=gemm)
    for shown in hw_tables(p, dev.type):
        console.print(shown)
    store.add_hw(p)
    console.print(f"stored in {escape(str(store.path))}")
    if json_out is not None:
        write_text_atomic(json_out, json.dumps(p, indent=1))
        console.print(f"wrote {escape(str(json_out))}")

