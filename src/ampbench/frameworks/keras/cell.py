"""One Keras cell measured in this process (a fresh one: the backend is chosen before keras is imported).

Order, as a PyTorch cell's: the backend activated and the precision's dtype policy set (before any model exists);
a warm-up model trained two steps (the backend's one-time costs: thread pools, the optimizer's first step) and the
memory baseline taken; the workload built under the policy and compiled; the first step timed apart (tracing and
compiling ``fit``'s train function); ``warmup - 1`` warm-up steps; ``steps`` timed steps; then peaks and what the
variables hold. Throughput is timed on ``train_on_batch``, which runs the same compiled train function ``fit``
does (``make_train_function``: XLA / tf.function / jit as Keras defaults per backend, recorded in ``jit_compile``)
and returns the logs as numbers, so every timed step is finished when its timer stops.

Failures become a status (oom on any backend's out-of-memory), never an exception.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ampbench import phases, progress
from ampbench.bench.cell_row import add_warnings, first_line, judge_timed_steps
from ampbench.bench.scenario import CellVerbs, EstimatedSteps, check_budget
from ampbench.cells import CellSpec
from ampbench.cpuinfo import cpu_half_hardware, cpu_name
from ampbench.errors import AmpbenchError
from ampbench.frameworks.keras import backends
from ampbench.frameworks.keras.memory import KerasPeak, is_oom, variable_bytes
from ampbench.frameworks.keras.policy import LOSS_SCALED, compute_dtype, policy_of
from ampbench.frameworks.keras.trainer import Trainer, converge, device_env, fresh_session, setup
from ampbench.frameworks.keras.workloads import KerasWorkload, build_workload, output_warning
from ampbench.measure.host import rss
from ampbench.measure.host_env import host_environment
from ampbench.measure.peaks import math_mode_of
from ampbench.measure.seeds import eval_batches
from ampbench.measure.stats import latencies, time_host


def _warm_runtime(keras: Any, wl: KerasWorkload) -> None:
    """Two steps of a one-layer model with the workload's optimizer, under the policy (paid before the baseline)."""
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4), keras.layers.Activation("linear", dtype="float32")])
    model.compile(optimizer=wl.make_optimizer(keras), loss="mse")
    x, y = np.zeros((2, 8), np.float32), np.zeros((2, 4), np.float32)
    for _ in range(2):
        model.train_on_batch(x, y)
    del model
    fresh_session(keras)


def verbs(spec: CellSpec) -> KerasCell:
    """The cell's verbs (the harness measures the cell through them: :func:`ampbench.bench.jobs.run_cell`)."""
    return KerasCell()


