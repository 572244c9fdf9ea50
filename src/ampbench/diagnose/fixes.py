"""Fixes diagnose has tried: a fix is suggested only once training with it matched fp32.

A finding that names a module whose output overflows fp16 invites ``keep_fp32=[module]``, but a module kept
in fp32 casts its output back to the half dtype its input had (ampbench.precision.convert), so an output
beyond 65504 overflows again right after it: with the module kept, master-fp16 still diverges at the same
step. So each candidate is trained from the same init on the same batches as fp32 (the policy check's
trials, :func:`ampbench.diagnose.policy.trial_loss`) and called verified only when its loss matches fp32's:

1. the module kept in fp32, in the diagnosed mode (modes that cast the model: master-*, pure-*);
2. its enclosing module kept in fp32 (the output then stays fp32 up to the parent's own output);
3. amp-bf16 (bf16 has fp32's exponent range: no overflow below 3.4e38).

The finding's fix says which was verified, with the losses, and which were tried and failed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ampbench.diagnose.policy import REL_TOL, trial_loss
from ampbench.precision import get, supported
from ampbench.precision.convert import with_tied
from ampbench.workloads.base import Workload


@dataclass(frozen=True)
class Tried:
    fix: str
    """What a user would write: ``MixedPrecision('master-fp16', keep_fp32=['fc2'])``."""
    precision: str
    keep: tuple[str, ...]
    loss: float
    matches: bool

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _parent(name: str) -> str | None:
    return name.rpartition(".")[0] or None


def candidates(precision: str, module: str, casts_model: bool, half_is_fp16: bool) -> list[tuple[str, str, tuple[str, ...]]]:
    """(fix text, precision, keep_fp32) to try, in the order a user would prefer them."""
    out = []
    if casts_model and module != "(model)":  # (the model itself kept in fp32 is fp32, not a fix -- and keep_fp32
        # takes submodule names: it refused "(model)", and the whole diagnosis failed with it)
        out.append((f"MixedPrecision('{precision}', keep_fp32=['{module}'])", precision, (module,)))
        parent = _parent(module)
        if parent is not None:
            out.append((f"MixedPrecision('{precision}', keep_fp32=['{parent}'])", precision, (parent,)))
    if half_is_fp16:
        out.append(("MixedPrecision('amp-bf16') (bf16 has fp32's range)", "amp-bf16", ()))
    return out


class FixChecker:
    """Tries fixes for one diagnosis (same builder, device, batch and steps as its other checks), remembering
    fp32's loss and every trial, so each module is tried once however many findings name it."""

    def __init__(self, build: Callable[[], Workload], device: torch.device, batch_size: int, steps: int,
                 precision: str) -> None:

        self.build, self.device, self.batch_size, self.steps, self.precision = build, device, batch_size, steps, precision
        recipe = get(precision)
        self.casts_model = recipe.casts_model
        self.fp16 = recipe.compute_dtype == torch.float16
        self.bf16_ok = supported("amp-bf16", device).ok
        self._fp32: float | None = None
        self._done: dict[str, list[Tried]] = {}
        self._built: nn.Module | None = None

    def _model(self) -> nn.Module:
        """The model as built (once): which of its modules are tied."""
        if self._built is None:
            self._built = self.build().model
        return self._built

    @property
    def fp32_loss(self) -> float:
        if self._fp32 is None:
            self._fp32 = trial_loss(self.build, "fp32", self.device, self.batch_size, self.steps)
        return self._fp32

    def matches(self, loss: float) -> bool:
        ref = self.fp32_loss
        return math.isfinite(loss) and abs(loss - ref) <= REL_TOL * abs(ref) + 1e-6

    def try_fixes(self, module: str) -> list[Tried]:
        """Candidates for a module, tried in order until one matches fp32 (the rest are not needed)."""
        if module in self._done:
            return self._done[module]
        tried: list[Tried] = []
        for text, precision, keep in candidates(self.precision, module, self.casts_model, self.fp16 and self.bf16_ok):
            if keep:  # (a module tied to another is kept with it, as the trial keeps it: say both)
                tied = tuple(with_tied(self._model(), keep))
                if tied != keep:
                    text, keep = f"MixedPrecision('{precision}', keep_fp32={list(tied)!r})", tied
            loss = trial_loss(self.build, precision, self.device, self.batch_size, self.steps, list(keep) or None)
            tried.append(Tried(text, precision, keep, loss, self.matches(loss)))
            if tried[-1].matches:
                break
        self._done[module] = tried
        return tried

    def fix_text(self, module: str, output_overflows: bool = True) -> str:
        """The verified fix for a module (with the losses), and what was tried and did not help. ``output_overflows``:
        the module's forward output is what goes non-finite (then say why keeping it alone cannot help)."""
        tried = self.try_fixes(module)
        failed = [t for t in tried if not t.matches]
        why = "; ".join(f"{t.fix} did not (loss {t.loss:.4g})" for t in failed)
        if output_overflows and failed and failed[0].keep == (module,):
            why += f": a module kept in fp32 casts its output back to the half dtype, where {module}'s output overflows again"
        good = next((t for t in tried if t.matches), None)
        if good is None:
            return (f"no fix verified (fp32 loss {self.fp32_loss:.4g}; tried: {why or 'nothing applies to this mode'}): "
                    f"keep the modules that consume {module}'s output in fp32 together with it, or train in fp32")
        return self._verified(good.fix, good.loss) + (f"; {why}" if why else "")

    def _verified(self, fix: str, loss: float) -> str:
        return f"verified: {fix} trains like fp32 (loss {loss:.4g} vs fp32 {self.fp32_loss:.4g} after {self.steps} steps)"

    def mode_trial(self, precision: str) -> Tried:
        """Training all in ``precision`` from fp32's init on its batches (tried once, remembered with the others)."""
        key = f"mode:{precision}"
        if key not in self._done:
            loss = trial_loss(self.build, precision, self.device, self.batch_size, self.steps)
            self._done[key] = [Tried(f"MixedPrecision('{precision}')", precision, (), loss, self.matches(loss))]
        return self._done[key][0]

    def mode_text(self, precision: str) -> str:
        """Whether training all in ``precision`` matches fp32 (tried once, remembered with the others)."""
        t = self.mode_trial(precision)
        if t.matches:
            return self._verified(precision, t.loss)
        return f"{precision} did not match fp32 either (loss {t.loss:.4g} vs {self.fp32_loss:.4g}): train in fp32"

    def record(self) -> dict[str, Any]:
        return {"fp32_loss": self._fp32, "steps": self.steps,
                "tried": {m: [t.to_dict() for t in ts] for m, ts in self._done.items()}}
