"""The advisor's line on optimizer-state precision (``--optimizer-state``): a state is advised for memory only, and
only with its own convergence verdict.

A row with a state precision is compared with the same mode, same execution, with the optimizer as the workload
builds it: what it saves (the max batch where the run searched it -- "fits batch N instead of M" --, else the
compared memory) and whether its final loss stayed within fp32's seed spread (``converge_verdict`` parity, against
fp32 with the optimizer as built). Speed is never the reason: torchao's update is a Python loop of compiled calls, and
an 8-bit state trades arithmetic for bytes. Rows: one run, one device, one workload (``workload_groups``).
"""

from __future__ import annotations

from typing import Any

from ampbench.store.derive import below_fp32, compared_memory

MIN_SAVING = 0.05
"""The share of the mode's memory a state must save to be worth its numerics (with a measured max batch: a batch at
least this much larger)."""


def state_advice(rows: list[dict[str, Any]], recommended: str | None) -> str | None:
    """One line on the optimizer states the rows measured (None when they measured none): the leanest state with a
    parity verdict for the recommended mode (else any mode), or why none is advised."""
    states = [r for r in rows if r.get("optimizer_state") and r.get("status") == "ok"]
    if not states:
        return None
    own = {r["precision"]: r for r in rows if not r.get("optimizer_state") and r.get("status") == "ok"}
    pairs = [(r, own[r["precision"]]) for r in states if r["precision"] in own]
    if not pairs:
        return "optimizer states: no row of the same mode with its optimizer as built to compare with"
    for_mode = [p for p in pairs if p[0]["precision"] == recommended] or pairs
    gains = [(r, base, _gain(r, base)) for r, base in for_mode]
    worth = [g for g in gains if g[2] is not None and g[2][0] >= MIN_SAVING]
    if not worth:
        return "optimizer states: none saves memory here (" + ", ".join(
            f"{r['precision']} {r['optimizer_state']}: {_said(g)}" for r, _, g in gains) + ")"
    parity = [g for g in worth if g[0].get("converge_verdict") == "parity"]
    if not parity:
        r, base, g = max(worth, key=lambda x: x[2][0])  # type: ignore[index]
        verdict = r.get("converge_verdict")
        why = ("its convergence has no fp32 baseline to be judged by (add fp32 to --precisions)"
               if verdict == "no-baseline" else f"its convergence was {verdict}" if verdict else
               "run --measure converge: a state precision is advised only with its convergence verdict")
        return f"optimizer states: {r['precision']} with {r['optimizer_state']} states {_said(g)}, not advised: {why}"
    r, base, g = max(parity, key=lambda x: x[2][0])  # type: ignore[index]
    below = below_fp32(r, own.get("fp32"))
    loss = (f"final loss {below[0]:.4g}, below fp32's {below[1]:.4g} by more than its seed spread: it did not train "
            "as fp32 does" if below else "final loss within fp32's seed spread")
    return (f"optimizer states: {r['precision']} with {r['optimizer_state']} states {_said(g)}, {loss} "
            f"({r.get('optimizer_states') or r['optimizer_state']})")


def _gain(r: dict[str, Any], base: dict[str, Any]) -> tuple[float, str] | None:
    """(relative gain, what it is in words) of state row ``r`` over its mode's row ``base``: the max batch when both
    have one (found: a search stopped at its limit found only a lower bound), else the compared memory."""
    mine, theirs = r.get("max_batch"), base.get("max_batch")
    found = not (r.get("max_batch_limit_hit") or base.get("max_batch_limit_hit"))
    if isinstance(mine, int) and isinstance(theirs, int) and theirs > 0 and found:
        return mine / theirs - 1, f"fits batch {mine:,} instead of {theirs:,}"
    a, b = compared_memory(r), compared_memory(base)
    if a is None or not b:
        return None
    return 1 - a / b, f"takes {1 - a / b:.0%} less memory than {base['precision']} with its optimizer as built"


def _said(g: tuple[float, str] | None) -> str:
    return "no comparable memory" if g is None else g[1]
