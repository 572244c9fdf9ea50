"""Progress from inside long work: which measure runs, step i of N, an ETA from the steps measured so far.

Measurement code says what it is doing with :func:`report` (or a :class:`Steps` meter in a loop); where the
events go is chosen by whoever runs it, never by the measurement:

- nowhere (the default): :func:`report` is a no-op costing one lookup;
- a callback in this process: ``with reporting_to(fn): ...`` (the CLI's live bar when cells run in-process);
- a file of JSON lines named by the environment variable ``AMPBENCH_PROGRESS``: what a launcher sets for a child
  process or torchrun's ranks (rank 0 only writes), and reads back with :class:`Tail` while it waits.

A leaf: it imports nothing of ampbench, so the measurement layer and the launchers can both use it.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

ENV = "AMPBENCH_PROGRESS"
"""Environment variable: the file a child process appends its progress events to (one JSON object per line)."""


@dataclass(frozen=True)
class Event:
    """One progress report: ``what`` runs (e.g. "timed steps"), ``i`` of ``n`` done, ``detail`` (e.g. "seed 2/3")."""

    what: str
    i: int | None = None
    n: int | None = None
    detail: str = ""
    eta_s: float | None = None
    """Seconds left in this measure, from the mean time of the steps done so far (None until one is done)."""

    def text(self) -> str:
        """``converge seed 2/3: step 40/200, ~12 s left``."""
        head = f"{self.what} {self.detail}".strip()
        if self.n is not None:
            head += f": step {self.i or 0}/{self.n}" if self.what != "max batch" else f": trial {self.i or 0}"
        if self.eta_s is not None and self.i != self.n:
            head += f", ~{duration(self.eta_s)} left"
        return head

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Event:
        return cls(str(d["what"]), d.get("i"), d.get("n"), str(d.get("detail") or ""), d.get("eta_s"))


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


# -- where events go ------------------------------------------------------------------------------------------------
_callback: Callable[[Event], None] | None = None
_file: TextIO | None = None
_file_path: str | None = None
_lock = threading.RLock()  # (a cell's phase heartbeat reports from a thread of its own)
_last = time.monotonic()


def _sink() -> Callable[[Event], None] | None:
    global _file, _file_path
    if _callback is not None:
        return _callback
    path = os.environ.get(ENV)
    if not path or os.environ.get("RANK", "0") != "0":  # distributed: rank 0 speaks for the cell
        return None
    if _file is None or _file_path != path:
        _file, _file_path = open(path, "a", buffering=1, encoding="utf-8"), path  # noqa: SIM115 (lives with the process)
    return _write


def _write(event: Event) -> None:
    assert _file is not None
    _file.write(json.dumps(asdict(event)) + "\n")


def report(what: str, i: int | None = None, n: int | None = None, detail: str = "", eta_s: float | None = None) -> None:
    """Say what runs now (a no-op when nobody listens)."""
    global _last
    sink = _sink()
    if sink is not None:
        with _lock:
            _last = time.monotonic()
            sink(Event(what, i, n, detail, eta_s))


def forward(event: Event) -> None:
    """Pass on an event another process reported to wherever this process's events go (a nested launch's)."""
    report(event.what, event.i, event.n, event.detail, event.eta_s)


def last_report() -> float:
    """When this process last reported (``time.monotonic()``)."""
    return _last


def listening() -> bool:
    return _sink() is not None


@contextlib.contextmanager
def reporting_to(callback: Callable[[Event], None] | None) -> Iterator[None]:
    """Send this process's events to ``callback`` inside the block (None: leave them where they went)."""
    global _callback
    if callback is None:
        yield
        return
    before, _callback = _callback, callback
    try:
        yield
    finally:
        _callback = before


class Steps:
    """A loop's meter: ``meter(i)`` after step i of n reports at most every ``every`` seconds (and the first and
    last step), with the ETA from the mean step time so far."""

    def __init__(self, what: str, n: int, detail: str = "", every: float = 0.25, first_apart: bool = False,
                 done: int = 0) -> None:
        """``first_apart``: the first step traces and compiles (a Keras model's, a compiled model's): the ETA is
        extrapolated from the steps after it, and there is none until a second step has run. ``done``: steps of the
        n run already, elsewhere (a cell's first step is its first warm-up step: "warm-up: step 1/3" before the loop's
        two); the meter is called with the count including them."""
        self.what, self.n, self.detail, self.every, self.first_apart = what, n, detail, every, first_apart
        self.done = done
        self.t0 = self.last = time.perf_counter()
        self.t1: float | None = None
        self.on = listening() and n > done
        if self.on:
            report(what, done, n, detail)

    def eta(self, i: int, now: float) -> float | None:
        """Seconds left after step ``i`` of ``n``, from the mean step time so far (the first step left out when
        it compiles)."""
        if not self.first_apart:
            return (now - self.t0) / (i - self.done) * (self.n - i) if i > self.done else None
        if i < self.done + 2 or self.t1 is None:
            return None if i < self.n else 0.0
        return (now - self.t1) / (i - self.done - 1) * (self.n - i)

    def __call__(self, i: int) -> None:
        if not self.on:
            return
        now = time.perf_counter()
        if i == self.done + 1:
            self.t1 = now
        if i in (self.done + 1, self.n) or now - self.last >= self.every:
            self.last = now
            report(self.what, i, self.n, self.detail, self.eta(i, now))


# -- reading a child's events back -------------------------------------------------------------------------------------
class Tail:
    """Follow the progress file a child appends to, calling ``callback`` with each event in order, from a thread of
    its own until :meth:`stop` (which reads what is left first). A line half-written is read once it is whole."""

    def __init__(self, path: Path, callback: Callable[[Event], None], poll: float = 0.1) -> None:
        self.path, self.callback, self.poll = Path(path), callback, poll
        self._stop = threading.Event()
        self._offset = 0
        self._buffer = ""
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as f:
                f.seek(self._offset)
                chunk = f.read()
                self._offset = f.tell()
        except FileNotFoundError:
            return
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split("\n")
        for line in lines:
            if line.strip():
                try:
                    event = Event.from_dict(json.loads(line))
                except (ValueError, KeyError, TypeError):
                    continue  # (not ours: progress never fails a cell)
                self.callback(event)

    def _loop(self) -> None:
        while not self._stop.wait(self.poll):
            self._read()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._read()


@contextlib.contextmanager
def child_progress(directory: Path, callback: Callable[[Event], None] | None) -> Iterator[dict[str, str]]:
    """For a launcher: the environment entries that make a child report to ``callback`` (followed while the block
    runs). No callback: where this process's own events go (a nested launch reports to the same place)."""
    callback = callback or _callback
    if callback is None:  # (the child inherits this process's AMPBENCH_PROGRESS, if any)
        yield {}
        return
    path = Path(directory) / "progress.jsonl"
    path.touch()
    tail = Tail(path, callback)
    try:
        yield {ENV: str(path)}
    finally:
        tail.stop()
