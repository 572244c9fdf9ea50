"""Run a job in a fresh child process: an OOM, a crash or a hang is a result, not a lost run.

Parent: :class:`ChildProcess` writes the job as JSON, starts ``python -m ampbench.launch.child JOB OUT`` and
reads OUT back. Child (:mod:`ampbench.launch.child`): dies with its parent, runs the job, writes OUT atomically.
A child that dies or times out gives ``{"_failed": reason, "_killed": bool}``.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shutil
import signal
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
from ampbench.launch.turn import ENV as TURN_ENV
from ampbench.launch.turn import give
from ampbench.progress import ENV, Event, Tail, child_progress, forward


@dataclass(frozen=True)
class Inline:
    """Run the job in this process (no isolation: a crash takes the caller with it)."""

    def run(self, job: Job) -> dict[str, Any]:
        return job.call()


@dataclass(frozen=True)
class ChildProcess:
    """Run the job in a child process of its own, killed after ``timeout`` seconds; its progress events
    (:mod:`ampbench.progress`) reach ``on_progress`` in order while it runs; a child killed at the timeout is said with
    the last thing it reported (the phase that did not finish). :meth:`run_stamped` also gives when the child was
    spawned and seen to exit, and when its main started and had the result (``time.time()``)."""

    timeout: float | None = None
    on_progress: Callable[[Event], None] | None = field(default=None, compare=False)

    def run(self, job: Job) -> dict[str, Any]:
        return self.run_stamped(job)[0]

    def run_stamped(self, job: Job) -> tuple[dict[str, Any], dict[str, float] | None]:
        """(the result, the launch's stamps: ``spawned_at``, ``started_at``, ``returned_at``, ``exited_at``, or None
        for a child that gave no result)."""
        watch = _Watch(self.on_progress)
        with tempfile.TemporaryDirectory(prefix="ampbench-") as tmp:
            job_file, out = _job_files(Path(tmp), job)
            spawned_at = time.time()
            try:
                with child_progress(Path(tmp), watch.seen) as progress_env:
                    env = dict(os.environ, PYTHONWARNINGS="ignore", **progress_env)
                    proc = subprocess.run([sys.executable, "-m", "ampbench.launch.child", str(job_file), str(out)],
                                          capture_output=True, text=True, timeout=self.timeout, env=env)
            except subprocess.TimeoutExpired:
                return watch.timed_out(self.timeout), None
            return _ended(out, spawned_at, proc.returncode, proc.stderr)


class _Watch:
    """A child's progress events passed on (to ``on_progress``, else where this process's own events go), the last
    one kept: a child killed at its timeout is said with the phase it was in."""

    def __init__(self, on_progress: Callable[[Event], None] | None) -> None:
        self.on_progress = on_progress
        self.last: Event | None = None

    def seen(self, event: Event) -> None:
        self.last = event
        (self.on_progress or forward)(event)

    def timed_out(self, timeout: float | None) -> dict[str, Any]:
        where = f" in {self.last.what!r}" if self.last is not None else ""
        return {"_failed": f"timed out after {timeout:g} s (--cell-timeout){where}", "_killed": True}


def _job_files(tmp: Path, job: Job) -> tuple[Path, Path]:
    """The job written for the child, and where its result will be."""
    (tmp / "job.json").write_text(json.dumps(job.to_dict()))
    return tmp / "job.json", tmp / "out.json"


def _ended(out: Path, spawned_at: float, code: int, stderr: str) -> tuple[dict[str, Any], dict[str, float] | None]:
    """A child's end: its result without its ``_child`` stamps and the launch's stamps, or why it gave none."""
    if not out.exists():
        return {"_failed": describe_exit(code, stderr), "_killed": code < 0}, None
    result: dict[str, Any] = json.loads(out.read_text())
    child = result.pop("_child", None)
    return result, ({"spawned_at": spawned_at, "exited_at": time.time(), **child} if child is not None else None)


# -- a fork server's children ------------------------------------------------------------------------------------------
class _Zygote:
    """A running fork server (:mod:`ampbench.launch.zygote`): jobs sent with an id, its answers read by id (those about
    another job kept until asked for: several children may live at once)."""

    def __init__(self, preload: tuple[str, ...], env: tuple[tuple[str, str], ...] = (),
                 warm: tuple[str, ...] = ()) -> None:
        # (numpy's OpenBLAS starts a thread pool at import: held to one thread, the server stays single-threaded and
        # safe to fork -- the cells' own tensor work is torch's, whose threads start in each child)
        self.proc = subprocess.Popen([sys.executable, "-m", "ampbench.launch.zygote", *preload,
                                      *(("--warm", *warm) if warm else ())],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=dict(os.environ, PYTHONWARNINGS="ignore", OPENBLAS_NUM_THREADS="1", **dict(env)))
        self.buffer = b""
        self.ids = 0
        self.kept: dict[tuple[int, str], dict[str, Any]] = {}  # (id, "pid" | "exit") -> its answer
        ready = self.read(120.0)
        self.ok = ready is not None and ready.get("threads") == 1  # (one thread: safe to fork)
        self.warm: tuple[str, ...] = tuple(ready.get("warm") or ()) if ready is not None else ()
        """The ``warm`` modules the server kept (:func:`ampbench.launch.zygote.main`)."""

    def read(self, timeout: float | None) -> dict[str, Any] | None:
        """The next answer, or None when ``timeout`` s passed or the server ended."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        end = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = None if end is None else max(0.0, end - time.monotonic())
            if not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)  # type: ignore[no-any-return]

    def answer(self, job_id: int, kind: str, timeout: float | None) -> dict[str, Any] | None:
        """The answer ``kind`` ("pid": forked, "exit": ended) about job ``job_id``; None when ``timeout`` s passed or
        the server ended first."""
        end = None if timeout is None else time.monotonic() + timeout
        while (job_id, kind) not in self.kept:
            got = self.read(None if end is None else max(0.0, end - time.monotonic()))
            if got is None:
                return None
            self.kept[(int(got["id"]), "exit" if "exit" in got else "pid")] = got
        return self.kept.pop((job_id, kind))

    def send(self, request: dict[str, Any]) -> int | None:
        """Send a job; its id, or None when the server is gone."""
        assert self.proc.stdin is not None
        self.ids += 1
        try:
            self.proc.stdin.write((json.dumps({"id": self.ids, **request}) + "\n").encode())
            self.proc.stdin.flush()
            return self.ids
        except (BrokenPipeError, OSError):
            return None

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except Exception:
                self.proc.kill()


