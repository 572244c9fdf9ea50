"""How long a run will take, said before it starts: a quick measurement, then arithmetic over the plan.

The measurement (:func:`measure_steps`, a job: in a child process when the run isolates its cells, so a model
that crashes the interpreter cannot take the run with it and the run's own process never holds a GPU context the
cells would see) builds each target once, and times one eager training
step per precision at the target's batch after one warm-up step, within a budget of seconds (precisions past it
are taken at the slowest time measured for the target). The plan's arithmetic (:func:`estimate`) counts the steps
each cell runs (first, memory and FLOP steps, warm-up, timed steps; the convergence seeds; inference passes at
a third of a training step) plus building the workload and, for isolated cells, starting a process (what the
measurement's own process took to start, with the runtime's warm-up before its first step: the framework's
:meth:`~ampbench.bench.scenario.CellVerbs.estimate_process`). Not counted, and said so: compiling, and what the
paragraphs below leave out.

A distributed cell (``--strategy``) pays more than its steps: torchrun, every rank's imports and process group, the
model built and wrapped under the strategy, the teardown -- 3.4 s a cell of mnist-cnn tiny in 2 ranks on a 2-core
Xeon, whose one-process cells took 0.14 s; a run of such cells estimated at "~1 s without starting ranks" took 11 s.
So each strategy and rank count of one machine is measured once, by a short cell of its own
(:func:`probe_ranks`: one warm-up and :data:`PROBE_STEPS` timed steps, the run's cheapest target): what such a cell
costs besides its steps, and its step under the strategy against the same step in one process (the ranks share the
host's cores, wait for each other's gradients). Every cell of that distribution is priced from it. Ranks on several
machines cannot be started from here: their start stays not counted, and said so.

The max-batch search (``--measure maxbatch``) runs trials at growing batches until one does not fit, each a few steps
(a fresh process each where the cells are isolated), then times the batch found: mnist-cnn tiny's search on a 2-core
Xeon took 3 minutes of a run estimated at "~0 s, not counted". The measurement runs the search's own trial
(:meth:`~ampbench.bench.scenario.CellVerbs.trial_peak`: its peak by the search's own gauge, timed) at the cell's batch
and at batches 4x apart while a trial stays short (:func:`search_points`), after every step is timed; the arithmetic
(:func:`search_seconds`) draws a line through the first and last trial's peak and time, runs the search's own code
(:func:`~ampbench.measure.maxbatch.search_max_batch`) against that line, and adds up the trials it would run and the
throughput at the batch it would find. A line drawn from batches far below the one found is a guess at the memory:
the header names the largest batch tried. Distributed cells' searches are not counted.

Each framework's cells are measured through its verbs (:meth:`~ampbench.bench.scenario.CellVerbs.estimate_steps`); a
framework whose cells run in a process of their own (Keras: a backend chosen before the import) is measured in a
fresh process per backend, whose start and import every such cell pays, and the first step of every model it builds
(where the framework traces and compiles its train function) is counted apart from the steps after it.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any

from ampbench import progress, seam
from ampbench.bench.cell_row import allowed_bytes
from ampbench.bench.jobs import launcher
from ampbench.bench.ranks import run_distributed
from ampbench.cells import CellSpec, extra_steps
from ampbench.execution.axes import strategy_label
from ampbench.launch import ChildProcess, Forked, Inline, Job
from ampbench.measure.maxbatch import Trial, search_max_batch
from ampbench.progress import duration

BUDGET_S = 15.0
"""Seconds the measurement may take before it stops timing more precisions."""
FORWARD_SHARE = 1 / 3
"""An inference forward pass as a share of a training step (forward + backward ~ 3 forwards)."""
PROBE_STEPS = 2
"""Timed steps of a rank probe (:func:`probe_ranks`), after its one warm-up step."""
SEARCH_TRIAL_S = 0.25
"""The measurement tries batches 4x apart while a max-batch trial takes less than this, or than twice the first
trial where that took longer (:func:`search_points`): a Keras trial builds its model afresh, ~0.4 s for a tiny MLP
on a 2-core Xeon whatever its batch, and its search was left not counted after one trial."""
MEASURING = "estimating the run's length"
"""What the measurement reports as it goes (with the target and precision it times)."""
TIMEOUT_S = 8 * BUDGET_S
"""The measurement's process is ended after this long (a model whose build or one step takes minutes): no figure,
and the header says why."""
SEARCH_BUDGET_S = 10.0
"""Seconds the max-batch trials of the measurement may take, on top of its steps' budget."""


