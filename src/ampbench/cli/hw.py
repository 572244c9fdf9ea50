"""``ampbench hw``: this device, what it supports and why not, peaks, a GEMM benchmark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from ampbench.cli import options as o
from ampbench.cli.core import app, console, open_store
from ampbench.errors import AmpbenchError
from ampbench.paths import check_output_file, write_text_atomic


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
    env = p["env"]
    table = Table(title=f"{escape(p['device_name'])} ({dev})", title_justify="left", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value", overflow="fold")
    if dev.type == "cuda":
        table.add_row("compute capability", p["capability"])
        table.add_row("Tensor Cores", p["tensor_cores"])
        table.add_row("versions", f"driver {env.get('driver', '?')}, CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')}, "
                                  f"torch {env['torch']}")
        table.add_row("clocks / power", f"SM {env.get('sm_clock_mhz', '?')}/{env.get('sm_clock_max_mhz', '?')} MHz, "
                                        f"power limit {env.get('power_limit_w', '?')} W")
        peaks = p.get("peaks")
        said = ", ".join(f"{k} {v:g}" for k, v in peaks.items()) + f"  [dim]({p['peaks_source']})[/]" if peaks else ""
        table.add_row("dense peaks (TFLOP/s)", said or "not in ampbench's table: MFU will use the measured GEMM peak")
    else:
        hw = p["cpu_half_hardware"]
        table.add_row("CPU", escape(env["cpu"]))
        capped = f" (oneDNN capped at {env['cpu_isa_limit']} by ONEDNN_MAX_CPU_ISA)" if env.get("cpu_isa_limit") else ""
        table.add_row("half-precision hardware", ", ".join(f"{k}: {'yes' if v else 'no'}" for k, v in hw.items()) + capped)
        table.add_row("versions", f"torch {env['torch']}, python {env['python']}, {env['torch_threads']} threads")
        peaks = p.get("peaks")
        table.add_row("theoretical peaks (TFLOP/s)",
                      ", ".join(f"{k} {v:.3g}" for k, v in peaks.items()) + f"  [dim]({escape(p['peaks_source'])})[/]"
                      if peaks else "not estimated (no AVX2/AVX-512 FMA, or the clock is unknown)")
    table.add_row("TF32 in force", f"matmul {env['tf32_matmul']}, cuDNN {env['tf32_cudnn']}"
                                   + (f", override env {env['tf32_override_env']}" if env["tf32_override_env"] else ""))
    modes = p["precisions"]
    lines = []
    for name, m in modes.items():
        why = m["reason"] or m["note"]
        lines.append(f"{'[green]ok[/]' if m['ok'] else '[red]no[/]'} {name}" + (f": {why}" if why else ""))
    table.add_row("precision modes", "\n".join(lines))
    table.add_row("verdict", p["verdict"])
    console.print(table)
    if p["gemm"]:
        g = Table(title="GEMM micro-benchmark (random normal n x n @ n x n)", title_justify="left")
        for col in ("n", "math", "TFLOP/s", "% of peak"):
            g.add_column(col, justify="right")
        for row in p["gemm"]:
            frac = row["fraction_of_peak"]
            g.add_row(f"{row['size']:,}", row["math_mode"], f"{row['tflops']:.3f}", "-" if frac is None else f"{frac:.0%}")
        console.print(g)
    for note in p.get("notes") or []:
        console.print(f"[dim]{escape(note)}[/]")
    store.add_hw(p)
    console.print(f"stored in {escape(str(store.path))}")
    if json_out is not None:
        write_text_atomic(json_out, json.dumps(p, indent=1))
        console.print(f"wrote {escape(str(json_out))}")

