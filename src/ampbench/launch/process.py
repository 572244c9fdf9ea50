"""Run a job in a fresh child process: an OOM, a crash or a hang is a result, not a lost run.

Parent: :class:`ChildProcess` writes the job as JSON, starts ``python -m ampbench.launch.child JOB OUT`` and
reads OUT back. Child (:mod:`ampbench.launch.child`): dies with its parent, runs the job, writes OUT atomically.
A child that dies or times out gives ``{"_failed": reason, "_killed": bool}``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ampbench.launch.job import Job
from ampbench.launch.lifeline import describe_exit
from ampbench.progress import Event, child_progress, forward


@dataclass(frozen=True)
class Inline:
    """Run the job in this process (no isolation: a crash takes the caller with it)."""

    def run(self, job: Job) -> dict[str, Any]:
        return job.call()


@dataclass(frozen=True)
class ChildProcess:
    """Run the job in a child process of its own, killed after ``timeout`` seconds; its progress events
    (:mod:`ampbench.progress`) reach ``on_progress`` in order while it runs. The result carries ``_launch``: when the
    child was spawned and seen to exit, and when its main started and had the result (``time.time()``); a child killed
    at the timeout is said with the last thing it reported (the phase that did not finish)."""

    timeout: float | None = None
    on_progress: Callable[[Event], None] | None = field(default=None, compare=False)

    def run(self, job: Job) -> dict[str, Any]:
        last: list[Event] = []

        def seen(event: Event) -> None:
            last[:] = [event]
            (self.on_progress or forward)(event)  # (no listener given: where this process's own events go)

        with tempfile.TemporaryDirectory(prefix="ampbench-") as tmp:
            job_file, out = Path(tmp) / "job.json", Path(tmp) / "out.json"
            job_file.write_text(json.dumps(job.to_dict()))
            spawned_at = time.time()
            try:
                with child_progress(Path(tmp), seen) as progress_env:
                    env = dict(os.environ, PYTHONWARNINGS="ignore", **progress_env)
                    proc = subprocess.run([sys.executable, "-m", "ampbench.launch.child", str(job_file), str(out)],
                                          capture_output=True, text=True, timeout=self.timeout, env=env)
            except subprocess.TimeoutExpired:
                where = f" in {last[0].what!r}" if last else ""
                return {"_failed": f"timed out after {self.timeout:g} s (--cell-timeout){where}", "_killed": True}
            exited_at = time.time()
            if out.exists():
                result: dict[str, Any] = json.loads(out.read_text())
                child = result.pop("_child", None)
                if child is not None:
                    result["_launch"] = {"spawned_at": spawned_at, "exited_at": exited_at, **child}
                return result
            return {"_failed": describe_exit(proc.returncode, proc.stderr), "_killed": proc.returncode < 0}
