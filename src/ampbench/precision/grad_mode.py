"""A grad-mode switch for the engine's per-step bookkeeping, cheaper than ``torch.no_grad()``.

A training step turns autograd off a few times (the inf/NaN check, the master-weight copies): ``with torch.no_grad():``
costs ~1.4 µs a use on a CPU host (it builds a context object through ``_NoParamDecoratorContextManager``'s
machinery, and as a decorator adds a wrapper call), which is a measurable share of the ~20 µs the engine may add to a
step (``benchmarks/engine_overhead.py --tiny``). This does the same thing -- save the grad mode, switch it off,
restore it -- with torch's own switch (``torch._C._set_grad_enabled``, what ``torch.set_grad_enabled`` calls) in
~0.5 µs. Thread-local like torch's: each use gets its own object.
"""

from __future__ import annotations

import torch

_set_grad_enabled = torch._C._set_grad_enabled


class no_grad:
    """``with no_grad(): ...``: autograd records nothing inside; the previous mode is restored on exit."""

    __slots__ = ("_prev",)

    def __enter__(self) -> None:
        self._prev = torch.is_grad_enabled()
        _set_grad_enabled(False)

    def __exit__(self, *exc: object) -> None:
        _set_grad_enabled(self._prev)
