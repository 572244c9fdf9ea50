"""What one optimizer step did (:class:`StepRecord`): kept on the device, read on the host only when asked."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from ampbench.precision.scaling import skipped_tensor


@dataclass(slots=True)
class StepRecord:
    """What happened at one optimizer step, read on the host only when asked: ``skipped``, ``scale``,
    ``skipped_steps``, ``next_scale``, ``loss`` and ``grad_norm`` each read a device value (a host sync on a GPU;
    a hook that logs every 100th record syncs every 100 steps). True when the optimizer stepped."""

    step: int
    """1-based count of step() calls on this optimizer, skipped ones included."""
    summed_loss: torch.Tensor | None = field(default=None, repr=False)
    """The losses passed to backward() since the previous step (their sum; the loss itself, graph and all, for one
    backward: detaching it costs an op every step, so :attr:`loss_tensor` detaches it when read)."""
    grad_norm_tensor: torch.Tensor | None = field(default=None, repr=False)
    """Total gradient norm before clipping, when max_grad_norm was given."""
    found_tensor: torch.Tensor | None = field(default=None, repr=False)
    """1.0 when the gradients held inf/NaN and the step was skipped (None: not checked)."""
    skipped_count: Any = field(default=None, repr=False)
    """Steps skipped so far on this optimizer, this one included, as the scaler keeps it (None: not checked); read
    :attr:`skipped_tensor` or :attr:`skipped_steps`."""
    scale_value: torch.Tensor | float = field(default=1.0, repr=False)
    """Loss scale the step's gradients were computed with."""
    next_scale_value: torch.Tensor | float = field(default=1.0, repr=False)
    """Loss scale after this step's update."""

    @property
    def skipped(self) -> bool:
        """True when the gradients overflowed and the optimizer step was skipped."""
        return self.found_tensor is not None and bool(self.found_tensor)

    def __bool__(self) -> bool:
        """Whether the optimizer stepped (``if mp.step(opt):``; a host read on a GPU)."""
        return not self.skipped

    @property
    def skipped_tensor(self) -> torch.Tensor | None:
        """Steps skipped so far on this optimizer, this one included, on the device (None: not checked)."""
        return None if self.skipped_count is None else skipped_tensor(self.skipped_count)

    @property
    def skipped_steps(self) -> int:
        """Steps skipped so far on this optimizer, this one included."""
        return 0 if self.skipped_count is None else int(skipped_tensor(self.skipped_count))

    @property
    def scale(self) -> float:
        """Loss scale the step's gradients were computed with (1.0 without scaling)."""
        return float(self.scale_value)

    @property
    def next_scale(self) -> float:
        """Loss scale after this step's update (what the next backward() scales by)."""
        return float(self.next_scale_value)

    @property
    def loss_tensor(self) -> torch.Tensor | None:
        """Sum of the losses passed to backward() since the previous step (detached; on the device)."""
        return None if self.summed_loss is None else self.summed_loss.detach()

    @property
    def loss(self) -> float | None:
        return None if self.summed_loss is None else float(self.summed_loss.detach())

    @property
    def grad_norm(self) -> float | None:
        return None if self.grad_norm_tensor is None else float(self.grad_norm_tensor)

    def scalars(self) -> dict[str, float]:
        """What a logger plots for this step, by tag: ``loss_scale`` (the scale after the step's update),
        ``found_inf`` (1 when the gradients held inf/NaN and the step was skipped), ``skipped_steps`` (so far),
        and ``loss`` / ``grad_norm`` when known (reading them is a host sync on a GPU)."""
        out = {"loss_scale": self.next_scale, "found_inf": float(self.skipped), "skipped_steps": float(self.skipped_steps)}
        if self.summed_loss is not None:
            out["loss"] = float(self.summed_loss.detach())
        if self.grad_norm_tensor is not None:
            out["grad_norm"] = float(self.grad_norm_tensor)
        return out
