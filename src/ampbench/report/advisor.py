"""Which precision to use for this model on this device, and the evidence — from measured rows only.

Rule: only modes that ran (status ok) and, when convergence was measured, whose verdict is
parity with fp32 are candidates. Among them, in this order:

1. modes measurably faster than fp32 by at least ``MIN_GAIN``: the fastest (modes within ``TIE``
   of it are a tie, broken by lower memory -- within ``MIN_MEMORY_SAVING`` of the least is the same --, then by the
   simpler recipe (each recipe's ``preference``);
2. else modes saving at least ``MIN_MEMORY_SAVING`` of memory at no more than ``TIE`` loss of
   speed: the one using least memory (then the simpler recipe);
3. else fp32, with why no mode helps, or that a gain was measured but is inside the noise.

Without an fp32 row, the fastest mode. A measurably faster mode wins over one that only looks
faster (a 1.17x gain seen in every repeat over a 1.40x median whose repeats straddle 1.0).
Without convergence data the label says "speed only, convergence not checked". Modes whose recipe says
``advised_only_with_verdict`` (fp8, pure-*: numerics beyond autocast's) are never recommended on speed or
memory alone: only with their own parity verdict; the advice then gives fp8's speed next to the best bf16
mode's, and names a faster or leaner such mode it left out for lack of convergence data.

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
from dataclasses import dataclass, replace
from itertools import groupby
from typing import Any

from ampbench.cells import CellId, measured_on
from ampbench.cpuinfo import half_math_claim
from ampbench.execution.axes import Execution
from ampbench.modes import advised_only_with_verdict, is_fp8, preference
from ampbench.report.accumulation import accumulation_note
from ampbench.report.combine import (
    MIN_GAIN,
    MIN_MEMORY_SAVING,
    NOISE_SIGMAS,
    TIE,
    batch_figure,
    best_combination,
    least_memory,
    noise_text,
    times,
)
from ampbench.report.data_loading import data_advice
from ampbench.report.numbers import sig
from ampbench.report.optimizer_states import state_advice
from ampbench.report.predictions import at_power
from ampbench.report.strategies import strategy_summary
from ampbench.store.derive import (
    CONVERGED,
    INCONCLUSIVE,
    NOISE_NOT_MEASURED,
    below_fp32,
    compared_memory,
    judged,
    no_learning,
    speedup_noise,
    unmeasured_noise,
)
from ampbench.store.time_to_loss import evidence as time_to_loss_evidence

LAUNCH_BOUND_MS = 5.0
"""GPU step times below this, with the half modes no faster, point at a launch-bound model."""


@dataclass(frozen=True)
class Advice:
    workload: str
    recommended: str | None
    """The mode to use, or None when nothing ran."""
    evidence: str
    """One sentence: why this mode (or why none helps)."""
    convergence_checked: bool
    label: str
    """"converges like fp32" ("converges, below fp32's loss": parity by ending lower than fp32's seed spread), "speed
    only, convergence not checked", "speed only, convergence inconclusive" (fp32 did not learn over the convergence
    run), "no mode helps", "within noise", "noisy" (a gain
    the probe says cannot be, or against fp32 measurements that disagree), "noise unknown" (a gain of unmeasured noise),
    "nothing converged", "no fp32 baseline" (convergence checked, but no fp32 row to judge it by), "fp32 alone"
    (no other mode ran), "nothing ran",
    "speed not measured" (converge-only runs: the verdicts are the finding)."""
    combination: str | None = None
    """With several executions (--compile, --memory-format, --cuda-graphs): the fastest converging
    combination ("amp-bf16 + compile"), "fp32" when none is measurably faster than fp32 eager, "none"."""
    combination_evidence: str | None = None
    """Its speedup over fp32 eager, and what each change bought alone and on top of the other."""
    least_memory: str | None = None
    """With several executions: the converging combination that holds the least memory, where it is not the fastest
    (activation checkpointing: its memory against fp32 eager's, at the speed it costs; :func:`least_memory`)."""
    distributed: str | None = None
    """With distributed cells (--strategy): the fastest across ranks, its scaling, the least memory per rank."""
    optimizer_states: str | None = None
    """With --optimizer-state cells: the leanest state with a parity verdict, for memory only
    (:mod:`ampbench.report.optimizer_states`); the mode is chosen among the optimizers as built."""
    half_type: str | None = None
    """With amp-fp16 and amp-bf16 both measured: which half type to use on this device for this model, from their
    measured speeds, and why (:func:`half_type_advice`)."""
    energy: str | None = None
    """With energy measured (GPU rows, NVML): the mode that trains a sample for the fewest joules (:func:`energy_advice`)."""
    data: str | None = None
    """Where loading a batch takes a tenth of the advised mode's step or more: what a loop that does not overlap it
    loses (:func:`ampbench.report.data_loading.data_advice`)."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @property
    def reason(self) -> str:
        """The evidence after the mode it names (it opens with "{recommended}: "): what a line that already says
        "use {recommended}" adds."""
        lead = f"{self.recommended}: "
        return self.evidence.removeprefix(lead) if self.recommended else self.evidence


def workload_groups(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Rows split into what one piece of advice is about: one run on one device, one workload, preset and batch
    size (and micro-batches a step: ``--grad-accum``) -- the cell identity but the precision, execution and
    distribution, which :func:`advise` compares."""
    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        cell, (run, device) = CellId.of(r), measured_on(r)
        return cell.workload, cell.preset, cell.batch_size or 0, cell.grad_accum, device or "", run or ""

    return [list(g) for _, g in groupby(sorted(rows, key=key), key=key)]


def group_labels(groups: list[list[dict[str, Any]]]) -> list[str]:
    """How each advice group is named where they are listed together: its workload and preset ("bert (tiny)",
    "bert (small)": one name for both read as opposite advice for one model), and its batch and device where two
    groups share the rest."""
    def base(g: list[dict[str, Any]]) -> str:
        return f"{g[0]['workload']} ({g[0].get('preset') or '-'})"

    names = [base(g) for g in groups]
    out = []
    for g, name in zip(groups, names):
        same = [h for h, n in zip(groups, names) if n == name]
        extra = []
        if len({(h[0].get("batch_size"), CellId.of(h[0]).grad_accum) for h in same}) > 1:
            n = CellId.of(g[0]).grad_accum
            extra.append(f"batch {g[0].get('batch_size')}" + (f" x {n} micro-batches" if n != 1 else ""))
        if len({h[0].get("device_name") for h in same}) > 1:
            extra.append(str(g[0].get("device_name")))
        out.append(name[:-1] + "".join(f", {x}" for x in extra) + ")")
    return out


def _pref(p: str) -> int:
    return preference(p)


def _pick(rows: list[dict[str, Any]], by_speed: bool) -> dict[str, Any]:
    """The fastest row (speeds within TIE are a tie), or with ``by_speed=False`` any of them; ties
    and the rest go to lower memory, then to the simpler recipe. Memory within ``MIN_MEMORY_SAVING`` of the least is
    a tie too (master-bf16 was picked over amp-bf16, 1.27x against 1.29x, for 4.2 MiB against 4.3: a saving the
    advisor does not count elsewhere)."""
    top = max(_speed(r) for r in rows) if by_speed else 0.0
    tied = [r for r in rows if _speed(r) >= top * (1 - TIE)]
    least = min((compared_memory(r) for r in tied if compared_memory(r) is not None), default=None)
    if least is not None:
        lean = [r for r in tied if (compared_memory(r) or float("inf")) <= least * (1 + MIN_MEMORY_SAVING)]
        return min(lean, key=lambda r: (_pref(r["precision"]), compared_memory(r) or float("inf")))
    return min(tied, key=lambda r: _pref(r["precision"]))


def _speed(r: dict[str, Any]) -> float:
    v = r.get("samples_per_s")
    return float(v) if isinstance(v, (int, float)) else 0.0


def versus_fp32(r: dict[str, Any], gain: float) -> tuple[bool, bool, str]:
    """For mode row ``r`` whose speed is ``gain`` x fp32's: (measurably faster, measurably slower, how
    the noise was judged). Measurably = every repeat agrees, or beyond NOISE_SIGMAS x the noise; never
    faster when the gain contradicts the device's probe or rests on fp32 measurements that disagree
    (``speedup_vs_fp32_doubt``), and neither faster nor slower with no noise estimate."""
    doubt = r.get("speedup_vs_fp32_doubt")
    if doubt:
        return False, False, str(doubt)
    rng = r.get("speedup_vs_fp32_range")
    if rng:
        return rng[0] > 1.0, rng[1] < 1.0, f"repeats ranged {rng[0]:.2f}-{rng[1]:.2f}x"
    noise = r.get("speedup_vs_fp32_noise")
    if isinstance(noise, (int, float)) and math.isfinite(noise):
        band = NOISE_SIGMAS * noise
        return gain > 1.0 + band, gain < 1.0 - band, noise_text(noise)
    return False, False, unmeasured_noise(r)  # (a difference of unknown noise is neither a gain nor a loss)


def _evidence(r: dict[str, Any], base: dict[str, Any] | None, checked: bool, ok: list[dict[str, Any]],
              fp32_oom: bool = False) -> str:
    """``ok``: every row that ran, the modes left out of the advice included (without fp32, the advised mode is the
    fastest only of those it was chosen among: pure-bf16 ran faster than the amp-bf16 called "the fastest measured").
    ``fp32_oom``: fp32 ran out of memory at the batch (said so, not "no fp32 baseline in this run")."""
    parts = []
    sp = r.get("speedup_vs_fp32")
    if base is None:
        top = all(_speed(x) <= _speed(r) * (1 + TIE) for x in ok)
        parts.append(f"{_speed(r):,.0f} samples/s, " + ("the fastest measured" if top else
                     "the fastest mode that needs no convergence verdict of its own")
                     + (" (fp32 ran out of memory)" if fp32_oom else " (no fp32 baseline in this run)"))
    elif r["precision"] != "fp32" and isinstance(sp, (int, float)):
        rng = r.get("speedup_vs_fp32_range")
        faster, _, how = versus_fp32(r, sp)
        if faster and sp >= 1:
            parts.append(f"{times(sp)} faster than fp32" + (f" (repeats {rng[0]:.2f}-{rng[1]:.2f}x)" if rng else ""))
            exp = r.get("expected_speedup_vs_fp32")
            if isinstance(exp, (int, float)):
                parts.append(f"faster matmuls alone would give ~{times(exp)} (ampbench hw's GEMM speedup over "
                             "this model's matmul share)")
        else:  # not measurably faster: say the ratio, and that it is inside the noise (or doubtful) when above 1
            doubt = r.get("speedup_vs_fp32_doubt")
            parts.append(f"{times(sp)} the speed of fp32" + (f" (not claimed: {doubt})" if doubt else
                                                                   f" ({how})" if how.startswith(NOISE_NOT_MEASURED) else
                                                                   f" (within noise: {how})" if sp >= 1 else ""))
    saving = r.get("memory_saving_vs_fp32")
    if isinstance(saving, (int, float)) and r["precision"] != "fp32" and abs(saving) >= 0.01:
        parts.append(f"{saving:.0%} less memory" if saving > 0 else f"{-saving:.0%} more memory")
    if base is not None and r.get("max_batch") and base.get("max_batch") and r["precision"] != "fp32":
        parts.append(f"batch {batch_figure(base)} → {batch_figure(r)}")
    if checked:
        below = below_fp32(r, base) if r["precision"] != "fp32" else None
        if below:  # (parity, but not by staying near fp32: it trained otherwise, and the advice says so)
            parts.append(f"final loss {below[0]:.4g}, below fp32's {below[1]:.4g} by more than its seed spread "
                         f"({below[2]:.2g}): it did not train as fp32 does (a longer --converge-steps run shows "
                         "whether it stays ahead)")
        else:
            parts.append("final loss within fp32's seed spread" if r["precision"] != "fp32" else "the baseline")
        sooner = time_to_loss_evidence(r, base) if r["precision"] != "fp32" else None
        if sooner:
            parts.append(sooner)
    return f"{r['precision']}: " + ", ".join(parts)


def _why_nothing_helps(base: dict[str, Any], others: list[dict[str, Any]]) -> str:
    env = base.get("env") or {}
    if str(base.get("device", "")).startswith("cpu") or env.get("device") == "cpu":
        # the same probe as `ampbench hw`: the flags and peak recorded in the row's env
        hw = env.get("cpu_half_hardware") or {}
        claim = half_math_claim(hw, (env.get("cpu_peak") or {}).get("flops_per_cycle"))
        if not any(hw.values()):
            return f"CPU without half-precision math hardware ({claim}): half precision is slower here"
        # (one level of parentheses: "this CPU has X (bf16 matmuls run on X (peak 2x fp32's); ...), but ..." nested
        # three, and named the unit twice)
        why = f"no half-precision mode ran faster than fp32 for this model, on a CPU where {claim}"
        half = [r for r in others if isinstance(r.get("expected_speedup_vs_fp32"), (int, float))]
        g = base.get("mfu_vs_measured")
        if half and isinstance(g, (int, float)):
            best = max(half, key=lambda r: r["expected_speedup_vs_fp32"])
            return (f"{why} -- its matmuls are ~{min(g, 1.0):.0%} of fp32's step at ampbench hw's GEMM speed, so "
                    f"{best['precision']} could gain ~{times(best['expected_speedup_vs_fp32'])} at most "
                    f"(measured {times(_speed(best) / max(_speed(base), 1e-12))})")
        return f"{why} -- ampbench hw measures its GEMM speeds, ampbench diagnose --checks profile where the time goes"
    if base.get("predicted_why"):  # a prediction of this cell on this GPU (ampbench predict): its breakdown says why
        return f"no mode is more than {MIN_GAIN - 1:.0%} faster than fp32; predicted for fp32: {base['predicted_why']}"
    p50 = base.get("step_ms_p50")
    if isinstance(p50, (int, float)) and p50 < LAUNCH_BOUND_MS:
        return f"model too small: a {p50:.1f} ms step is launch-bound, so faster math does not shorten it"
    return f"no mode is more than {MIN_GAIN - 1:.0%} faster than fp32 or saves {MIN_MEMORY_SAVING:.0%} of memory"


def advise(rows: list[dict[str, Any]]) -> Advice:
    """Advice for one workload from its rows (one run, one device; derived keys present).

    The precision is chosen among the rows of one execution: eager (compile off, contiguous, no CUDA
    graphs) when it ran, else the first the rows have (then the evidence names it). With several
    executions, the advice also names the fastest converging combination (:mod:`ampbench.report.combine`)."""
    summary = strategy_summary(rows)
    single = [r for r in rows if not r.get("strategy")]  # precisions and executions: compared on one process
    built = [r for r in single if not r.get("optimizer_state")]  # (a state row is not its mode: advised apart)
    a = _advise_execution(built or single or rows)
    eager = [r for r in (built or single or rows) if Execution.of(r).is_default] or built or single or rows
    a = replace(a, optimizer_states=state_advice([r for r in single if Execution.of(r).is_default] or single,
                                                 a.recommended), half_type=half_type_advice(eager),
                energy=energy_advice(eager), data=data_advice(eager, a.recommended))
    return replace(a, distributed=summary) if summary else a


CONV_SHARE = 0.5
"""A model with at least this share of its FLOPs in convolutions: its half-type difference is its convolutions'."""


def half_type_advice(rows: list[dict[str, Any]]) -> str | None:
    """fp16 or bf16 on this device for this model, from amp-fp16's and amp-bf16's measured speeds (one execution):
    the faster one where the difference clears their noise and ``TIE`` (on the H200 cuDNN's bf16 convolutions ran
    ResNet-50 23 % slower than its fp16 ones, while transformers ran both alike), bf16 where they tie (fp32's range:
    no loss scale to manage). Never a rule that prefers one whatever was measured. bf16 where amp-fp16 diverged and
    amp-bf16 trained (saying why fp16 stopped); the one whose convergence was judged like fp32's where the other's
    was worse, whatever their speeds. None without both rows."""
    ok = {r["precision"]: r for r in rows if r.get("status") == "ok" and _speed(r) > 0}
    fp16, bf16 = ok.get("amp-fp16"), ok.get("amp-bf16")
    diverged = next((r for r in rows if r.get("precision") == "amp-fp16" and r.get("status") == "diverged"), None)
    if fp16 is None and bf16 is not None and diverged is not None:
        reason = str(diverged.get("reason") or "its loss or gradients went non-finite").split(" (")[0]
        return (f"half type: bf16 -- amp-fp16 diverged here ({reason}) where amp-bf16 trained: fp32's range, no loss "
                "scale to manage")
    if fp16 is None or bf16 is None:
        return None
    ratio = _speed(fp16) / _speed(bf16)
    for mine, other, half in ((fp16, bf16, "bf16"), (bf16, fp16, "fp16")):  # (a speed never outweighs a verdict)
        if _judged_worse(mine) and not _judged_worse(other):
            return (f"half type: {half} -- {mine['precision']}'s convergence was {mine.get('converge_verdict')} here, "
                    f"{other['precision']}'s {other.get('converge_verdict') or 'not checked'} (amp-fp16 ran "
                    f"{times(ratio)} amp-bf16's speed)")
    # (the two cells ran minutes apart: how far the machine itself moved over the run, fp32's opening against its
    # closing measurement, is part of their difference's noise as it is of every speedup's -- a CPU run whose fp32
    # moved 13 % said "amp-bf16 ran 1.13x amp-fp16's speed here" from within-cell noise alone)
    drift = next((r.get("baseline_drift") for r in rows if r.get("precision") == "fp32" and not r.get("closing_baseline")
                  and isinstance(r.get("baseline_drift"), (int, float))), None)
    noise = speedup_noise(fp16, {**bf16, "baseline_drift": drift})
    if noise is None and abs(ratio - 1) > TIE:  # (a difference of unmeasured noise picks neither)
        return (f"half type: bf16 -- amp-fp16 ran {times(ratio)} amp-bf16's speed, not judged ({unmeasured_noise(fp16)}); "
                "bf16 keeps fp32's range, so no loss scale to manage")
    band = max(TIE, NOISE_SIGMAS * (noise or 0.0))
    conv = fp16.get("conv_flops_share")
    convs = isinstance(conv, (int, float)) and conv >= CONV_SHARE
    if ratio > 1 + band:
        gpu = str(fp16.get("device") or "").startswith("cuda")  # (a CPU's convolutions are oneDNN's, not cuDNN's)
        why = (f"{conv:.0%} of its FLOPs are convolutions, and this "
               f"{'GPU' if gpu else 'CPU'}'s bf16 convolution kernels ({'cuDNN' if gpu else 'oneDNN'}) run slower "
               "than its fp16 ones" if convs else "its fp16 kernels ran faster than its bf16 ones here")
        skipped = fp16.get("skipped_steps")
        return (f"half type: fp16 -- amp-fp16 ran {times(ratio)} amp-bf16's speed ({why}); fp16 needs loss scaling, "
                f"which the engine does (dynamic: {skipped if skipped is not None else '?'} steps skipped here)")
    if ratio < 1 - band:
        return (f"half type: bf16 -- amp-bf16 ran {times(1 / ratio)} amp-fp16's speed here, with fp32's range and no "
                "loss scale to manage")
    if abs(ratio - 1) <= TIE:
        return (f"half type: bf16 -- fp16 and bf16 ran alike here (amp-fp16 {times(ratio)} amp-bf16's speed, within "
                f"{TIE:.0%}); bf16 keeps fp32's range, so no loss scale to manage")
    # (not "alike": a difference inside wide noise is no evidence of equal speed -- bert tiny on a busy CPU, 0.77x
    # with ±24 % noise, read "ran alike ... within 48%")
    return (f"half type: bf16 -- neither ran measurably faster here (amp-fp16 {times(ratio)} amp-bf16's speed, inside "
            f"this measurement's noise: a difference counts beyond {band:.0%}); bf16 keeps fp32's range, so no loss "
            "scale to manage")


def energy_advice(rows: list[dict[str, Any]]) -> str | None:
    """The mode that trains a sample for the fewest joules (measured, NVML), beside fp32's; among the modes the
    advisor may recommend (fp8 and pure-* only with their own parity verdict). None with under two such rows.

    Joules per sample are the mean power over the throughput, so they carry the throughput's noise: modes whose
    joules lie within ``TIE`` or ``NOISE_SIGMAS`` x that noise of the fewest cannot be told apart from it (nor can any
    whose noise was not measured), and the pick among them is the simpler recipe, the others named beside it
    (transformers ran amp-fp16 and amp-bf16 at one speed on the H200: which of the two drew 1 % fewer joules was
    the noise's call)."""
    ok = [r for r in rows if r.get("status") == "ok" and isinstance(r.get("joules_per_sample"), (int, float))
          and r["joules_per_sample"] > 0 and not (advised_only_with_verdict(r["precision"])
                                                  and r.get("converge_verdict") != "parity") and not _judged_worse(r)]
    if len(ok) < 2:
        return None
    least = min(ok, key=lambda r: (r["joules_per_sample"], _pref(r["precision"])))
    noise = {id(r): speedup_noise(r, least) for r in ok}  # (joules carry the speed's noise)

    def apart(r: dict[str, Any]) -> bool:  # r's joules measurably more than the fewest's
        n = noise[id(r)]
        return r is not least and n is not None and \
            r["joules_per_sample"] > least["joules_per_sample"] * (1 + max(TIE, NOISE_SIGMAS * n))

    tied = [r for r in ok if not apart(r)]
    best = min(tied, key=lambda r: (_pref(r["precision"]), r["joules_per_sample"]))
    base = next((r for r in ok if r["precision"] == "fp32"), None)
    text = (f"most energy-efficient: {best['precision']}, {_joules(best['joules_per_sample'])} a sample at "
            f"{best.get('mean_power_w') or 0:.0f} W")
    notes = []
    if base is not None and base not in tied:
        notes.append(f"fp32: {_joules(base['joules_per_sample'])}, "
                     f"{base['joules_per_sample'] / best['joules_per_sample']:.1f}x more")
    for unknown, said in ((False, "within the noise of it"), (True, "noise not measured, not told apart from it")):
        others = [r for r in tied if r is not best and (noise[id(r)] is None) == unknown]
        if others:
            notes.append(f"{said}: " + ", ".join(f"{r['precision']} {_joules(r['joules_per_sample'])}" for r in others))
    text += f" ({'; '.join(notes)})" if notes else ""
    predicted = best.get("predicted_joules_per_sample")
    if isinstance(predicted, (int, float)):
        text += f"; predicted {at_power(best)} {_joules(predicted)}"
    return text


def _judged_worse(r: dict[str, Any]) -> bool:
    """The row's convergence was judged, and not like fp32's (worse; diverged is a status of its own)."""
    verdict = judged(r)
    return verdict is not None and verdict not in CONVERGED and verdict != "no-baseline"


def _joules(j: float) -> str:
    """0.123 J, 12.3 mJ: three significant digits."""
    return f"{sig(j)} J" if j >= 0.1 else f"{sig(j * 1e3)} mJ"


def _advise_execution(rows: list[dict[str, Any]]) -> Advice:
    executions = sorted({Execution.of(r) for r in rows}, key=lambda ex: (not ex.is_default, len(ex.changes()), ex.label))
    if not executions:
        return _advise_precision(rows)
    ref = executions[0]
    a = _advise_precision([r for r in rows if Execution.of(r) == ref])
    if not ref.is_default:  # (after the mode it names: "(at channels_last) master-bf16: ..." said the mode twice on
        # the lines that lead with it)
        lead = f"{a.recommended}: " if a.recommended and a.evidence.startswith(f"{a.recommended}: ") else ""
        a = replace(a, evidence=f"{lead}(at {ref.label}) {a.evidence.removeprefix(lead)}")
    fp8_executions = [ex for ex in executions if any(_is_fp8(r) and Execution.of(r) == ex for r in rows)]
    fp8_at = fp8_executions[0] if fp8_executions and ref not in fp8_executions else None
    if fp8_at is not None:  # fp8 on CUDA compiles by default: its advice at the execution it ran at
        b = _advise_precision([r for r in rows if Execution.of(r) == fp8_at])
        a = replace(a, evidence=f"{a.evidence}; fp8 ran at {fp8_at.label} only: there, {b.recommended or 'no mode'} "
                                f"({b.evidence})")
    if len(executions) > 1:
        c = best_combination(rows)
        a = replace(a, combination=c.label, combination_evidence=c.evidence,
                    least_memory=least_memory(rows, c, (a.recommended, ref)))
    return a


def batch_ratio_text(r: dict[str, Any]) -> str | None:
    """A mode's max batch over fp32's as said: "1.85x", ">=1.85x" (its search stopped at the limit), "<=0.50x"
    (fp32's did); None without one (fp32's own row, or both searches at their limit)."""
    ratio = r.get("max_batch_ratio_vs_fp32")
    if not isinstance(ratio, (int, float)) or r["precision"] == "fp32":
        return None
    return f"{r.get('max_batch_ratio_bound') or ''}{times(ratio)}"


def _batch_text(r: dict[str, Any]) -> str:
    """"amp-bf16 1,776 (1.85x fp32's)", "fp32 >=65,536" (its search stopped at the limit: written as the tables write
    it), "fp32 none" (no max batch: the row's warnings say why)."""
    mb, ratio = r.get("max_batch"), batch_ratio_text(r)
    if not mb:
        return f"{r['precision']} none"
    more = f" ({ratio} fp32's)" if ratio else ""
    return f"{r['precision']} {batch_figure(r)}{more}"


def _no_baseline(rows: list[dict[str, Any]]) -> str:
    """Why no convergence verdict could be given: what became of fp32 (its row with the optimizer as built)."""
    fp32 = next((r for r in rows if r["precision"] == "fp32" and not r.get("optimizer_state")), None)
    if fp32 is None:
        return "fp32 did not run: add fp32 to --precisions"
    if fp32.get("status") != "ok":
        return f"fp32 ended {fp32.get('status')} ({fp32.get('reason') or 'no reason'})"
    if any((fp32.get("converge") or {}).get("diverged") or []):
        return "fp32 itself diverged"
    return "fp32 has no convergence result"


def _advise_precision(rows: list[dict[str, Any]]) -> Advice:
    workload = rows[0]["workload"] if rows else "?"
    ok = [r for r in rows if r.get("status") == "ok" and _speed(r) > 0]
    unspeeded = [r for r in rows if r.get("status") == "ok" and r.get("samples_per_s") is None]
    if not ok and unspeeded:  # e.g. --measure converge alone: no speed to recommend on, the verdicts are the finding
        checked = any(r.get("converge_verdict") for r in unspeeded)
        found = []
        if checked or not any(r.get("max_batch") for r in unspeeded):
            found.append("convergence: " + ", ".join(f"{r['precision']} {r.get('converge_verdict') or 'not checked'}"
                                                     for r in unspeeded))
            why = _inconclusive(unspeeded)
            if why:
                found.append(f"inconclusive: {why}")
        if any(r.get("max_batch") for r in unspeeded):  # (--measure maxbatch alone: the batches are the finding)
            found.append("largest batch: " + ", ".join(_batch_text(r) for r in unspeeded))
        return Advice(workload, None, "; ".join(found) + "; run --measure throughput to compare speed", checked,
                      "speed not measured")
    accumulate = accumulation_note(rows)
    more = f"; {accumulate}" if accumulate else ""
    if not ok:
        failed = "; ".join(f"{r['precision']} {r.get('status')} ({r.get('reason') or 'no reason'})" for r in rows)
        return Advice(workload, None, f"every mode failed: {failed}{more}" if rows else "no results", False,
                      "nothing ran")
    base = next((r for r in ok if r["precision"] == "fp32"), None)
    checked = any(judged(r) for r in ok)  # (an inconclusive verdict -- fp32 itself did not learn -- checked nothing)
    inconclusive = _inconclusive(ok)
    if checked:
        pool = [r for r in ok if r.get("converge_verdict") in CONVERGED]
        if not pool and all(r.get("converge_verdict") in ("no-baseline", None) for r in ok if r is not base):
            return Advice(workload, None, "no verdict: convergence is judged against fp32's final loss and seed "
                          f"spread, and {_no_baseline(rows)}", True, "no fp32 baseline")
        if not pool:
            return Advice(workload, None, "no mode converged like fp32 (" + ", ".join(
                f"{r['precision']}: {r.get('converge_verdict')}" for r in ok) + ")", True, "nothing converged")
    else:
        pool = ok
    # fp8 and pure-* are never recommended on speed or memory alone: their own convergence must have been measured
    # (and matched fp32)
    unchecked = [r for r in ok if advised_only_with_verdict(r["precision"]) and r.get("converge_verdict") != "parity"]
    pool = [r for r in pool if r not in unchecked]
    if not pool:
        names = ", ".join(sorted({r["precision"] for r in unchecked}))
        return Advice(workload, None, f"only modes that need their own convergence verdict ran ({names}), without one: "
                      "run --measure converge first", checked, "nothing converged")
    label = "converges like fp32" if checked else \
        "speed only, convergence inconclusive" if inconclusive else "speed only, convergence not checked"
    more += f"; convergence inconclusive: {inconclusive}" if inconclusive else ""
    if base is None or base not in pool:  # nothing to compare with: the fastest that ran
        best = _pick(pool, by_speed=True)
    else:
        others = [r for r in pool if r is not base]

        def gain(r: dict[str, Any]) -> float:
            return _speed(r) / _speed(base)

        faster = [r for r in others if gain(r) >= MIN_GAIN and versus_fp32(r, gain(r))[0]]
        lean = [r for r in others if gain(r) >= 1 - TIE and (r.get("memory_saving_vs_fp32") or 0.0) >= MIN_MEMORY_SAVING]
        if faster:  # measurably faster modes first: the fastest of them (ties: memory, then recipe)
            best = _pick(faster, by_speed=True)
        elif lean:  # no speed to gain: the mode that saves most memory at fp32's speed
            best = _pick(lean, by_speed=False)
        else:
            noisy = [r for r in others if gain(r) >= MIN_GAIN]
            if noisy:  # a gain the measurement cannot tell from noise (or that the probe says cannot be)
                top = max(noisy, key=_speed)
                how = versus_fp32(top, gain(top))[2]
                more = "more --repeats" if top.get("speedup_vs_fp32_range") else "--repeats 3"
                if top.get("speedup_vs_fp32_doubt"):
                    return Advice(workload, "fp32", f"{top['precision']} measured {times(gain(top))} "
                                  f"faster, not claimed: {how}; rerun with {more} on an idle machine", checked, "noisy")
                if how.startswith(NOISE_NOT_MEASURED):  # (how says what measures it)
                    return Advice(workload, "fp32", f"{top['precision']} measured {times(gain(top))} faster, not "
                                  f"claimed, {how}", checked, "noise unknown")
                return Advice(workload, "fp32", f"{top['precision']} measured {times(gain(top))} "
                              f"faster, within this measurement's noise ({how}); rerun with {more} to settle it",
                              checked, "within noise")
            if not others:  # (nothing else in the pool: "no half-precision mode ran faster" would be untrue)
                left = [r for r in ok if r is not base]
                if not left:
                    return Advice(workload, "fp32", "only fp32 ran: nothing to compare it with -- --precisions names "
                                  "the modes to run beside it (ampbench list: those this device runs)" + more, checked,
                                  "fp32 alone")
                return Advice(workload, "fp32", "no other mode may be recommended: " + ", ".join(
                    f"{r['precision']} ({times(gain(r))} fp32's speed; {_left_out_why(r)})" for r in left) + more,
                    checked, "no mode helps")
            return Advice(workload, "fp32", _why_nothing_helps(base, others) + more, checked, "no mode helps")
    fp32_oom = any(r["precision"] == "fp32" and r.get("status") == "oom" for r in rows)
    evidence = _evidence(best, base, checked, ok, fp32_oom) + _unchecked_notes(best, ok, [r for r in unchecked if _is_fp8(r) or
                                                                            not judged(r)]) + more
    if checked and below_fp32(best, base):  # (parity by ending lower: not "like fp32"; the evidence says by how much)
        label = "converges, below fp32's loss"
    return Advice(workload, best["precision"], evidence, checked, label)


def _inconclusive(rows: list[dict[str, Any]]) -> str | None:
    """Why the rows' convergence verdicts are inconclusive (fp32 itself did not learn), where they are."""
    if not any(r.get("converge_verdict") == INCONCLUSIVE for r in rows):
        return None
    return no_learning(next((r for r in rows if r["precision"] == "fp32"), None))


def _is_fp8(r: dict[str, Any]) -> bool:
    return is_fp8(str(r.get("precision", "")))


def _left_out_why(r: dict[str, Any]) -> str:
    """Why a mode that ran is out of the advice's pool: its convergence verdict, or that it needs one of its own."""
    verdict = r.get("converge_verdict")
    if verdict and verdict != INCONCLUSIVE:
        return f"its convergence was {verdict}"
    return ("it needs its own convergence verdict: " + ("fp32 did not learn in the convergence run" if verdict else
                                                          "run --measure converge first"))


def _unchecked_notes(best: dict[str, Any], ok: list[dict[str, Any]], unchecked: list[dict[str, Any]]) -> str:
    """fp8 next to the best bf16 mode; modes left out for lack of their own convergence verdict (fp8, pure-*)
    that ran faster or used less memory than the one advised."""
    notes = []
    bf16 = [r for r in ok if r.get("math_mode") == "bf16"]
    if _is_fp8(best) and bf16:
        top = max(bf16, key=_speed)
        notes.append(f"{times(_speed(best) / _speed(top))} the speed of the best bf16 mode ({top['precision']})")
    better = [r for r in unchecked if _speed(r) > _speed(best) or (compared_memory(r) or float("inf")) <
              (compared_memory(best) or float("inf")) * (1 - MIN_MEMORY_SAVING)]
    if better:
        top = max(better, key=_speed)
        verdict = top.get("converge_verdict")
        why = f"its convergence was {verdict}" if verdict else "run --measure converge first"
        what = (f"ran {times(_speed(top) / _speed(best))} faster" if _speed(top) > _speed(best)
                else "uses less memory")
        notes.append(f"{top['precision']} {what} but is not recommended: {why}")
    return "".join(f"; {n}" for n in notes)
