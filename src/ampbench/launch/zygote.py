"""A fork server: one process imports the framework once, then forks a fresh child per job.

``python -m ampbench.launch.zygote MODULE...`` imports the modules (torch, the harness, a framework's cell module:
~4 s of a GPU machine's 12 s of fixed cost per cell, measured on the lent H200) and never touches the GPU or runs a
tensor op itself, so a fork of it is as clean as a fresh interpreter: no CUDA context (forking one is undefined), no
intra-op thread pool. Each job it is sent becomes a child forked from it (~10 ms), which runs the job, writes its
result atomically, and leaves without the interpreter's teardown; a crash, an OOM kill or a timeout kill is the
child's alone. Every cell keeps a process, a CUDA context and an allocator of its own: isolation as a fresh process
gives it, without paying for the imports again.

Protocol (JSON lines): the parent writes ``{"job": path, "out": path, "stderr": path, "env": {...}}``; the zygote
answers ``{"pid": N}`` once the child is forked, then ``{"pid": N, "exit": code}`` (a negative code: killed by that
signal) when it has ended. End of input: the zygote exits. It dies with its parent, and each child with it.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import time
import traceback
import warnings
from pathlib import Path

from ampbench.launch.child import run_job
from ampbench.launch.lifeline import die_with_parent, parent_is_alive


def _child(request: dict[str, object]) -> None:
    """In the forked child: run the job, write its result, leave (never returns)."""
    started_at = time.time()
    code = 1
    try:
        die_with_parent()
        err = os.open(str(request["stderr"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(err, 2)
        os.environ.update({str(k): str(v) for k, v in dict(request.get("env") or {}).items()})  # type: ignore[call-overload]
        warnings.simplefilter("ignore")  # (as a ChildProcess's PYTHONWARNINGS=ignore)
        run_job(Path(str(request["job"])), Path(str(request["out"])), started_at)
        code = 0
    except BaseException:  # (the parent reads the stderr file: the traceback says why)
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve() -> int:
    """Fork a child per request read from standard input, answering on standard output, until its end."""
    parent = os.getppid()
    die_with_parent()
    if not parent_is_alive(parent):
        return 1
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"pid": pid, "exit": os.waitstatus_to_exitcode(status)}), flush=True)
    return 0


def main(argv: list[str]) -> int:
    for module in argv:  # (what every job would import: done once, here)
        importlib.import_module(module)
    # (a fork copies one thread: the parent says how many this process has -- the imports started none, or it is not
    # safe to fork and the launcher starts processes instead)
    print(json.dumps({"ready": os.getpid(), "threads": threads()}), flush=True)
    return serve()


def threads() -> int:
    """Native threads of this process (Linux: /proc; elsewhere Python's own count)."""
    try:
        return len(os.listdir(f"/proc/{os.getpid()}/task"))
    except OSError:
        return threading.active_count()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
