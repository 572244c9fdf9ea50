"""Move results between machines: JSON export/import (so different GPUs end up in one store), CSV for pandas."""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ampbench.errors import AmpbenchError
from ampbench.paths import write_text_atomic
from ampbench.store.derive import derive
from ampbench.store.row_keys import DERIVED_KEYS, ROW_KEYS, row_problem
from ampbench.store.sqlite import Store

FORMAT = "ampbench-results"
FORMAT_VERSION = 1


def clean_json(value: Any) -> Any:
    """NaN/inf are not JSON: write them as null (a diverged loss is also said by the row's status)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: clean_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_json(v) for v in value]
    return value


def export_data(store: Store, run_ids: list[str] | None = None, kernel_tables: bool = True) -> dict[str, Any]:
    """Runs, their rows (with derived keys), the hardware probes, the kernel tables (``ampbench hw --calibrate``:
    a GPU's own kernels, which ``predict`` on another machine prices that GPU from once imported) and, exporting every
    run, the stored predictions (``ampbench predict``'s rows: a store holding only them exported "0 runs, 0 rows"), as
    one JSON-able document. ``kernel_tables=False``: without the tables and predictions (``run --json``: the run's
    own results)."""
    runs = [r for r in store.runs() if run_ids is None or r.run_id in run_ids]
    hw = store.hw()
    rows: list[dict[str, Any]] = []
    for r in runs:
        rows.extend(store.rows(r.run_id))
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "runs": [r.to_dict() for r in runs],
        "rows": clean_json(derive(rows, hw)),
        "hw": clean_json(hw),
        "calibrations": clean_json(store.calibrations()) if kernel_tables else [],
        "predictions": clean_json(store.predictions()) if kernel_tables and run_ids is None else [],
    }


def json_text(data: dict[str, Any]) -> str:
    """What ``export`` writes (no NaN: strict JSON)."""
    return json.dumps(data, indent=1, allow_nan=False)


def write_json(data: dict[str, Any], path: Path) -> None:
    write_text_atomic(path, json_text(data))


@dataclass(frozen=True)
class Imported:
    """What ``import`` did: runs and rows added, and stored rows the file holds other values for (kept as stored)."""

    runs: int
    rows: int
    differing: int = 0
    calibrations: int = 0
    """Kernel tables added (one already stored -- its device and time -- is not added again)."""
    predictions: int = 0
    """Predicted rows added (one already stored, the same in every key, is not added again)."""


def import_file(store: Store, path: Path) -> Imported:
    """Add the runs and rows of an exported file; rows already present are left alone (never overwritten) and
    counted when the file's values differ from the stored ones."""
    return import_document(store, read_export(path), path)


def read_export(path: Path) -> dict[str, Any]:
    """An exported file's document, checked whole (what :func:`import_document` adds): a file that is missing, not
    JSON, not an export or malformed is one error, before any store is opened or written."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise AmpbenchError(f"import: no file {path}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise AmpbenchError(f"import: {path} is not JSON ({e})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise AmpbenchError(f"import: {path} is not an ampbench export (expected \"format\": \"{FORMAT}\"; "
                            "write one with: ampbench export --out FILE)")
    if data.get("version", 0) > FORMAT_VERSION:
        raise AmpbenchError(f"import: {path} has format version {data['version']}; this ampbench reads <= {FORMAT_VERSION}")
    _check_document(data, path)  # everything is checked before anything is written
    return data


def import_document(store: Store, data: dict[str, Any], path: Path) -> Imported:
    """Add a document :func:`read_export` read and checked (``path``: where it came from, for errors)."""
    runs = store.import_runs(data.get("runs", []))
    known = {r.run_id for r in store.runs()}
    orphans = {r["run_id"] for r in data.get("rows", [])} - known
    if orphans:
        raise AmpbenchError(f"import: {path}: rows of runs not in the file: {', '.join(sorted(orphans))}")
    rows = differing = 0
    for r in data.get("rows", []):
        stored = {k: v for k, v in r.items() if k in ROW_KEYS and k not in DERIVED_KEYS}
        if store.add(stored):
            rows += 1
        elif _differs(store.stored_row(stored["run_id"], stored["cell_key"]), stored):
            differing += 1
    for probe in data.get("hw", []):
        store.add_hw(probe)
    have = {(t["device_name"], t.get("created_at")) for t in store.calibrations()}
    tables = [t for t in data.get("calibrations", []) if (t["device_name"], t.get("created_at")) not in have]
    for table in tables:
        store.add_calibration(table)
    stored = {_same(p) for p in store.predictions()}
    predictions: dict[str, dict[str, Any]] = {}
    for p in data.get("predictions", []):
        key = _same(p)
        if key not in stored:
            predictions.setdefault(key, p)
    if predictions:
        store.add_predictions(list(predictions.values()))
    return Imported(runs, rows, differing, len(tables), len(predictions))


def _same(prediction: dict[str, Any]) -> str:
    """A predicted row's identity for import: all of it, as exports write it (NaN as null)."""
    return json.dumps(clean_json(prediction), sort_keys=True, default=str)


def _differs(stored: dict[str, Any] | None, incoming: dict[str, Any]) -> bool:
    """Whether a file's row says something else than the stored one (as exports write values: NaN as null;
    a key absent and a key null are the same)."""
    if stored is None:
        return True
    a, b = clean_json(stored), clean_json(incoming)
    return any(a.get(k) != b.get(k) for k in set(a) | set(b))


def _check_document(data: dict[str, Any], path: Path) -> None:
    """Refuse the whole file, naming the first bad entry, when a run, row or probe is not what ampbench writes."""
    where = f"import: {path}"
    for key in ("runs", "rows", "hw", "calibrations", "predictions"):
        if not isinstance(data.get(key, []), list):
            raise AmpbenchError(f"{where}: \"{key}\" must be a list; nothing was imported")
    for i, r in enumerate(data.get("runs", [])):
        if not (isinstance(r, dict) and isinstance(r.get("run_id"), str) and r["run_id"]
                and isinstance(r.get("created_at"), str) and isinstance(r.get("config", {}), dict)):
            raise AmpbenchError(f"{where}: run {i} needs a run_id and created_at (strings) and a config object; "
                                "nothing was imported")
    for i, r in enumerate(data.get("rows", [])):
        problem = row_problem(r, strict=True)
        if problem:
            name = f"{r.get('workload')}/{r.get('precision')}" if isinstance(r, dict) else ""
            raise AmpbenchError(f"{where}: row {i} {name}: {problem}; nothing was imported")
    for i, h in enumerate(data.get("hw", [])):
        if not (isinstance(h, dict) and isinstance(h.get("device_name"), str) and isinstance(h.get("gemm", []), list)):
            raise AmpbenchError(f"{where}: hw probe {i} needs a device_name and a gemm list; nothing was imported")
    for i, t in enumerate(data.get("calibrations", [])):
        if not (isinstance(t, dict) and isinstance(t.get("device_name"), str) and isinstance(t.get("created_at"), str)
                and isinstance(t.get("kernels"), list) and all(isinstance(k, dict) for k in t["kernels"])):
            raise AmpbenchError(f"{where}: kernel table {i} needs a device_name and created_at (strings) and a list of "
                                "kernels; nothing was imported")
    for i, p in enumerate(data.get("predictions", [])):
        if not (isinstance(p, dict) and all(isinstance(p.get(k), str) and p[k] for k in ("workload", "precision", "gpu"))):
            raise AmpbenchError(f"{where}: prediction {i} needs a workload, precision and gpu (strings); nothing was "
                                "imported")


CSV_NESTED = ("env", "converge", "inference", "max_batch_trials", "measures", "samples_per_s_repeats",
              "cpu_rss_peak_bytes_repeats", "speedup_vs_fp32_range")


def to_csv(rows: list[dict[str, Any]]) -> str:
    """Flat CSV: one line per row; nested values (env, converge, phases_s, warnings, ...: any dict or list) as JSON
    strings (a key not in ``CSV_NESTED`` was written as Python's repr: ``{'process_start': 0.0057, ...}``)."""
    buf = io.StringIO()
    keys = list(ROW_KEYS)
    w = csv.DictWriter(buf, fieldnames=keys, extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow({k: json.dumps(clean_json(r.get(k))) if k in CSV_NESTED or isinstance(r.get(k), (dict, list, tuple))
                    else r.get(k) for k in keys})
    return buf.getvalue()
