"""What a run measures: its options (:class:`RunConfig`) and the cells they expand to (:class:`CellSpec`).

A cell is workload x precision x execution (compile, memory format, CUDA graphs) x batch size, with the
measurements asked for. Cells are plain,
JSON-able values: they cross into child processes unchanged, and their hash (``key``) is how
``--resume`` knows what is already done.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from ampbench.bench.cells import CellId
from ampbench.errors import AmpbenchError
from ampbench.execution import AXES, Execution
from ampbench.precision import resolve, supported
from ampbench.workloads.base import PRESETS

MEASURES = ("throughput", "memory", "maxbatch", "converge", "inference")
DEFAULT_MEASURES = ("throughput", "memory")
BASELINE = "fp32"
REPEATED_MEASURES = ("throughput", "memory")
"""What a repeat of a cell measures again (max batch, convergence and inference are measured once)."""


@dataclass(frozen=True)
class SuiteEntry:
    workload: str
    preset: str
    native_only: bool = False
    """Run only the modes this device has math hardware for (and fp32): emulated ones would take hours."""


# The default suites. CPU: finishes in a few minutes on 2 cores (fp16 convolutions are ~45x slower
# than fp32 on CPUs without AVX512-FP16/AMX-FP16, which is itself a finding). bert small is the
# GEMM-bound entry: what the CPU's half-precision hardware (AVX512-BF16, AMX) can do for a real model,
# next to ampbench hw's GEMM speedup; in emulated modes its matmuls run ~100x slower than fp32, so those
# are left out of it (and said so). GPU: models big enough to keep the GPU busy, so the ratios say
# something about real training.
CPU_SUITE = (SuiteEntry("mnist-cnn", "small"), SuiteEntry("tabular-mlp", "small"), SuiteEntry("bert", "tiny"),
             SuiteEntry("bert", "small", native_only=True))
GPU_SUITE = (SuiteEntry("conv-dummy", "paper"), SuiteEntry("resnext", "small"), SuiteEntry("bert", "small"),
             SuiteEntry("unet", "small"), SuiteEntry("lstm-lm", "small"))
# 5 workloads x (8 modes + closing fp32) = 45 cells; at ~10-15 s per isolated cell (process start, CUDA init, build,
# warm-up, 50 steps) that is the ~10 minutes the suite is meant to take. Not yet timed on a GPU.
CPU_STEPS, CPU_WARMUP = 20, 3
GPU_STEPS, GPU_WARMUP = 50, 10


@dataclass(frozen=True, kw_only=True)
class Settings:
    """What every cell of a run shares: how to build the workload and how to measure it."""

    device: str
    measures: tuple[str, ...] = DEFAULT_MEASURES
    steps: int = CPU_STEPS
    warmup: int = CPU_WARMUP
    seed: int = 0
    model: str | None = None
    """User factory ``file.py:fn`` / ``pkg.mod:fn`` (with input_shape/num_classes or data_dir)."""
    input_shape: str | None = None
    """Per-sample input shape (with ``model`` or an hf:/timm: adapter), and what else the user said of the data:"""
    num_classes: int | None = None
    vocab_size: int | None = None
    num_outputs: int | None = None
    task: str | None = None
    batches: str | None = None
    """``file.py:make_batch``: the user's data (with ``model``)."""
    loss: str | None = None
    """``file.py:fn``: the user's loss (with ``model``)."""
    data_dir: str | None = None
    val_fraction: float | None = None
    """Share of --data-dir data held out for testing when it comes as one split (None: the workload's default)."""
    options: tuple[tuple[str, Any], ...] = ()
    loss_scale: str | None = None
    fp8_skip: tuple[str, ...] = ()
    """fp8 modes: Linear layers (name substrings) kept in bf16."""
    fp8_filter: str | None = None
    """fp8 modes: auto (default: dims and torchao's size thresholds) or dims."""
    memory_budget: int | None = None
    """CPU: bytes a cell may grow by (over it = oom). GPU: cap below the card's memory."""
    memory_margin: float = 0.05
    """maxbatch: a batch fits only if its peak stays below (1 - margin) x the memory limit."""
    maxbatch_limit: int = 65536
    maxbatch_trial_steps: int = 3
    seeds: int = 3
    converge_steps: int = 200
    inference_batch: int | None = None
    """Large inference batch (default: the training batch size)."""


