"""Reports from the results store: terminal tables, a self-contained HTML page, Markdown, CSV; advice; cross-GPU tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ampbench.errors import AmpbenchError
from ampbench.paths import write_text_atomic
from ampbench.report.markdown import render_markdown
from ampbench.report.predictions import attach as attach_predictions
from ampbench.report.run_diff import since_last
from ampbench.store import Store, derive, to_csv

FORMATS = ("html", "md", "csv")


def default_report_path(store: Store, run_id: str, fmt: str = "html") -> Path:
    """Next to the store: <db dir>/reports/<run_id>.<ext>."""
    return store.path.parent / "reports" / f"{run_id}.{fmt}"


def build_report(store: Store, run_id: str | None = None, fmt: str = "html",
                 predictions_only: bool = False) -> tuple[str, str]:
    """(run_id, text) of the report of one run (default: the latest) in ``fmt``; ``predictions_only``: of every
    prediction stored (``ampbench report --predictions``), whatever was measured."""
    if fmt not in FORMATS:
        raise AmpbenchError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    info = None if predictions_only else store.run(run_id) if run_id is not None else store.latest_run()
    if info is None:
        predictions = store.predictions()
        if not predictions:
            what = "no predictions" if predictions_only else "no results"
            raise AmpbenchError(f"{what} in {store.path} yet: run `ampbench run` or `ampbench predict` first (or "
                                "ampbench import FILE)")
        return "predictions", _predictions_only(predictions, fmt, measured=store.latest_run() is not None)
    hw = store.hw()
    rows = derive(store.rows(info.run_id), hw)
    workloads = sorted({r["workload"] for r in rows})
    stored = store.predictions()  # (read once: this run's workloads', and which others have some)
    predictions = [p for p in stored if p["workload"] in workloads]
    rows = attach_predictions(rows, predictions)
    others = sorted({str(p["workload"]) for p in stored} - set(workloads))
    note = (f"{len(others)} other workload(s) have stored predictions ({', '.join(others[:5])}"
            f"{', ...' if len(others) > 5 else ''}): ampbench report --predictions shows every one") if others else ""
    if fmt == "csv":
        return info.run_id, to_csv(rows)
    since = since_last(store, info, rows=rows)  # (this run's rows, derived above: not read again)
    if fmt == "md":
        return info.run_id, render_markdown(rows, {**info.to_dict(), "predictions_note": note, "since": since},
                                            predictions)
    from ampbench.report.html import render_html  # lazy: matplotlib

    every_device = derive(store.rows(workloads=workloads), hw) if workloads else []
    return info.run_id, render_html(rows, {**info.to_dict(), "predictions_note": note, "since": since}, every_device,
                                    store.diagnoses(), predictions)


ONLY_PREDICTIONS = "only predictions here (ampbench predict): nothing was measured; ampbench run measures"
ALL_PREDICTIONS = "every prediction stored (ampbench predict): no GPU ran these; ampbench report shows a run"


def _predictions_only(predictions: list[dict[str, Any]], fmt: str, measured: bool = False) -> str:
    """The report of the predictions stored, in their own section, labelled predicted (``measured``: the store holds
    runs too, reported apart)."""
    if fmt == "csv":
        return to_csv(predictions)
    note = {"label": ALL_PREDICTIONS if measured else ONLY_PREDICTIONS, "run_id": "(none: predictions only)"}
    if fmt == "md":
        return render_markdown([], note, predictions)
    from ampbench.report.html import render_html  # lazy: matplotlib

    return render_html([], note, [], [], predictions)


def write_report(store: Store, out: Path | None = None, run_id: str | None = None, fmt: str = "html",
                 predictions_only: bool = False) -> Path:
    run_id, text = build_report(store, run_id, fmt, predictions_only)
    path = out or default_report_path(store, run_id, fmt)
    write_text_atomic(path, text)
    return path


__all__ = ["FORMATS", "ONLY_PREDICTIONS", "build_report", "default_report_path", "write_report"]
