"""A process started before its turn: it does what needs no device while the previous cell runs, then waits.

A run on a GPU spends seconds a cell outside its steps (on the lent H200: the workload's build ~1.8 s of ~7.7 s),
and a cell must have the GPU to itself while it measures: its steps, its memory peaks and the board's energy counter
are only its own then. What needs no device can overlap: the launcher starts the next cell's process while this one
measures, with ``AMPBENCH_TURN`` naming a file that does not exist yet; that process builds its workload on the host
(one thread: the measuring cell's host thread keeps its core) and waits in :func:`wait` until the launcher creates the
file (:func:`give`) -- after the previous cell's process has exited, its CUDA context gone. Without the variable a
process's turn is now (:func:`held` is False, :func:`wait` returns at once).

A leaf: it imports nothing of ampbench.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

ENV = "AMPBENCH_TURN"
"""Environment variable: the file whose creation is this process's turn."""
POLL_S = 0.005
"""How often a held process looks for its turn (what its turn can come late by)."""


def held() -> bool:
    """Whether this process was started before its turn (it may build ahead, then must :func:`wait`)."""
    return bool(os.environ.get(ENV))


def wait(poll_s: float = POLL_S) -> None:
    """Return when this process's turn has come (at once when it was not held); the processes it starts from here on
    are not held (the variable is gone)."""
    path = os.environ.pop(ENV, None)
    if not path:
        return
    while not os.path.exists(path):
        time.sleep(poll_s)


def give(path: Path) -> None:
    """The launcher: the held process's turn has come."""
    Path(path).touch()
