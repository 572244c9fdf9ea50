"""Run a distributed benchmark cell: torchrun (``torch.distributed.run``, torch's own launcher) starts
``nproc`` ranks of :mod:`ampbench.distributed.cell_worker`; their rows merge into the cell's one row.

Merged row: global samples/s = world size x the slowest rank's (the ranks step in lockstep), the step
times and MFU of the slowest rank, memory keys the max over ranks (what must fit on every device), and
``ranks`` with each rank's own figures. A rank that crashes, runs out of memory or times out turns the
cell into a row with that status and the rank named; the other ranks' failures that follow from it
(a collective whose peer died) are not taken for the cause.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ampbench.bench.plan import CellSpec

MAX_KEYS = ("peak_allocated_bytes", "peak_reserved_bytes", "cpu_rss_peak_bytes", "nvml_used_bytes", "gpu_used_bytes",
            "weights_bytes", "grads_bytes", "optimizer_bytes", "activation_bytes")
SLOWEST_KEYS = ("samples_per_s_noise", "step_ms_p10", "step_ms_p50", "step_ms_p90", "step_ms_mean", "first_step_ms",
                "mfu", "timer")
STATUS_ORDER = ("error", "oom", "diverged", "unsupported", "ok")
_COLLECTIVE = re.compile(r"timed out|timeout|connection (reset|closed)|broken pipe|peer|DistBackendError|gloo|nccl",
                         re.IGNORECASE)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _exit_of_ranks(stderr: str) -> dict[int, int]:
    """torchrun's failure report: 'rank : K (local_rank: L)' followed by 'exitcode : X', per failed rank."""
    out = {}
    for m in re.finditer(r"rank\s*:\s*(\d+)\s*\(local_rank[^)]*\)\s*\n\s*exitcode\s*:\s*(-?\d+)", stderr):
        out[int(m.group(1))] = int(m.group(2))
    return out


def check_nodes(strategy: object, nnodes: int, node_rank: int, endpoint: str | None) -> None:
    """--nnodes/--node-rank/--rdzv-endpoint make sense together, with a strategy (AmpbenchError: exit 2)."""
    from ampbench.errors import AmpbenchError

    if nnodes == 1:
        if node_rank != 0 or endpoint is not None:
            raise AmpbenchError("--node-rank/--rdzv-endpoint apply with --nnodes > 1")
        return
    if not strategy:
        raise AmpbenchError("--nnodes applies with --strategy ddp or fsdp")
    if nnodes < 1 or not 0 <= node_rank < nnodes:
        raise AmpbenchError(f"--nnodes {nnodes} --node-rank {node_rank}: need nnodes >= 1 and 0 <= node-rank < nnodes")
    host, _, port = (endpoint or "").rpartition(":")
    if not host or not port.isdigit():
        raise AmpbenchError(f"--rdzv-endpoint {endpoint!r}: give HOST:PORT of node 0, the same on every machine")


def node_args(nnodes: int, node_rank: int, endpoint: str | None) -> list[str]:
    """torchrun's rendezvous arguments: one machine (a fresh local port) or several (torchrun's static rendezvous
    at node 0's HOST:PORT: node-rank K holds global ranks K x nproc ..., so global rank 0 is on node 0)."""
    if nnodes == 1:
        return ["--master-addr", "127.0.0.1", "--master-port", str(free_port())]
    host, _, port = (endpoint or "").rpartition(":")
    return ["--nnodes", str(nnodes), "--node-rank", str(node_rank), "--master-addr", host, "--master-port", port]


def _launch(spec: CellSpec, job: dict[str, Any], timeout: float | None, node_rank: int,
            endpoint: str | None) -> tuple[dict[int, dict[str, Any]], str, int, bool]:
    """torchrun over the cell's ranks with ``job``: (this machine's rank rows, torchrun's stderr, exit code, timed out)."""
    from ampbench.bench.child import _die_with_parent

    with tempfile.TemporaryDirectory(prefix="ampbench-dist-") as tmp:
        job_file, out = Path(tmp) / "job.json", Path(tmp) / "out"
        out.mkdir()
        job_file.write_text(json.dumps({"spec": spec.to_dict(), "collective_timeout": timeout, **job}))
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(spec.nproc),
               *node_args(spec.nnodes, node_rank, endpoint), "-m", "ampbench.distributed.cell_worker", str(job_file),
               str(out)]
        env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
        stderr, code, timed_out = "", 0, False
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                                  preexec_fn=_die_with_parent)  # the launcher dies with us; its workers with it
            stderr, code = proc.stderr, proc.returncode
        except subprocess.TimeoutExpired:
            timed_out = True
        ranks = {}
        for f in out.glob("rank*.json"):
            r = json.loads(f.read_text())
            ranks[int(r["rank"])] = r
    return ranks, stderr, code, timed_out


