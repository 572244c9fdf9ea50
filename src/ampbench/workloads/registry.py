"""Workload registry: ``@register_workload`` + ``get_spec(name)`` + ``list_workloads()`` (cf. timm).

A leaf: it knows the registered workloads and their options, and imports none of them (each workload module
registers itself; :mod:`ampbench.workloads.factory` builds them, adapters and user models included).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import nn

from ampbench import seam
from ampbench.errors import AmpbenchError, suggest
from ampbench.workloads.base import PRESETS, Workload


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    description: str
    paper: str
    """The published configuration the ``paper`` preset reproduces."""
    data: str
    """What ``--data-dir`` accepts (synthetic data otherwise)."""
    build: Callable[..., Workload]
    """build(preset, data_dir, seed, **options) -> Workload"""
    model: Callable[..., nn.Module]
    """model(preset, **options) -> nn.Module (no data; builds on the meta device for shape checks)"""

    def options(self) -> list[str]:
        return [p for p in inspect.signature(self.build).parameters if p not in BUILD_ARGS]

    @property
    def splits_real_data(self) -> bool:
        """Whether the build holds out a test split from --data-dir data that comes as one (``val_fraction``)."""
        return "val_fraction" in inspect.signature(self.build).parameters


BUILD_ARGS = ("preset", "data_dir", "seed", "val_fraction")
"""What every build takes besides the workload's own options (``val_fraction`` where it applies)."""


_WORKLOADS: dict[str, WorkloadSpec] = {}


def register_workload(name: str, *, description: str, paper: str, data: str,
                      model: Callable[..., nn.Module]) -> Callable[[Callable[..., Workload]], Callable[..., Workload]]:
    def deco(build: Callable[..., Workload]) -> Callable[..., Workload]:
        if name in _WORKLOADS:
            raise ValueError(f"workload {name!r} registered twice")
        _WORKLOADS[name] = WorkloadSpec(name, description, paper, data, build, model)
        return build

    return deco


FAMILIES = ("vision", "imagenet", "nlp", "gpt", "tabular")
"""The workload modules, in the order their workloads are listed (and :mod:`~ampbench.workloads.factory` imports
them). Registration order alone made the list (and the "Valid: ..." of an unknown name) depend on which module a
process imported first: a test importing ``imagenet`` put resnet50 ahead of mnist-cnn."""


def list_workloads() -> list[str]:
    """Every registered workload: by family (:data:`FAMILIES`), then as each family registers them."""
    def family(name: str) -> int:
        module = _WORKLOADS[name].build.__module__.rpartition(".")[2]
        return FAMILIES.index(module) if module in FAMILIES else len(FAMILIES)

    return sorted(_WORKLOADS, key=family)


def get_spec(name: str) -> WorkloadSpec:
    if name not in _WORKLOADS:
        valid = list_workloads() + [w.name for fw in seam.all_frameworks() if fw.name != seam.DEFAULT
                                    for w in fw.workloads()]
        raise AmpbenchError(
            f"unknown workload {name!r}.{suggest(name, valid)} Valid: {', '.join(valid)}, "
            "timm:<model>, hf:<config>, or --model file.py:factory"
        )
    return _WORKLOADS[name]


def check_options(preset: str, spec_options: list[str], options: dict[str, Any], name: str) -> None:
    """A known preset, and only options the workload takes (one-line AmpbenchError otherwise)."""
    if preset not in PRESETS:
        raise AmpbenchError(f"unknown preset {preset!r}: choose one of {', '.join(PRESETS)}")
    bad = sorted(set(options) - set(spec_options))
    if bad:
        valid = ", ".join(spec_options) or "none"
        raise AmpbenchError(f"workload {name!r} has no option {', '.join(bad)} (options: {valid})")
