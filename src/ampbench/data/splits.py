"""Train/test splits of real data: how many samples to hold out, cutting a split in two, --val-fraction.

Shared by every reader and workload (data helpers live here, below the workloads that use them).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ampbench.data.errors import DataError
from ampbench.data.tensors import TensorData
from ampbench.errors import AmpbenchError

VAL_FRACTION = 0.2
"""Share of a real dataset held out for testing when it comes as one split (``--val-fraction``)."""


def held_out(n: int, fraction: float, where: object) -> int:
    """How many of ``n`` samples to hold out: round(n x fraction), at least 1 each side."""
    if n < 2:
        raise DataError(f"{where}: {n} sample(s) cannot be split into training and test data (need at least 2)")
    return min(max(round(n * fraction), 1), n - 1)


def split(x: tuple[torch.Tensor, ...] | torch.Tensor, y: torch.Tensor, n_test: int) -> tuple[TensorData, TensorData]:
    return TensorData((x,) if isinstance(x, torch.Tensor) else tuple(x), y).split_off(n_test)


def check_val_fraction(val_fraction: float | None, data_dir: str | Path | None, splits: bool, name: str) -> None:
    """--val-fraction is a share in (0, 1), for --data-dir data of a workload that holds out a split."""
    if val_fraction is None:
        return
    if not 0.0 < val_fraction < 1.0:
        raise AmpbenchError(f"--val-fraction {val_fraction:g}: give the share of the data held out for testing, "
                            "between 0 and 1 (e.g. 0.2)")
    if data_dir is None:
        raise AmpbenchError("--val-fraction applies to real data: give --data-dir too")
    if not splits:
        raise AmpbenchError(f"--val-fraction: {name} does not hold out a test split from its --data-dir data")


def classification_splits(data_dir: Path | None, loader: Callable[[Path], dict[str, Any]],
                          val_fraction: float | None = None) -> tuple[TensorData, TensorData] | None:
    """Real train/test splits from ``loader(data_dir)``; a directory with only one split (MNIST's t10k
    files, a few CIFAR batches) is cut in two: the last ``val_fraction`` (default 20%) for testing."""
    if data_dir is None:
        return None
    splits = loader(data_dir)
    if "train" in splits and "test" in splits:
        return TensorData(splits["train"][0], splits["train"][1]), TensorData(splits["test"][0], splits["test"][1])
    only = splits.get("train") or splits["test"]
    return split(only[0], only[1], held_out(len(only[1]), val_fraction or VAL_FRACTION, data_dir))
