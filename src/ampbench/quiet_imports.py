"""Third-party import noise held back from the console: a library that logs, on its first import, what every CPU
machine lacks says nothing a user can act on (its own errors still raise). Below every layer: the precision engine
imports torchao, and transformers (the workloads' hf: adapter) imports it too."""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator


@contextlib.contextmanager
def torchao_quiet(warnings_too: bool = True) -> Iterator[None]:
    """Imports inside it leave torchao's import noise out of the console: its warning per CUDA/CUTLASS extension it
    cannot load (every CPU machine) and torch's about a deprecated pytree registration in it, logged once, when
    torchao is first imported -- by us, or by a library that imports it (transformers' quantizers do, when any
    model class is built). Warnings raised inside are dropped too (not with ``warnings_too=False``: a user's own
    factory, whose warnings are theirs to see); errors still raise."""
    loggers = [logging.getLogger(n) for n in ("torchao", "torch.utils._pytree")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            if warnings_too:
                warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)
