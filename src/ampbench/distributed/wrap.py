"""Wrap a set-up model for its strategy: DistributedDataParallel, or FSDP2 ``fully_shard`` with the
MixedPrecisionPolicy the (strategy, precision) layout says (:mod:`ampbench.distributed.strategy`).

``fully_shard`` replaces every parameter by a new sharded (DTensor) parameter (and fp8's conversion,
with the float8 all-gather, by a wrapped one), so an optimizer built before it holds stale tensors;
:func:`rebind_optimizer` points its param groups at the parameters now under the names the old ones had
(refused once it has state), so the usual order -- build model and optimizer, then ``mp.setup`` --
works under FSDP too.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.nn.parallel import DistributedDataParallel

from ampbench.distributed.strategy import Layout, reduced_every_micro_batch
from ampbench.distributed.units import blocks
from ampbench.errors import AmpbenchError, MisuseError


def require_process_group(what: str) -> None:
    if not (dist.is_available() and dist.is_initialized()):
        raise AmpbenchError(f"{what} needs torch.distributed initialised: launch with torchrun (or ampbench run "
                            "--nproc-per-node N) and call torch.distributed.init_process_group() before mp.setup()")


def default_mesh(device: torch.device) -> Any:
    """A 1-D mesh over every rank on ``device``'s type (gloo CPU meshes on a GPU box too, when asked)."""

    return init_device_mesh(device.type, (dist.get_world_size(),))


def param_names(model: nn.Module) -> dict[int, str]:
    """Each parameter's (first) fully-qualified name: taken before any conversion or sharding, which keep names."""
    names: dict[int, str] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), name)
    return names


def rebind_optimizer(optimizer: torch.optim.Optimizer, model: nn.Module, names: dict[int, str]) -> None:
    """Point ``optimizer``'s param groups at ``model``'s parameters now under the names the old ones had."""
    for group in optimizer.param_groups:
        new = []
        for p in group["params"]:
            name = names.get(id(p))
            if name is None:
                raise MisuseError("the optimizer holds a parameter that is not the model's: create it from "
                                  "model.parameters() before mp.setup()")
            new.append(model.get_parameter(name))
        group["params"] = new


def wrap_ddp(model: nn.Module, layout: Layout, device: torch.device, process_group: Any = None,
             find_unused_parameters: bool = False) -> nn.Module:
    ids = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else None
    # gradient_as_bucket_view: the gradients are views into the all-reduce buckets (DDP's own advice for memory):
    # without it every rank holds the gradients twice, once as .grad and once in the buckets
    ddp = DistributedDataParallel(model, device_ids=ids, process_group=process_group, gradient_as_bucket_view=True,
                                  find_unused_parameters=find_unused_parameters)
    if layout.reduce_dtype is not None and layout.reduce_dtype != layout.grad_dtype:
        ddp.register_comm_hook(process_group, compress_hook(layout.reduce_dtype))
    return ddp


def ddp_bucket_bytes(model: nn.Module) -> int | None:
    """Bytes of a DistributedDataParallel model's gradient buckets, as DDP reports them (None for other models).

    Every dense gradient of a DDP model lives in these buckets (as views: ``gradient_as_bucket_view``), also when
    the engine has moved a master-* mode's half gradients on to the fp32 masters and set ``.grad`` to None: the
    buckets stay allocated. So they are a DDP rank's gradient memory, whatever ``.grad`` shows."""
    logging_data = getattr(model, "_get_ddp_logging_data", None)
    if logging_data is None:
        return None
    sizes = str(logging_data().get("bucket_sizes") or "")
    return sum(int(x) for x in sizes.split(",") if x.strip().isdigit())


def deferred_sync(model: nn.Module, mp: Any) -> Any:
    """DDP's ``no_sync`` where a step's micro-batches before the last may skip their all-reduce (their gradients add up
    on each rank, the last backward reduces the sum); None where each must be reduced (master-* modes, FSDP2:
    :func:`~ampbench.distributed.strategy.reduced_every_micro_batch`) or there is nothing to reduce (one process).
    ``mp``: the model's :class:`~ampbench.precision.MixedPrecision`."""
    ddp = model if isinstance(model, DistributedDataParallel) else getattr(model, "_orig_mod", None)  # (compiled)
    if not isinstance(ddp, DistributedDataParallel) or reduced_every_micro_batch("ddp", bool(mp.master_params())):
        return None
    return ddp.no_sync