def measure_steps(payload: dict[str, Any]) -> dict[str, Any]:
    """The job measuring the estimate's cells (``payload["cells"]``: [target, cell] pairs of one framework and
    backend), through their framework's verbs: per target, building the workload (``build_s``), its convergence
    length, and per precision a step after the first (``steps``; ``first``: the first, where the framework counts it
    apart), until ``budget_s`` has passed (a target measured once keeps its time for the rest); ``import_s``: what
    every fresh process of the framework pays (Keras: its backend's import)."""
    t_start = time.perf_counter()
    pairs = [(target, CellSpec.from_dict(d)) for target, d in payload["cells"]]
    budget = float(payload.get("budget_s", BUDGET_S))
    verbs = seam.of_cell(pairs[0][1]).cells().verbs(pairs[0][1])
    import_s = verbs.estimate_process(pairs[0][1])
    out: dict[str, dict[str, Any]] = {}
    emulated = {p for p, spec in {spec.precision: spec for _, spec in pairs}.items() if _emulated(spec)}
    for target, spec in sorted(pairs, key=lambda pair: pair[1].precision in emulated):  # (native modes first)
        entry = out.setdefault(target, {"steps": {}})
        if spec.precision in entry["steps"]:
            continue
        if spec.precision in emulated and entry["steps"]:
            # a mode this device emulates is timed only where its two steps fit what is left of the budget, guessed
            # as fp32's step x its GEMM slowdown here (BERT-large's amp-fp16 took 64 s a step on a CPU whose fp32 one
            # took 1.4-1.7 and whose fp16 GEMM ran 63x slower: guessed 90 s; the estimate ran for minutes, then said
            # nothing); else that guess stands for its step
            base = entry["steps"].get("fp32", min(entry["steps"].values()))  # (the slowdown is against fp32's GEMM)
            guess = base * gemm_slowdown(spec)
            if time.perf_counter() - t_start + 2 * guess > budget:
                entry.setdefault("guessed", {})[spec.precision] = guess
                continue
        if time.perf_counter() - t_start > budget and entry["steps"]:
            continue
        progress.report(MEASURING, detail=f"{spec.label} {spec.precision}")
        try:
            measured = verbs.estimate_steps(spec)
        except Exception:  # (a cell that cannot run says so when it runs; the estimate just lacks it)
            continue
        entry.setdefault("build_s", measured.build_s)
        entry.setdefault("length", measured.length)
        entry.setdefault("eval_batches", measured.eval_batches)
        entry["steps"][spec.precision] = measured.step_s
        if measured.batch_size is not None:
            entry.setdefault("batch", {})[spec.precision] = measured.batch_size
        if measured.first_s is not None:
            entry.setdefault("first", {})[spec.precision] = measured.first_s
    t_search = time.perf_counter()  # (after every step: a trial that runs out of a GPU's memory disturbs no timing)
    for target, spec in pairs:
        entry = out.get(target) or {}
        batch = (entry.get("batch") or {}).get(spec.precision)
        if "maxbatch" not in spec.measures or batch is None or spec.precision in entry.get("search", {}):
            continue
        if time.perf_counter() - t_search > float(payload.get("search_budget_s", SEARCH_BUDGET_S)):
            break
        progress.report(MEASURING, detail=f"{spec.label} {spec.precision}: max-batch trials")
        points = search_points(spec, verbs, batch)
        if points is not None:
            entry.setdefault("search", {})[spec.precision] = points
    return {"targets": out, "import_s": import_s, "work_s": time.perf_counter() - t_start - import_s}


