"""When loading the data would take the speedup away: the advisor's line on a batch's loading time.

Each cell times the floor of data loading apart from its steps (``data_ms_per_batch``: a shuffled batch gathered from
the in-memory split and copied to the device, synchronised; no decoding, no augmentation). Half precision shortens
the step, not the loading, so a loop that loads each batch between steps -- no worker processes, no prefetch, a
blocking copy -- loses part of the gain: on the lent H200 the wide MLP's amp-bf16 step took 11.2 ms and its batch
8.2 ms to load (4096 rows copied to the device), so such a loop runs it at ~6x fp32 where the steps alone say ~9.7x.
The line says so where the floor is at least :data:`DATA_SHARE` of the advised mode's step, and what overlaps it.
"""

from __future__ import annotations

import math
from typing import Any

DATA_SHARE = 0.10
"""The loading floor's share of the advised mode's step from which the line is said: a loop that does not overlap
it then runs at least ~9 % slower than the steps alone (1 / 1.1)."""


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) and v > 0 else None


def sample_ms(row: dict[str, Any], with_data: bool) -> float | None:
    """Milliseconds a sample takes at the row's mean timed step, and with each micro-batch's loading added in
    series (``with_data``): the loop that loads a batch, then steps on it."""
    step, batch = _number(row.get("step_ms_mean")), _number(row.get("batch_size"))
    data = _number(row.get("data_ms_per_batch")) if with_data else 0.0
    if step is None or batch is None or data is None:
        return None
    micro = int(row.get("grad_accum") or 1)
    return (step + data * micro) / (batch * micro)


def data_advice(rows: list[dict[str, Any]], recommended: str | None) -> str | None:
    """The line for the mode advised among ``rows`` (one execution), or None where its loading floor is under
    :data:`DATA_SHARE` of its step, or not measured."""
    ok = {r["precision"]: r for r in rows if r.get("status") == "ok" and not r.get("optimizer_state")}
    best = ok.get(recommended or "")
    if best is None:
        return None
    step, data = _number(best.get("step_ms_mean")), _number(best.get("data_ms_per_batch"))
    if step is None or data is None:
        return None
    share = data * int(best.get("grad_accum") or 1) / step  # (each micro-batch is loaded)
    if share < DATA_SHARE:
        return None
    text = (f"data loading: a batch took {data:,.3g} ms to gather and copy to the device (the floor: from memory, no "
            f"decoding) against {recommended}'s {step:,.3g} ms step ({share:.0%})")
    base = ok.get("fp32")
    if base is not None and base is not best:
        alone = [sample_ms(r, False) for r in (base, best)]
        loaded = [sample_ms(r, True) for r in (base, best)]
        if None not in alone and None not in loaded:
            text += (f"; a loop that loads each batch before its step runs {recommended} at "
                     f"{loaded[0] / loaded[1]:.2f}x fp32, not {alone[0] / alone[1]:.2f}x")  # type: ignore[operator]
    return text + (" -- overlap loading with compute: DataLoader(num_workers > 0, pin_memory=True), "
                   ".to(device, non_blocking=True), prefetch the next batch")
