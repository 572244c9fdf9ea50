"""The smallest set of modules that must stay in fp32 for ``master-fp16`` training (``master-bf16`` for a bf16
mode's diagnosis) to match fp32.

A trial trains the model from the same init on the same batches for a few steps with a candidate
``keep_fp32`` set and compares the loss with fp32's (within a relative tolerance, nothing
non-finite). The search is divide and conquer over leaf modules (adaptive group testing): with one
fp16-hostile layer among n it takes about 2·log2(n) trials instead of n. The result plugs straight
into ``MixedPrecision("master-fp16", keep_fp32=[...])``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ampbench.diagnose.findings import Finding
from ampbench.errors import TrainingDivergedError
from ampbench.measure.step import build_step
from ampbench.precision.convert import NORM_TYPES, with_tied
from ampbench.workloads.base import Workload

REL_TOL = 0.05
"""A trial matches fp32 when its loss is within 5% of fp32's (and finite)."""


@dataclass
class PolicyResult:
    keep_fp32: list[str] | None
    """The modules to keep in fp32 (empty: none needed); None when keeping modules cannot fix it."""
    fp32_loss: float
    policy_loss: float | None
    plain_loss: float
    """The searched mode's loss with nothing extra kept."""
    trials: int
    candidates: int
    log: list[dict[str, Any]] = field(default_factory=list)
    precision: str = "master-fp16"
    """The mode searched (master-bf16 for a bf16 mode's diagnosis: every finding names it)."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def candidates(model: nn.Module) -> list[str]:
    """Leaf modules master-fp16 would cast (norm layers are kept fp32 by the recipe already)."""
    return [n for n, m in model.named_modules() if n and not list(m.children()) and not isinstance(m, NORM_TYPES)]


def trial_loss(build: Callable[[], Workload], precision: str, device: torch.device, batch_size: int, steps: int,
               keep: list[str] | None = None) -> float:
    """Mean loss of the last fifth of ``steps`` steps (nan when anything went non-finite)."""

    wl = build()
    try:  # (a module tied to another is kept with it: :func:`~ampbench.precision.convert.with_tied`)
        step = build_step(wl, precision, batch_size, device, keep_fp32=with_tied(wl.model, keep) if keep else None)
        losses = []
        for _ in range(steps):
            step()
            losses.append(step.last_loss)
    except TrainingDivergedError:
        return math.nan
    vals = torch.stack(losses).float().cpu()
    if not bool(torch.isfinite(vals).all()):
        return math.nan
    return float(vals[-max(1, steps // 5):].mean())


def find_policy(build: Callable[[], Workload], device: torch.device, batch_size: int, steps: int = 20,
                precision: str = "master-fp16", rel_tol: float = REL_TOL) -> PolicyResult:
    ref = trial_loss(build, "fp32", device, batch_size, steps)
    tol = rel_tol * abs(ref) + 1e-6
    log: list[dict[str, Any]] = []

    def matches(keep: list[str]) -> bool:
        loss = trial_loss(build, precision, device, batch_size, steps, keep)
        ok = math.isfinite(loss) and abs(loss - ref) <= tol
        log.append({"keep_fp32": list(keep), "loss": loss, "matches": ok})
        return ok

    cands = candidates(build().model)
    if matches([]):
        return PolicyResult([], ref, log[-1]["loss"], log[-1]["loss"], len(log), len(cands), log, precision)
    plain = log[-1]["loss"]
    if not matches(cands):
        return PolicyResult(None, ref, None, plain, len(log), len(cands), log, precision)

    def needed(group: list[str], fixed: list[str]) -> list[str]:
        """Minimal subset R of ``group`` with fixed + R matching (given that fixed + group matches)."""
        if matches(fixed):
            return []
        if len(group) == 1:
            return group
        half = len(group) // 2
        left, right = group[:half], group[half:]
        right_needed = needed(right, fixed + left)
        left_needed = needed(left, fixed + right_needed)
        return left_needed + right_needed

    keep = needed(cands, [])
    final = trial_loss(build, precision, device, batch_size, steps, keep)
    keep = with_tied(build().model, keep)  # (what the trials kept, and what the user must write)
    return PolicyResult(keep, ref, final, plain, len(log) + 1, len(cands), log, precision)


def mode_finding(precision: str, trial: Any, fp32_loss: float, steps: int,
                 otherwise: Callable[[], str] | None = None) -> Finding:
    """Whether the diagnosed mode itself trains like fp32 (``trial``: its :class:`~ampbench.diagnose.fixes.Tried`,
    from fp32's init on fp32's batches). Seen: a model scaling an activation past 65504 between its modules --
    amp-fp16 overflowed to inf there, a tanh absorbed it, and it trained to 0.457 against fp32's 0.545 with nothing
    non-finite, while the diagnosis spoke only of master-fp16."""
    data = {"precision": precision, "loss": trial.loss, "fp32_loss": fp32_loss, "steps": steps}
    if trial.matches:
        return Finding("info", "policy", f"{precision} trains like fp32 over {steps} steps (loss {trial.loss:.4g} vs "
                       f"{fp32_loss:.4g})", data=data)
    finite = math.isfinite(trial.loss)
    return Finding("error", "policy", f"{precision} does not train like fp32 over {steps} steps (loss "
                   f"{trial.loss:.4g} vs fp32 {fp32_loss:.4g}, from the same init on the same batches)",
                   ("its loss stayed finite: a value rounded or overflowed in the half dtype and absorbed downstream "
                    "(e.g. an inf into a tanh or a clamp), perhaps in the model's own forward code between modules, "
                    "where the activations check does not look" if finite else
                    "it went non-finite: the non-finite check says where it starts"),
                   otherwise() if otherwise is not None else "train in fp32 where no half mode matches it", data)


def policy_findings(r: PolicyResult, otherwise: Callable[[], str] | None = None) -> list[Finding]:
    """``otherwise()``: what was verified instead when no set of fp32 modules helps (amp-bf16's trial)."""
    data = r.to_dict()
    data.pop("log")
    m = r.precision  # (the mode searched: master-bf16's findings said "master-fp16")
    if r.keep_fp32 == []:
        return [Finding("info", "policy", f"{m} matches fp32 with no extra fp32 modules (loss {r.plain_loss:.4g} "
                        f"vs {r.fp32_loss:.4g})", data=data)]
    if r.keep_fp32 is None:
        return [Finding("error", "policy", f"keeping modules in fp32 does not make {m} match fp32",
                        f"fp32 loss {r.fp32_loss:.4g}; {m} with every leaf module kept fp32: "
                        f"{r.log[-1]['loss']:.4g} (a kept module's output is cast back to fp16, so an overflowing "
                        "output overflows again)", "the problem crosses module boundaries, or is outside the modules "
                        "(the loss, the model's own forward code, the optimizer: e.g. eps); "
                        + (otherwise() if otherwise is not None else "see the non-finite and activations checks"), data)]
    names = ", ".join(repr(n) for n in r.keep_fp32)
    return [Finding("error" if not math.isfinite(r.plain_loss) else "warning", "policy",
                    f"{m} needs {len(r.keep_fp32)} module(s) in fp32 to match fp32: {names}",
                    f"loss: fp32 {r.fp32_loss:.4g}; {m} {r.plain_loss:.4g}; with the policy {r.policy_loss:.4g} "
                    f"({r.trials} trials over {r.candidates} modules)",
                    f"MixedPrecision('{m}', keep_fp32=[{names}])", data)]
