"""What a user model is trained to do, from what the user said about its data.

``--input-shape`` (per-sample shape) with ``--vocab-size`` (token ids) or without (float features; C,H,W
images), and one target kind: ``--num-classes`` (classification, cross-entropy, accuracy), ``--num-outputs``
(regression, MSE, RMSE) or ``--task lm`` (outputs ``[batch, seq, vocab]``, next-token targets, perplexity).
:func:`synthesize` makes seeded, *learnable* data for the task (a class- or target-dependent signal), so
``converge`` and ``train`` mean something; :func:`check_output` says in one line when a model's output does
not fit the task.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from ampbench.data import synthetic
from ampbench.data.tensors import TensorData
from ampbench.errors import AmpbenchError
from ampbench.workloads.base import ACCURACY, PERPLEXITY, RMSE, Metric, image_prep, lm_loss, mse_loss, split
from ampbench.workloads.dataspec import (  # noqa: F401  (re-exported)
    BATCH,
    EPOCHS,
    MAX_DATA_BYTES,
    SAMPLES,
    TASKS,
    DataSpec,
    parse_shape,
    sample_count,
    show,
)


@dataclass(frozen=True)
class Objective:
    """Loss and metric of a task."""

    loss_fn: Callable[[Any, torch.Tensor], torch.Tensor]
    metric: Metric | None


OBJECTIVES = {"classify": Objective(F.cross_entropy, ACCURACY), "regress": Objective(mse_loss, RMSE),
              "lm": Objective(lm_loss, PERPLEXITY)}


def synthesize(spec: DataSpec, preset: str, seed: int, batch_size: int
               ) -> tuple[TensorData, TensorData, Callable[..., tuple[torch.Tensor, ...]] | None]:
    """(train, test, prepare) of seeded learnable data for a resolved spec."""
    assert spec.input_shape is not None and spec.task is not None
    shape = spec.input_shape
    g = torch.Generator().manual_seed(seed)
    numel = 1
    for s in shape:
        numel *= s
    prepare = None
    try:
        if spec.is_image:
            n = sample_count(preset, numel, batch_size)
            x, y = synthetic.class_images(n, spec.num_classes, shape, g)  # type: ignore[arg-type]
            prepare = image_prep()
        elif spec.task == "lm":
            n = sample_count(preset, 16 * numel, batch_size)
            x, y = synthetic.lm_tokens(n, shape[0], spec.vocab_size, g)  # type: ignore[arg-type]
        elif spec.tokens:
            n = sample_count(preset, 8 * numel, batch_size)
            if spec.task == "classify":
                x, y = synthetic.class_tokens(n, shape, spec.vocab_size, spec.num_classes, g)  # type: ignore[arg-type]
            else:
                x, y = synthetic.regression_tokens(n, shape, spec.vocab_size, spec.num_outputs, g)  # type: ignore[arg-type]
        else:
            n = sample_count(preset, 4 * numel, batch_size)
            if spec.task == "classify":
                x, y = synthetic.class_features(n, spec.num_classes, shape, g)  # type: ignore[arg-type]
            else:
                x, y = synthetic.regression_features(n, spec.num_outputs, shape, g)  # type: ignore[arg-type]
    except ValueError as e:
        raise AmpbenchError(f"--vocab-size {spec.vocab_size}: {e}") from None
    train, test = split(x, y, max(n // 5, 1))
    return train, test, prepare


def write_synthetic(payload: dict[str, Any]) -> dict[str, Any]:
    """Job (:mod:`ampbench.launch`): :func:`synthesize` for ``payload["data"]`` (a resolved DataSpec's fields),
    ``preset``, ``seed`` and ``batch``, with the inputs prepared as a model gets them, saved as numpy arrays to
    ``payload["out"]`` (``.npz``: ``x_train_<i>``, ``y_train``, ``x_test_<i>``, ``y_test``).

    Run in a process of its own by a framework whose cells must not import torch (a Keras cell on TensorFlow or
    JAX): its model trains on exactly the values a PyTorch model gets for the same options. Returns ``{"inputs": n}``,
    or ``{"error": line}`` for data the options cannot make."""
    spec = DataSpec.from_dict(payload["data"])
    try:
        train, test, prepare = synthesize(spec, payload["preset"], int(payload["seed"]), int(payload["batch"]))
    except AmpbenchError as e:
        return {"error": str(e)}
    save_splits(payload["out"], train, test, prepare)
    return {"inputs": len(train.inputs)}


def save_splits(out: str, train: Any, test: Any, prepare: Any, channels_last: bool = False) -> None:
    """``train`` and ``test`` (TensorData) as a job's ``.npz`` for a framework that reads numpy (``x_train_<i>``,
    ``y_train``, ``x_test_<i>``, ``y_test``), the inputs ``prepare``d as a model gets them; ``channels_last``: images
    (N, H, W, C), as a Keras model takes them."""
    arrays: dict[str, Any] = {}
    for name, part in (("train", train), ("test", test)):
        inputs = prepare(part.inputs) if prepare is not None else part.inputs
        for i, t in enumerate(inputs):
            arrays[f"x_{name}_{i}"] = (t.permute(0, 2, 3, 1).contiguous() if channels_last and t.dim() == 4 else t).numpy()
        arrays[f"y_{name}"] = part.targets.numpy()
    np.savez(out, **arrays)


def infer(out: Any, targets: torch.Tensor, where: str) -> DataSpec:
    """The task of ``--batches`` data without --task/--loss, from the targets and the model's output:
    float targets -> regression, int (batch,) -> classification, int (batch, seq) -> language model."""
    if isinstance(out, torch.Tensor):
        if targets.is_floating_point():
            return DataSpec(num_outputs=max(targets[0].numel(), 1), task="regress")
        if targets.dim() == 1 and out.dim() == 2:
            return DataSpec(num_classes=int(out.shape[1]), task="classify")
        if targets.dim() == 2 and out.dim() == 3:
            return DataSpec(input_shape=(int(targets.shape[1]),), vocab_size=int(out.shape[2]), task="lm")
    raise AmpbenchError(f"{where}: cannot tell the loss from output {shape_of(out)} and {targets.dtype} targets "
                        f"{tuple(targets.shape)}; give --loss file.py:fn (or --task classify|regress|lm)")


def shape_of(x: Any) -> str:
    return str(tuple(x.shape)) if isinstance(x, torch.Tensor) else type(x).__name__


def check_output(out: Any, spec: DataSpec, targets: torch.Tensor, where: str) -> None:
    """One line when the model's output cannot be what the task needs (before any training)."""
    if not isinstance(out, torch.Tensor):
        raise AmpbenchError(f"{where}: the model returned {type(out).__name__}, not a tensor; return the logits "
                            "(or give --loss file.py:fn that takes what the model returns)")
    got, batch = tuple(out.shape), int(targets.shape[0])
    if spec.task == "lm":
        want = f"(batch, {targets.shape[1]}, {spec.vocab_size}) next-token logits"
        ok = got == (batch, targets.shape[1], spec.vocab_size)
        fix = "check --vocab-size and --input-shape (the sequence length)"
    elif spec.task == "regress":
        want = f"{tuple(targets.shape)} predictions, the targets' shape"
        ok = got == tuple(targets.shape)
        fix = "check --num-outputs"
    else:
        want = f"(batch, {spec.num_classes}) logits"
        ok = got == (batch, spec.num_classes)
        fix = "check --num-classes"
    if not ok:
        raise AmpbenchError(f"{where}: output {got} is not {want}; {fix}, or give --loss file.py:fn for your own loss")
