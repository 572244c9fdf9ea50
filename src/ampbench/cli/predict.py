"""``ampbench predict``: speed, memory and max batch per precision on a named GPU, without one (a traced step priced
on the GPU's datasheet: :mod:`ampbench.predict`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape
from rich.table import Table

from ampbench.cli import options as o
from ampbench.cli.core import app, console, open_store
from ampbench.errors import AmpbenchError
from ampbench.paths import check_output_file, write_text_atomic

GpuOpt = Annotated[Optional[str], typer.Option("--gpu", help="The GPU: v100-16gb, v100-32gb, t4, a10, a100-40gb, "  # noqa: UP045
                   "a100-80gb, l4, l40s, h100-sxm, h100-pcie, h200, b200, rtx-4090 (case-insensitive).")]
GpuSpecOpt = Annotated[Optional[Path], typer.Option("--gpu-spec", help="Another GPU, as JSON: name, tflops {fp32, "  # noqa: UP045
                       "tf32, fp16, bf16, fp8}, memory_gib, bandwidth_gbs, sms, capability.")]
ChannelsLastOpt = Annotated[bool, typer.Option("--channels-last", help="Trace with channels-last inputs and "
                            "weights (4-D inputs), as --memory-format channels_last runs.")]


@app.command("predict", epilog=o.MODEL_EXAMPLES)
def predict_cmd(gpu: GpuOpt = None, gpu_spec: GpuSpecOpt = None, workloads: o.WorkloadsOpt = None,
                precisions: o.PrecisionsOpt = None, preset: o.RunPresetOpt = None, batch_size: o.BatchSizesOpt = None,
                model: o.ModelOpt = None, input_shape: o.InputShapeOpt = None, vocab_size: o.VocabSizeOpt = None,
                num_classes: o.NumClassesOpt = None, num_outputs: o.NumOutputsOpt = None, task: o.TaskOpt = None,
                batches: o.BatchesOpt = None, loss: o.LossOpt = None, option: o.OptionOpt = None, seed: o.RunSeedOpt = 0,
                channels_last: ChannelsLastOpt = False, json_out: o.json_option("the predicted rows") = None,
                db: o.DbOpt = None) -> None:
    """Predict each precision's step time, memory and max batch on a GPU you do not have (nothing runs on a GPU)."""
    from ampbench.predict.run import find_gpu, predict_target  # lazy: torch
    from ampbench.requests import Target, data_options  # lazy: torch
    from ampbench.workloads import build_target  # lazy: torch

    spec = find_gpu(gpu, gpu_spec)
    check_output_file(json_out, "--json", "predict.json")
    names = _precisions(precisions)
    sizes = _batch_sizes(batch_size)
    data = data_options(input_shape, vocab_size, num_classes, num_outputs, task, batches, loss, None, None, option)
    if model is not None and workloads:
        raise AmpbenchError("give --workloads or --model, not both")
    from ampbench.workloads.registry import list_workloads  # lazy: torch

    wanted = [w.strip() for w in (workloads or "").split(",") if w.strip()] or ([] if model else list_workloads())
    targets = [Target(workload=w, preset=preset, seed=seed, data=data) for w in wanted] if not model else [
        Target(model=model, preset=preset, seed=seed, data=data)]
    for t in targets:
        t.check_data()
        if t.apart:
            raise AmpbenchError(f"predict traces PyTorch training steps; {t.label} is a {t.framework.name} target "
                                "(measure it with ampbench run)")
    rows: list[dict[str, Any]] = []
    for t in targets:
        def build(t: Any = t) -> Any:
            return build_target(t.workload, t.model, preset, data, seed)
        for size in sizes:
            with console.status(f"tracing {t.label} (meta tensors: nothing computed)"):
                rows += predict_target(t.label, build, names, spec, size, channels_last)
    _table(rows, spec)
    from ampbench.report.predictions import why_no_speedup  # lazy: torch

    slow: dict[tuple[str, Any, str], list[str]] = {}  # (workload, batch, why) -> modes predicted no faster than fp32
    for r in rows:
        if r["status"] == "ok" and r["precision"] != "fp32" and (r["predicted_speedup_vs_fp32"] or 0) < 1.1:
            slow.setdefault((r["workload"], r["batch_size"], why_no_speedup(r)), []).append(r["precision"])
    for (workload, batch, why), modes in slow.items():
        console.print(f"  {escape(workload)} (batch {batch}): no speedup predicted for {', '.join(modes)}; {escape(why)}")
    store = open_store(db)
    store.add_predictions(rows)
    console.print(f"stored {len(rows)} predicted rows in {escape(str(store.path))} (ampbench report shows them beside "
                  "any measurement of the same cell on that GPU)")
    if json_out is not None:
        write_text_atomic(json_out, json.dumps(rows, indent=1))
        console.print(f"wrote {escape(str(json_out))}")


def _precisions(text: str | None) -> list[str]:
    from ampbench.precision import list_precisions, resolve  # lazy: torch

    if not text:
        return [p for p in list_precisions() if not p.startswith("fp8")]
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        out.append(resolve(part))
    return out


def _batch_sizes(text: str | None) -> list[int | None]:
    if not text:
        return [None]
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise AmpbenchError(f"--batch-size {text!r}: comma-separated integers >= 1") from None
    if not sizes or min(sizes) < 1:
        raise AmpbenchError(f"--batch-size {text!r}: comma-separated integers >= 1")
    return list(sizes)


def _gib(n: Any) -> str:
    return "-" if n is None else f"{n / 2**30:.2f}"


def _table(rows: list[dict[str, Any]], spec: Any) -> None:
    """One table per workload and batch; a refused precision is a row with its reason."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["workload"], r["batch_size"]), []).append(r)
    tf32 = "tf32" in spec.tflops
    for (workload, batch), group in groups.items():
        table = Table(title=f"{escape(workload)}, batch {batch}: predicted on {escape(spec.key)} (no GPU ran it)")
        cols = ["mode", "ms/step", "samples/s", "x fp32"] + (["x tf32"] if tf32 else []) + [
            "peak GiB", "max batch", "MFU", "bound"]
        for col in cols:
            table.add_column(col, overflow="fold")
        for r in group:
            if r["status"] != "ok":
                table.add_row(r["precision"], f"[yellow]{r['status']}[/]", *([""] * (len(cols) - 2)))
                continue

            def x(v: Any) -> str:
                return "-" if v is None else f"{v:.2f}"
            cells = [r["precision"], f"{r['predicted_step_ms']:.2f}", f"{r['predicted_samples_per_s']:,.0f}",
                     x(r["predicted_speedup_vs_fp32"])] + ([x(r["predicted_speedup_vs_tf32"])] if tf32 else []) + [
                _gib(r["predicted_peak_bytes"]),
                "-" if r["predicted_max_batch"] is None else f"{r['predicted_max_batch']:,}",
                f"{r['predicted_mfu']:.0%}", r["predicted_bound"]]
            table.add_row(*cells)
        console.print(table)
        for r in group:
            if r["status"] != "ok":
                console.print(f"  {r['precision']}: {escape(r.get('reason') or '')}")
    console.print(f"peaks: {escape(spec.peak_source)}; memory and bandwidth: {escape(spec.source)}. Method, constants "
                  "and the error on published results: docs/predict.md")
