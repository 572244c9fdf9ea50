"""distributed.strategy: the one rule of when an accumulating step reduces its gradients over ranks, which train
steps by (its DDP reductions counted in tests/distributed/test_strategies.py) and predict prices."""

from __future__ import annotations

import pytest

from ampbench.distributed.strategy import reduced_every_micro_batch
from ampbench.precision import get, list_precisions


def test_ddp_defers_all_but_master_modes_and_fsdp_reduces_every_micro_batch() -> None:
    for p in list_precisions():
        master = get(p).master_weights
        assert reduced_every_micro_batch("ddp", master) is master
        assert reduced_every_micro_batch("fsdp", master) is True
    assert reduced_every_micro_batch("ddp", get("master-bf16").master_weights)
    assert not reduced_every_micro_batch("ddp", get("amp-fp16").master_weights)
    with pytest.raises(ValueError, match="ddp or fsdp"):
        reduced_every_micro_batch("zero3", False)
