"""Advice across the execution axes: the fastest combination of precision and execution (compile,
memory format, CUDA graphs) that converges, and which single change buys most — every ratio against
the same fp32 eager cell (``speedup_vs_fp32_eager``), so a gain is credited to the change that made it.

A combination converges when its own row has the verdict parity (or is the fp32 baseline); a row
whose convergence was not measured takes the verdict of the same precision at another execution of
the group, and the advice says so (compile and channels-last change the order of floating-point
operations, not the precision). When no row of the group measured convergence, the advice is on
speed only, as the precision advisor's. fp8 rows need their own parity verdict.

Noise rules are the precision advisor's: a gain counts when every repeat agrees, or when it exceeds
``NOISE_SIGMAS`` x the noise of the ratio (both cells' block-to-block spread combined).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ampbench.execution.axes import Execution
from ampbench.modes import is_fp8
from ampbench.report.numbers import SHOWN, fmt_bytes
from ampbench.store.derive import (
    CONVERGED,
    INCONCLUSIVE,
    NOISE_NOT_MEASURED,
    compared_memory,
    judged,
    speed_doubt,
    speedup_noise,
    speedup_range,
    unmeasured_noise,
)

TIE = 0.02
"""Relative speed difference treated as equal speed."""
MIN_GAIN = 1.05
NOISE_SIGMAS = 2.0
"""A single measurement's gain must exceed this many standard deviations of its noise."""
MIN_MEMORY_SAVING = 0.10
"""A memory saving smaller than this share is not advised on (the precision advisor's rule too)."""


@dataclass(frozen=True)
class Combination:
    """The fastest converging (precision, execution) of one workload, and what each change bought."""

    precision: str | None
    execution: Execution | None
    speedup: float | None
    """Over fp32 eager."""
    evidence: str

    @property
    def label(self) -> str:
        if self.precision is None or self.execution is None:
            return "none"
        return " + ".join([self.precision, *self.execution.changes()])

    def to_dict(self) -> dict[str, Any]:
        return {"combination": self.label, "precision": self.precision,
                "execution": None if self.execution is None else self.execution.to_row(),
                "speedup_vs_fp32_eager": self.speedup, "evidence": self.evidence}


def _speed(r: dict[str, Any]) -> float:
    v = r.get("samples_per_s")
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else 0.0


def batch_figure(r: dict[str, Any]) -> str:
    """A row's largest batch, ">=" where its search stopped at its limit (a lower bound): "1,120", ">=65,536"."""
    return f"{'>=' if r.get('max_batch_limit_hit') else ''}{r['max_batch']:,}"


def times(v: float) -> str:
    """1.23x, 12x; under 0.01x two significant digits (0.0045x: an emulated fp16 step on a CPU, never "0.00x")."""
    return f"{v:.0f}x" if v >= 10 else f"{v:.2f}x" if v >= 0.01 else f"{v:.2g}x"


def noise_text(noise: float) -> str:
    """How a gain was judged against one measurement's noise: the noise and the gain it takes to count (a 1.19x
    "within noise" beside "±10%" read as a contradiction until the two sigmas were said)."""
    return f"±{noise:.0%}; a gain counts beyond {1.0 + NOISE_SIGMAS * noise:.2f}x"


def measurably_faster(row: dict[str, Any], base: dict[str, Any]) -> tuple[bool, str]:
    """Whether ``row`` is faster than ``base`` beyond the noise, and how that was judged."""
    gain = _speed(row) / _speed(base)
    doubt = speed_doubt(row, base)
    if doubt:
        return False, doubt
    rng = speedup_range(row, base)
    if rng:
        return rng[0] > 1.0 and gain >= MIN_GAIN, f"repeats {rng[0]:.2f}-{rng[1]:.2f}x"
    noise = speedup_noise(row, base)
    if noise is not None:
        return gain >= MIN_GAIN and gain > 1.0 + NOISE_SIGMAS * noise, noise_text(noise)
    return False, unmeasured_noise(row)


def _converging(ok: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], set[int], bool]:
    """(rows that converge, ids of those whose verdict was taken from another execution, whether any verdict exists)."""
    checked = any(judged(r) for r in ok)  # (an inconclusive verdict checked nothing)
    if not checked:
        return [r for r in ok if not is_fp8(r["precision"])], set(), False
    verdicts: dict[str, set[str]] = {}
    for r in ok:
        if judged(r):
            verdicts.setdefault(r["precision"], set()).add(r["converge_verdict"])
    good = set(CONVERGED)
    out, inherited = [], set()
    for r in ok:
        v = judged(r)
        if v in good:
            out.append(r)
        elif v is None and verdicts.get(r["precision"]) and verdicts[r["precision"]] <= good \
                and not is_fp8(r["precision"]):
            out.append(r)
            inherited.add(id(r))
    return out, inherited, True


