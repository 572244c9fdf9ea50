"""``ampbench predict``: speed, memory and max batch per precision on a named GPU, without one (a traced step priced
on the GPU's datasheet: :mod:`ampbench.predict`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape

from ampbench.cli import options as o
from ampbench.cli.core import app, console, open_store
from ampbench.errors import AmpbenchError
from ampbench.paths import check_output_file, write_text_atomic
from ampbench.report.predictions import no_speedup_lines

GpuOpt = Annotated[Optional[str], typer.Option("--gpu", help="The GPU: p4, p100-16gb, v100-16gb, v100-32gb, "  # noqa: UP045
                   "v100-32gb-pcie, t4, a10, a100-40gb, a100-80gb, a100-40gb-pcie, a100-80gb-pcie, l4, l40s, h100-sxm, "
                   "h100-pcie, h200, b200, rtx-4090 (case-insensitive).")]
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
                db: o.DbOpt = None, optimizer_state: o.OptimizerStatesOpt = None) -> None:
    """Predict each precision's step time, memory and max batch on a GPU you do not have (nothing runs on a GPU)."""
    from ampbench.predict.run import check_target, find_gpu, predict_target  # lazy: torch, torch.utils.flop_counter
    from ampbench.requests import Target, data_options  # lazy: torch
    from ampbench.workloads import build_target  # lazy: torch
    from ampbench.workloads.user import check_preset as check_model_preset  # lazy: torch

    spec = find_gpu(gpu, gpu_spec)
    check_output_file(json_out, "--json", "predict.json")
    store = open_store(db)  # (a directory or a damaged file: one line, before anything is traced)
    names = _precisions(precisions)
    sizes = _batch_sizes(batch_size)
    states = _optimizer_states(optimizer_state, names)
    data = data_options(input_shape, vocab_size, num_classes, num_outputs, task, batches, loss, None, None, option)
    if model is not None and workloads:
        raise AmpbenchError("give --workloads or --model, not both")
    from ampbench.bench.suites import with_presets  # lazy: torch

    # the cells `ampbench run` measures on a GPU: named workloads at --preset (default small), else the GPU suite
    wanted = [w.strip() for w in (workloads or "").split(",") if w.strip()]
    names_presets = list(zip(*with_presets(wanted, preset, "cuda"))) if not model else [(None, preset or "small")]
    targets = [Target(workload=w, model=model if w is None else None, preset=p, seed=seed, data=data)
               for w, p in names_presets]
    for t in targets:
        t.check_data()
        if t.apart:
            raise AmpbenchError(f"predict traces PyTorch training steps; {t.label} is a {t.framework.name} target "
                                "(measure it with ampbench run)")
    if model is not None:
        check_model_preset(model, preset, seed)  # (only a preset the user gave: "small" is then just the label)

    def builder(t: Any) -> Any:
        return lambda: build_target(t.workload, t.model, t.preset, data, seed, preset_given=False)

    for t in targets:  # every target built (on meta) and its optimizer checked before any tracing
        check_target(builder(t), names, states)
    rows: list[dict[str, Any]] = []
    for t in targets:
        build = builder(t)
        for size in sizes:
            with console.status(f"tracing {t.label} (meta tensors: nothing computed)"):
                rows += predict_target(t.label, build, names, spec, size, channels_last, preset=t.preset,
                                       optimizer_states=states)
    _table(rows, spec)
    for line in no_speedup_lines(rows):
        console.print(f"  {escape(line)}")
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


def _optimizer_states(text: str | None, precisions: list[str]) -> tuple[str | None, ...]:
    """--optimizer-state's states, checked (names; torchao installed when one is not a mode's own); None first."""
    from ampbench.bench.config import parse_list  # lazy: torch
    from ampbench.precision import optimizer_state  # lazy: torch

    given = tuple(dict.fromkeys(optimizer_state.check_name(s) for s in parse_list(text, "optimizer-state")))
    problem = optimizer_state.missing_for(precisions, given)
    if problem:
        raise AmpbenchError(f"--optimizer-state {text}: {problem}")
    return (None, *given)


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


