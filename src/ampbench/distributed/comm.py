"""Bytes one rank sends per training step, from the layout's dtypes and the parameters' sizes.

Counted, not measured (DDP's reducer runs in C++, out of reach of Python hooks): the bandwidth-optimal
ring algorithms NCCL and gloo use move, per rank,
- all-reduce of S bytes: 2 (N - 1) / N x S (reduce-scatter, then all-gather);
- all-gather or reduce-scatter of S bytes (the whole tensor): (N - 1) / N x S.
DDP all-reduces every gradient once per step, in the reduce dtype. FSDP2 all-gathers the parameters in
the param dtype for the forward, again for the backward for units resharded after forward (every unit
but the root: the repeated blocks, and the normalisation units of master-*; :mod:`ampbench.distributed.units`),
and reduce-scatters the gradients in the reduce dtype. FSDP fp8-tensorwise all-gathers the Float8Linear
weights in fp8 (1 byte per element). Buckets, padding and control messages (the fp8 scales' amax all-reduce:
one float per layer) are left out: a floor, exact for even shard sizes.
"""

from __future__ import annotations

import torch
from torch import nn

from ampbench.distributed.strategy import Layout
from ampbench.distributed.units import FsdpSplit


def _size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def bytes_per_step(layout: Layout, model: nn.Module, world: int, split: FsdpSplit | None = None) -> int:
    """Per rank, per optimizer step. ``model``: the model (its trainable parameters' global sizes); ``split``: FSDP's
    elements by unit (:func:`ampbench.distributed.units.split`; None: the root alone)."""
    numel = sum(p.numel() for p in model.parameters() if p.requires_grad)
    if layout.strategy == "ddp":
        return int(2 * (world - 1) / world * numel * _size(layout.reduce_dtype or layout.grad_dtype)) if world > 1 else 0
    gathered, reduced = fsdp_bytes(layout, split or FsdpSplit(numel))
    return int((world - 1) / world * (gathered + reduced)) if world > 1 else 0


def fsdp_bytes(layout: Layout, split: FsdpSplit) -> tuple[int, int]:
    """FSDP2, per step: the bytes of the whole tensors all-gathered and reduce-scattered. All-gathered: the root's
    parameters once, in the param dtype; the blocks' twice (resharded after forward), in the param dtype; master-*'s
    norm units' twice, in fp32; under fp8-tensorwise the Float8Linear weights in 1 byte. Reduce-scattered: every
    gradient in the reduce dtype. A rank sends (N - 1) / N of each."""
    g = fsdp_gather_size(layout)
    root, block, norm = split.units(layout.fsdp_norm_units)
    fp8, block_fp8 = (split.fp8, split.block_fp8) if layout.fp8_all_gather else (0, 0)
    root_fp8 = fp8 - block_fp8
    gathered = (root - root_fp8) * g + root_fp8 + 2 * ((block - block_fp8) * g + block_fp8) + 2 * norm * 4
    return gathered, split.numel * _size(layout.reduce_dtype or layout.grad_dtype)


def fsdp_gather_size(layout: Layout) -> int:
    """Bytes per element FSDP2 all-gathers parameters in (its param dtype; the parameters' own without one)."""
    return _size(layout.fsdp_param_dtype or layout.grad_dtype)
