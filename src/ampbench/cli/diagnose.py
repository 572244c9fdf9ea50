"""``ampbench diagnose``: why NaN, why the loss scale collapses, why no speedup or memory saving."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from ampbench.cli import options as o
from ampbench.cli.core import app, console, open_store, plural
from ampbench.errors import AmpbenchError
from ampbench.paths import check_output_file, write_text_atomic


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
) -> None:
    """Why NaN, why the loss scale collapses, why no speedup or memory saving: a short report, most important first."""

    from ampbench import frameworks
    from ampbench.diagnose import applicable_checks, diagnose, parse_checks
    from ampbench.precision import Fp8Options, resolve
    from ampbench.store.sqlite import utcnow
    from ampbench.workloads import build_target

    fw, resolved = frameworks.of_command(target, model, backend, preset, seed)
    wanted = parse_checks(checks) if checks is not None else fw.diagnose_checks() or applicable_checks(precision)
    data = o.data_options(input_shape, vocab_size, num_classes, num_outputs, task, batches, loss, data_dir, val_fraction,
                          option)
    apart = None
    if fw.diagnose_job() is not None:  # another framework's model: its checks, in a process of its own (its backend)
        apart = fw.command_spec(resolved, target, model, precision, preset, batch_size, device, seed, data, {
            "--fp8-skip/--fp8-filter": fp8_skip is not None or fp8_filter is not None, "--trace": trace is not None,
            "--tensorboard": tensorboard is not None, "--data-dir/--option": data_dir is not None or bool(option)})
        fw.check_checks(wanted, target or f"--model {model}")
    fp8 = Fp8Options.for_modes([precision], fp8_skip, fp8_filter)
    data.check_targets([target] if target else [], model)  # type: ignore[attr-defined]
    label = target or f"user:{model}"
    check_output_file(json_out, "--json", "diagnosis.json")
    check_output_file(trace, "--trace", "trace.json")
    if tensorboard is not None:
        from ampbench.tensorboard import open_dir

        open_dir(tensorboard)
        if not {"gradients", "activations"} & set(wanted):
            raise AmpbenchError("--tensorboard writes the gradients and activations checks' histograms: add "
                                "--checks gradients,activations (or leave --checks out)")

    def build():  # type: ignore[no-untyped-def]  (diagnose() calls it once, and validates everything first)
        return build_target(target, model, preset, data, seed)  # type: ignore[arg-type]

    store = open_store(db)
    if trace is None and "profile" in wanted:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)[:60]
        trace = store.path.parent / "traces" / f"{utcnow().replace(':', '')}-{safe}-{resolve(precision)}.json"
    with console.status(f"diagnosing {escape(label)} in {resolve(precision)}: {', '.join(wanted)}"):
        if apart is not None:
            d = _diagnose_apart(fw, apart, wanted, steps)
        else:
            d = diagnose(build, precision, steps=steps, preset=preset or "small", batch_size=batch_size, device=device,
                         seed=seed, checks=wanted, trace=trace, name=label, mp_options={"fp8": fp8} if fp8 else None)
    _show_and_store(d, label, wanted, store, tensorboard, json_out)


def _show_and_store(d: Any, label: str, wanted: tuple[str, ...], store: Any, tensorboard: Path | None,
                    json_out: Path | None) -> None:
    """The findings, most important first; the diagnosis stored (the HTML report shows it), its TensorBoard
    histograms and its JSON file."""
    import json

    from ampbench.store.sqlite import utcnow

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
        from ampbench.tensorboard import safe_name, write_diagnosis

        path = write_diagnosis(tensorboard / safe_name(f"{label} {d.precision} {utcnow().replace(':', '')}"), d.details)
        console.print(f"TensorBoard histograms: {escape(str(path))} (tensorboard --logdir {escape(str(tensorboard))})")
    if json_out is not None:
        from ampbench.store.exchange import clean_json

        write_text_atomic(json_out, json.dumps(clean_json(data), indent=1, default=str))
        console.print(f"wrote {escape(str(json_out))}")


def _diagnose_apart(fw: Any, spec: Any, wanted: tuple[str, ...], steps: int) -> Any:
    """The diagnosis of another framework's model (its ``diagnose_job``) in a child process, as a Diagnosis."""
    from ampbench.diagnose import Diagnosis
    from ampbench.diagnose.findings import Finding
    from ampbench.launch import ChildProcess, Job

    r = ChildProcess().run(Job(fw.diagnose_job(), {"spec": spec.to_dict(), "checks": list(wanted), "steps": steps}))
    if "_failed" in r:
        raise AmpbenchError(f"diagnosing {spec.label} ({fw.describe(spec.backend)}) failed: {r['_failed']}")
    if r.get("error"):
        raise AmpbenchError(r["error"])
    findings = [Finding(**f) for f in r.pop("findings")]
    return Diagnosis(findings=findings, **r)
