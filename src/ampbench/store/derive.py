"""Keys that compare a row with its fp32 baseline, computed whenever rows are read.

The baseline of a row is the ``ok`` fp32 row of the same run and device whose cell identity
(:class:`ampbench.cells.CellId`: workload, preset, batch size, execution, distribution) is the row's
with the precision fp32: ``*_vs_fp32`` is the precision's own gain. ``speedup_vs_fp32_eager`` divides by
the fp32 *eager* row (every execution axis at its default) instead: the gain of every change the row
makes, against one baseline. Deriving at read time (not
storing) keeps imported rows and resumed runs consistent.
Repeats of a cell (``--repeats``) are stored as rows of their own, so that a killed run keeps
every finished one; reading folds them into their cell's row first (:func:`merge_repeats`).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Any

from ampbench.cells import CellId, measured_on
from ampbench.measure.stats import MIN_NOISE_STEPS
from ampbench.store.time_to_loss import time_to_loss

BASELINE = "fp32"
CONVERGE_REL_FLOOR = 0.02
"""Smallest loss tolerance, relative to fp32's mean final loss (used when seeds agree closely)."""
CONVERGE_SPREAD_FACTOR = 3.0
"""Tolerance = this many fp32 seed-to-seed standard deviations (when that is above the floor)."""


TIMING_KEYS = ("samples_per_s", "samples_per_s_noise", "step_ms_p10", "step_ms_p50", "step_ms_p90", "step_ms_mean",
               "achieved_tflops", "mfu", "timer")
"""What a merged row takes from its median repeat (so its timing keys all come from one measurement)."""


def _sps(row: dict[str, Any]) -> float | None:
    v = row.get("samples_per_s")
    ok = row.get("status") == "ok" and isinstance(v, (int, float)) and math.isfinite(v)
    return float(v) if ok else None


