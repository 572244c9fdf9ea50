"""One rank under torchrun: ``python -m ampbench.launch.rank JOB OUT_DIR`` (see :class:`~ampbench.launch.torchrun.Torchrun`).

Dies with its launcher (before the heavy imports), joins the process group (nccl on CUDA, gloo on CPU, the job's
collective timeout), runs the job on its device and writes ``rank{N}.json``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import NoReturn

if __name__ == "__main__":  # (as torchrun's worker; importing this module does nothing of the kind)
    from ampbench.launch.lifeline import die_with_launcher

    die_with_launcher()

import json
from datetime import timedelta
from pathlib import Path

from ampbench.launch.job import Job
from ampbench.launch.lifeline import die_with_launcher


def join_process_group(device: str | None = None, timeout_s: float | None = None) -> str:
    """Set this rank's device (``cuda:LOCAL_RANK`` on CUDA) and join the process group; returns the device."""
    import torch  # lazy: torch
    import torch.distributed as dist  # lazy: torch

    cuda = (device or ("cuda" if torch.cuda.is_available() else "cpu")).startswith("cuda")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local)
    dist.init_process_group("nccl" if cuda else "gloo", timeout=timedelta(seconds=float(timeout_s or 600)))
    return f"cuda:{local}" if cuda else "cpu"


def become_rank(device: str | None = None) -> int:
    """This process is a rank torchrun started to run a command again (``ampbench train --strategy``): it dies with
    its launcher (no rank outlives it), joins the process group on its device and returns its global rank (the
    command prints on rank 0 only)."""
    import torch.distributed as dist  # lazy: torch

    die_with_launcher()
    join_process_group(device)
    return int(dist.get_rank())


def leave(code: int) -> NoReturn:
    """End this rank now: leave the process group, flush, and exit without the interpreter's teardown.

    Why not a plain exit: at teardown a rank that used gloo sometimes aborts -- "terminate called without an active
    exception" (a C++ thread object destroyed while joinable), SIGABRT -- after its work is done and its result
    written (seen about once in 30 launches on a loaded 2-core machine). torchrun then takes the rank for failed and
    its agent skips the exit barrier, so the other machine's agent waits there for it (up to torchrun's 300 s): a run
    over several machines lost its next cell to that wait (node 1 moved on and timed out before node 0 came)."""
    import torch.distributed as dist  # lazy: torch

    with contextlib.suppress(Exception):  # a peer already gone: the result is written, nothing left to do here
        if dist.is_initialized():
            dist.destroy_process_group()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def main(argv: list[str]) -> int:
    import torch.distributed as dist  # lazy: torch

    job = Job.from_dict(json.loads(Path(argv[0]).read_text()))
    out_dir = Path(argv[1])
    device = join_process_group(job.payload.get("device"), job.payload.get("collective_timeout"))
    rank = dist.get_rank()
    result = Job(job.target, {**job.payload, "device": device}).call()
    result["rank"] = rank
    tmp = out_dir / f"rank{rank}.json.tmp"
    tmp.write_text(json.dumps(result))
    tmp.replace(out_dir / f"rank{rank}.json")
    return 0


if __name__ == "__main__":
    leave(main(sys.argv[1:]))