def best_combination(rows: list[dict[str, Any]]) -> Combination:
    """One workload's rows (one run, one device, derived keys present) over several executions."""
    ok = [r for r in rows if r.get("status") == "ok" and _speed(r) > 0]
    base = next((r for r in ok if r["precision"] == "fp32" and Execution.of(r).is_default), None)
    if base is None:
        return Combination(None, None, None, "(no fp32 eager cell ran ok: compile off, contiguous, no CUDA graphs -- "
                           "nothing ranks the combinations; add fp32 and the defaults to the run)"
                           + _against_own_eager(ok))
    pool, inherited, checked = _converging(ok)
    if not pool:
        return Combination(None, None, None, "no combination converged like fp32")

    def gain(r: dict[str, Any]) -> float:
        return _speed(r) / _speed(base)

    top = max(gain(r) for r in pool)
    best = min((r for r in pool if gain(r) >= top * (1 - TIE)), key=lambda r: (_changes(r), -gain(r)))
    faster, how = measurably_faster(best, base) if best is not base else (False, "")
    if not faster:
        if best is base:
            return Combination("fp32", Execution(), 1.0, "(no change and no combination is faster than fp32 eager)"
                               + _singles_text(ok, base))
        more = "more --repeats" if speedup_range(best, base) else "--repeats 3"
        # (the reports print it after the combination's name: "fastest combination: fp32 (nothing measurably
        # faster) ..." -- it read "fastest combination: fp32 the fastest combination, master-bf16, measured ...")
        claim = (f"not claimed, {how}" if how.startswith(NOISE_NOT_MEASURED) else
                 f"within this measurement's noise ({how}); rerun with {more} to settle it")
        return Combination("fp32", Execution(), 1.0, f"(nothing measurably faster) {_label(best)}, the fastest "
                           f"measured, ran {times(gain(best))} fp32 eager, {claim}" + _singles_text(ok, base))
    parts = [f"{times(gain(best))} fp32 eager ({how})"]  # (the reports name the combination just before: not twice)
    if id(best) in inherited:
        parts.append(f"convergence from {best['precision']} at another execution")
    elif checked:
        parts.append("converges like fp32")
    elif any(r.get("converge_verdict") == INCONCLUSIVE for r in ok):  # (the precision advice says why)
        parts.append("speed only, convergence inconclusive (fp32 itself did not learn)")
    else:
        parts.append("speed only, convergence not checked")
    on_top = _on_top(best, ok)
    if on_top:
        parts.append(on_top)
    notes = _compile_notes(best)
    return Combination(best["precision"], Execution.of(best), gain(best),
                       "; ".join(parts) + _singles_text(ok, base) + notes)


def _changes(r: dict[str, Any]) -> int:
    """How many changes a row makes to fp32 eager (its precision, each execution axis): ties go to fewer."""
    return (r["precision"] != "fp32") + len(Execution.of(r).changes())


def least_memory(rows: list[dict[str, Any]], fastest: Combination | None = None,
                 advised: tuple[str | None, Execution] | None = None) -> str | None:
    """With several executions: the converging combination that holds the least memory (activation checkpointing,
    a half precision), its memory against fp32 eager's and the speed it costs or buys -- None where that is fp32 eager
    itself, the fastest combination or the precision advice's mode at its execution (``advised``), whose lines say it
    (``fastest``: :func:`best_combination`'s, made here when not given; its line
    says it), or memory was not measured."""
    ok = [r for r in rows if r.get("status") == "ok" and _speed(r) > 0 and compared_memory(r)]
    base = next((r for r in ok if r["precision"] == "fp32" and Execution.of(r).is_default), None)
    if base is None:
        return None
    pool = _converging(ok)[0]
    if not pool:
        return None
    least = min(compared_memory(r) or math.inf for r in pool)
    tied = [r for r in pool if (compared_memory(r) or math.inf) <= least * (1 + TIE)]
    top = max(_speed(r) for r in tied)
    # Of memory ties, the fastest (within the tie), then the fewer changes: fp32 + checkpointing at 0.77x fp32's
    # speed was picked over amp-bf16 + checkpointing at 1.02x, 1% apart in memory, for its one change fewer.
    pick = min((r for r in tied if _speed(r) >= top * (1 - TIE)), key=lambda r: (_changes(r), -_speed(r)))
    fastest = fastest if fastest is not None else best_combination(rows)
    if pick is base or (pick["precision"], Execution.of(pick)) in ((fastest.precision, fastest.execution), advised):
        return None  # (``advised``: the precision advice's mode at its execution, whose memory it has said)
    mine, theirs = compared_memory(pick) or 0.0, compared_memory(base) or 0.0
    if mine > theirs * (1 - MIN_MEMORY_SAVING):  # (GPT-2's large vocabulary: 5% less for 0.70x the speed)
        return None
    batch = (f"; largest batch {batch_figure(base)} -> {batch_figure(pick)}"
             if isinstance(base.get("max_batch"), int) and isinstance(pick.get("max_batch"), int) else "")
    return (f"least memory: {_label(pick)}, {fmt_bytes(mine)} against fp32 eager's {fmt_bytes(theirs)} "
            f"({1 - mine / theirs:.0%} less), at {times(_speed(pick) / _speed(base))} fp32 eager's speed{batch}")


