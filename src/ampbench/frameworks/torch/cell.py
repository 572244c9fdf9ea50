"""Run one cell in this process and return its row. Failures become a status, never an exception.

Order inside a cell (throughput + memory): build the workload; reset memory peaks; move the model
to the device and set it up; time the first step apart; one step counting the bytes autograd saves
(activations), reading what weights/grads/optimizer state hold and -- eager, one micro-batch a step -- counting the
FLOPs (else one step more counts them); restart the peaks (steady-state steps from here); ``warmup - 1`` plain
warm-up steps; ``steps`` timed steps; then read the memory peaks.
"""

from __future__ import annotations

import contextlib
import importlib
import time
import warnings
from typing import Any

import torch
import torch.distributed as dist

from ampbench import phases, progress
from ampbench.bench.cell_row import add_warnings, judge_timed_steps
from ampbench.bench.scenario import CellVerbs, EstimatedSteps, check_budget
from ampbench.cells import CellSpec, memory_step_counts_flops
from ampbench.distributed.comm import bytes_per_step
from ampbench.distributed.units import blocks, fsdp_split
from ampbench.errors import AmpbenchError, UnsupportedPrecisionError
from ampbench.execution import check_memory_format, compile_counts, cuda_graphs_problem, graph_break_reasons
from ampbench.execution.checkpointing import check_blocks, checkpointed_names, compiled_batchnorm_doubt
from ampbench.measure import memory as mem
from ampbench.measure.converge import converge, workload_length
from ampbench.measure.energy import NO_ENERGY, EnergyMeter
from ampbench.measure.env import device_gpu_memory, device_name, environment, process_gpu_memory
from ampbench.measure.flops import count_step, mfu
from ampbench.measure.inference import inference_latency
from ampbench.measure.peaks import math_mode_of
from ampbench.measure.seeds import eval_batches
from ampbench.measure.step import TrainStep, build_step, data_loading_ms
from ampbench.measure.timing import on_device, time_once, time_steps
from ampbench.measure.trainable import UnusedParametersWarning, check_trainable
from ampbench.precision import get, supported
from ampbench.precision.optimizer_state import check_optimizer
from ampbench.precision.optimizer_state import describe as describe_states
from ampbench.precision.optimizers import DIRECTLY, implementation
from ampbench.workloads import build_target
from ampbench.workloads.base import Workload
from ampbench.workloads.factory import build_meta
from ampbench.workloads.meta_check import checked_by_the_run

DTYPE_NAMES = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}


def build_workload(spec: CellSpec, seed: int | None = None, checked: bool = False) -> Workload:
    """The cell's workload. ``checked``: the run built this target for real before its first cell
    (:func:`ampbench.bench.runner.validate_inputs`), so a module's check forward runs on a meta copy of it
    (:mod:`ampbench.workloads.meta_check`: ~0.1 s, where GPT-2 at 1,024 tokens took 7 s on the host each cell, trial
    and seed)."""
    with checked_by_the_run() if checked else contextlib.nullcontext():
        return build_target(spec.workload, spec.model, spec.preset, spec.data,
                            spec.measure.seed if seed is None else seed,
                            preset_given=False)  # (a preset the user gave was checked when the run was planned)


def _built(spec: CellSpec, seed: int | None = None) -> Workload:
    """A run's cell, trial or convergence seed builds its workload so: its inputs were checked before any cell."""
    return build_workload(spec, seed, checked=True)


def validate_cell_inputs(spec: CellSpec) -> None:
    """Build the cell's workload (data read and checked, a --model's forward on 2 samples) and check that
    its execution applies to it: an AmpbenchError says what is wrong. A cell whose inputs need no real build has only
    its optimizer to check (an --optimizer-state): built on meta (no memory, no init)."""
    check_execution(spec, build_workload(spec) if spec.inputs_need_a_build else build_meta(lambda: build_workload(spec)))


