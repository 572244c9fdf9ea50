"""Strategies over torch.distributed, orthogonal to the precision name: what each (strategy, precision)
pair does is one row of a small table (cf. Lightning's FSDPPrecision, torchtitan's mp_policy), so the
recipes stay strategy-agnostic.

========  ==================  ================================================================================
strategy  precision           what runs
========  ==================  ================================================================================
ddp       any                 the recipe as on one device (model cast, fp32 masters, autocast), the model in
                              DistributedDataParallel: gradients all-reduced in the dtype the model's
                              parameters have (fp32 for fp32/tf32/amp-*/fp8-*, half for master-*/pure-*, whose
                              grads are copied to the fp32 masters after the reduce); ``grad_reduce_dtype``
                              bf16/fp16 compresses fp32 gradients for the all-reduce (a DDP comm hook). The
                              gradients are views into DDP's all-reduce buckets (``gradient_as_bucket_view``):
                              one copy of them per rank, not two
fsdp      fp32, tf32, amp-*   FSDP2 ``fully_shard``, fp32 sharded parameters, no param_dtype: amp-* autocasts
                              the forward as on one device; gradients reduce-scattered in fp32
                              (``grad_reduce_dtype`` sets MixedPrecisionPolicy.reduce_dtype)
fsdp      master-*            fp32 sharded parameters *are* the master weights (no separate copy): FSDP2
                              all-gathers them in half (``param_dtype``) for forward and backward and
                              reduce-scatters the gradients in fp32 (``reduce_dtype``, settable) into fp32
                              sharded grads; normalisation layers (and ``keep_fp32`` modules) are their own
                              fully_shard units with param_dtype fp32 and half outputs
fsdp      pure-*              the model cast to half before sharding: half sharded parameters, gradients,
                              optimizer state and reduce-scatter (no fp32 anywhere, as on one device)
fsdp      fp8-*               as amp-* (fp32 sharded params, autocast bf16), the eligible Linear layers
                              converted to Float8Linear before sharding; fp8-tensorwise all-gathers their
                              weights in fp8 (torchao's ``enable_fsdp_float8_all_gather``: 1 byte per
                              element instead of 4, each shard cast with the whole weight's amax, one
                              float all-reduced per layer); rowwise recipes all-gather fp32 weights (their
                              per-row scales are taken from the gathered weight)
========  ==================  ================================================================================

Loss scaling, the inf/NaN check and skipped steps agree on every rank: under DDP the gradients are
identical after the all-reduce; under FSDP each rank holds a shard, so the found-inf flag is
all-reduced (MAX) before any rank decides (ShardedGradScaler's semantics, with ampbench's own
policy: hysteresis, the scale floor's error).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from ampbench.errors import AmpbenchError, suggest


class Recipe(Protocol):
    """What a strategy needs to know of a precision recipe (:class:`ampbench.precision.base.Precision` is one)."""

    name: str
    param_dtype: torch.dtype
    master_weights: bool
    casts_model: bool

    @property
    def is_fp8(self) -> bool: ...

STRATEGIES = ("ddp", "fsdp")
REDUCE_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class Layout:
    """What one (strategy, precision) pair does: who casts, who holds the fp32 masters, what is reduced in which dtype."""

    strategy: str
    precision: str
    engine_casts: bool
    """The engine casts the model (master-*/pure-* as on one device) before wrapping."""
    engine_masters: bool
    """The engine keeps fp32 master copies (False under FSDP master-*: the sharded fp32 params are the masters)."""
    fsdp_param_dtype: torch.dtype | None = None
    """FSDP2 MixedPrecisionPolicy.param_dtype (the all-gather / compute dtype)."""
    fsdp_norm_units: bool = False
    """FSDP master-*: normalisation (and keep_fp32) modules become their own units with fp32 params."""
    reduce_dtype: torch.dtype | None = None
    """The dtype gradients travel in (None: the gradients' own dtype)."""
    grad_dtype: torch.dtype = torch.float32
    """The dtype of the gradients the strategy reduces (before any compression)."""
    fp8_all_gather: bool = False
    """FSDP fp8-tensorwise: Float8Linear weights are all-gathered in fp8 (torchao's float8 all-gather)."""

    def describe(self) -> str:
        def name(d: torch.dtype | None) -> str:
            return "their own dtype" if d is None else str(d).removeprefix("torch.")

        reduce = name(self.reduce_dtype or self.grad_dtype)
        if self.strategy == "ddp":
            return (f"DDP over the {self.precision} recipe; gradients ({name(self.grad_dtype)}, views into its buckets) "
                    f"all-reduced in {reduce}" + ("; fp32 masters on every rank" if self.engine_masters else ""))
        params = "half (cast before sharding)" if self.engine_casts and self.grad_dtype != torch.float32 else "fp32"
        gather = f", all-gathered in {name(self.fsdp_param_dtype)}" if self.fsdp_param_dtype else ""
        if self.fp8_all_gather:
            gather = ", fp8 Linear weights all-gathered in float8_e4m3fn"
        return (f"FSDP2 over the {self.precision} recipe; sharded params {params}{gather}; gradients reduce-scattered "
                f"in {reduce}" + ("; norm layers fp32 units" if self.fsdp_norm_units else ""))


def check_strategy(strategy: str | None) -> str | None:
    if strategy is None or strategy in ("none", "single"):
        return None
    if strategy not in STRATEGIES:
        raise AmpbenchError(f"strategy={strategy!r}: choose from {', '.join(STRATEGIES)} (or None for one device)."
                            + suggest(strategy, STRATEGIES))
    return strategy


def check_reduce_dtype(value: str | torch.dtype | None) -> torch.dtype | None:
    if value is None or (isinstance(value, torch.dtype) and value in REDUCE_DTYPES.values()):
        return value  # type: ignore[return-value]
    if isinstance(value, str) and value in REDUCE_DTYPES:
        return REDUCE_DTYPES[value]
    raise AmpbenchError(f"grad_reduce_dtype={value!r}: choose from {', '.join(REDUCE_DTYPES)} (or None: the gradients' "
                        "own dtype)")


def layout(strategy: str, recipe: Recipe, grad_reduce_dtype: torch.dtype | None = None) -> Layout:
    """The table above, for one pair. Raises for pairs that are not supported, saying why."""
    half = recipe.param_dtype if recipe.casts_model else None
    if strategy == "ddp":
        grad = half or torch.float32
        if grad_reduce_dtype is not None and grad_reduce_dtype != grad and grad != torch.float32:
            raise AmpbenchError(f"grad_reduce_dtype {str(grad_reduce_dtype).removeprefix('torch.')} with ddp {recipe.name}: "
                                f"its gradients are already {str(grad).removeprefix('torch.')}; compression applies to "
                                "fp32 gradients (fp32, tf32, amp-*)")
        return Layout("ddp", recipe.name, engine_casts=True, engine_masters=recipe.master_weights,
                      reduce_dtype=grad_reduce_dtype, grad_dtype=grad)
    if recipe.is_fp8:
        return Layout("fsdp", recipe.name, engine_casts=True, engine_masters=False, reduce_dtype=grad_reduce_dtype,
                      fp8_all_gather=getattr(recipe, "fp8_recipe", None) == "tensorwise")
    if recipe.master_weights:
        return Layout("fsdp", recipe.name, engine_casts=False, engine_masters=False, fsdp_param_dtype=recipe.param_dtype,
                      fsdp_norm_units=True, reduce_dtype=grad_reduce_dtype or torch.float32, grad_dtype=torch.float32)
    if recipe.casts_model:  # pure-*
        return Layout("fsdp", recipe.name, engine_casts=True, engine_masters=False, reduce_dtype=grad_reduce_dtype,
                      grad_dtype=recipe.param_dtype)
    return Layout("fsdp", recipe.name, engine_casts=True, engine_masters=False, reduce_dtype=grad_reduce_dtype)


def reduced_every_micro_batch(strategy: str, master_weights: bool) -> bool:
    """Whether a step accumulating micro-batches over ranks reduces every micro-batch's gradients (else once a step,
    after the last): DDP defers the all-reduce of the micro-batches before the last (``no_sync``: their gradients add
    up on each rank, the last backward reduces the sum) -- but in master-* modes, whose backward moves the half
    gradients into the fp32 masters (and clears them) before the next one, so a skipped reduction would never
    happen; FSDP2 reduce-scatters every micro-batch's (skipped, each rank would hold every unsharded gradient). The
    rule ``train`` steps by and ``predict`` prices."""
    if strategy not in ("ddp", "fsdp"):
        raise ValueError(f"strategy {strategy!r}: ddp or fsdp")
    return strategy == "fsdp" or master_weights
