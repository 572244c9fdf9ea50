"""``ampbench diagnose``: why NaN, why the loss scale collapses, why no speedup or memory saving."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from ampbench.cli import options as o
from ampbench.cli.core import app, console, open_store, plural
from ampbench.paths import write_text_atomic
from ampbench.store.exchange import clean_json
from ampbench.store.sqlite import utcnow
from ampbench.tensorboard import safe_name, write_diagnosis


@app.command("diagnose", epilog=o.MODEL_EXAMPLES)
def diagnose_cmd(
    target: o.WorkloadArg = None,
    precision: o.mode_option("Mode to diagnose (name or alias).") = "amp-fp16",
    steps: Annotated[int, typer.Option(help="Training steps per check (NaN search, policy trials, profile).")] = 20,
    checks: Annotated[o.Opt[str], typer.Option(help="nonfinite,gradients,activations,policy,tensorcore,profile,fp8 "
                                             "(fp8: the fp8 modes only).")] = None,
    preset: o.PresetOpt = None,
    batch_size: o.BatchSizeOpt = None,
    device: o.DeviceOpt = None,
    seed: o.SeedOpt = 0,
    model: o.ModelOpt = None,
    input_shape: o.InputShapeOpt = None,
    vocab_size: o.VocabSizeOpt = None,
    num_classes: o.NumClassesOpt = None,
    num_outputs: o.NumOutputsOpt = None,
    task: o.TaskOpt = None,
    batches: o.BatchesOpt = None,
    loss: o.LossOpt = None,
    data_dir: o.DataDirOpt = None,
    val_fraction: o.ValFractionOpt = None,
    option: o.OptionOpt = None,
    fp8_skip: o.Fp8SkipOpt = None,
    fp8_filter: o.Fp8FilterOpt = None,
    json_out: o.json_option("the diagnosis") = None,
    trace: Annotated[o.Opt[Path], typer.Option(help="Chrome trace of the profiled steps (default: <db dir>/traces/).")] = None,
    db: Annotated[o.Opt[Path], typer.Option(help="Store the diagnosis here (the HTML report shows it).")] = None,
    tensorboard: o.TensorboardOpt = None,
    backend: o.BackendOpt = None,
    optimizer_state: o.OptimizerStateOpt = None,
) -> None:
    """Why NaN, why the loss scale collapses, why no speedup or memory saving: a short report, most important first."""
    from ampbench.command_requests import DiagnoseRequest, Target, data_options  # lazy: torch
    from ampbench.precision import resolve  # lazy: torch

    data = data_options(input_shape, vocab_size, num_classes, num_outputs, task, batches, loss, data_dir, val_fraction,
                        option)
    r = DiagnoseRequest(Target(target, model, preset, seed, data, backend_given=backend), precision=precision,
                        steps=steps, checks=checks, batch_size=batch_size, device=device, fp8_skip=fp8_skip,
                        fp8_filter=fp8_filter, json_out=json_out, trace=trace, tensorboard=tensorboard,
                        optimizer_state=optimizer_state)
    wanted, label = r.wanted, r.target.label
    store = open_store(db)
    if trace is None and "profile" in wanted:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)[:60]
        trace = store.path.parent / "traces" / f"{utcnow().replace(':', '')}-{safe}-{resolve(precision)}.json"
    with console.status(f"diagnosing {escape(label)} in {resolve(precision)}: {', '.join(wanted)}"):
        d = r.target.framework.diagnose(r, r.plan, trace)
    _show_and_store(d, label, wanted, store, tensorboard, json_out)


def _show_and_store(d: Any, label: str, wanted: tuple[str, ...], store: Any, tensorboard: Path | None,
                    json_out: Path | None) -> None:
    """The findings, most important first; the diagnosis stored (the HTML report shows it), its TensorBoard
    histograms and its JSON file."""

    console.print(f"[bold]{escape(label)}[/] in [bold cyan]{d.precision}[/] on {escape(d.device_name)} ({d.device}), "
                  f"batch {d.batch_size}: {', '.join(wanted)}")
    style = {"error": "bold red", "warning": "yellow", "info": "dim"}
    for i, f in enumerate(d.findings, 1):
        console.print(f"[{style.get(f.severity, '')}]{i:>2}. {f.severity.upper():<7}[/] {escape(f.title)}", highlight=False)
        if f.detail:
            console.print(f"             {escape(f.detail)}", style="dim", highlight=False)
        if f.fix:
            console.print(f"             [green]fix:[/] {escape(f.fix)}", highlight=False)
    data = d.to_dict()
    data["created_at"] = utcnow()
    store.add_diagnosis(data)
    console.print(f"{plural(len(d.findings), 'finding')} in {d.seconds:.1f} s on {escape(d.device_name)} "
                  f"({d.device}); stored in {escape(str(store.path))}")
    if tensorboard is not None:
        path = write_diagnosis(tensorboard / safe_name(f"{label} {d.precision} {utcnow().replace(':', '')}"), d.details)
        console.print(f"TensorBoard histograms: {escape(str(path))} (tensorboard --logdir {escape(str(tensorboard))})")
    if json_out is not None:
        write_text_atomic(json_out, json.dumps(clean_json(data), indent=1, default=str))
        console.print(f"wrote {escape(str(json_out))}")
