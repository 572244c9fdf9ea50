"""The convergence table of a run's report, one for the HTML page and the Markdown summary: each mode's final
training loss (the mean loss of its last 10% of steps, over the seeds, ± half their range), the held-out split's
metric, the verdict against fp32, its tolerance, the skipped steps, the steps and seeds, and the time to fp32's loss.

The loss and the metric come from different data -- the loss from the training batches (with dropout), the metric
from the held-out split, evaluated once at the end -- and the headers say so: a perplexity beside "final loss" read as
that loss's exponential (run's line said "final loss 3.816, perplexity 26.9"; exp(3.816) is 45).
"""

from __future__ import annotations

from typing import Any

from ampbench.store.time_to_loss import text as time_to_loss_text
from ampbench.train_line import metric_text


def headers(rows: list[dict[str, Any]]) -> list[str]:
    """The table's headers for these (converge) rows: the time and energy to fp32's loss only where a row has them."""
    name = next((r["metric_name"] for r in rows if r.get("metric_name")), None) or "metric"
    return ["precision", "final train loss (last 10% of steps; mean ± half range over seeds)", f"test {name}",
            "verdict", "tolerance", "skipped steps", "steps × seeds",
            *(["to fp32 loss: speedup (steps)"] if has_time_to_loss(rows) else []),
            *(["J to fp32 loss"] if has_energy_to_loss(rows) else [])]


def has_time_to_loss(rows: list[dict[str, Any]]) -> bool:
    return any(r.get("fp32_loss_target") is not None for r in rows)


def has_energy_to_loss(rows: list[dict[str, Any]]) -> bool:
    return any(r.get("energy_to_fp32_loss_j") is not None for r in rows)


def cells(r: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    """The row's cells after its name, in :func:`headers`' order, as text (no figure: "–"); ``r["converge"]`` as
    :func:`ampbench.measure.seeds.summarize` stores it, ``rows`` the table's (for its optional columns)."""
    c = r["converge"]
    finals = [x for x in c.get("final_losses") or [] if x is not None]
    spread = (max(finals) - min(finals)) if len(finals) > 1 else 0.0
    metrics = [m for m in c.get("metrics") or [] if m is not None]
    energy = r.get("energy_to_fp32_loss_j")
    to_loss = time_to_loss_text(r)
    return [f"{sum(finals) / len(finals):.4f} ± {spread / 2:.4f}" if finals else "–",
            metric_text(r.get("metric_name") or "metric", sum(metrics) / len(metrics)) if metrics else "–",
            r.get("converge_verdict") or "–",
            f"{r['converge_tolerance']:.4f}" if isinstance(r.get("converge_tolerance"), (int, float)) else "–",
            str(sum(c.get("skipped_steps") or [])), f"{c.get('steps')} × {len(c.get('seeds') or [])}",
            *(["–" if to_loss == "-" else to_loss] if has_time_to_loss(rows) else []),
            *([f"{energy:,.0f}" if isinstance(energy, (int, float)) else "–"] if has_energy_to_loss(rows) else [])]
