"""Build a workload: a registered one by name, an adapter (``timm:<model>``, ``hf:<config>``) or a user's model.

The one place names become Workloads: the registry (:mod:`ampbench.workloads.registry`) only knows what is
registered; this module imports the builders.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

# Registration order is the order `ampbench list` shows (each family module registers its workloads on import).
# isort: off
from ampbench.workloads import vision, imagenet, nlp, gpt, tabular  # noqa: F401
# isort: on
from ampbench.data.splits import check_val_fraction
from ampbench.errors import AmpbenchError
from ampbench.paths import check_data_dir
from ampbench.workloads.adapters import create_adapter_workload
from ampbench.workloads.base import Workload, seeded
from ampbench.workloads.data_options import DataOptions, check_one_target
from ampbench.workloads.registry import check_options, get_spec
from ampbench.workloads.tasks import DataSpec
from ampbench.workloads.user import create_user_workload

__all__ = ["build_target", "create_model", "create_user_workload", "create_workload"]


def create_workload(name: str, preset: str = "small", data_dir: str | Path | None = None, seed: int = 0,
                    val_fraction: float | None = None, data: Any = None, **options: Any) -> Workload:
    """Build a registered workload (or an adapter: ``timm:<model>``, ``hf:<config>``).

    ``val_fraction``: share of --data-dir data held out for testing when it comes as one split.
    ``data``: an adapter's :class:`~ampbench.workloads.tasks.DataSpec` (what --input-shape, --task ... say).
    """
    if ":" in name:
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
        data_dir = check_data_dir(data_dir)
    if val_fraction is not None:
        options["val_fraction"] = val_fraction
    with seeded(seed):  # the model's init depends on the seed only: every precision starts from the same weights
        return spec.build(preset=preset, data_dir=data_dir, seed=seed, **options)


def create_model(name: str, preset: str = "small", **options: Any) -> nn.Module:
    """Only the model of a registered workload (no data)."""
    spec = get_spec(name)
    check_options(preset, spec.options(), options, name)
    return spec.model(preset, **options)


def build_target(workload: str | None, model: str | None, preset: str | None, data: DataOptions,
                 seed: int = 0, preset_given: bool | None = None) -> Workload:
    """The workload of a target -- a registered name or adapter, or the user's ``--model`` (exactly one) -- with the
    data options the user gave: the one path ``run``'s cells, ``train`` and ``diagnose`` build by. ``preset_given``:
    see :func:`~ampbench.workloads.user.create_user_workload` (a cell's preset was checked when its run was planned)."""
    check_one_target(workload, model)
    if model is not None:
        return create_user_workload(model, data_dir=data.data_dir, preset=preset, seed=seed,
                                    val_fraction=data.val_fraction, batches=data.batches, loss=data.loss,
                                    options=dict(data.options), preset_given=preset_given, **data.described())
    return create_workload(workload, preset or "small", data.data_dir, seed, data.val_fraction,  # type: ignore[arg-type]
                           data=DataSpec.of(**data.described()), **dict(data.options))


def build_meta(workload_factory: Any) -> Workload:
    """A workload built with its tensors on the meta device (``workload_factory()``: the usual builder): no memory,
    no initialisation (``ampbench predict`` traces it; a run checks its optimizer on it). A builder that reads values
    while it builds (synthetic data drawn token by token) cannot run on meta: it is built on the CPU then."""
    try:
        with torch.device("meta"):
            return workload_factory()  # type: ignore[no-any-return]
    except (RuntimeError, NotImplementedError, AmpbenchError) as e:  # (a --model's check forward wraps the error)
        if "meta" not in str(e):
            raise
    return workload_factory()  # type: ignore[no-any-return]
