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
(torch.utils.checkpoint's own), so a step's gradients are the eager step's; a block's BatchNorm layers keep their
running statistics through the recompute (momentum 0 there, their batch count restored: updated once a step, as
without checkpointing) -- but under torch.compile, whose checkpoint takes no such context: there they are updated
again in the recompute, as with every plain use of torch.utils.checkpoint in training mode.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
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


def _statistics_kept(block: nn.Module) -> Callable[[], tuple[Any, Any]] | None:
    """``checkpoint``'s ``context_fn`` for a block holding BatchNorm layers that track running statistics: nothing
    around the forward; around the recompute, each layer's momentum 0 (its running mean and variance unchanged) and
    its batch count restored after, so the statistics are updated once a step, as without checkpointing. None for a
    block without such layers."""
    norms = [m for m in block.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats]
    if not norms:
        return None

    @contextlib.contextmanager
    def recompute() -> Iterator[None]:
        saved = [(m, m.momentum, None if m.num_batches_tracked is None else m.num_batches_tracked.clone()) for m in norms]
        for m in norms:
            m.momentum = 0.0
        try:
            yield
        finally:
            for m, momentum, count in saved:
                m.momentum = momentum
                if count is not None:
                    m.num_batches_tracked.copy_(count)

    return lambda: (contextlib.nullcontext(), recompute())


def checkpoint_blocks(model: nn.Module, what: str, keep_statistics: bool = True) -> int:
    """Checkpoint each of ``model``'s repeated blocks (in place; once); the number of blocks (none: refused,
    :func:`check_blocks`). ``keep_statistics``: BatchNorm's running statistics not updated again in the recompute
    (:func:`_statistics_kept`; False under torch.compile, whose checkpoint takes only selective-checkpoint contexts:
    there they are updated twice a step, as every torch.utils.checkpoint user's are)."""
    found = check_blocks(model, what)
    for block in found:
        if getattr(block, MARK, False):
            continue
        forward = block.forward
        context = _statistics_kept(block) if keep_statistics else None
        options: dict[str, Any] = {} if context is None else {"context_fn": context}

        @functools.wraps(forward)
        def run(*args: Any, _forward: Any = forward, _options: dict[str, Any] = options, **kwargs: Any) -> Any:
            return checkpoint(_forward, *args, use_reentrant=False, **_options, **kwargs)

        block.forward = run  # type: ignore[method-assign]
        setattr(block, MARK, True)
    return len(found)


def checkpointed_names(model: nn.Module) -> list[str]:
    """The names of ``model``'s modules that run checkpointed (as ``named_modules`` says them)."""
    return [name for name, m in model.named_modules() if getattr(m, MARK, False)]
