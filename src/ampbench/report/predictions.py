"""Predictions (``ampbench predict``) in reports: beside the measurement of the same cell on the same GPU where the
store holds one, and the "why no speedup" their breakdown gives.

A prediction matches a measured row when both are the same cell (:class:`~ampbench.cells.CellId`, the one
definition every reader compares rows by: workload, preset, precision, batch, execution, one process) and the row ran
on a CUDA device whose driver name is the predicted GPU's card (:func:`ampbench.measure.gpus.for_device`,
:meth:`~ampbench.measure.gpus.Gpu.same_card`: the A100 memory sizes are one card there, so a prediction names its
memory size and the match says the card). A prediction is of its cell's execution: an eager one never matches a
compiled or graph-replayed measurement, a ``--compile``/``--cuda-graphs`` one matches those.
"""

from __future__ import annotations

from typing import Any

from ampbench.cells import CellId
from ampbench.execution.axes import Execution
from ampbench.measure.gpus import for_device, lookup


def latest(predictions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest prediction per (cell, gpu), in the order they were first made."""
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for p in predictions:
        out[(CellId.of(p), p.get("gpu"), bool(p.get("predicted_inference")))] = p
    return list(out.values())


def measured_for(pred: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The newest ok measured row of the predicted cell on the predicted GPU, or None."""
    card = lookup(pred.get("gpu") or "")
    if card is None or pred.get("predicted_inference"):  # (an inference prediction is of no training cell)
        return None
    cell = CellId.of(pred)
    found = None
    for r in rows:
        if r.get("status") == "ok" and str(r.get("device") or "").startswith("cuda") and CellId.of(r) == cell:
            gpu = for_device(r.get("device_name"))
            if gpu is not None and gpu.same_card(card):
                found = r
    return found


HALF_MODES = ("amp-", "master-", "pure-", "fp8")


def why_no_speedup(pred: dict[str, Any], share_text: str | None = None) -> str:
    """What the predicted breakdown says limits the step, and what would help (``share_text``: the share of the step
    to quote, e.g. "81-92%" for several modes; the prediction's own by default). Never the mode the row runs: a half
    model's memory-bound step is told of fused kernels, a half step's compute-bound one of its dimensions."""
    bound = pred.get("predicted_bound")
    if share_text is None:
        split = pred.get("predicted_time_split") or {}
        share_text = f"{split.get(bound, 0.0) if isinstance(split, dict) else 0.0:.0%}"
    precision = str(pred.get("precision") or "")
    if bound == "communication":
        return (f"communication-bound ({share_text} of the predicted step waits on the gradients' collectives): a "
                "faster interconnect, a larger batch per GPU, or half-precision gradients (--grad-reduce-dtype bf16) "
                "shorten it")
    if bound == "launch":
        return (f"launch-bound ({share_text} of the predicted step is launch overhead): faster math does not shorten "
                f"it; {_launch_cure(pred)}")
    if bound == "memory":
        half_model = precision.startswith(("master-", "pure-"))
        return (f"memory-bound ({share_text} of the predicted step moves bytes): "
                + ("" if half_model else "a half model (master-*/pure-*) halves the bytes, ")
                + "fused kernels (torch.compile) cut the passes over them")
    if precision.startswith(HALF_MODES):
        return (f"compute-bound ({share_text} of the predicted step in math) already on Tensor Cores: keep matmul "
                "dimensions multiples of 8 (16 for fp8)")
    return (f"compute-bound ({share_text} of the predicted step in math): half precision runs it on Tensor Cores; "
            "keep matmul dimensions multiples of 8 (16 for fp8)")


def _launch_cure(pred: dict[str, Any]) -> str:
    """What shortens a launch-bound step that the row does not run already: CUDA graphs and torch.compile for an eager
    one; a step replayed as CUDA graphs only a larger batch (it was told to try "--cuda-graphs on" as it ran them)."""
    ex = Execution.of(pred)
    missing = [(what, flag) for what, flag, off in (("CUDA graphs", "--cuda-graphs on", ex.cuda_graphs == "off"),
                                                    ("torch.compile", "--compile on", ex.compile == "off")) if off]
    if not missing:  # (compiled and replayed as CUDA graphs)
        return "a larger batch does (its kernels are already compiled and replayed as CUDA graphs)"
    return (f"try {' or '.join(w for w, _ in missing)} ({', '.join(f for _, f in missing)}), or a larger batch")


def _mode(row: dict[str, Any]) -> str:
    """A row's mode as the advice names it: the precision, the optimizer state where it is not the mode's own, and the
    execution where it is not eager ("amp-bf16 · cuda-graphs": four executions of one mode read "amp-bf16, amp-bf16,
    amp-bf16, amp-bf16")."""
    state = row.get("optimizer_state")
    ex = Execution.of(row)
    return (f"{row['precision']} ({state} optimizer states)" if state else str(row["precision"])) \
        + ("" if ex.is_default else f" · {ex.label}")


def no_speedup_lines(rows: list[dict[str, Any]], below: float = 1.1) -> list[str]:
    """One line per (workload, preset, batch, bound, kind of mode) naming the modes predicted less than ``below``
    x fp32 (with their optimizer states) and why, and the GPUs where it is so (the same finding on several GPUs is one
    line); on GPUs without Tensor Cores one line saying what the half modes buy instead (memory: on one GPU, their
    peak beside fp32's)."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    fp32_peak: dict[tuple[Any, ...], Any] = {}
    for r in rows:  # (the batch with its micro-batches a step: batch 32 and batch 32 x 4 are two settings)
        cell = (r["workload"], r.get("preset"), (r["batch_size"], int(r.get("grad_accum") or 1)), r.get("gpu"))
        if r.get("status") == "ok" and r.get("precision") == "fp32" and not r.get("optimizer_state"):
            fp32_peak[cell] = r.get("predicted_peak_bytes")
        if r.get("status") != "ok" or r.get("precision") == "fp32":
            continue
        card = lookup(str(r.get("gpu") or ""))
        kind = str(r["precision"]).split("-")[0]
        if card is not None and not card.tensor_cores and kind in ("amp", "master", "pure"):
            groups.setdefault((*cell, "no tensor cores", ""), []).append(r)
        elif (r.get("predicted_speedup_vs_fp32") or 0) < below and (r.get("predicted_comm_share") or 0) >= 0.3:
            groups.setdefault((*cell, "communication", ""), []).append(r)
        elif (r.get("predicted_speedup_vs_fp32") or 0) < below:  # (a launch-bound line per execution: its cure)
            groups.setdefault((*cell, r["predicted_bound"], kind if r["predicted_bound"] != "launch" else
                               Execution.of(r).label), []).append(r)
    several = len({r.get("gpu") for r in rows}) > 1
    said: dict[tuple[Any, ...], tuple[list[str], list[dict[str, Any]]]] = {}  # (the same finding on several GPUs: once)
    for (workload, preset, batch, gpu, bound, kind), group in groups.items():
        key = (workload, preset, batch, bound, kind, tuple(_mode(r) for r in group))
        gpus, found = said.setdefault(key, ([], []))
        gpus.append(str(gpu))
        found += group
    out = []
    for (workload, preset, (batch, accum), bound, _, modes_key), (gpus, group) in said.items():
        steps = f" x {accum} micro-batches a step" if accum != 1 else ""
        where = f"{workload} ({preset}, batch {batch}{steps}{f', {listed(gpus)}' if several else ''})"
        modes = ", ".join(modes_key)
        if bound == "no tensor cores":
            cards = [c for c in (lookup(g) for g in gpus) if c is not None]
            caps = sorted({f"{c.capability[0]}.{c.capability[1]}" for c in cards})
            speeds = sorted(r["predicted_speedup_vs_fp32"] for r in group if r.get("predicted_speedup_vs_fp32"))
            speed = f"{speeds[0]:.2f}x" if speeds[0] == speeds[-1] else f"{speeds[0]:.2f}-{speeds[-1]:.2f}x"
            memory = ""
            if len(gpus) == 1:
                base = fp32_peak.get((workload, preset, (batch, accum), gpus[0]))
                peaks = ", ".join(f"{_mode(r)} {r['predicted_peak_bytes'] / 2**30:,.2f} GiB" for r in group)
                memory = f"; peak memory fp32 {base / 2**30:,.2f} GiB, {peaks}" if base else ""
            out.append(f"{where}: {modes} {'buys' if len(modes_key) == 1 else 'buy'} memory, not speed, on "
                       f"{cards[0].name if len(cards) == 1 else 'these GPUs'}: no Tensor Cores (compute capability "
                       f"{', '.join(caps)}), so PyTorch's fp16 GEMMs and convolutions run in fp32 math on fp16 storage; "
                       f"only memory-bound kernels gain ({speed} of fp32's speed{memory})")
            continue
        if bound == "communication":
            shares = sorted({round(100 * r["predicted_comm_share"]) for r in group})
            share = f"{shares[0]}%" if len(shares) == 1 else f"{shares[0]}-{shares[-1]}%"
            links = ", ".join(dict.fromkeys(str(r["interconnect"]) for r in group))
            out.append(f"{where}: no speedup predicted for {modes}; communication-bound ({share} of "
                       f"the step is the gradients' all-reduce the backward does not hide over {links}"
                       "): a faster interconnect, a larger batch per GPU, or half-precision gradients "
                       "(--grad-reduce-dtype bf16 on run) shorten it")
            continue
        shares = sorted({round(100 * (r.get("predicted_time_split") or {}).get(bound, 0.0)) for r in group})
        share = f"{shares[0]}%" if len(shares) == 1 else f"{shares[0]}-{shares[-1]}%"
        out.append(f"{where}: no speedup predicted for {modes}; {why_no_speedup(group[0], share)}")
    return out


def listed(names: list[str], shown: int | None = 4) -> str:
    """Names in a line: all of them, or the first ``shown`` and "N more" (None: all)."""
    if shown is None or len(names) <= shown + 1:
        return ", ".join(names)
    return ", ".join(names[:shown]) + f" and {len(names) - shown} more"


def fp8_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per fp8 cell predicted: which Linear layers its recipe converted (none: the row is amp-bf16's step,
    op for op) -- what an fp8 speed, or its absence, comes from."""
    def batch(r: dict[str, Any]) -> tuple[Any, int]:  # (with its micro-batches a step: an fp8 step of 8 x 4 is not
        return r["batch_size"], int(r.get("grad_accum") or 1)  # compared with amp-bf16's plain step of 8)

    bf16 = {(r["workload"], r.get("preset"), batch(r), r.get("gpu")): r for r in rows
            if r.get("status") == "ok" and r.get("precision") == "amp-bf16" and not r.get("optimizer_state")}
    out: dict[tuple[Any, ...], str] = {}
    slower: dict[tuple[Any, ...], list[str]] = {}
    for r in rows:
        layers = r.get("fp8_layers")
        if r.get("status") != "ok" or not layers:
            continue
        key = (r["workload"], r.get("preset"), batch(r), r["precision"])
        what = ("no layer converted, so it is predicted as amp-bf16's step op for op" if str(layers).startswith("0/")
                else "the converted layers' matmuls at the fp8 rate, with their scaling and casts")
        steps = f" x {batch(r)[1]} micro-batches a step" if batch(r)[1] != 1 else ""
        out.setdefault(key, f"{r['workload']} ({r.get('preset')}, batch {r['batch_size']}{steps}) {r['precision']}: "
                            f"{layers} -- {what} (--fp8-filter, --fp8-skip choose the layers)")
        base = bf16.get((*key[:3], r.get("gpu")))
        if base is not None and not str(layers).startswith("0/") and \
                r["predicted_step_ms"] > base["predicted_step_ms"] * (1 + (r.get("predicted_error_pct") or 0) / 100):
            slower.setdefault(key, []).append(f"{r.get('gpu')} {base['predicted_step_ms'] / r['predicted_step_ms']:.2f}x")
    for key, where in slower.items():
        out[key] += (f"; slower than amp-bf16 ({', '.join(where)} of its speed): at these sizes each converted layer's "
                     "scaling and casts cost more than its fp8 matmul saves")
    return list(out.values())


def unsupported_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per mode and reason a GPU cannot run it, naming the GPUs (a comparison's cell says only
    ``unsupported``)."""
    by: dict[tuple[str, str], dict[str, list[str]]] = {}
    for r in rows:
        if r.get("status") == "unsupported":  # (the reason names its GPU: the same reason of another GPU merges)
            reason = str(r.get("reason") or "").replace(str(r.get("gpu")), "the GPU")
            # (and "...; the GPU is 6.1" is the GPU's own part: one line per rule, its GPUs grouped by that part)
            rule, _, own = reason.partition("; the GPU is ")
            gpus = by.setdefault((str(r["precision"]), rule), {}).setdefault(own, [])
            if str(r.get("gpu")) not in gpus:
                gpus.append(str(r.get("gpu")))
    lines = []
    for (mode, rule), groups in by.items():
        if len(groups) == 1:
            ((own, gpus),) = groups.items()
            lines.append(f"{mode} unsupported on {', '.join(gpus)}: {rule}" + (f"; the GPU is {own}" if own else ""))
        else:
            count = sum(len(g) for g in groups.values())
            lines.append(f"{mode} unsupported on {count} GPUs: {rule} -- "
                         + "; ".join(f"{own or 'other'}: {', '.join(gpus)}" for own, gpus in groups.items()))
    return lines


def _accumulated(p: dict[str, Any]) -> str | None:
    """"2 x 128 accumulated: 117/s; checkpointed (blocks): 88/s" of an oom prediction whose accumulated step (and
    checkpointed steps) were priced (None where none was)."""
    n, micro, rate = (p.get(f"predicted_accumulated_{k}") for k in ("micro_batches", "batch", "samples_per_s"))
    parts = [f"{n} x {micro:,} accumulated: {rate:,.0f}/s"] if n and micro and rate else []
    checkpointed = p.get("predicted_checkpointed")
    for policy, c in (checkpointed.items() if isinstance(checkpointed, dict) else ()):
        if c.get("samples_per_s"):
            parts.append(f"checkpointed ({policy}): {c['samples_per_s']:,.0f}/s")
    return "; ".join(parts) or None


def table(predictions: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per latest prediction: predicted and (where stored) measured samples/s and speedup, the error; a
    prediction that is not ok (the batch does not fit the GPU: oom; a mode it cannot run) keeps its line with its
    status -- "fp32 does not fit a 16 GB card at batch 256" is an answer, and the line was left out."""
    out = []
    for p in latest(predictions):
        ok = p.get("status") == "ok"  # (not ok: no figures but its peak and largest batch, no measured twin)
        m = measured_for(p, rows) if ok else None
        measured = m.get("samples_per_s") if m else None
        pred = p.get("predicted_samples_per_s")
        out.append({
            "workload": p.get("workload"), "preset": p.get("preset"), "status": p.get("status"),
            "reason": None if ok else p.get("reason"),
            "setting": CellId.of(p).describe() + (", inference" if p.get("predicted_inference") else ""),
            "gpu": p.get("gpu"), "batch_size": p.get("batch_size"),
            "precision": p.get("precision"), "predicted_samples_per_s": pred,
            "measured_samples_per_s": measured, "measured_device": m.get("device_name") if m else None,
            "error": (pred / measured - 1.0) if isinstance(measured, (int, float)) and measured and pred else None,
            "predicted_speedup_vs_fp32": p.get("predicted_speedup_vs_fp32"),
            "measured_speedup_vs_fp32": m.get("speedup_vs_fp32") if m else None,
            "predicted_peak_bytes": p.get("predicted_peak_bytes"), "predicted_max_batch": p.get("predicted_max_batch"),
            "predicted_bound": p.get("predicted_bound"), "predicted_error_pct": p.get("predicted_error_pct"),
            "accumulated": _accumulated(p) if p.get("status") == "oom" else None,
        })
    return out


def at_power(row: dict[str, Any]) -> str:
    """How a predicted row's energy was priced, in two words: ``at measured power`` (its GPU architecture's kernel
    table read the board's power per kernel kind) or ``at TDP`` (the board's rating: an upper bound; rows from before
    the basis was stored too)."""
    return "at measured power" if str(row.get("predicted_energy_basis") or "").startswith("measured") else "at TDP"


def attach(rows: list[dict[str, Any]], predictions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with ``predicted_why`` and ``predicted_joules_per_sample`` on each measured GPU row that has a
    prediction (the advisor's "why no speedup" on a GPU reads the first; the energy column shows the second)."""
    preds = [p for p in latest(predictions) if p.get("status") == "ok"]
    out = []
    for r in rows:
        match = next((p for p in preds if measured_for(p, [r]) is r), None)
        out.append({**r, "predicted_why": why_no_speedup(match),
                    "predicted_joules_per_sample": match.get("predicted_joules_per_sample"),
                    "predicted_energy_basis": match.get("predicted_energy_basis")} if match is not None else r)
    return out