def search_points(spec: CellSpec, verbs: Any, batch: int) -> dict[str, Any] | None:
    """The max-batch search's own trial (its peak by the search's gauge, and its seconds), at the cell's batch and
    at batches 4x apart (2x where 4x the peak would pass what a trial may hold; the trials stop where 2x would too)
    while a trial fits, takes under :data:`SEARCH_TRIAL_S` (or twice the first) and stays under the search's limit:
    ``points`` [[batch, peak or None, fits, seconds], ...] and ``allowed``, the bytes a trial may hold. None where a
    trial broke for a reason other than memory (the cell says why when it runs) or no limit applies."""
    limit = spec.measure.maxbatch_limit
    b, points, total = min(batch, limit), [], None
    while True:
        _release(spec)
        t0 = time.perf_counter()
        try:
            used, total = verbs.trial_peak(spec, b)
        except Exception as e:
            if not verbs.is_oom(e):
                return None
            used, fits = None, False
        else:
            allowed = allowed_bytes(spec, total)
            fits = allowed is not None and used is not None and used <= allowed
        points.append([b, used, fits, time.perf_counter() - t0])
        # (the next batch 4x, or 2x -- the search's own step -- where 4x this peak would pass what a trial may hold:
        # a peak grows less than the batch, so no trial here holds more than the limit; neither: the search's next
        # trial is its first miss, nothing more to learn)
        grow = next((k for k in (4, 2) if used is not None and k * used <= allowed), 0) if fits else 0
        if not grow or points[-1][3] >= max(SEARCH_TRIAL_S, 2 * points[0][3]) or b >= limit:
            break
        b = min(grow * b, limit)
    allowed = allowed_bytes(spec, total)
    return None if allowed is None else {"points": points, "allowed": allowed}


def _emulated(spec: CellSpec) -> bool:
    """A PyTorch cell whose mode runs on this device without its fast kernels (the support note says so: fp16 on a
    CPU without AVX512-FP16/AMX, fp8 through torchao on a CPU)."""
    if spec.framework != seam.DEFAULT:
        return False
    from ampbench.precision import supported  # lazy: torch

    return bool(supported(spec.precision, spec.device).note)


_SLOWDOWN: dict[tuple[str, str], float] = {}


def gemm_slowdown(spec: CellSpec, n: int = 256) -> float:
    """How many times slower an n x n GEMM runs in the mode's compute dtype than in fp32 on the cell's device (>= 1;
    ``ampbench hw``'s GEMM timing, briefly: once per dtype and device, well under a second)."""
    import torch  # lazy: torch

    from ampbench.measure.hw import gemm_tflops  # lazy: torch
    from ampbench.precision import get  # lazy: torch
    from ampbench.precision.fallbacks import DTYPE_NAMES  # lazy: torch

    math = DTYPE_NAMES.get(get(spec.precision).compute_dtype, "fp32")
    key = (math, spec.device)
    if key not in _SLOWDOWN:
        device = torch.device(spec.device)
        _SLOWDOWN[key] = max(1.0, gemm_tflops(n, "fp32", device, 0.02) / gemm_tflops(n, math, device, 0.02))
    return _SLOWDOWN[key]


def _target(spec: CellSpec) -> str:
    return f"{spec.label}|{spec.preset}|{spec.batch_size}"


@dataclass(frozen=True)
class Estimate:
    seconds: float
    not_counted: tuple[str, ...] = field(default=())
    probed: tuple[str, ...] = field(default=())
    """The distributions a short cell of their own measured (:func:`probe_ranks`): "ddp x2"."""
    trials_to: int | None = None
    """The largest batch a max-batch trial of the measurement ran (:func:`search_points`), where a search was
    estimated: the line the search is priced on was drawn up to it."""
    unmeasured: str = ""
    """Why there is no figure (the measurement did not finish in its time), where there is none: the header says it,
    the closing line names no expectation."""

    def text(self) -> str:
        if self.unmeasured:
            return f"not estimated: {self.unmeasured}"
        rest = f"; not counted: {', '.join(self.not_counted)}" if self.not_counted else ""
        probes = f", and a short {' and a short '.join(self.probed)} cell" if self.probed else ""
        trials = f", max-batch trials up to batch {self.trials_to:,}" if self.trials_to else ""
        return (f"expected to take ~{duration(self.seconds)} (estimate from one timed step per workload and "
                f"precision{trials}{probes}{rest})")

    def against(self) -> str:
        """How the run's closing line names it beside the time taken: " (expected ~58 s)", " (expected ~2 s without the
        max-batch search)"; nothing where there was no figure."""
        if self.unmeasured:
            return ""
        without = f" without {', '.join(self.not_counted)}" if self.not_counted else ""
        return f" (expected ~{duration(self.seconds)}{without})"


