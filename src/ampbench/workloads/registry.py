"""Workload registry: ``@register_workload`` + ``create_workload(name, preset)`` + ``list_workloads()`` (cf. timm)."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

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


def list_workloads() -> list[str]:
    return list(_WORKLOADS)


def get_spec(name: str) -> WorkloadSpec:
    if name not in _WORKLOADS:
        raise AmpbenchError(
            f"unknown workload {name!r}.{suggest(name, _WORKLOADS)} Valid: {', '.join(_WORKLOADS)}, "
            "timm:<model>, hf:<config>, or --model file.py:factory"
        )
    return _WORKLOADS[name]


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Seed torch's global RNG for the block (model init), restoring the caller's RNG state after."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def check_options(preset: str, spec_options: list[str], options: dict[str, Any], name: str) -> None:
    """A known preset, and only options the workload takes (one-line AmpbenchError otherwise)."""
    if preset not in PRESETS:
        raise AmpbenchError(f"unknown preset {preset!r}: choose one of {', '.join(PRESETS)}")
    bad = sorted(set(options) - set(spec_options))
    if bad:
        valid = ", ".join(spec_options) or "none"
        raise AmpbenchError(f"workload {name!r} has no option {', '.join(bad)} (options: {valid})")


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


def create_workload(name: str, preset: str = "small", data_dir: str | Path | None = None, seed: int = 0,
                    val_fraction: float | None = None, data: Any = None, **options: Any) -> Workload:
    """Build a registered workload (or an adapter: ``timm:<model>``, ``hf:<config>``).

    ``val_fraction``: share of --data-dir data held out for testing when it comes as one split.
    ``data``: an adapter's :class:`~ampbench.workloads.tasks.DataSpec` (what --input-shape, --task ... say).
    """
    if ":" in name:
        from ampbench.workloads.adapters import create_adapter_workload

        check_val_fraction(val_fraction, data_dir, True, name)
        with seeded(seed):
            return create_adapter_workload(name, preset, data_dir, seed, data, val_fraction, **options)
    if data is not None and data.given():
        raise AmpbenchError(f"{', '.join(data.given())}: for --model and the hf:/timm: adapters, not for {name} "
                            "(its data are its own; see ampbench list workloads)")
    spec = get_spec(name)
    check_options(preset, spec.options(), options, name)
    check_val_fraction(val_fraction, data_dir, spec.splits_real_data, name)
    if data_dir is not None:
        data_dir = Path(data_dir)
        if not data_dir.is_dir():
            raise AmpbenchError(f"--data-dir {data_dir} is not a directory")
    if val_fraction is not None:
        options["val_fraction"] = val_fraction
    with seeded(seed):  # the model's init depends on the seed only: every precision starts from the same weights
        return spec.build(preset=preset, data_dir=data_dir, seed=seed, **options)


def create_model(name: str, preset: str = "small", **options: Any) -> nn.Module:
    """Only the model of a registered workload (no data)."""
    spec = get_spec(name)
    check_options(preset, spec.options(), options, name)
    return spec.model(preset, **options)
