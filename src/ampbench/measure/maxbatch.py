"""Largest batch that fits: double until it does not, then binary search between the last fit and the first miss.

Each trial is a callable (the harness runs it in a fresh child process, so a CUDA OOM cannot leave
the allocator fragmented for the next trial) that runs a few full optimizer steps, loss scaler
included, and says whether the batch fit within the memory limit with the safety margin.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Trial:
    batch_size: int
    fits: bool
    peak_bytes: int | None = None
    reason: str = ""
    """Why it did not fit (OOM message, over budget) or why the trial failed otherwise."""
    failed: bool = False
    """True when the trial broke for a reason other than memory (the search stops: it cannot decide)."""


@dataclass
class SearchResult:
    max_batch: int | None
    """Largest batch that fit; None when even ``start`` did not (or a trial failed)."""
    limit_hit: bool
    trials: list[Trial] = field(default_factory=list)
    error: str = ""


def search_max_batch(trial: Callable[[int], Trial], start: int = 1, limit: int = 65536,
                     resolution: float = 1 / 64) -> SearchResult:
    """Exact for small batches; stops when the bracket is narrower than ``resolution`` x the fitting batch."""
    if start < 1 or limit < start:
        raise ValueError(f"need 1 <= start <= limit, got start={start}, limit={limit}")
    trials: list[Trial] = []

    def run(b: int) -> Trial:
        t = trial(b)
        trials.append(t)
        return t

    first = run(start)
    if first.failed:
        return SearchResult(None, False, trials, first.reason)
    if not first.fits:
        lo, hi = 0, start
    else:
        lo, hi = start, None
        while hi is None:
            if lo >= limit:
                return SearchResult(lo, True, trials)
            b = min(lo * 2, limit)
            t = run(b)
            if t.failed:
                return SearchResult(lo, False, trials, t.reason)
            if t.fits:
                lo = b
            else:
                hi = b
    while hi - lo > max(1, int(lo * resolution)):
        mid = (lo + hi) // 2
        t = run(mid)
        if t.failed:
            return SearchResult(lo or None, False, trials, t.reason)
        if t.fits:
            lo = mid
        else:
            hi = mid
    return SearchResult(lo or None, False, trials)


def measure_max_batch(trial: Callable[[int], Trial], start: int, limit: int,
                      throughput_at: Callable[[int], dict[str, Any]] | None = None) -> tuple[dict[str, Any], str]:
    """The row keys of a max-batch search (one process or across ranks: the same driver) and the error that
    stopped it ("" when none): the search from ``min(start, limit)``, its trials, and the throughput at the
    largest batch that fit (``throughput_at``, when given and the search found one: the row of a throughput-only cell
    at that batch). A throughput that could not be measured there says why in the keys' ``warnings`` (it was left
    out without a word: a timed run over --memory-budget at a batch the trials said fits read as a missing figure)."""
    result = search_max_batch(trial, start=min(start, limit), limit=limit)
    keys: dict[str, Any] = {"max_batch": result.max_batch, "max_batch_limit_hit": result.limit_hit,
                               "max_batch_trials": [[t.batch_size, t.fits, t.peak_bytes] for t in result.trials]}
    if not result.error and result.max_batch and throughput_at is not None:
        at = throughput_at(result.max_batch)
        speed = at.get("samples_per_s")
        if at.get("status") == "ok" and isinstance(speed, (int, float)):
            keys["max_batch_samples_per_s"] = speed
        elif at.get("status") == "oom":
            keys.update(_confirmed_below(result, at, throughput_at))
        else:
            why = at.get("reason") or "no row came back"
            keys["warnings"] = [f"throughput at the max batch {result.max_batch:,} not measured: "
                                f"{at.get('status') or 'failed'} ({why})"]
    return keys, result.error


def _confirmed_below(result: SearchResult, at: dict[str, Any],
                     throughput_at: Callable[[int], dict[str, Any]]) -> dict[str, Any]:
    """The timed run at the batch the trials said fits went over the limit (its longer run held more than their few
    steps: an allocator's growth, a CPU's resident memory): that batch does not train, so the max batch is the largest
    the trials fit below it where the timed run did fit, tried once. (It was kept, with a note: mnist-cnn's fp32 "max
    batch 960" on the CPU, and amp-bf16's "1.85x" over it, at a 960 that went over --memory-budget.)"""
    top = result.max_batch
    assert top is not None
    over = f"the timed run at the batch the trials fit, {top:,}, went over ({at.get('reason') or 'oom'})"
    below = [t.batch_size for t in result.trials if t.fits and t.batch_size < top]
    if not below:
        return {"max_batch": None, "warnings": [f"no max batch: {over}, and no smaller batch was tried; a larger "
                                                "--memory-margin leaves the search room"]}
    retry = max(below)
    again = throughput_at(retry)
    speed = again.get("samples_per_s")
    if again.get("status") == "ok" and isinstance(speed, (int, float)):
        return {"max_batch": retry, "max_batch_limit_hit": False, "max_batch_samples_per_s": speed,
                "warnings": [f"max batch {retry:,}, the largest the trials fit that a timed run confirmed: {over}"]}
    return {"max_batch": None, "warnings": [f"no max batch: {over}, and at {retry:,} too "
                                            f"({again.get('status') or 'failed'}: {again.get('reason') or 'no reason'}); "
                                            "a larger --memory-margin leaves the search room"]}
