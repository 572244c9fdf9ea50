"""``ampbench run``: parse -> RunConfig (every check) -> the harness -> tables, advice, files."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from ampbench.bench.estimate import run_estimate
from ampbench.cli import options as o
from ampbench.cli.core import app, console, err_console, invocation, open_store, plural
from ampbench.cli.render import cell_text, plan_header, results_tables, run_with_progress
from ampbench.errors import AmpbenchError
from ampbench.paths import check_output_file, write_text_atomic
from ampbench.report import write_report
from ampbench.store import default_db_path, export_data, write_json
from ampbench.tensorboard import open_dir


@app.command("run", epilog=o.MODEL_EXAMPLES)
def run_cmd(workloads: o.WorkloadsOpt = None, precisions: o.PrecisionsOpt = None, preset: o.RunPresetOpt = None,
            batch_size: o.BatchSizesOpt = None, steps: o.StepsOpt = None, warmup: o.WarmupOpt = None,
            measure: o.MeasureOpt = None, repeats: o.RepeatsOpt = 1, device: o.DeviceOpt = None, db: o.DbOpt = None,
            json_out: o.RunJsonOpt = None, resume: o.ResumeOpt = False, seed: o.RunSeedOpt = 0, model: o.ModelOpt = None,
            input_shape: o.InputShapeOpt = None, vocab_size: o.VocabSizeOpt = None, num_classes: o.NumClassesOpt = None,
            num_outputs: o.NumOutputsOpt = None, task: o.TaskOpt = None, batches: o.BatchesOpt = None,
            loss: o.LossOpt = None, data_dir: o.RunDataDirOpt = None, val_fraction: o.ValFractionOpt = None,
            option: o.OptionOpt = None, loss_scale: o.LossScaleOpt = None, fp8_skip: o.Fp8SkipOpt = None,
            fp8_filter: o.Fp8FilterOpt = None, compile: o.CompileAxisOpt = None, memory_format: o.MemoryFormatOpt = None,
            cuda_graphs: o.CudaGraphsOpt = None, strategy: o.StrategiesOpt = None, nproc_per_node: o.NprocOpt = 2,
            grad_reduce_dtype: o.ReduceDtypesOpt = None, nnodes: o.NnodesOpt = 1, node_rank: o.NodeRankOpt = 0,
            rdzv_endpoint: o.RdzvOpt = None, memory_budget: o.MemoryBudgetOpt = None,
            memory_margin: o.MemoryMarginOpt = 0.05, maxbatch_limit: o.MaxbatchLimitOpt = 65536, seeds: o.SeedsOpt = None,
            converge_steps: o.ConvergeStepsOpt = None, inference_batch: o.InferenceBatchOpt = None,
            isolate: o.IsolateOpt = True, cell_timeout: o.CellTimeoutOpt = None, label: o.LabelOpt = None,
            report: o.ReportOpt = True, report_path: o.ReportPathOpt = None, dry_run: o.DryRunOpt = False,
            tensorboard: o.TensorboardOpt = None, backend: o.BackendOpt = None,
            optimizer_state: o.OptimizerStatesOpt = None) -> None:
    """Measure every precision side by side: speed, memory, largest batch, convergence, inference, MFU."""
    from ampbench.bench.config import RunConfig  # lazy: torch
    from ampbench.bench.runner import lend_ranks, validate_inputs  # lazy: torch

    config = RunConfig.from_strings(
        device=device, workloads=workloads, precisions=precisions, preset=preset, batch_size=batch_size, steps=steps,
        warmup=warmup, measure=measure, repeats=repeats, seed=seed, model=model, input_shape=input_shape,
        vocab_size=vocab_size, num_classes=num_classes, num_outputs=num_outputs, task=task, batches=batches, loss=loss,
        data_dir=data_dir, val_fraction=val_fraction, options=option, loss_scale=loss_scale, fp8_skip=fp8_skip,
        fp8_filter=fp8_filter, compile=compile, memory_format=memory_format, cuda_graphs=cuda_graphs, strategy=strategy,
        nproc_per_node=nproc_per_node, grad_reduce_dtype=grad_reduce_dtype, nnodes=nnodes, node_rank=node_rank,
        rdzv_endpoint=rdzv_endpoint, memory_budget=memory_budget, memory_margin=memory_margin,
        maxbatch_limit=maxbatch_limit, seeds=seeds, converge_steps=converge_steps, inference_batch=inference_batch,
        isolate=isolate, cell_timeout=cell_timeout, backend=backend, optimizer_state=optimizer_state)
    if nnodes > 1 and resume:
        raise AmpbenchError("--resume with --nnodes > 1 is not supported: the other machines cannot know which cells node "
                            "0 already stored; run again without --resume")
    check_output_file(json_out, "--json", "run.json")  # before the run, not after an hour of it
    if report:
        check_output_file(report_path, "--report-path", "report.html")
    for note in validate_inputs(config):  # a bad --model, --data-dir or missing extra fails now with one line
        err_console.print(f"[yellow]warning:[/] {escape(note)}")
    if node_rank > 0:  # this machine lends its ranks to node 0's run, which stores the rows
        n = lend_ranks(config)
        console.print(f"node {node_rank}: lent {nproc_per_node} rank(s) to {plural(n, 'distributed cell')} of node 0's "
                      f"run at {escape(str(rdzv_endpoint))}; its rows are stored there")
        return
    board = open_dir(tensorboard) if tensorboard is not None else None  # (refused now, not after the run)
    if dry_run:
        return _dry_run(config, db, json_out)
    store = open_store(db)
    plan_header(config, store.path, _estimate(config, store if resume else None))
    try:
        info, rows = run_with_progress(config, store, resume, label, board)
    except KeyboardInterrupt:
        _interrupted(config, store)
    results_tables(rows)
    _finish(store, info, rows, json_out, report_path if report else False)


def _interrupted(config: Any, store: Any) -> None:
    """Ctrl-C during a run: what was stored (every finished cell is) and the command that finishes the run; exit 130."""

    from ampbench.bench.runner import find_resumable  # lazy: torch

    try:
        run_id = find_resumable(store, config).run_id
        stored = sum(1 for c in config.cells() if c.key() in store.cell_keys(run_id))
    except AmpbenchError:  # (interrupted before the run was created)
        err_console.print("interrupted before any cell ran: nothing was stored")
        raise typer.Exit(130) from None
    args = invocation()
    if "--resume" not in args:
        args.append("--resume")
    err_console.print(f"interrupted: {plural(stored, 'cell')} of {len(config.cells())} stored in run {escape(run_id)} "
                      f"({escape(str(store.path))}); finish the run with: ampbench {escape(shlex.join(args))}",
                      highlight=False)
    raise typer.Exit(130) from None


def _estimate(config: Any, store: Any = None) -> Any:
    """How long the run (its cells not stored yet, with --resume) is expected to take, measured now (a few s)."""
    from ampbench.bench.runner import find_resumable  # lazy: torch

    cells = None
    if store is not None:
        done = store.cell_keys(find_resumable(store, config).run_id)
        cells = [c for c in config.cells() if c.key() not in done]
    with console.status("estimating the run's length (one timed step per workload and precision)"):
        return run_estimate(config, config.launch.isolated(config.device), cells)


def _dry_run(config: Any, db: Path | None, json_out: Path | None) -> None:
    """The plan, checked: a store that exists is checked (never created, never written)."""

    path = db if db is not None else default_db_path()
    if path.exists():
        open_store(path, create=False).close()
    plan_header(config, path, _estimate(config))
    for spec in config.cells():
        console.print(f"  {escape(cell_text(spec, config))}", highlight=False)
    console.print("dry run: nothing was run or stored")
    if json_out is not None:  # the plan, machine-readable: the run's identity and each cell with its key
        plan = {"identity": config.identity(), "cells": [{"key": c.key(), **c.to_dict()} for c in config.cells()]}
        write_text_atomic(json_out, json.dumps(plan, indent=1))
        console.print(f"wrote the plan to {escape(str(json_out))}")


def _finish(store: Any, info: Any, rows: list[dict[str, Any]], json_out: Path | None, report: Path | bool | None) -> None:
    """The run's summary and advice, its JSON and report; exit code 1 when cells errored (oom/diverged are
    measurements)."""

    bad = [r for r in rows if r["status"] != "ok"]
    errored = [r for r in rows if r["status"] == "error"]
    console.print(f"run [bold]{info.run_id}[/]: {len(rows) - len(bad)} ok, {len(bad)} not ok; stored in "
                  f"{escape(str(store.path))} (ampbench results / export)")
    from ampbench.report.console import advice_lines  # lazy: torch (the advisor's CPU facts)

    for advice in advice_lines(rows):
        console.print(advice)
    if json_out is not None:
        write_json(export_data(store, [info.run_id]), json_out)
        console.print(f"wrote {escape(str(json_out))}")
    if report is not False:
        path = write_report(store, report or None, info.run_id)  # type: ignore[arg-type]
        console.print(f"report: [bold]{escape(str(path))}[/]")
    if errored:
        err_console.print(f"[red]{plural(len(errored), 'cell')} errored[/]: " + escape("; ".join(
            f"{r['workload']} {r['precision']}: {r.get('reason') or 'no reason'}" for r in errored[:3])
            + (" ..." if len(errored) > 3 else "")), highlight=False, soft_wrap=True)
        raise typer.Exit(1)
