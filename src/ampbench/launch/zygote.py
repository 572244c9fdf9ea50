"""A fork server: one process imports the framework once, then forks a fresh child per job.

``python -m ampbench.launch.zygote MODULE...`` imports the modules (torch, the harness, a framework's cell module:
~4 s of a GPU machine's 12 s of fixed cost per cell, measured on the lent H200) and never touches the GPU or runs a
tensor op itself, so a fork of it is as clean as a fresh interpreter: no CUDA context (forking one is undefined), no
intra-op thread pool. Each job it is sent becomes a child forked from it (~10 ms), which runs the job, writes its
result atomically, and leaves without the interpreter's teardown; a crash, an OOM kill or a timeout kill is the
child's alone. Every cell keeps a process, a CUDA context and an allocator of its own: isolation as a fresh process
gives it, without paying for the imports again.

Protocol (JSON lines): the parent writes ``{"id": K, "job": path, "out": path, "stderr": path, "env": {...}, "cwd": dir}``
(``env`` set and ``cwd`` entered in the child: the launcher's as they are when it sends the job); the
zygote answers ``{"id": K, "pid": N}`` once the child is forked, then ``{"id": K, "pid": N, "exit": code}`` (a negative
code: killed by that signal) when it has ended. Several children may live at once (the next cell's, started before its
turn: :mod:`ampbench.launch.turn`), so answers about different jobs interleave: the id says whose. End of input: the
zygote waits for its children and exits. It dies with its parent, and each child with it.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import signal
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
        signal.set_wakeup_fd(-1)  # (the server's way of hearing its children end: not the child's)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        die_with_parent()
        err = os.open(str(request["stderr"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(err, 2)
        os.dup2(err, 1)  # (standard output is the server's answers to the parent: a job that prints must not touch it)
        os.environ.update({str(k): str(v) for k, v in dict(request.get("env") or {}).items()})  # type: ignore[call-overload]
        if request.get("cwd"):  # (the launcher's directory now, not the server's at its start: relative paths)
            os.chdir(str(request["cwd"]))
            here = os.getcwd()
            if here not in sys.path:  # (and its imports, as `python -m` there would: the server's `python -m` put only
                # the directory it started in on sys.path -- started in a test's sandbox, the checkout's own packages
                # were unimportable back home: "No module named 'tests'")
                sys.path.insert(0, here)
        warnings.simplefilter("ignore")  # (as a ChildProcess's PYTHONWARNINGS=ignore)
        run_job(Path(str(request["job"])), Path(str(request["out"])), started_at)
        code = 0
    except BaseException:  # (the parent reads the stderr file: the traceback says why)
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _say(answer: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()


def serve() -> int:
    """Fork a child per request read from standard input, answering on standard output, until its end and the end of
    every child. One thread throughout (a fork copies only the calling thread): a child's end wakes ``select`` through
    SIGCHLD's wakeup pipe."""
    parent = os.getppid()
    die_with_parent()
    if not parent_is_alive(parent):
        return 1
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # (a handler, so the signal reaches the wakeup fd)
    signal.set_wakeup_fd(wake_w)
    stdin = sys.stdin.buffer.fileno()
    children: dict[int, object] = {}  # pid -> the request's id
    pending = b""
    reading = True
    while reading or children:
        ready = select.select([stdin, wake_r] if reading else [wake_r], [], [], 1.0)[0]
        if wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 4096)
        _reap(children)
        if stdin in ready:
            chunk = os.read(stdin, 65536)
            reading = bool(chunk)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    request = json.loads(line)
                    pid = os.fork()
                    if pid == 0:
                        _child(request)
                    children[pid] = request.get("id")
                    _say({"id": request.get("id"), "pid": pid})
    return 0


def _reap(children: dict[int, object]) -> None:
    """Answer for every child that has ended."""
    for pid in list(children):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            _say({"id": children.pop(pid), "pid": pid, "exit": os.waitstatus_to_exitcode(status)})


WARM = "--warm"
"""``MODULE... --warm MODULE...``: the modules after it are imported only where a child forked after them can still use
CUDA (:func:`cuda_fork_safe`)."""


def main(argv: list[str]) -> int:
    cut = argv.index(WARM) if WARM in argv else len(argv)
    modules, warm = argv[:cut], argv[cut + 1:]
    for module in modules:  # (what every job would import: done once, here)
        importlib.import_module(module)
    kept: list[str] = []
    if warm:
        try:
            for module in warm:
                importlib.import_module(module)
            safe = cuda_fork_safe()
        except Exception:  # (a warm module that does not import here: the jobs import what they need themselves)
            safe = False
        if not safe:  # (or a warm import asked CUDA something: start again without them)
            os.execv(sys.executable, [sys.executable, "-m", "ampbench.launch.zygote", *modules])
        kept = warm
    # (a fork copies one thread: the parent says how many this process has -- the imports started none, or it is not
    # safe to fork and the launcher starts processes instead)
    _say({"ready": os.getpid(), "threads": threads(), "warm": kept})
    return serve()


def cuda_fork_safe() -> bool:
    """Whether a child forked now could still use CUDA. torch marks every child forked after this process asked the
    CUDA runtime anything (a device count: its ``pthread_atfork`` handler) as "in bad fork", where CUDA refuses to
    start; a probe child forked here reports it. True without a CUDA build of torch (nothing to ask)."""
    torch = sys.modules.get("torch")
    in_bad_fork = getattr(getattr(torch, "_C", None), "_cuda_isInBadFork", None)
    if in_bad_fork is None:
        return True
    pid = os.fork()
    if pid == 0:  # (the probe: its answer is its exit code; no teardown)
        os._exit(1 if in_bad_fork() else 0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def threads() -> int:
    """Native threads of this process (Linux: /proc; elsewhere Python's own count)."""
    try:
        return len(os.listdir(f"/proc/{os.getpid()}/task"))
    except OSError:
        return threading.active_count()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
