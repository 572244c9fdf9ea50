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

from dataclasses import dataclass

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
    """FSDP2, per step: the bytes of the whole tensors all-gathered and reduce-scattered (:func:`fsdp_unit_bytes`,
    summed). A rank sends (N - 1) / N of each."""
    b = fsdp_unit_bytes(layout, split)
    return b.gathered, b.reduced


@dataclass(frozen=True)
class UnitBytes:
    """FSDP2's collectives of one step by unit, as ``run`` wraps the model: the root and ``blocks`` blocks of one size
    (master-*'s fp32 norm units folded into the unit they sit in; outside the blocks, into the root). Bytes of the whole
    tensors."""

    blocks: int
    root_gather: int
    """The root's parameters, all-gathered before the forward (kept through the backward)."""
    root_regather: int
    """master-*'s norm units outside the blocks, all-gathered again for the backward (resharded after forward)."""
    blocks_gather: int
    """The blocks' parameters, each block's all-gathered before its forward and again before its backward."""
    root_reduce: int
    blocks_reduce: int
    """The blocks' gradients, each block's reduce-scattered when its backward ends."""

    @property
    def gathered(self) -> int:
        return self.root_gather + self.root_regather + 2 * self.blocks_gather

    @property
    def reduced(self) -> int:
        return self.root_reduce + self.blocks_reduce

    @property
    def block_gather(self) -> float:
        """One block's all-gather."""
        return self.blocks_gather / self.blocks if self.blocks else 0.0

    @property
    def block_reduce(self) -> float:
        """One block's reduce-scatter."""
        return self.blocks_reduce / self.blocks if self.blocks else 0.0


def fsdp_unit_bytes(layout: Layout, split: FsdpSplit) -> UnitBytes:
    """All-gathered: the root's parameters once, in the param dtype; the blocks' twice (resharded after forward), in
    the param dtype; master-*'s norm units' twice, in fp32; under fp8-tensorwise the Float8Linear weights in 1 byte.
    Reduce-scattered: every gradient in the reduce dtype."""
    g, r = fsdp_gather_size(layout), _size(layout.reduce_dtype or layout.grad_dtype)
    root, block, norm = split.units(layout.fsdp_norm_units)
    fp8, block_fp8 = (split.fp8, split.block_fp8) if layout.fp8_all_gather else (0, 0)
    root_fp8 = fp8 - block_fp8
    norm_in = split.norm_in_blocks if layout.fsdp_norm_units else 0
    norm_out = norm - norm_in
    blocks_reduce = (block + norm_in) * r if split.blocks else 0
    return UnitBytes(split.blocks, (root - root_fp8) * g + root_fp8 + norm_out * 4, norm_out * 4,
                     (block - block_fp8) * g + block_fp8 + norm_in * 4, split.numel * r - blocks_reduce, blocks_reduce)


def fsdp_gather_size(layout: Layout) -> int:
    """Bytes per element FSDP2 all-gathers parameters in (its param dtype; the parameters' own without one)."""
    return _size(layout.fsdp_param_dtype or layout.grad_dtype)
