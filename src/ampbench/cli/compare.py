"""``ampbench compare``: throughput across devices, one table per setting; with ``--runs``, two runs of the same
cells side by side (:mod:`ampbench.report.run_diff`); with ``--history``, every run of them
(:mod:`ampbench.report.history`)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.text import Text

from ampbench.cli.core import app, console, err_console, open_store
from ampbench.cli.declared import Opt
from ampbench.errors import AmpbenchError
from ampbench.modes import resolve
from ampbench.report import ONLY_PREDICTIONS
from ampbench.report.compare import compare_table
from ampbench.report.console import Col, predicted_table, stack_tables
from ampbench.report.history import history as history_of
from ampbench.report.history import point_text
from ampbench.report.predictions import table as predictions_table
from ampbench.report.run_diff import (
    MIN_CHANGE,
    SIGNIFICANCE,
    cell_line,
    cell_name,
    change_text,
    diff_runs,
    header_lines,
    markdown,
    summary_line,
    verdict_tone,
)
from ampbench.report.run_diff import TABLE as DIFF_TABLE
from ampbench.store import derive
from ampbench.store.derive import merge_repeats
from ampbench.store.exchange import clean_json
from ampbench.values import parse_list


@app.command("compare")
def compare_cmd(
    db: Annotated[Opt[Path], typer.Option(help="Results store.")] = None,
    workloads: Annotated[Opt[str], typer.Option(help="Only these workloads (comma-separated).")] = None,
    precision: Annotated[Opt[str], typer.Option("--precisions", "--precision",
                                                  help="Only these modes (comma-separated).")] = None,
    reference: Annotated[Opt[str], typer.Option(help="Device name to normalise to (default: the slowest in fp32).")] = None,
    runs: Annotated[Opt[str], typer.Option(help="Two runs, BEFORE,AFTER (ids, unique prefixes, or previous / latest): "
                                                "each cell in both, what changed beyond the noise, what differs "
                                                "between the runs.")] = None,
    fail_if_slower: Annotated[Opt[float], typer.Option(
        help="With --runs: exit 1 when a cell ran more than PCT % slower beyond the noise, or stopped running "
             "(a regression gate).", metavar="PCT")] = None,
    min_change: Annotated[Opt[float], typer.Option(
        help="With --runs or --history: the smallest change that counts, whatever the noise (default 1).",
        metavar="PCT")] = None,
    fmt: Annotated[str, typer.Option("--format", help="With --runs: table | md | json (--history: table | json).")]
    = "table",
    history: Annotated[bool, typer.Option("--history", help="Every run of the same cells on one device, oldest "
                                                            "first: each precision's samples/s run after run, marked "
                                                            "where it moved beyond the noise.")] = False,
    last: Annotated[Opt[int], typer.Option(help="With --history: the runs each table keeps, the latest (default 10).")]
    = None,
) -> None:
    """Throughput across GPUs: rows = devices, columns = precisions, relative to a reference device; with --runs,
    two runs of the same cells: what changed beyond the noise; with --history, every run of them."""
    check_run_options(runs, reference, fail_if_slower, min_change, fmt, history, last)
    store = open_store(db, create=False)
    precs = [resolve(p) for p in parse_list(precision, "precision")] or None
    wanted = parse_list(workloads, "workloads") or None
    if history:
        _history(store, wanted, precs, last or 10, MIN_CHANGE if min_change is None else min_change / 100, fmt)
        return
    if runs is not None:
        _runs(store, runs, wanted, precs, fail_if_slower, MIN_CHANGE if min_change is None else min_change / 100, fmt)
        return
    tables = compare_table(merge_repeats(store.rows()), reference, wanted, precs)
    if not tables:
        if store.latest_run() is None and store.predictions(wanted):
            console.print(ONLY_PREDICTIONS)
            _predicted(store, wanted, precs)
            return
        raise AmpbenchError(f"no ok results to compare in {store.path} (import other machines' exports first)")
    compared = [t for t in tables if len(t.devices) > 1]
    for t in compared:
        key = Col("device", [escape(d) for d in t.devices], justify="left", wraps=True)
        cols = [Col(p, [_cell(t.cells.get((d, p))) for d in t.devices]) for p in t.precisions]
        # (stacked to the terminal: no precision name wrapped, no figure cut)
        for table in stack_tables(f"{escape(t.title)}: samples/s relative to {escape(t.reference)}", key, cols,
                                  console.width):
            console.print(table)
    # a setting measured on one device has nothing beside it: a table of "1.00x" per setting said nothing (and a
    # store of two devices that share no setting said "only one device has results")
    alone = [t for t in tables if len(t.devices) == 1]
    if alone:
        console.print(alone_text(alone, compared), soft_wrap=True)
    _predicted(store, sorted({t.workload for t in tables}), precs)


def check_run_options(runs: str | None, reference: str | None, fail_if_slower: float | None,
                      min_change: float | None, fmt: str, history: bool = False, last: int | None = None) -> None:
    """The options of a comparison of runs, checked before the store is read (each a one-line error)."""
    if fmt not in ("table", "md", "json"):
        raise AmpbenchError(f"--format {fmt!r}: choose table, md or json")
    if last is not None and not history:
        raise AmpbenchError("--last is how many runs --history keeps: give --history")
    if history:
        clash = next((name for name, v in (("--runs", runs), ("--reference", reference),
                                           ("--fail-if-slower", fail_if_slower)) if v is not None), None)
        if clash:
            raise AmpbenchError(f"--history is every run of the same cells; {clash} is another comparison: give one")
        if fmt == "md":
            raise AmpbenchError("--format md: --history writes table or json")
        if last is not None and last < 2:
            raise AmpbenchError(f"--last {last}: at least 2 runs make a history")
        return
    if runs is None:
        given = next((name for name, v in (("--fail-if-slower", fail_if_slower), ("--min-change", min_change),
                                           ("--format", None if fmt == "table" else fmt)) if v is not None), None)
        if given:
            raise AmpbenchError(f"{given} compares two runs: give --runs BEFORE,AFTER")
        return
    if reference is not None:
        raise AmpbenchError("--reference normalises devices; --runs compares two runs: give one")
    if len(parse_list(runs, "runs")) != 2:
        raise AmpbenchError(f"--runs {runs!r}: give two runs, BEFORE,AFTER (ids, unique prefixes, previous, latest)")
    for name, pct in (("--fail-if-slower", fail_if_slower), ("--min-change", min_change)):
        if pct is not None and not (math.isfinite(pct) and 0 <= pct < 100):
            raise AmpbenchError(f"{name} {pct:g}: a percentage from 0 to 100 (5: a cell 5 % slower)")


def _pick(store: Any, name: str) -> Any:
    """A run named on the command line: an id or unique prefix, or previous / latest."""
    runs = store.runs()
    if name in ("latest", "previous"):
        back = 1 if name == "latest" else 2
        if len(runs) < back:
            raise AmpbenchError(f"--runs {name}: {store.path} holds {len(runs)} run{'s' if len(runs) != 1 else ''}")
        return runs[-back]
    return store.run(name)


def _runs(store: Any, runs: str, workloads: list[str] | None, precisions: list[str] | None,
          fail_if_slower: float | None, min_change: float, fmt: str) -> None:
    """``compare --runs BEFORE,AFTER``: the same cells in two runs, side by side."""
    first, second = (_pick(store, n) for n in parse_list(runs, "runs"))
    if first.run_id == second.run_id:
        raise AmpbenchError(f"--runs {runs!r}: both name run {first.run_id}; give two runs")
    hw = store.hw()
    # (every precision paired, then the ones asked kept: fp32's drift is part of each mode's noise)
    diff = diff_runs(first, derive(store.rows(first.run_id, workloads), hw), second,
                     derive(store.rows(second.run_id, workloads), hw), min_change=min_change)
    if precisions is not None:
        diff.changes = [c for c in diff.changes if c.cell.precision in precisions]
    if not any(c.before is not None and c.after is not None for c in diff.changes):
        raise AmpbenchError(f"runs {first.run_id} and {second.run_id} measured no cell in common"
                            f"{' (of the workloads and precisions asked)' if workloads or precisions else ''}: "
                            "ampbench results --run ID lists each run's cells")
    if fmt == "json":
        sys.stdout.write(json.dumps(clean_json(diff.to_dict()), indent=1) + "\n")
    elif fmt == "md":
        sys.stdout.write(markdown(diff))
    else:
        _print_diff(diff)
    if fail_if_slower is not None:
        bad = diff.regressions(fail_if_slower / 100)
        if bad:
            err_console.print(f"[red]regression:[/] {escape(regression_text(bad, fail_if_slower))}", highlight=False)
            raise typer.Exit(1)


def _history(store: Any, workloads: list[str] | None, precisions: list[str] | None, last: int, min_change: float,
             fmt: str) -> None:
    """``compare --history``: each setting's runs on one device, oldest first, a column per precision."""
    def shown(s: Any) -> list[str]:  # (a column's label is its precision, "(8bit states)" after it where it has one)
        return [p for p in s.points if precisions is None or p.split(" (")[0] in precisions]

    rows = derive(store.rows(None, workloads), store.hw())
    series = [(s, shown(s)) for s in history_of(rows, store.runs(), last, min_change)]
    series = [(s, precs) for s, precs in series if precs]
    if not series:
        raise AmpbenchError(f"no setting was timed in two runs on one device in {store.path}"
                            f"{' (of the workloads and precisions asked)' if workloads or precisions else ''}: "
                            "ampbench results --all lists every run's cells")
    if fmt == "json":
        sys.stdout.write(json.dumps(clean_json([s.to_dict() for s, _ in series]), indent=1) + "\n")
        return
    for s, precs in series:
        key = Col("run", [r for r, _ in s.runs], justify="left")  # (its id says when: 20261127-145038-...)
        cols = [Col(f"{p} /s", [Text(point_text(s.points[p].get(r)), style=_style(s.points[p][r].verdict or "")
                                     if r in s.points[p] else "") for r, _ in s.runs]) for p in precs]
        for table in stack_tables(escape(s.title), key, cols, console.width):
            console.print(table)
        for run, moved in s.env.items():
            console.print(f"[dim]  {escape(run)}: {escape(moved)}[/]", highlight=False)
    console.print(f"[dim]a figure shows its change where it moved beyond {SIGNIFICANCE:g}x the noise both runs measured and "
                  f"{min_change:.0%} against the run before it (ampbench compare --runs A,B sets two runs side by "
                  "side)[/]", highlight=False)


