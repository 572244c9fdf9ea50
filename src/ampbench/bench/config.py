"""What a run measures: :class:`RunConfig`, from typed sections, checked once at construction.

Sections: the targets (registered workloads at their presets, or the user's model), the data the user described
(:class:`~ampbench.cells.DataOptions`), the recipes' options, how to measure, the axes (precisions, batch
sizes, repeats, executions, strategies) and how to launch (kept out of the run's identity). Python code and the
command line build the same object: :meth:`RunConfig.from_strings` parses what the CLI was given, and every check
-- of one option or of options together -- lives in the sections' and the config's ``__post_init__``, so a config
the CLI would refuse cannot be built at all. :meth:`RunConfig.cells` expands it into cells
(:class:`~ampbench.cells.CellSpec`); :meth:`RunConfig.identity` is what ``--resume`` matches.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from dataclasses import fields as dc_fields
from typing import Any

import torch

from ampbench import seam
from ampbench.bench.suites import (
    EntrySettings,
    check_preset,
    default_steps,
    native_only_entries,
    suite_entries,
    suite_settings,
)
from ampbench.cells import (
    DEFAULT,
    FRAMEWORK_ENTRIES,
    SECTION,
    CellSpec,
    DataOptions,
    Distribution,
    LaunchOptions,
    MeasureOptions,
    RecipeOptions,
    converge_work,
    flat,
    route,
    with_,
)
from ampbench.command_options import RunOptions, check_nproc_given
from ampbench.distributed.strategy import REDUCE_DTYPES, STRATEGIES
from ampbench.errors import AmpbenchError
from ampbench.execution import Execution, executions, parse_axis
from ampbench.launch import check_nodes
from ampbench.measure.env import resolve_device
from ampbench.paths import check_data_dir
from ampbench.precision import get, is_fp8, list_precisions, resolve, supported
from ampbench.precision.fp8 import check_applies
from ampbench.precision.optimizer_state import check_name as check_state
from ampbench.precision.optimizer_state import effective as effective_state
from ampbench.precision.optimizer_state import missing_for as optimizer_state_missing
from ampbench.precision.optimizer_state import natural as natural_state
from ampbench.precision.optimizer_state import refusal as state_refusal
from ampbench.precision.support import Support
from ampbench.seam import Options
from ampbench.values import (
    check_grad_accum,
    parse_batch_sizes,
    parse_grad_accums,
    parse_list,
    parse_unique,
    says_all,
)
from ampbench.workloads import get_spec
from ampbench.workloads.registry import check_options
from ampbench.workloads.user import check_preset as check_model_preset

BASELINE = "fp32"
REPEATED_MEASURES = ("throughput", "memory")
"""What a repeat of a cell measures again (max batch, convergence and inference are measured once)."""
FP8_REFERENCES = ("fp32", "amp-bf16")
"""Compiled beside fp8 cells that compile by default: fp8's speedup and its comparison with bf16 at one execution."""