class KerasCell(CellVerbs[KerasWorkload, Any]):
    """A Keras cell's verbs: the model under its policy on the cell's backend (this process's)."""

    keras: Any = None
    gpu: bool = False

    def open(self, spec: CellSpec, row: dict[str, Any]) -> Any:
        self.keras, policy = setup(spec)
        facts = device_facts(spec)
        row.update(backends.versions(self.keras), keras_policy=policy, device_name=facts["device_name"])
        self.gpu = spec.device.startswith("cuda")
        tf32 = backends.set_tf32(spec.backend or "", spec.precision == "tf32") if self.gpu else \
            {"tf32_matmul": False, "tf32_cudnn": False}
        row["env"] = _env(row, spec, facts, tf32)
        row["math_mode"] = math_mode_of(compute_dtype(spec.precision), tf32["tf32_matmul"])
        return contextlib.nullcontext()

    def build(self, spec: CellSpec, row: dict[str, Any]) -> KerasWorkload:
        return build_workload(self.keras, spec.workload, spec.model, spec.preset, spec.data, spec.measure.seed)

    def batch_size(self, workload: KerasWorkload) -> int:
        return workload.batch_size

    def metric_name(self, workload: KerasWorkload) -> str | None:
        return workload.metric_name  # type: ignore[no-any-return]

    def throughput_memory(self, workload: KerasWorkload, spec: CellSpec, batch_size: int, row: dict[str, Any]) -> Any:
        return _throughput_memory(self.keras, workload, spec, batch_size, self.gpu, row)

    def converge(self, workload: KerasWorkload, spec: CellSpec, batch_size: int, row: dict[str, Any]) -> dict[str, Any]:
        conv = converge(self.keras, spec, workload, batch_size)
        if row["loss_scaled"] is None:  # (a cell that only converged: what compile() does under the policy)
            row["loss_scaled"] = spec.precision in LOSS_SCALED
        return conv

    def inference(self, trained: Any, workload: KerasWorkload, sizes: list[int], iters: int) -> dict[str, Any]:
        return inference_latency(trained.model, workload, sizes, iters=iters)

    def is_oom(self, e: BaseException) -> bool:
        return is_oom(e)

    def trial_peak(self, spec: CellSpec, batch_size: int) -> tuple[int | None, int | None]:
        gpu = spec.device.startswith("cuda")
        keras, _ = setup(spec)
        wl = build_workload(keras, spec.workload, spec.model, spec.preset, spec.data, spec.measure.seed)
        _warm_runtime(keras, wl)
        peak = KerasPeak(spec.backend or "", gpu)
        peak.start(rss())
        trainer = Trainer(wl.model(keras), wl.batches(batch_size, _staged(wl, batch_size)))  # (as the timed cell)
        for _ in range(spec.measure.maxbatch_trial_steps):
            trainer()
        return peak.peak(), backends.gpu_facts().get("memory_total_bytes") if gpu else None

    def estimate_process(self, spec: CellSpec) -> float:
        device_env(spec.device)
        t = time.perf_counter()
        self.keras = backends.activate(spec.backend or "")
        return time.perf_counter() - t

    def estimate_steps(self, spec: CellSpec) -> EstimatedSteps:
        keras = self.keras
        keras.mixed_precision.set_global_policy(policy_of(spec.precision))
        fresh_session(keras)
        t0 = time.perf_counter()
        wl = build_workload(keras, spec.workload, spec.model, spec.preset, spec.data, spec.measure.seed)
        build_s = time.perf_counter() - t0
        batch = spec.batch_size or wl.batch_size
        trainer = Trainer(wl.model(keras), wl.batches(batch, 2))
        t1 = time.perf_counter()
        trainer()  # (the first step traces and compiles the train function: counted apart)
        t2 = time.perf_counter()
        trainer()
        evals = eval_batches(len(wl.x_test) if wl.x_test is not None else None, batch)
        return EstimatedSteps(build_s, wl.epochs * wl.steps_per_epoch(batch), time.perf_counter() - t2, first_s=t2 - t1,
                              eval_batches=evals, batch_size=batch)


def device_facts(spec: CellSpec) -> dict[str, Any]:
    """The cell's device: its name (the CPU's model name, or NVML's for the GPU) and, on a GPU, its capability, memory
    and driver (:func:`ampbench.frameworks.keras.backends.gpu_facts`)."""
    if spec.device.startswith("cuda"):
        return {"device_name": spec.device, **backends.gpu_facts()}

    return {"device_name": cpu_name(), "cpu_half_hardware": cpu_half_hardware()}


def _env(row: dict[str, Any], spec: CellSpec, facts: dict[str, Any], tf32: dict[str, bool]) -> dict[str, Any]:
    """The row's environment: the keys a PyTorch row has where they apply, and the Keras backend's."""

    return {**host_environment(spec.device), **tf32, **facts, "framework": "keras",
            "keras_version": row["keras_version"], "backend_version": row["backend_version"],
            "keras_backend": spec.backend}


