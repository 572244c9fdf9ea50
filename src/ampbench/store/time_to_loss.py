"""Time to fp32's loss: how much sooner a precision trains to the loss fp32 reaches, speed and convergence together.

A mode's speedup per step says nothing of the steps it needs: one that converges worse per step (a pure-half model
losing small updates, an fp8 recipe) can be faster per step and slower to a given loss. MLPerf times training to a
quality target for that reason. Here the target is fp32's own: its mean final loss over seeds plus the tolerance the
convergence verdict calls parity (:func:`ampbench.store.derive.parity_bound`); each seed's loss curve, smoothed by a
trailing mean over a tenth of its steps (the window :func:`ampbench.measure.seeds.final_loss` averages), reaches it
at its first step at or below it; a mode's steps are the median over its seeds when every seed reached it, and its
time those steps at its measured step time (the timed steps' mean: compile time apart). fp32 itself reaches the
target before its last step (the target is above its final loss by the tolerance), so the ratio of the two times is
the speedup at equal loss -- equal to the per-step speedup exactly when the mode needs fp32's steps.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

KEYS = ("fp32_loss_target", "steps_to_fp32_loss", "seeds_reaching_fp32_loss", "time_to_fp32_loss_s",
        "time_to_fp32_loss_vs_fp32", "energy_to_fp32_loss_j")


def reach_step(steps: list[int], losses: list[float], target: float) -> int | None:
    """The first step at which the trailing mean of ``losses`` (over a tenth of the points, at least one) is at or
    below ``target``; None when it never is (a non-finite loss never counts)."""
    k = max(1, len(losses) // 10)
    for i in range(k - 1, min(len(steps), len(losses))):
        window = losses[i - k + 1:i + 1]
        if all(math.isfinite(x) for x in window) and sum(window) / k <= target:
            return int(steps[i])
    return None


def step_seconds(row: dict[str, Any]) -> float | None:
    """A step's time: the timed steps' mean (``step_ms_mean``), else the batch over the throughput."""
    ms = row.get("step_ms_mean")
    if isinstance(ms, (int, float)) and ms > 0 and math.isfinite(ms):
        return ms / 1000.0
    sps, batch = row.get("samples_per_s"), row.get("batch_size")
    if isinstance(sps, (int, float)) and sps > 0 and isinstance(batch, int) and batch > 0:
        return batch * (row.get("world_size") or 1) / sps
    return None


def _curves(row: dict[str, Any]) -> bool:
    """Whether the row stored its seeds' loss curves (rows from before curves were kept have final losses only)."""
    conv = row.get("converge") or {}
    return bool(conv.get("curve_steps")) and bool(conv.get("losses"))


def _reached(row: dict[str, Any], target: float) -> tuple[int | None, int]:
    """(median steps to ``target`` when every seed reached it, the seeds that did)."""
    conv = row.get("converge") or {}
    steps = conv.get("curve_steps") or []
    curves = conv.get("losses") or []
    reached = [reach_step(steps, [float(x) if x is not None else math.nan for x in c], target) for c in curves]
    done = [s for s in reached if s is not None]
    return (int(statistics.median_low(done)) if done and len(done) == len(reached) else None), len(done)


def time_to_loss(row: dict[str, Any], base: dict[str, Any] | None, bound: tuple[float, float] | None) -> dict[str, Any]:
    """The :data:`KEYS` of ``row`` against its fp32 row ``base`` whose parity bound (mean final loss, tolerance) is
    ``bound``; every key None where the row or fp32 has no convergence curves, or fp32 did not reach its own target."""
    out: dict[str, Any] = dict.fromkeys(KEYS)
    if bound is None or base is None or row.get("status") != "ok" or not (_curves(row) and _curves(base)):
        return out
    target = bound[0] + bound[1]
    steps, seeds = _reached(row, target)
    base_steps, _ = _reached(base, target)
    out.update(fp32_loss_target=target, steps_to_fp32_loss=steps, seeds_reaching_fp32_loss=seeds)
    mine, theirs = step_seconds(row), step_seconds(base)
    if steps is not None and mine is not None:
        out["time_to_fp32_loss_s"] = steps * mine
        power = row.get("mean_power_w")  # (a GPU's board power over the timed steps, from NVML)
        if isinstance(power, (int, float)) and power > 0 and math.isfinite(power):
            out["energy_to_fp32_loss_j"] = steps * mine * power
        if base_steps is not None and theirs is not None:
            out["time_to_fp32_loss_vs_fp32"] = (base_steps * theirs) / (steps * mine)
    return out


def text(row: dict[str, Any]) -> str:
    """How tables say it: '1.85x ±4% (140 steps)' (± the speedup's noise: the step times' ratio is the same
    measurement), 'not in 200 steps', '2 of 3 seeds in 200 steps', or '-'."""
    if row.get("fp32_loss_target") is None:
        return "-"
    ratio, steps = row.get("time_to_fp32_loss_vs_fp32"), row.get("steps_to_fp32_loss")
    if steps is not None:
        noise = row.get("speedup_vs_fp32_noise")
        # (under 0.5 % it would read "±0%": the speedup columns leave it out there too -- report.numbers.SHOWN, which
        # the store is below)
        pm = f"±{noise:.0%} " if isinstance(noise, (int, float)) and 0.005 <= noise < math.inf and ratio is not None else ""
        return (f"{ratio:.2f}x {pm}" if ratio is not None else "") + f"({steps:,} steps)"
    reached, seeds, within = _short(row)
    return f"{reached} of {seeds} seeds{within}" if reached else f"not{within or ' reached'}"


def _short(row: dict[str, Any]) -> tuple[int, int, str]:
    """A row not every seed of which reached fp32's loss: (the seeds that did, its seeds, " in N steps")."""
    conv = row.get("converge") or {}
    ran = conv.get("steps")
    return (row.get("seeds_reaching_fp32_loss") or 0, len(conv.get("losses") or []),
            f" in {ran:,} steps" if isinstance(ran, int) else "")


def evidence(row: dict[str, Any], base: dict[str, Any] | None) -> str | None:
    """The advisor's words: "fp32's loss 1.85x sooner (140 steps; fp32 150)" -- or later; "fp32's loss reached by 2 of
    3 seeds in 200 steps" where a seed did not reach it (its final loss can still be within the verdict's tolerance:
    the mean of the seeds is judged, each seed here -- the advice said "converges like fp32" and nothing more of a
    pure-bf16 whose third seed never got there); None without a time."""
    ratio, steps = row.get("time_to_fp32_loss_vs_fp32"), row.get("steps_to_fp32_loss")
    base_steps = (base or {}).get("steps_to_fp32_loss")
    if steps is None and base_steps is not None and row.get("fp32_loss_target") is not None:
        reached, seeds, within = _short(row)
        return (f"fp32's loss reached by {reached} of {seeds} seeds{within}" if reached
                else f"fp32's loss not reached{within}")
    if not isinstance(ratio, (int, float)) or steps is None or base_steps is None:
        return None
    when = f"{ratio:.2f}x sooner" if ratio >= 1 else f"{1 / ratio:.2f}x later"
    return f"fp32's loss {when} ({steps:,} steps; fp32 {base_steps:,})"
