"""What a user model is trained to do, from what the user said about its data.

``--input-shape`` (per-sample shape) with ``--vocab-size`` (token ids) or without (float features; C,H,W
images), and one target kind: ``--num-classes`` (classification, cross-entropy, accuracy), ``--num-outputs``
(regression, MSE, RMSE) or ``--task lm`` (outputs ``[batch, seq, vocab]``, next-token targets, perplexity).
:func:`synthesize` makes seeded, *learnable* data for the task (a class- or target-dependent signal), so
``converge`` and ``train`` mean something; :func:`check_output` says in one line when a model's output does
not fit the task.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.nn import functional as F

from ampbench.data import synthetic
from ampbench.data.tensors import TensorData
from ampbench.errors import AmpbenchError
from ampbench.workloads.base import ACCURACY, PERPLEXITY, RMSE, Metric, image_prep, lm_loss, mse_loss, split

TASKS = ("classify", "regress", "lm")

SAMPLES = {"tiny": 64, "small": 4096, "paper": 50000}
"""Synthetic training + test samples per preset (a fifth is held out for testing)."""
MAX_DATA_BYTES = 256 * 2**20
"""Synthetic data stays below this (fewer samples for big inputs; at least 4 batches)."""
BATCH = {"tiny": 8, "small": 64, "paper": 128}
EPOCHS = {"tiny": 1, "small": 3, "paper": 10}


def parse_shape(text: str | tuple[int, ...] | None) -> tuple[int, ...] | None:
    """``"3,224,224"`` / ``"3x224x224"`` / ``"20"`` -> a tuple of positive ints."""
    if text is None or isinstance(text, tuple):
        return text
    parts = [p.strip() for p in re.split(r"[,x]", str(text))]
    if not parts or not all(p.isdigit() for p in parts) or any(int(p) < 1 for p in parts):
        raise AmpbenchError(f"--input-shape {text!r}: expected positive integers per sample, e.g. 20 (features), "
                            "3,224,224 (an image) or 128 with --vocab-size (token ids)")
    return tuple(int(p) for p in parts)


def show(shape: tuple[int, ...]) -> str:
    return ",".join(map(str, shape))


@dataclass(frozen=True)
class DataSpec:
    """What the user said about the data (``--input-shape``, ``--vocab-size``, ``--num-classes``,
    ``--num-outputs``, ``--task``); :meth:`resolve` checks it and picks the task."""

    input_shape: tuple[int, ...] | None = None
    vocab_size: int | None = None
    num_classes: int | None = None
    num_outputs: int | None = None
    task: str | None = None

    @classmethod
    def of(cls, input_shape: str | tuple[int, ...] | None = None, vocab_size: int | None = None,
           num_classes: int | None = None, num_outputs: int | None = None, task: str | None = None) -> DataSpec:
        return cls(parse_shape(input_shape), vocab_size, num_classes, num_outputs, task)

    def given(self) -> list[str]:
        """The options set, as CLI flags (for 'applies to --model only' messages)."""
        flags = {"input_shape": "--input-shape", "vocab_size": "--vocab-size", "num_classes": "--num-classes",
                 "num_outputs": "--num-outputs", "task": "--task"}
        return [flag for name, flag in flags.items() if getattr(self, name) is not None]

    def resolve(self, where: str, need_shape: bool = True, need_vocab: bool = True) -> DataSpec:
        """The same spec with ``task`` filled in; one-line AmpbenchError for a contradiction or a gap.
        ``need_vocab=False``: an lm's vocabulary comes from elsewhere (an hf: config)."""
        task = self.task
        if task is not None and task not in TASKS:
            raise AmpbenchError(f"--task {task!r}: choose one of {', '.join(TASKS)}")
        if self.num_classes is not None and self.num_classes < 2:
            raise AmpbenchError(f"--num-classes {self.num_classes}: need at least 2")
        if self.num_outputs is not None and self.num_outputs < 1:
            raise AmpbenchError(f"--num-outputs {self.num_outputs}: need at least 1")
        if self.vocab_size is not None and self.vocab_size < 2:
            raise AmpbenchError(f"--vocab-size {self.vocab_size}: need at least 2 tokens")
        if self.num_classes is not None and self.num_outputs is not None:
            raise AmpbenchError("give --num-classes (classification) or --num-outputs (regression), not both")
        if task is None:
            task = "regress" if self.num_outputs is not None else "classify"
        if task == "lm":
            if self.num_classes is not None or self.num_outputs is not None:
                raise AmpbenchError("--task lm predicts the next token over --vocab-size: drop --num-classes/--num-outputs")
            if self.vocab_size is None and need_vocab:
                raise AmpbenchError("--task lm needs --vocab-size V (the size of the model's next-token output)")
            if self.input_shape is not None and len(self.input_shape) != 1:
                raise AmpbenchError(f"--input-shape {show(self.input_shape)}: --task lm takes one sequence length, e.g. 128")
        if task == "regress" and self.num_classes is not None:
            raise AmpbenchError("--task regress takes --num-outputs K, not --num-classes")
        if task == "classify" and self.num_outputs is not None:
            raise AmpbenchError("--task classify takes --num-classes N, not --num-outputs")
        spec = DataSpec(self.input_shape, self.vocab_size, self.num_classes,
                        self.num_outputs if task != "regress" else (self.num_outputs or 1), task)
        if need_shape:
            missing = [f for f, v in (("--input-shape", spec.input_shape),
                                      ("--num-classes N", spec.num_classes if task == "classify" else 0)) if v is None]
            if missing:
                raise AmpbenchError(f"{where} returned an nn.Module: give {' and '.join(missing)} for synthetic data "
                                    "(e.g. --input-shape 20 --num-classes 2; --input-shape 128 --vocab-size 30522; "
                                    "--num-outputs 1 for regression, --task lm for language models), --data-dir "
                                    "with real data, or --batches file.py:make_batch")
        return spec

    @property
    def tokens(self) -> bool:
        return self.vocab_size is not None

    def describe(self) -> str:
        shape = show(self.input_shape) if self.input_shape else "?"
        inputs = f"token ids {shape} (vocab {self.vocab_size:,})" if self.tokens else (
            f"images {shape}" if self.is_image else f"features {shape}")
        target = {"classify": f"{self.num_classes} classes", "regress": f"{self.num_outputs} regression outputs",
                  "lm": "next-token LM"}[self.task or "classify"]
        return f"{inputs} -> {target}"

    @property
    def is_image(self) -> bool:
        return not self.tokens and self.input_shape is not None and len(self.input_shape) == 3 and self.task == "classify"


@dataclass(frozen=True)
class Objective:
    """Loss and metric of a task."""

    loss_fn: Callable[[Any, torch.Tensor], torch.Tensor]
    metric: Metric | None


OBJECTIVES = {"classify": Objective(F.cross_entropy, ACCURACY), "regress": Objective(mse_loss, RMSE),
              "lm": Objective(lm_loss, PERPLEXITY)}


def sample_count(preset: str, bytes_per_sample: int, batch_size: int) -> int:
    """How many synthetic samples: the preset's, fewer where they would pass MAX_DATA_BYTES (>= 4 batches)."""
    return max(min(SAMPLES[preset], MAX_DATA_BYTES // max(bytes_per_sample, 1)), 4 * batch_size, 10)


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