def regression_text(bad: list[Any], pct: float) -> str:
    """One line naming the cells a ``--fail-if-slower`` gate fails on."""
    named = "; ".join(f"{cell_name(c.cell)} {change_text(c)}" for c in bad[:3])
    more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
    return (f"{len(bad)} cell{'s' if len(bad) != 1 else ''} slower than {pct:g} % beyond the noise or no longer "
            f"running: {named}{more}")


def _print_diff(diff: Any) -> None:
    for line in header_lines(diff):
        console.print(escape(line), highlight=False)
    for setting, changes in diff.settings():
        cells = [cell_line(c) for c in changes]
        key, *cols = [Col(head, [Text(c[k], style=_style(c[k]) if k == "verdict" else "") for c in cells],
                          justify="left" if k in ("precision", "verdict") else "right", wraps=k in ("verdict", "memory"))
                      for k, head in DIFF_TABLE]  # (the columns of the Markdown and the HTML, in their order)
        title = f"{setting.workload} ({setting.preset}), {setting.describe()}"
        for table in stack_tables(escape(title), key, cols, console.width):
            console.print(table)
    console.print(escape(summary_line(diff)), highlight=False)


def _style(verdict: str) -> str:
    """Green for a gain (faster, now runs), red for a loss (slower, now fails): :func:`verdict_tone`'s colours."""
    return {"good": "green", "bad": "red"}.get(verdict_tone(verdict), "")


