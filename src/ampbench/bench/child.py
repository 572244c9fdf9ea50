"""Run a cell (or a max-batch trial) in a fresh child process: an OOM, a crash or a hang is a row, not a lost run.

Parent: :func:`run_isolated` writes the job as JSON, starts ``python -m ampbench.bench.child IN OUT``
and reads OUT back. Child: asks the kernel to kill it when the parent dies (so a ``kill -9`` of
the run does not leave orphans holding the GPU), runs the job, writes OUT atomically.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ampbench.bench.plan import CellSpec


def _describe_exit(code: int, stderr: str) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (out of host memory? the kernel's OOM killer sends SIGKILL)" if -code == signal.SIGKILL else ""
        return f"child process killed by {name}{hint}"
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    return f"child process exited with code {code}" + (f": {lines[-1].strip()[:300]}" if lines else "")


def run_isolated(kind: str, spec: CellSpec, timeout: float | None = None, **extra: Any) -> dict[str, Any]:
    """Run job ``kind`` ("cell", "trial", "throughput", "validate") for ``spec`` in a child; its JSON result.

    A child that dies or times out gives ``{"_failed": reason, "_killed": bool}``.
    """
    with tempfile.TemporaryDirectory(prefix="ampbench-") as tmp:
        job, out = Path(tmp) / "job.json", Path(tmp) / "out.json"
        job.write_text(json.dumps({"kind": kind, "spec": spec.to_dict(), **extra}))
        env = dict(os.environ, PYTHONWARNINGS="ignore")
        try:
            proc = subprocess.run([sys.executable, "-m", "ampbench.bench.child", str(job), str(out)],
                                  capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return {"_failed": f"timed out after {timeout:g} s (--cell-timeout)", "_killed": True}
        if out.exists():
            return json.loads(out.read_text())
        return {"_failed": _describe_exit(proc.returncode, proc.stderr), "_killed": proc.returncode < 0}


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent exits (prctl PR_SET_PDEATHSIG). Best effort elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except OSError:
        return


def main(argv: list[str]) -> int:
    parent = os.getppid()
    _die_with_parent()
    if os.getppid() != parent:  # the parent died before prctl took effect
        return 1
    job_path, out_path = Path(argv[0]), Path(argv[1])
    job = json.loads(job_path.read_text())
    spec = CellSpec.from_dict(job["spec"])
    if job["kind"] == "cell":
        from ampbench.bench.cell import run_cell
        from ampbench.bench.runner import isolated_throughput_at, isolated_trial

        timeout = job.get("trial_timeout")
        result = run_cell(spec, maxbatch_trial=lambda s, b: isolated_trial(s, b, timeout),
                          throughput_at=lambda s, b: isolated_throughput_at(s, b, timeout))
    elif job["kind"] == "trial":
        from ampbench.bench.cell import run_trial

        result = run_trial(spec, int(job["batch_size"]))
    elif job["kind"] == "validate":
        from ampbench.bench.cell import validate_cell_inputs
        from ampbench.errors import AmpbenchError

        try:
            validate_cell_inputs(spec)
            result = {"error": ""}
        except AmpbenchError as e:
            result = {"error": str(e)}
    elif job["kind"] == "throughput":
        from dataclasses import replace

        from ampbench.bench.cell import run_cell

        result = run_cell(replace(spec, batch_size=int(job["batch_size"]), measures=("throughput",)))
    else:
        raise SystemExit(f"unknown job kind {job['kind']!r}")
    tmp = out_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    tmp.replace(out_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
