"""How a kernel table's power readings are named (``ampbench hw --calibrate`` writes them, ``predict`` prices energy
from them): a leaf, torch-free."""

from __future__ import annotations

REPLAY = "replay"
"""``power_basis`` of a table whose power was read over replays of one kernel alone
(:func:`ampbench.measure.calibrate.power_pass`). A table without it (the first H200 sweep's) read each class over its
whole timing, gaps between cases included: 130-650 W where its steps drew 550-700 -- not a kernel's power, and never
priced from."""
IDLE = "idle"
"""The reading of the board with nothing running, right after the sweep."""


def power_key(kind: str, dtype: str) -> str:
    """``gemm/bf16``, ``conv/fp16``, ``elementwise/fp32``: a kernel class in a dtype (its math for matmuls)."""
    return f"{kind}/{dtype}"
