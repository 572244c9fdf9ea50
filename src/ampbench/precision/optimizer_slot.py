"""One optimizer under a MixedPrecision: its loss scaler, its fp32 master weights and where it is in the step's
state machine (READY --backward--> ACCUMULATING --unscale_--> UNSCALED --step--> READY), and the step pre-hook
that refuses ``optimizer.step()`` called outside ``mp.step()``."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

import torch

from ampbench.errors import MisuseError
from ampbench.precision.master_weights import MasterWeights
from ampbench.precision.scaling import LossScaler


class Stage(enum.Enum):
    READY = "ready"
    ACCUMULATING = "accumulating"
    UNSCALED = "unscaled"


READY, ACCUMULATING, UNSCALED = Stage.READY, Stage.ACCUMULATING, Stage.UNSCALED
"""(Module constants: an enum member's lookup costs ~70 ns, several times a step.)"""


@dataclass
class OptimizerSlot:
    """Per-optimizer state: its scaler, its master weights, where it is in the state machine."""

    optimizer: torch.optim.Optimizer
    scaler: LossScaler
    masters: MasterWeights | None
    stage: Stage = READY
    steps: int = 0
    pending_loss: torch.Tensor | None = None
    in_step: bool = False
    """True while mp.step() runs the optimizer: any other optimizer.step() call is a misuse."""
    where: tuple[torch.Tensor, torch.dtype, torch.device] | None = None
    """A parameter of the model (the half one in master modes) with its dtype and device at setup (a model cast or
    moved after setup is refused)."""


def step_guard(slot: OptimizerSlot) -> Any:
    """An optimizer step pre-hook refusing optimizer.step() outside mp.step()."""

    def hook(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if not slot.in_step:
            raise MisuseError(
                f"{type(optimizer).__name__}.step() was called directly on an optimizer set up by MixedPrecision: "
                "call mp.step(optimizer) instead (it unscales the gradients, skips inf/NaN steps and, in "
                "master-* modes, steps the fp32 master weights and copies them into the model)"
            )

    hook.ampbench_step_guard = True  # type: ignore[attr-defined]  (the one hook fused_step.py steps past: it is us)
    return hook