def fp8_compiles_by_default(compile_given: bool, device: str, precisions: tuple[str, ...] | list[str]) -> bool:
    """fp8 on CUDA runs torch.compile'd unless --compile says otherwise: torchao's float8 is built to be
    compiled (eager, each cast, amax and scale is a kernel of its own around the fp8 GEMM, which can make fp8
    slower than bf16); on a CPU the fp8 modes are emulated and compiling them measures nothing about a GPU."""
    from ampbench.precision import is_fp8

    return not compile_given and device.startswith("cuda") and any(is_fp8(p) for p in precisions)


FP8_REFERENCES = ("fp32", "amp-bf16")
"""Compiled beside fp8 cells that compile by default: fp8's speedup and its comparison with bf16 at one execution."""

NEWER_USER_FIELDS = ("vocab_size", "num_outputs", "task", "batches", "loss", "fp8_filter")
"""Settings that came after the first user-model cells: left out of a cell's key when unset."""


def mp_options(spec: CellSpec) -> dict[str, Any]:
    """MixedPrecision keywords beyond the mode's name: the fp8 layer choice, the distributed strategy."""
    from ampbench.precision import Fp8Options, is_fp8

    out: dict[str, Any] = {}
    if spec.strategy is not None:
        out.update(strategy=spec.strategy, grad_reduce_dtype=spec.grad_reduce_dtype)
    if is_fp8(spec.precision):
        out["fp8"] = Fp8Options(spec.fp8_skip, spec.fp8_filter or "auto")
    return out


def user_data_kwargs(settings: Settings) -> dict[str, Any]:
    """What the user said of a --model's (or adapter's) data, as keywords of create_user_workload."""
    return {"input_shape": settings.input_shape, "num_classes": settings.num_classes, "vocab_size": settings.vocab_size,
            "num_outputs": settings.num_outputs, "task": settings.task}


