"""``ampbench train`` for a Keras model: epochs under Keras's own policy, in a process of its own (the backend is
chosen before keras is imported), then the train and test metrics.

Each epoch steps through the training split shuffled by the seed with ``train_on_batch`` (the compiled train
function ``fit`` runs), so the loss scale, the skipped steps (Keras skips a step whose float16 gradients are not
finite) and the time of every step are seen; the first step (tracing, compiling) is left out of samples/s.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from ampbench import progress
from ampbench.cells import CellSpec
from ampbench.errors import AmpbenchError
from ampbench.frameworks.keras.trainer import Trainer, evaluate, setup
from ampbench.frameworks.keras.workloads import build_workload, output_warning
from ampbench.train_line import accuracy_keys, train_line

HERE = "ampbench.frameworks.keras.train"


def train_job(payload: dict[str, Any]) -> dict[str, Any]:
    """A job (in a child process): train ``payload["spec"]``'s Keras workload ``epochs`` epochs; the result as
    ``ampbench train --json`` writes it, or ``{"error": one line}``."""
    try:
        return train(CellSpec.from_dict(payload["spec"]), payload.get("epochs"), payload.get("max_steps"))
    except AmpbenchError as e:
        return {"error": str(e)}


def train(spec: CellSpec, epochs: int | None, max_steps: int | None) -> dict[str, Any]:
    keras, policy = setup(spec)
    wl = build_workload(keras, spec.workload, spec.model, spec.preset, spec.data, spec.measure.seed)
    progress.report("data:", detail=wl.description)  # (what it trains on, said as a PyTorch train's header says it)
    batch_size = spec.batch_size or wl.batch_size
    epochs = epochs or wl.epochs
    per_epoch = wl.steps_per_epoch(batch_size) if max_steps is None else min(max_steps, wl.steps_per_epoch(batch_size))
    model = wl.model(keras)
    warning = output_warning(model, policy)
    rng = np.random.default_rng(spec.measure.seed)
    trainer = Trainer(model, wl.batches(batch_size, per_epoch * epochs, rng))
    history = []
    first_step_s = 0.0
    t_start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        meter = progress.Steps("training", per_epoch, detail=f"epoch {epoch}/{epochs}")
        losses = []
        for i in range(per_epoch):
            t = time.perf_counter()
            trainer()
            if trainer.calls == 1:
                first_step_s = time.perf_counter() - t
            losses.append(trainer.last_loss)
            meter(i + 1)
        history.append({"epoch": epoch, "loss": sum(losses) / len(losses), "loss_scale": trainer.scale,
                        "skipped_steps": trainer.calls - trainer.applied})
        h = history[-1]  # (the command prints it as the epoch ends, as a PyTorch train does)
        progress.report(f"epoch {epoch}/{epochs}", detail=f"loss {h['loss']:.4f}  loss scale {h['loss_scale']:g}  "
                        f"skipped steps {h['skipped_steps']}")
        if not math.isfinite(trainer.last_loss):
            break
    train_s = time.perf_counter() - t_start
    timed_steps = max(trainer.calls - 1, 1)
    samples_per_s = timed_steps * batch_size / max(train_s - first_step_s, 1e-9)
    progress.report("evaluating")
    train_loss, train_metric = evaluate(model, wl.x_train, wl.y_train, batch_size, wl.metric_name)
    test_loss = test_metric = None
    if wl.x_test is not None:
        test_loss, test_metric = evaluate(model, wl.x_test, wl.y_test, batch_size, wl.metric_name)
    out = {"workload": wl.name, "preset": spec.preset, "precision": spec.precision, "device": spec.device,
           "epochs": epochs, "batch_size": batch_size, "steps": trainer.calls, "steps_trained": trainer.calls,
           "skipped_steps": trainer.calls - trainer.applied, "final_loss": trainer.last_loss,
           "metric_name": wl.metric_name, "train_metric": train_metric, "test_metric": test_metric,
           "train_loss": train_loss, "test_loss": test_loss, "samples_per_s": samples_per_s, "train_seconds": train_s,
           "first_step_s": first_step_s, "loss_scale": trainer.scale, "history": history, "framework": "keras",
           "keras_backend": spec.backend, "keras_policy": policy, "loss_scaled": trainer.loss_scaled,
           "warnings": [warning] if warning else []}
    out.update(accuracy_keys(wl.metric_name, train_metric, test_metric))
    out["summary"] = summary(out)
    return out


def summary(r: dict[str, Any]) -> str:
    """The one line ``ampbench train`` prints at the end of a Keras model's training."""
    return train_line(f"{r['precision']} ({r['keras_policy']}) on {r['device']}, Keras on {r['keras_backend']}",
                      r.get("metric_name"), r.get("train_metric"), r.get("test_metric"), r["final_loss"],
                      r["samples_per_s"], r["steps"], r["skipped_steps"],
                      speed_note=f"first step {r['first_step_s']:.1f} s left out",
                      tail=f", loss scale {r['loss_scale']:g}")
