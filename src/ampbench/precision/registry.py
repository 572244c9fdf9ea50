"""Registry of precision recipes: one canonical name per recipe, aliases resolve to it (cf. timm)."""

from __future__ import annotations

from typing import TypeVar

from ampbench.errors import AmpbenchError, suggest
from ampbench.mode_names import MODES
from ampbench.precision.base import Precision

_RECIPES: dict[str, type[Precision]] = {}
_ALIASES: dict[str, str] = {}

P = TypeVar("P", bound=type[Precision])


def register(cls: P) -> P:
    """Class decorator: make a recipe available under its name and aliases (a name :data:`ampbench.mode_names.MODES`
    lists: what reads stored rows knows the modes without importing the recipes)."""
    if cls.name not in MODES:
        raise ValueError(f"precision {cls.name!r} is not in ampbench/mode_names.py's MODES: add it there, in order")
    for key in (cls.name, *cls.aliases):
        k = key.lower()
        if k in _ALIASES and _ALIASES[k] != cls.name:
            raise ValueError(f"precision name {key!r} is already used by {_ALIASES[k]!r}")
        _ALIASES[k] = cls.name
    _RECIPES[cls.name] = cls
    return cls


def list_precisions() -> list[str]:
    """Canonical names, in registration order."""
    return list(_RECIPES)


def aliases_of(name: str) -> tuple[str, ...]:
    return _RECIPES[resolve(name)].aliases


def resolve(name: str) -> str:
    """Canonical name for a name or alias (case-insensitive); AmpbenchError listing valid names."""
    key = str(name).strip().lower()
    if key in _ALIASES:
        return _ALIASES[key]
    valid = ", ".join(
        f"{n} ({'/'.join(c.aliases)})" if c.aliases else n for n, c in _RECIPES.items()
    )
    raise AmpbenchError(
        f"unknown precision {name!r}.{suggest(key, _ALIASES)} Valid names (aliases): {valid}"
    )


def get(name: str, **options: object) -> Precision:
    """A fresh recipe instance for a name or alias; ``options``: the recipe's own (the fp8 modes take
    ``options=Fp8Options(...)``)."""
    return _RECIPES[resolve(name)](**options)


def is_fp8(name: str) -> bool:
    """Whether a mode (name or alias) computes in fp8; False for a name that is no mode (an imported row's)."""
    key = str(name).strip().lower()
    return key in _ALIASES and _RECIPES[_ALIASES[key]].math_mode == "fp8"


def advised_only_with_verdict(name: str) -> bool:
    """Whether the advisor needs a mode's own convergence verdict before recommending it (pure-*, fp8)."""
    key = str(name).strip().lower()
    return key in _ALIASES and _RECIPES[_ALIASES[key]].advised_only_with_verdict


def half_gradients(name: str) -> bool:
    """Whether a mode's parameters, and so the gradients its optimizer steps, are half (pure-*); False for a name that
    is no mode (an imported row's)."""
    key = str(name).strip().lower()
    if key not in _ALIASES:
        return False
    recipe = _RECIPES[_ALIASES[key]]
    return not recipe.master_weights and recipe.param_dtype.is_floating_point and recipe.param_dtype.itemsize == 2


def preference(name: str) -> int:
    """The advisor's tie-break rank of a mode (lower: preferred); names that are no mode rank last."""
    key = str(name).strip().lower()
    return _RECIPES[_ALIASES[key]].preference if key in _ALIASES else 1000
