"""How reports write numbers: a leaf every report module may import."""

from __future__ import annotations

import math


def sig(x: float, digits: int = 3) -> str:
    """``x`` to ``digits`` significant digits, never in scientific notation: 0.00312, 3.12, 3,120, 1,000."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    return f"{round(x, decimals):,.{decimals}f}"