def compress_hook(dtype: torch.dtype) -> Any:
    """A DDP comm hook all-reducing each bucket in ``dtype`` (the mean, cast back into the bucket).

    Ours, not torch's ``bf16_compress_hook``: that one refuses any backend but NCCL by checking its own
    function name, and CPU runs use gloo. The arithmetic is the same: divide by the world size, cast,
    all-reduce (sum), cast back."""

    def hook(process_group, bucket):  # type: ignore[no-untyped-def]  (DDP rejects annotations other than its own types)
        group = process_group if process_group is not None else dist.group.WORLD
        buffer = bucket.buffer()
        compressed = buffer.div(dist.get_world_size(group)).to(dtype)
        fut = dist.all_reduce(compressed, group=group, async_op=True).get_future()

        def decompress(f: torch.futures.Future[list[torch.Tensor]]) -> torch.Tensor:
            buffer.copy_(f.value()[0])
            return buffer

        return fut.then(decompress)

    return hook


def wrap_fsdp(model: nn.Module, layout: Layout, mesh: Any, fp32_units: Sequence[nn.Module] = ()) -> nn.Module:
    """fully_shard the model (in place; its class becomes an FSDPModule) as FSDP2's users do: the fp32 units (the
    recipe's norms and kept modules, resolved by the precision engine) first when the layout says so, then each
    repeated block (:func:`ampbench.distributed.units.blocks`: a transformer's layers), then the root. Returns the
    model."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard  # lazy: torch.distributed.fsdp

    if layout.fsdp_norm_units:
        for module in fp32_units:
            if any(True for _ in module.parameters(recurse=True)):
                fully_shard(module, mesh=mesh, mp_policy=MixedPrecisionPolicy(
                    param_dtype=torch.float32, reduce_dtype=layout.reduce_dtype, output_dtype=layout.fsdp_param_dtype))
    policy = MixedPrecisionPolicy(param_dtype=layout.fsdp_param_dtype, reduce_dtype=layout.reduce_dtype,
                                  output_dtype=torch.float32 if layout.fsdp_param_dtype is not None else None)
    for block in blocks(model):  # (before the root: a unit's parameters are those no inner unit took)
        fully_shard(block, mesh=mesh, mp_policy=MixedPrecisionPolicy(
            param_dtype=layout.fsdp_param_dtype, reduce_dtype=layout.reduce_dtype))
    fully_shard(model, mesh=mesh, mp_policy=policy)
    # fp8-tensorwise (layout.fp8_all_gather): the Float8Linear weights are torchao's fp8-cast wrappers, whose
    # FSDP pre-all-gather casts each shard with the whole weight's amax (one all-reduce of one float per layer).
    # torchao's precompute_float8_dynamic_scale_for_fsdp (one all-reduce for all layers) is left out on purpose:
    # its scale must be recomputed after every change of the weights (a stale one clips them silently), and
    # the tensor it stores breaks a whole-model torch.compile (torch 2.13 + torchao 0.18: FakeTensor error in the
    # second compiled step), which fp8 on CUDA uses by default.
    return model


def shard_and_rebind(model: nn.Module, optimizers: list[torch.optim.Optimizer], layout: Layout, mesh: Any,
                     fp32_units: Sequence[nn.Module] = (), names: dict[int, str] | None = None) -> nn.Module:
    """``names``: :func:`param_names` of the model as the optimizers were built on it (before a conversion)."""
    for opt in optimizers:
        if opt.state:
            raise MisuseError(f"{type(opt).__name__} already has state (it stepped before mp.setup): under fsdp the "
                              "parameters are replaced by sharded ones; set up before the first step")
    names = param_names(model) if names is None else names
    wrap_fsdp(model, layout, mesh, fp32_units)
    for opt in optimizers:
        rebind_optimizer(opt, model, names)
        unfuse_without_dtensor_kernel(opt)
    return model


NO_DTENSOR_FUSED = (torch.optim.SGD, torch.optim.Adagrad)
"""Optimizers whose fused kernel DTensor has no sharding rule for (torch 2.13: ``aten._fused_sgd_`` raises
NotImplementedError on FSDP2's sharded parameters at the first step; fused Adam and AdamW run)."""


def unfuse_without_dtensor_kernel(optimizer: torch.optim.Optimizer) -> None:
    """A fused SGD or Adagrad over FSDP2's sharded parameters steps with its foreach implementation instead (the same
    update; the engine then decides the inf/NaN skip with one host read a step, as for any optimizer that cannot
    skip by itself), with a warning saying so: torch's fused kernel would fail at the first step."""
    if not isinstance(optimizer, NO_DTENSOR_FUSED) or not optimizer.defaults.get("fused"):
        return
    warnings.warn(f"{type(optimizer).__name__}(fused=True) has no kernel for FSDP2's sharded parameters in this torch: "
                  "it steps with foreach instead (the same update)", stacklevel=3)
    optimizer.defaults.update(fused=False, foreach=True)
    for group in optimizer.param_groups:
        group.update(fused=False, foreach=True)
    optimizer._step_supports_amp_scaling = False  # type: ignore[attr-defined]  (GradScaler's flag: no found_inf)
