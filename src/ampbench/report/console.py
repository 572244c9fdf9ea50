"""Rich tables of result rows (the CLI prints them; nothing here prints)."""

from __future__ import annotations

from itertools import groupby
from typing import Any

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ampbench.execution.options import Execution, strategy_label
from ampbench.report.advisor import versus_fp32
from ampbench.store.derive import compared_memory
from ampbench.store.rows import framework_of


def fmt_bytes(n: Any) -> str:
    if not isinstance(n, (int, float)):
        return "-"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n:,.0f} B"


def _num(v: Any, spec: str = ",.1f") -> str:
    return "-" if not isinstance(v, (int, float)) else format(v, spec)


def speedup_text(row: dict[str, Any]) -> tuple[str, str]:
    """(text, verdict) of a row's speedup vs fp32: "2.61x", "1.06x ±12%" (within-cell noise),
    "1.06x (0.98-1.10)" (range over repeats), or for fp32 "1.00x (moved 3%)" (its closing baseline).
    The verdict, "faster", "slower" or "same", counts only differences beyond the noise (the
    advisor's rule), so colours never call noise a win."""
    v = row.get("speedup_vs_fp32")
    if not isinstance(v, (int, float)):
        return "-", "same"
    text = f"{v:.2f}x"
    rng, noise = row.get("speedup_vs_fp32_range"), row.get("speedup_vs_fp32_noise")
    if rng:
        text += f" ({rng[0]:.2f}-{rng[1]:.2f})"
    elif isinstance(noise, (int, float)) and noise >= 0.005:
        text += f" ±{noise:.0%}"
    if row.get("precision") == "fp32":
        drift = row.get("baseline_drift")
        return text + (f" (moved {drift:.0%})" if isinstance(drift, (int, float)) and drift >= 0.005 else ""), "same"
    faster, slower, _ = versus_fp32(row, v)
    if row.get("speedup_vs_fp32_doubt"):
        text += " (doubtful)"  # the note column says why
    return text, "faster" if faster and v >= 1.05 else "slower" if slower and v <= 0.95 else "same"


def _speedup(row: dict[str, Any]) -> Text:
    text, verdict = speedup_text(row)
    return Text(text, style={"faster": "green", "slower": "red"}.get(verdict, "yellow" if text != "-" else ""))


def _saving(v: Any) -> Text:
    if not isinstance(v, (int, float)):
        return Text("-")
    if abs(v) < 0.005:
        return Text("same")
    return Text(f"-{v:.0%}" if v > 0 else f"+{-v:.0%}", style="green" if v > 0.05 else "red" if v < -0.05 else "")


def eager_speedup_text(row: dict[str, Any]) -> str:
    """speedup_vs_fp32_eager: every change of the row against fp32 eager ("-" without that cell)."""
    v = row.get("speedup_vs_fp32_eager")
    return f"{v:.2f}x" if isinstance(v, (int, float)) else "-"


def compile_note(row: dict[str, Any]) -> str:
    """What torch.compile cost and met in a compiled row ("" for eager rows)."""
    if not isinstance(row.get("compile_s"), (int, float)):
        return ""
    parts = [f"compile {row['compile_s']:.1f} s" + (f" (cache {row['compile_cache']})" if row.get("compile_cache") else "")
             + (" (fp8 on CUDA: compiled by default)" if row.get("compiled_by_default") else "")]
    if row.get("graph_breaks"):
        parts.append(f"{row['graph_breaks']} graph break(s)")
    if row.get("recompiles_timed"):
        parts.append(f"{row['recompiles_timed']} recompile(s) in timed steps")
    return ", ".join(parts)


def _memory_text(row: dict[str, Any]) -> str:
    """The compared memory; a Keras cell on a CPU has only its RSS growth (approximate), said so."""
    text = fmt_bytes(compared_memory(row))
    return text + " (rss)" if row.get("keras_backend") and text != "-" and str(row.get("device")).startswith("cpu") \
        else text


STATUS_STYLE = {"ok": "green", "oom": "magenta", "error": "red", "diverged": "red", "unsupported": "dim"}


