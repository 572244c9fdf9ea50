"""``ampbench diagnose``: why NaN, why the loss scale collapses, why no speedup or memory saving."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.markup import escape

from ampbench.cli import declared
from ampbench.cli.core import app, console, open_store
from ampbench.cli.examples import MODEL_EXAMPLES
from ampbench.command_options import CommandTarget, DataArgs, DiagnoseSettings
from ampbench.paths import write_text_atomic
from ampbench.report.diagnosis import findings_lines
from ampbench.report.run_text import plural
from ampbench.store.exchange import clean_json
from ampbench.store.sqlite import utcnow
from ampbench.tensorboard import safe_name, write_diagnosis


@app.command("diagnose", epilog=MODEL_EXAMPLES)
@declared.command
def diagnose_cmd(target: CommandTarget, data: DataArgs, settings: DiagnoseSettings) -> None:
    """Why NaN, why the loss scale collapses, why no speedup or memory saving: a short report, most important first."""
    from ampbench.command_requests import DiagnoseRequest  # lazy: torch
    from ampbench.diagnose.findings import STARTED  # lazy: torch (the diagnose package)
    from ampbench.precision import resolve  # lazy: torch

    r = DiagnoseRequest.of(target, data, settings)
    trace, precision = r.trace, r.precision
    wanted, label = r.wanted, r.target.label
    store = open_store(settings.db)
    if trace is None and "profile" in wanted:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)[:60]
        trace = store.path.parent / "traces" / f"{utcnow().replace(':', '')}-{safe}-{resolve(precision)}.json"
    head = f"diagnosing {escape(label)} in {resolve(precision)}"
    with console.status(f"{head}: {', '.join(wanted)}") as status:
        def progress(line: str) -> None:
            """A line per check as it ends (a check can train for minutes on a slow device); the one starting on the
            spinner in a terminal, as a line in a log (where a spinner shows nothing)."""
            if line.endswith(STARTED) and console.is_terminal:
                status.update(f"{head}: {escape(line)}")
            else:
                console.print(f"  [dim]{escape(line)}[/]", highlight=False)

        d = r.target.framework.commands().diagnose(r, r.plan, trace, progress)
    _show_and_store(d, label, wanted, store, r.tensorboard, r.json_out)


def _show_and_store(d: Any, label: str, wanted: tuple[str, ...], store: Any, tensorboard: Path | None,
                    json_out: Path | None) -> None:
    """The findings, most important first; the diagnosis stored (the HTML report shows it), its TensorBoard
    histograms and its JSON file."""

    for line in findings_lines(d, label, wanted):
        console.print(line, highlight=False)
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