def run_trial(spec: CellSpec, batch_size: int, timeout: float | None = None, node_rank: int = 0,
              endpoint: str | None = None) -> Any:
    """One max-batch trial across the ranks: it fits when every rank's fits (peak: the max over ranks); a rank killed
    by the OS most likely ran out of host memory (a miss); any other failure stops the search."""
    from ampbench.measure.maxbatch import Trial

    ranks, stderr, code, timed_out = _launch(spec, {"kind": "trial", "batch_size": batch_size}, timeout, node_rank,
                                             endpoint)
    peaks = [r["peak_bytes"] for r in ranks.values() if isinstance(r.get("peak_bytes"), (int, float))]
    peak = max(peaks) if peaks else None
    if timed_out:
        return Trial(batch_size, False, peak, f"trial timed out after {timeout:g} s", failed=True)
    if len(ranks) < spec.nproc:
        killed = any(x == -9 for x in _exit_of_ranks(stderr).values())
        return Trial(batch_size, False, peak, f"a rank died (torchrun exit {code})", failed=not killed)
    bad = sorted((k, r) for k, r in ranks.items() if not r.get("fits"))
    if not bad:
        return Trial(batch_size, True, peak)
    k, r = bad[0]
    return Trial(batch_size, False, peak, f"rank {k}: {r.get('reason', '')}", failed=bool(r.get("failed")))


def run_distributed(spec: CellSpec, timeout: float | None = None, crash_rank: int | None = None,
                    node_rank: int = 0, endpoint: str | None = None) -> dict[str, Any]:
    """The cell's merged row (never raises: a failure is a status). Several machines: every node calls it for the
    cell with its ``node_rank`` and node 0's ``endpoint``; each merges its own ranks' rows (their step times
    include waiting for every other rank: the ranks step in lockstep), and node 0's row is the one stored."""
    from ampbench.bench.cell import base_row
    from ampbench.bench.child import _describe_exit
    from ampbench.store.sqlite import utcnow

    ranks, stderr, code, timed_out = _launch(spec, {"crash_rank": crash_rank}, timeout, node_rank, endpoint)
    if len(ranks) == spec.nproc and all(r["status"] == "ok" for r in ranks.values()):
        return merge(ranks, spec.world_size)
    row = base_row(spec)
    row.update(created_at=utcnow())
    if ranks:
        row.update({k: v for k, v in ranks[min(ranks)].items() if k not in ("status", "reason", "rank")})
    failed = {k: r for k, r in ranks.items() if r["status"] != "ok"}
    missing = [k for k in range(node_rank * spec.nproc, (node_rank + 1) * spec.nproc) if k not in ranks]
    exits = _exit_of_ranks(stderr)
    if timed_out:
        row.update(status="error", reason=f"timed out after {timeout:g} s (--cell-timeout); ranks without a row: "
                                          f"{', '.join(map(str, missing)) or 'none'}")
    elif missing:  # a rank that died without writing its row is the cause; the others' errors follow from it
        # the cause: a rank that died on its own, not one torchrun stopped (SIGTERM) after the first failure
        k = min(missing, key=lambda k: (k not in exits, exits.get(k) == -15, k))
        how = _describe_exit(exits[k], "") if k in exits else f"no row (launcher exit code {code})"
        killed = k in exits and exits[k] == -9
        row.update(status="oom" if killed else "error", reason=f"rank {k}: {how.replace('child process', 'process')}")
    else:
        cause = sorted(failed.items(), key=lambda kv: (bool(_COLLECTIVE.search(kv[1]["reason"] or "")),
                                                       STATUS_ORDER.index(kv[1]["status"]), kv[0]))[0]
        row.update(status=cause[1]["status"], reason=f"rank {cause[0]}: {cause[1]['reason']}")
    return row


def run_cell_distributed(spec: CellSpec, timeout: float | None = None, node_rank: int = 0,
                         endpoint: str | None = None) -> dict[str, Any]:
    """A distributed cell with every measure: the cell's ranks measure the rest; the largest batch is searched
    afterwards from here, each trial a torchrun of its own (:func:`run_trial`), then timed at that batch."""
    from dataclasses import replace

    from ampbench.measure.maxbatch import search_max_batch

    if "maxbatch" not in spec.measures:
        return run_distributed(spec, timeout, node_rank=node_rank, endpoint=endpoint)
    rest = tuple(m for m in spec.measures if m != "maxbatch")
    row = run_distributed(replace(spec, measures=rest), timeout, node_rank=node_rank, endpoint=endpoint)
    row["measures"] = list(spec.measures)
    if row["status"] != "ok" or not row.get("batch_size"):
        return row
    result = search_max_batch(lambda b: run_trial(spec, b, timeout, node_rank, endpoint),
                              start=min(int(row["batch_size"]), spec.maxbatch_limit), limit=spec.maxbatch_limit)
    row.update(max_batch=result.max_batch, max_batch_limit_hit=result.limit_hit,
               max_batch_trials=[[t.batch_size, t.fits, t.peak_bytes] for t in result.trials])
    if result.error:
        row.update(status="error", reason=f"maxbatch trial failed: {result.error}")
    elif result.max_batch:
        at = run_distributed(replace(spec, batch_size=result.max_batch, measures=("throughput",)), timeout,
                             node_rank=node_rank, endpoint=endpoint)
        row["max_batch_samples_per_s"] = at.get("samples_per_s") if at["status"] == "ok" else None
    return row


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
    flops = times_world(rows[0].get("flops_per_step"))
    out["flops_per_step"] = None if flops is None else int(flops)
    for k in MAX_KEYS:
        vals = [r.get(k) for r in rows if isinstance(r.get(k), (int, float))]
        out[k] = max(vals) if vals else None
    out["skipped_steps"] = max(r.get("skipped_steps") or 0 for r in rows)
    out["world_size"] = world
    out["ranks"] = [{"rank": r["rank"], "samples_per_s": r.get("samples_per_s"), "step_ms_p50": r.get("step_ms_p50"),
                     "peak_allocated_bytes": r.get("peak_allocated_bytes"), "final_loss": r.get("final_loss")}
                    for r in rows]
    return out
