"""What a run's out-of-memory rows say about gradient accumulation: a mode that ran out of memory at its batch trains
the same samples a step as micro-batches that fit (``ampbench train --grad-accum N``), the split chosen from the
largest batch the run measured (``--measure maxbatch``)."""

from __future__ import annotations

from typing import Any

from ampbench.precision import half_gradients
from ampbench.report.numbers import fmt_bytes


def micro_batches(batch: int, largest: int) -> tuple[int, int]:
    """(N, micro-batch): the fewest micro-batches of one size, each at most ``largest``, that make exactly ``batch``
    samples (N = ``batch`` at worst: micro-batches of 1)."""
    if largest < 1 or batch < 1:
        raise ValueError(f"batch {batch} and largest {largest} must be >= 1")
    n = -(-batch // largest)
    while batch % n:
        n += 1
    return n, batch // n


def split(batch: Any, largest: Any) -> tuple[int, int] | None:
    """:func:`micro_batches` for a batch over the largest that fits; None where it fits or either is unknown."""
    if not (isinstance(batch, int) and isinstance(largest, int) and 0 < largest < batch):
        return None
    return micro_batches(batch, largest)


def accumulate_text(batch: Any, largest: Any) -> str | None:
    """"it trains batch 256 a step as 2 x 128 by gradient accumulation (ampbench train --batch-size 128 --grad-accum
    2)" for a batch over the largest that fits (None: it fits, or either is unknown)."""
    parts = split(batch, largest)
    if parts is None:
        return None
    n, micro = parts
    return (f"it trains batch {batch:,} a step as {n} x {micro:,} by gradient accumulation (ampbench train --batch-size "
            f"{micro} --grad-accum {n})")


def _held(r: dict[str, Any]) -> int | None:
    """The gradients a step of this mode sums its micro-batches into (fp32 but in pure-* modes)."""
    held = r.get("model_bytes_half") if half_gradients(str(r.get("precision", ""))) else r.get("model_bytes_fp32")
    return held if isinstance(held, int) else None


def accumulation_note(rows: list[dict[str, Any]]) -> str | None:
    """One clause for the rows that ran out of memory at their batch: the split into micro-batches that trains that
    batch a step where the largest batch that fit was measured, the measurement to run where it was not; None when no
    row ran out of memory."""
    oom = [r for r in rows if r.get("status") == "oom" and isinstance(r.get("batch_size"), int)]
    if not oom:
        return None
    batches = sorted({r["batch_size"] for r in oom})
    one = f"batch {batches[0]:,}" if len(batches) == 1 else None
    splits, held, unmeasured = [], [], []
    for r in oom:
        largest, parts = r.get("max_batch"), split(r["batch_size"], r.get("max_batch"))
        if parts is not None:
            splits.append(f"{r['precision']} {parts[0]} x {parts[1]:,}")
            held.append(_held(r) or 0)
        elif not largest:
            unmeasured.append(r["precision"])
    parts = []
    if splits:
        gradients = f"; the summed gradients (up to {fmt_bytes(max(held))}) stay allocated across the micro-batches"
        parts.append(f"{one or 'the same batch'} a step by gradient accumulation (ampbench train --batch-size M "
                     f"--grad-accum N, M within the largest batch that fit): {', '.join(splits)}"
                     + (gradients if max(held) else ""))
    if unmeasured:
        parts.append(f"{', '.join(unmeasured)} out of memory at {one or 'their batches'}: --measure maxbatch finds the "
                     "largest batch that fits, and ampbench train --grad-accum N trains the whole batch a step from it")
    return "; ".join(parts) or None