def results_tables(rows: list[dict[str, Any]]) -> list[Table]:
    """One table per (workload, preset, batch size, device): a row per precision, ratios vs fp32."""
    tables = []

    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return r.get("workload") or "", r.get("preset") or "", r.get("device_name") or "", r.get("run_id") or ""

    for (workload, preset, dev, run_id), group in groupby(sorted(rows, key=key), key=key):
        group = list(group)
        # CPU: show the exact split total (what "mem vs fp32" compares); the RSS peak is in the JSON/HTML
        cpu = all(str(r.get("device") or "").startswith("cpu") for r in group)
        table = Table(title=f"{escape(workload)} ({escape(preset)}) on {escape(dev)}  [dim]run {escape(run_id)}[/]",
                      title_justify="left")
        axes = len({Execution.of(r) for r in group}) > 1 or not all(Execution.of(r).is_default for r in group)
        dist = any(r.get("strategy") for r in group)
        keras_cpu = cpu and any(r.get("keras_backend") for r in group)  # (Keras cells on a CPU: RSS growth only)
        mem_head = "memory (rss)" if keras_cpu else "memory (exact)" if cpu else "peak mem"
        for col, just in (("precision", "left"), ("framework", "left"), *((("execution", "left"),) if axes else ()),
                          *((("strategy", "left"), ("scaling", "right")) if dist else ()), ("status", "left"),
                          ("batch", "right"), ("samples/s", "right"), ("speedup", "right"),
                          *((("vs fp32 eager", "right"),) if axes else ()), ("step p50 ms", "right"),
                          (mem_head, "right"), ("mem vs fp32", "right"), ("skipped", "right")):
            table.add_column(col, justify=just, no_wrap=col in ("precision", "status"))  # type: ignore[arg-type]
        extra = []
        if any(r.get("max_batch") is not None for r in group):
            extra.append("max batch")
        if any(r.get("converge_verdict") for r in group):
            extra.append("converge")
        if any(r.get("inference") for r in group):
            extra.append("infer p50 ms (b=1 / large)")
        for col in extra:
            table.add_column(col, justify="right")
        table.add_column("note", overflow="fold")
        for r in group:
            status = r.get("status") or "?"
            cells: list[Any] = [Text(r.get("precision") or "?", style="bold cyan"), Text(framework_of(r)),
                                *([Text(Execution.of(r).label)] if axes else []),
                                *([Text(strategy_label(r) or "1 process"), _num(r.get("scaling_efficiency"), ".2f")]
                                  if dist else []),
                                Text(status, style=STATUS_STYLE.get(status, "")),
                                _num(r.get("batch_size"), ","), _num(r.get("samples_per_s"), ",.0f"),
                                _speedup(r), *([eager_speedup_text(r)] if axes else []), _num(r.get("step_ms_p50"), ",.2f"),
                                _memory_text(r), _saving(r.get("memory_saving_vs_fp32")),
                                _num(r.get("skipped_steps"), ",")]
            if "max batch" in extra:
                mb = r.get("max_batch")
                ratio = r.get("max_batch_ratio_vs_fp32")
                txt = "-" if mb is None else f"{'>=' if r.get('max_batch_limit_hit') else ''}{mb:,}"
                cells.append(txt + (f" ({ratio:.2f}x)" if isinstance(ratio, float) and r["precision"] != "fp32" else ""))
            if "converge" in extra:
                v = r.get("converge_verdict") or "-"
                cells.append(Text(v, style="green" if v in ("parity", "baseline") else "red"))
            if extra and extra[-1].startswith("infer"):
                inf = r.get("inference") or {}
                sizes = sorted(inf, key=int)
                cells.append(" / ".join(_num(inf[s].get("p50_ms"), ",.2f") for s in sizes) or "-")
            cells.append(Text(r.get("reason") or "; ".join(n for n in (r.get("speedup_vs_fp32_doubt"), compile_note(r)) if n),
                              style="dim"))
            table.add_row(*cells)
        tables.append(table)
    return tables