@dataclass(frozen=True, kw_only=True)
class CellSpec(Settings):
    """One cell. Everything here changes the measurement, so everything goes into ``key``."""

    workload: str | None
    """Registered workload or adapter (timm:..., hf:...); None with ``model``."""
    preset: str
    precision: str
    batch_size: int | None
    """None: the workload's batch size for the preset."""
    repeat: int = 0
    """0 for the cell's measurement; 1.. for its repeats (``--repeats``), which time throughput only."""
    first_measures: tuple[str, ...] = ()
    """Repeats: the measures of repeat 0 (a repeat measures less, so its own fields cannot name repeat 0)."""
    closing: bool = False
    """The closing baseline: fp32 timed again after a workload's other modes (see RunConfig.cells)."""
    compile: str = "off"
    """Execution axes (ampbench.execution): off | on | max-autotune."""
    memory_format: str = "contiguous"
    """contiguous | channels_last."""
    cuda_graphs: str = "off"
    """off | on (CUDA)."""
    strategy: str | None = None
    """None (one process), ddp or fsdp (ampbench.distributed), over ``nproc`` processes launched by torchrun."""
    nproc: int = 1
    """Processes (ranks) of a distributed cell on each machine."""
    nnodes: int = 1
    """Machines a distributed cell's ranks span (world size = nnodes x nproc)."""

    @property
    def world_size(self) -> int:
        return self.nproc * self.nnodes if self.strategy else 1
    grad_reduce_dtype: str | None = None
    """Distributed cells: the dtype gradients are reduced in (None: their own)."""
    compiled_by_default: bool = False
    """Compiled because the run asked for fp8 on CUDA without --compile (RunConfig.fp8_compile): an fp8 cell, or
    the fp32/amp-bf16 reference compiled beside it."""

    @property
    def execution(self) -> Execution:
        return Execution(self.compile, self.memory_format, self.cuda_graphs)

    @property
    def label(self) -> str:
        return self.workload if self.workload is not None else f"user:{self.model}"

    def cell_id(self) -> CellId:
        """What this cell measures, apart from where and when (the identity its row carries; batch size None:
        the workload's, which the row fills in once known)."""
        return CellId(self.label, self.preset, self.precision, self.batch_size, self.execution, self.strategy,
                      self.world_size, self.grad_reduce_dtype if self.strategy else None, self.compiled_by_default)

    def key(self) -> str:
        return hashlib.sha1(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]

    def repeat_of(self) -> str | None:
        """A repeat's link to its cell: the key of repeat 0 (None for repeat 0 itself)."""
        if self.repeat == 0:
            return None
        return replace(self, repeat=0, measures=self.first_measures, first_measures=(), closing=False).key()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["measures"], d["options"] = list(self.measures), [list(kv) for kv in self.options]
        if self.fp8_skip:
            d["fp8_skip"] = list(self.fp8_skip)
        else:
            del d["fp8_skip"]
        if self.repeat == 0:  # keys of runs without repeats stay what they were before repeats existed
            del d["repeat"], d["first_measures"]
        else:
            d["first_measures"] = list(self.first_measures)
        if not self.closing:
            del d["closing"]
        for name in ("val_fraction", *NEWER_USER_FIELDS):  # keys of earlier runs stay what they were
            if d[name] is None:
                del d[name]
        for axis, values in AXES.items():  # (so do the keys of cells at the default execution)
            if d[axis] == values[0]:
                del d[axis]
        if self.strategy is None:  # and of single-process cells
            del d["strategy"], d["nproc"], d["grad_reduce_dtype"]
        if self.nnodes == 1:
            del d["nnodes"]
        if not self.compiled_by_default:
            del d["compiled_by_default"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CellSpec:
        known = {f.name for f in fields(cls)}
        d = {k: v for k, v in d.items() if k in known}
        d["measures"] = tuple(d.get("measures", ()))
        d["first_measures"] = tuple(d.get("first_measures", ()))
        d["options"] = tuple((k, v) for k, v in d.get("options", ()))
        d["fp8_skip"] = tuple(d.get("fp8_skip", ()))
        return cls(**d)


@dataclass(frozen=True, kw_only=True)
class RunConfig(Settings):
    """The options of ``ampbench run`` after validation (also the resume identity of a run)."""

    workloads: tuple[str, ...] = ()
    """Registered names; empty with ``model`` or for the default suite."""
    presets: tuple[str, ...] = ()
    """Preset per workload (same length as workloads)."""
    precisions: tuple[str, ...] = ()
    batch_sizes: tuple[int | None, ...] = (None,)
    repeats: int = 1
    """Throughput measurements per cell, interleaved with the other precisions (repeat r of every mode, then r+1)."""
    native_only: tuple[str, ...] = ()
    """'workload:preset' entries that run only fp32 and the modes the device has math hardware for."""
    executions: tuple[Execution, ...] = (Execution(),)
    """Points on the execution axes (--compile x --memory-format x --cuda-graphs), each with every precision."""
    strategies: tuple[str | None, ...] = (None,)
    """None (one process: the world-size-1 baseline) and/or ddp, fsdp (--strategy, over --nproc-per-node ranks)."""
    nproc: int = 1
    nnodes: int = 1
    """Machines the distributed cells span (--nnodes; node 0 runs the one-process cells and stores the rows)."""
    grad_reduce_dtypes: tuple[str | None, ...] = (None,)
    """Distributed cells: each gradient reduce dtype asked for (--grad-reduce-dtype; None: the gradients' own)."""
    fp8_compile: bool = False
    """fp8 on CUDA without --compile: the fp8 cells run compiled (torchao's float8 is built to be compiled: eager, its
    casts and scales are separate kernels), each beside compiled fp32 and amp-bf16 references so every ratio still
    compares one execution; the other modes run as the executions say."""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    """Options that do not change results (isolation, timeouts): stored, not part of the identity."""

    def identity(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("extra")
        if self.repeats == 1:  # runs from before --repeats existed can still be resumed
            d.pop("repeats")
        if self.val_fraction is None:
            d.pop("val_fraction")
        if not self.native_only:
            d.pop("native_only")
        if self.executions == (Execution(),):  # runs from before the execution axes can still be resumed
            d.pop("executions")
        if self.strategies == (None,):
            d.pop("strategies"), d.pop("nproc"), d.pop("grad_reduce_dtypes")
        if self.nnodes == 1:
            d.pop("nnodes")
        if not self.fp8_compile:
            d.pop("fp8_compile")
        return json.loads(json.dumps(d))  # tuples -> lists, as stored

    def cells(self) -> list[CellSpec]:
        """Workload-major order: all precisions of a workload run next to each other (fp32 first).

        With ``repeats`` > 1, repeat r of every precision runs before repeat r+1 of any, so each
        repeat's speedup compares cells measured a few seconds apart (slow drift of the machine
        then cancels in the ratio). Repeats time throughput (and memory) only.

        Every execution (compile, memory format, CUDA graphs) runs every precision, so each change is
        measured alone and combined; within a repeat, executions run one after the other, the
        default (eager) first.

        With one measurement per cell, fp32 is timed once more after the workload's other modes
        (the closing baseline, A-B-A, at the run's first execution): every speedup divides by fp32, so a disturbed fp32 cell would
        make every mode look faster; how far fp32 moved between its two measurements becomes part
        of every speedup's noise (``baseline_drift``).
        """
        shared = {f.name: getattr(self, f.name) for f in fields(Settings)}
        targets = [(None, p) for p in self.presets[:1]] if self.model else list(zip(self.workloads, self.presets))
        timed = tuple(m for m in self.measures if m in REPEATED_MEASURES)
        repeats = self.repeats if "throughput" in timed else 1
        closing = repeats == 1 and "throughput" in timed and BASELINE in self.precisions and (
            len(self.precisions) > 1 or len(self.executions) > 1 or len(self.distributions()) > 1)
        again = {"measures": timed, "first_measures": self.measures}
        out = []
        for workload, preset in targets:
            precisions = self.precisions_of(workload, preset)
            for bs in self.batch_sizes:
                for r in range(repeats):
                    rep = {} if r == 0 else {"repeat": r, **again}
                    out.extend(CellSpec(**{**shared, **rep}, workload=workload, preset=preset, precision=precision,
                                        batch_size=bs, **ex.to_row(), **dist, compiled_by_default=auto)
                               for dist in self.distributions() for ex, precision, auto in self.points(precisions))
                if closing and (len(precisions) > 1 or len(self.executions) > 1 or len(self.distributions()) > 1):
                    out.append(CellSpec(**{**shared, "repeat": 1, "closing": True, **again}, workload=workload,
                                        preset=preset, precision=BASELINE, batch_size=bs,
                                        **self.executions[0].to_row()))
        return out

    def points(self, precisions: tuple[str, ...]) -> list[tuple[Execution, str, bool]]:
        """(execution, precision, compiled by default) of a workload's cells, execution by execution. With
        ``fp8_compile`` the fp8 modes run at the execution compiled, after the others, next to compiled fp32
        and amp-bf16 (when the run has them)."""
        from ampbench.precision import is_fp8

        fp8 = [p for p in precisions if self.fp8_compile and is_fp8(p)]
        out = []
        for ex in self.executions:
            out.extend((ex, p, False) for p in precisions if p not in fp8)
            if fp8:
                compiled = replace(ex, compile="on")
                out.extend((compiled, p, True) for p in precisions if p in fp8 or p in FP8_REFERENCES)
        return out

    def distributions(self) -> list[dict[str, Any]]:
        """The strategy fields of the cells: one process first (the scaling baseline), then each strategy x reduce dtype."""
        out: list[dict[str, Any]] = []
        for strategy in self.strategies:
            if strategy is None:
                out.append({})
            else:
                out.extend({"strategy": strategy, "nproc": self.nproc, "nnodes": self.nnodes, "grad_reduce_dtype": r}
                           for r in self.grad_reduce_dtypes)
        return out

    def precisions_of(self, workload: str | None, preset: str) -> tuple[str, ...]:
        """The modes a workload runs in: all of the run's, or for a native-only entry the ones without a
        support note on this device (emulated half math) -- fp32 always."""
        if f"{workload}:{preset}" not in self.native_only:
            return self.precisions
        return tuple(p for p in self.precisions if p == BASELINE or not supported(p, self.device).note)

    def left_out(self) -> list[str]:
        """What native-only entries leave out, and why (printed with the run's header)."""
        out = []
        for workload, preset in zip(self.workloads, self.presets):
            missing = [p for p in self.precisions if p not in self.precisions_of(workload, preset)]
            if missing:
                out.append(f"{workload} ({preset}): {', '.join(missing)} left out: {supported(missing[0], self.device).note}"
                           f" (its matmuls would take minutes per step); ask for them with --workloads {workload} "
                           f"--preset {preset} --precisions ...")
        return out


def parse_list(value: str | None, what: str) -> list[str]:
    if value is None:
        return []
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise AmpbenchError(f"--{what} is empty: give a comma-separated list")
    return items


def parse_measures(value: str | None) -> tuple[str, ...]:
    if value is None:
        return DEFAULT_MEASURES
    items = parse_list(value, "measure")
    bad = [m for m in items if m not in MEASURES]
    if bad:
        raise AmpbenchError(f"--measure {','.join(bad)}: unknown measurement; choose from {','.join(MEASURES)}")
    return tuple(m for m in MEASURES if m in items)  # canonical order, no duplicates


def parse_precisions(value: str | None, device: str) -> tuple[str, ...]:
    """Names or aliases -> canonical names, fp32 first, no duplicates. Default: every mode ``device`` supports."""
    from ampbench.precision import get, list_precisions

    names = parse_list(value, "precisions") if value is not None else [
        p for p in list_precisions() if supported(p, device).ok
        and (get(p).in_cpu_defaults or not device.startswith("cpu"))]
    out: list[str] = []
    for n in names:
        canonical = resolve(n)
        if canonical not in out:
            out.append(canonical)
    return tuple(sorted(out, key=lambda p: p != "fp32"))


def parse_size(value: str | None, what: str) -> int | None:
    """'2GiB', '512MB', '1e9' -> bytes."""
    if value is None:
        return None
    units = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}
    v = value.strip().lower().replace(" ", "")
    num = v.rstrip("kmgib")
    unit = v[len(num):]
    try:
        n = float(num)
    except ValueError:
        n = -1.0
    if unit not in units or n <= 0:
        raise AmpbenchError(f"--{what} {value!r}: expected a size like 2GiB, 512MiB or 800MB")
    return int(n * units[unit])


def with_presets(workloads: list[str], preset: str | None, device: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The workloads and their presets: given ones at --preset (default small), or the device's default suite."""
    if preset is not None and preset not in PRESETS:
        raise AmpbenchError(f"--preset {preset!r}: choose one of {', '.join(PRESETS)}")
    if workloads:
        return tuple(workloads), tuple(preset or "small" for _ in workloads)
    suite = _suite(device, preset)
    return tuple(e.workload for e in suite), tuple(e.preset for e in suite)


def _suite(device: str, preset: str | None) -> tuple[SuiteEntry, ...]:
    """The device's default suite; with --preset every entry at that preset (entries that become the same, once)."""
    suite = GPU_SUITE if device.startswith("cuda") else CPU_SUITE
    if preset is None:
        return suite
    out: list[SuiteEntry] = []
    for e in suite:
        entry = SuiteEntry(e.workload, preset, e.native_only)
        if all((o.workload, o.preset) != (entry.workload, entry.preset) for o in out):
            out.append(entry)
    return tuple(out)


def native_only_entries(workloads: list[str], preset: str | None, precisions: str | None,
                        device: str) -> tuple[str, ...]:
    """The default suite's native-only entries ('workload:preset'), unless the user named workloads or modes."""
    if workloads or precisions is not None:
        return ()
    return tuple(f"{e.workload}:{e.preset}" for e in _suite(device, preset) if e.native_only)


__all__ = ["DEFAULT_MEASURES", "MEASURES", "CellSpec", "RunConfig", "Settings", "parse_measures", "parse_precisions",
           "parse_size", "with_presets"]
