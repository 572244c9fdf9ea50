"""Reports from the results store: terminal tables, a self-contained HTML page, Markdown, CSV; advice; cross-GPU tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ampbench.errors import AmpbenchError
from ampbench.paths import write_text_atomic
from ampbench.report.predictions import attach as attach_predictions
from ampbench.store import Store, derive, to_csv

FORMATS = ("html", "md", "csv")


def default_report_path(store: Store, run_id: str, fmt: str = "html") -> Path:
    """Next to the store: <db dir>/reports/<run_id>.<ext>."""
    return store.path.parent / "reports" / f"{run_id}.{fmt}"


def build_report(store: Store, run_id: str | None = None, fmt: str = "html") -> tuple[str, str]:
    """(run_id, text) of the report of one run (default: the latest) in ``fmt``."""
    if fmt not in FORMATS:
        raise AmpbenchError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    info = store.run(run_id) if run_id is not None else store.latest_run()
    if info is None:
        predictions = store.predictions()
        if not predictions:
            raise AmpbenchError(f"no results in {store.path} yet: run `ampbench run` first (or ampbench import FILE)")
        return "predictions", _predictions_only(predictions, fmt)
    hw = store.hw()
    rows = derive(store.rows(info.run_id), hw)
    workloads = sorted({r["workload"] for r in rows})
    predictions = store.predictions(workloads) if workloads else []
    rows = attach_predictions(rows, predictions)
    if fmt == "csv":
        return info.run_id, to_csv(rows)
    if fmt == "md":
        from ampbench.report.markdown import render_markdown  # lazy: torch

        return info.run_id, render_markdown(rows, info.to_dict(), predictions)
    from ampbench.report.html import render_html  # lazy: matplotlib, torch

    every_device = derive(store.rows(workloads=workloads), hw) if workloads else []
    return info.run_id, render_html(rows, info.to_dict(), every_device, store.diagnoses(), predictions)


ONLY_PREDICTIONS = "only predictions here (ampbench predict): nothing was measured; ampbench run measures"


def _predictions_only(predictions: list[dict[str, Any]], fmt: str) -> str:
    """The report of a store holding predictions and no measured run: their own section, labelled predicted."""
    if fmt == "csv":
        return to_csv(predictions)
    note = {"label": ONLY_PREDICTIONS, "run_id": "(none: predictions only)"}
    if fmt == "md":
        from ampbench.report.markdown import render_markdown  # lazy: torch

        return render_markdown([], note, predictions)
    from ampbench.report.html import render_html  # lazy: matplotlib, torch

    return render_html([], note, [], [], predictions)


def write_report(store: Store, out: Path | None = None, run_id: str | None = None, fmt: str = "html") -> Path:
    run_id, text = build_report(store, run_id, fmt)
    path = out or default_report_path(store, run_id, fmt)
    write_text_atomic(path, text)
    return path


__all__ = ["FORMATS", "ONLY_PREDICTIONS", "build_report", "default_report_path", "write_report"]