def cell_seconds(spec: CellSpec, target: dict[str, Any], start_s: float) -> float:
    """One cell's expected seconds from its target's measured step times (``first``: the compiling first step of
    each model built, where the framework compiles: Keras)."""
    times = target.get("steps") or {}
    if not times:
        return start_s
    step_s = times.get(spec.precision, (target.get("guessed") or {}).get(spec.precision, max(times.values())))
    firsts = target.get("first") or {}
    first_s = firsts.get(spec.precision, max(firsts.values())) if firsts else 0.0
    m = spec.measure
    n = 0.0
    if set(spec.measures) & {"throughput", "memory", "inference"}:
        n += extra_steps(spec.execution.compiled, spec.grad_accum) + max(0, m.warmup - 1) + m.steps
    if "converge" in spec.measures:
        per_seed = m.converge_steps if m.converge_steps is not None else int(target.get("length") or 0)
        # (and each seed's evaluation of the test split: forward passes at the training batch)
        n += (m.seeds or 1) * (per_seed + int(target.get("eval_batches") or 0) * FORWARD_SHARE)
    if "inference" in spec.measures:
        n += 2 * (max(m.steps, 10) + 3) * FORWARD_SHARE
    builds = 1 + ((m.seeds or 1) if "converge" in spec.measures else 0)
    return start_s + builds * (float(target.get("build_s") or 0.0) + first_s) + n * step_s


def distribution_of(spec: CellSpec) -> tuple[str, int] | None:
    """The distribution a rank probe measures for ``spec``: (strategy, ranks per machine) of a one-machine distributed
    cell; None for a one-process cell, and for ranks on several machines (not started from here)."""
    d = spec.distribution
    return (d.strategy, d.nproc) if d.strategy and d.nnodes == 1 else None


def distribution_text(key: tuple[str, int]) -> str:
    """A distribution as the reports name it ("ddp x2": :func:`~ampbench.execution.axes.strategy_label`)."""
    return strategy_label({"strategy": key[0], "world_size": key[1]})


def probe_ranks(spec: CellSpec, timeout: float | None = None) -> dict[str, Any] | None:
    """One short cell of ``spec``'s distribution (throughput only, eager, one warm-up and :data:`PROBE_STEPS` timed
    steps), as the run's cells are started (:func:`~ampbench.bench.ranks.run_distributed`): ``fixed_s``, what it
    cost besides its steps (torchrun, the ranks' imports and process group, the build under the strategy, the memory
    step's reading, the teardown), and ``step_s``, its step under the strategy (the slowest rank's median: the ranks
    step in lockstep). None when it did not run ok (its cells say why when they run)."""
    probe = spec.with_flat(steps=PROBE_STEPS, warmup=1, compile="off", cuda_graphs="off", repeat=0,
                           closing=False).measuring(("throughput",))
    key = (str(probe.strategy), probe.distribution.nproc)
    progress.report(MEASURING, detail=f"a short {distribution_text(key)} cell")
    t0 = time.perf_counter()
    row = run_distributed(probe, timeout)
    wall = time.perf_counter() - t0
    step_ms = row.get("step_ms_p50")
    if row.get("status") != "ok" or not isinstance(step_ms, (int, float)) or not math.isfinite(step_ms):
        return None
    n = extra_steps(False, probe.grad_accum) + PROBE_STEPS  # (cell_seconds' count: its one warm-up is the first step)
    return {"fixed_s": max(0.0, wall - n * step_ms / 1e3), "step_s": step_ms / 1e3}


def _in_ranks(target: dict[str, Any], probe: dict[str, Any], probed: dict[str, Any]) -> tuple[dict[str, Any], float] | None:
    """A target's one-process measurement as its distributed cells run, from the probe of their distribution
    (``probed``: the one-process measurement of the probe's own target): every step x the probe's step over the same
    step in one process; and what such a cell pays besides its build and steps (the probe's fixed cost less its own
    target's build, which the cell's own build replaces). None where the probe's step has no one-process twin."""
    base = (probed.get("steps") or {}).get(probe["precision"])
    if not base or not target.get("steps"):
        return None
    k = probe["step_s"] / base
    scaled = {**target, "steps": {p: v * k for p, v in target["steps"].items()},
              "guessed": {p: v * k for p, v in (target.get("guessed") or {}).items()}}
    return scaled, max(0.0, probe["fixed_s"] - float(probed.get("build_s") or 0.0))


