"""Keras training as a cell, ``diagnose`` and ``train`` run it: the backend activated on the cell's device with the
precision's dtype policy (before any model exists), a fresh session that keeps the policy, a compiled model stepping
through batches with ``train_on_batch`` (:class:`Trainer`), and convergence over seeds."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from ampbench import progress
from ampbench.cells import CellSpec
from ampbench.errors import AmpbenchError
from ampbench.frameworks.keras import backends
from ampbench.frameworks.keras.policy import policy_of
from ampbench.frameworks.keras.workloads import KerasWorkload, build_workload
from ampbench.measure.seeds import eval_batch, final_loss, first_nonfinite, summarize


def device_env(device: str) -> None:
    """Show the backend only the cell's device: no GPU for a CPU cell (Keras would take one if it saw it),
    GPU N alone for cuda:N; JAX/TF not grabbing the whole card up front (peaks must be the cell's)."""
    if device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    elif ":" in device and device != "cuda:0":
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        index = int(device.split(":")[1])
        ids = visible.split(",") if visible else [str(i) for i in range(index + 1)]
        os.environ["CUDA_VISIBLE_DEVICES"] = ids[index]
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")


def setup(spec: CellSpec) -> tuple[Any, str]:
    """keras on the cell's backend and device, the precision's policy set; (keras, policy)."""
    assert spec.backend is not None
    device_env(spec.device)
    keras = backends.activate(spec.backend)
    gpu = spec.device.startswith("cuda")
    if gpu and not backends.gpu_available(spec.backend):
        raise AmpbenchError(f"the {spec.backend} backend sees no GPU for {spec.device} (its CUDA build is not "
                            "installed?); run on --device cpu or install the backend's GPU build")
    policy = policy_of(spec.precision)
    keras.mixed_precision.set_global_policy(policy)
    return keras, policy


def fresh_session(keras: Any) -> None:
    """``keras.backend.clear_session()`` keeping the dtype policy: clearing Keras's global state resets the global
    policy to float32, and a model built after it would silently train in float32."""
    policy = keras.mixed_precision.global_policy()
    keras.backend.clear_session()
    keras.mixed_precision.set_global_policy(policy)


class Trainer:
    """A compiled model stepping through a fixed list of batches with ``train_on_batch``."""

    def __init__(self, model: Any, batches: list[tuple[Any, Any]]) -> None:
        self.model, self.batches = model, batches
        self.calls = 0
        self.last_loss = float("nan")
        self.loss_scaled = type(model.optimizer).__name__ == "LossScaleOptimizer"

    def __call__(self) -> None:
        x, y = self.batches[self.calls % len(self.batches)]
        logs = self.model.train_on_batch(x, y, return_dict=True)
        self.calls += 1
        self.last_loss = float(logs["loss"])

    @property
    def applied(self) -> int:
        """Optimizer steps applied (a LossScaleOptimizer skips a step with inf/NaN gradients)."""
        opt = self.model.optimizer
        inner = opt.inner_optimizer if self.loss_scaled else opt
        return int(np.asarray(inner.iterations))

    @property
    def scale(self) -> float:
        if not self.loss_scaled:
            return 1.0
        opt = self.model.optimizer
        scale = getattr(opt, "dynamic_scale", None)  # (its variables exist from the first step on)
        return float(np.asarray(scale)) if scale is not None else float(opt.initial_scale)


# -- convergence ---------------------------------------------------------------------------------------------------
def train_seed(keras: Any, spec: CellSpec, steps: int, batch_size: int, seed: int,
               meter: Callable[[int], None] | None = None) -> dict[str, Any]:
    """One seed: the workload built with ``seed`` (weights and data), batches shuffled by it, ``steps`` steps."""
    fresh_session(keras)
    wl = build_workload(keras, spec.workload, spec.model, spec.preset, spec.data, seed)
    model = wl.model(keras)
    trainer = Trainer(model, wl.batches(batch_size, steps, np.random.default_rng(seed)))
    curve: list[float] = []
    scales: list[float] = []
    for i in range(steps):
        scales.append(trainer.scale)
        trainer()
        curve.append(trainer.last_loss)
        if meter is not None:
            meter(i + 1)
        if not math.isfinite(trainer.last_loss):
            break
    final = final_loss(curve)
    diverged, reason = not math.isfinite(final), ""
    if diverged:
        reason = first_nonfinite(curve) if any(not math.isfinite(v) for v in curve) else "non-finite loss"
    test_loss = metric = None
    if not diverged and wl.x_test is not None:
        test_loss, metric = evaluate(model, wl.x_test, wl.y_test, batch_size, wl.metric_name)
    return {"curve": curve, "scales": scales, "final_loss": final, "test_loss": test_loss, "metric": metric,
            "skipped_steps": trainer.calls - trainer.applied, "diverged": diverged, "reason": reason}


def evaluate(model: Any, x: Any, y: Any, batch_size: int, metric: str | None) -> tuple[float, float | None]:
    """(loss, metric) of ``model`` over a split (Keras's evaluate, at the training batch: :func:`eval_batch`)."""
    logs = model.evaluate(x, y, batch_size=eval_batch(batch_size), verbose=0, return_dict=True)
    return float(logs["loss"]), (float(logs[metric]) if metric in logs else None)


def converge(keras: Any, spec: CellSpec, wl: KerasWorkload, batch_size: int) -> dict[str, Any]:
    """``seeds`` runs of ``converge_steps`` steps (None: the workload's epochs), as a PyTorch cell stores them."""
    m = spec.measure
    steps = m.converge_steps if m.converge_steps is not None else wl.epochs * wl.steps_per_epoch(batch_size)
    seeds = m.seeds or 1
    runs = []
    for k, s in enumerate(range(m.seed, m.seed + seeds)):
        meter = progress.Steps("convergence", steps, detail=f"seed {k + 1}/{seeds}", first_apart=True)  # (compiles)
        runs.append(train_seed(keras, spec, steps, batch_size, s, meter))
    return summarize(runs, steps, m.seed, seeds)
