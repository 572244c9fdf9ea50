"""Where a cell's wall time goes: its phases, back to back, timed as they run.

A cell's process runs under one :class:`PhaseClock` (``with clock() as c``); the measurement code says which phase
starts with :func:`enter` (which also reports it as progress, :mod:`ampbench.progress`). A phase ends where the next
begins, so the phases add up to the clock's whole time by construction; a phase entered again adds to its total
(a max-batch search's trials, say). The launcher adds what happens outside the cell's code -- the process's start,
the imports, the teardown (:func:`launched`) -- so a row's ``phases_s`` adds up to its ``wall_s``.

While a phase runs longer than :data:`LONG_S` without a progress event, a heartbeat reports it with its elapsed time
(``memory step (saved activations) (40 s in this phase)``): a slow phase is visible while it runs, and one that
never ends is named by the last event its launcher saw (the cell's timeout says which).

A leaf: torch-free, it imports nothing of ampbench but :mod:`ampbench.progress`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from ampbench import progress

LONG_S = 10.0
"""A phase that has reported nothing for this long gets a heartbeat progress line with its elapsed time."""


class PhaseClock:
    """Back-to-back phases of one cell (wall-clock seconds, ``time.perf_counter``)."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.totals: dict[str, float] = {}
        self.current: str | None = None
        self.text = ""
        self.since = self.t0
        self.beat = True
        self._lock = threading.Lock()

    def enter(self, name: str, text: str = "", beat: bool = True) -> None:
        """End the current phase and start ``name`` (``text``: how progress says it; ``beat=False``: no heartbeat while
        it runs -- a process waiting for its turn is not slow)."""
        now = time.perf_counter()
        with self._lock:
            self._close(now)
            self.current, self.text, self.since = name, text or name.replace("_", " "), now
            self.beat = beat

    def _close(self, now: float) -> None:
        if self.current is not None:
            self.totals[self.current] = self.totals.get(self.current, 0.0) + (now - self.since)
        self.current = None

    def stop(self) -> dict[str, float]:
        """End the clock: every phase's seconds, in the order first entered (their sum is the clock's time)."""
        now = time.perf_counter()
        with self._lock:
            self._close(now)
            if not self.totals:
                self.totals["cell"] = now - self.t0
            else:  # (time before the first enter: counted in the first phase)
                first = next(iter(self.totals))
                self.totals[first] += (now - self.t0) - sum(self.totals.values())
        return dict(self.totals)

    def running(self) -> tuple[str, float] | None:
        """The phase running now, as progress says it, and its seconds so far."""
        with self._lock:
            on = self.current is not None and self.beat
            return (self.text, time.perf_counter() - self.since) if on else None


_current: PhaseClock | None = None


@contextlib.contextmanager
def clock() -> Iterator[PhaseClock]:
    """Time the phases inside (this process's clock: :func:`enter` reaches it); a heartbeat thread reports a phase
    that runs longer than :data:`LONG_S` while somebody listens for progress."""
    global _current
    before, _current = _current, PhaseClock()
    c = _current
    stop = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(c, stop), daemon=True) if progress.listening() else None
    if beat is not None:
        beat.start()
    try:
        yield c
    finally:
        stop.set()
        if beat is not None:
            beat.join()
        _current = before


def _heartbeat(c: PhaseClock, stop: threading.Event) -> None:
    while not stop.wait(1.0):
        now = c.running()
        if now is None:
            continue
        text, elapsed = now
        if elapsed >= LONG_S and time.monotonic() - progress.last_report() >= LONG_S:
            progress.report(text, detail=f"({elapsed:.0f} s in this phase)")


def enter(name: str, text: str = "", detail: str = "", say: bool = True, beat: bool = True) -> None:
    """Start phase ``name`` of the cell this process measures (nothing without a clock) and say it as progress
    (``text``, default the name in words; ``say=False``: a step meter of the phase says it; ``beat=False``: no
    heartbeat while it runs)."""
    if _current is not None:
        _current.enter(name, text, beat)
    if say:
        progress.report(text or name.replace("_", " "), detail=detail)


def launched(phases: dict[str, float], spawned_at: float, started_at: float, returned_at: float,
             exited_at: float) -> dict[str, float]:
    """A cell measured in a child process: its phases with the launcher's around them (``time.time()`` stamps: the
    parent spawned the child, the child's main started, it had the row, the parent saw it exit). The imports are
    what the child's main spent outside the cell's own phases. The result adds up to ``exited_at - spawned_at``."""
    inside = sum(phases.values())
    out = {"process_start": max(0.0, started_at - spawned_at),
           "import": max(0.0, (returned_at - started_at) - inside)}
    out.update(phases)
    out["teardown"] = max(0.0, exited_at - returned_at)
    return out


def add_up(phases: dict[str, Any] | None) -> float:
    """The phases' seconds together."""
    return float(sum((phases or {}).values()))
