"""Registry of precision recipes: one canonical name per recipe, aliases resolve to it (cf. timm).

A mode's names and the facts the advisor reads (:mod:`ampbench.modes`' table) are kept apart from its recipe, which
imports torch; the registry holds each recipe to its row there."""

from __future__ import annotations

from typing import TypeVar

from ampbench.modes import (
    TABLE,
    advised_only_with_verdict,
    aliases_of,
    find,
    half_gradients,
    is_fp8,
    preference,
    resolve,
)
from ampbench.precision.base import Precision

__all__ = ["advised_only_with_verdict", "aliases_of", "get", "half_gradients", "is_fp8", "list_precisions",
           "preference", "register", "resolve"]

_RECIPES: dict[str, type[Precision]] = {}

P = TypeVar("P", bound=type[Precision])


def register(cls: P) -> P:
    """Class decorator: make a recipe available under its name and its aliases, as :mod:`ampbench.modes`' table lists
    them (what reads stored rows knows the modes without importing the recipes). Refused: a name the table does not
    list, and a recipe whose math or weights disagree with its row there."""
    found = find(cls.name)
    if found is None or found.name != cls.name:
        raise ValueError(f"precision {cls.name!r} is not in ampbench/modes.py's TABLE: add it there, in order")
    half_weights = not cls.master_weights and cls.param_dtype.is_floating_point and cls.param_dtype.itemsize == 2
    if (cls.math_mode == "fp8") != found.fp8 or half_weights != found.half_weights:
        raise ValueError(f"precision {cls.name!r}: ampbench/modes.py says fp8={found.fp8}, "
                         f"half_weights={found.half_weights}; the recipe says {cls.math_mode == 'fp8'}, {half_weights}")
    if cls.name in _RECIPES:
        raise ValueError(f"precision {cls.name!r} is already registered by {_RECIPES[cls.name].__qualname__}")
    _RECIPES[cls.name] = cls
    return cls


def list_precisions() -> list[str]:
    """Canonical names, in the table's order (every recipe registers at ``import ampbench.precision``)."""
    return [m.name for m in TABLE if m.name in _RECIPES]


def get(name: str, **options: object) -> Precision:
    """A fresh recipe instance for a name or alias; ``options``: the recipe's own (the fp8 modes take
    ``options=Fp8Options(...)``)."""
    return _RECIPES[resolve(name)](**options)
