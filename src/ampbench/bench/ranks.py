"""A distributed benchmark cell: its ranks started by torchrun (:class:`ampbench.launch.Torchrun`), each measuring
the cell like a one-process cell (:func:`ampbench.bench.jobs.rank_cell`); their rows merge into the cell's row.

Merged row: global samples/s = world size x the slowest rank's (the ranks step in lockstep), the step times and
MFU of the slowest rank, memory keys the max over ranks (what must fit on every device), and ``ranks`` with each
rank's own figures. A rank that crashes, runs out of memory or times out turns the cell into a row with that
status and the rank named; the other ranks' failures that follow from it (a collective whose peer died) are not
taken for the cause.
"""

from __future__ import annotations

import re
from typing import Any

from ampbench.bench.cell_row import base_row, search_after, without_search
from ampbench.bench.jobs import job
from ampbench.cells import CellSpec
from ampbench.launch import RankResults, Torchrun, describe_exit
from ampbench.measure.maxbatch import Trial
from ampbench.store.sqlite import utcnow

MAX_KEYS = ("peak_allocated_bytes", "peak_reserved_bytes", "cpu_rss_peak_bytes", "nvml_used_bytes", "gpu_used_bytes",
            "weights_bytes", "grads_bytes", "optimizer_bytes", "activation_bytes")
SLOWEST_KEYS = ("samples_per_s_noise", "step_ms_p10", "step_ms_p50", "step_ms_p90", "step_ms_mean", "first_step_ms",
                "mfu", "timer")
STATUS_ORDER = ("error", "oom", "diverged", "unsupported", "ok")
_COLLECTIVE = re.compile(r"timed out|timeout|connection (reset|closed)|broken pipe|peer|DistBackendError|gloo|nccl",
                         re.IGNORECASE)


def _launch(spec: CellSpec, kind: str, timeout: float | None, node_rank: int, endpoint: str | None,
            **extra: Any) -> RankResults:
    d = spec.distribution
    return Torchrun(d.nproc, d.nnodes, node_rank, endpoint, timeout).run(job(kind, spec, device=spec.device, **extra))


def rank_trial(spec: CellSpec, batch_size: int, timeout: float | None = None, node_rank: int = 0,
               endpoint: str | None = None) -> Trial:
    """One max-batch trial across the ranks: it fits when every rank's fits (peak: the max over ranks); a rank killed
    by the OS most likely ran out of host memory (a miss); any other failure stops the search."""
    res = _launch(spec, "rank_trial", timeout, node_rank, endpoint, batch_size=batch_size)
    peaks = [r["peak_bytes"] for r in res.ranks.values() if isinstance(r.get("peak_bytes"), (int, float))]
    peak = max(peaks) if peaks else None
    if res.timed_out:
        return Trial(batch_size, False, peak, f"trial timed out after {timeout:g} s", failed=True)
    if len(res.ranks) < spec.distribution.nproc:
        killed = any(x == -9 for x in res.exits().values())
        return Trial(batch_size, False, peak, f"a rank died (torchrun exit {res.code})", failed=not killed)
    bad = sorted((k, r) for k, r in res.ranks.items() if not r.get("fits"))
    if not bad:
        return Trial(batch_size, True, peak)
    k, r = bad[0]
    return Trial(batch_size, False, peak, f"rank {k}: {r.get('reason', '')}", failed=bool(r.get("failed")))