def alone_text(alone: list[Any], compared: list[Any]) -> str:
    """The settings measured on one device only, a line per device (three named, the count of the rest), and what
    would compare them."""
    by_device: dict[str, list[str]] = {}
    for t in alone:
        by_device.setdefault(t.devices[0], []).append(t.title)
    devices = sorted({d for t in (*alone, *compared) for d in t.devices})
    head = ("only one device has results here" if len(devices) == 1 else
            "no setting was measured on both devices here" if not compared and len(devices) == 2 else
            f"no setting was measured on two of the {len(devices)} devices here" if not compared else
            f"{len(alone)} of the {len(alone) + len(compared)} settings {'was' if len(alone) == 1 else 'were'} "
            "measured on one device only")
    lines = [f"[dim]{head}: ampbench results shows their figures; run the same workload, preset and batch on another "
             "device, or ampbench import another machine's export, to compare[/]"]
    for d, titles in by_device.items():
        more = f" and {len(titles) - 3} more" if len(titles) > 3 else ""
        lines.append(f"[dim]  {escape(d)} only: {escape('; '.join(titles[:3]))}{more}[/]")
    return "\n".join(lines)


def _predicted(store: Any, workloads: list[str] | None, precisions: list[str] | None) -> None:
    """Stored predictions of the compared workloads, beside the GPU measurement of the same cell where there is one."""
    lines = [p for p in predictions_table(store.predictions(workloads), merge_repeats(store.rows(workloads=workloads)))
             if precisions is None or p["precision"] in precisions]
    if lines:
        for table in predicted_table(lines, console.width):
            console.print(table)


def _cell(c: Any) -> Text:
    """A device's throughput in one mode: relative to the reference (green faster, red slower) and samples/s."""
    if c is None:
        return Text("-")
    rel = "" if c.relative is None else f"{c.relative:.2f}x "
    style = "green" if (c.relative or 1) > 1.05 else "red" if (c.relative or 1) < 0.95 else ""
    return Text.assemble((rel, style), (f"({c.samples_per_s:,.0f}/s)", "dim"))
