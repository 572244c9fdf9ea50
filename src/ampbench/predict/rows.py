"""``ampbench predict``'s rows: each target traced per precision on meta and priced on the named GPU.

Rows are predictions, never measurements: each says so (``device: "predicted: <GPU>"``, ``source: "predicted"``) and
carries the GPU's datasheet source. Precisions the GPU cannot run are rows with status ``unsupported`` and the reason,
as ``run`` refuses them.
"""

from __future__ import annotations

import copy
import difflib
import functools
import itertools
import json
import re
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from ampbench.cells import CellId
from ampbench.distributed.strategy import layout, reduced_every_micro_batch
from ampbench.distributed.units import blocks
from ampbench.errors import AmpbenchError
from ampbench.execution.axes import Execution
from ampbench.execution.checkpointing import POLICIES, checkpoint_blocks
from ampbench.execution.micro_batches import split
from ampbench.measure.gpus import Gpu, for_device, lookup, predictable
from ampbench.measure.trainable import check_trainable
from ampbench.precision import get
from ampbench.precision.fp8 import Fp8Options, torchao_problem
from ampbench.precision.optimizer_state import check_built
from ampbench.precision.optimizer_state import effective as effective_state
from ampbench.precision.optimizer_state import refusal as optimizer_state_refusal
from ampbench.predict import measured_kernels
from ampbench.predict.accumulation import TRACED, accumulated
from ampbench.predict.bands import band
from ampbench.predict.cost import MEASURED_HOST, Compiled, Host, bound_of, math_of, price
from ampbench.predict.memory import MIN_TRACED_BATCH, MemoryModel
from ampbench.predict.parallel import Fabric, ddp_cost, fsdp_cost, fsdp_memory
from ampbench.predict.trace import UntraceableModel, trace_inference, trace_step
from ampbench.workloads.base import Workload
from ampbench.workloads.factory import build_meta


def find_gpu(name: str | None, spec_file: Path | None) -> Gpu:
    """``--gpu NAME`` (case-insensitive) or ``--gpu-spec FILE.json``; one line naming what is valid otherwise."""
    gpus = find_gpus(name, spec_file)
    if len(gpus) > 1:
        raise AmpbenchError(f"--gpu {name}: one GPU here")
    return gpus[0]


def find_gpus(names: str | None, spec_file: Path | None) -> tuple[Gpu, ...]:
    """``--gpu a,b,c`` (case-insensitive; ``all``: every GPU of the catalogue ``predict`` takes) and/or ``--gpu-spec
    FILE.json``, in the order given; one line naming what is valid otherwise."""
    keys = ", ".join(g.key for g in predictable())
    if names is None and spec_file is None:
        raise AmpbenchError(f"give --gpu NAME[,NAME...] (or all) or --gpu-spec FILE.json; names: {keys}")
    out: list[Gpu] = []
    for name in [n.strip() for n in (names or "").split(",") if n.strip()]:
        if name.lower() == "all":
            out += predictable()
            continue
        gpu = lookup(name)
        if gpu is None or not gpu.predictable:
            why = "is not known" if gpu is None else "has no published SM count and clocks (its peaks serve MFU only)"
            close = gpu_suggestions(name)
            if close:
                raise AmpbenchError(f"--gpu {name!r} {why}: did you mean {either_of(close)}? (ampbench list gpus names "
                                    "every one; all takes them all, --gpu-spec FILE.json another GPU)")
            raise AmpbenchError(f"--gpu {name!r} {why}; use one of: {keys}, or all (or --gpu-spec FILE.json for "
                                "another GPU)")
        out.append(gpu)
    if names is not None and not out:
        raise AmpbenchError(f"--gpu {names!r} names no GPU; use one of: {keys}, or all")
    if spec_file is not None:
        out.append(load_spec(spec_file))
    return tuple(dict.fromkeys(out))


VENDOR_WORDS = frozenset({"nvidia", "geforce", "tesla"})
"""Words of a driver's device name that no catalogue key carries ("NVIDIA GeForce RTX 4090": rtx-4090)."""


def gpu_suggestions(name: str) -> list[str]:
    """The catalogue GPUs a mistyped ``--gpu`` (or prices key) likely meant: those its text begins (``h100``:
    h100-pcie, h100-nvl, h100-sxm); else the GPU a driver would name so ("NVIDIA A100-SXM4-80GB": a100-80gb) first,
    then the others of its model ("a100-sxm": every a100-*; difflib's closest spelling was h100-sxm); else up to
    three close spellings."""
    keys = [g.key for g in predictable()]
    n = name.strip().lower()
    starts = [k for k in keys if k.startswith(n) or k.replace("-", "").startswith(n.replace("-", ""))]
    if starts:
        return starts
    words = [w for w in re.findall(r"[a-z0-9]+", n) if w not in VENDOR_WORDS]
    model = next((w for w in words if any(c.isdigit() for c in w)), None)  # a100, 4090, v100
    driver = for_device(name)
    same = [k for k in keys if model is not None and model in k.split("-")]
    picked = [driver.key] if driver is not None and driver.key in keys else []
    found = list(dict.fromkeys(picked + same))
    return found or difflib.get_close_matches(n, keys, n=3, cutoff=0.6)


