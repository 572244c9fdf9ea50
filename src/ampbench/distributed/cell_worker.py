"""One rank of a distributed benchmark cell, started by torchrun (``python -m torch.distributed.run ... -m
ampbench.distributed.cell_worker JOB OUT_DIR``): joins the process group, measures the cell like a
single-process one (its model under the cell's strategy, its own batches) and writes ``rank{N}.json``.

Dies with its launcher (prctl PR_SET_PDEATHSIG), and the launcher with the run, so a ``kill -9`` of
``ampbench run`` leaves no worker behind; collectives time out after the job's ``collective_timeout``
so a rank whose peer died does not wait forever.
"""

from __future__ import annotations

import contextlib
import os
import sys


def _die_with_launcher() -> None:
    """Before the heavy imports (seconds): SIGKILL when the launcher dies; if it died already (before
    prctl could watch it), exit now -- a rank nobody waits for must not live on."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            parent = f.read()
    except OSError:
        parent = b""
    if b"torch.distributed.run" not in parent and b"torchrun" not in parent:
        os._exit(1)


if __name__ == "__main__":  # (as torchrun's worker; importing this module does nothing of the kind)
    _die_with_launcher()

import json  # noqa: E402
from dataclasses import replace  # noqa: E402
from datetime import timedelta  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from ampbench.bench.plan import CellSpec  # noqa: E402


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[0]).read_text())
    out_dir = Path(argv[1])
    spec = CellSpec.from_dict(job["spec"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = spec.device
    if device.startswith("cuda"):
        torch.cuda.set_device(local_rank)
        device = f"cuda:{local_rank}"
    dist.init_process_group("nccl" if device.startswith("cuda") else "gloo",
                            timeout=timedelta(seconds=float(job.get("collective_timeout") or 600)))
    rank = dist.get_rank()
    from ampbench.bench.cell import run_cell, run_trial

    if job.get("crash_rank") == rank:  # tests: a rank that dies mid-cell (SIGKILL, as the OOM killer would)
        os.kill(os.getpid(), 9)
    if job.get("kind") == "trial":  # one max-batch trial at this batch size (per rank)
        row = run_trial(replace(spec, device=device), int(job["batch_size"]))
    else:
        row = run_cell(replace(spec, device=device))
    row["rank"] = rank
    tmp = out_dir / f"rank{rank}.json.tmp"
    tmp.write_text(json.dumps(row))
    tmp.replace(out_dir / f"rank{rank}.json")
    with contextlib.suppress(Exception):  # a peer already gone: the row is written, nothing left to do here
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
