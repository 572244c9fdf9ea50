"""Mixed precision on many devices over torch.distributed: DDP and FSDP2 (``MixedPrecision(...,
strategy="ddp"|"fsdp")``). ``strategy`` says what each (strategy, precision) pair does; ``wrap`` applies
it; ``checkpoint`` saves and resumes sharded state with torch.distributed.checkpoint."""

from ampbench.distributed.strategy import REDUCE_DTYPES, STRATEGIES, Layout, layout

__all__ = ["REDUCE_DTYPES", "STRATEGIES", "Layout", "layout"]