def either_of(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" or {names[-1]}"


SPEC_KEYS = ("name", "tflops", "memory_gib", "bandwidth_gbs", "sms", "capability")
OPTIONAL_SPEC_KEYS = ("tdp_w", "base_mhz", "boost_mhz", "memory", "source")


def load_spec(path: Path) -> Gpu:
    """A GPU described in JSON: {"name", "tflops": {"fp32", "tf32"?, "fp16", "bf16"?, "fp8"?}, "memory_gib",
    "bandwidth_gbs", "sms", "capability": "8.9", "source"?}."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise AmpbenchError(f"--gpu-spec {path}: cannot read it as JSON ({e})") from None
    if not isinstance(data, dict):
        raise AmpbenchError(f"--gpu-spec {path}: a JSON object is needed with keys {', '.join(SPEC_KEYS)}")
    unknown = [k for k in data if k not in SPEC_KEYS + OPTIONAL_SPEC_KEYS]
    if unknown:  # (ignored, a "memory_gb" read as a missing memory_gib, a "tdp" as no board power at all)
        said = ", ".join(f"{k!r}" + "".join(f" (did you mean {c!r}?)" for c in difflib.get_close_matches(
            k, SPEC_KEYS + OPTIONAL_SPEC_KEYS, n=1, cutoff=0.6)) for k in unknown)
        raise AmpbenchError(f"--gpu-spec {path}: unknown key{'s' if len(unknown) > 1 else ''} {said} (keys: "
                            f"{', '.join(SPEC_KEYS)}; optional: {', '.join(OPTIONAL_SPEC_KEYS)})")
    missing = [k for k in SPEC_KEYS if k not in data]
    if missing:
        raise AmpbenchError(f"--gpu-spec {path}: missing {', '.join(missing)} (keys: {', '.join(SPEC_KEYS)})")
    tflops = data["tflops"]
    if not isinstance(tflops, dict) or "fp32" not in tflops or not all(
            k in ("fp32", "tf32", "fp16", "bf16", "fp8") and isinstance(v, (int, float)) and v > 0 for k, v in tflops.items()):
        raise AmpbenchError(f"--gpu-spec {path}: tflops must map fp32 (required), tf32, fp16, bf16, fp8 to dense peak "
                            "TFLOP/s > 0")
    if not isinstance(data["sms"], int) or isinstance(data["sms"], bool):
        raise AmpbenchError(f"--gpu-spec {path}: sms is a whole number of streaming multiprocessors (e.g. 108), got "
                            f"{data['sms']!r}")
    try:
        major, minor = (int(x) for x in str(data["capability"]).split("."))
        memory_gib, bandwidth, sms = float(data["memory_gib"]), float(data["bandwidth_gbs"]), int(data["sms"])
    except (TypeError, ValueError):
        raise AmpbenchError(f"--gpu-spec {path}: capability is MAJOR.MINOR (\"8.9\"); memory_gib, bandwidth_gbs "
                            "and sms are positive numbers") from None
    if min(memory_gib, bandwidth, sms) <= 0:
        raise AmpbenchError(f"--gpu-spec {path}: memory_gib, bandwidth_gbs and sms must be > 0")
    optional: dict[str, float | str] = {}
    for key in ("tdp_w", "base_mhz", "boost_mhz"):
        if key in data:
            if not isinstance(data[key], (int, float)) or isinstance(data[key], bool) or data[key] <= 0:
                raise AmpbenchError(f"--gpu-spec {path}: {key} must be a number > 0")
            optional[key] = float(data[key])
    if "memory" in data:
        optional["memory"] = str(data["memory"])
    name = str(data["name"])
    return Gpu(key=name.lower(), name=name, match=(name.lower(),), architecture="from --gpu-spec",
               capability=(major, minor), sms=sms, base_mhz=optional.get("base_mhz"),  # type: ignore[arg-type]
               boost_mhz=optional.get("boost_mhz"), memory_gib=memory_gib, memory=optional.get("memory"),  # type: ignore[arg-type]
               bandwidth_gbs=bandwidth, tdp_w=optional.get("tdp_w"), pcie_gen=None, nvlink_gbs=None,  # type: ignore[arg-type]
               tflops={k: float(v) for k, v in tflops.items()}, fp16_native=None,
               source=str(data.get("source") or f"--gpu-spec {path}"))


def refusal(gpu: Gpu, precision: str) -> str | None:
    """Why ``gpu`` cannot run ``precision`` (as ``run`` would refuse it there), or None."""
    recipe = get(precision)
    cc = f"{gpu.capability[0]}.{gpu.capability[1]}"
    if recipe.is_fp8:
        if gpu.capability < (8, 9) or "fp8" not in gpu.tflops:
            return f"fp8 Tensor Cores need compute capability >= 8.9 (Ada, Hopper or newer); {gpu.key} is {cc}"
        return torchao_problem("fp8 predictions (torchao's Float8Linear is traced)")
    if recipe.tf32 and gpu.capability < (8, 0):
        return f"TF32 needs compute capability >= 8.0; {gpu.key} is {cc}"
    half = "bf16" if recipe.is_half and recipe.compute_dtype == torch.bfloat16 else "fp16" if recipe.is_half else None
    if half == "bf16" and gpu.capability < (8, 0):
        return f"bf16 needs compute capability >= 8.0 (Ampere or newer); {gpu.key} is {cc}"
    math_mode = "tf32" if recipe.tf32 else half
    if math_mode is not None and gpu.math_tflops(math_mode) is None:
        return f"{gpu.key}'s spec has no {math_mode} peak (add tflops.{math_mode} to --gpu-spec)"
    return None


def state_refusal(gpu: Gpu, precision: str, state: str | None) -> str | None:
    """Why ``precision`` cannot keep its optimizer's states in ``state`` on ``gpu`` (as ``run`` leaves it out there)."""
    why = optimizer_state_refusal(precision, state)
    if why is None and effective_state(precision, state) == "fp8" and gpu.capability < (8, 9):
        why = (f"fp8 optimizer states need compute capability >= 8.9 (Ada, Hopper or newer); {gpu.key} is "
               f"{gpu.capability[0]}.{gpu.capability[1]}")
    return why


def check_target(build: Callable[[], Workload], precisions: list[str],
                 optimizer_states: tuple[str | None, ...] = (None,), built: Workload | None = None,
                 trains: bool = True) -> Workload:
    """The workload ``build`` makes, on meta (``built``: one it made already), checked before anything is traced: a
    training step's (``trains``) has a parameter to train and an optimizer that steps its gradients, and its
    optimizer can hold each optimizer state asked for (torch's Adam/AdamW), as ``run`` checks them; one line
    otherwise."""
    wl = built if built is not None else build_meta(build)
    if trains:
        check_trainable(wl.model, wl.make_optimizer, wl.name)
    for state in dict.fromkeys(s for s in optimizer_states if s is not None):
        for precision in precisions:
            if optimizer_state_refusal(get(precision).name, state) is None:
                check_built(wl.make_optimizer, copy.deepcopy(wl.model).parameters(), get(precision).name, state)
    return wl


@dataclass(frozen=True)
class Question:
    """What is predicted of a target, alike on every GPU: the cells ``run`` would measure of it."""

    precisions: tuple[str, ...]
    batch_size: int | None = None
    """None: the workload's own."""
    channels_last: bool = False
    preset: str | None = None
    """The cells' preset label; None: the workload's own."""
    optimizer_states: tuple[str | None, ...] = (None,)
    """None (the optimizer as built) and the states asked for: each precision gets a row per state that is not its
    own (:mod:`ampbench.precision.optimizer_state`), refused ones with the reason."""
    inference: bool = False
    """The forward alone (:func:`~ampbench.predict.trace.trace_inference`: eval mode, no autograd, the half modes'
    models in half): its latency per batch, memory and largest batch; no optimizer state."""
    fp8: Fp8Options | None = None
    """What the fp8 modes convert (``--fp8-skip``/``--fp8-filter``), as ``run`` converts it."""
    executions: tuple[tuple[str, str], ...] = (("off", "off"),)
    """The (compile, cuda_graphs) values of ``run``'s cells (:class:`~ampbench.predict.cost.Compiled`), each with
    every precision; the default: eager."""
    checkpointing: tuple[str, ...] = ("off",)
    """The ``--checkpointing`` values, each with every execution: ``blocks`` traces the step with the model's repeated
    blocks checkpointed (their forward recomputed in the backward: its ops priced, its activations not held),
    ``selective`` with what costs no FLOPs in them recomputed (the matmul, convolution and attention outputs kept)."""
    grad_accum: int = 1
    """Micro-batches of ``batch_size`` a step accumulates before the optimizer steps (``ampbench train --grad-accum``):
    priced from three traced micro-batches (:mod:`ampbench.predict.accumulation`); the peak and the largest batch are
    the micro-batch's, the gradients of the earlier ones held."""


@dataclass(frozen=True)
class Machine:
    """Where a question is priced: the GPU, the fabric of its strategy (None: one GPU), the host that issues its ops,
    and its price (USD per hour; None: not priced)."""

    gpu: Gpu
    fab: Fabric | None = None
    host: Host = MEASURED_HOST
    usd_per_hour: float | None = None


def predict_target(label: str, build: Callable[[], Workload], question: Question, machine: Machine,
                   traces: dict[Any, Any] | None = None, built: Workload | None = None,
                   max_batch: bool = True) -> list[dict[str, Any]]:
    """One row per precision (and optimizer state) of ``question`` for the workload ``build()`` makes (built on meta:
    no memory), priced on ``machine``. ``traces``: a dict the traces are kept in, to price the same target on another
    GPU without tracing it again (the same batch). ``built``: the workload ``build`` made already, on meta (a target
    priced on many GPUs is built once: a user's factory runs, and warns, once). ``max_batch=False``: rows without the
    largest batch that fits where the batch fits (``predicted_max_batch`` None): each precision traced once, not twice
    (a check of step times and peaks against measured ones needs no more).

    Each row carries the identity of the cell ``ampbench run`` would measure (:class:`~ampbench.cells.CellId`: the
    workload's label, the preset -- the workload's own when None --, precision, batch, the execution at this memory
    format and the optimizer state), so a measurement pairs with it by that one definition."""
    q, gpu, fab, host = question, machine.gpu, machine.fab, machine.host
    precisions, channels_last, inference, fp8 = list(q.precisions), q.channels_last, q.inference, q.fp8
    optimizer_states = q.optimizer_states
    rows: list[dict[str, Any]] = []
    wl = check_target(build, precisions, optimizer_states, built, trains=not inference)
    batch = q.batch_size or wl.batch_size
    memory_format = "channels_last" if channels_last else "contiguous"
    traces = {} if traces is None else traces

    def fresh(checkpointing: str) -> Workload:
        """The workload with a model of its own (a step's setup converts it): a copy of the meta model, cheap, where
        the model can be copied; built again where it cannot; its blocks checkpointed where ``checkpointing`` says."""
        try:
            made = replace(wl, model=copy.deepcopy(wl.model))
        except Exception:  # (a model holding something deepcopy refuses: a handle, a generator)
            made = build_meta(build)
        if checkpointing != "off":
            checkpoint_blocks(made.model, label, policy=checkpointing)
        return made

    def trace_once(precision: str, state: str | None, size: int, checkpointing: str, micro_batches: int) -> Any:
        """The traced step of ``precision`` (and optimizer state) at ``size``, of ``micro_batches`` (1, or
        :data:`~ampbench.predict.accumulation.TRACED` for an accumulation), traced once."""
        engine = _engine(precision)
        key = (engine, state, size, inference, checkpointing, micro_batches)
        if key not in traces:
            with warnings.catch_warnings(record=True) as caught:  # (setup's advice, e.g. a half Adam's eps: the row's)
                warnings.simplefilter("always")
                options: dict[str, Any] = {"optimizer_state": state} if state else {}
                if fp8 is not None and get(engine).is_fp8:  # (--fp8-skip/--fp8-filter: what run converts)
                    options["fp8"] = fp8
                traces[key] = trace_inference(fresh(checkpointing), engine, size, channels_last=channels_last) \
                    if inference else trace_step(fresh(checkpointing), engine, size, channels_last=channels_last,
                                                 mp_options=options or None, micro_batches=micro_batches)
            traces[key].notes.extend(dict.fromkeys(str(w.message) for w in caught))
        return traces[key]

    def trace_of(precision: str, state: str | None = None, at: int | None = None, checkpointing: str = "off",
                 accumulate: int = q.grad_accum) -> Any:
        """The step of ``precision`` (and optimizer state) at ``batch`` (or ``at``) a micro-batch, ``accumulate``
        micro-batches a step (:func:`~ampbench.predict.accumulation.accumulated`)."""
        size = at or batch
        if accumulate == 1:
            return trace_once(precision, state, size, checkpointing, 1)
        key = ("accumulated", _engine(precision), state, size, checkpointing, accumulate)
        if key not in traces:
            traces[key] = accumulated(trace_once(precision, state, size, checkpointing, TRACED), accumulate)
        return traces[key]

    def memory_of(precision: str, state: str | None = None, checkpointing: str = "off", at: int | None = None,
                  accumulate: int = q.grad_accum) -> MemoryModel:
        """Its memory from two traces: at the batch (or ``at``; at least :data:`MIN_TRACED_BATCH`) and at twice it
        (what grows with the batch, and what does not), ``accumulate`` micro-batches a step."""
        small = max(at or batch, MIN_TRACED_BATCH)
        return MemoryModel(trace_of(precision, state, small, checkpointing, accumulate),
                           lambda: trace_of(precision, state, 2 * small, checkpointing, accumulate))

    for (compile_value, graphs), ck in itertools.product(q.executions, q.checkpointing):
        execution = Execution(compile_value, memory_format, graphs, ck)
        compiled = Compiled.of(execution)
        traced = functools.partial(trace_of, checkpointing=ck)
        memory = functools.partial(memory_of, checkpointing=ck)
        # (the step that trains an oom batch by micro-batches accumulated: found once, for its row and as a baseline)
        fit = functools.cache(functools.partial(_accumulated_fit, batch=batch, gpu=gpu, trace_of=traced,
                                                memory_of=memory, host=host, compiled=compiled, fab=fab))
        baselines: dict[str, float] = {}
        for base in ("fp32", "tf32"):
            if refusal(gpu, base) is None:  # (one that does not fit its batch: the step that trains it by
                # micro-batches accumulated, where one fits)
                unfit = _unfit_baseline_s(base, batch, gpu, traced, memory, fab, fit) \
                    if not inference and q.grad_accum == 1 else None
                baselines[base] = unfit or _step_s(traced(base), gpu, base == "tf32", fab, host, compiled, base)
        for precision in precisions:
            name = get(precision).name
            seen: set[str | None] = set()
            for asked in (None, *(() if inference else optimizer_states)):  # (a state that is the mode's own: its row)
                state = effective_state(name, asked)
                if state not in seen:
                    seen.add(state)
                    rows.append(_predict_row(label, q.preset or wl.preset, name, state, batch, execution, gpu,
                                             baselines, traced, memory, fab, host, compiled, max_batch,
                                             q.grad_accum, fit))
                    if rows[-1]["status"] == "oom" and ck == "off" and not inference and (found := len(blocks(wl.model))):
                        rows[-1]["predicted_blocks"] = found  # (the other way to that batch: --checkpointing)
                        if q.grad_accum == 1:  # (how fast, beside the accumulated step)
                            rows[-1]["predicted_checkpointed"] = _checkpointed_fit(
                                name, state, batch, gpu, trace_of, memory_of, host, compiled, fab)
    for row in rows:
        row.update(running_costs(row, gpu, machine.usd_per_hour))
        if inference:
            row["predicted_inference"] = True
    return rows


def _engine(precision: str) -> str:
    """The engine mode a precision's step is traced in (tf32 is fp32's step, its matmuls priced as TF32)."""
    return "fp32" if get(precision).name == "tf32" else get(precision).name


def _step_s(trace: Any, gpu: Gpu, tf32: bool, fab: Fabric | None, host: Host, compiled: Compiled | None,
            precision: str = "fp32") -> float:
    """The step of ``trace`` (``precision``'s) on ``gpu`` (under ``fab``'s strategy), eager or ``compiled``."""
    if fab is not None and fab.strategy == "fsdp":
        return fsdp_cost(trace, gpu, tf32, fab, layout("fsdp", get(precision)), host, compiled).step_s
    if fab is not None:
        return ddp_cost(trace, gpu, tf32, fab, host=host, compiled=compiled,
                        every_micro_batch=reduced_every_micro_batch("ddp", get(precision).master_weights)).step_s
    return price(trace, gpu, tf32=tf32, host=host, compiled=compiled).step_s


TDP_BASIS = "TDP: the board's rated power, an upper bound (no kernel table of this GPU's architecture read power)"


def running_costs(row: dict[str, Any], gpu: Gpu, usd_per_hour: float | None) -> dict[str, Any]:
    """What a predicted sample costs to run: the GPU's energy (not the host's) at the power its architecture's kernel
    table measured where one did (the row's ``predicted_step_energy_j``), else at the board's rated power (TDP: an
    upper bound, the board at its maximum); with a price, the USD per million samples."""
    # (per GPU: a GPU's power and its price buy its own samples, whatever the number of GPUs)
    rate = (row.get("predicted_samples_per_s_per_gpu") or row.get("predicted_samples_per_s")) \
        if row.get("status") == "ok" else None
    out: dict[str, Any] = {"gpu_tdp_w": gpu.tdp_w}
    if rate and row.get("predicted_power_w"):
        out["predicted_joules_per_sample"] = row["predicted_power_w"] / rate
    elif rate and gpu.tdp_w:
        out.update(predicted_joules_per_sample=gpu.tdp_w / rate, predicted_power_w=gpu.tdp_w,
                   predicted_energy_basis=TDP_BASIS)
    if usd_per_hour is not None:
        out["usd_per_hour"] = usd_per_hour
        if rate:
            out["predicted_usd_per_million_samples"] = usd_per_hour / 3600.0 / rate * 1e6
    return out


def with_library_workspaces(model: MemoryModel, gpu: Gpu, tf32: bool) -> MemoryModel:
    """The step's memory with cuDNN's convolution workspaces where a kernel table of the GPU's architecture measured
    them (each op's, in its math: :meth:`~ampbench.predict.measured_kernels.KernelTable.workspace_for`)."""
    table = measured_kernels.table_for(gpu)
    if table is None or not table.workspace:
        return model
    return model.with_workspaces(lambda op: table.workspace_for(op, math_of(op, tf32)))


def _predict_row(label: str, preset: str, name: str, state: str | None, batch: int, execution: Execution,
                 gpu: Gpu, baselines: dict[str, float], trace_of: Callable[..., Any],
                 memory_of: Callable[..., MemoryModel], fab: Fabric | None = None,
                 host: Host = MEASURED_HOST, compiled: Compiled | None = None, max_batch: bool = True,
                 accumulate: int = 1, fit: Callable[..., dict[str, Any]] | None = None) -> dict[str, Any]:
    """The row of one (precision, optimizer state -- an effective one: None for the mode's own): refused with the
    reason, ``oom`` with the predicted peak and the largest batch that fits, or priced from its trace (``trace_of``'s:
    ``accumulate`` micro-batches of ``batch`` a step). ``fit(name, state, largest=)``: an oom batch's accumulated step
    (:func:`_accumulated_fit`, bound to this batch, GPU and execution; None: not sought)."""
    cell = CellId(workload=label, preset=preset, precision=name, batch_size=batch, execution=execution,
                  optimizer_state=state, grad_accum=accumulate)
    row: dict[str, Any] = {"source": "predicted", "device": f"predicted: {gpu.key}", "gpu": gpu.key,
                           "gpu_source": gpu.source, **cell.to_row()}
    if fab is not None:  # (every row of a many-GPU question says so: a refused or oom one's title and its split too)
        row.update(strategy=fab.strategy, world_size=fab.world, gpus_per_node=fab.gpus, nodes=fab.nodes,
                   interconnect=fab.interconnect)
    why = refusal(gpu, name) or state_refusal(gpu, name, state)
    if why is not None:
        return {**row, "status": "unsupported", "reason": why, "trace_s": 0.0}
    t0 = time.perf_counter()
    try:
        trace = trace_of(name, state)
        model = with_library_workspaces(memory_of(name, state), gpu, get(name).tf32)
        mem = model.cost(gpu, batch, max_batch)
        cost = price(trace, gpu, tf32=get(name).tf32, host=host, compiled=compiled)
    except UntraceableModel:
        raise
    except AmpbenchError as e:
        return {**row, "status": "error", "reason": str(e), "trace_s": time.perf_counter() - t0}
    traced = (trace, model.trace, model.large_traced)  # (the traces it was priced from)
    traced_s = sum({id(t): t.seconds for t in traced if t is not None}.values())
    memory_keys = dict(
        predicted_peak_bytes=mem.peak, predicted_weights_bytes=mem.weights, predicted_grads_bytes=mem.gradients,
        predicted_optimizer_bytes=mem.optimizer, predicted_activation_bytes=mem.activations,
        predicted_temporary_bytes=mem.temporary, predicted_workspace_bytes=mem.workspace,
        predicted_context_bytes=mem.context, predicted_usable_bytes=mem.usable, predicted_max_batch=mem.max_batch,
        optimizer=trace.optimizer, predicted_optimizer_states=trace.optimizer_states)
    sharded = 0
    if fab is not None and fab.strategy == "fsdp":
        sharded = _fsdp_memory(trace, name, fab, model, mem, memory_keys)
    if mem.peak - sharded > mem.usable:
        largest = memory_keys["predicted_max_batch"]
        fits = "no batch fits" if not largest else f"the largest batch that fits: {largest:,}"
        if fit is not None and accumulate == 1 and not trace.inference:  # (how it trains this batch all the same)
            memory_keys.update(fit(name, state, largest=largest))
        return {**row, **memory_keys, "status": "oom", "trace_s": traced_s, "notes": list(trace.notes),
                "reason": f"predicted peak {(mem.peak - sharded) / 2**30:,.1f} GiB exceeds the "
                          f"{mem.usable / 2**30:,.1f} GiB the allocator can fill on {gpu.key} ({fits})"}
    peak = gpu.math_tflops(cost.math_mode) or gpu.tflops["fp32"]
    grouped = any(op.conv is not None and op.conv.groups > 1 for op in trace.ops)
    trust = band(gpu, cost.op_split, cost.math_mode, cost.bound, compiled=compiled is not None, grouped=grouped)
    step_s, world, spread = (cost.step_s, 1, {}) if fab is None else \
        (_fsdp if fab.strategy == "fsdp" else _ddp)(trace, gpu, name, fab, host, compiled, cost.step_s, batch)
    time_split, bound = cost.time_split, cost.bound
    comm = spread.get("predicted_comm_share")
    if comm:  # the collectives a step waits on: a share of its own, the rest of the split in proportion
        time_split = {**{k: v * (1 - comm) for k, v in cost.time_split.items()}, "communication": comm}
        bound = bound_of(time_split)
    if cost.energy_j is not None and cost.idle_w is not None:  # (a collective waited on: the board idle)
        energy_j = cost.energy_j + max(0.0, step_s - cost.step_s) * cost.idle_w
        spread.update(predicted_step_energy_j=energy_j, predicted_power_w=energy_j / step_s,
                      predicted_energy_basis=f"measured power: {cost.kernels} ({cost.powered_share:.0%} of the GPU "
                                             "time at its kernel kind's own reading)")
    if compiled is not None:  # the compile gain: this precision's eager step over this one
        spread["predicted_speedup_vs_eager"] = _step_s(trace, gpu, get(name).tf32, fab, host, None, name) / step_s
    flops = cost.flops
    if execution.checkpointing != "off":  # (the model's FLOPs, as run counts them: the recompute said apart)
        flops = price(trace_of(name, state, checkpointing="off"), gpu, tf32=get(name).tf32, host=host,
                      compiled=compiled).flops
        spread["recomputed_flops_per_step"] = cost.flops - flops
    return {**row, **memory_keys, **trust.as_row(), **spread, **dict(
        status="ok", predicted_step_ms=step_s * 1e3, predicted_samples_per_s=world * batch * accumulate / step_s,
        predicted_speedup_vs_fp32=baselines["fp32"] / step_s if "fp32" in baselines else None,
        predicted_speedup_vs_tf32=baselines["tf32"] / step_s if "tf32" in baselines else None,
        predicted_mfu=flops / step_s / (peak * 1e12), predicted_math_mode=cost.math_mode,
        predicted_bound=bound, predicted_time_split=time_split, predicted_op_split=cost.op_split,
        flops_per_step=flops, predicted_ops=cost.ops, predicted_launches=cost.launches,
        predicted_host_ms=cost.host_s * 1e3, predicted_gpu_ms=cost.gpu_s * 1e3,
        predicted_host=host.label,
        predicted_kernels=(f"measured: {cost.kernels}, {cost.measured_share:.0%} of the GPU time" if cost.kernels
                           else "model: the kernel constants fitted on measured kernels of 9 GPUs, datasheet peaks"),
        fp8_layers=trace.fp8_layers,
        notes=[*cost.notes, *trace.notes, *([COMPILED] if compiled is not None else []), *_fp8_none(trace),
               *([FP8_COMPILED if compiled is not None and compiled.fuse else FP8_EAGER] if get(name).is_fp8 else [])],
        trace_s=traced_s)}


def _accumulated_fit(name: str, state: str | None, batch: int, largest: int | None, gpu: Gpu,
                     trace_of: Callable[..., Any], memory_of: Callable[..., MemoryModel], host: Host,
                     compiled: Compiled | None, fab: Fabric | None = None) -> dict[str, Any]:
    """Where ``name`` does not fit ``batch`` on ``gpu`` (a rank of ``fab``'s strategy: its share under FSDP) and a
    smaller batch does (``largest``): the step that trains ``batch`` samples (a GPU) all the same, as the fewest equal
    micro-batches whose accumulated step fits (``ampbench train --grad-accum N``, with ``--strategy``;
    :func:`~ampbench.execution.micro_batches.split`) -- the gradients of the earlier micro-batches held through each
    one's forward and backward, so the split is checked on the accumulated step's own peak and made finer where that
    does not fit -- its time (the step's reductions as ``train`` runs them), samples/s (every rank's) and peak
    (``predicted_accumulated_*``); where no micro-batch fits, those keys 0 (rows from before the keys: none)."""
    tf32 = get(name).tf32
    parts = split(batch, largest)
    while parts is not None:
        n, micro = parts
        model = with_library_workspaces(memory_of(name, state, at=micro, accumulate=n), gpu, tf32)
        trace, mem = trace_of(name, state, micro, accumulate=n), model.cost(gpu, micro)
        peak, most = _rank_memory(trace, name, fab, model, mem)
        if peak <= mem.usable:
            step_s = _step_s(trace, gpu, tf32, fab, host, compiled, name)
            return {"predicted_accumulated_micro_batches": n, "predicted_accumulated_batch": micro,
                    "predicted_accumulated_step_ms": step_s * 1e3,
                    "predicted_accumulated_samples_per_s": (fab.world if fab else 1) * batch / step_s,
                    "predicted_accumulated_peak_bytes": peak}
        parts = split(batch, min(most or 0, micro - 1))  # (the held gradients: a finer split)
    return {"predicted_accumulated_micro_batches": 0, "predicted_accumulated_batch": 0}  # (none fits: said so)


def _checkpointed_fit(name: str, state: str | None, batch: int, gpu: Gpu, trace_of: Callable[..., Any],
                      memory_of: Callable[..., MemoryModel], host: Host, compiled: Compiled | None,
                      fab: Fabric | None) -> dict[str, dict[str, float]]:
    """Where ``name`` does not fit ``batch`` on ``gpu`` (a rank of ``fab``'s) without checkpointing: the same batch
    with the model's repeated blocks checkpointed, each policy (``--checkpointing blocks``, ``selective``): its peak
    (a rank's under FSDP) and, where that fits, its step and samples/s (every rank's) -- the other way to the batch,
    priced beside the accumulated step (:func:`_accumulated_fit`) so the faster of the two can be named."""
    tf32, out = get(name).tf32, {}
    for policy in POLICIES:
        trace = trace_of(name, state, checkpointing=policy)
        model = with_library_workspaces(memory_of(name, state, checkpointing=policy), gpu, tf32)
        mem = model.cost(gpu, batch, max_batch=False)
        peak = mem.peak - _fsdp_share(trace, name, fab, model, mem)[1] if fab and fab.strategy == "fsdp" else mem.peak
        out[policy] = {"peak_bytes": float(peak)}  # (the peak alone: no largest batch sought, no second trace)
        if peak <= mem.usable:
            step_s = _step_s(trace, gpu, tf32, fab, host, compiled, name)
            out[policy].update(step_ms=step_s * 1e3, samples_per_s=(fab.world if fab else 1) * batch / step_s)
    return out


def _rank_memory(trace: Any, name: str, fab: Fabric | None, model: MemoryModel, mem: Any) -> tuple[int, int | None]:
    """(peak, largest batch) of one GPU's step: ``mem``'s, or a rank's share of it under FSDP2."""
    if fab is None or fab.strategy != "fsdp":
        return mem.peak, mem.max_batch
    keys: dict[str, Any] = {}
    _fsdp_memory(trace, name, fab, model, mem, keys)
    return keys["predicted_peak_bytes"], keys["predicted_max_batch"]


def _unfit_baseline_s(base: str, batch: int, gpu: Gpu, trace_of: Callable[..., Any],
                      memory_of: Callable[..., MemoryModel], fab: Fabric | None,
                      fit: Callable[..., dict[str, Any]]) -> float | None:
    """A baseline (fp32, tf32) that does not fit ``batch`` on ``gpu`` (a rank's share under ``fab``): its accumulated
    step's seconds (``fit``: :func:`_accumulated_fit`'s, as its row finds it: what "x fp32" is then over, a step one
    can run, the same samples a step); None where it fits or no micro-batch does."""
    model = with_library_workspaces(memory_of(base), gpu, get(base).tf32)
    mem = model.cost(gpu, batch, max_batch=False)  # (the largest batch is found where one GPU's step does not fit)
    peak, most = _rank_memory(trace_of(base), base, fab, model, mem)
    if peak <= mem.usable:
        return None
    ms = fit(base, None, largest=most).get("predicted_accumulated_step_ms")
    return ms / 1e3 if ms else None


def _fsdp_memory(trace: Any, name: str, fab: Fabric, model: MemoryModel, mem: Any, memory_keys: dict[str, Any]) -> int:
    """FSDP2's memory per rank: each rank holds 1/N of the weights, gradients and optimizer state and the units it is
    computing (the half gradients master-* holds beside its masters before moving them: per unit too). Updates
    ``memory_keys`` to the rank's; returns the bytes a rank holds less than one device would."""
    rank, sharded = _fsdp_share(trace, name, fab, model, mem)
    memory_keys.update(predicted_weights_bytes=rank.weights, predicted_grads_bytes=rank.gradients,
                       predicted_optimizer_bytes=rank.optimizer, predicted_peak_bytes=mem.peak - sharded,
                       predicted_max_batch=model.max_batch(mem.usable + sharded, mem.workspace))
    return int(sharded)


def _fsdp_share(trace: Any, name: str, fab: Fabric, model: MemoryModel, mem: Any) -> tuple[Any, float]:
    """(a rank's :class:`~ampbench.predict.parallel.FsdpMemory`, the bytes it holds less than one device would)."""
    rank = fsdp_memory(trace, layout("fsdp", get(name)), fab.world, mem.weights, mem.gradients, mem.optimizer)
    return rank, mem.weights + mem.gradients + mem.optimizer - rank.held + model.in_flight


def _fabric_keys(fab: Fabric, world: int, samples: int, step_s: float) -> dict[str, Any]:
    """``samples``: one GPU's a step (its batch x the micro-batches it accumulates)."""
    return {"world_size": world, "gpus_per_node": fab.gpus, "nodes": fab.nodes, "interconnect": fab.interconnect,
            "predicted_bus_gbs": fab.bus_gbs, "predicted_samples_per_s_per_gpu": samples / step_s}


def _fsdp(trace: Any, gpu: Gpu, name: str, fab: Fabric, host: Host, compiled: Compiled | None, single_s: float,
          batch: int) -> tuple[float, int, dict[str, Any]]:
    """FSDP2's step: each unit's all-gather and reduce-scatter, what the compute waits on of them; (step seconds, world,
    the row's keys)."""
    f = fsdp_cost(trace, gpu, get(name).tf32, fab, layout("fsdp", get(name)), host, compiled, single_s)
    return f.step_s, fab.world, {
        "strategy": "fsdp", **_fabric_keys(fab, fab.world, batch * trace.accumulate, f.step_s),
        "predicted_allgather_ms": f.allgather_s * 1e3, "predicted_reduce_scatter_ms": f.reduce_scatter_s * 1e3,
        "predicted_fsdp_units": f.units, "predicted_reductions": trace.accumulate,
        "predicted_comm_ms": f.exposed_s * 1e3,
        "predicted_comm_share": f.exposed_s / f.step_s, "predicted_scaling_efficiency": f.scaling_efficiency,
        "predicted_comm_bytes_per_step": f.comm_bytes}


def _ddp(trace: Any, gpu: Gpu, name: str, fab: Fabric, host: Host, compiled: Compiled | None, single_s: float,
         batch: int) -> tuple[float, int, dict[str, Any]]:
    """DDP's step: each rank's step with the all-reduce it cannot hide (samples/s of all ranks); (step seconds, world,
    the row's keys)."""
    every = reduced_every_micro_batch("ddp", get(name).master_weights)
    d = ddp_cost(trace, gpu, get(name).tf32, fab, single_s=single_s, host=host, compiled=compiled,
                 every_micro_batch=every)
    return d.step_s, fab.world, {
        "strategy": "ddp", **_fabric_keys(fab, fab.world, batch * trace.accumulate, d.step_s),
        "predicted_reductions": trace.accumulate if every else 1,
        "predicted_allreduce_ms": d.allreduce_s * 1e3, "predicted_comm_ms": d.exposed_s * 1e3,
        "predicted_comm_share": d.exposed_s / d.step_s, "predicted_scaling_efficiency": d.scaling_efficiency}


def _fp8_none(trace: Any) -> list[str]:
    """An fp8 mode where no Linear layer qualified: what it is then (the bf16 step, op for op), and why."""
    if trace.fp8_layers is None or not trace.fp8_layers.startswith("0/"):
        return []
    return [f"fp8: no layer converted ({trace.fp8_layers}): this row is amp-bf16's step, op for op -- "
            "--fp8-filter/--fp8-skip decide which layers qualify"]


FP8_EAGER = ("fp8 predicted eager: torchao's dynamic scaling and casting run as the separate kernels traced (amax, "
             "scale, cast of each operand), its matmuls as torch._scaled_mm at the fp8 rate; ampbench run compiles fp8 "
             "on CUDA by default, which fuses the casts (predict --compile on): this row pairs with run --compile off")
FP8_COMPILED = ("fp8 predicted compiled: torchao's amax, scale and cast of each operand fused by Inductor with the "
                "model's other elementwise ops, its matmuls as torch._scaled_mm at the fp8 rate")
COMPILED = ("compiled as ampbench run compiles it (the model's forward and backward; the loss, the engine's step and "
            "the optimizer eager): Inductor's fusions re-derived from the traced data flow, the host's launch and graph "
            "costs priors (docs/predict.md, torch.compile); memory as the eager step holds it")