def _x(v: Any) -> str:
    return "-" if v is None else f"{v:.2f}"


def _bytes(n: Any) -> str:
    from ampbench.report.console import fmt_bytes  # lazy: torch

    return fmt_bytes(n)


# (header, cell of an ok row); the memory split (weights, grads, optimizer, activations) sums to the peak with the
# workspace and the largest temporary
_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("ms/step", lambda r: f"{r['predicted_step_ms']:,.2f}"),
    ("samples/s", lambda r: f"{r['predicted_samples_per_s']:,.0f}"),
    ("x fp32", lambda r: _x(r["predicted_speedup_vs_fp32"])),
    ("x tf32", lambda r: _x(r["predicted_speedup_vs_tf32"])),
    ("± error", lambda r: f"±{r['predicted_error_pct']}%"),
    ("peak memory", lambda r: _bytes(r["predicted_peak_bytes"])),
    ("max batch", lambda r: "-" if r["predicted_max_batch"] is None else f"{r['predicted_max_batch']:,}"),
    ("MFU", lambda r: f"{r['predicted_mfu']:.0%}"),
    ("bound", lambda r: r["predicted_bound"]),
    ("weights", lambda r: _bytes(r["predicted_weights_bytes"])),
    ("grads", lambda r: _bytes(r["predicted_grads_bytes"])),
    ("optimizer", lambda r: _bytes(r["predicted_optimizer_bytes"])),
    ("activations", lambda r: _bytes(r["predicted_activation_bytes"])),
)


_MEMORY_HEADS = {"peak memory", "max batch", "weights", "grads", "optimizer", "activations"}


def _oom_cell(head: str, row: dict[str, Any]) -> str:
    """An ``oom`` row: its memory figures (what did not fit, and the largest batch that does), no speed."""
    if head == "ms/step":
        return "oom"
    return dict(_COLUMNS)[head](row) if head in _MEMORY_HEADS else ""


def _table(rows: list[dict[str, Any]], spec: Any) -> None:
    """One table per workload and batch (stacked to fit the terminal, no number cut); a refused precision is a row
    with its status, its reason printed below."""
    from ampbench.report.console import Col, stack_tables  # lazy: torch

    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["workload"], r["preset"], r["batch_size"]), []).append(r)
    columns = [c for c in _COLUMNS if c[0] != "x tf32" or "tf32" in spec.tflops]
    for (workload, preset, batch), group in groups.items():
        key = Col("mode", [r["precision"] + (f" {r['optimizer_state']}" if r.get("optimizer_state") else "")
                           for r in group], justify="left")
        cols = [Col(head, [cell(r) if r["status"] == "ok" else (_oom_cell(head, r) if r["status"] == "oom" else (
            r["status"] if i == 0 else "")) for r in group]) for i, (head, cell) in enumerate(columns)]
        title = f"{escape(workload)} ({escape(preset)}), batch {batch}: predicted on {escape(spec.key)} (no GPU ran it)"
        for table in stack_tables(title, key, cols, console.width):
            console.print(table)
        for r in group:
            if r["status"] != "ok":
                state = f" {r['optimizer_state']} optimizer states" if r.get("optimizer_state") else ""
                console.print(f"  {r['precision']}{state}: {escape(r.get('reason') or '')}")
    bases = dict.fromkeys(r["predicted_error_basis"] for r in rows if r.get("predicted_error_basis"))
    for basis in bases:
        console.print(f"± error: the typical |error| of predictions like these ({escape(basis)})")
    console.print(f"peaks: {escape(spec.peak_source)}; memory and bandwidth: {escape(spec.source)}. Method, constants "
                  "and the error on published results: docs/predict.md")
