"""Where a :class:`~ampbench.precision.MixedPrecision` trains: one device, or ranks under DDP or FSDP2 -- a value the
caller passes, one small class per strategy (as Lightning's strategies hold their precision plugin's placement):

    MixedPrecision("master-bf16")                                            # one device (OneDevice())
    MixedPrecision("master-bf16", placement=Ddp(reduce_dtype="bf16"))        # DDP, bf16 gradient all-reduce
    MixedPrecision("master-bf16", placement=Fsdp(mesh=mesh))                 # FSDP2 over a device mesh

The engine binds the placement to its recipe (:meth:`Placement.bound`: the (strategy, precision) pair's
:class:`~ampbench.distributed.strategy.Layout`, checked before any model is touched) and asks it what the strategy
changes: whether the engine casts the model and keeps fp32 masters itself, which model the caller trains (DDP's
wrapper), and how the parameters are sharded (FSDP2, the optimizers rebound to the shards). The step itself --
scaling, the inf/NaN check, master weights -- does not know the strategy; the loss scaler is told only whether the
gradients are sharded (its found-inf flags are then agreed over the ranks).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ampbench.distributed import wrap
from ampbench.distributed.strategy import Layout, Recipe, check_reduce_dtype, check_strategy, layout
from ampbench.errors import AmpbenchError


class Placement:
    """One device: the engine casts the model and keeps its masters; nothing is wrapped (the base of the
    strategies)."""

    strategy: str | None = None
    process_group: Any = None

    def __init__(self) -> None:
        self.layout: Layout | None = None
        """What this (strategy, precision) pair does, once bound; None on one device."""

    def bound(self, recipe: Recipe) -> Placement:
        """This placement for ``recipe`` (a copy: the caller's value is never changed), its pair checked."""
        return copy.copy(self)

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
        return False

    def before_setup(self, models: list[nn.Module], what: str) -> None:
        """Before any conversion (a strategy: the process group is up)."""

    def wrap(self, models: list[nn.Module], optimizers: list[torch.optim.Optimizer], device: torch.device,
             fp32_units: Callable[[nn.Module], list[nn.Module]]) -> list[nn.Module]:
        """After the casts: the models as the strategy trains them (one device: as they are)."""
        return models

    def trained(self, given: Any, wrapped: list[nn.Module]) -> Any:
        """What the caller trains: the models themselves (DDP: its wrappers)."""
        return given

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


OneDevice = Placement
"""The default placement: one device."""


class _Strategy(Placement):
    """A torch.distributed strategy: its gradient all-reduce/reduce-scatter dtype (None: the strategy's default for
    the mode), checked at construction."""

    def __init__(self, reduce_dtype: str | torch.dtype | None = None) -> None:
        super().__init__()
        self.reduce_dtype = check_reduce_dtype(reduce_dtype)

    def bound(self, recipe: Recipe) -> Placement:
        out = copy.copy(self)
        out.layout = layout(check_strategy(self.strategy), recipe, self.reduce_dtype)
        return out

    def before_setup(self, models: list[nn.Module], what: str) -> None:
        wrap.require_process_group(what)

    def __repr__(self) -> str:
        reduce = f"reduce_dtype={self.reduce_dtype!r}" if self.reduce_dtype is not None else ""
        return f"{type(self).__name__}({reduce})"


class Ddp(_Strategy):
    """DistributedDataParallel: every rank holds the whole model; the gradients all-reduced (in ``reduce_dtype``)
    over ``process_group`` (default: the world)."""

    strategy = "ddp"

    def __init__(self, reduce_dtype: str | torch.dtype | None = None, process_group: Any = None,
                 find_unused_parameters: bool = False) -> None:
        super().__init__(reduce_dtype)
        self.process_group = process_group
        self.find_unused_parameters = find_unused_parameters
        """DDP's own option: parameters the loss may not reach are looked for each step (a walk of the graph)."""

    def wrap(self, models: list[nn.Module], optimizers: list[torch.optim.Optimizer], device: torch.device,
             fp32_units: Callable[[nn.Module], list[nn.Module]]) -> list[nn.Module]:
        """DDP's wrappers, made after the casts (its buckets get the trained dtypes)."""
        assert self.layout is not None, "bind the placement first"
        return [wrap.wrap_ddp(m, self.layout, device, self.process_group, self.find_unused_parameters) for m in models]

    def trained(self, given: Any, wrapped: list[nn.Module]) -> Any:
        """DDP's wrappers, as one or a list as given."""
        return wrapped if isinstance(given, (list, tuple)) else wrapped[0]


class Fsdp(_Strategy):
    """FSDP2 (``fully_shard``): parameters, gradients and optimizer state sharded over ``mesh`` (default: a 1-D mesh
    of the world on the device's type); gradients reduce-scattered in ``reduce_dtype``; skipped steps agreed over
    ``process_group`` (default: the world). One model per engine."""

    strategy = "fsdp"

    def __init__(self, reduce_dtype: str | torch.dtype | None = None, mesh: Any = None,
                 process_group: Any = None) -> None:
        super().__init__(reduce_dtype)
        self.mesh, self.process_group = mesh, process_group
        self._names: dict[int, str] | None = None

    @property
    def shards_gradients(self) -> bool:
        return True

    def before_setup(self, models: list[nn.Module], what: str) -> None:
        """The process group is up; the optimizers' parameters by name (a conversion, fp8's, replaces some;
        sharding replaces all, and the optimizers are rebound by these names)."""
        super().before_setup(models, what)
        if len(models) > 1:
            raise AmpbenchError("strategy fsdp takes one model per MixedPrecision (its optimizers are rebound to "
                                "the sharded parameters)")
        self._names = wrap.param_names(models[0])

    def wrap(self, models: list[nn.Module], optimizers: list[torch.optim.Optimizer], device: torch.device,
             fp32_units: Callable[[nn.Module], list[nn.Module]]) -> list[nn.Module]:
        """The FSDP2 shards, made in place (``fp32_units``: the modules that become their own fp32 units under FSDP
        master-*)."""
        assert self.layout is not None, "bind the placement first"
        mesh = self.mesh if self.mesh is not None else wrap.default_mesh(device)
        units = fp32_units(models[0]) if self.layout.fsdp_norm_units else []
        return [wrap.shard_and_rebind(models[0], optimizers, self.layout, mesh, units, self._names)]


STRATEGY_CLASSES: dict[str, type[_Strategy]] = {"ddp": Ddp, "fsdp": Fsdp}


def placement_of(strategy: str | None, reduce_dtype: str | torch.dtype | None = None) -> Placement:
    """The placement a strategy's name says (the command line's ``--strategy``, a cell's): one device for None."""
    name = check_strategy(strategy)
    if name is None:
        if reduce_dtype is not None:
            raise AmpbenchError(f"grad_reduce_dtype={reduce_dtype!r} applies to strategy ddp or fsdp, not to one device")
        return OneDevice()
    return STRATEGY_CLASSES[name](reduce_dtype)
