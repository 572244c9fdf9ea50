"""Tensors held for the backward outside autograd's saved tensors -- the outputs a selective activation checkpoint
keeps in a cache of its own (:mod:`ampbench.execution.checkpointing`) -- told to whoever counts the saved activations
(:func:`ampbench.measure.memory.saved_activations`: ``run``'s memory split, ``predict``'s trace), so the split is what
the step holds. Its own module: the checkpoint tells, the measurement listens, neither imports the other's package."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

_COUNTING: list[Callable[[torch.Tensor], Any]] = []
"""The counters now listening (the innermost last)."""


@contextlib.contextmanager
def listening(count: Callable[[torch.Tensor], Any]) -> Iterator[None]:
    """``count(tensor)`` told of every tensor :func:`note_saved` is given while inside."""
    _COUNTING.append(count)
    try:
        yield
    finally:
        _COUNTING.remove(count)


def counting_saved() -> bool:
    """Whether a counter listens (what :func:`note_saved` would tell)."""
    return bool(_COUNTING)


def note_saved(tensors: Any) -> None:
    """Each tensor in ``tensors`` (a pytree) told to every listening counter, as if autograd had saved it."""
    for count in _COUNTING:
        for t in tree_flatten(tensors)[0]:
            if isinstance(t, torch.Tensor):
                count(t)