def validate(spec: CellSpec) -> dict[str, Any]:
    """The cell's inputs checked by building it (a job's answer): {"error": one line or ""}."""
    try:
        validate_cell_inputs(spec)
    except AmpbenchError as e:
        return {"error": str(e)}
    return {"error": ""}


def _recomputed_flops(wl: Workload, step: TrainStep) -> int:
    """The FLOPs a checkpointed step's backward recomputes: its checkpointed blocks' forward, counted on one forward
    of the model without autograd (which holds no activations: a batch that fits checkpointed fits it), once per
    micro-batch of an accumulating step; none under
    ``selective``, which keeps the outputs of every op the count counts (``execution.checkpointing.selective_kept``)."""
    if step.execution.checkpointing == "selective":
        return 0
    model = step.eager_model or step.model
    names = [n.removeprefix("module.").removeprefix("_orig_mod.") for n in checkpointed_names(model)]  # (as by_module)
    inputs, _ = step.batches[0]
    with torch.no_grad(), step.mp.autocast():
        forward = count_step(lambda: wl.call_model(model, inputs))
    return step.micro_batches * sum(forward.by_module.get(name, 0) for name in names)  # (each micro-batch's backward)


def check_execution(spec: CellSpec, wl: Workload) -> None:
    """The cell's execution applies to this device and model (CUDA graphs need CUDA, channels-last 4-D inputs), and
    its optimizer state to the workload's optimizer (torch's Adam/AdamW)."""
    spec.execution.check_device(spec.device)
    check_memory_format(spec.execution, wl.example_batch(2)[0], spec.label)
    if spec.execution.checkpointing != "off":
        check_blocks(wl.model, spec.label, spec.execution.checkpointing)
    if spec.optimizer_state is not None:
        check_optimizer(wl.make_optimizer(wl.model.parameters()), spec.optimizer_state)
    check_trainable(wl.model, wl.make_optimizer, spec.label)  # (every cell trains: inference is timed after its steps)


def verbs(spec: CellSpec) -> TorchCell:
    """The cell's verbs (the harness measures the cell through them: :func:`ampbench.bench.jobs.run_cell`)."""
    return TorchCell(spec)


