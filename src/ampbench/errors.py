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


class ParameterError(AmpbenchError):
    """A bad value of one parameter, said as the Python API spells it (``optimizer_state='2bit': choose from ...``);
    the command line says it with its flag instead (:meth:`with_flag`: ``--optimizer-state 2bit: choose from ...``)."""

    def __init__(self, param: str, value: object, detail: str) -> None:
        self.param, self.value, self.detail = param, value, detail
        super().__init__(f"{param}={value!r}: {detail}")

    def with_flag(self, flag: str) -> str:
        shown = ", ".join(map(str, self.value)) if isinstance(self.value, (list, tuple)) else repr(self.value)
        return f"{flag} {shown}: {self.detail}"


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
