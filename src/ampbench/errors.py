"""Exceptions ampbench raises.

Two families:
- `AmpbenchError`: the caller asked for something invalid (unknown name, bad option, wrong call order).
  The message says what was wrong and what is valid; the CLI prints it on one line and exits with 2.
- `TrainingDivergedError`: the training itself failed (loss scale collapsed). A benchmark records it
  as status ``diverged``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class AmpbenchError(ValueError):
    """Invalid input or misuse; the message tells how to fix it."""


class UnsupportedPrecisionError(AmpbenchError):
    """The device cannot run the requested precision mode (never silently replaced by another)."""


class MisuseError(AmpbenchError, RuntimeError):
    """API calls in the wrong order (step before backward, setup twice, ...)."""


class TrainingDivergedError(RuntimeError):
    """Training diverged (e.g. the dynamic loss scale fell below its floor)."""


def suggest(word: str, choices: Iterable[str]) -> str:
    """' Did you mean X?' when a close match exists, else ''."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""
