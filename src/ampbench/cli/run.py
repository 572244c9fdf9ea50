"""``ampbench run``: parse -> RunConfig (every check) -> the harness -> tables, advice, files."""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from ampbench.bench.estimate import run_estimate
from ampbench.cli import declared
from ampbench.cli.core import app, console, err_console, invocation, open_store, working
from ampbench.cli.examples import MODEL_EXAMPLES
from ampbench.cli.render import cell_line, plan_header, results_tables, run_with_progress
from ampbench.command_options import RunOptions, RunOutput
from ampbench.errors import AmpbenchError
from ampbench.measure.stats import MIN_NOISE_STEPS
from ampbench.paths import check_output_file, write_text_atomic
from ampbench.progress import duration
from ampbench.report import write_report
from ampbench.report.console import advice_lines
from ampbench.report.run_diff import since_last, since_line
from ampbench.report.run_text import cell_text, plural
from ampbench.store import default_db_path, export_data, write_json
from ampbench.tensorboard import open_dir
from ampbench.values import parse_unique


@app.command("run", epilog=MODEL_EXAMPLES)
@declared.command
def run_cmd(options: RunOptions, output: RunOutput) -> None:
    """Measure every precision side by side: speed, memory, largest batch, convergence, inference, MFU."""
    from ampbench.bench.config import RunConfig  # lazy: torch
    from ampbench.bench.runner import lend_ranks, validate_inputs  # lazy: torch

    config = RunConfig.from_options(options)
    out, dist = output, options.torch
    if dist.nnodes > 1 and out.resume:
        raise AmpbenchError("--resume with --nnodes > 1 is not supported: the other machines cannot know which cells node "
                            "0 already stored; run again without --resume")
    check_output_file(out.json_out, "--json", "run.json")  # before the run, not after an hour of it
    if out.report:
        check_output_file(out.report_path, "--report-path", "report.html")
    for note in validate_inputs(config):  # a bad --model, --data-dir or missing extra fails now with one line
        err_console.print(f"[yellow]warning:[/] {escape(note)}")
    if dist.node_rank > 0:  # this machine lends its ranks to node 0's run, which stores the rows
        def lent(spec: Any, row: dict[str, Any]) -> None:  # (this machine's ranks' side: why node 0's cell failed)
            st = row["status"]
            console.print(cell_line(st, "lent" if st == "ok" else st, escape(cell_text(spec, config)),
                                    row.get("reason") or ""), highlight=False)

        n = lend_ranks(config, lent)
        console.print(f"node {dist.node_rank}: lent {dist.nproc_per_node} rank(s) to {plural(n, 'distributed cell')} "
                      f"of node 0's run at {escape(str(dist.rdzv_endpoint))}; its rows are stored there")
        return
    board = open_dir(out.tensorboard) if out.tensorboard is not None else None  # (refused now, not after the run)
    if out.dry_run:
        return _dry_run(config, out.db, out.json_out, options)
    store = open_store(out.db)
    estimate = _estimate(config, store if out.resume else None)
    plan_header(config, store.path, estimate)
    _named_note(options, config)
    _noise_note(config)
    started = time.monotonic()
    try:
        info, rows = run_with_progress(config, store, out.resume, out.label, board, verbose=out.verbose)
    except KeyboardInterrupt:
        _interrupted(config, store)
    took = time.monotonic() - started
    results_tables(rows)
    _finish(store, info, rows, out.json_out, out.report_path if out.report else False,
            f" in {duration(took)}{estimate.against() if estimate is not None else ''}")


def _noise_note(config: Any) -> None:
    """Said before the run: timed too briefly for a noise estimate, with one measurement a cell, none of its speedups
    will be claimed (a --steps 3 run's tables read "(noise unknown)" after it had run)."""
    m = config.measure
    if "throughput" in m.measures and config.axes.repeats == 1 and m.steps < MIN_NOISE_STEPS:
        console.print(f"[yellow]note:[/] --steps {m.steps}: a cell measures its noise over {MIN_NOISE_STEPS} or more "
                      f"timed steps; with fewer, and one measurement a cell, no speedup of this run is claimed "
                      f"(--steps {MIN_NOISE_STEPS}, or --repeats 3)", highlight=False)


def _named_note(options: RunOptions, config: Any) -> None:
    """On a GPU, what workloads named without --preset were sized to (a line under the plan's header), each batch the
    one its cells run (sized to this GPU's memory)."""
    from ampbench.bench.suites import named_note  # lazy: torch (the workloads' presets)

    t, settings = options.targets, config.targets.settings
    names = parse_unique(t.workloads, "workloads")  # (as the config names them)
    batches = [s.batch for s in settings] if len(settings) == len(names) else [None] * len(names)
    note = named_note(names, t.preset, config.device, batches=batches) if t.model is None else None
    if note:
        console.print(f"[dim]{escape(note)}[/]")


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
    with working("estimating the run's length (one timed step per workload and precision)"):
        return run_estimate(config, config.launch.isolated(config.device), cells)


def _dry_run(config: Any, db: Path | None, json_out: Path | None, options: RunOptions) -> None:
    """The plan, checked: a store that exists is checked (never created, never written)."""

    path = db if db is not None else default_db_path()
    if path.exists():
        open_store(path, create=False).close()
    plan_header(config, path, _estimate(config))
    _named_note(options, config)
    _noise_note(config)
    for spec in config.cells():
        console.print(f"  {escape(cell_text(spec, config))}", highlight=False)
    console.print("dry run: nothing was run or stored")
    if json_out is not None:  # the plan, machine-readable: the run's identity and each cell with its key
        plan = {"identity": config.identity(), "cells": [{"key": c.key(), **c.to_dict()} for c in config.cells()]}
        write_text_atomic(json_out, json.dumps(plan, indent=1))
        console.print(f"wrote the plan to {escape(str(json_out))}")


def _since_last(store: Any, info: Any) -> None:
    """What changed since the last run on this device that measured these cells (beyond the noise): one line."""
    diff = since_last(store, info)
    if diff is not None:
        console.print(escape(since_line(diff)), highlight=False)


def _finish(store: Any, info: Any, rows: list[dict[str, Any]], json_out: Path | None, report: Path | bool | None,
            took: str = "") -> None:
    """The run's summary and advice, its JSON and report; exit code 1 when cells errored (oom/diverged are
    measurements). ``took``: how long the cells took, beside the estimate the header gave (" in 56 s (expected
    ~58 s)"), so a wrong estimate shows."""

    bad = [r for r in rows if r["status"] != "ok"]
    errored = [r for r in rows if r["status"] == "error"]
    console.print(f"run [bold]{info.run_id}[/]: {len(rows) - len(bad)} ok, {len(bad)} not ok{took}; stored in "
                  f"{escape(str(store.path))} (ampbench results / export)")
    for advice in advice_lines(rows):
        console.print(advice)
    _since_last(store, info)
    if json_out is not None:
        write_json(export_data(store, [info.run_id], kernel_tables=False), json_out)
        console.print(f"wrote {escape(str(json_out))}")
    if report is not False:
        path = write_report(store, report or None, info.run_id)  # type: ignore[arg-type]
        console.print(f"report: [bold]{escape(str(path))}[/]")
    if errored:
        err_console.print(f"[red]{plural(len(errored), 'cell')} errored[/]: " + escape("; ".join(
            f"{r['workload']} {r['precision']}: {r.get('reason') or 'no reason'}" for r in errored[:3])
            + (" ..." if len(errored) > 3 else "")), highlight=False, soft_wrap=True)
        raise typer.Exit(1)
