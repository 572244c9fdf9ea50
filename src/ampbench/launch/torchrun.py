"""Start ranks with torchrun (``python -m torch.distributed.run``, torch's own launcher).

:class:`Torchrun` runs a job in ``nproc`` ranks on this machine (``nnodes`` machines: torchrun's static
rendezvous at node 0's ``HOST:PORT``, node-rank K holding global ranks K x nproc ..., so global rank 0 is on node
0); each rank (:mod:`ampbench.launch.rank`) writes ``rank{N}.json``. :func:`relaunch` runs a whole command again
in ranks (``ampbench train --strategy``). The launcher dies with this process, its ranks with the launcher.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ampbench.errors import AmpbenchError
from ampbench.launch.job import Job
from ampbench.launch.lifeline import die_with_parent
from ampbench.progress import Event, child_progress


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def check_nodes(strategy: object, nnodes: int, node_rank: int, endpoint: str | None) -> None:
    """--nnodes/--node-rank/--rdzv-endpoint make sense together, with a strategy (AmpbenchError: exit 2)."""
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
    """torchrun's rendezvous arguments: one machine (a fresh local port) or several (static rendezvous at node 0)."""
    if nnodes == 1:
        return ["--master-addr", "127.0.0.1", "--master-port", str(free_port())]
    host, _, port = (endpoint or "").rpartition(":")
    return ["--nnodes", str(nnodes), "--node-rank", str(node_rank), "--master-addr", host, "--master-port", port]


def exit_of_ranks(stderr: str) -> dict[int, int]:
    """torchrun's failure report: 'rank : K (local_rank: L)' followed by 'exitcode : X', per failed rank."""
    out = {}
    for m in re.finditer(r"rank\s*:\s*(\d+)\s*\(local_rank[^)]*\)\s*\n\s*exitcode\s*:\s*(-?\d+)", stderr):
        out[int(m.group(1))] = int(m.group(2))
    return out


@dataclass
class RankResults:
    """What a torchrun launch left: each of this machine's ranks' result (by global rank), torchrun's stderr and
    exit code, and whether the launch was stopped at its timeout."""

    ranks: dict[int, dict[str, Any]] = field(default_factory=dict)
    stderr: str = ""
    code: int = 0
    timed_out: bool = False

    def exits(self) -> dict[int, int]:
        return exit_of_ranks(self.stderr)


@dataclass(frozen=True)
class Torchrun:
    """Run a job in ``nproc`` ranks on this machine (of ``nnodes``), killed after ``timeout`` seconds; collectives
    time out after the same (a rank whose peer died must not wait forever). Rank 0's progress events reach
    ``on_progress``."""

    nproc: int
    nnodes: int = 1
    node_rank: int = 0
    endpoint: str | None = None
    timeout: float | None = None
    on_progress: Callable[[Event], None] | None = field(default=None, compare=False)

    def run(self, job: Job) -> RankResults:
        with tempfile.TemporaryDirectory(prefix="ampbench-dist-") as tmp:
            job_file, out = Path(tmp) / "job.json", Path(tmp) / "out"
            out.mkdir()
            payload = {**job.payload, "collective_timeout": self.timeout}
            job_file.write_text(json.dumps(Job(job.target, payload).to_dict()))
            cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(self.nproc),
                   *node_args(self.nnodes, self.node_rank, self.endpoint), "-m", "ampbench.launch.rank", str(job_file),
                   str(out)]
            result = RankResults()
            try:
                with child_progress(Path(tmp), self.on_progress) as progress_env:
                    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout,
                                          env=_rank_env(**progress_env),
                                          preexec_fn=die_with_parent)  # the launcher dies with us; its ranks with it
                result.stderr, result.code = proc.stderr, proc.returncode
            except subprocess.TimeoutExpired:
                result.timed_out = True
            for f in out.glob("rank*.json"):
                r = json.loads(f.read_text())
                result.ranks[int(r["rank"])] = r
        return result


def _rank_env(**extra: str) -> dict[str, str]:
    return dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"), **extra)


def relaunch(args: list[str], nproc: int, nnodes: int = 1, node_rank: int = 0, endpoint: str | None = None) -> int:
    """``python -m ampbench ARGS`` again, in ``nproc`` ranks per machine started by torchrun; its exit code (2 where
    every rank that failed refused its input: :func:`forward_stderr`)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
           *node_args(nnodes, node_rank, endpoint), "-m", "ampbench", *args]
    proc = subprocess.Popen(cmd, env=_rank_env(), preexec_fn=die_with_parent, stderr=subprocess.PIPE, text=True,
                            bufsize=1)
    assert proc.stderr is not None
    return forward_stderr(proc.stderr, proc.wait, sys.stderr)


TORCHRUN_REPORT = re.compile(r"^[EWI]\d{4} [\d:.]+ +\d+ \S*torch/distributed/elastic/")
"""The first line of torchrun's own account of a failed rank (glog-style, from its elastic agent), which its
traceback and the ChildFailedError table follow."""
EXIT_CODE = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)")


def forward_stderr(lines: Any, wait: Callable[[], int], out: Any) -> int:
    """The ranks' standard error passed on as it comes, each ampbench ``error:`` line once (every rank says the same
    refusal), and torchrun's report of the failure held back: where every rank that failed exited 2 -- an ampbench
    refusal, its one line already said --, the report is left out and the exit code is 2, as the same refusal
    one process makes; any other failure (a crash, a signal) gets the report whole, and torchrun's exit code."""
    said: set[str] = set()
    held: list[str] = []
    for line in lines:
        if held or TORCHRUN_REPORT.match(line):
            held.append(line)
            continue
        if line.startswith("error: "):
            if line in said:
                continue
            said.add(line)
        out.write(line)
        out.flush()
    code = wait()
    codes = {int(m.group(1)) for m in map(EXIT_CODE.match, held) if m}
    if code != 0 and said and codes == {2}:
        return 2
    out.writelines(held)
    out.flush()
    return code


def is_rank() -> bool:
    """Whether this process is a rank torchrun started."""
    return "TORCHELASTIC_RUN_ID" in os.environ
