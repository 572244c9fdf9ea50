"""Cross-GPU comparison: rows = devices, columns = precisions, cells = throughput relative to a reference device.

Like the published GPU benchmark tables: one table per *setting* -- workload, preset, batch size, execution
(compile, memory format, CUDA graphs) and distribution (strategy x world size) -- so that a figure is only ever
set beside the same cell measured on another device (:class:`ampbench.cells.CellId`: an FSDP x2 cell,
a compiled cell or another batch size is another table, never a replacement). Each device's latest ok result
per precision, divided by the reference device's result in the same precision. The reference is the one
named, else the slowest device in fp32 (so the table reads "times faster than the slowest").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ampbench.cells import CellId
from ampbench.errors import AmpbenchError
from ampbench.modes import MODES


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
    setting: CellId | None = None
    """What every figure of the table is (batch size, execution, distribution): the cell identity but its precision."""

    @property
    def title(self) -> str:
        what = f" {self.setting.describe()}" if self.setting is not None else ""
        return f"{self.workload} ({self.preset}){',' if what else ''}{what}"


def _order(p: str) -> int:
    return MODES.index(p) if p in MODES else len(MODES)


def _setting_order(c: CellId) -> tuple[Any, ...]:
    return (c.workload, c.preset, c.strategy is not None, c.world_size, c.grad_reduce_dtype or "", not c.execution.is_default,
            c.execution.label, c.compiled_by_default, c.batch_size or 0)


def compare_table(rows: list[dict[str, Any]], reference: str | None = None, workloads: list[str] | None = None,
                  precisions: list[str] | None = None) -> list[CompareTable]:
    latest: dict[tuple[CellId, str], dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: r.get("created_at") or ""):
        if r.get("status") != "ok" or not r.get("samples_per_s"):
            continue
        if (workloads and r["workload"] not in workloads) or (precisions and r["precision"] not in precisions):
            continue
        latest[(CellId.of(r), r.get("device_name") or "?")] = r
    tables = []
    for setting in sorted({cell.setting for cell, _ in latest}, key=_setting_order):
        mine = {(d, cell.precision): v["samples_per_s"] for (cell, d), v in latest.items() if cell.setting == setting}
        devices = sorted({d for d, _ in mine})
        precs = sorted({p for _, p in mine}, key=_order)
        if reference is not None:
            if reference not in devices:
                if any(reference == d for _, d in latest):
                    continue  # the reference has no result in this setting: the table would compare nothing
                known = sorted({d for _, d in latest})
                raise AmpbenchError(f"--reference {reference!r}: no results on it; devices: {', '.join(known)}")
            ref = reference
        else:
            col = "fp32" if "fp32" in precs else precs[0]
            ref = min((d for d in devices if (d, col) in mine), key=lambda d: mine[(d, col)])
        t = CompareTable(setting.workload, setting.preset, ref, sorted(devices, key=lambda d: (d != ref, d)), precs,
                         setting=setting)
        for (d, p), v in mine.items():
            base = mine.get((ref, p))
            t.cells[(d, p)] = Cell(v, v / base if base else None)
        tables.append(t)
    if reference is not None and latest and not tables:
        raise AmpbenchError(f"--reference {reference!r}: none of its cells was measured on another device")
    return tables
