"""How a batch that does not fit is trained all the same: split into equal micro-batches whose gradients a step
accumulates (``ampbench train --grad-accum N``). The one rule the run's advice, ``predict``'s out-of-memory rows and
the GPU tables use to name a split (no torch)."""

from __future__ import annotations

from typing import Any


def micro_batches(batch: int, largest: int) -> tuple[int, int]:
    """(N, micro-batch): the fewest micro-batches of one size, each at most ``largest``, that make exactly ``batch``
    samples (N = ``batch`` at worst: micro-batches of 1)."""
    if largest < 1 or batch < 1:
        raise ValueError(f"batch {batch} and largest {largest} must be >= 1")
    n = -(-batch // largest)
    while batch % n:
        n += 1
    return n, batch // n


def split(batch: Any, largest: Any) -> tuple[int, int] | None:
    """:func:`micro_batches` for a batch over the largest that fits; None where it fits or either is unknown."""
    if not (isinstance(batch, int) and isinstance(largest, int) and 0 < largest < batch):
        return None
    return micro_batches(batch, largest)

