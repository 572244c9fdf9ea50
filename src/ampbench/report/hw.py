"""``ampbench hw``'s tables: the device, what it supports and why not, TF32 flags, versions, peaks, and the GEMM
micro-benchmark (rich renderables; the command prints them)."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from ampbench.report.titled import titled


def hw_tables(p: dict[str, Any], device_type: str) -> list[Any]:
    """The probe ``p`` (:func:`ampbench.measure.hw.probe`) as tables and notes."""
    env = p["env"]
    title = f"{escape(p['device_name'])} ({p['device']})"
    table = Table(show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value", overflow="fold")
    if device_type == "cuda":
        table.add_row("compute capability", p["capability"])
        table.add_row("Tensor Cores", p["tensor_cores"])
        table.add_row("versions", f"driver {env.get('driver', '?')}, CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')}, "
                                  f"torch {env['torch']}")
        table.add_row("clocks / power", f"SM {env.get('sm_clock_mhz', '?')}/{env.get('sm_clock_max_mhz', '?')} MHz, "
                                        f"power limit {env.get('power_limit_w', '?')} W")
        peaks = p.get("peaks")
        said = ", ".join(f"{k} {v:g}" for k, v in peaks.items()) + f"  [dim]({escape(p['peaks_source'])})[/]" if peaks else ""
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
    # (modes with the same verdict and the same reason on one line: the fp16 note was said three times, fp8's too)
    said_for: dict[tuple[bool, str], list[str]] = {}
    for name, m in p["precisions"].items():
        said_for.setdefault((bool(m["ok"]), m["reason"] or m["note"] or ""), []).append(name)
    lines = [f"{'[green]ok[/]' if ok else '[red]no[/]'} {', '.join(names)}" + (f": {escape(why)}" if why else "")
             for (ok, why), names in said_for.items()]
    h = p.get("host_ops")
    if h:
        said = (f"forward {h['forward_us_per_op']:.1f} us, backward {h['backward_us_per_op']:.1f} us; optimizer "
                f"{h['optimizer_us_per_param']:.1f} us per parameter"
                + (f" ({h['direct_us_per_param']:.2f} as the engine steps it)" if h.get("direct_us_per_param") else ""))
        table.add_row("host time per op", said + (f" (predict --host-us {h['host_us']})" if device_type == "cuda"
                                                  else " (CPU tensors: the dispatch alone)"))
    table.add_row("precision modes", "\n".join(lines))
    table.add_row("verdict", escape(p["verdict"]))
    out: list[Any] = [titled(title, table)]
    if p["gemm"]:
        g = Table()
        for col in ("n", "math", "TFLOP/s", "% of peak"):
            g.add_column(col, justify="right")
        for row in p["gemm"]:
            frac = row["fraction_of_peak"]
            tf = row["tflops"]  # (an AMX Xeon's per-tensor fp8 GEMM, a reference kernel at 0.0001 TFLOP/s, read 0.000)
            g.add_row(f"{row['size']:,}", row["math_mode"], f"{tf:.3f}" if tf >= 0.001 else f"{tf:.2g}",
                      "-" if frac is None else f"{frac:.0%}")
        out.append(titled("GEMM micro-benchmark (random normal n x n @ n x n)", g))
    out += [f"[dim]{escape(note)}[/]" for note in p.get("notes") or []]
    return out