def run_distributed(spec: CellSpec, timeout: float | None = None, crash_rank: int | None = None,
                    node_rank: int = 0, endpoint: str | None = None) -> dict[str, Any]:
    """The cell's merged row (never raises: a failure is a status). Several machines: every node calls it for the
    cell with its ``node_rank`` and node 0's ``endpoint``; each merges its own ranks' rows (their step times
    include waiting for every other rank: the ranks step in lockstep), and node 0's row is the one stored."""
    res = _launch(spec, "rank_cell", timeout, node_rank, endpoint, crash_rank=crash_rank)
    ranks = res.ranks
    if len(ranks) == spec.distribution.nproc and all(r["status"] == "ok" for r in ranks.values()):
        return merge(ranks, spec.world_size)
    row = base_row(spec)
    row.update(created_at=utcnow())
    if ranks:
        row.update({k: v for k, v in ranks[min(ranks)].items() if k not in ("status", "reason", "rank")})
    failed = {k: r for k, r in ranks.items() if r["status"] != "ok"}
    nproc = spec.distribution.nproc
    missing = [k for k in range(node_rank * nproc, (node_rank + 1) * nproc) if k not in ranks]
    exits = res.exits()
    if res.timed_out:
        row.update(status="error", reason=f"timed out after {timeout:g} s (--cell-timeout); ranks without a row: "
                                          f"{', '.join(map(str, missing)) or 'none'}")
    elif missing:  # a rank that died without writing its row is the cause; the others' errors follow from it
        # the cause: a rank that died on its own, not one torchrun stopped (SIGTERM) after the first failure
        k = min(missing, key=lambda k: (k not in exits, exits.get(k) == -15, k))
        how = describe_exit(exits[k], "", "process") if k in exits else f"no row (launcher exit code {res.code})"
        killed = k in exits and exits[k] == -9
        row.update(status="oom" if killed else "error", reason=f"rank {k}: {how}")
    else:
        cause = sorted(failed.items(), key=lambda kv: (bool(_COLLECTIVE.search(kv[1]["reason"] or "")),
                                                       STATUS_ORDER.index(kv[1]["status"]), kv[0]))[0]
        row.update(status=cause[1]["status"], reason=f"rank {cause[0]}: {cause[1]['reason']}")
    return row


def run_cell_distributed(spec: CellSpec, timeout: float | None = None, node_rank: int = 0,
                         endpoint: str | None = None) -> dict[str, Any]:
    """A distributed cell with every measure: the cell's ranks measure the rest; the largest batch is searched
    afterwards from here, each trial a torchrun of its own (:func:`rank_trial`), then timed at that batch."""
    if "maxbatch" not in spec.measures:
        return run_distributed(spec, timeout, node_rank=node_rank, endpoint=endpoint)
    row = run_distributed(without_search(spec), timeout, node_rank=node_rank, endpoint=endpoint)

    def throughput_at(b: int) -> dict[str, Any]:
        return run_distributed(spec.measuring(("throughput",), b), timeout, node_rank=node_rank, endpoint=endpoint)

    return search_after(spec, row, lambda b: rank_trial(spec, b, timeout, node_rank, endpoint), throughput_at)


def merge(ranks: dict[int, dict[str, Any]], world: int | None = None) -> dict[str, Any]:
    """Every rank of this machine ran ok: one row for the cell (see the module docstring). ``world``: every
    machine's ranks (default: these)."""
    world = world or len(ranks)
    rows = [ranks[k] for k in sorted(ranks)]
    slowest = min(rows, key=lambda r: r.get("samples_per_s") or 0.0)
    out = dict(rows[0])
    out.pop("rank", None)
    out.update({k: slowest.get(k) for k in SLOWEST_KEYS})

    def times_world(v: Any) -> Any:
        return None if v is None else v * world

    out["samples_per_s"] = times_world(slowest.get("samples_per_s"))
    out["achieved_tflops"] = times_world(slowest.get("achieved_tflops"))
    for key in ("flops_per_step", "recomputed_flops_per_step"):  # (every rank's step: the world's FLOPs)
        flops = times_world(rows[0].get(key))
        out[key] = None if flops is None else int(flops)
    for k in MAX_KEYS:
        vals = [r.get(k) for r in rows if isinstance(r.get(k), (int, float))]
        out[k] = max(vals) if vals else None
    out["skipped_steps"] = max(r.get("skipped_steps") or 0 for r in rows)
    out["world_size"] = world
    out["ranks"] = [{"rank": r["rank"], "samples_per_s": r.get("samples_per_s"), "step_ms_p50": r.get("step_ms_p50"),
                     "peak_allocated_bytes": r.get("peak_allocated_bytes"), "final_loss": r.get("final_loss")}
                    for r in rows]
    return out
