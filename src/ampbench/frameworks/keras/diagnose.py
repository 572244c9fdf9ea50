"""``ampbench diagnose`` for a Keras model: the checks that apply to a Keras model, run in a process of its own.

- ``nonfinite``: train ``steps`` steps under the policy; where the loss first turns inf/NaN, how many steps Keras's
  LossScaleOptimizer skipped (inf/NaN float16 gradients) and whether it kept skipping after its start-up search
  (scale 2^15 halved until the gradients fit), the scale it ended at.
- ``policy``: Keras's float32-output rule (the last layer computes in float32 under a mixed policy), the layers
  pinned to float32, normalization layers computing in half under a pure half policy (no float32 copy).
- ``tensorcore``: Dense units, Conv filters, Embedding and attention sizes and the batch that are not multiples of 8
  (64 for a vocabulary), as for PyTorch models (NVIDIA's Tensor Core rules).

The PyTorch checks that hook a module's forward and backward (gradients, activations, profile) and fp8 do not apply
to a Keras model on TensorFlow or JAX: asked for, they are refused with that reason (see :data:`NOT_FOR_KERAS`).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from typing import Any

from ampbench import progress
from ampbench.cells import CellSpec
from ampbench.diagnose.findings import Finding, check_done, check_started, ordered
from ampbench.diagnose.tensorcore import VOCAB_MIN, DimLint, tensorcore_findings
from ampbench.errors import AmpbenchError
from ampbench.frameworks.keras.cell import device_facts
from ampbench.frameworks.keras.trainer import Trainer, setup
from ampbench.frameworks.keras.workloads import build_workload

HERE = "ampbench.frameworks.keras.diagnose"
KERAS_CHECKS = ("nonfinite", "policy", "tensorcore")
NOT_FOR_KERAS = {
    "gradients": "the gradient-range check hooks a PyTorch module's backward",
    "activations": "the activation-range check hooks a PyTorch module's forward",
    "profile": "the profile check reads torch.profiler's kernels",
    "fp8": "fp8 runs through torchao's float8 layers",
}
SEARCH_STEPS = 8
"""Steps of the loss scale's start-up search: skips within them are Keras's scale finding its level, not a fault."""


def check_checks(wanted: tuple[str, ...], what: str) -> None:
    bad = [c for c in wanted if c not in KERAS_CHECKS]
    if bad:
        raise AmpbenchError(f"--checks {bad[0]}: {NOT_FOR_KERAS.get(bad[0], 'not a Keras check')}; {what} is a Keras "
                            f"model: its checks are {', '.join(KERAS_CHECKS)}")


def diagnose_job(payload: dict[str, Any]) -> dict[str, Any]:
    """A job (child process): the diagnosis of ``payload["spec"]``'s Keras model as ``Diagnosis.to_dict`` writes
    it, or ``{"error": one line}``."""
    try:
        return diagnose(CellSpec.from_dict(payload["spec"]), tuple(payload["checks"]), int(payload["steps"]))
    except AmpbenchError as e:
        return {"error": str(e)}


def diagnose(spec: CellSpec, checks: tuple[str, ...], steps: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    keras, policy = setup(spec)
    wl = build_workload(keras, spec.workload, spec.model, spec.preset, spec.data, spec.measure.seed)
    batch_size = spec.batch_size or wl.batch_size
    model = wl.model(keras)
    findings: list[Finding] = []
    details: dict[str, Any] = {"keras_backend": spec.backend, "keras_policy": policy}
    run = [c for c in ("policy", "tensorcore", "nonfinite") if c in checks]

    @contextlib.contextmanager
    def check(name: str) -> Iterator[None]:
        """A line as each check starts and ends, as PyTorch's diagnosis says them (the parent shows them as they come:
        the checks run here, in a child that reported once, at the end)."""
        i = run.index(name) + 1
        progress.report(check_started(i, len(run), name))
        started, before = time.perf_counter(), len(findings)
        yield
        progress.report(check_done(i, len(run), name, time.perf_counter() - started, len(findings) - before))

    if "policy" in checks:
        with check("policy"):
            findings += policy_findings(model, policy)
    if "tensorcore" in checks:
        with check("tensorcore"):
            issues = lint_dims(model, batch_size)
            details["tensorcore"] = issues
            findings += tensorcore_findings(issues, spec.device.startswith("cuda"))
    if "nonfinite" in checks:
        with check("nonfinite"):
            _nonfinite(model, wl, batch_size, steps, policy, details, findings)
    return {"target": spec.label, "precision": spec.precision, "device": spec.device,
            "device_name": device_facts(spec)["device_name"], "batch_size": batch_size, "seconds": time.perf_counter() - t0,
            "findings": [f.to_dict() for f in ordered(findings)], "details": details}


def _nonfinite(model: Any, wl: Any, batch_size: int, steps: int, policy: str, details: dict[str, Any],
               findings: list[Finding]) -> None:
    """Train ``steps`` steps under the policy until the loss is not finite; what the losses and scales say."""
    trainer = Trainer(model, wl.batches(batch_size, min(steps, 64)))
    losses, scales, applied = [], [], []
    meter = progress.Steps("training", steps)
    for i in range(steps):
        trainer()
        losses.append(trainer.last_loss)
        scales.append(trainer.scale)
        applied.append(trainer.applied)
        meter(i + 1)
        if not math.isfinite(trainer.last_loss):
            break
    details["nonfinite"] = {"losses": losses, "loss_scales": scales, "applied_steps": applied}
    findings.extend(nonfinite_findings(losses, scales, applied, policy, trainer.loss_scaled))


def nonfinite_findings(losses: list[float], scales: list[float], applied: list[int], policy: str,
                       loss_scaled: bool) -> list[Finding]:
    """What the steps' losses, loss scales and applied-step counts say (pure: tested on made-up trajectories)."""
    n = len(losses)
    bad = next((i for i, v in enumerate(losses) if not math.isfinite(v)), None)
    skipped = [i for i in range(n) if applied[i] == (applied[i - 1] if i else 0)]  # steps the optimizer did not apply
    out = []
    if bad is not None:
        out.append(Finding("error", "nonfinite", f"the loss is {losses[bad]} at step {bad + 1} under {policy}",
                           "a forward value overflowed the compute dtype (float16 tops out at 65504) or a NaN came in "
                           "with the data",
                           "keep the layer that overflows in float32 (dtype='float32'), or use mixed_bfloat16 "
                           "(amp-bf16: float32's range)", {"step": bad + 1}))
    late = [i for i in skipped if i >= SEARCH_STEPS]
    if late:
        out.append(Finding("warning", "nonfinite", f"{len(late)} of {n} steps skipped after the loss scale's start-up "
                           f"search (inf/NaN float16 gradients); scale now {scales[-1]:g}",
                           "Keras's LossScaleOptimizer skips a step whose gradients overflow and halves the scale; "
                           "skips that keep coming mean gradients float16 cannot hold at any useful scale",
                           "find the layer (compute it in float32), clip the loss, or use mixed_bfloat16",
                           {"skipped_steps": [i + 1 for i in skipped]}))
    if bad is None and not late:
        scaled = (f"; {len(skipped)} skipped in the scale's start-up search (2^15 halved to {scales[-1]:g}), as Keras "
                  "does" if loss_scaled and skipped else f"; loss scale {scales[-1]:g}" if loss_scaled else "")
        out.append(Finding("info", "nonfinite", f"no inf/NaN loss in {n} steps under {policy}{scaled}"))
    return out


