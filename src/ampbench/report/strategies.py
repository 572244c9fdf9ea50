"""Advice across distributed strategies: the fastest (strategy, precision) cell, how well it scales, and
which uses least memory per rank -- "fsdp master-bf16 uses 0.40x the memory per rank of ddp amp-bf16 at
0.90x its speed". From measured rows only; memory per rank is the max over ranks (what must fit on each). Speeds are
judged against their noise (:func:`~ampbench.report.combine.measurably_faster`) before one is called slower than
another: cells within the noise of the fastest are named beside it, and one process is "faster" only beyond it."""

from __future__ import annotations

import math
from typing import Any

from ampbench.execution.axes import display_name
from ampbench.report.combine import measurably_faster
from ampbench.store.derive import NOISE_NOT_MEASURED, compared_memory, speed_doubt


def _speed(r: dict[str, Any]) -> float:
    v = r.get("samples_per_s")
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else 0.0


def strategy_summary(rows: list[dict[str, Any]]) -> str | None:
    """None without distributed rows; else one sentence comparing them (and the one-process cells)."""
    dist = [r for r in rows if r.get("strategy") and r.get("status") == "ok" and _speed(r) > 0]
    if not dist:
        failed = [r for r in rows if r.get("strategy") and r.get("status") != "ok"]
        if failed:
            return "no distributed cell ran: " + "; ".join(f"{display_name(r)} {r['status']} ({r.get('reason')})"
                                                            for r in failed[:3])
        return None
    fastest = max(dist, key=_speed)
    parts = [f"fastest across ranks: {display_name(fastest)}, {_speed(fastest):,.0f} samples/s"]
    eff = fastest.get("scaling_efficiency")
    if isinstance(eff, (int, float)):
        parts[-1] += f" (scaling efficiency {eff:.2f} vs its one-process cell)"
    parts[-1] += _within(fastest, [r for r in dist if r is not fastest])
    singles = [r for r in rows if not r.get("strategy") and r.get("status") == "ok" and _speed(r) > 0]
    if singles and max(map(_speed, singles)) > _speed(fastest):
        # (say so: the ranks' speed is no gain when one process ran faster -- on a CPU, where the ranks share the
        # cores the one process already used, or over a slow interconnect; "slower" only beyond the noise: a 3-step
        # cell's 0.71x is no finding)
        one = max(singles, key=_speed)
        where = "; the ranks share this CPU's cores" if not str(one.get("device") or "").startswith("cuda") else ""
        faster, why = measurably_faster(one, fastest)
        lead = "slower than one process" if faster else "not measurably faster than one process"
        parts[-1] += (f" -- {lead}: {display_name(one)} ran {_speed(one):,.0f} samples/s"
                      f" ({_speed(fastest) / _speed(one):.2f}x{where}{'' if faster else f'; {why}'})")
    with_mem = [r for r in dist if compared_memory(r)]
    if with_mem:
        lean = min(with_mem, key=lambda r: compared_memory(r) or float("inf"))
        if lean is not fastest and compared_memory(fastest):
            parts.append(f"{display_name(lean)} uses {compared_memory(lean) / compared_memory(fastest):.2f}x the memory "
                         f"per rank of {display_name(fastest)} at {_speed(lean) / _speed(fastest):.2f}x its speed")
    comm = [r for r in dist if isinstance(r.get("comm_bytes_per_step"), (int, float)) and r["comm_bytes_per_step"] > 0]
    if len({r.get("grad_reduce_dtype") for r in comm}) > 1:
        least = min(comm, key=lambda r: r["comm_bytes_per_step"])
        most = max(comm, key=lambda r: r["comm_bytes_per_step"])
        parts.append(f"{display_name(least)} sends {least['comm_bytes_per_step'] / most['comm_bytes_per_step']:.2f}x the "
                     f"bytes per step of {display_name(most)}")
    return "; ".join(parts)


def _within(fastest: dict[str, Any], others: list[dict[str, Any]]) -> str:
    """The distributed cells the fastest is not measurably faster than, named beside it (" (within the noise of it:
    fsdp amp-bf16 1,180 samples/s)"), or why none could be judged (" (not judged against the other cells, noise not
    measured: ...)", or fp32's disturbed measurements); "" when it stands clear of them all."""
    tied, unjudged = [], ""
    for r in sorted(others, key=_speed, reverse=True):
        faster, why = measurably_faster(fastest, r)
        if not faster:
            tied.append(r)
            if why.startswith(NOISE_NOT_MEASURED) or speed_doubt(fastest, r):
                unjudged = why
    if not tied:
        return ""
    if unjudged:  # (no estimate to judge by, or a disturbed fp32: the order of the speeds is all there is)
        return f" (not judged against the other cells, {unjudged})"
    return " (within the noise of it: " + ", ".join(f"{display_name(r)} {_speed(r):,.0f} samples/s" for r in tied) + ")"
