"""In-memory datasets as whole tensors: batches are index-gathers, no per-sample Python.

The whole split lives in a few tensors (moved to the GPU once when it fits, else pinned so host to
device copies are asynchronous). A batch is ``tensor[idx]`` for a slice of a seeded permutation.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch


@dataclass
class TensorData:
    """A split: model inputs (positional args of ``model(*inputs)``) and targets, first dim = samples."""

    inputs: tuple[torch.Tensor, ...]
    targets: torch.Tensor

    def __post_init__(self) -> None:
        if isinstance(self.inputs, torch.Tensor):
            self.inputs = (self.inputs,)
        n = {t.shape[0] for t in (*self.inputs, self.targets)}
        if len(n) != 1:
            raise ValueError(f"inputs and targets disagree on the number of samples: {sorted(n)}")

    def __len__(self) -> int:
        return int(self.targets.shape[0])

    @property
    def device(self) -> torch.device:
        return self.targets.device

    def to(self, device: torch.device | str) -> TensorData:
        """Copy the whole split to ``device`` at once (then batches are gathers on the device)."""
        device = torch.device(device)
        return TensorData(tuple(t.to(device) for t in self.inputs), self.targets.to(device))

    def subset(self, start: int, stop: int) -> TensorData:
        return TensorData(tuple(t[start:stop] for t in self.inputs), self.targets[start:stop])

    def select(self, idx: torch.Tensor) -> TensorData:
        """The samples at ``idx`` (repeats allowed: a batch larger than the split tiles it)."""
        idx = idx.to(self.targets.device)
        return TensorData(tuple(t[idx] for t in self.inputs), self.targets[idx])

    def split_off(self, n_test: int) -> tuple[TensorData, TensorData]:
        """(first len-n_test samples, last n_test samples): a deterministic train/test cut."""
        return self.subset(0, len(self) - n_test), self.subset(len(self) - n_test, len(self))

    def batches(
        self, batch_size: int, shuffle: bool = False, generator: torch.Generator | None = None,
        drop_last: bool = False,
    ) -> Iterator[tuple[tuple[torch.Tensor, ...], torch.Tensor]]:
        """Yield (inputs, targets) batches. The permutation is drawn on the CPU from ``generator``."""
        n = len(self)
        order = torch.randperm(n, generator=generator) if shuffle else None
        if order is not None and self.device.type != "cpu":
            order = order.to(self.device)
        stop = n - n % batch_size if drop_last else n
        for start in range(0, stop, batch_size):
            if order is None:
                yield tuple(t[start:start + batch_size] for t in self.inputs), self.targets[start:start + batch_size]
            else:
                idx = order[start:start + batch_size]
                yield tuple(t[idx] for t in self.inputs), self.targets[idx]

    def num_batches(self, batch_size: int, drop_last: bool = False) -> int:
        return len(self) // batch_size if drop_last else -(-len(self) // batch_size)