def policy_findings(model: Any, policy: str) -> list[Finding]:
    layers = _layers(model)
    out = []
    pinned = [lay.name for lay in layers if str(getattr(lay, "compute_dtype", "")) == "float32"
              and policy != "float32" and getattr(lay, "dtype_policy", None) is not None
              and lay.dtype_policy.name == "float32"]
    last = model.layers[-1] if getattr(model, "layers", None) else None
    if last is not None and policy.startswith("mixed_") and str(last.compute_dtype) != "float32":
        out.append(Finding("warning", "policy", f"the output layer {last.name!r} computes in {last.compute_dtype} "
                           f"under {policy}", "Keras's mixed precision guide keeps the output (and so the softmax "
                           "and the loss) in float32", f"give {last.name!r} dtype='float32' (e.g. "
                           "layers.Activation('softmax', dtype='float32'))"))
    if policy in ("float16", "bfloat16"):
        half_norm = [lay.name for lay in layers if "Normalization" in type(lay).__name__
                     and str(lay.compute_dtype) != "float32"]
        if half_norm:
            out.append(Finding("warning", "policy", f"{len(half_norm)} normalization layer(s) compute in {policy}: "
                               f"{', '.join(half_norm[:4])}", "a pure half policy keeps no float32 copy: statistics "
                               "and variances lose precision", f"use mixed_{policy} (amp-*) or dtype='float32' on them"))
    out.append(Finding("info", "policy", f"{len(pinned)} layer(s) pinned to float32 under {policy}"
                       + (f": {', '.join(pinned[:6])}" if pinned else "")))
    return out


