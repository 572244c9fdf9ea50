"""The child side of :class:`ampbench.launch.process.ChildProcess`: ``python -m ampbench.launch.child JOB OUT``.

Asks the kernel to kill it when the parent dies (so a ``kill -9`` of the run leaves no orphan holding the
GPU), runs the job, writes OUT atomically (a result half-written is never read), with ``_child``: when its main
started and when it had the result (``time.time()``), from which the launcher times the interpreter's start, the
imports and the teardown.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from ampbench.launch.job import Job
from ampbench.launch.lifeline import die_with_parent, parent_is_alive


def main(argv: list[str]) -> int:
    started_at = time.time()
    parent = os.getppid()
    die_with_parent()
    if not parent_is_alive(parent):  # the parent died before prctl took effect
        return 1
    run_job(Path(argv[0]), Path(argv[1]), started_at)
    return 0


def run_job(job_path: Path, out_path: Path, started_at: float) -> None:
    """Run the job and write its result atomically, with ``_child``: when the process's main started and when it had
    the result (the launcher's phases)."""
    result = Job.from_dict(json.loads(job_path.read_text())).call()
    result["_child"] = {"started_at": started_at, "returned_at": time.time()}
    tmp = out_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    tmp.replace(out_path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
