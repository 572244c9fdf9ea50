"""Which modules FSDP2 shards as units of their own, and how many parameter elements each kind of unit holds.

Users of FSDP2 wrap each repeated block (a transformer layer: torchtitan's ``for block in model.layers:
fully_shard(block)``, Hugging Face's ``_no_split_modules``) and then the root: a block's parameters are all-gathered
just before its forward, freed after it (``reshard_after_forward``), all-gathered again for its backward, and its
gradients reduce-scattered as soon as its backward is done -- so the collectives of one block overlap the compute of
its neighbours, and no rank holds more than a couple of blocks' whole parameters. One unit for the whole model would
all-gather everything before the forward and reduce-scatter everything after the backward, overlapping nothing.

:func:`blocks` finds the repeated blocks without being told: the children of the outermost ``nn.ModuleList`` or
``nn.Sequential`` whose children (two or more) are all of one class and each a block of layers (two or more of its
submodules hold parameters). A model without such a list (an MLP of Linear and ReLU layers, a list of embedding
tables) has none: its root is its one unit. :class:`FsdpSplit` is what ``run``
counts its bytes from and what ``predict`` prices (:func:`ampbench.distributed.comm.fsdp_bytes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn


def blocks(model: nn.Module) -> list[nn.Module]:
    """The repeated blocks of ``model`` (in forward order), each to be an FSDP2 unit of its own; [] if it has none."""
    found: list[nn.Module] = []

    def visit(module: nn.Module) -> None:
        for child in module.children():
            if isinstance(child, (nn.ModuleList, nn.Sequential)) and _repeated(child):
                found.extend(child.children())
            else:
                visit(child)

    visit(model)
    return found


def _repeated(container: nn.Module) -> bool:
    children = list(container.children())
    return len(children) >= 2 and len({type(c) for c in children}) == 1 and all(_composite(c) for c in children)


def _composite(module: nn.Module) -> bool:
    """A block of layers (two or more of its submodules hold parameters of their own), not one layer: a list of
    embedding tables or of single convolutions is not a stack of blocks."""
    return sum(1 for m in module.modules() if m is not module and any(True for _ in m.parameters(recurse=False))) >= 2


def _numel(module: nn.Module, exclude: set[int]) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad and id(p) not in exclude)


@dataclass(frozen=True)
class FsdpSplit:
    """The trainable parameter elements of a model by the FSDP2 unit that all-gathers them."""

    numel: int
    """All of them."""
    norm: int = 0
    """In the fp32 normalisation units of master-* (all-gathered in fp32, before the forward and again for the
    backward), where the layout makes them (``Layout.fsdp_norm_units``)."""
    norm_in_blocks: int = 0
    """Of ``norm``, inside the blocks (theirs where the layout makes no norm units)."""
    fp8: int = 0
    """The Float8Linear weights (all-gathered in fp8 under fp8-tensorwise), wherever they sit."""
    block: int = 0
    """In the repeated blocks' units (resharded after forward: all-gathered twice), the norm units' excluded."""
    block_fp8: int = 0
    """Of ``block``, the Float8Linear weights."""
    blocks: int = 0
    """How many block units."""

    def units(self, norm_units: bool) -> tuple[int, int, int]:
        """(root, blocks, norm units) elements, with or without master-*'s norm units: the root's are all-gathered
        once (FSDP2 keeps the root's parameters through the backward), the others twice."""
        norm = self.norm if norm_units else 0
        block = self.block + (0 if norm_units else self.norm_in_blocks)
        return self.numel - norm - block, block, norm


def split(model: nn.Module, norm_units: Sequence[nn.Module] = (), fp8_weights: Sequence[nn.Parameter] = ()) -> FsdpSplit:
    """``model``'s elements by unit: ``norm_units`` (master-*'s fp32 units), its repeated blocks, the root;
    ``fp8_weights``: the Float8Linear weights."""
    numel = _numel(model, set())
    norm_ids = {id(p) for m in norm_units for p in m.parameters()}
    norm = sum(p.numel() for m in norm_units for p in m.parameters() if p.requires_grad)
    fp8_ids = {id(w) for w in fp8_weights}
    fp8 = sum(w.numel() for w in fp8_weights)
    units = blocks(model)
    block = sum(_numel(b, norm_ids) for b in units)
    in_blocks = sum(_numel(b, set()) for b in units) - block
    block_fp8 = sum(p.numel() for b in units for p in b.parameters() if id(p) in fp8_ids)
    return FsdpSplit(numel, norm, in_blocks, fp8, block, block_fp8, len(units))


def fsdp_split(model: nn.Module, engine: Any) -> FsdpSplit:
    """The set-up ``model``'s elements by the FSDP2 unit that all-gathers them, as ``engine`` (a
    :class:`~ampbench.precision.MixedPrecision`) set it up: the modules it keeps as fp32 units of their own (FSDP
    master-*'s norms), the repeated blocks, the root, and the weights it converted to Float8Linear (all-gathered in
    fp8 under FSDP fp8-tensorwise) -- what ``run`` counts its FSDP bytes from, and ``predict`` too."""
    return split(model, engine.fp32_units(model), engine.fp8_weights(model))