def _merge(first: dict[str, Any], later: list[dict[str, Any]]) -> dict[str, Any]:
    merged = dict(first)
    closing = [r for r in later if r.get("closing_baseline")]
    if closing:  # fp32 timed again after the other modes
        a, b = _sps(first), _sps(closing[0])
        merged["baseline_drift"] = abs(b - a) / a if a and b is not None else None
        if a and b is not None and b > a:
            # Disturbances on a shared machine slow a cell down, never speed it up: the faster of
            # fp32's two measurements is its undisturbed speed, and a slow first one cannot inflate
            # every speedup (seen here: tabular-mlp fp32 at 45k then 68k samples/s in one run).
            merged.update({k: closing[0].get(k) for k in TIMING_KEYS})
    repeats = [r for r in later if not r.get("closing_baseline")]
    if not repeats:
        return merged
    every = [first, *sorted(repeats, key=lambda r: r.get("repeat") or 0)]
    merged["samples_per_s_repeats"] = [_sps(r) for r in every]
    if memory_basis(first) == "rss":  # each repeat is a process of its own: its RSS growth is another reading
        merged["cpu_rss_peak_bytes_repeats"] = [r.get("cpu_rss_peak_bytes") for r in every]
    timed = sorted((r for r in every if _sps(r) is not None), key=lambda r: _sps(r) or 0.0)
    if first.get("status") == "ok" and timed:
        median = timed[(len(timed) - 1) // 2]  # the lower median: a measured row, not an average of two
        merged.update({k: median.get(k) for k in TIMING_KEYS})
    return merged


def merge_repeats(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per cell: each repeat row (``repeat_of`` set) folded into the row of its cell's first
    measurement. Rows without repeats, and already merged rows (e.g. imported), come back unchanged."""
    repeats: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    firsts = []
    for r in rows:
        if r.get("repeat_of"):
            repeats[(r.get("run_id"), r["repeat_of"])].append(r)
        else:
            firsts.append(r)
    out = []
    for r in firsts:
        mine = repeats.pop((r.get("run_id"), r.get("cell_key")), None)
        out.append(_merge(r, mine) if mine else r)
    for orphans in repeats.values():  # their first measurement is missing (a partial import): keep what exists
        out.extend(orphans)
    return out


def speedup_range(row: dict[str, Any], base: dict[str, Any]) -> list[float] | None:
    """[min, max] of repeat r's throughput over fp32's repeat r, when at least two repeats pair up."""
    mine, ref = row.get("samples_per_s_repeats") or [], base.get("samples_per_s_repeats") or []
    ratios = [a / b for a, b in zip(mine, ref) if a and b]
    return [min(ratios), max(ratios)] if len(ratios) >= 2 else None


def speedup_noise(row: dict[str, Any], base: dict[str, Any]) -> float | None:
    """Relative noise of a speedup: both cells' within-cell noise and how far fp32 moved between its
    opening and closing measurements (independent errors add in quadrature). None where neither cell measured its own:
    fp32's drift is the difference of two measurements -- it widens an estimate, and stands for none (cells of 4-5
    timed steps had only it after two-block spreads stopped counting, :data:`~ampbench.measure.stats.MIN_NOISE_BLOCKS`)."""
    own = [v for v in (row.get("samples_per_s_noise"), base.get("samples_per_s_noise"))
           if isinstance(v, (int, float)) and math.isfinite(v)]
    drift = base.get("baseline_drift")
    if not own:
        return None
    return math.hypot(*own, *([drift] if isinstance(drift, (int, float)) and math.isfinite(drift) else []))


NOISE_NOT_MEASURED = "noise not measured"
"""How :func:`unmeasured_noise`'s reasons begin (the reports tell them from a noise judged by its start)."""


def unmeasured_noise(row: dict[str, Any]) -> str:
    """Why a row's speedup has no noise estimate (neither cell timed enough steps to measure one, no repeats), said
    where its gain or loss is then not claimed: without a noise estimate a 2.86x of a 3-step
    DDP cell on a busy CPU read as a gain while the same run's one-process cells of the same modes said 0.43x."""
    steps = row.get("steps")
    if isinstance(steps, int) and steps < MIN_NOISE_STEPS:
        return (f"{NOISE_NOT_MEASURED}: {steps} timed step{'s' if steps != 1 else ''} a cell, an estimate takes "
                f"{MIN_NOISE_STEPS} or more, or --repeats 3")
    return f"{NOISE_NOT_MEASURED}: --repeats 3 measures it"


EMULATED_MAX_SPEEDUP = 1.25
"""A mode whose math its device's probe says is emulated (a CPU without that dtype's instructions converts to fp32
and back) cannot run this much faster than fp32: beyond it a measured gain is a disturbed measurement, not a
speedup. Seen on an AVX2-only EPYC under load: "master-bf16 23x faster than fp32" and "amp-bf16 2.21x (repeats
1.41-2.21x)" where hand loops measured interleaved gave amp-bf16/fp32 = 0.29-0.31."""
BASELINE_DISAGREEMENT = 0.25
"""fp32's own measurements of one cell (its closing baseline, its repeats) further apart than this: the baseline
every speedup divides by was disturbed, so no gain is claimed against it."""


def emulated_math(row: dict[str, Any]) -> str | None:
    """Why a row's math is emulated on its device, from the probe its env recorded (None: native, or not known)."""
    if not str(row.get("device") or "").startswith("cpu"):
        return None
    mode = row.get("math_mode")
    if mode == "fp8":
        return "fp8 math is emulated on a CPU"
    hw = (row.get("env") or {}).get("cpu_half_hardware")
    if mode not in ("bf16", "fp16") or not isinstance(hw, dict) or hw.get(f"avx512_{mode}") or hw.get(f"amx_{mode}"):
        return None
    return (f"{mode} math is emulated on this CPU (no AVX512-{mode.upper()} or AMX-{mode.upper()}: converted to fp32, "
            "slower than fp32)")


def baseline_disagreement(base: dict[str, Any]) -> float | None:
    """How far apart fp32's own measurements of the cell are: its closing baseline's drift, or the spread of its
    repeats (highest / lowest - 1). None with one measurement."""
    terms = []
    drift = base.get("baseline_drift")
    if isinstance(drift, (int, float)) and math.isfinite(drift):
        terms.append(float(drift))
    reps = [v for v in base.get("samples_per_s_repeats") or [] if isinstance(v, (int, float)) and v > 0]
    if len(reps) >= 2:
        terms.append(max(reps) / min(reps) - 1.0)
    return max(terms) if terms else None


def speed_doubt(row: dict[str, Any], base: dict[str, Any] | None) -> str | None:
    """Why a measured gain of ``row`` over fp32 row ``base`` cannot be claimed, whatever its noise estimate says:
    it contradicts the device probe by a wide margin, or fp32's own measurements disagree. None otherwise."""
    if base is None or row is base:
        return None
    gain = _ratio(row.get("samples_per_s"), base.get("samples_per_s"))
    if gain is None or gain <= 1.0:
        return None
    emulated = emulated_math(row)
    if emulated and gain > EMULATED_MAX_SPEEDUP:
        return f"{gain:.2f}x contradicts the probe ({emulated}): the machine was disturbed while it ran"
    spread = baseline_disagreement(base)
    if spread is not None and spread > BASELINE_DISAGREEMENT:
        return f"fp32's own measurements disagree by {spread:.0%}: the baseline was disturbed"
    return None


def max_batch_ratio(row: dict[str, Any], base: dict[str, Any]) -> tuple[float | None, str | None]:
    """(max batch over fp32's, how it bounds the real ratio): ">=" where the row's search stopped at its limit (its
    real maximum is larger), "<=" where fp32's did; no ratio where both did -- two lower bounds say nothing of each
    other (tabular-mlp tiny on a CPU: every mode ">=65,536", shown as "(1.00x)", equal batches nobody measured)."""
    ratio = _ratio(row.get("max_batch"), base.get("max_batch"))
    mine, fp32s = bool(row.get("max_batch_limit_hit")), bool(base.get("max_batch_limit_hit"))
    if ratio is None or (mine and fp32s):
        return None, None
    return ratio, ">=" if mine else "<=" if fp32s else None


SPLIT_KEYS = ("weights_bytes", "grads_bytes", "optimizer_bytes", "activation_bytes")


def memory_basis(row: dict[str, Any]) -> str:
    """What the memory a row is compared by is, read from its ``memory_source``: "exact" (the split of weights,
    gradients, optimizer state and saved activations, counted tensor by tensor: CPU PyTorch cells), "rss" (growth
    of the process's resident memory: approximate, the allocator keeps and reuses freed memory; CPU cells with no
    tensor-level counters) or "peak" (a GPU allocator's or backend tracker's peak). Rows stored before the key
    existed: "exact" on a CPU, "peak" on a GPU."""
    source = str(row.get("memory_source") or "")
    if "rss" in source:
        return "rss"
    if source == "exact split" or (not source and str(row.get("device") or "").startswith("cpu")):
        return "exact"
    return "peak"


def rss_readings(row: dict[str, Any]) -> list[float]:
    """A row's RSS growth readings: one per measurement of the cell (its first and its ``--repeats``)."""
    reps = row.get("cpu_rss_peak_bytes_repeats")
    values = reps if isinstance(reps, list) else [row.get("cpu_rss_peak_bytes")]
    return [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]


def compared_memory(row: dict[str, Any]) -> float | None:
    """The memory a row is compared with fp32 by. GPU: the allocator's peak (exact, and what fills
    the card). CPU: the exact split (weights + grads + optimizer state + saved activations), because
    the RSS peak is approximate: seen here swinging from -100% to +97% vs fp32 for models whose
    exact bytes differ by under 10%. Cells with no exact split on a CPU (Keras: no autograd hooks) have
    their RSS growth, the median of their readings, labelled by :func:`memory_basis`."""
    basis = memory_basis(row)
    if basis == "rss":
        readings = sorted(rss_readings(row))
        return readings[(len(readings) - 1) // 2] if readings else None
    if basis == "exact":
        parts = [row.get(k) for k in SPLIT_KEYS]
        return float(sum(parts)) if all(isinstance(v, (int, float)) for v in parts) else None  # type: ignore[arg-type]
    v = row.get("peak_allocated_bytes")
    return float(v) if isinstance(v, (int, float)) else None


def memory_noise(row: dict[str, Any]) -> float | None:
    """How far the compared memory moves between measurements of the same cell: 0 for exact and allocator
    figures, the range of the RSS readings for RSS growth (None with one reading: its noise is unmeasured)."""
    if memory_basis(row) != "rss":
        return 0.0
    readings = rss_readings(row)
    return max(readings) - min(readings) if len(readings) >= 2 else None


def memory_saving(row: dict[str, Any], base: dict[str, Any]) -> tuple[float | None, str | None]:
    """(1 - memory / fp32's memory, why there is none). An RSS figure gives a saving only when the difference
    stands clear of both cells' measured noise (the range of their readings): one Keras model read +36%, +202%
    and +84% vs fp32 in three single-reading runs."""
    a, b = compared_memory(row), compared_memory(base)
    ratio = _ratio(a, b)
    if ratio is None or row is base:
        return (None if ratio is None else 0.0), None
    if "rss" in (memory_basis(row), memory_basis(base)):
        noise = [memory_noise(row), memory_noise(base)]
        if any(n is None for n in noise):
            return None, "one RSS reading per cell: its noise is unmeasured (--repeats 3 measures it)"
        floor = sum(n for n in noise if n is not None)
        if abs(a - b) <= floor:  # type: ignore[operator]
            return None, (f"RSS growth differs by {abs(a - b) / 2**20:,.1f} MiB, within the readings' noise "  # type: ignore[operator]
                          f"({floor / 2**20:,.1f} MiB)")
    return 1.0 - ratio, None


def _where(row: dict[str, Any], cell: CellId) -> tuple[Any, ...]:
    """A stored measurement's place: (run, device) and the cell."""
    return (*measured_on(row), cell)


def _ratio(a: Any, b: Any) -> float | None:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b and math.isfinite(a) and math.isfinite(b):
        return a / b
    return None


INCONCLUSIVE = "inconclusive"
"""The verdict of every row of a convergence run in which fp32 itself did not learn (:func:`no_learning`)."""
CONVERGED = ("parity", "baseline")
"""The verdicts of rows that train like fp32 (the fp32 row itself: the baseline)."""


def converge_tone(verdict: str | None) -> str:
    """How a table colours a convergence verdict: ``good`` (:data:`CONVERGED`), ``unsure`` (inconclusive: fp32 did not
    learn), ``bad`` (worse, diverged, no-baseline)."""
    return "good" if verdict in CONVERGED else "unsure" if verdict == INCONCLUSIVE else "bad"


def _final_losses(conv: dict[str, Any] | None) -> list[float]:
    """A convergence result's finite final losses, one per seed that ended finite."""
    return [x for x in (conv or {}).get("final_losses") or [] if x is not None and math.isfinite(x)]


def converge_verdict(row: dict[str, Any], base: dict[str, Any] | None) -> tuple[str | None, float | None]:
    """(verdict, tolerance): parity when the mean final loss is within fp32's seed spread, and nothing diverged;
    inconclusive when fp32's own loss did not fall by more than that tolerance (:func:`no_learning`)."""
    conv = row.get("converge")
    if not conv:
        return None, None
    if any(conv.get("diverged") or []):
        return "diverged", None
    bound = parity_bound(base)
    mine = _final_losses(conv)
    if bound is None or not mine:
        return "no-baseline", None
    mean_ref, tol = bound
    if no_learning(base) is not None:
        return INCONCLUSIVE, tol
    if row.get("precision") == BASELINE and not row.get("optimizer_state"):  # (fp32 with 8bit states: judged)
        return "baseline", tol
    return ("parity" if statistics.fmean(mine) <= mean_ref + tol else "worse"), tol


def below_fp32(row: dict[str, Any], base: dict[str, Any] | None) -> tuple[float, float, float] | None:
    """(the row's mean final loss, fp32's, the tolerance) where a parity row ended below fp32's loss by more than the
    tolerance -- not "within fp32's seed spread": it trained otherwise than fp32 (seen: a Keras CNN in pure-fp16,
    1.96 against fp32's 2.23 +- 0.045 after 30 steps, while pure-bf16 learned nothing); None otherwise."""
    bound = parity_bound(base)
    mine = _final_losses(row.get("converge"))
    if bound is None or not mine or row is base:
        return None
    mean = statistics.fmean(mine)
    return (mean, *bound) if mean < bound[0] - bound[1] else None


def parity_bound(base: dict[str, Any] | None) -> tuple[float, float] | None:
    """(fp32's mean final loss over its seeds, the tolerance within which another mode's is parity): this many
    seed-to-seed standard deviations, at least a share of the loss. None when fp32 has no convergence data or a seed
    of it diverged."""
    base_conv = base.get("converge") if base else None
    if not base_conv or any(base_conv.get("diverged") or []):
        return None
    ref = _final_losses(base_conv)
    if not ref:
        return None
    mean_ref = statistics.fmean(ref)
    spread = statistics.stdev(ref) if len(ref) > 1 else 0.0
    return mean_ref, max(CONVERGE_SPREAD_FACTOR * spread, CONVERGE_REL_FLOOR * abs(mean_ref), 1e-6)


def judged(row: dict[str, Any]) -> str | None:
    """The row's convergence verdict where it says something: none for an inconclusive one (the advice and the
    combinations take such a row as not checked, and say why)."""
    v = row.get("converge_verdict")
    return None if v == INCONCLUSIVE else v


def no_learning(base: dict[str, Any] | None) -> str | None:
    """Why fp32's convergence run cannot tell a mode that learns like fp32 from one that learns nothing -- its loss
    fell by no more than the parity tolerance over the run: its first loss (the untrained model's, before any update)
    against its mean final loss, seeds averaged; a mode that learned nothing ends near that first loss, and would be
    "within fp32's spread" (the first loss alone: a mean of the first steps would take in a fall that is over in a
    few of them) -- or None where it learned, or where the row has no curves to tell (rows from before curves were
    kept: judged as then). Seen: an hf:gpt2 at AdamW 1e-4 for 30 steps, 10.84 → 10.84 in fp32 and amp-bf16, called
    "converges like fp32"."""
    bound = parity_bound(base)
    conv = (base or {}).get("converge") or {}
    curves = [[float(x) for x in c if x is not None and math.isfinite(x)] for c in conv.get("losses") or []]
    heads = [c[0] for c in curves if c]
    if bound is None or not heads:
        return None
    final, tol = bound
    start = statistics.fmean(heads)
    if start - final > tol:
        return None
    steps = conv.get("steps")
    return (f"fp32's loss did not fall by more than the parity tolerance ({tol:.3g})"
            + (f" in {steps:,} steps" if isinstance(steps, int) else "")
            + f" ({start:.4g} → {final:.4g}): a mode that learned nothing would pass; raise --converge-steps")


def peak_understated(hw: list[dict[str, Any]], device_name: str | None) -> str | None:
    """Why this device's peaks are lower bounds, where ``ampbench hw`` measured a GEMM above its own peak (a CPU's
    clock read as nominal where no cpufreq says its turbo: this VM's bf16 GEMM ran 1.47x its peak) -- so an MFU
    against them is overstated, by as much (None: no probe says so)."""
    for probe in hw:
        if probe.get("device_name") != device_name:
            continue
        for g in probe.get("gemm") or []:
            tf, top = g.get("tflops"), g.get("peak_tflops")
            if isinstance(tf, (int, float)) and isinstance(top, (int, float)) and top > 0 and tf > top:
                return (f"ampbench hw measured a {g.get('math_mode')} GEMM at {tf / top:.2f}x this device's peak: "
                        "its peaks are lower bounds here, so no MFU against them is shown")
    return None


def best_gemm_tflops(hw: list[dict[str, Any]], device_name: str | None, math_mode: str | None) -> float | None:
    """Best measured GEMM TFLOP/s of ``ampbench hw`` probes of this device, for this math mode."""
    best = None
    for probe in hw:
        if probe.get("device_name") != device_name:
            continue
        for g in probe.get("gemm") or []:
            if g.get("math_mode") == math_mode and g.get("tflops"):
                best = max(best or 0.0, float(g["tflops"]))
    return best


CONV_SHARE_MAX = 0.1
"""expected_speedup_vs_fp32 is derived only for models with at most this share of convolution FLOPs."""


def gemm_ratio(hw: list[dict[str, Any]], device_name: str | None, math_mode: str | None) -> float | None:
    """The latest ``ampbench hw`` probe of this device: its measured GEMM speed in ``math_mode`` over
    fp32's, at the largest size it measured both at (a CPU's reference fp8 kernel: its first size only; None without a
    probe, or for fp32 itself)."""
    for probe in reversed(hw):
        if probe.get("device_name") == device_name and math_mode and math_mode != "fp32":
            r = (probe.get("gemm_vs_fp32") or {}).get(math_mode)
            if isinstance(r, (int, float)) and r > 0:
                return float(r)
    return None


def expected_speedup(g: float | None, conv_share: float | None, ratio: float | None) -> float | None:
    """What the matmuls alone would give (Amdahl): 1 / ((1 - g) + g / r), with g = fp32's mfu_vs_measured,
    the share of fp32's step its matmuls would take at the GEMM speed ``ampbench hw`` measured, and r that
    GEMM's measured speedup in the row's math. The rest of the step (norms, softmax, casts, optimizer)
    is taken as not faster. Square n x n GEMMs are the best case, so g is a floor and this an estimate.

    Only for a math whose GEMMs ``hw`` measured faster than fp32's (r > 1): emulated half math (r < 1)
    runs a model's small GEMMs and convolutions at speeds the square benchmark does not predict (seen:
    0.02x "expected" for an fp16 CNN measured at 0.16x); and only for models whose FLOPs are matmuls
    (conv_flops_share <= CONV_SHARE_MAX): bf16 convolutions gained 2.5x on a CPU whose bf16 GEMMs gain
    2.3x and whose fp32 convolutions run far below GEMM speed, where the formula said 1.10x. A wrong
    number is worse than none."""
    if ratio is None or ratio <= 1.0 or not isinstance(g, (int, float)) or not math.isfinite(g) or g <= 0:
        return None
    if not isinstance(conv_share, (int, float)) or conv_share > CONV_SHARE_MAX:
        return None
    g = min(float(g), 1.0)
    return 1.0 / ((1.0 - g) + g / ratio)


def derive(rows: list[dict[str, Any]], hw: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One row per cell (repeats merged), each with the *_vs_fp32 keys, mfu_vs_measured and the
    convergence verdict."""
    rows = merge_repeats(rows)
    ok = [r for r in rows if r.get("status") == "ok"]
    bases: dict[tuple[Any, ...], dict[str, Any]] = {}  # the ok fp32 (and tf32) row of each (run, device, cell)
    for r in ok:
        if r.get("precision") in (BASELINE, "tf32"):
            bases.setdefault(_where(r, CellId.of(r)), r)
    singles: dict[tuple[Any, ...], dict[str, Any]] = {}  # the world-size-1 cell of each precision and execution
    for r in ok:
        if not r.get("strategy") and isinstance(r.get("samples_per_s"), (int, float)):
            singles.setdefault(_where(r, CellId.of(r)), r)
    hw = hw or []

    def mfu_vs_measured(row: dict[str, Any]) -> float | None:
        return _ratio(row.get("achieved_tflops"), best_gemm_tflops(hw, row.get("device_name"), row.get("math_mode")))

    low_peaks: dict[Any, str | None] = {}
    out = []
    for r in rows:
        d = dict(r)
        cell = CellId.of(r)
        base = bases.get(_where(r, cell.baseline))
        ok = r.get("status") == "ok" and base is not None
        d["speedup_vs_fp32"] = _ratio(r.get("samples_per_s"), base.get("samples_per_s")) if ok else None
        tf32 = bases.get(_where(r, cell.tf32_twin)) if r.get("precision") not in (BASELINE, "tf32") else None
        d["speedup_vs_tf32"] = (_ratio(r.get("samples_per_s"), tf32.get("samples_per_s"))
                                if r.get("status") == "ok" and tf32 is not None else None)
        eager = bases.get(_where(r, cell.eager_baseline))
        single = singles.get(_where(r, cell.single_process))
        # CUDA only: each rank has a device of its own there; CPU ranks share the machine's cores (world size 2 on
        # 2 cores adds no compute: the one-process cell already used both), so the ratio would not be an efficiency
        gpu = str(r.get("device") or "").startswith("cuda")
        d["scaling_efficiency"] = (_ratio(r.get("samples_per_s"), (r.get("world_size") or 1) * single["samples_per_s"])
                                   if gpu and r.get("status") == "ok" and r.get("strategy") and single is not None else None)
        d["speedup_vs_fp32_eager"] = (_ratio(r.get("samples_per_s"), eager.get("samples_per_s"))
                                      if r.get("status") == "ok" and eager is not None else None)
        d["speedup_vs_fp32_range"] = speedup_range(r, base) if ok and r is not base else None
        d["speedup_vs_fp32_noise"] = speedup_noise(r, base) if ok and r is not base else None
        d["speedup_vs_fp32_doubt"] = speed_doubt(r, base) if ok else None
        d["memory_saving_vs_fp32"], d["memory_saving_vs_fp32_note"] = memory_saving(r, base) if ok else (None, None)
        d["memory_basis"] = memory_basis(r)
        d["max_batch_ratio_vs_fp32"], d["max_batch_ratio_bound"] = max_batch_ratio(r, base) if ok else (None, None)
        d["mfu_vs_measured"] = mfu_vs_measured(r)
        if r.get("device_name") not in low_peaks:  # (once per device: every row of it reads the same probes)
            low_peaks[r.get("device_name")] = peak_understated(hw, r.get("device_name"))
        d["mfu_note"] = low_peaks[r.get("device_name")] if r.get("mfu") is not None else None
        if d["mfu_note"]:  # (the stored figure stands in the store; what is read from it is not overstated)
            d["mfu"] = None
        d["expected_speedup_vs_fp32"] = expected_speedup(
            mfu_vs_measured(base), base.get("conv_flops_share"), gemm_ratio(hw, r.get("device_name"), r.get("math_mode"))
        ) if ok else None
        # (no time to fp32's loss where fp32 did not learn: its "target" is where every curve started)
        d.update(time_to_loss(r, base, parity_bound(base) if no_learning(base) is None else None))
        if r.get("status") == "ok":
            d["converge_verdict"], d["converge_tolerance"] = converge_verdict(r, base)
        else:  # a cell that diverged while converge was measured has that verdict; others have none
            diverged = r.get("status") == "diverged" and "converge" in (r.get("measures") or [])
            d["converge_verdict"], d["converge_tolerance"] = ("diverged" if diverged else None), None
        out.append(d)
    return out