def _staged(wl: KerasWorkload, batch_size: int) -> int:
    """The batches a timed cell holds and cycles (a max-batch trial holds as many: what fits is what the cell runs)."""
    return min(4, max(1, wl.n_train // batch_size))


def _throughput_memory(keras: Any, wl: KerasWorkload, spec: CellSpec, batch_size: int, gpu: bool,
                       row: dict[str, Any]) -> Trainer:
    # (phase "setup": the scenario entered it)
    _warm_runtime(keras, wl)
    peak = KerasPeak(spec.backend or "", gpu)
    peak.start(rss())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = wl.model(keras)
    trainer = Trainer(model, wl.batches(batch_size, _staged(wl, batch_size)))
    row["loss_scaled"] = trainer.loss_scaled
    note = output_warning(model, row.get("keras_policy") or "")
    if note:
        add_warnings(row, [note])
    phases.enter("first_step", "first step (tracing and compiling the train step)")
    t = time.perf_counter()
    trainer()
    row["first_step_ms"] = (time.perf_counter() - t) * 1e3
    row["jit_compile"] = str(getattr(model, "jit_compile", "?"))
    phases.enter("warmup", "warm-up", say=False)
    warm = progress.Steps("warm-up", max(0, spec.measure.warmup - 1))
    for i in range(warm.n):
        trainer()
        warm(i + 1)
    applied_before, calls_before = trainer.applied, trainer.calls
    # host clock per step: train_on_batch returns its logs as numbers, so each step has finished when it returns
    phases.enter("timed_steps", "timed steps", say=False)
    timing = time_host(trainer, spec.measure.steps, progress.Steps("timed steps", spec.measure.steps))
    phases.enter("after_steps", "reading the measurements")
    skipped_timed = (trainer.calls - calls_before) - (trainer.applied - applied_before)
    row.update(timing.throughput_row(batch_size), final_loss=trainer.last_loss,
               skipped_steps=trainer.calls - trainer.applied, loss_scale=trainer.scale)
    used = peak.peak()
    row.update(peak_allocated_bytes=used, peak_reserved_bytes=used, cpu_rss_peak_bytes=None if gpu else used,
               memory_source=peak.source)
    row.update(weights_bytes=variable_bytes(model.weights),
               optimizer_bytes=variable_bytes(_optimizer_state(model.optimizer)), grads_bytes=None)
    n_params = int(sum(int(np.prod(v.shape)) for v in model.weights))
    row.update(model_bytes_fp32=4 * n_params, model_bytes_half=2 * n_params, keras_params=n_params,
               keras_output_dtype=str(getattr(model.layers[-1], "compute_dtype", "")) if model.layers else None)
    judge_timed_steps(row, trainer.last_loss, skipped_timed, spec.measure.steps, trainer.calls, trainer.scale)
    if caught:
        add_warnings(row, [str(w.message).splitlines()[0] for w in caught[:3]])
    check_budget(spec, used)  # (over it: the cell ends as a PyTorch one does -- oom, nothing more measured)
    return trainer


def _optimizer_state(optimizer: Any) -> list[Any]:
    """The optimizer's state variables (moments; a LossScaleOptimizer's scale and counter included), not its
    iteration counters."""
    return [v for v in optimizer.variables if "iteration" not in v.path]


def inference_latency(model: Any, wl: KerasWorkload, batch_sizes: list[int], iters: int,
                      warmup: int = 3) -> dict[str, dict[str, float]]:
    """{str(batch): {p50_ms, p90_ms, p99_ms, samples_per_s, first_ms}} of ``predict_on_batch`` (returns numpy:
    each call finished when timed)."""
    def forward_at(bs: int) -> Callable[[], object]:
        x, _ = wl.batches(bs, 1)[0]
        return lambda: model.predict_on_batch(x)

    return latencies(forward_at, batch_sizes, iters, warmup, lambda f: time_host(f, 1).step_ms[0], time_host)


# -- a validation (in a fresh process) ----------------------------------------------------------------------------
def validate(spec: CellSpec) -> dict[str, Any]:
    """Build the cell's workload under its policy and run one step on 2 samples: {"error", "warnings"}."""
    try:
        keras, policy = setup(spec)
        fresh_session(keras)  # (a process validates every target of its backend, one after another)
        wl = build_workload(keras, spec.workload, spec.model, spec.preset, spec.data, spec.measure.seed)
        model = wl.model(keras)
        x, y = wl.batches(2, 1)[0]
        try:
            model.train_on_batch(x, y)
        except Exception as e:
            raise AmpbenchError(f"{spec.label}: one training step on 2 samples failed: {first_line(e)} (check "
                                "--input-shape, --num-classes/--num-outputs and the model's output)") from None
        note = output_warning(model, policy)
    except AmpbenchError as e:
        return {"error": str(e), "warnings": []}
    return {"error": "", "warnings": [f"{spec.label}: {note}"] if note else [], "policy": policy,
            "optimizer": type(model.optimizer).__name__, "params": int(model.count_params()),
            "layers": {layer.name: [str(layer.compute_dtype), str(layer.variable_dtype)] for layer in model.layers}}