_ZYGOTES: dict[tuple[Any, ...], _Zygote] = {}
PER_CHILD_ENV = ("PYTEST_CURRENT_TEST",)
"""Variables that change while this process runs and that no library reads at import (pytest's name of the test it
is in): not the server's environment -- a new value would start another server -- but given to each child as they
are when it is forked."""


def _zygote(preload: tuple[str, ...], env: tuple[tuple[str, str], ...] = (),
            warm: tuple[str, ...] = ()) -> _Zygote | None:
    """The fork server preloading ``preload`` in this process's environment as it is now, with ``env`` set on top
    (started on first use, ended at exit; another for another environment: what a library reads at import -- thread
    counts, CPU ISA caps, visible GPUs, Keras's backend -- is the server's, so a child sees the environment a fresh
    process would); None where it cannot serve."""
    key = (preload, env, tuple(sorted((k, v) for k, v in os.environ.items() if k not in PER_CHILD_ENV)), warm)
    z = _ZYGOTES.get(key)
    if z is None or z.proc.poll() is not None:
        if not hasattr(os, "fork"):
            return None
        for old in [k for k in _ZYGOTES if k[:2] == (preload, env)]:  # (the environment changed: the old server goes)
            _ZYGOTES.pop(old).close()
        if not _ZYGOTES:
            atexit.unregister(close_zygotes)  # (once)
            atexit.register(close_zygotes)
        z = _ZYGOTES[key] = _Zygote(preload, env, warm)
    return z if z.ok else None


def close_zygotes() -> None:
    for z in _ZYGOTES.values():
        z.close()
    _ZYGOTES.clear()