def _against_own_eager(ok: list[dict[str, Any]]) -> str:
    """Without fp32 eager: each changed execution against its own precision's eager cell -- its speed, and its peak
    memory where both measured one (``run --precisions amp-bf16 --checkpointing off,blocks,selective``: what each
    checkpointing costs and saves, said though no fp32 cell ran)."""
    parts = []
    for r in ok:
        ex = Execution.of(r)
        eager = next((e for e in ok if e["precision"] == r["precision"] and Execution.of(e).is_default), None)
        if ex.is_default or eager is None:
            continue
        text = f"{_label(r)} {times(_speed(r) / _speed(eager))}"
        mine, theirs = compared_memory(r), compared_memory(eager)
        if mine and theirs and abs(1 - mine / theirs) >= SHOWN:
            text += f", {fmt_bytes(mine)} ({abs(1 - mine / theirs):.0%} {'less' if mine < theirs else 'more'})"
        parts.append(text)
    if not parts:
        return ""
    return "; each change against its precision's eager cell (speed, peak memory): " + ", ".join(parts)


def _label(r: dict[str, Any]) -> str:
    return " + ".join([r["precision"], *Execution.of(r).changes()])


def _single_changes(ok: list[dict[str, Any]], base: dict[str, Any]) -> list[tuple[str, float]]:
    """Each change alone against fp32 eager: a precision at the default execution, an execution axis in fp32."""
    out = []
    for r in ok:
        ex = Execution.of(r)
        if r is base:
            continue
        if ex.is_default and r["precision"] != "fp32":
            out.append((r["precision"], _speed(r) / _speed(base)))
        elif r["precision"] == "fp32" and len(ex.changes()) == 1:
            out.append((ex.changes()[0], _speed(r) / _speed(base)))
    return sorted(out, key=lambda kv: -kv[1])


def _singles_text(ok: list[dict[str, Any]], base: dict[str, Any]) -> str:
    singles = _single_changes(ok, base)
    if not singles:
        return ""
    name, g = singles[0]
    rest = ", ".join(f"{n} {times(v)}" for n, v in singles[1:4])
    return f"; the single change that buys most: {name} ({times(g)} alone" + (f"; the others alone: {rest}" if rest else "") + ")"


def _on_top(best: dict[str, Any], ok: list[dict[str, Any]]) -> str:
    """For a combination of a precision and execution changes: what the precision adds on top of the
    execution alone (same execution in fp32), and what the execution adds on top of the precision alone."""
    ex = Execution.of(best)
    if best["precision"] == "fp32" or ex.is_default:
        return ""
    same_ex_fp32 = next((r for r in ok if r["precision"] == "fp32" and Execution.of(r) == ex), None)
    same_p_eager = next((r for r in ok if r["precision"] == best["precision"] and Execution.of(r).is_default), None)
    parts = []
    if same_ex_fp32 is not None:
        parts.append(f"{best['precision']} adds {times(_speed(best) / _speed(same_ex_fp32))} on top of {ex.label}")
    if same_p_eager is not None:
        parts.append(f"{ex.label} adds {times(_speed(best) / _speed(same_p_eager))} on top of {best['precision']}")
    return ", ".join(parts)


def _compile_notes(r: dict[str, Any]) -> str:
    notes = []
    if r.get("graph_breaks"):
        notes.append(f"torch.compile met {r['graph_breaks']} graph break(s): "
                     + "; ".join(r.get("graph_break_reasons") or [])[:200])
    if r.get("recompiles_timed"):
        notes.append(f"recompiled {r['recompiles_timed']} time(s) inside the timed steps (compile time is in its speed)")
    if isinstance(r.get("compile_s"), (int, float)):
        cache = f", Inductor cache {r['compile_cache']}" if r.get("compile_cache") else ""
        notes.append(f"compiling took {r['compile_s']:.1f} s{cache}")
    return "".join(f"; {n}" for n in notes)
