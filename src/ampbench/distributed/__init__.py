"""Mixed precision on many devices over torch.distributed: DDP and FSDP2 (``MixedPrecision(...,
placement=Ddp(...) | Fsdp(...))``, :mod:`ampbench.distributed.placement`). ``strategy`` says what each (strategy,
precision) pair does; ``wrap`` applies it; ``checkpoint`` saves and resumes sharded state with
torch.distributed.checkpoint."""

import torch.distributed as dist

from ampbench.distributed.strategy import REDUCE_DTYPES, STRATEGIES, Layout, layout


def current_rank() -> int:
    """This process's global rank (0 outside torch.distributed)."""
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


__all__ = ["REDUCE_DTYPES", "STRATEGIES", "Layout", "current_rank", "layout"]