# -- the run's own sections -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Targets:
    """What is measured: registered workloads (or hf:/timm: adapters) at their presets, or the user's model."""

    workloads: tuple[str, ...] = ()
    """Registered names or adapters; empty with ``model``."""
    presets: tuple[str, ...] = ()
    """Preset per workload (same length as workloads; one with ``model``)."""
    model: str | None = None
    """User factory ``file.py:fn`` / ``pkg.mod:fn``."""
    native_only: tuple[str, ...] = field(default=(), metadata={"run": DEFAULT})
    """'workload:preset' entries that run only fp32 and the modes the device has math hardware for."""
    backend: str | None = field(default=None, metadata={"run": FRAMEWORK_ENTRIES})
    """The backend the targets of a framework with backends run on (the run's ``--<framework>-backend``); None when
    the run has no such target. Resolved at construction: without the option, the framework's default."""
    model_framework: str = field(default=seam.DEFAULT, metadata={"run": FRAMEWORK_ENTRIES})
    """The framework of the --model (:func:`ampbench.seam.of_model`)."""
    settings: tuple[EntrySettings, ...] = field(default=(), metadata={"run": DEFAULT})
    """The default suite's: per workload (in order), the batch (sized to the device's memory), layout and options its
    entry sets where the user said nothing (:mod:`ampbench.bench.suites`); empty: none."""

    def __post_init__(self) -> None:
        if self.model is not None and self.workloads:
            raise AmpbenchError("give --workloads or --model, not both")
        if len(self.presets) != (1 if self.model is not None else len(self.workloads)):
            raise AmpbenchError("a preset per workload (one with --model)")
        if self.settings and len(self.settings) != len(self.workloads):
            raise AmpbenchError("the suite's settings: one per workload")
        for p in self.presets:
            check_preset(p)
        owners = {self.framework_of(w).name for w, _ in self.pairs}
        object.__setattr__(self, "backend", seam.resolve_backend(self.backend, owners,
                                                                       "these targets are PyTorch models"))

    def framework_of(self, workload: str | None) -> seam.Framework:
        """The framework of a target (``None``: the --model)."""
        return seam.get(self.model_framework) if workload is None else seam.of_workload(workload)

    def backend_of(self, workload: str | None) -> str | None:
        """The backend of a target (None: its framework has none)."""
        return self.backend if self.framework_of(workload).backends else None

    def entries(self) -> dict[str, Any]:
        """What the frameworks add to the run's identity: ``<framework>_backend`` (and ``<framework>_model`` when the
        --model is that framework's), as runs have always stored it."""
        out: dict[str, Any] = {}
        for fw in seam.all_frameworks():
            if fw.name == seam.DEFAULT:
                continue
            if self.backend is not None and fw.backends and any(self.framework_of(w) is fw for w, _ in self.pairs):
                out[seam.backend_key(fw.name)] = self.backend
            if self.model_framework == fw.name:
                out[f"{fw.name}_model"] = True
        return out

    def settings_of(self, index: int) -> EntrySettings:
        """What the suite sets for target ``index`` (nothing for a target the user named)."""
        return self.settings[index] if self.settings else EntrySettings()

    @property
    def pairs(self) -> list[tuple[str | None, str]]:
        """(workload, preset) of each target; (None, preset) for the user's model."""
        return [(None, self.presets[0])] if self.model is not None else list(zip(self.workloads, self.presets))

    @property
    def adapters(self) -> bool:
        return any(":" in w for w in self.workloads)


@dataclass(frozen=True)
class Axes:
    """What each target is measured over, every combination a cell: precisions x batch sizes x executions x
    distributions, repeated ``repeats`` times."""

    precisions: tuple[str, ...] = ()
    batch_sizes: tuple[int | None, ...] = (None,)
    repeats: int = field(default=1, metadata={"run": DEFAULT})
    """Throughput measurements per cell, interleaved with the other precisions (repeat r of every mode, then r+1)."""
    executions: tuple[Execution, ...] = field(default=(Execution(),), metadata={"run": DEFAULT})
    """Points on the execution axes (--compile x --memory-format x --cuda-graphs), each with every precision."""
    strategies: tuple[str | None, ...] = field(default=(None,), metadata={"run": DEFAULT})
    """None (one process: the world-size-1 baseline) and/or ddp, fsdp (--strategy, over --nproc-per-node ranks)."""
    nproc: int = field(default=1, metadata={"run": with_("strategies")})
    nnodes: int = field(default=1, metadata={"run": DEFAULT})
    """Machines the distributed cells span (--nnodes; node 0 runs the one-process cells and stores the rows)."""
    grad_reduce_dtypes: tuple[str | None, ...] = field(default=(None,), metadata={"run": with_("strategies")})
    """Distributed cells: each gradient reduce dtype asked for (--grad-reduce-dtype; None: the gradients' own)."""
    fp8_compile: bool = field(default=False, metadata={"run": DEFAULT})
    """fp8 on CUDA without --compile: the fp8 cells run compiled (torchao's float8 is built to be compiled: eager, its
    casts and scales are separate kernels), each beside compiled fp32 and amp-bf16 references so every ratio still
    compares one execution; the other modes run as the executions say."""
    optimizer_states: tuple[str | None, ...] = field(default=(None,), metadata={"run": DEFAULT})
    """None (the optimizer as the workload builds it: every mode's baseline) and the states --optimizer-state asked
    for, as given; each precision runs those that apply to it (:meth:`RunConfig.states_of`)."""
    grad_accums: tuple[int, ...] = field(default=(1,), metadata={"run": DEFAULT})
    """Micro-batches of each batch size a cell's step accumulates (--grad-accum; 1: none), each with every
    precision, as the batch sizes are."""

    def __post_init__(self) -> None:
        if not self.precisions:
            raise AmpbenchError("no precision to run: give --precisions")
        for state in self.optimizer_states:
            if state is not None:
                check_state(state)
        if self.repeats < 1:
            raise AmpbenchError(f"--repeats must be >= 1, got {self.repeats}")
        for n in self.grad_accums or ("",):
            check_grad_accum(n)
        if any(b is not None and b < 1 for b in self.batch_sizes):
            raise AmpbenchError(f"--batch-size must be >= 1, got {','.join(str(b) for b in self.batch_sizes)}")
        bad = [s for s in self.strategies if s is not None and s not in STRATEGIES]
        if bad:
            raise AmpbenchError(f"--strategy {','.join(map(str, bad))}: choose from {', '.join(STRATEGIES)}")
        if self.nproc < 1:
            raise AmpbenchError(f"--nproc-per-node must be >= 1 (got {self.nproc})")
        if self.strategies == (None,) and self.grad_reduce_dtypes != (None,):
            raise AmpbenchError("--grad-reduce-dtype applies to distributed cells: give --strategy ddp,fsdp too")
        wrong = [r for r in self.grad_reduce_dtypes if r is not None and r not in REDUCE_DTYPES]
        if wrong:
            raise AmpbenchError(f"--grad-reduce-dtype {','.join(map(str, wrong))}: choose from {', '.join(REDUCE_DTYPES)}")

    @property
    def distributed(self) -> bool:
        return self.strategies != (None,)

    def distributions(self) -> list[Distribution]:
        """The distributions of the cells: one process first (the scaling baseline), then each strategy x reduce dtype."""
        out: list[Distribution] = []
        for strategy in self.strategies:
            if strategy is None:
                out.append(Distribution())
            else:
                out.extend(Distribution(strategy, self.nproc, self.nnodes, r) for r in self.grad_reduce_dtypes)
        return out


