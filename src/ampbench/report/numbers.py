"""How reports write numbers: a leaf every report module may import."""

from __future__ import annotations

import math
from typing import Any

SHOWN = 0.005
"""The smallest fraction a report writes as a change: below it a whole percent reads "0%", so "same" (a memory
saving), no "moved" (fp32's drift), no "±" (a noise). The store's time-to-loss line keeps its own copy (the store is
below the reports)."""


def sig(x: float, digits: int = 3) -> str:
    """``x`` to ``digits`` significant digits, never in scientific notation: 0.00312, 3.12, 3,120, 1,000."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    return f"{round(x, decimals):,.{decimals}f}"


BYTE_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def bytes_unit(values: Any) -> str:
    """The unit a column (or a chart's axis) of byte counts is written in: the one its largest fills."""
    largest = max((abs(v) for v in values if isinstance(v, (int, float))), default=0)
    return next((name for name, size in BYTE_UNITS if largest >= size), "B")


def unit_bytes(unit: str) -> int:
    """Bytes in ``unit`` (GiB, MiB, KiB or B)."""
    return dict(BYTE_UNITS).get(unit, 1)


def fmt_bytes(n: Any, unit: str | None = None) -> str:
    """Bytes in the largest unit they fill (``unit``: in that one, a column's: its figures side by side alike)."""
    if not isinstance(n, (int, float)):
        return "-"
    unit = unit or bytes_unit([n])
    size = unit_bytes(unit)
    return f"{n / size:,.1f} {unit}" if size > 1 else f"{n:,.0f} B"
