"""Bytes one rank sends per training step, from the layout's dtypes and the parameters' sizes.

Counted, not measured (DDP's reducer runs in C++, out of reach of Python hooks): the bandwidth-optimal
ring algorithms NCCL and gloo use move, per rank,
- all-reduce of S bytes: 2 (N - 1) / N x S (reduce-scatter, then all-gather);
- all-gather or reduce-scatter of S bytes (the whole tensor): (N - 1) / N x S.
DDP all-reduces every gradient once per step, in the reduce dtype. FSDP2 all-gathers the parameters in
the param dtype for the forward, again for the backward for units resharded after forward (every unit
but the root: here the normalisation units of master-*), and reduce-scatters the gradients in the reduce
dtype. FSDP fp8-tensorwise all-gathers the Float8Linear weights in fp8 (1 byte per element). Buckets,
padding and control messages (the fp8 scales' amax all-reduce: one float per layer) are left out: a floor,
exact for even shard sizes.
"""

from __future__ import annotations

import torch
from torch import nn

from ampbench.distributed.strategy import Layout


def _size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def bytes_per_step(layout: Layout, model: nn.Module, world: int, norm_params: int = 0, fp8_params: int = 0) -> int:
    """Per rank, per optimizer step. ``model``: the model (its trainable parameters' global sizes);
    ``norm_params``: how many of their elements sit in FSDP units of their own (resharded after forward);
    ``fp8_params``: how many are all-gathered in fp8 (``layout.fp8_all_gather``: the Float8Linear weights)."""
    numel = sum(p.numel() for p in model.parameters() if p.requires_grad)
    if layout.strategy == "ddp":
        return int(2 * (world - 1) / world * numel * _size(layout.reduce_dtype or layout.grad_dtype)) if world > 1 else 0
    gathered, reduced = fsdp_bytes(layout, numel, norm_params, fp8_params)
    return int((world - 1) / world * (gathered + reduced)) if world > 1 else 0


def fsdp_bytes(layout: Layout, numel: int, norm_params: int = 0, fp8_params: int = 0) -> tuple[int, int]:
    """FSDP2, per step: the bytes of the whole tensors all-gathered (the parameters in the param dtype for the forward,
    the norm units' fp32 ones twice: resharded after forward; fp8-tensorwise's Float8Linear weights in 1 byte) and
    reduce-scattered (the gradients in the reduce dtype), of ``numel`` trainable elements. A rank sends (N - 1) / N
    of each."""
    gather_dtype = layout.fsdp_param_dtype or layout.grad_dtype
    fp8 = fp8_params if layout.fp8_all_gather else 0
    gathered = (numel - norm_params - fp8) * _size(gather_dtype) + 2 * norm_params * 4 + fp8  # norm units: fp32, twice
    return gathered, numel * _size(layout.reduce_dtype or layout.grad_dtype)