class TorchCell(CellVerbs[Workload, TrainStep]):
    """A PyTorch cell's verbs: the model under ampbench's engine on the cell's device."""

    def __init__(self, spec: CellSpec) -> None:
        self.spec = spec
        self.device = torch.device(spec.device)
        self.base_rss: int | None = None
        self.built: Workload | None = None

    def open(self, spec: CellSpec, row: dict[str, Any]) -> Any:
        row["device_name"] = device_name(self.device)
        sup = supported(spec.precision, self.device)
        if not sup.ok:
            raise UnsupportedPrecisionError(sup.reason)
        if self.device.type == "cuda":  # (its own phase: the CUDA context, otherwise paid inside the model's setup)
            phases.enter("cuda_init", "starting CUDA")
            torch.empty(1, device=self.device)
        return on_device(self.device)  # (cuda:N: events and streams are the current device's)

    def build_ahead(self, spec: CellSpec) -> None:
        # (one thread: the cell measuring meanwhile keeps the host's cores; its own threads come back after)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            self.built = _built(spec)
            # torch.optim's Optimizer.__init__ imports torch._dynamo on its first call (torch._disable_dynamo): 3.5 s
            # of every cell's engine set-up on the lent H200's image. The fork server imports it once where that
            # leaves its forks CUDA-safe (ForkServer.warm); where it could not, this cell imports it before its turn
            importlib.import_module("torch._dynamo")
        finally:
            torch.set_num_threads(threads)

    def build(self, spec: CellSpec, row: dict[str, Any]) -> Workload:
        wl, self.built = self.built or _built(spec), None
        self.base_rss = _cpu_baseline(spec, wl, self.device)
        row.update(mem.model_sizes(wl.model))
        row["repeated_blocks"] = len(blocks(wl.model)) or None  # (what --checkpointing would checkpoint: the oom advice)
        return wl

    def batch_size(self, workload: Workload) -> int:
        return workload.batch_size

    def metric_name(self, workload: Workload) -> str | None:
        return workload.metric.name if workload.metric else None

    def throughput_memory(self, workload: Workload, spec: CellSpec, batch_size: int, row: dict[str, Any]) -> TrainStep:
        step, measured = throughput_memory(workload, spec, batch_size, self.device, self.base_rss)
        add_warnings(row, measured.pop("warnings", None))  # (after the max-batch search's)
        row.update(measured)
        return step

    def converge(self, workload: Workload, spec: CellSpec, batch_size: int, row: dict[str, Any]) -> dict[str, Any]:
        m = spec.measure
        conv = converge(lambda s: _built(spec, s), spec.precision, self.device, m.converge_steps, m.seeds,
                        spec.batch_size, m.seed, spec.recipe.loss_scale, spec.mp_options(), spec.execution)
        row["fp8_layers"] = row.get("fp8_layers") or conv.pop("fp8_layers")  # (a converge-only fp8 row says it too)
        return conv

    def inference(self, trained: TrainStep, workload: Workload, sizes: list[int], iters: int) -> dict[str, Any]:
        return inference_latency(trained, sizes, iters=iters)

    def finish(self, trained: TrainStep | None, row: dict[str, Any]) -> None:
        recipe = get(self.spec.precision)
        if row.get("env") is None:
            ctx = trained.mp.autocast() if trained is not None else recipe.forward_context(self.device.type)
            with ctx:
                row["env"] = environment(self.device)
        row["math_mode"] = _math_mode(recipe, row["env"], row.get("fp8_flops_share"))

    def close(self) -> None:
        if self.device.type == "cuda":
            if self.spec.execution.compiled:  # (--no-isolate: the next cell in this process must not find this
                # one's compiled graphs and CUDA-graph memory pools held in its peaks)
                from torch._dynamo import reset  # lazy: torch._dynamo

                reset()
            torch.cuda.empty_cache()

    def is_oom(self, e: BaseException) -> bool:
        return mem.is_oom(e)

    def trial_peak(self, spec: CellSpec, batch_size: int) -> tuple[int | None, int | None]:
        wl = _built(spec)
        peaks = mem.PeakMemory(self.device)
        peaks.start(_cpu_baseline(spec, wl, self.device))
        # (the batches staged as the timed cell stages them: with one, a CPU trial at mnist-cnn's max batch held 24 MiB
        # less than the timed run there, which then went over the --memory-budget the trial said it fits)
        step = build_step(wl, spec.precision, batch_size, self.device, spec.recipe.loss_scale,
                          mp_options=spec.mp_options(), execution=spec.execution, micro_batches=spec.grad_accum)
        for _ in range(spec.measure.maxbatch_trial_steps):
            step()
        peak = peaks.peak()
        if self.device.type != "cuda":
            return peak["cpu_rss_peak"], None
        return peak["reserved"], torch.cuda.get_device_properties(self.device).total_memory

    def estimate_process(self, spec: CellSpec) -> float:
        """What every cell's fresh process pays before its first step, timed here: on a CPU the runtime's warm-up the
        memory baseline runs (oneDNN's set-up, the optimizer's first-step imports: ~0.7 s, most of a tiny cell's
        1 s -- a 16-cell tiny run was estimated at ~1 s and took 20); on CUDA the context and cuBLAS's handle."""
        device = torch.device(spec.device)
        t = time.perf_counter()
        if device.type == "cuda":
            x = torch.ones(64, 64, device=device)
            (x @ x).sum().item()
        else:
            mem.warm_runtime("fp32", lambda params: torch.optim.AdamW(params))
        return time.perf_counter() - t

    def estimate_steps(self, spec: CellSpec) -> EstimatedSteps:
        device = torch.device(spec.device)
        sup = supported(spec.precision, device)
        if not sup.ok:
            raise UnsupportedPrecisionError(sup.reason)
        t0 = time.perf_counter()
        wl = _built(spec)
        build_s = time.perf_counter() - t0
        batch = spec.batch_size or wl.batch_size
        step = build_step(wl, spec.precision, batch, device, spec.recipe.loss_scale, n_batches=2,
                          mp_options=spec.mp_options(), micro_batches=spec.grad_accum)
        time_once(step, device)  # (the first step: eager, a step like the others once warm)
        evals = eval_batches(len(wl.test_data) if wl.test_data is not None else None, batch)
        return EstimatedSteps(build_s, workload_length(wl, batch), time_once(step, device) / 1e3, eval_batches=evals,
                              batch_size=batch)


