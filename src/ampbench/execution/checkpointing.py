"""Activation checkpointing of a model's repeated blocks (``--checkpointing blocks``): each block's forward runs
under ``torch.utils.checkpoint`` (non-reentrant), so the backward recomputes the block's activations from its input
instead of holding them -- a forward of each block more, for the memory of one block's activations at a time.

The blocks are those FSDP2 shards as units (:func:`ampbench.distributed.units.blocks`: the children of an
``nn.ModuleList``/``nn.Sequential`` of two or more like submodules of several layers -- a transformer's layers, a
ResNet's bottlenecks), found the same way on every device and on the meta model ``predict`` traces. The block's
``forward`` is replaced on the instance (its parameters keep their names, so checkpoints, ``keep_fp32`` names and
FSDP2's units are unchanged) -- what ``torch.distributed``'s ``checkpoint_wrapper`` does with a wrapper module,
without the ``_checkpoint_wrapped_module`` prefix it puts in every parameter's name.

FLOPs: a step's model FLOPs (``flops_per_step``, and MFU on them, the PaLM paper's definition) leave the recompute
out; ``recomputed_flops_per_step`` is what it adds, counted on one forward of the checkpointed blocks.

Numerics: the recompute restores the RNG state (dropout draws the same masks) and the autocast state of the forward
(torch.utils.checkpoint's own), so a step's gradients are the eager step's; BatchNorm in a block updates its running
statistics once more in the recompute (as with every use of torch.utils.checkpoint in training mode).
"""

from __future__ import annotations

import functools
from typing import Any

from torch import nn
from torch.utils.checkpoint import checkpoint

from ampbench.distributed.units import blocks
from ampbench.errors import AmpbenchError

MARK = "_ampbench_checkpointed"


def check_blocks(model: nn.Module, what: str) -> list[nn.Module]:
    """``model``'s repeated blocks; a model without any is refused in one line (``what``: the model, for the
    message) -- checked before a run, a training or a prediction starts."""
    found = blocks(model)
    if not found:
        raise AmpbenchError(f"--checkpointing blocks: {what} has no repeated blocks to checkpoint (an nn.ModuleList or "
                            "nn.Sequential of two or more like submodules with layers of their own, e.g. a "
                            "transformer's layers or a ResNet's bottlenecks); use --checkpointing off")
    return found


def checkpoint_blocks(model: nn.Module, what: str) -> int:
    """Checkpoint each of ``model``'s repeated blocks (in place; once); the number of blocks (none: refused,
    :func:`check_blocks`)."""
    found = check_blocks(model, what)
    for block in found:
        if getattr(block, MARK, False):
            continue
        forward = block.forward

        @functools.wraps(forward)
        def run(*args: Any, _forward: Any = forward, **kwargs: Any) -> Any:
            return checkpoint(_forward, *args, use_reentrant=False, **kwargs)

        block.forward = run  # type: ignore[method-assign]
        setattr(block, MARK, True)
    return len(found)


def checkpointed_names(model: nn.Module) -> list[str]:
    """The names of ``model``'s modules that run checkpointed (as ``named_modules`` says them)."""
    return [name for name, m in model.named_modules() if getattr(m, MARK, False)]