def _line(x0: float, y0: float, x1: float, y1: float) -> Any:
    return lambda x: y0 + (y1 - y0) / (x1 - x0) * (x - x0) if x1 != x0 else y0 * x / x0


def _release(spec: CellSpec) -> None:
    """Before a trial in the measurement's process: what the models timed before it left in a GPU's caching allocator
    handed back (the trial reads the allocator's reserved peak, which would start at that cache: a flat peak). A
    framework other than PyTorch holds its GPU memory in its own backend: only the garbage is collected."""
    gc.collect()
    if not spec.device.startswith("cuda") or spec.framework != seam.DEFAULT:
        return
    import torch  # lazy: torch

    torch.cuda.empty_cache()


def search_seconds(spec: CellSpec, target: dict[str, Any], start_s: float, apart: bool = False) -> float | None:
    """The max-batch search's expected seconds from the measured trials (:func:`search_points`): the search's own
    code run against a line through the first and last trial's peak (fits while under ``allowed``; where the last
    trial ran out of memory without a peak, the fit ends halfway to it), each trial it would run priced on a line
    through their seconds plus ``start_s`` (a process of its own), then the throughput cell at the batch it would find
    (its steps at a step time grown as the trials' per sample). The trials fork from the run's fork server, started
    once by the run (:func:`~ampbench.bench.cell_row.search_after`); ``apart``: each trial is a process of its own,
    which builds its workload cold (:func:`_cold_build`). None without trials measured, or where their peak did not
    grow."""
    model = (target.get("search") or {}).get(spec.precision)
    step_s = (target.get("steps") or {}).get(spec.precision)
    if not model or not step_s:
        return None
    points, allowed = model["points"], float(model["allowed"])
    first, last = points[0], points[-1]
    seconds = _line(first[0], first[3], last[0], last[3])
    fit = [p for p in points if p[2]]
    if not first[2]:  # (the cell's own batch does not fit: the search bisects below it)
        def fits(b: int) -> bool:
            return first[1] is not None and first[1] * b / first[0] <= allowed
    elif last[1] is None and not last[2]:  # (out of memory without a peak: between the last fit and it)
        def fits(b: int) -> bool:
            return b <= (fit[-1][0] + last[0]) / 2
    elif first[1] is None or last[1] is None or last[1] <= first[1]:
        # (a peak that did not grow says nothing of where the search ends: a CPU's resident high-water mark, left by
        # the steps timed before, hides a small trial's growth -- doubling to the limit would be priced, for hours)
        return None
    else:
        peak = _line(first[0], first[1], last[0], last[1])

        def fits(b: int) -> bool:
            return bool(peak(b) <= allowed)

    result = search_max_batch(lambda b: Trial(b, fits(b)), start=first[0], limit=spec.measure.maxbatch_limit)
    cold = _cold_build(spec, target, first[3]) if apart else 0.0
    total = sum(max(seconds(t.batch_size), 0.0) + start_s + cold for t in result.trials)
    if result.max_batch:
        trial_steps = spec.measure.maxbatch_trial_steps
        per_sample = max(0.0, (last[3] - first[3]) / (last[0] - first[0]) / trial_steps) if last[0] != first[0] else \
            step_s / first[0]
        at = step_s + per_sample * (result.max_batch - first[0])
        m = spec.measure
        total += start_s + float(target.get("build_s") or 0.0) + (extra_steps(spec.execution.compiled, spec.grad_accum)
                                                                   + max(0, m.warmup - 1) + m.steps) * at
    return total