def _cpu_baseline(spec: CellSpec, wl: Workload, device: torch.device) -> int | None:
    """CPU: RSS to measure growth from (runtime warmed up, the model's fp32 weights counted as growth). GPU: None."""
    if device.type != "cpu":
        return None
    mem.warm_runtime(spec.precision, wl.make_optimizer)
    return mem.rss() - mem.module_bytes(wl.model)


def _math_mode(recipe: Any, env: dict[str, Any], fp8_share: float | None = None) -> str:
    """The math the GEMMs ran in: the recipe's (fp8: unless no layer converted, then bf16's) or its compute dtype's,
    tf32 when the flags were on."""
    mode = recipe.math_mode if not (recipe.math_mode == "fp8" and fp8_share == 0) else None
    return math_mode_of(mode or DTYPE_NAMES.get(recipe.compute_dtype, "fp32"), bool(env["tf32_matmul"]))


def counted_in_the_memory_step(spec: CellSpec) -> bool:
    """Whether this cell's memory step counts its FLOPs (:func:`ampbench.cells.memory_step_counts_flops`)."""
    return memory_step_counts_flops(spec.execution.compiled, spec.grad_accum)


def throughput_memory(wl: Workload, spec: CellSpec, batch_size: int, device: torch.device,
                      base_rss: int | None) -> tuple[TrainStep, dict[str, Any]]:
    """Set up and time ``spec.measure.steps`` steps after warm-up; peaks and the memory split."""
    out: dict[str, Any] = {}
    execution = spec.execution
    check_execution(spec, wl)
    peaks = mem.PeakMemory(device)
    peaks.start(base_rss)
    # (phase "setup": the scenario entered it)
    torch.manual_seed(spec.measure.seed)  # (dropout: the steps' random draws the seed's, wherever the process came from)
    with warnings.catch_warnings(record=True) as caught:  # setup's warnings explain a later divergence
        warnings.simplefilter("always")
        step = build_step(wl, spec.precision, batch_size, device, spec.recipe.loss_scale, mp_options=spec.mp_options(),
                          execution=execution, phase=phases.enter, micro_batches=spec.grad_accum)
    if step.mp.fp8_layers is not None:
        out["fp8_layers"] = step.mp.fp8_layers.summary()
    doubt = compiled_batchnorm_doubt(step.eager_model or step.model, execution.compiled)
    out["warnings"] = [str(w.message) for w in caught if issubclass(w.category, UnusedParametersWarning)]
    # (the engine's kernel fallbacks: the same math another way, which is what was timed -- an LSTM on torch's native
    # fp16 kernel, a strided convolution over a 1x1 input as its center tap where this CPU's kernel computed it wrong;
    # the row said nothing of them)
    out["warnings"] += [f"kernel fallback: {note}" for note in step.mp.fallbacks]
    if doubt is not None:
        out["warnings"].append(doubt)
    if step.mp.placement.layout is not None:
        out["comm_bytes_per_step"] = _comm_bytes(wl.model, step.mp)
    phases.enter("environment", "reading the environment (NVML, library versions)")
    with step.mp.autocast():
        out["env"] = environment(device)  # TF32 flags as this mode runs its GEMMs
    counts0 = compile_counts()
    phases.enter("first_step", "first step" + (" (compiling)" if execution.compiled else ""))
    out["first_step_ms"] = time_once(step, device)  # compiled: tracing and compiling forward and backward happen here
    counts1 = compile_counts()
    both = counted_in_the_memory_step(spec)
    phases.enter("memory_step", "memory step (saved activations" + (", FLOPs)" if both else ")"))
    # the weights, gradients and optimizer state read in this step where the first one updated the weights: they
    # were read in a step of their own after the timed ones (on the CPU, GPT-2 small's 0.9 s of a 7.7 s cell)
    held_now: list[Any] = []
    with mem.saved_activations(step.eager_model or step.model) as act:
        def memory_step() -> None:  # (what one micro-batch holds for its backward: an accumulating step's are freed
            step(micro_batches=1, after_backward=step.state_reader(held_now) if step.updated() else None)  # in turn)

        flops = count_step(memory_step) if both else None
        if not both:
            memory_step()
    out["activation_bytes"] = act[0]
    if flops is None:
        phases.enter("flop_count", "FLOP count step")
        # eager: a compiled frame called under the FLOP counter's dispatch mode stops running compiled code (the same
        # FLOPs)
        flops = count_step(lambda: step(eager=True))
    out["flops_per_step"], out["conv_flops_share"] = flops.total, flops.conv_share
    if execution.checkpointing != "off":  # (the model's FLOPs: the backward's recompute of the blocks left out)
        out["recomputed_flops_per_step"] = recomputed = _recomputed_flops(wl, step)
        out["flops_per_step"] = flops.total - recomputed
    fp8_share = None
    if step.mp.fp8_layers is not None:  # what ran in fp8: the converted layers' share of the FLOPs
        fp8_share = out["fp8_flops_share"] = flops.share_of(step.mp.fp8_layers.converted) or 0.0
        if not step.mp.fp8_layers.converted:
            out.setdefault("warnings", []).append(f"no Linear layer was converted to fp8 ({step.mp.fp8_layers.summary()}): "
                                                  "every GEMM ran in bf16, so this row is amp-bf16's math (math_mode "
                                                  "bf16)")
    # The peaks are a training step's in steady state: from here (warm-up and timed steps), the weights and optimizer
    # state held now their floor. Not the first step's (compiling: tracing, autotuning, a CUDA graph's capture) nor
    # the eager FLOP step's, which a compiled cell would otherwise report as its peak (compile's savings never shown).
    peaks.restart()
    phases.enter("warmup", "warm-up", say=False)
    warm = progress.Steps("warm-up", max(1, spec.measure.warmup), done=1)  # (the first step was the first of them)
    for i in range(1, warm.n):
        step()
        warm(i + 1)
    skipped_before, reads_before, direct_before = step.mp.totals["skipped_steps"], step.mp.host_reads, \
        step.mp.direct_steps
    counts2 = compile_counts()
    phases.enter("timed_steps", "timed steps", say=False)
    meter = EnergyMeter(device)
    timing = time_steps(step, spec.measure.steps, device, on_step=progress.Steps("timed steps", spec.measure.steps),
                        meter=meter)
    counts3 = compile_counts()
    phases.enter("after_steps", "reading the measurements")
    out["host_reads_per_step"] = (step.mp.host_reads - reads_before) / spec.measure.steps
    out["optimizer_impl"] = implementation(step.optimizer) + (
        DIRECTLY if step.mp.direct_steps - direct_before == spec.measure.steps else "")
    out["optimizer_states"] = describe_states(step.optimizer)
    skipped_timed = step.mp.totals["skipped_steps"] - skipped_before
    if meter.available:  # (the energy window: at least MIN_WINDOW_S, the timed steps' counts read before)
        phases.enter("energy_steps", "energy steps")
        energy = meter.finish(step, spec.measure.steps)
        phases.enter("after_steps", "reading the measurements")
    else:
        energy = None
    step.mp.check_divergence()  # (fused optimizers: no step read the flag; a collapsed scale is a diverged cell)
    if execution.compiled:
        step(probe=True)  # one more step, after the timed ones: did they run compiled code?
        if not step.ran_compiled:  # a compiled row that timed eager code would be a wrong number
            raise AmpbenchError(f"torch.compile fell back to eager: the timed steps did not run the compiled model "
                                f"({counts3.graphs - counts0.graphs} graphs compiled; dynamo's recompile limit, or a "
                                "frame it skipped)")
        skipped_graphs = cuda_graphs_problem(execution, counts3 - counts0)  # (nor a CUDA-graph row run without them)
        if skipped_graphs:
            raise AmpbenchError(skipped_graphs)
        out.update(_compile_keys(execution, out["first_step_ms"], counts1 - counts0, counts3 - counts0,
                                 counts3 - counts1, counts3 - counts2))
    loss = float(step.last_loss) if step.last_loss is not None else float("nan")
    samples = batch_size * spec.grad_accum  # (a step's: every micro-batch's)
    out.update(timing.throughput_row(samples))
    out.update(energy.row(samples) if energy is not None else NO_ENERGY)
    out["data_ms_per_batch"] = data_loading_ms(wl.train_data, batch_size, device, seed=spec.measure.seed)
    out["final_loss"] = loss
    # (else after the timed steps: the optimizer state exists once a step was not skipped)
    held = held_now[0] if held_now else step.state_bytes()
    if held is not None:
        out.update(held.as_row())
    out["skipped_steps"] = step.mp.totals["skipped_steps"]
    out["loss_scale"] = step.mp.scale
    peak = peaks.peak()
    out["peak_allocated_bytes"], out["peak_reserved_bytes"] = peak["allocated"], peak["reserved"]
    out["cpu_rss_peak_bytes"] = peak["cpu_rss_peak"]
    # what memory_saving_vs_fp32 compares: the split counted tensor by tensor on a CPU, the allocator's peak on CUDA
    out["memory_source"] = "exact split" if device.type == "cpu" else "torch.cuda max_memory_allocated"
    out["nvml_used_bytes"] = process_gpu_memory(device) if device.type == "cuda" else None
    out["gpu_used_bytes"] = device_gpu_memory(device) if device.type == "cuda" else None
    out["math_mode"] = _math_mode(get(spec.precision), out["env"], fp8_share)
    out.update(mfu(out["flops_per_step"], spec.measure.steps, timing.total_s, out["env"]["device_name"], out["math_mode"],
                   device.type, fp8_share))
    hints = [str(w.message).split(":")[0] for w in caught if "eps" in str(w.message)]
    judge_timed_steps(out, loss, skipped_timed, spec.measure.steps, step.calls, step.mp.scale,
                      f"{hints[0]} (use master-* or a larger eps)" if hints else "")
    check_budget(spec, peak["cpu_rss_peak"] if device.type == "cpu" else peak["reserved"], "memory")
    return step, out


def _comm_bytes(model: torch.nn.Module, mp: Any) -> int:
    return bytes_per_step(mp.placement.layout, model, dist.get_world_size(), fsdp_split(model, mp))


def _compile_keys(execution: Any, first_step_ms: float, first: Any, cell: Any, after_first: Any, timed: Any) -> dict[str, Any]:
    """What torch.compile did in a cell: the first step's seconds (compile included), graphs compiled,
    breaks, recompiles after the first step and inside the timed steps, whether Inductor's on-disk
    cache served the compile (then compile_s is far below a cold compile's)."""
    cache = None
    if first.cache_hits or first.cache_misses:
        cache = "hit" if not first.cache_misses else "miss" if not first.cache_hits else "partial"
    return {"torch_compile": execution.torch_compile_text(), "compile_s": first_step_ms / 1e3,
            "compile_cache": cache, "graphs_compiled": cell.graphs, "graph_breaks": cell.breaks,
            "graph_break_reasons": graph_break_reasons() if cell.breaks else [],
            "recompiles": after_first.graphs, "recompiles_timed": timed.graphs}