def _layers(model: Any) -> list[Any]:
    """Every layer, nested models' layers included."""
    out = []
    for layer in getattr(model, "layers", []):
        out.append(layer)
        if getattr(layer, "layers", None):
            out.extend(_layers(layer))
    return out


def _last_with_weights(layers: list[Any]) -> Any:
    """The last layer holding weights: a model's output layer where only weightless ones (an Activation, a Softmax)
    follow it -- its units are the task's classes or targets, not a width to choose."""
    weighted = [lay for lay in layers if getattr(lay, "weights", None) and not getattr(lay, "layers", None)]
    return weighted[-1] if weighted else None


def lint_dims(model: Any, batch_size: int | None = None, multiple: int = 8) -> list[dict[str, Any]]:
    """Keras layers' GEMM dimensions that miss ``multiple`` (64 for a vocabulary), from their built kernels."""
    lint = DimLint(multiple)
    check = lint.check
    layers = _layers(model)
    dense = [lay for lay in layers if type(lay).__name__ in ("Dense", "EinsumDense")]
    head = dense[-1] if dense and dense[-1] is _last_with_weights(layers) else None  # (the logits: the task's width)
    for layer in layers:
        kind = type(layer).__name__
        kernel = getattr(layer, "kernel", None) if getattr(layer, "built", False) else None
        shape = tuple(int(d) for d in kernel.shape) if kernel is not None else None
        if kind in ("Dense", "EinsumDense") and shape:
            check(layer.name, "input dim", shape[0])
            check(layer.name, "units", shape[-1], vocab=shape[-1] >= VOCAB_MIN, output=layer is head)
        elif kind.startswith("Conv") and shape and getattr(layer, "groups", 1) == 1:
            if shape[-2] >= 16:  # a 1/3-channel image input is expected
                check(layer.name, "input channels", shape[-2])
            check(layer.name, "filters", shape[-1])
        elif kind in ("Embedding", "ReversibleEmbedding"):
            if kind == "ReversibleEmbedding":  # its reverse call is the output projection: input_dim is its GEMM's N
                check(layer.name, "input_dim", layer.input_dim, vocab=layer.input_dim >= VOCAB_MIN)
            # (an Embedding's rows are looked up -- a gather, not a GEMM dimension)
            check(layer.name, "output_dim", layer.output_dim)
        elif kind in ("LSTM", "GRU", "SimpleRNN"):
            check(layer.name, "units", layer.units if hasattr(layer, "units") else layer.cell.units)
        elif kind == "MultiHeadAttention":
            check(layer.name, "key_dim", layer.key_dim)
    return lint.batch(batch_size)
