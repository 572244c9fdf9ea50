"""What a benchmark cell is: :class:`CellSpec` (everything that changes its measurement, and so its ``key``) and
:class:`CellId` (what it measured apart from where and when: the identity every reader groups rows by).

A cell is workload x preset x precision x batch size x execution (compile, memory format, CUDA graphs) x
distribution (strategy, world size, gradient reduce dtype), measured as its sections say: the data the user
described (:class:`DataOptions`), the recipe's options (:class:`RecipeOptions`) and how to measure
(:class:`MeasureOptions`). Cells are plain, JSON-able values: they cross into child processes unchanged (as
the flat dict :meth:`CellSpec.to_dict` writes), and their hash (``key``) is what ``--resume`` skips and what a
stored row is.

Keys stay stable as the cell grows: every field says, in its metadata, when it is left out of a key (see
:func:`flat`) -- a field added after keys were first stored is left out at its default, so the cells of old
runs keep their keys (``tests/bench/golden``). The run's identity (``RunConfig.identity``) is made the same
way, with its own rules (metadata ``run``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import MISSING, Field, dataclass, field, fields, is_dataclass, replace
from typing import Any

from ampbench import seam
from ampbench.errors import AmpbenchError
from ampbench.execution.axes import Execution, strategy_label
from ampbench.modes import is_fp8
from ampbench.workloads.data_options import DEFAULT, DataOptions

# -- when a field is left out of a key (DEFAULT: while it holds its default) ------------------------------------


def with_(other: str) -> str:
    """Metadata value: left out while the sibling field ``other`` holds its default (nproc without a strategy)."""
    return f"with:{other}"


def _default(f: Field[Any]) -> Any:
    return f.default_factory() if f.default_factory is not MISSING else f.default  # type: ignore[misc]


def _jsonable(v: Any, kind: str | None = None) -> Any:
    """``v`` as JSON-able values; a dataclass's fields all, but those its ``kind`` metadata leaves out at their
    default (a field added to a nested value after identities were stored: the Execution's ``checkpointing``)."""
    if is_dataclass(v) and not isinstance(v, type):
        return {f.name: _jsonable(getattr(v, f.name), kind) for f in fields(v)
                if not (kind is not None and f.metadata.get(kind) == DEFAULT and getattr(v, f.name) == _default(f))}
    if isinstance(v, (tuple, list)):
        return [_jsonable(x, kind) for x in v]
    return v


def flat(obj: Any, kind: str) -> dict[str, Any]:
    """``obj``'s fields as one flat JSON-able dict, sections (fields marked ``section``) flattened in, each field
    left out as its ``kind`` metadata (``cell`` for keys, ``run`` for run identities) says."""
    out: dict[str, Any] = {}
    for f in fields(obj):
        v = getattr(obj, f.name)
        if f.metadata.get("section"):
            out.update(flat(v, kind))
            continue
        rule = f.metadata.get(kind)
        if rule == DEFAULT and v == _default(f):
            continue
        if rule == FRAMEWORK_ENTRIES:  # (the caller adds what the framework puts in keys: seam.key_entries)
            continue
        if isinstance(rule, str) and rule.startswith("with:"):
            other = next(g for g in fields(obj) if g.name == rule[5:])
            if getattr(obj, other.name) == _default(other):
                continue
        out[f.name] = _jsonable(v, kind)
    return out


def defaults_left_out(cls: type, kind: str) -> dict[str, Any]:
    """The scalar fields of dataclass ``cls`` (its sections' too) that :func:`flat` leaves out of a ``kind`` dict while
    they hold their default, with that default: what a stored identity that lacks one of them held (``repeats``: 1)."""
    out: dict[str, Any] = {}
    for f in fields(cls):
        if f.metadata.get("section"):
            out.update(defaults_left_out(f.default_factory, kind))  # type: ignore[arg-type]  # (its factory is its class)
        elif f.metadata.get(kind) == DEFAULT and isinstance(_default(f), (str, int, float, bool)):
            out[f.name] = _default(f)
    return out


FRAMEWORK_ENTRIES = "framework entries"
"""Metadata rule of the framework and backend fields: left out of the flat dict, whose owner adds
:func:`ampbench.seam.key_entries` instead (``keras_backend`` for a Keras cell, nothing for a PyTorch one: the
keys cells have always had)."""

SECTION = {"section": True}
"""Metadata of a field holding a section of the cell (or run): flattened into its dict and its key."""


def from_flat(cls: type, d: Mapping[str, Any]) -> Any:
    """The inverse of :func:`flat` for a dataclass with sections (unknown names ignored, absent ones at default)."""
    kw: dict[str, Any] = {}
    for f in fields(cls):
        if f.metadata.get("section"):
            kw[f.name] = from_flat(f.default_factory, d)  # type: ignore[arg-type]  # (a section's factory is its class)
        elif f.name in d:
            v = d[f.name]
            kw[f.name] = tuple(tuple(x) if isinstance(x, list) else x for x in v) if isinstance(v, list) else v
    return cls(**kw)


def route(sections: Mapping[str, type], values: Mapping[str, Any], what: str) -> dict[str, Any]:
    """Each of ``sections`` (name -> a section's dataclass) built from the flat ``values`` its fields name (as on the
    command line: every option is one section's field; absent ones at their defaults); a name no section has is a
    TypeError naming ``what`` -- the one router from flat keywords to sections (``RunOptions.of``, ``RunConfig.of``,
    the command line's sections: :func:`ampbench.cli.declared.command`)."""
    owner = {f.name: name for name, section in sections.items() for f in fields(section)}
    unknown = sorted(set(values) - set(owner))
    if unknown:
        raise TypeError(f"{what} got unknown options: {', '.join(unknown)}")
    return {name: from_flat(section, {k: v for k, v in values.items() if owner[k] == name})
            for name, section in sections.items()}


# -- the sections ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RecipeOptions:
    """What the precision recipes take beyond their name: the loss scaling, the fp8 modes' layer choice."""

    loss_scale: str | None = None
    """none | dynamic | hysteresis[:N] | static:V (None: the mode's default)."""
    fp8_skip: tuple[str, ...] = field(default=(), metadata={"cell": DEFAULT})
    """fp8 modes: Linear layers (name substrings) kept in bf16."""
    fp8_filter: str | None = field(default=None, metadata={"cell": DEFAULT})
    """fp8 modes: auto (default: dims and torchao's size thresholds) or dims."""

    def __post_init__(self) -> None:
        if self.loss_scale is not None:  # (imported here: a cell without these options needs no torch)
            from ampbench.precision.scaling import LossScaleConfig  # lazy: torch

            LossScaleConfig.parse(self.loss_scale, default="dynamic")
        if self.fp8_filter is not None:
            from ampbench.precision.fp8 import check_filter  # lazy: torch

            check_filter(self.fp8_filter)

    @property
    def fp8(self) -> Any:
        """The fp8 modes' :class:`~ampbench.precision.fp8.Fp8Options`."""
        from ampbench.precision.fp8 import Fp8Options  # lazy: torch

        return Fp8Options(self.fp8_skip, self.fp8_filter or "auto")

    @property
    def fp8_given(self) -> bool:
        return bool(self.fp8_skip) or self.fp8_filter is not None


MEASURES = ("throughput", "memory", "maxbatch", "converge", "inference")
DEFAULT_MEASURES = ("throughput", "memory")


GPU_MEMORY_MARGIN = 0.05
CPU_MEMORY_MARGIN = 0.25
"""maxbatch's margin on a CPU, where a batch's peak is the process's RSS growth: one cell read 215-289 MiB over five
runs (mnist-cnn amp-bf16 at batch 4,928, a 2-core EPYC), and a timed run 281 and 321 MiB at batches whose trials
stayed under 243 (2026-11-28): up to 1.34x, so a trial's peak must stay under 1 / 1.34 = 0.75 x the budget for its
timed run to fit. Not always enough: at 0.25 a timed run read 277 MiB at a batch whose trial stayed under 192 (1.44x),
which is why a max batch is confirmed by its timed run (:func:`ampbench.measure.maxbatch.measure_max_batch`). A GPU's
peak (the allocator's reserved bytes) repeats: 5 %."""


def default_memory_margin(device: str, measures: tuple[str, ...]) -> float:
    """maxbatch's ``--memory-margin`` on this kind of device unless told. A run that searches no max batch keeps 5 %
    wherever it runs: the margin is part of a run's identity, and a CPU run from before the CPU's own margin still
    resumes (one that searched, at 5 %, measured otherwise: it does not)."""
    return CPU_MEMORY_MARGIN if not device.startswith("cuda") and "maxbatch" in measures else GPU_MEMORY_MARGIN


@dataclass(frozen=True)
class MeasureOptions:
    """How a cell is measured (checked at construction: one line naming the option)."""

    measures: tuple[str, ...] = DEFAULT_MEASURES
    steps: int = 20
    warmup: int = 3
    seed: int = 0
    memory_budget: int | None = None
    """CPU: bytes a cell may grow by (over it = oom). GPU: cap below the card's memory."""
    memory_margin: float | None = None
    """maxbatch: a batch fits only if its peak stays below (1 - margin) x the memory limit; None: the device's
    (:func:`default_memory_margin`, which a run resolves: its identity holds the number)."""
    maxbatch_limit: int = 65536
    maxbatch_trial_steps: int = 3
    seeds: int | None = 3
    """converge: seeds per precision. In a run's settings None means "the preset's" (:func:`converge_work`)."""
    converge_steps: int | None = 200
    """converge: steps per seed; None in a cell: the workload's own length (its epochs over its training split).
    In a run's settings None means "the preset's"."""
    inference_batch: int | None = None
    """Large inference batch (default: the training batch size)."""

    def __post_init__(self) -> None:
        bad = [m for m in self.measures if m not in MEASURES]
        if bad:
            raise AmpbenchError(f"--measure {','.join(bad)}: unknown measurement; choose from {','.join(MEASURES)}")
        if self.memory_budget is not None and self.memory_budget <= 0:
            raise AmpbenchError(f"--memory-budget must be > 0 bytes, got {self.memory_budget}")
        for flag, v in (("steps", self.steps), ("warmup", self.warmup), ("seeds", self.seeds),
                        ("converge-steps", self.converge_steps), ("maxbatch-limit", self.maxbatch_limit),
                        ("inference-batch", self.inference_batch), ("maxbatch-trial-steps", self.maxbatch_trial_steps)):
            if v is not None and v < 1:
                raise AmpbenchError(f"--{flag} must be >= 1, got {v}")
        if self.memory_margin is not None and not 0.0 <= self.memory_margin < 1.0:
            raise AmpbenchError(f"--memory-margin must be in [0, 1), got {self.memory_margin}")

    def margin_on(self, device: str) -> float:
        """The max-batch margin these options give on ``device``: the one asked for, else the device's."""
        return default_memory_margin(device, self.measures) if self.memory_margin is None else self.memory_margin


@dataclass(frozen=True)
class LaunchOptions:
    """How cells are started: not part of the run's identity (the same run, launched otherwise, resumes)."""

    isolate: bool | None = None
    """Each cell in a child process (None: on CUDA yes, on CPU no)."""
    cell_timeout: float | None = None
    """Seconds before an isolated cell is stopped (status error)."""
    node_rank: int = 0
    endpoint: str | None = None
    """Several machines: node 0's HOST:PORT (cell i of the distributed cells at PORT + i)."""
    build_ahead: bool | None = None
    """The next isolated cell's process started while this one measures, its workload built on the host, its device
    work after this cell's process has ended (:mod:`ampbench.launch.turn`). None: on CUDA yes, on CPU no."""

    def __post_init__(self) -> None:
        if self.cell_timeout is not None and self.cell_timeout <= 0:
            raise AmpbenchError(f"--cell-timeout must be > 0 seconds, got {self.cell_timeout}")

    def isolated(self, device: str) -> bool:
        return self.isolate if self.isolate is not None else device.startswith("cuda")

    def ahead(self, device: str) -> bool:
        """Whether the next cell's process is started before its turn (isolated cells only)."""
        on = self.build_ahead if self.build_ahead is not None else device.startswith("cuda")
        return on and self.isolated(device)

    def to_dict(self) -> dict[str, Any]:
        return {"isolate": self.isolate, "cell_timeout": self.cell_timeout, "node_rank": self.node_rank,
                "endpoint": self.endpoint, "build_ahead": self.build_ahead}


CONVERGE_BY_PRESET: dict[str, tuple[int | None, int]] = {"tiny": (30, 2), "small": (200, 3), "paper": (None, 3)}
"""Convergence work when the run does not say (--converge-steps, --seeds): (steps per seed, seeds) by preset --
tiny takes seconds, small what ampbench always ran, paper the workload's real length (None: its epochs)."""
NOT_CONVERGING = (200, 3)
"""What a cell that does not measure convergence carries (unused): the values its key has always held."""


def memory_step_counts_flops(compiled: bool, grad_accum: int) -> bool:
    """Whether a cell's memory step counts the step's FLOPs too: an eager step of one micro-batch is the whole step,
    so its own FLOP-count step was one more step of the cell (on the CPU, GPT-2 small's 1.0 s of a 7.0 s cell). Not a
    compiled one (its memory step runs compiled code, and a compiled frame run under the counter's dispatch mode
    stops running it: the count takes the eager model), nor an accumulating one (its memory step is one micro-batch
    of the step's several)."""
    return not compiled and grad_accum == 1


def extra_steps(compiled: bool = False, grad_accum: int = 1) -> int:
    """Steps a cell runs besides the timed and warm-up ones: the first and the memory step, which reads the state's
    sizes too and, where :func:`memory_step_counts_flops`, counts the FLOPs; else the count in one more. (Four until
    2026-11-29: the FLOP and the state step apart.)"""
    return 2 if memory_step_counts_flops(compiled, grad_accum) else 3


def converge_work(measure: MeasureOptions, preset: str) -> MeasureOptions:
    """``measure`` with the convergence steps and seeds the run left open (None) filled in for ``preset``."""
    if measure.converge_steps is not None and measure.seeds is not None:
        return measure
    steps, seeds = CONVERGE_BY_PRESET.get(preset, CONVERGE_BY_PRESET["small"]) if "converge" in measure.measures \
        else NOT_CONVERGING
    return replace(measure, converge_steps=steps if measure.converge_steps is None else measure.converge_steps,
                   seeds=seeds if measure.seeds is None else measure.seeds)


@dataclass(frozen=True)
class Distribution:
    """Where a cell's ranks run: one process (no strategy), or ddp/fsdp over nproc ranks on each of nnodes machines."""

    strategy: str | None = field(default=None, metadata={"cell": DEFAULT})
    """None (one process), ddp or fsdp (ampbench.distributed), over ``nproc`` processes launched by torchrun."""
    nproc: int = field(default=1, metadata={"cell": with_("strategy")})
    """Processes (ranks) of a distributed cell on each machine."""
    nnodes: int = field(default=1, metadata={"cell": DEFAULT})
    """Machines a distributed cell's ranks span (world size = nnodes x nproc)."""
    grad_reduce_dtype: str | None = field(default=None, metadata={"cell": with_("strategy")})
    """Distributed cells: the dtype gradients are reduced in (None: their own)."""

    @property
    def world_size(self) -> int:
        return self.nproc * self.nnodes if self.strategy else 1


# -- the cell -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class CellSpec:
    """One cell. Everything here changes the measurement, so everything goes into ``key``."""

    device: str
    workload: str | None
    """Registered workload or adapter (timm:..., hf:...); None with ``model``."""
    model: str | None = None
    """User factory ``file.py:fn`` / ``pkg.mod:fn``."""
    preset: str
    precision: str
    batch_size: int | None
    """None: the workload's batch size for the preset."""
    optimizer_state: str | None = field(default=None, metadata={"cell": DEFAULT})
    """The optimizer's state precision when it is not the mode's own (:mod:`ampbench.precision.optimizer_state`:
    8bit, 4bit, fp8, bf16-sr); None: the optimizer as the workload builds it."""
    data: DataOptions = field(default_factory=DataOptions, metadata=SECTION)
    recipe: RecipeOptions = field(default_factory=RecipeOptions, metadata=SECTION)
    measure: MeasureOptions = field(default_factory=MeasureOptions, metadata=SECTION)
    execution: Execution = field(default_factory=Execution, metadata=SECTION)
    distribution: Distribution = field(default_factory=Distribution, metadata=SECTION)
    framework: str = field(default=seam.DEFAULT, metadata={"cell": FRAMEWORK_ENTRIES})
    """The framework that measures the cell (:mod:`ampbench.seam`)."""
    backend: str | None = field(default=None, metadata={"cell": FRAMEWORK_ENTRIES})
    """The framework's backend where it has several (None: it has none)."""
    repeat: int = field(default=0, metadata={"cell": DEFAULT})
    """0 for the cell's measurement; 1.. for its repeats (``--repeats``), which time throughput only."""
    first_measures: tuple[str, ...] = field(default=(), metadata={"cell": with_("repeat")})
    """Repeats: the measures of repeat 0 (a repeat measures less, so its own fields cannot name repeat 0)."""
    closing: bool = field(default=False, metadata={"cell": DEFAULT})
    """The closing baseline: fp32 timed again after a workload's other modes (see RunConfig.cells)."""
    compiled_by_default: bool = field(default=False, metadata={"cell": DEFAULT})
    """Compiled because the run asked for fp8 on CUDA without --compile: an fp8 cell, or the fp32/amp-bf16
    reference compiled beside it."""
    grad_accum: int = field(default=1, metadata={"cell": DEFAULT})
    """Micro-batches of ``batch_size`` a timed step accumulates before the optimizer steps (``run --grad-accum``; 1:
    none -- left out of the key, so the cells before it keep theirs)."""

    @classmethod
    def of(cls, **flat_fields: Any) -> CellSpec:
        """A cell from its flat fields, as stored and as in its key (``steps=2``, ``strategy="ddp"``, ...)."""
        return cls.from_dict(flat_fields)

    # (the sections' fields most of the harness reads, by their flat names)
    @property
    def measures(self) -> tuple[str, ...]:
        return self.measure.measures

    @property
    def strategy(self) -> str | None:
        return self.distribution.strategy

    @property
    def world_size(self) -> int:
        return self.distribution.world_size

    @property
    def label(self) -> str:
        return self.workload if self.workload is not None else f"user:{self.model}"

    @property
    def inputs_need_a_build(self) -> bool:
        """Its inputs can be wrong in ways only building the workload for real shows: a user model, real data
        (missing, corrupt, a --val-fraction it cannot take), an adapter (its extra missing), channels-last (the model
        must take 4-D inputs). A registered workload on synthetic data cannot be."""
        d = self.data
        return (self.model is not None or d.data_dir is not None or d.val_fraction is not None
                or ":" in (self.workload or "") or self.execution.memory_format != "contiguous")

    def measuring(self, measures: tuple[str, ...], batch_size: int | None = None) -> CellSpec:
        """The same cell measuring only ``measures`` (at ``batch_size`` when given: a max-batch search's throughput)."""
        return replace(self, measure=replace(self.measure, measures=measures),
                       batch_size=self.batch_size if batch_size is None else batch_size)

    def key(self) -> str:
        return hashlib.sha1(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return {**flat(self, "cell"), **seam.key_entries(self.framework, self.backend)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CellSpec:
        framework, backend = seam.from_entries(d)
        return from_flat(cls, {**d, "framework": framework, "backend": backend})  # type: ignore[no-any-return]

    def with_flat(self, **changes: Any) -> CellSpec:
        """The same cell with flat fields changed (``steps=1``, ``device="cuda:1"``, ``strategy=None``)."""
        return CellSpec.from_dict({**self.to_full_dict(), **changes})

    def to_full_dict(self) -> dict[str, Any]:
        """Every field, none left out (what :meth:`from_dict` rebuilds exactly)."""
        return flat(self, "")

    def repeat_of(self) -> str | None:
        """A repeat's link to its cell: the key of repeat 0 (None for repeat 0 itself)."""
        if self.repeat == 0:
            return None
        first = replace(self, repeat=0, measure=replace(self.measure, measures=self.first_measures), first_measures=(),
                        closing=False)
        return first.key()

    def cell_id(self) -> CellId:
        """What this cell measures, apart from where and when (the identity its row carries; batch size None:
        the workload's, which the row fills in once known)."""
        d = self.distribution
        return CellId(self.label, self.preset, self.precision, self.batch_size, self.execution, d.strategy,
                      d.world_size, d.grad_reduce_dtype if d.strategy else None, self.compiled_by_default,
                      self.framework, self.backend, self.optimizer_state, self.grad_accum)

    def mp_options(self) -> dict[str, Any]:
        """MixedPrecision keywords beyond the mode's name: the fp8 layer choice, the distributed strategy."""
        out: dict[str, Any] = {}
        if self.strategy is not None:
            from ampbench.distributed.placement import placement_of  # lazy: torch

            out["placement"] = placement_of(self.strategy, self.distribution.grad_reduce_dtype)
        if is_fp8(self.precision):
            out["fp8"] = self.recipe.fp8
        if self.optimizer_state is not None:
            out["optimizer_state"] = self.optimizer_state
        return out


# -- what readers group rows by ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CellId:
    """What a cell measured, apart from where and when: THE identity rows are compared by.

    Two rows are the same cell, measured on two devices or in two runs, exactly when their CellId is equal; a
    precision's baseline is its cell with the precision fp32. Planning writes these fields into every row
    (``CellSpec.cell_id().to_row()``), and every reader -- derived ratios, the advisor, reports, the cross-device
    comparison -- groups rows by this one definition, never by a key of its own (a comparison keyed on four fields
    put an FSDP x2 row where the one-process row belonged). Rows from before an axis existed read as its default.
    """

    workload: str
    preset: str
    precision: str
    batch_size: int | None
    execution: Execution = field(default_factory=Execution)
    strategy: str | None = None
    world_size: int = 1
    grad_reduce_dtype: str | None = None
    compiled_by_default: bool = False
    framework: str = seam.DEFAULT
    backend: str | None = None
    """The framework's backend (the same model on two backends is two cells)."""
    optimizer_state: str | None = None
    """The optimizer's state precision when not the mode's own (None: the optimizer as built; rows from before the
    axis)."""
    grad_accum: int = 1
    """Micro-batches of ``batch_size`` a step accumulates (``run --grad-accum``, ``predict --grad-accum``; 1: none); a
    row's ``grad_accum`` key only where it is not 1, so the rows before it keep their keys."""

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> CellId:
        strategy = row.get("strategy") or None
        return cls(workload=str(row.get("workload") or ""), preset=str(row.get("preset") or ""),
                   precision=str(row.get("precision") or ""), batch_size=row.get("batch_size"),
                   execution=Execution.of(row), strategy=strategy,
                   world_size=int(row.get("world_size") or 1) if strategy else 1,
                   grad_reduce_dtype=row.get("grad_reduce_dtype") if strategy else None,
                   compiled_by_default=bool(row.get("compiled_by_default")), **_framework_of(row),
                   optimizer_state=row.get("optimizer_state") or None, grad_accum=int(row.get("grad_accum") or 1))

    def to_row(self) -> dict[str, Any]:
        """The identity keys of a row (compiled_by_default null unless true, as rows have always stored it)."""
        return {"workload": self.workload, "preset": self.preset, "precision": self.precision,
                "batch_size": self.batch_size, **self.execution.to_row(), "strategy": self.strategy,
                "world_size": self.world_size, "grad_reduce_dtype": self.grad_reduce_dtype,
                "compiled_by_default": self.compiled_by_default or None, "optimizer_state": self.optimizer_state,
                "framework": self.framework,
                **{seam.backend_key(f): None for f in seam.FRAMEWORKS if f != seam.DEFAULT},
                **seam.key_entries(self.framework, self.backend),
                **({"grad_accum": self.grad_accum} if self.grad_accum != 1 else {})}

    def but(self, **changes: Any) -> CellId:
        return replace(self, **changes)

    @property
    def baseline(self) -> CellId:
        """The fp32 cell this cell's precision is compared with: the same everything else, the optimizer as built
        (a state precision is compared with fp32 and the workload's own optimizer: what it saves, its verdict)."""
        return replace(self, precision="fp32", optimizer_state=None)

    @property
    def tf32_twin(self) -> CellId:
        """The tf32 cell beside this one (what a GPU user's fp32 really runs: the guides' second baseline)."""
        return replace(self, precision="tf32", optimizer_state=None)

    @property
    def eager_baseline(self) -> CellId:
        """fp32 at the default execution (not compiled by default), same distribution: the baseline of every change."""
        return replace(self, precision="fp32", execution=Execution(), compiled_by_default=False, optimizer_state=None)

    @property
    def single_process(self) -> CellId:
        """The same cell on one process (the scaling baseline of a distributed cell)."""
        return replace(self, strategy=None, world_size=1, grad_reduce_dtype=None)

    @property
    def setting(self) -> CellId:
        """Everything but the precision: the cells whose precisions are compared side by side."""
        return replace(self, precision="")

    def describe(self, with_batch: bool = True) -> str:
        """How reports name a setting: 'batch 64, eager', 'batch 32, compile, fsdp x2 (bf16 reduce)', 'batch 16 x 4
        micro-batches a step, eager'."""
        parts = [f"batch {self.batch_size}"] if with_batch and self.batch_size is not None else []
        if self.grad_accum != 1:  # ("batch 16 x 4 micro-batches a step")
            parts.append(f"{parts.pop() + ' x ' if parts else ''}{self.grad_accum} micro-batches a step")
        setting = seam.get(self.framework).setting(self.backend)
        if setting is not None:  # (a framework with its own execution: no PyTorch execution axis)
            parts.append(setting)
            return ", ".join(parts)
        parts.append(self.execution.label)
        if self.compiled_by_default:
            parts[-1] += " (fp8 on CUDA: compiled by default)"
        if self.optimizer_state:
            parts.append(f"{self.optimizer_state} optimizer states")
        if self.strategy:
            parts.append(strategy_label({"strategy": self.strategy, "world_size": self.world_size,
                                         "grad_reduce_dtype": self.grad_reduce_dtype}))
        return ", ".join(parts)


def _framework_of(row: Mapping[str, Any]) -> dict[str, Any]:
    framework, backend = seam.from_entries(row)
    return {"framework": framework, "backend": backend}


def measured_on(row: Mapping[str, Any]) -> tuple[Any, Any]:
    """(run, device) a row was measured in: with its CellId, what one stored measurement is."""
    return row.get("run_id"), row.get("device_name")
