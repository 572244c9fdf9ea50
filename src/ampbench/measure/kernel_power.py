"""How a kernel table's power readings are named and its rows' host issue times read (``ampbench hw --calibrate``
writes them, ``predict`` prices energy and the host from them, its console table shows them): a leaf, torch-free."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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


def issue_us(row: Mapping[str, Any]) -> float | None:
    """A table row's host time to issue one call (its ``host_us``: a GPU sweep's), where the case is one call -- a
    forward+backward case (``*_fwd_bwd``) has autograd around its calls -- else None."""
    host = row.get("host_us")
    return None if host is None or row["op"].endswith("_fwd_bwd") else float(host)
