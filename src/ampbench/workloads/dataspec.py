"""What the user said about a model's data (``--input-shape``, ``--vocab-size``, ``--num-classes``, ``--num-outputs``,
``--task``), checked, and how much synthetic data a preset makes: torch-free (a Keras cell on TensorFlow or JAX reads
these too; :mod:`ampbench.workloads.tasks` makes the data).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ampbench.errors import AmpbenchError

TASKS = ("classify", "regress", "lm")
USER_OPTIONS = ("tokenizer", "text", "label")
"""--option keys a user model takes (a PyTorch or a Keras one), all of a CSV in --data-dir: tokenizer=word|byte|bpe and
the name of the text column of a text,label CSV, and the name of the label column (of a text CSV or a table of
features)."""

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

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DataSpec:
        """The spec ``dataclasses.asdict`` wrote (through JSON: a job's payload or result; the shape a list again)."""
        shape = d["input_shape"]
        return cls(tuple(shape) if shape is not None else None, d["vocab_size"], d["num_classes"], d["num_outputs"],
                   d["task"])

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


def sample_count(preset: str, bytes_per_sample: int, batch_size: int) -> int:
    """How many synthetic samples: the preset's, fewer where they would pass MAX_DATA_BYTES (>= 4 batches)."""
    return max(min(SAMPLES[preset], MAX_DATA_BYTES // max(bytes_per_sample, 1)), 4 * batch_size, 10)
