"""What out-of-memory rows say about training their batch all the same: a mode that ran out of memory at its batch
trains the same samples a step as micro-batches that fit (``ampbench train --grad-accum N``) -- a run's split chosen
from the largest batch it measured (``--measure maxbatch``), a prediction's from the accumulated step ``predict``
priced (``predicted_accumulated_*``) -- or, a model with repeated blocks, whole with them checkpointed (a
prediction's ``predicted_checkpointed``: each policy's peak and step), and which is faster; and what accumulating
costs where a run measured it beside the plain step (``run --grad-accum 1,N``: :func:`accumulation_cost`)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ampbench.cells import CellId
from ampbench.execution.micro_batches import split
from ampbench.modes import half_gradients
from ampbench.report.numbers import fmt_bytes


def predicted_split(r: dict[str, Any]) -> tuple[int, int] | None:
    """(N, micro-batch) an out-of-memory predicted row trains its batch by: the accumulated step ``predict`` priced
    (``predicted_accumulated_*``: checked on its own peak, the earlier micro-batches' gradients held), else -- rows
    predicted before those keys -- the split within its largest batch; None where none fits."""
    if r.get("predicted_accumulated_batch"):
        return int(r["predicted_accumulated_micro_batches"]), int(r["predicted_accumulated_batch"])
    if "predicted_accumulated_batch" in r:  # (priced: no micro-batch fits beside the held gradients)
        return None
    return split(r.get("batch_size"), r.get("predicted_max_batch"))


def accumulated_step_text(r: dict[str, Any]) -> str:
    """"612 ms a step, 418 samples/s" of a predicted row's accumulated step ("" where none was priced; samples/s every
    rank's over many GPUs)."""
    ms, rate = r.get("predicted_accumulated_step_ms"), r.get("predicted_accumulated_samples_per_s")
    return f"{ms:,.1f} ms a step, {rate:,.0f} samples/s" if ms and rate else ""


def accumulate_text(r: dict[str, Any]) -> str | None:
    """"it trains batch 256 a step as 2 x 128 by gradient accumulation (ampbench train --batch-size 128 --grad-accum
    2): 612 ms a step, 418 samples/s predicted" for a predicted row over the largest batch that fits
    (:func:`predicted_split`; None: it fits, or no split is known)."""
    parts = predicted_split(r)
    if parts is None:
        return None
    n, micro, step = *parts, accumulated_step_text(r)
    return (f"it trains batch {r['batch_size']:,} a step as {n} x {micro:,} by gradient accumulation (ampbench train "
            f"--batch-size {micro} --grad-accum {n}{_ranks(r)})" + (f": {step} predicted" if step else ""))


def _ranks(r: dict[str, Any]) -> str:
    """" --strategy ddp --nproc-per-node 8" of a many-GPU row (train's options for its ranks); "" of one GPU's."""
    if not r.get("strategy"):
        return ""
    nodes = int(r.get("nodes") or 1)
    return (f" --strategy {r['strategy']} --nproc-per-node {r.get('gpus_per_node') or r.get('world_size')}"
            + (f" --nnodes {nodes}" if nodes > 1 else ""))


def checkpointed_text(r: dict[str, Any]) -> str | None:
    """What an out-of-memory predicted row of a model with repeated blocks says of checkpointing them at its batch
    (``predicted_checkpointed``: each policy's peak, and step where it fits): "checkpointing its 16 repeated blocks:
    blocks 2,910.6 ms a step, 88 samples/s (8.7 GiB); selective does not fit (17.9 GiB); the faster way to this batch:
    gradient accumulation (117 against 88 samples/s)"; the pointer to ``--checkpointing`` where a row predates the
    key; None without blocks."""
    found = r.get("predicted_blocks")
    if not found:
        return None
    head = f"checkpointing its {found} repeated blocks"
    policies = r.get("predicted_checkpointed")
    if not isinstance(policies, dict) or not policies:
        return f"{head} holds less of the batch's activations (predict --checkpointing off,blocks,selective prices it)"
    parts, best = [], None
    for policy, c in policies.items():
        peak = fmt_bytes(int(c.get("peak_bytes") or 0))
        if c.get("samples_per_s"):
            parts.append(f"{policy} {c['step_ms']:,.1f} ms a step, {c['samples_per_s']:,.0f} samples/s ({peak})")
            best = best if best is not None and best[1] >= c["samples_per_s"] else (policy, c["samples_per_s"])
        else:
            parts.append(f"{policy} does not fit ({peak})")
    text = f"{head} (--checkpointing): {'; '.join(parts)}"
    accumulated = r.get("predicted_accumulated_samples_per_s")
    if best is not None and accumulated:
        faster = (f"gradient accumulation ({accumulated:,.0f} against {best[1]:,.0f} samples/s)" if accumulated > best[1]
                  else f"--checkpointing {best[0]} ({best[1]:,.0f} against {accumulated:,.0f} samples/s accumulated)")
        text += f"; the faster way to this batch: {faster}"
    return text


def micro_text(r: dict[str, Any]) -> str:
    """" x 4" after the batch of a row whose step accumulates 4 micro-batches of it ("" where it does not)."""
    n = int(r.get("grad_accum") or 1)
    return f" x {n}" if n != 1 else ""


def accumulated_text(r: dict[str, Any]) -> str:
    """" x 4 micro-batches a step (64 samples)" after a predicted row's batch where its step accumulates (``predict
    --grad-accum``); "" where it does not."""
    n, batch = int(r.get("grad_accum") or 1), r.get("batch_size")
    if n == 1:
        return ""
    return f" x {n} micro-batches a step" + (f" ({batch * n:,} samples)" if isinstance(batch, int) else "")


def _held(r: dict[str, Any]) -> int | None:
    """The gradients a step of this mode sums its micro-batches into (fp32 but in pure-* modes)."""
    held = r.get("model_bytes_half") if half_gradients(str(r.get("precision", ""))) else r.get("model_bytes_fp32")
    return held if isinstance(held, int) else None


def held_room(r: dict[str, Any]) -> int | None:
    """The largest micro-batch whose step, with the summed gradients held beside it, stays within what the largest
    batch that fit held -- from the row's max-batch trials' measured peaks: the line through the smallest and the
    largest fitting batch's (a step's memory is linear in its batch), the gradients added whole (an accumulated step
    holds at most that much more than a plain one: ``predict``'s traced oracle), within the largest fitting peak
    (conservative: the limit the trials were held to is at least that). 0 where no micro-batch fits so; None where the
    trials do not say (fewer than two fitting peaks, no gradient bytes)."""
    held = _held(r)
    largest = r.get("max_batch")
    peaks = sorted({(int(b), float(p)) for b, ok, p, *_ in r.get("max_batch_trials") or []
                    if ok and isinstance(b, int) and isinstance(p, (int, float)) and (largest is None or b <= largest)})
    if not held or not isinstance(largest, int) or len(peaks) < 2:
        return None
    (b1, p1), (b2, p2) = peaks[0], peaks[-1]  # (the farthest apart: the search's last trials are close, their
    # peaks' noise -- a CPU's resident memory -- a slope of any sign)
    slope = (p2 - p1) / (b2 - b1)
    if slope <= 0:
        return None
    room = max(p for _, p in peaks)
    return max(0, min(largest, int((room - held - (p2 - slope * b2)) // slope)))


def accumulation_note(rows: list[dict[str, Any]]) -> str | None:
    """One clause for the rows that ran out of memory at their batch: the split into micro-batches that trains that
    batch a step where the largest batch that fit was measured -- each micro-batch small enough that the summed
    gradients fit beside it where the trials' peaks say how much (:func:`held_room`) --, the measurement to run where
    it was not; None when no row ran out of memory."""
    oom = [r for r in rows if r.get("status") == "oom" and isinstance(r.get("batch_size"), int)]
    if not oom:
        return None
    batches = sorted({r["batch_size"] for r in oom})
    one = f"batch {batches[0]:,}" if len(batches) == 1 else None
    splits, held, roomed, unmeasured, none = [], [], [], [], []
    for r in oom:
        largest, room = r.get("max_batch"), held_room(r)
        parts = split(r["batch_size"], largest if room is None else room) if room != 0 else None
        if room == 0:
            none.append(r["precision"])
        elif parts is not None:
            splits.append(f"{r['precision']} {parts[0]} x {parts[1]:,}")
            (roomed if room is not None else held).append(_held(r) or 0)
        elif not largest:
            unmeasured.append(r["precision"])
    parts = []
    if splits:
        said = [f"the summed gradients (up to {fmt_bytes(max(held))}) stay allocated across the micro-batches "
                "(run --grad-accum N --measure maxbatch measures the largest micro-batch with them held)"] \
            if held and max(held) else []
        if roomed:
            said.append(f"{'each micro-batch' if not held else 'where the trials measured peaks, a micro-batch'} "
                        f"leaves room for the summed gradients ({fmt_bytes(max(roomed))}) within the largest batch's "
                        "measured peak")
        parts.append(f"{one or 'the same batch'} a step by gradient accumulation (ampbench train --batch-size M "
                     f"--grad-accum N, M within the largest batch that fit): {', '.join(splits)}"
                     + "".join(f"; {x}" for x in said))
    if none:
        parts.append(f"{', '.join(none)}: no micro-batch leaves room for the summed gradients within the largest "
                     "batch's measured peak")
    if unmeasured:
        parts.append(f"{', '.join(unmeasured)} out of memory at {one or 'their batches'}: --measure maxbatch finds the "
                     "largest batch that fits, and ampbench train --grad-accum N trains the whole batch a step from it")
    found = max((int(r.get("repeated_blocks") or 0) for r in oom if (r.get("checkpointing") or "off") == "off"),
                default=0)
    if found:  # (the other way to the batch: the activations recomputed -- run measures it, predict prices it)
        parts.append(f"or checkpoint the model's {found} repeated blocks to hold less of each batch's activations (run "
                     "--checkpointing off,blocks,selective measures what it holds and costs)")
    return "; ".join(parts) or None


def accumulation_cost(rows: list[dict[str, Any]]) -> list[str]:
    """What accumulating micro-batches cost, measured side by side in one run (``run --grad-accum 1,4``): per
    workload, batch and accumulation, each precision's samples/s over its plain step's at the same batch (the same
    execution and distribution) -- "bert (small) batch 16 x 4 micro-batches a step: fp32 0.97x, amp-bf16 0.92x the
    plain step's samples/s (the adds into the held gradients)". Nothing where a run has no plain twin."""
    ok = [r for r in rows if r.get("status") == "ok" and not r.get("closing_baseline") and not r.get("repeat")
          and isinstance(r.get("samples_per_s"), (int, float))]
    cells = [(CellId.of(r), r) for r in ok]
    plain = {(cell, r.get("run_id")): r for cell, r in cells if cell.grad_accum == 1}
    groups: dict[CellId, list[str]] = {}
    for cell, r in cells:
        twin = plain.get((cell.but(grad_accum=1), r.get("run_id")))
        if cell.grad_accum == 1 or twin is None or not twin["samples_per_s"]:
            continue
        # One line per setting (execution, distribution); a state precision named beside its mode, so two rows of
        # one mode never read alike ("fp32 1.23x, fp32 (8bit states) 3.03x").
        states = f" ({cell.optimizer_state} states)" if cell.optimizer_state else ""
        groups.setdefault(cell.but(precision="", optimizer_state=None), []).append(
            f"{r['precision']}{states} {r['samples_per_s'] / twin['samples_per_s']:.2f}x")
    shown = Counter((cell.workload, cell.preset, cell.batch_size, cell.grad_accum) for cell in groups)
    lines = []
    for cell, parts in groups.items():
        several = shown[(cell.workload, cell.preset, cell.batch_size, cell.grad_accum)] > 1
        setting = cell.describe() if several else f"batch {cell.batch_size} x {cell.grad_accum} micro-batches a step"
        lines.append(f"{cell.workload} ({cell.preset}) {setting}: {', '.join(parts)} the plain step's samples/s "
                     "(each later micro-batch adds its gradients into the held ones; one optimizer step for all)")
    return lines

