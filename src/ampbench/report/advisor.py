"""Which precision to use for this model on this device, and the evidence — from measured rows only.

Rule: among the modes that ran (status ok), the recommended one is the fastest whose convergence
verdict is parity with fp32. Without convergence data the fastest mode is recommended, labelled
"speed only, convergence not checked". Modes within ``TIE`` of each other in speed are a tie,
broken by lower peak memory, then by the simpler recipe (:data:`PREFERENCE`). A mode must beat
fp32 by ``MIN_GAIN`` in speed (or save ``MIN_MEMORY_SAVING`` of memory without being slower) to be
worth switching; otherwise fp32 stays and the advice says why no mode helps.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby
from typing import Any

TIE = 0.02
"""Relative speed difference treated as measurement noise."""
MIN_GAIN = 1.05
MIN_MEMORY_SAVING = 0.10
LAUNCH_BOUND_MS = 5.0
"""GPU step times below this, with the half modes no faster, point at a launch-bound model."""
PREFERENCE = ("amp-bf16", "amp-fp16", "master-bf16", "master-fp16", "pure-bf16", "pure-fp16", "tf32", "fp32")
"""Tie-break order: autocast first (no model changes; bf16 needs no loss scaling), pure half last."""


@dataclass(frozen=True)
class Advice:
    workload: str
    recommended: str | None
    """The mode to use, or None when nothing ran."""
    evidence: str
    """One sentence: why this mode (or why none helps)."""
    convergence_checked: bool
    label: str
    """"converges like fp32", "speed only, convergence not checked", "no mode helps", "nothing ran"."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def workload_groups(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Rows split into what one piece of advice is about: same workload, preset, batch size and device."""
    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return r.get("workload") or "", r.get("preset") or "", r.get("batch_size") or 0, r.get("device_name") or ""

    return [list(g) for _, g in groupby(sorted(rows, key=key), key=key)]


def _pref(p: str) -> int:
    return PREFERENCE.index(p) if p in PREFERENCE else len(PREFERENCE)


def _speed(r: dict[str, Any]) -> float:
    v = r.get("samples_per_s")
    return float(v) if isinstance(v, (int, float)) else 0.0


def _fmt_ratio(x: float) -> str:
    return f"{x:.2f}x" if x < 10 else f"{x:.0f}x"


def _evidence(r: dict[str, Any], base: dict[str, Any] | None, checked: bool) -> str:
    parts = []
    sp = r.get("speedup_vs_fp32")
    if base is None:
        parts.append(f"{_speed(r):,.0f} samples/s, the fastest measured (no fp32 baseline in this run)")
    elif r["precision"] != "fp32" and isinstance(sp, (int, float)):
        parts.append(f"{_fmt_ratio(sp)} faster than fp32" if sp >= 1 else f"{_fmt_ratio(sp)} the speed of fp32")
    saving = r.get("memory_saving_vs_fp32")
    if isinstance(saving, (int, float)) and r["precision"] != "fp32" and abs(saving) >= 0.01:
        parts.append(f"{saving:.0%} less memory" if saving > 0 else f"{-saving:.0%} more memory")
    if base is not None and r.get("max_batch") and base.get("max_batch") and r["precision"] != "fp32":
        parts.append(f"batch {base['max_batch']:,} → {r['max_batch']:,}")
    if checked:
        parts.append("final loss within fp32's seed spread" if r["precision"] != "fp32" else "the baseline")
    return f"{r['precision']}: " + ", ".join(parts)


def _why_nothing_helps(rows: list[dict[str, Any]], base: dict[str, Any]) -> str:
    env = base.get("env") or {}
    if str(base.get("device", "")).startswith("cpu") or env.get("device") == "cpu":
        hw = env.get("cpu_half_hardware") or {}
        if not (hw.get("avx512_bf16") or hw.get("amx_bf16") or hw.get("avx512_fp16") or hw.get("amx_fp16")):
            return "CPU without AVX512-BF16/FP16 or AMX: half precision is slower here"
        return "CPU without AMX: half-precision math is not faster than fp32 here (see ampbench hw)"
    p50 = base.get("step_ms_p50")
    if isinstance(p50, (int, float)) and p50 < LAUNCH_BOUND_MS:
        return f"model too small: a {p50:.1f} ms step is launch-bound, so faster math does not shorten it"
    return f"no mode is more than {MIN_GAIN - 1:.0%} faster than fp32 or saves {MIN_MEMORY_SAVING:.0%} of memory"


def advise(rows: list[dict[str, Any]]) -> Advice:
    """Advice for one workload from its rows (one run, one device; derived keys present)."""
    workload = rows[0]["workload"] if rows else "?"
    ok = [r for r in rows if r.get("status") == "ok" and _speed(r) > 0]
    if not ok:
        failed = "; ".join(f"{r['precision']} {r.get('status')} ({r.get('reason') or 'no reason'})" for r in rows)
        return Advice(workload, None, f"every mode failed: {failed}" if rows else "no results", False, "nothing ran")
    base = next((r for r in ok if r["precision"] == "fp32"), None)
    checked = any(r.get("converge_verdict") for r in ok)
    if checked:
        pool = [r for r in ok if r.get("converge_verdict") in ("parity", "baseline")]
        if not pool:
            return Advice(workload, None, "no mode converged like fp32 (" + ", ".join(
                f"{r['precision']}: {r.get('converge_verdict')}" for r in ok) + ")", True, "nothing converged")
    else:
        pool = ok
    top = max(_speed(r) for r in pool)
    tied = [r for r in pool if _speed(r) >= top * (1 - TIE)]
    best = min(tied, key=lambda r: (r.get("peak_allocated_bytes") or float("inf"), _pref(r["precision"])))
    label = "converges like fp32" if checked else "speed only, convergence not checked"
    if base is not None and best["precision"] != "fp32":
        gain = _speed(best) / _speed(base)
        saving = best.get("memory_saving_vs_fp32") or 0.0
        worth_it = gain >= MIN_GAIN or (saving >= MIN_MEMORY_SAVING and gain >= 1 - TIE)
        if not worth_it and base in pool:
            return Advice(workload, "fp32", f"fp32: {_why_nothing_helps(ok, base)}", checked, "no mode helps")
    if base is not None and best["precision"] == "fp32":
        return Advice(workload, "fp32", f"fp32: {_why_nothing_helps(ok, base)}", checked, "no mode helps")
    return Advice(workload, best["precision"], _evidence(best, base, checked), checked, label)
