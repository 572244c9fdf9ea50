"""Two runs of the same cells side by side: what changed, and whether it stands clear of the noise.

``ampbench compare --runs BEFORE,AFTER`` answers the question after a torch, driver or cuDNN upgrade, a change to
the model or its settings, or a second lease of the same GPU: did each cell get faster or slower, and by more than
the machine moves by itself? Each cell is paired with the same cell (:class:`ampbench.cells.CellId`: workload,
preset, precision, batch, execution, distribution) in the other run -- whatever device each ran on: what differs
between the runs' environments and settings is listed beside them, read from what the rows recorded.

A change counts only beyond :data:`SIGNIFICANCE` times the noise both runs measured of that cell, their relative
noises added in quadrature: each cell's block-to-block throughput noise (``samples_per_s_noise``), the spread of its
repeats (``--repeats``), and how far each run's fp32 measurement of the setting moved between its opening and
closing measurement (``baseline_drift``: the machine's own drift over a run, the nearest measured stand-in for its
drift between two runs). Where neither run measured any, the change is printed and no verdict is given: one timed
measurement each cannot tell a change from drift (two separate CPU runs of one cell have read 0.97x and 0.92x).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ampbench.cells import CellId, defaults_left_out
from ampbench.report.numbers import SHOWN, bytes_unit, fmt_bytes
from ampbench.store.derive import compared_memory, derive, memory_basis, memory_noise

SIGNIFICANCE = 2.0
"""A change counts when it exceeds this many times the combined relative noise (about 95 % of the changes that
Gaussian noise alone would give stay inside it)."""
MIN_CHANGE = 0.01
"""... and is larger than this share (``compare --min-change``). Two leases of the same H200, nine hours apart, ran
fp32 0.5 % slower to 0.3 % faster on seven workloads whose own noise measured 0.1-0.3 %: the drift between two runs
is not all in the noise one run measures; 1 % is twice the largest of those."""

FASTER, SLOWER, SAME, UNKNOWN = "faster", "slower", "unchanged", "noise unknown"
NOW_FAILS, NOW_RUNS, BOTH_FAIL = "now fails", "now runs", "fails in both"
BEFORE_ONLY, AFTER_ONLY, NOT_TIMED = "before only", "after only", "not timed in both"
VERDICTS = (SLOWER, NOW_FAILS, FASTER, NOW_RUNS, SAME, UNKNOWN, BOTH_FAIL, NOT_TIMED, BEFORE_ONLY, AFTER_ONLY)
"""Every verdict, in the order a summary names them (what needs a look first)."""

ENV_FACTS = (("device_name", "device"), ("capability", "compute capability"), ("driver", "driver"), ("cuda", "CUDA"),
             ("cudnn", "cuDNN"), ("torch", "torch"), ("python", "Python"), ("ampbench", "ampbench"),
             ("hostname", "host"), ("platform", "platform"), ("cpu", "CPU"), ("cpu_count", "CPU cores"),
             ("torch_threads", "torch threads"), ("aten_cpu_capability", "ATen CPU kernels"),
             ("cpu_isa_limit", "oneDNN ISA limit"), ("power_limit_w", "power limit (W)"),
             ("sm_clock_max_mhz", "max SM clock (MHz)"), ("cudnn_benchmark", "cudnn.benchmark"))
"""The environment facts a row records that can move a measurement, each with how it is named (per-cell flags a
precision sets, TF32's, and readings of the moment, a temperature, are left out)."""

MEASURE_SETTINGS = {"converge": ("converge_steps", "seeds"),
                    "maxbatch": ("maxbatch_limit", "maxbatch_trial_steps", "memory_margin"),
                    "inference": ("inference_batch",)}
"""Settings that only one measurement reads. A run that did not take that measurement still stores them (its
identity holds placeholders: 200 convergence steps on a tiny throughput run), so they are a difference between two
runs only where both took it."""


@dataclass(frozen=True)
class Side:
    """One of the two runs: its id, when and where it ran, its environment facts and its settings."""

    run_id: str
    created_at: str
    device_name: str | None
    hostname: str | None
    env: dict[str, str] = field(default_factory=dict)
    """Each of :data:`ENV_FACTS` the run's rows recorded: its value, or its values joined where rows differ."""
    settings: dict[str, str] = field(default_factory=dict)
    """The run's scalar settings (steps, warm-up, seed, isolation, ...) as its stored config holds them."""

    @classmethod
    def of(cls, info: Any, rows: list[dict[str, Any]], defaults: Mapping[str, Any] | None = None) -> Side:
        """``info`` a stored run (``RunInfo``), ``rows`` its rows; ``defaults`` the settings its stored config leaves
        out while they hold their default (:func:`ampbench.cells.defaults_left_out`), named with that value."""
        env: dict[str, list[str]] = {}
        for r in rows:
            for key, _ in ENV_FACTS:
                v = (r.get("env") or {}).get(key)
                if v is not None and str(v) not in env.setdefault(key, []):
                    env[key].append(str(v))
        config = info.config if isinstance(info.config, dict) else {}
        settings = {k: str(v) for k, v in (defaults or {}).items()}
        stored = [(k, v) for section in ("identity", "extra") for k, v in (config.get(section) or {}).items()]
        settings.update({k: "-" if v is None else str(v) for k, v in stored if v is None or isinstance(v, (str, int, float))})
        measures = (config.get("identity") or {}).get("measures")
        if isinstance(measures, list):  # (a stored config always names them; a hand-made one may not)
            for measure, keys in MEASURE_SETTINGS.items():
                if measure not in measures:
                    for key in keys:
                        settings.pop(key, None)
        return cls(info.run_id, info.created_at, info.device_name, info.hostname,
                   {k: ", ".join(v) for k, v in env.items() if v}, settings)

    def describe(self) -> str:
        """'run 20261126-000704-f79559, 2026-11-26 00:07 UTC, NVIDIA H200 (vm)'."""
        when = self.created_at[:16].replace("T", " ") + " UTC" if self.created_at else "?"
        where = self.device_name or "?"
        return f"run {self.run_id}, {when}, {where}" + (f" ({self.hostname})" if self.hostname else "")


@dataclass(frozen=True)
class CellChange:
    """One cell in the two runs: both rows (derived), the throughput change, its noise and the verdict."""

    cell: CellId
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    change: float | None
    """after / before samples/s - 1 (both ok)."""
    noise: float | None
    """Relative noise of ``change``: every measured term of both runs, in quadrature (None: none measured)."""
    verdict: str
    memory_change: float | None = None
    """after / before compared memory - 1, where both are of one basis and the change stands clear of RSS noise."""
    memory_note: str | None = None
    """Why ``memory_change`` is missing where both rows have a memory figure."""
    min_change: float = MIN_CHANGE
    """The smallest change that counts, whatever the noise."""

    def slower_by_more_than(self, share: float) -> bool:
        """A regression a gate fails on: slower than ``share`` (0.05: 5 %) beyond the noise, or it stopped running."""
        return self.verdict == NOW_FAILS or (self.verdict == SLOWER and self.change is not None and -self.change > share)

    def to_dict(self) -> dict[str, Any]:
        def side(r: dict[str, Any] | None) -> dict[str, Any] | None:
            if r is None:
                return None
            return {"run_id": r.get("run_id"), "status": r.get("status"), "reason": r.get("reason") or None,
                    "samples_per_s": r.get("samples_per_s"), "speedup_vs_fp32": r.get("speedup_vs_fp32"),
                    "memory_bytes": compared_memory(r), "memory_basis": memory_basis(r),
                    "device_name": r.get("device_name")}

        return {**self.cell.to_row(), "before": side(self.before), "after": side(self.after), "change": self.change,
                "noise": self.noise, "verdict": self.verdict, "memory_change": self.memory_change,
                "memory_note": self.memory_note}


@dataclass
class RunDiff:
    before: Side
    after: Side
    changes: list[CellChange]

    @property
    def differences(self) -> list[tuple[str, str, str]]:
        """(what, before, after) for each environment fact and setting the two runs recorded differently."""
        out = [(name, a or "-", b or "-") for name, a, b in moved_facts(self.before.env, self.after.env)]
        unread = {k for keys in MEASURE_SETTINGS.values() for k in keys
                  if (k in self.before.settings) != (k in self.after.settings)}  # (one run took no such measurement)
        for key in sorted((set(self.before.settings) | set(self.after.settings)) - unread):
            a, b = (side.settings.get(key) or "-" for side in (self.before, self.after))
            if a != b:
                out.append((key, a or "-", b or "-"))
        return out

    @property
    def min_change(self) -> float:
        """The smallest change that counted (every cell's is the one the comparison was made with)."""
        return self.changes[0].min_change if self.changes else MIN_CHANGE

    def settings(self) -> list[tuple[CellId, list[CellChange]]]:
        """The changes grouped by setting (everything but the precision), in a stable order."""
        groups: dict[CellId, list[CellChange]] = {}
        for c in self.changes:
            groups.setdefault(c.cell.setting, []).append(c)
        return list(groups.items())

    def counts(self) -> dict[str, int]:
        """How many cells got each verdict (only the verdicts some cell got), in :data:`VERDICTS` order."""
        n = {v: sum(c.verdict == v for c in self.changes) for v in VERDICTS}
        return {v: k for v, k in n.items() if k}

    def regressions(self, share: float) -> list[CellChange]:
        """The cells slower than ``share`` beyond the noise, or that stopped running (``--fail-if-slower``)."""
        return [c for c in self.changes if c.slower_by_more_than(share)]

    def to_dict(self) -> dict[str, Any]:
        return {"before": self.before.__dict__, "after": self.after.__dict__,
                "differences": [{"what": w, "before": a, "after": b} for w, a, b in self.differences],
                "significance": SIGNIFICANCE, "min_change": self.min_change, "counts": self.counts(),
                "cells": [c.to_dict() for c in self.changes]}


def moved_facts(before: Mapping[str, Any], after: Mapping[str, Any],
                skip: tuple[str, ...] = ()) -> list[tuple[str, Any, Any]]:
    """(name, before, after) of each of :data:`ENV_FACTS` (but ``skip``) that two environments hold differently."""
    return [(name, before.get(key), after.get(key)) for key, name in ENV_FACTS
            if key not in skip and before.get(key) != after.get(key)
            and (before.get(key) is not None or after.get(key) is not None)]


def moves_text(moves: list[tuple[str, Any, Any]], most: int | None = None) -> str:
    """'torch 2.11 -> 2.13; driver 570 -> 580' of (what, before, after) triples; past ``most``, ' and N more'."""
    shown = moves if most is None else moves[:most]
    more = len(moves) - len(shown)
    return "; ".join(f"{w} {a} -> {b}" for w, a, b in shown) + (f" and {more} more" if more else "")


def _ok(r: dict[str, Any] | None) -> bool:
    return r is not None and r.get("status") == "ok"


def _timed(r: dict[str, Any] | None) -> bool:
    return _ok(r) and isinstance(r.get("samples_per_s"), (int, float)) and r["samples_per_s"] > 0  # type: ignore[union-attr]


def repeat_spread(row: dict[str, Any]) -> float | None:
    """Relative standard deviation of a cell's repeats' samples/s (None with fewer than two)."""
    values = [v for v in row.get("samples_per_s_repeats") or [] if isinstance(v, (int, float)) and v > 0]
    return statistics.stdev(values) / statistics.fmean(values) if len(values) >= 2 else None


def own_noise(row: dict[str, Any]) -> list[float]:
    """The relative noises one run measured of a cell itself: its block noise and its repeats' spread."""
    terms = [row.get("samples_per_s_noise"), repeat_spread(row)]
    return [float(t) for t in terms if isinstance(t, (int, float)) and math.isfinite(t)]


def noise_terms(row: dict[str, Any], baseline: dict[str, Any] | None) -> list[float]:
    """The relative noises one run measured of a cell: its own (:func:`own_noise`) and the drift of its run's fp32
    measurement of the same setting (the row itself where it is fp32)."""
    drift = (baseline or {}).get("baseline_drift")
    return own_noise(row) + ([float(drift)] if isinstance(drift, (int, float)) and math.isfinite(drift) else [])


def _memory(before: dict[str, Any], after: dict[str, Any]) -> tuple[float | None, str | None]:
    a, b = compared_memory(before), compared_memory(after)
    if a is None or b is None or a <= 0:
        return None, None
    basis_a, basis_b = memory_basis(before), memory_basis(after)
    if basis_a != basis_b:
        return None, f"not the same measure ({basis_a} before, {basis_b} after)"
    if basis_a == "rss":
        noises = [memory_noise(before), memory_noise(after)]
        if any(n is None for n in noises):
            return None, "one RSS reading per cell: its noise is unmeasured (--repeats 3 measures it)"
        if abs(b - a) <= sum(n for n in noises if n is not None):
            return None, "RSS growth within the readings' noise"
    return b / a - 1.0, None


def change_of(cell: CellId, before: dict[str, Any] | None, after: dict[str, Any] | None,
              base_before: dict[str, Any] | None = None, base_after: dict[str, Any] | None = None,
              min_change: float = MIN_CHANGE) -> CellChange:
    """The verdict on one cell: rows ``before`` and ``after`` (None where a run did not measure it), each beside
    its run's fp32 row of the same setting (whose drift is part of the noise); a change counts beyond
    :data:`SIGNIFICANCE` x its noise and ``min_change``."""
    if before is None or after is None:
        return CellChange(cell, before, after, None, None, AFTER_ONLY if before is None else BEFORE_ONLY,
                          min_change=min_change)
    if not (_ok(before) and _ok(after)):
        verdict = NOW_FAILS if _ok(before) else NOW_RUNS if _ok(after) else BOTH_FAIL
        return CellChange(cell, before, after, None, None, verdict, min_change=min_change)
    memory_change, memory_note = _memory(before, after)
    if not (_timed(before) and _timed(after)):  # (a run that measured memory or the largest batch alone)
        return CellChange(cell, before, after, None, None, NOT_TIMED, memory_change, memory_note, min_change)
    change = after["samples_per_s"] / before["samples_per_s"] - 1.0
    terms = noise_terms(before, base_before) + noise_terms(after, base_after)
    # (fp32's drifts only beside a noise either run measured of the cell itself: each is one difference of two
    # measurements, which widens an estimate and stands for none)
    noise = math.hypot(*terms) if own_noise(before) or own_noise(after) else None
    verdict = UNKNOWN if noise is None else SAME if abs(change) <= max(SIGNIFICANCE * noise, min_change) else \
        FASTER if change > 0 else SLOWER
    return CellChange(cell, before, after, change, noise, verdict, memory_change, memory_note, min_change)


def setting_defaults() -> dict[str, Any]:
    """The settings a stored run leaves out while they hold their default (``ampbench run``'s), with that default."""
    from ampbench.bench.config import RunConfig  # lazy: torch

    return defaults_left_out(RunConfig, "run")


def diff_runs(before: Any, before_rows: list[dict[str, Any]], after: Any, after_rows: list[dict[str, Any]],
              defaults: Mapping[str, Any] | None = None, min_change: float = MIN_CHANGE) -> RunDiff:
    """Pair every cell of two runs (``RunInfo`` and its derived rows each: :func:`ampbench.store.derive`) and judge
    each change (``defaults``: as :meth:`Side.of` takes them, :func:`setting_defaults` when None; ``min_change``: as
    :func:`change_of`). Cells in the order the first run measured them, then those only the second did."""
    defaults = setting_defaults() if defaults is None else defaults
    def by_cell(rows: list[dict[str, Any]]) -> dict[CellId, dict[str, Any]]:
        out: dict[CellId, dict[str, Any]] = {}
        for r in rows:
            out.setdefault(CellId.of(r), r)
        return out

    a, b = by_cell(before_rows), by_cell(after_rows)
    changes = [change_of(cell, a.get(cell), b.get(cell), a.get(cell.baseline), b.get(cell.baseline), min_change)
               for cell in [*a, *(c for c in b if c not in a)]]
    return RunDiff(Side.of(before, before_rows, defaults), Side.of(after, after_rows, defaults), changes)


# -- how the comparison reads ---------------------------------------------------------------------------------------
def cell_name(cell: CellId) -> str:
    """'bert (small) amp-bf16, batch 32, eager'."""
    return f"{cell.workload} ({cell.preset}) {cell.precision}, {cell.describe()}"


def change_text(c: CellChange) -> str:
    """'+12.3% ±2.1%' (the noise: one standard deviation), '-4.0%' where none was measured, '-' where a side has
    no throughput (its status is in the samples/s columns, its reason in ``ampbench results``)."""
    if c.change is None:
        return "-"
    noise = f" ±{c.noise:.1%}" if c.noise is not None else ""
    return f"{c.change:+.1%}{noise}"


def verdict_tone(verdict: str) -> str:
    """"good" for a gain (faster, now runs), "bad" for a loss (slower, now fails), "" otherwise: how the console and
    the HTML colour a verdict (its text may carry a status: "now fails (oom)")."""
    return ("good" if verdict.startswith((FASTER, NOW_RUNS)) else
            "bad" if verdict.startswith((SLOWER, NOW_FAILS)) else "")


def verdict_text(c: CellChange) -> str:
    """The verdict, with the status a failing side ended in: 'now fails (oom)', 'fails in both (diverged)'."""
    failed = [str(r.get("status")) for r in (c.after, c.before) if r is not None and not _ok(r)]
    if c.verdict in (NOW_FAILS, BOTH_FAIL) and failed:
        return f"{c.verdict} ({failed[0]})"
    if c.verdict == NOW_RUNS and failed:
        return f"{c.verdict} (was {failed[0]})"
    if c.verdict == SAME and c.noise is not None:
        return f"within {c.min_change:.0%}" if abs(c.change or 0.0) > SIGNIFICANCE * c.noise else "within noise"
    return c.verdict


def _sps(r: dict[str, Any] | None) -> str:
    v = (r or {}).get("samples_per_s")
    if r is None:
        return "-"
    if r.get("status") != "ok":
        return str(r.get("status") or "-")
    if not isinstance(v, (int, float)):
        return "-"
    return f"{v:,.1f}" if v < 100 else f"{v:,.0f}"


def _gain(c: CellChange) -> str:
    a, b = ((r or {}).get("speedup_vs_fp32") for r in (c.before, c.after))
    if a is None and b is None:
        return "-"
    return f"{a:.2f}x -> {b:.2f}x" if a is not None and b is not None else \
        f"{a:.2f}x -> -" if a is not None else f"- -> {b:.2f}x"


def _memory_text(c: CellChange) -> str:
    a, b = (compared_memory(r) if _ok(r) else None for r in (c.before, c.after))
    if a is None and b is None:
        return "-"
    unit = bytes_unit([a, b])
    text = f"{fmt_bytes(a, unit) if a is not None else '-'} -> {fmt_bytes(b, unit) if b is not None else '-'}"
    if c.memory_change is not None:
        text += f" ({c.memory_change:+.0%})" if abs(c.memory_change) >= SHOWN else " (same)"
    elif c.memory_note:
        text += f" ({c.memory_note})"
    return text


TABLE = (("precision", "precision"), ("before", "before /s"), ("after", "after /s"), ("change", "change"),
         ("verdict", "verdict"), ("gain", "x fp32 before -> after"), ("memory", "memory before -> after"))
"""The comparison's columns: :func:`cell_line`'s keys and their headers, in order."""


def cell_line(c: CellChange) -> dict[str, str]:
    """One cell's figures as the tables write them."""
    precision = c.cell.precision + (f" ({c.cell.optimizer_state} states)" if c.cell.optimizer_state else "")
    return {"precision": precision, "before": _sps(c.before), "after": _sps(c.after), "change": change_text(c),
            "verdict": verdict_text(c), "gain": _gain(c), "memory": _memory_text(c)}


def header_lines(diff: RunDiff) -> list[str]:
    """Which runs, and what differs between them (environment and settings) -- or that nothing recorded does."""
    lines = [f"before: {diff.before.describe()}", f"after:  {diff.after.describe()}"]
    differences = diff.differences
    if differences:
        lines.append("what differs: " + moves_text(differences))
    else:
        lines.append("what differs: nothing the rows recorded (device, driver, CUDA, cuDNN, torch, host, settings)")
    lines.append(f"a change counts beyond {SIGNIFICANCE:g}x its noise (±: both runs' measured noise, one standard "
                 f"deviation) and {diff.min_change:.0%}")
    return lines


def summary_line(diff: RunDiff) -> str:
    """'12 cells: 1 slower, 2 faster, 9 unchanged; the largest slowdown: ...'."""
    counts = ", ".join(f"{n} {v}" for v, n in diff.counts().items())
    line = f"{len(diff.changes)} cell{'s' if len(diff.changes) != 1 else ''}: {counts}"
    slower = [c for c in diff.changes if c.verdict == SLOWER and c.change is not None]
    if slower:
        worst = min(slower, key=lambda c: c.change or 0.0)
        line += f"; the largest slowdown: {cell_name(worst.cell)} {change_text(worst)}"
    unknown = diff.counts().get(UNKNOWN)
    if unknown:
        line += (f"; {unknown} with no noise measured in either run (--repeats 3, or more --steps, measures it): no "
                 "verdict")
    moved = baseline_moved(diff)
    return line + (f"; {moved}" if moved else "")


def baseline_moved(diff: RunDiff) -> str | None:
    """Where fp32 itself changed beyond the noise in at least half its settings: the machine (its load, clocks) or
    the software under every mode moved, not one mode -- said, with where to look (each run's gains over fp32)."""
    fp32 = [c for c in diff.changes if c.cell.precision == "fp32" and not c.cell.optimizer_state
            and c.change is not None]
    moved = [c for c in fp32 if c.verdict in (FASTER, SLOWER)]
    if not moved or 2 * len(moved) < len(fp32):
        return None
    m = statistics.median(c.change for c in fp32 if c.change is not None)
    return (f"fp32 itself ran {abs(m):.0%} {'slower' if m < 0 else 'faster'} (the median of its {len(fp32)} "
            f"setting{'s' if len(fp32) != 1 else ''}): the machine or the software under every mode moved, not one "
            "mode -- the x fp32 columns compare each mode's gain")


def markdown(diff: RunDiff, heading: str = "###") -> str:
    """The comparison as Markdown: the header lines, a table per setting (under ``heading``), the summary."""
    def esc(text: str) -> str:
        return text.replace("|", "\\|")

    out = [f"- {esc(line)}" for line in header_lines(diff)]
    for setting, changes in diff.settings():
        out += ["", f"{heading} {esc(setting.workload)} ({esc(setting.preset)}), {esc(setting.describe())}", "",
                "| " + " | ".join(head for _, head in TABLE) + " |", "| --- | ---: | ---: | ---: | --- | ---: | --- |"]
        for c in changes:
            line = cell_line(c)
            out.append("| " + " | ".join(esc(line[k]) for k, _ in TABLE) + " |")
    out += ["", esc(summary_line(diff))]
    return "\n".join(out) + "\n"


# -- the line `ampbench run` ends with ------------------------------------------------------------------------------
RECENT_RUNS = 20
"""How many earlier runs ``run`` looks through for the last one that measured its cells (newest first)."""


def since_last(store: Any, info: Any, defaults: Mapping[str, Any] | None = None,
               rows: list[dict[str, Any]] | None = None) -> RunDiff | None:
    """The run just finished (``info``) beside the latest earlier run in ``store`` on the same device that measured
    at least one of its cells, as a :class:`RunDiff` of the cells both measured (and, ok in both, timed in both);
    None when no recent run did. ``rows``: the run's derived rows where the caller has them (read here otherwise)."""
    rows = [r for r in (derive(store.rows(info.run_id)) if rows is None else rows)
            if r.get("device_name") == info.device_name]
    mine = {CellId.of(r) for r in rows}
    runs = store.runs()  # (in the order they were created: two runs can share a second)
    earlier = runs[:next((i for i, r in enumerate(runs) if r.run_id == info.run_id), len(runs))]
    for run in reversed(earlier[-RECENT_RUNS:]):
        if run.device_name != info.device_name:
            continue
        theirs = [r for r in derive(store.rows(run.run_id)) if r.get("device_name") == info.device_name]
        shared = mine & {CellId.of(r) for r in theirs}
        if shared:  # (all rows paired, the shared cells kept: each run's fp32 drift stays in the noise)
            diff = diff_runs(run, theirs, info, rows, defaults)
            diff.changes = [c for c in diff.changes if c.cell in shared and c.verdict != NOT_TIMED]
            if diff.changes:
                return diff
    return None


def since_line(diff: RunDiff) -> str:
    """'since run X (2026-11-29 10:46 UTC), the last on this device to measure these cells: 4 cells: 1 slower, 3
    unchanged; ... -- ampbench compare --runs X,Y shows them'."""
    when = diff.before.created_at[:16].replace("T", " ") + " UTC"
    cells = "these cells" if len(diff.changes) > 1 else "this cell"
    moved = diff.differences
    differs = moves_text(moved, most=3)
    return (f"since run {diff.before.run_id} ({when}), the last on this device to measure {cells}"
            f"{f' (what differs: {differs})' if moved else ''}: {summary_line(diff)} -- ampbench compare --runs "
            f"{diff.before.run_id},{diff.after.run_id} shows them")