# -- the run ----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunConfig:
    """The options of ``ampbench run``, checked (also the resume identity of a run, launch options aside)."""

    device: str
    targets: Targets = field(default_factory=Targets, metadata=SECTION)
    data: DataOptions = field(default_factory=DataOptions, metadata=SECTION)
    recipe: RecipeOptions = field(default_factory=RecipeOptions, metadata=SECTION)
    measure: MeasureOptions = field(default_factory=MeasureOptions, metadata=SECTION)
    axes: Axes = field(default_factory=Axes, metadata=SECTION)
    launch: LaunchOptions = field(default_factory=LaunchOptions, compare=False)

    def __post_init__(self) -> None:
        resolved = canonical_precisions(self.axes.precisions)  # (the one normalisation of --precisions)
        if resolved != self.axes.precisions:
            object.__setattr__(self, "axes", replace(self.axes, precisions=resolved))
        if self.measure.memory_margin is None:  # (the device's, resolved once: the identity holds the number)
            object.__setattr__(self, "measure", replace(self.measure, memory_margin=self.measure.margin_on(self.device)))
        self._check_data()
        if "maxbatch" in self.measure.measures and not self.device.startswith("cuda") and self.measure.memory_budget is None:
            raise AmpbenchError("--measure maxbatch on CPU needs --memory-budget (e.g. 2GiB): "
                                "a real out-of-memory would take the machine down")
        for point in self.axes.executions:
            point.check_device(self.device)
        check_applies(self.axes.precisions, self.recipe.fp8_given)
        self._check_distributed()
        self._check_frameworks()
        self._check_optimizer_states()
        accumulated = [n for n in self.axes.grad_accums if n != 1]
        if accumulated and "converge" in self.measure.measures:
            raise AmpbenchError(f"--grad-accum {accumulated[0]} times accumulated steps; --measure converge trains "
                                "at the batch size alone: leave converge out (ampbench train --grad-accum trains to "
                                "convergence with it)")

    def _check_optimizer_states(self) -> None:
        """Each state asked for applies to at least one of the run's modes (else one line: what it applies to);
        torchao is there when one is measured."""
        for state in self.given_states:
            if not any(effective_state(p, state) is None or state_refusal(p, state, self.device) is None
                       for p in self.axes.precisions):
                why = state_refusal(self.axes.precisions[-1], state, self.device)
                raise AmpbenchError(f"--optimizer-state {state} applies to none of --precisions "
                                    f"{','.join(self.axes.precisions)}: {why}")
        problem = optimizer_state_missing(self.axes.precisions, self.given_states)
        if problem:
            raise AmpbenchError(f"--optimizer-state {','.join(self.given_states)}: {problem}")

    @property
    def given_states(self) -> tuple[str, ...]:
        """The states --optimizer-state asked for (none: the optimizers as built)."""
        return tuple(s for s in self.axes.optimizer_states if s is not None)

    def states_of(self, precision: str) -> tuple[str | None, ...]:
        """The optimizer states ``precision`` runs in: the optimizer as built (None), then each state asked for that
        is not the mode's own and applies to it (the others: :meth:`left_out`)."""
        out: list[str | None] = [None]
        for state in self.given_states:
            s = effective_state(precision, state)
            if s is not None and s not in out and state_refusal(precision, s, self.device) is None:
                out.append(s)
        return tuple(out)

    def _check_frameworks(self) -> None:
        """A target of another framework runs under its own recipes: each checks the modes and refuses the options it
        cannot take (execution axes, strategies, loss-scale choice, real-data readers, workload options) by name."""
        t = self.targets
        given = Options(execution=self.axes.executions != (Execution(),), strategy=self.axes.distributed,
                        loss_scale=self.recipe.loss_scale is not None, data_dir=self.data.data_dir is not None,
                        option=bool(self.data.options), optimizer_state=bool(self.given_states),
                        grad_accum=self.axes.grad_accums != (1,))
        seen: set[str] = set()
        for workload, _ in t.pairs:
            fw = t.framework_of(workload)
            if fw.name != seam.DEFAULT and fw.name not in seen:
                seen.add(fw.name)
                fw.check(workload if workload is not None else f"--model {t.model}", self.axes.precisions, given)

    def _check_data(self) -> None:
        """The data options apply where they can: --model and the adapters describe their data, registered workloads
        have their own; --batches/--loss need --model; --data-dir is one directory for one target."""
        t, d = self.targets, self.data
        d.check_targets(t.workloads, t.model)
        if d.data_dir is not None:
            if t.model is None and len(t.workloads) != 1:
                raise AmpbenchError("--data-dir applies to one workload: give exactly one in --workloads (or use --model)")
            check_data_dir(d.data_dir)
        self._check_workload_options()

    def _check_workload_options(self) -> None:
        """Every named workload exists and takes the -o keys (adapters check theirs when built)."""

        for k, (name, preset) in enumerate(zip(self.targets.workloads, self.targets.presets)):
            if ":" not in name and self.targets.framework_of(name).name == seam.DEFAULT:
                check_options(preset, get_spec(name).options(), dict(self.data_of(k).options), name)

    def data_of(self, index: int) -> DataOptions:
        """The data options of target ``index``: the run's, with its suite entry's workload options where the user
        gave none of the same name."""
        return self.data.with_defaults(self.targets.settings_of(index).options)

    def _check_distributed(self) -> None:
        a, launch = self.axes, self.launch
        if a.distributed and self.device.startswith("cuda") and a.nproc > torch.cuda.device_count():
            raise AmpbenchError(f"--nproc-per-node {a.nproc}: this machine has {torch.cuda.device_count()} CUDA "
                                "device(s), one rank per device")
        if a.distributed and "maxbatch" in self.measure.measures and a.nnodes > 1:
            raise AmpbenchError("--measure maxbatch with --nnodes > 1 is not supported: each machine would search on "
                                "what its own ranks saw; run maxbatch on one machine")
        check_nodes([s for s in a.strategies if s] or None, a.nnodes, launch.node_rank, launch.endpoint)

    @classmethod
    def of(cls, *, device: str, extra: dict[str, Any] | None = None, **flat_fields: Any) -> RunConfig:
        """A config from its flat fields, as its identity names them (``RunConfig.of(device="cpu", workloads=("bert",),
        presets=("tiny",), precisions=("fp32",), steps=3)``); ``extra``: the launch options."""

        sections = {f.name: f.default_factory for f in dc_fields(cls) if f.metadata.get("section")}
        return cls(device=device, **route(sections, flat_fields, "RunConfig.of()"),  # type: ignore[arg-type]
                   launch=LaunchOptions(**(extra or {})))

    # -- from the command line -----------------------------------------------------------------------------------------
    @classmethod
    def from_strings(cls, **options: Any) -> RunConfig:
        """The config of ``ampbench run``'s options given as keywords, same names (:class:`RunOptions` fields)."""
        return cls.from_options(RunOptions.of(**options))

    @classmethod
    def from_options(cls, options: RunOptions) -> RunConfig:
        """The config the command line's options say: parsed here, checked by the sections and the config."""
        t, m, r, x = options.targets, options.measure, options.recipe, options.torch
        dev = str(resolve_device(m.device))
        names = parse_unique(t.workloads, "workloads")
        if t.model is not None and names:
            raise AmpbenchError("give --workloads or --model, not both")
        data = options.data.parsed()
        entries = suite_entries(names, t.preset, dev) if t.model is None else ()
        wl_names, presets = tuple(e.workload for e in entries), tuple(e.preset for e in entries)
        if t.model is not None:
            presets = (t.preset or "small",)
        memory_gib = torch.cuda.get_device_properties(torch.device(dev)).total_memory / 2**30 \
            if dev.startswith("cuda") and entries else None
        settings = suite_settings(entries, memory_gib, batch_given=m.batch_size is not None,
                                  format_given=x.memory_format is not None)
        measured = m.parsed(default_steps(dev))
        sizes = parse_batch_sizes(m.batch_size)
        # (the names as given: RunConfig normalises them, once)
        modes = given_precisions(r.precisions, dev)
        canonical_precisions(modes)  # (an unknown name: one line now, before --model's file is imported and built)
        points = executions(parse_axis(x.compile, "compile"), parse_axis(x.memory_format, "memory_format"),
                            parse_axis(x.cuda_graphs, "cuda_graphs"), parse_axis(x.checkpointing, "checkpointing"))
        strategies = (None, *dict.fromkeys(parse_list(x.strategy, "strategy"))) if x.strategy is not None else (None,)
        check_nproc_given(x.strategy, x.nproc_per_node)
        reduces = (tuple(dict.fromkeys(parse_list(x.grad_reduce_dtype, "grad-reduce-dtype"))) if x.grad_reduce_dtype
                   else (None,))
        owners = [seam.of_workload(w) for w in wl_names]
        model_framework = seam.DEFAULT
        if t.model is not None:
            model_framework = seam.of_model(t.model, t.preset or "small", m.seed, t.backend).name
            owners.append(seam.get(model_framework))
            if model_framework == seam.DEFAULT:
                check_model_preset(t.model, t.preset, m.seed)  # (only a preset the user gave: "small" is just the label)
        if r.precisions is None or says_all(parse_list(r.precisions, "precisions")):
            # the default modes (or all) of a run with another framework's target: those it has
            for fw in {f.name: f for f in owners if f.name != seam.DEFAULT}.values():
                modes = fw.precisions(modes)
        return cls(
            device=dev,
            targets=Targets(wl_names, presets, t.model,
                            native_only_entries(names, t.preset, r.precisions is not None, dev), t.backend,
                            model_framework, settings),
            data=data,
            recipe=r.parsed(),
            measure=measured,
            axes=Axes(modes, sizes, m.repeats, points, strategies, x.nproc_per_node if x.strategy is not None else 1,
                      x.nnodes, reduces, fp8_compiles_by_default(x.compile is not None, dev, modes),
                      (None, *dict.fromkeys(parse_list(r.optimizer_state, "optimizer-state"))),
                      parse_grad_accums(m.grad_accum)),
            launch=options.launch.parsed(x.node_rank, x.rdzv_endpoint))

    # -- what it means ---------------------------------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        """What ``--resume`` matches: every field but how cells are launched, left out as its ``run`` rule says (runs
        from before an option existed can still be resumed)."""
        d = flat(self, "run")
        d.update(self.targets.entries())
        d.pop("launch", None)
        work = {(w.converge_steps, w.seeds) for w in (converge_work(self.measure, p) for p in self.targets.presets)}
        if len(work) == 1:  # the convergence work the run does (as runs stored it before it followed the preset)
            d["converge_steps"], d["seeds"] = work.pop()
        return json.loads(json.dumps(d))

    def cells(self) -> list[CellSpec]:
        """Workload-major order: all precisions of a workload run next to each other (fp32 first).

        With ``repeats`` > 1, repeat r of every precision runs before repeat r+1 of any, so each
        repeat's speedup compares cells measured a few seconds apart (slow drift of the machine
        then cancels in the ratio). Repeats time throughput (and memory) only.

        Every execution (compile, memory format, CUDA graphs) runs every precision, so each change is
        measured alone and combined; within a repeat, executions run one after the other, the
        default (eager) first.

        With one measurement per cell, fp32 is timed once more after the workload's other modes
        (the closing baseline, A-B-A, at the run's first execution, once per distribution: the one-process cell and
        each strategy's, whose modes divide by fp32 under that strategy): every speedup divides by fp32, so a disturbed
        fp32 cell would make every mode look faster; how far fp32 moved between its two measurements becomes part
        of every speedup's noise (``baseline_drift``).

        Expanded once per config (the plan, the progress bar, the runner and --resume read the same list; each caller
        gets its own copy).
        """
        return list(self._cells)

    @functools.cached_property
    def _cells(self) -> tuple[CellSpec, ...]:
        return tuple(self._expand())

    def support(self, precision: str) -> Support:
        """Whether this run's device runs ``precision``, and why not or with what note (asked once per mode and run:
        the plan, the native-only entries and the runner read it here; a cell's own process checks its device
        again)."""
        known = self._support
        if precision not in known:
            known[precision] = supported(precision, self.device)
        return known[precision]

    @functools.cached_property
    def _support(self) -> dict[str, Support]:
        return {}

    def _expand(self) -> list[CellSpec]:
        a, run_measure = self.axes, self.measure
        timed = tuple(x for x in run_measure.measures if x in REPEATED_MEASURES)
        repeats = a.repeats if "throughput" in timed else 1
        states = len(a.optimizer_states) > 1
        closing = repeats == 1 and "throughput" in timed and BASELINE in a.precisions and (
            len(a.precisions) > 1 or len(a.executions) > 1 or len(a.distributions()) > 1 or states)
        out: list[CellSpec] = []
        for k, (workload, preset) in enumerate(self.targets.pairs):
            m = converge_work(run_measure, preset)  # (the preset's convergence work where the run left it open)
            base = CellSpec(device=self.device, workload=None, model=self.targets.model, preset="", precision=BASELINE,
                            batch_size=None, data=self.data_of(k), recipe=self.recipe, measure=m)
            precisions = self.precisions_of(workload, preset)
            entry = self.targets.settings_of(k)
            def layout(ex, f=entry.memory_format):
                return (replace(ex, memory_format=f) if f else ex)
            sizes = a.batch_sizes if entry.batch is None else (entry.batch,)
            for bs, n in itertools.product(sizes, a.grad_accums):  # (micro-batches a step: a batch dimension)
                for r in range(repeats):
                    cell = replace(base, workload=workload, preset=preset, batch_size=bs, grad_accum=n,
                                   framework=self.targets.framework_of(workload).name,
                                   backend=self.targets.backend_of(workload))
                    if r:
                        cell = replace(cell, repeat=r, measure=replace(m, measures=timed), first_measures=m.measures)
                    out.extend(replace(cell, precision=precision, execution=layout(ex), distribution=dist,
                                       compiled_by_default=auto, optimizer_state=state)
                               for dist in a.distributions() for ex, precision, auto in self.points(precisions)
                               for state in self.states_of(precision))
                # (one per distribution whose fp32 other cells divide by: a DDP run's modes are compared with fp32
                # under DDP, and a disturbed fp32 DDP cell made every DDP mode look faster, with nothing to say so)
                compared = len(precisions) > 1 or len(a.executions) > 1 or states
                for dist in (a.distributions() if closing else ()):
                    if compared or (dist.strategy is None and len(a.distributions()) > 1):
                        out.append(replace(base, workload=workload, preset=preset, batch_size=bs, grad_accum=n,
                                           repeat=1, closing=True, framework=self.targets.framework_of(workload).name,
                                           backend=self.targets.backend_of(workload),
                                           measure=replace(m, measures=timed), first_measures=m.measures,
                                           execution=layout(a.executions[0]), distribution=dist))
        return out

    def points(self, precisions: tuple[str, ...]) -> list[tuple[Execution, str, bool]]:
        """(execution, precision, compiled by default) of a workload's cells, execution by execution. With
        ``fp8_compile`` the fp8 modes run at the execution compiled, after the others, next to compiled fp32
        and amp-bf16 (when the run has them)."""

        fp8 = [p for p in precisions if self.axes.fp8_compile and is_fp8(p)]
        out: list[tuple[Execution, str, bool]] = []
        for ex in self.axes.executions:
            out.extend((ex, p, False) for p in precisions if p not in fp8)
            if fp8:
                compiled = replace(ex, compile="on")
                out.extend((compiled, p, True) for p in precisions if p in fp8 or p in FP8_REFERENCES)
        return out

    def precisions_of(self, workload: str | None, preset: str) -> tuple[str, ...]:
        """The modes a workload runs in: all of the run's, or for a native-only entry the ones without a
        support note on this device (emulated half math) -- fp32 always."""

        if f"{workload}:{preset}" not in self.targets.native_only:
            return self.axes.precisions
        return tuple(p for p in self.axes.precisions if p == BASELINE or not self.support(p).note)

    def left_out(self) -> list[str]:
        """What native-only entries leave out, and why, what a plan without fp32 cannot say, and a mode whose kernel
        this device was timed running far slower than its math needs (printed with the run's header)."""

        out = []
        relative = {"throughput": "speedups", "memory": "memory savings", "converge": "convergence verdicts"}
        lost = [word for m, word in relative.items() if m in self.measure.measures]
        if BASELINE not in self.axes.precisions and lost:
            said = " or ".join(lost) if len(lost) < 3 else f"{lost[0]}, {lost[1]} or {lost[2]}"
            out.append(f"fp32 is not in --precisions: no {said} (each is relative to fp32, measured in the same run); "
                       "add fp32 for them")
        for workload, preset in zip(self.targets.workloads, self.targets.presets):
            missing = [p for p in self.axes.precisions if p not in self.precisions_of(workload, preset)]
            if missing:
                out.append(f"{workload} ({preset}): {', '.join(missing)} left out: {self.support(missing[0]).note}"
                           f" (its matmuls would take minutes per step); ask for them with --workloads {workload} "
                           f"--preset {preset} --precisions ...")
        for state in self.given_states:  # the (mode, state) pairs that make no sense: one line per state
            refused = [p for p in self.axes.precisions if state not in (natural_state(p), *self.states_of(p))]
            if refused:
                out.append(f"--optimizer-state {state} left out for {', '.join(refused)}: "
                           f"{state_refusal(refused[0], state, self.device)}")
        slow = {p: self.support(p).slow for p in self.axes.precisions if p != BASELINE and self.support(p).slow}
        for said in dict.fromkeys(slow.values()):  # (a kernel timed far slower than its math needs: before the wait)
            out.append(f"{', '.join(p for p, s in slow.items() if s == said)} on {self.device}: {said}")
        return out


# -- parsing what the command line gives (the torch-free parsers: ampbench.values) ----------------------------------
def canonical_precisions(names: Iterable[str]) -> tuple[str, ...]:
    """Names or aliases -> canonical names, once each, fp32 first: what a run's precisions axis holds (an unknown name
    is one line naming the modes)."""
    return tuple(sorted(dict.fromkeys(resolve(n) for n in names), key=lambda p: p != BASELINE))


def given_precisions(value: str | None, device: str) -> tuple[str, ...]:
    """``--precisions`` as given (names or aliases; RunConfig normalises them), ``all``: every mode ``device`` runs
    (the emulated fp8 modes a CPU leaves out of its defaults too; it was refused as an unknown precision), None: the
    device's defaults."""
    if value is None:
        return default_precisions(device)
    names = parse_list(value, "precisions")
    if says_all(names):
        return canonical_precisions(p for p in list_precisions() if supported(p, device).ok)
    return tuple(names)


def default_precisions(device: str) -> tuple[str, ...]:
    """The modes a run on ``device`` measures when --precisions says none: every mode it runs (a CPU: those in its
    defaults), fp32 first."""
    return canonical_precisions(p for p in list_precisions() if supported(p, device).ok
                                and (get(p).in_cpu_defaults or not device.startswith("cpu")))


def fp8_compiles_by_default(compile_given: bool, device: str, precisions: Iterable[str]) -> bool:
    """fp8 on CUDA runs torch.compile'd unless --compile says otherwise: torchao's float8 is built to be compiled
    (eager, each cast, amax and scale is a kernel of its own around the fp8 GEMM, which can make fp8 slower than
    bf16); on a CPU the fp8 modes are emulated and compiling them measures nothing about a GPU."""

    return not compile_given and device.startswith("cuda") and any(is_fp8(p) for p in precisions)


__all__ = ["Axes", "LaunchOptions", "RunConfig", "Targets", "canonical_precisions", "default_precisions",
           "given_precisions"]
