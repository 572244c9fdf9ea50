"""Host syncs, counted: every read of a device value from Python (``.item()``, ``float(t)``, ``bool(t)``, ``if t:``)
dispatches ``aten._local_scalar_dense``; on a GPU each one waits for the queue to drain.

:class:`HostSyncCounter` counts them under a ``TorchDispatchMode`` (torch's own mechanism for seeing every op; there
is no counter for this in torch.profiler's summaries). It slows every op it sees: count in steps that are not timed.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class HostSyncCounter(TorchDispatchMode):
    """``with HostSyncCounter() as c: ...`` then ``c.reads``: device-to-host scalar reads made inside; ``c.ops``: every
    aten op run inside (forward, backward and optimizer alike), by name, e.g. ``{"aten.addmm.default": 2, ...}``."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is torch.ops.aten._local_scalar_dense.default:
            self.reads += 1
        self.ops[str(func)] += 1
        return func(*args, **(kwargs or {}))
