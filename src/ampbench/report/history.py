"""Every run of the same cells on one device, oldest first: how each precision's throughput moved run after run.

``ampbench compare --history``: where ``--runs`` sets two runs side by side, this is the series a nightly benchmark
leaves -- one table per setting and device, a row per run that timed it, a column per precision, each figure marked
where it moved beyond the noise against the run before it (the same verdict as ``compare --runs``: twice the noise
both runs measured, and at least the smallest change that counts), and what changed in the environment between
the two (torch, driver, cuDNN, host) beside the run where it changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ampbench.cells import CellId
from ampbench.report.run_diff import FASTER, MIN_CHANGE, SLOWER, change_of, moved_facts, moves_text

MOVED = (FASTER, SLOWER)
"""The verdicts against the run before that a figure shows its change for."""


@dataclass
class Point:
    """One run's measurement of one cell, and its move against the run before it in the series."""

    run_id: str
    created_at: str
    row: dict[str, Any]
    change: float | None = None
    noise: float | None = None
    verdict: str | None = None


@dataclass
class Series:
    """A setting on one device: its runs in time order, and per precision the points of the runs that timed it."""

    setting: CellId
    device: str
    runs: list[tuple[str, str]] = field(default_factory=list)
    """(run id, created at), oldest first."""
    points: dict[str, dict[str, Point]] = field(default_factory=dict)
    """precision -> run id -> point."""
    env: dict[str, str] = field(default_factory=dict)
    """run id -> what its environment changed against the run before it ('torch 2.11 -> 2.13'), where anything."""

    @property
    def title(self) -> str:
        return f"{self.setting.workload} ({self.setting.preset}), {self.setting.describe()} on {self.device}"

    def to_dict(self) -> dict[str, Any]:
        return {**self.setting.to_row(), "precision": None, "device_name": self.device,
                "runs": [{"run_id": r, "created_at": t, "env_changed": self.env.get(r)} for r, t in self.runs],
                "points": {p: [{"run_id": r, "samples_per_s": pt.row.get("samples_per_s"), "change": pt.change,
                                "noise": pt.noise, "verdict": pt.verdict} for r, pt in by_run.items()]
                           for p, by_run in self.points.items()}}


def _env_change(before: dict[str, Any], after: dict[str, Any]) -> str | None:
    return moves_text(moved_facts(before.get("env") or {}, after.get("env") or {}, skip=("device_name",))) or None


def history(rows: list[dict[str, Any]], runs: list[Any], last: int = 10,
            min_change: float = MIN_CHANGE) -> list[Series]:
    """The series of every setting timed in at least two runs on one device (``rows``: derived rows of the store,
    ``runs``: its ``RunInfo`` list in creation order), each keeping its ``last`` runs."""
    order = {r.run_id: i for i, r in enumerate(runs)}
    created = {r.run_id: r.created_at for r in runs}
    timed = [r for r in rows if r.get("status") == "ok" and isinstance(r.get("samples_per_s"), (int, float))
             and r.get("run_id") in order]
    groups: dict[tuple[CellId, str], dict[str, dict[str, dict[str, Any]]]] = {}
    for r in sorted(timed, key=lambda r: order[r["run_id"]]):
        cell = CellId.of(r)
        precision = cell.precision + (f" ({cell.optimizer_state} states)" if cell.optimizer_state else "")
        groups.setdefault((cell.setting.but(optimizer_state=None), str(r.get("device_name") or "?")), {}) \
            .setdefault(precision, {}).setdefault(r["run_id"], r)
    bases = {(CellId.of(r), r["run_id"]): r for r in timed}
    out = []
    for (setting, device), by_precision in groups.items():
        run_ids = sorted({run for by_run in by_precision.values() for run in by_run}, key=order.__getitem__)[-last:]
        if len(run_ids) < 2:
            continue
        s = Series(setting, device, [(r, created[r]) for r in run_ids])
        for precision, by_run in by_precision.items():
            kept = [r for r in run_ids if r in by_run]
            points: dict[str, Point] = {}
            for prev, run in zip([None, *kept], kept):
                row = by_run[run]
                p = Point(run, created[run], row)
                if prev is not None:
                    before = by_run[prev]
                    cell = CellId.of(row)
                    c = change_of(cell, before, row, bases.get((cell.baseline, prev)), bases.get((cell.baseline, run)),
                                  min_change)
                    p.change, p.noise, p.verdict = c.change, c.noise, c.verdict
                points[run] = p
            s.points[precision] = points
        firsts = {run: next(iter(by_run[run] for by_run in by_precision.values() if run in by_run)) for run in run_ids}
        for prev, run in zip(run_ids, run_ids[1:]):
            moved = _env_change(firsts[prev], firsts[run])
            if moved:
                s.env[run] = moved
        out.append(s)
    return out


def point_text(p: Point | None) -> str:
    """'3,112' for a run's figure; '3,112 -1.1%' marked where it moved beyond the noise against the run before."""
    if p is None:
        return "-"
    v = p.row.get("samples_per_s") or 0.0
    figure = f"{v:,.1f}" if v < 100 else f"{v:,.0f}"
    return f"{figure} {p.change:+.1%}" if p.verdict in MOVED and p.change is not None else figure
