"""Where a :class:`~ampbench.precision.MixedPrecision` trains: one device, or ranks under DDP or FSDP2.

The engine holds one :class:`Placement` (``MixedPrecision(strategy=...)``) and asks it what the strategy changes:
whether the engine casts the model and keeps fp32 masters itself (:class:`~ampbench.distributed.strategy.Layout`),
which model the caller trains (DDP's wrapper), and how the parameters are sharded (FSDP2, the optimizers rebound to
the shards). The step itself -- scaling, the inf/NaN check, master weights -- does not know the strategy; the loss
scaler is told only whether the gradients are sharded (its found-inf flags are then agreed over the ranks).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ampbench.distributed import wrap
from ampbench.distributed.strategy import Layout, Recipe, check_reduce_dtype, check_strategy, layout
from ampbench.errors import AmpbenchError


class Placement:
    """One device (``strategy=None``) or a torch.distributed strategy over a precision recipe, checked at
    construction (before any model is touched)."""

    def __init__(self, strategy: str | None, recipe: Recipe, grad_reduce_dtype: str | torch.dtype | None = None,
                 mesh: Any = None, process_group: Any = None) -> None:
        self.strategy = check_strategy(strategy)
        reduce = check_reduce_dtype(grad_reduce_dtype)
        if reduce is not None and self.strategy is None:
            raise AmpbenchError(f"grad_reduce_dtype applies to strategy ddp or fsdp, not to one device ({recipe.name!r})")
        self.layout: Layout | None = layout(self.strategy, recipe, reduce) if self.strategy else None
        """What this (strategy, precision) pair does; None on one device."""
        self.mesh, self.process_group = mesh, process_group
        self._names: dict[int, str] | None = None

    @property
    def engine_casts(self) -> bool:
        """The engine casts the model itself (always on one device)."""
        return self.layout is None or self.layout.engine_casts

    @property
    def engine_masters(self) -> bool:
        """The engine keeps fp32 master copies where the recipe has them (not under FSDP master-*: the fp32 shards
        are the masters)."""
        return self.layout is None or self.layout.engine_masters

    @property
    def fp8_all_gather(self) -> bool:
        return bool(self.layout and self.layout.fp8_all_gather)

    @property
    def shards_gradients(self) -> bool:
        """Each rank holds a shard of the gradients (FSDP2): the skip must be agreed over the ranks."""
        return self.strategy == "fsdp"

    def before_setup(self, models: list[nn.Module], what: str) -> None:
        """Before any conversion: the process group is up; FSDP: the optimizers' parameters by name (a conversion,
        fp8's, replaces some; sharding replaces all, and the optimizers are rebound by these names)."""
        if self.layout is None:
            return
        wrap.require_process_group(what)
        if self.layout.strategy == "fsdp":
            if len(models) > 1:
                raise AmpbenchError("strategy fsdp takes one model per MixedPrecision (its optimizers are rebound to "
                                    "the sharded parameters)")
            self._names = wrap.param_names(models[0])

    def wrap(self, models: list[nn.Module], optimizers: list[torch.optim.Optimizer], device: torch.device,
             fp32_units: Callable[[nn.Module], list[nn.Module]]) -> list[nn.Module]:
        """After the casts (DDP's buckets get the trained dtypes): DDP wrappers, or the FSDP2 shards made in place
        (``fp32_units``: the modules that become their own fp32 units under FSDP master-*). One device: the models."""
        if self.layout is None:
            return models
        if self.layout.strategy == "ddp":
            return [wrap.wrap_ddp(m, self.layout, device, self.process_group) for m in models]
        mesh = self.mesh if self.mesh is not None else wrap.default_mesh(device)
        units = fp32_units(models[0]) if self.layout.fsdp_norm_units else []
        return [wrap.shard_and_rebind(models[0], optimizers, self.layout, mesh, units, self._names)]

    def trained(self, given: Any, wrapped: list[nn.Module]) -> Any:
        """What the caller trains: DDP's wrappers (as one or a list, as given); the models themselves otherwise."""
        if self.strategy != "ddp":
            return given
        return wrapped if isinstance(given, (list, tuple)) else wrapped[0]
