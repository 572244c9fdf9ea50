"""Which precision to use for this model on this device, and the evidence — from measured rows only.

Rule: among the modes that ran (status ok), the recommended one is the fastest whose convergence
verdict is parity with fp32. Without convergence data the fastest mode is recommended, labelled
"speed only, convergence not checked". Modes within ``TIE`` of each other in speed are a tie,
broken by lower memory, then by the simpler recipe (:data:`PREFERENCE`). A mode must beat fp32 by
``MIN_GAIN`` in speed (or save ``MIN_MEMORY_SAVING`` of memory at no more than ``TIE`` loss of
speed) to be worth switching; otherwise fp32 stays and the advice says why no mode helps.

Noise blocks claims and never grants them: a noisy measurement can stop a mode from being called
faster, but cannot make a slower mode acceptable or widen a tie (tried: letting noise widen ties
and excuse slowdowns made memory-driven picks flip between runs even more). A gain only counts
when the measurement can tell it apart from noise. With repeats
(``--repeats``) every repeat must be faster than fp32's repeat next to it; with one measurement
the gain must exceed ``NOISE_SIGMAS`` times the speedup's noise (both cells' block-to-block
throughput spread combined). On the busy 2-core CPU this was written on that noise is 1-20%,
which is what made single runs flip between modes before this rule; on a dedicated GPU it is
expected to be near 1% (not yet measured), where the rule changes nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from ampbench.store.derive import compared_memory

TIE = 0.02
"""Relative speed difference treated as equal speed."""
MIN_GAIN = 1.05
NOISE_SIGMAS = 2.0
"""A single measurement's gain must exceed this many standard deviations of its noise."""
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
    """"converges like fp32", "speed only, convergence not checked", "no mode helps", "within noise",
    "nothing converged", "nothing ran"."""

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


def versus_fp32(r: dict[str, Any], gain: float) -> tuple[bool, bool, str]:
    """For mode row ``r`` whose speed is ``gain`` x fp32's: (measurably faster, measurably slower, how
    the noise was judged). Measurably = every repeat agrees, or beyond NOISE_SIGMAS x the noise."""
    rng = r.get("speedup_vs_fp32_range")
    if rng:
        return rng[0] > 1.0, rng[1] < 1.0, f"repeats ranged {rng[0]:.2f}-{rng[1]:.2f}x"
    noise = r.get("speedup_vs_fp32_noise")
    if isinstance(noise, (int, float)) and math.isfinite(noise):
        band = NOISE_SIGMAS * noise
        return gain > 1.0 + band, gain < 1.0 - band, f"±{noise:.0%}"
    return gain > 1.0, gain < 1.0, "no noise estimate"


def _fmt_ratio(x: float) -> str:
    return f"{x:.2f}x" if x < 10 else f"{x:.0f}x"


def _evidence(r: dict[str, Any], base: dict[str, Any] | None, checked: bool) -> str:
    parts = []
    sp = r.get("speedup_vs_fp32")
    if base is None:
        parts.append(f"{_speed(r):,.0f} samples/s, the fastest measured (no fp32 baseline in this run)")
    elif r["precision"] != "fp32" and isinstance(sp, (int, float)):
        rng = r.get("speedup_vs_fp32_range")
        faster, _, how = versus_fp32(r, sp)
        if faster and sp >= 1:
            parts.append(f"{_fmt_ratio(sp)} faster than fp32" + (f" (repeats {rng[0]:.2f}-{rng[1]:.2f}x)" if rng else ""))
        else:  # not measurably faster: say the ratio, and that it is inside the noise when it is above 1
            parts.append(f"{_fmt_ratio(sp)} the speed of fp32" + (f" (within noise: {how})" if sp >= 1 else ""))
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
    fastest = max(pool, key=_speed)
    tied = [r for r in pool if _speed(r) >= _speed(fastest) * (1 - TIE)]
    best = min(tied, key=lambda r: (compared_memory(r) or float("inf"), _pref(r["precision"])))
    label = "converges like fp32" if checked else "speed only, convergence not checked"
    if base is not None and best["precision"] != "fp32":
        gain = _speed(best) / _speed(base)
        faster, _, how = versus_fp32(best, gain)
        saving = best.get("memory_saving_vs_fp32") or 0.0
        worth_it = (gain >= MIN_GAIN and faster) or (saving >= MIN_MEMORY_SAVING and gain >= 1 - TIE)
        if not worth_it and base in pool:
            if gain >= MIN_GAIN:  # a gain the measurement cannot tell from noise
                more = "more --repeats" if best.get("speedup_vs_fp32_range") else "--repeats 3"
                return Advice(workload, "fp32", f"fp32: {best['precision']} measured {_fmt_ratio(gain)} faster, "
                              f"within this measurement's noise ({how}); rerun with {more} to settle it",
                              checked, "within noise")
            return Advice(workload, "fp32", f"fp32: {_why_nothing_helps(ok, base)}", checked, "no mode helps")
    if base is not None and best["precision"] == "fp32":
        return Advice(workload, "fp32", f"fp32: {_why_nothing_helps(ok, base)}", checked, "no mode helps")
    evidence = _evidence(best, base, checked)
    if not checked and best["precision"].startswith("pure-"):
        evidence += "; pure-* keeps no fp32 weights: check convergence (--measure converge) before switching"
    return Advice(workload, best["precision"], evidence, checked, label)
