"""Data of any structure, as Keras takes it: an array, a list of arrays (several inputs or outputs), a dict of them by
name -- mapped, flattened, sliced and joined leaf by leaf (numpy only: no keras, no torch)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def tree_map(x: Any, fn: Callable[[Any], Any]) -> Any:
    """``fn`` on every array of ``x``: tuples become lists (Keras matches a list to ``model.inputs``)."""
    if isinstance(x, dict):
        return {k: tree_map(v, fn) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [tree_map(v, fn) for v in x]
    return fn(x)


def leaves(x: Any) -> list[Any]:
    if isinstance(x, dict):
        return [a for v in x.values() for a in leaves(v)]
    if isinstance(x, (list, tuple)):
        return [a for v in x for a in leaves(v)]
    return [x]


def take(x: Any, idx: np.ndarray) -> Any:
    """The samples ``idx`` of every array of ``x``."""
    return tree_map(x, lambda a: a[idx])


def samples(x: Any) -> int:
    return int(leaves(x)[0].shape[0])


def is_nested(x: Any) -> bool:
    return isinstance(x, (dict, list, tuple))


def structure(x: Any) -> Any:
    """What can be compared between two batches: dict keys, list lengths, array shapes after the batch dim."""
    if isinstance(x, dict):
        return ("dict", tuple(sorted((k, structure(v)) for k, v in x.items())))
    if isinstance(x, (list, tuple)):
        return ("list", tuple(structure(v) for v in x))
    return tuple(x.shape[1:])


def concat(parts: list[Any]) -> Any:
    first = parts[0]
    if isinstance(first, dict):
        return {k: concat([p[k] for p in parts]) for k in first}
    if isinstance(first, list):
        return [concat([p[i] for p in parts]) for i in range(len(first))]
    return np.concatenate(parts)


def cut(x: Any, start: int, stop: int | None) -> Any:
    return tree_map(x, lambda a: a[start:stop])
