"""Values the command line gives, parsed: comma-separated lists, the measurements, sizes, batch sizes -- each one line
naming the flag when it is wrong. Torch-free: the command's option sections parse with these before torch is
imported (:mod:`ampbench.command_options`)."""

from __future__ import annotations

from ampbench.cells import DEFAULT_MEASURES, MEASURES
from ampbench.errors import AmpbenchError


def parse_list(value: str | None, what: str) -> list[str]:
    if value is None:
        return []
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise AmpbenchError(f"--{what} is empty: give a comma-separated list")
    return items


def parse_unique(value: str | None, what: str) -> list[str]:
    """:func:`parse_list` with each item once, in the order given (a workload named twice is one workload, as a
    precision named twice is one mode: it ran every cell of it twice)."""
    return list(dict.fromkeys(parse_list(value, what)))


def says_all(names: list[str]) -> bool:
    """Whether a parsed list names ``all`` (alone or among others: it holds them)."""
    return any(n.strip().lower() == "all" for n in names)


def parse_measures(value: str | None) -> tuple[str, ...]:
    if value is None:
        return DEFAULT_MEASURES
    items = parse_list(value, "measure")
    bad = [m for m in items if m not in MEASURES]
    if bad:
        raise AmpbenchError(f"--measure {','.join(bad)}: unknown measurement; choose from {','.join(MEASURES)}")
    return tuple(m for m in MEASURES if m in items)  # canonical order, no duplicates


def parse_size(value: str | None, what: str) -> int | None:
    """'2GiB', '512MB', '1e9' -> bytes."""
    if value is None:
        return None
    units = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}
    v = value.strip().lower().replace(" ", "")
    num = v.rstrip("kmgib")
    unit = v[len(num):]
    try:
        n = float(num)
    except ValueError:
        n = -1.0
    if unit not in units or n <= 0:
        raise AmpbenchError(f"--{what} {value!r}: expected a size like 2GiB, 512MiB or 800MB")
    return int(n * units[unit])


def parse_grad_accums(value: str | int | None) -> tuple[int, ...]:
    """``--grad-accum``: micro-batches a step, one value or several comma-separated (each an axis point); None: 1."""
    if value is None:
        return (1,)
    if isinstance(value, bool):
        raise AmpbenchError(f"--grad-accum {value!r}: expected integers >= 1, e.g. 4 or 1,4")
    try:
        counts = [value] if isinstance(value, int) else [int(n) for n in parse_list(value, "grad-accum")]
    except ValueError:
        raise AmpbenchError(f"--grad-accum {value!r}: expected integers >= 1, e.g. 4 or 1,4") from None
    for n in counts:
        check_grad_accum(n)
    return tuple(dict.fromkeys(counts))


def check_grad_accum(n: object) -> None:
    """One ``--grad-accum`` value: an integer >= 1, else one line naming it."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise AmpbenchError(f"--grad-accum {n}: give the micro-batches per optimizer step, an integer >= 1 (1: no "
                            "accumulation)")


def parse_batch_sizes(value: str | None) -> tuple[int | None, ...]:
    if value is None:
        return (None,)
    try:
        sizes = [int(b) for b in parse_list(value, "batch-size")]
    except ValueError:
        raise AmpbenchError(f"--batch-size {value!r}: expected integers, e.g. 64 or 64,128") from None
    if any(b < 1 for b in sizes):
        raise AmpbenchError(f"--batch-size must be >= 1, got {value}")
    return tuple(dict.fromkeys(sizes))  # (a size given twice is one cell, as a precision given twice is: it ran twice)
