"""Cross-GPU comparison: rows = devices, columns = precisions, cells = throughput relative to a reference device.

Like the published GPU benchmark tables: per workload, each device's latest ok result per
precision, divided by the reference device's result in the same precision. The reference is the
one named, else the slowest device in fp32 (so the table reads "times faster than the slowest").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ampbench.errors import AmpbenchError


@dataclass(frozen=True)
class Cell:
    samples_per_s: float
    relative: float | None


@dataclass
class CompareTable:
    workload: str
    preset: str
    reference: str
    devices: list[str]
    precisions: list[str]
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)


def _order(p: str) -> int:
    from ampbench.precision import list_precisions

    names = list_precisions()
    return names.index(p) if p in names else len(names)


def compare_table(rows: list[dict[str, Any]], reference: str | None = None, workloads: list[str] | None = None,
                  precisions: list[str] | None = None) -> list[CompareTable]:
    latest: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: r.get("created_at") or ""):
        if r.get("status") != "ok" or not r.get("samples_per_s"):
            continue
        if (workloads and r["workload"] not in workloads) or (precisions and r["precision"] not in precisions):
            continue
        latest[(r["workload"], r.get("preset") or "", r.get("device_name") or "?", r["precision"])] = r
    tables = []
    for wl, preset in sorted({(k[0], k[1]) for k in latest}):
        mine = {(k[2], k[3]): v["samples_per_s"] for k, v in latest.items() if k[:2] == (wl, preset)}
        devices = sorted({d for d, _ in mine})
        precs = sorted({p for _, p in mine}, key=_order)
        if reference is not None:
            if reference not in devices:
                raise AmpbenchError(f"--reference {reference!r}: no results of {wl} on it; devices: {', '.join(devices)}")
            ref = reference
        else:
            col = "fp32" if "fp32" in precs else precs[0]
            ref = min((d for d in devices if (d, col) in mine), key=lambda d: mine[(d, col)])
        t = CompareTable(wl, preset, ref, sorted(devices, key=lambda d: (d != ref, d)), precs)
        for (d, p), v in mine.items():
            base = mine.get((ref, p))
            t.cells[(d, p)] = Cell(v, v / base if base else None)
        tables.append(t)
    return tables
