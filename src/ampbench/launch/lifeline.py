"""No process of a run outlives it: children and ranks die with their parent (Linux PR_SET_PDEATHSIG).

One place for what a launched process does first: a ``kill -9`` of ``ampbench run`` must not leave children
holding a GPU or ranks waiting on a collective. Best effort where prctl does not exist.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """SIGKILL this process when its parent exits (for ``subprocess``'s ``preexec_fn`` too)."""
    if not sys.platform.startswith("linux"):
        return

    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def parent_is_alive(expected_parent: int) -> bool:
    """False when the parent died before :func:`die_with_parent` took effect (we were re-parented)."""
    return os.getppid() == expected_parent


def die_with_launcher() -> None:
    """A torchrun rank, before its heavy imports: SIGKILL when torchrun dies; if it died already (before prctl
    could watch it), exit now -- a rank nobody waits for must not live on."""
    if not sys.platform.startswith("linux"):
        return
    die_with_parent()
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            parent = f.read()
    except OSError:
        parent = b""
    if b"torch.distributed.run" not in parent and b"torchrun" not in parent:
        os._exit(1)


def describe_exit(code: int, stderr: str, what: str = "child process") -> str:
    """One line for a process that ended without its result: the signal that killed it, or its exit code and the
    last line it printed."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (out of host memory? the kernel's OOM killer sends SIGKILL)" if -code == signal.SIGKILL else ""
        return f"{what} killed by {name}{hint}"
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    return f"{what} exited with code {code}" + (f": {lines[-1].strip()[:300]}" if lines else "")