def _cold_build(spec: CellSpec, target: dict[str, Any], trial_s: float) -> float:
    """What a max-batch trial in a process of its own pays beyond the trial the measurement timed at the cell's batch
    (``trial_s``): its workload built cold -- the target's ``build_s``, the first build in the measurement's process
    -- less the warm build that trial held (its seconds beyond its steps: the first step, then the step timed). A
    Keras MLP's trial took 0.4 s in the measurement's process and 2.5 s in a process of its own (2.1 s of it the
    build): its search of 14 trials a precision was estimated at ~20 s for the run and took 78."""
    step_s = float((target.get("steps") or {}).get(spec.precision) or 0.0)
    first_s = float((target.get("first") or {}).get(spec.precision) or step_s)
    steps = first_s + max(0, spec.measure.maxbatch_trial_steps - 1) * step_s
    return max(0.0, float(target.get("build_s") or 0.0) - max(0.0, trial_s - steps))


def estimate(cells: list[CellSpec], measured: dict[str, Any], start_s: float,
             own: dict[tuple[str, str | None], dict[str, Any]] | None = None,
             ranks: dict[tuple[str, int], dict[str, Any]] | None = None, isolate: bool = False) -> Estimate | None:
    """The plan's expected seconds (None when nothing could be measured). ``measured``: the measurement of the cells
    that run in the run's way (``start_s``: a child's start, when isolated); ``own``: per (framework, backend) whose
    cells run in a process of their own, its measurement with ``start_s`` (a fresh process and the backend's import:
    what each such cell pays); ``ranks``: per distribution (:func:`distribution_of`), its probe (:func:`probe_ranks`,
    with the ``target`` and ``precision`` it ran); ``isolate``: the run isolates its cells (their max-batch trials then
    run each in a process of its own, as they do on a GPU and for a framework whose cells have their own)."""
    targets = measured.get("targets") or {}
    own = own or {}
    ranks = ranks or {}
    if not any(t.get("steps") for t in targets.values()) and not any(
            t.get("steps") for k in own.values() for t in (k.get("targets") or {}).values()):
        return None
    total = 0.0
    unmeasured = 0
    unstarted = unsearched = estimated_search = False
    trials_to: list[int] = []
    guessed: set[str] = set()
    for c in cells:
        if (c.framework, c.backend) not in own and not seam.of_cell(c).own_process:
            target, started = targets.get(_target(c), {}), start_s
        else:
            k = own.get((c.framework, c.backend)) or {}
            target, started = (k.get("targets") or {}).get(_target(c)) or {}, float(k.get("start_s") or 0.0)
            if not target.get("steps"):
                unmeasured += 1
                continue
        if c.strategy:
            probe = ranks.get(distribution_of(c)) if distribution_of(c) else None
            priced = _in_ranks(target, probe, targets.get(probe["target"], {})) if probe else None
            if priced is None:
                unstarted = True
            else:
                target, started = priced
        total += cell_seconds(c, target, started)
        if "maxbatch" in c.measures:
            apart = isolate or seam.of_cell(c).own_process or c.device.startswith("cuda")
            searched = None if c.strategy else search_seconds(c, target, started, apart)
            if searched is None:
                unsearched = True
            else:
                total += searched
                estimated_search = True
                trials_to.append(max(p[0] for p in target["search"][c.precision]["points"]))
        if c.precision in (target.get("guessed") or {}):
            guessed.add(c.precision)
    left = [f"{unmeasured} cell{'s' if unmeasured > 1 else ''} of another framework (not measured)"] if unmeasured else []
    if unsearched:
        left.append("the max-batch search" + (" of some cells" if estimated_search else ""))
    if any(c.execution.compiled for c in cells):
        left.append("compiling")
    if unstarted:
        left.append("starting ranks")
    if any(c.optimizer_state for c in cells):  # (each state cell is timed as its mode's optimizer as built)
        left.append("torchao compiling its optimizer states' update")
    if guessed:
        left.append(f"a timed step of {', '.join(sorted(guessed))} (emulated here: guessed as fp32's x their GEMM "
                    "slowdown)")
    probed = tuple(distribution_text(k) for k in ranks if any(distribution_of(c) == k for c in cells))
    return Estimate(total if math.isfinite(total) else 0.0, tuple(left), probed, max(trials_to, default=None))


def _apart(launch: ChildProcess | Forked, job: Job) -> tuple[dict[str, Any], float]:
    """``job`` run in the kind of process the cells get, what that process cost besides the job's work (its start,
    imports and end): what each cell pays -- not the fork server's own start (before ``t0``), paid once by the run
    (the server then serves the cells and their max-batch trials)."""
    started = launch.start(job) if isinstance(launch, Forked) else None
    t0 = time.perf_counter()
    k = started.wait()[0] if started is not None else launch.run(job)
    return k, max(0.0, time.perf_counter() - t0 - float(k.get("work_s") or 0.0))