class Started:
    """A job's child, forked: :meth:`wait` for its result. A child started ``held`` (:mod:`ampbench.launch.turn`) does
    what needs no device, then waits for its turn: :meth:`go` gives it (after the previous cell's process has
    exited); its timeout counts from then. :meth:`cancel` ends a child whose result is no longer wanted."""

    def __init__(self, launcher: Forked, z: _Zygote, job: Job, held: bool) -> None:
        self.launcher, self.z = launcher, z
        self.tmp = Path(tempfile.mkdtemp(prefix="ampbench-"))
        (job_file, self.out), self.err = _job_files(self.tmp, job), self.tmp / "stderr.txt"
        self.progress = self.tmp / "progress.jsonl"
        self.progress.touch()
        self.turn = self.tmp / "turn" if held else None
        env = {ENV: str(self.progress), **({TURN_ENV: str(self.turn)} if self.turn is not None else {}),
               **{k: os.environ[k] for k in PER_CHILD_ENV if k in os.environ}}
        self.spawned_at = time.time()
        self.turn_at: float | None = None if held else self.spawned_at
        self.id = z.send({"job": str(job_file), "out": str(self.out), "stderr": str(self.err), "env": env,
                          "cwd": os.getcwd()})
        forked = None if self.id is None else z.answer(self.id, "pid", 60.0)
        self.pid: int | None = None if forked is None else int(forked["pid"])

    def go(self) -> None:
        """Its turn: the device is its own from now."""
        if self.turn is not None and self.turn_at is None:
            self.turn_at = time.time()
            give(self.turn)

    def wait(self) -> tuple[dict[str, Any], dict[str, float] | None]:
        """As :meth:`ChildProcess.run_stamped` (with ``turn_at`` in the stamps of a child started held: when its turn
        came); gives the child its turn first if it has not had it. Its progress events are passed on from its turn."""
        self.go()
        try:
            if self.id is None or self.pid is None:
                return {"_failed": "the fork server did not start the job", "_killed": False}, None
            watch = _Watch(self.launcher.on_progress)
            tail = Tail(self.progress, watch.seen)
            try:
                timeout = self.launcher.timeout
                left = None if timeout is None else timeout - (time.time() - (self.turn_at or self.spawned_at))
                ended = self.z.answer(self.id, "exit", left)
                if ended is None:
                    if self.z.proc.poll() is not None:
                        return {"_failed": "the fork server ended before the job did", "_killed": True}, None
                    self._kill()
                    return watch.timed_out(timeout), None
            finally:
                tail.stop()
            result, stamps = _ended(self.out, self.spawned_at, int(ended["exit"]),
                                    self.err.read_text() if self.err.exists() else "")
            if stamps is not None and self.turn is not None:
                stamps["turn_at"] = float(self.turn_at or self.spawned_at)
            return result, stamps
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def cancel(self) -> None:
        """End the child (its result unwanted: the run stopped before its turn)."""
        try:
            if self.id is not None and self.pid is not None:
                self._kill()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _kill(self) -> None:
        assert self.id is not None and self.pid is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self.z.answer(self.id, "exit", 30.0)


@dataclass(frozen=True)
class Forked:
    """Run the job in a child forked from a fork server that imported ``preload`` once (:mod:`ampbench.launch.zygote`):
    a process of its own per job, as :class:`ChildProcess` gives, without paying the imports each time. Where no
    server can run (no fork, a server that started threads), a :class:`ChildProcess` runs it. Same results: a row, or
    ``{"_failed": why, "_killed": bool}``. :meth:`start` forks a child and returns at once (``held``: before its turn,
    see :class:`Started`). ``env``: set in the server before its imports (what a framework reads once, at import:
    Keras's backend), so every child forked from it has it too."""

    preload: tuple[str, ...]
    timeout: float | None = None
    on_progress: Callable[[Event], None] | None = field(default=None, compare=False)
    env: tuple[tuple[str, str], ...] = ()
    warm: tuple[str, ...] = ()
    """Imported in the server after ``preload`` where a fork after them stays CUDA-safe (:attr:`ampbench.seam.
    ForkServer.warm`)."""

    def run(self, job: Job) -> dict[str, Any]:
        return self.run_stamped(job)[0]

    def run_stamped(self, job: Job) -> tuple[dict[str, Any], dict[str, float] | None]:
        """As :meth:`ChildProcess.run_stamped` (the fork server's own start, on a run's first job, in its spawn)."""
        spawned_at = time.time()
        z = _zygote(self.preload, self.env, self.warm)
        if z is None:
            return ChildProcess(self.timeout, self.on_progress).run_stamped(job)
        result, stamps = Started(self, z, job, held=False).wait()
        if stamps is not None:
            stamps["spawned_at"] = spawned_at
        return result, stamps

    def start(self, job: Job, held: bool = False) -> Started | None:
        """The job's child, forked now (None where no fork server can run: :meth:`run` it instead)."""
        z = _zygote(self.preload, self.env, self.warm)
        return None if z is None else Started(self, z, job, held)