ENV_OFF = "AMPBENCH_NO_ESTIMATE"
"""Set (to anything but empty) to skip the estimate: the test suite runs hundreds of plans and times none."""


def run_estimate(config: Any, isolate: bool, cells: list[CellSpec] | None = None) -> Estimate | None:
    """Measure and estimate ``config``'s run (or those of its ``cells`` still to run); None when it cannot be
    measured or is switched off (``AMPBENCH_NO_ESTIMATE``). Isolated runs measure in a child process, as their
    cells run (a model that crashes the interpreter must not take the run with it; on a GPU the run's own process
    must hold no GPU context the cells would see), and that child's start-up is what each cell pays too."""

    if os.environ.get(ENV_OFF):
        return None
    cells = config.cells() if cells is None else cells
    if not cells:
        return Estimate(0.0)
    groups: dict[tuple[str, str | None], dict[str, list[Any]]] = {}
    first: dict[tuple[str, str | None], CellSpec] = {}  # (the cell whose launcher measures its group)
    for c in cells:  # one eager one-process cell per (target, precision): what is timed
        plain = c.with_flat(strategy=None, compile="off", cuda_graphs="off", repeat=0, closing=False)
        groups.setdefault((c.framework, c.backend), {}).setdefault(f"{_target(c)}|{c.precision}",
                                                                   [_target(c), plain.to_dict()])
        first.setdefault((c.framework, c.backend), plain)
    r: dict[str, Any] = {"targets": {}}
    start_s = 0.0
    own: dict[tuple[str, str | None], dict[str, Any]] = {}
    seen: list[progress.Event] = []

    def follow(event: progress.Event) -> None:  # (the last thing measured: said where the measurement ran out of time)
        seen.append(event)
        progress.forward(event)

    for (name, backend), pairs in groups.items():
        fw = seam.get(name)
        apart = isolate or fw.own_process  # (own_process: a process of its own, the backend chosen before the import)
        job = Job(f"{__name__}:measure_steps", {"cells": list(pairs.values()), "budget_s": BUDGET_S})
        if apart:
            k, took = _apart(dataclasses.replace(launcher(first[(name, backend)], TIMEOUT_S), on_progress=follow), job)
        else:
            k, took = Inline().run(job), 0.0
        if k.get("_killed") and str(k.get("_failed", "")).startswith("timed out"):
            # (a step that takes minutes -- fp8-tensorwise on an AMX Xeon, whose per-tensor fp8 matmul is a
            # reference kernel at 0.1 GFLOP/s -- was killed here, and the run started without a word of how long)
            at = next((e.detail for e in reversed(seen) if e.what == MEASURING and e.detail), "")
            return Estimate(0.0, unmeasured=f"its measurement did not finish in {TIMEOUT_S:.0f} s"
                                            + (f" (it was timing {at})" if at else ""))
        if fw.own_process:
            if "_failed" not in k:
                own[(name, backend)] = {**k, "start_s": took}
            continue
        if "_failed" in k:
            return None
        r, start_s = {"targets": {**r["targets"], **k["targets"]}}, took
    return estimate(cells, r, start_s, own, _probe_all(cells, r["targets"]), isolate)


def _probe_all(cells: list[CellSpec], targets: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    """A probe per distribution of the plan (:func:`probe_ranks`), each on its cell whose one-process step measured
    fastest (the cheapest probe)."""
    def step(c: CellSpec) -> float:
        return float((targets.get(_target(c), {}).get("steps") or {}).get(c.precision) or math.inf)

    out: dict[tuple[str, int], dict[str, Any]] = {}
    for key in dict.fromkeys(k for k in map(distribution_of, cells) if k):
        spec = min((c for c in cells if distribution_of(c) == key), key=step)
        if math.isfinite(step(spec)):
            probe = probe_ranks(spec, TIMEOUT_S)
            if probe is not None:
                out[key] = {**probe, "target": _target(spec), "precision": spec.precision}
    return out
