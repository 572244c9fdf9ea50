"""AMP: fp32 weights, autocast runs matmul/conv in half precision and keeps precision-sensitive ops fp32."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from ampbench.precision.base import Precision
from ampbench.precision.fallbacks import cpu_autocast_fallbacks
from ampbench.precision.registry import register
from ampbench.precision.tf32_flags import tf32_scope


class _Both:
    """Two context managers entered in order and left in reverse (contextlib.ExitStack's work at a fraction of its
    cost: a step enters this once)."""

    __slots__ = ("first", "second")

    def __init__(self, first: Any, second: Any) -> None:
        self.first, self.second = first, second

    def __enter__(self) -> None:
        self.first.__enter__()
        try:
            self.second.__enter__()
        except BaseException:
            self.first.__exit__(None, None, None)
            raise

    def __exit__(self, *exc: Any) -> None:
        try:
            self.second.__exit__(*exc)
        finally:
            self.first.__exit__(*exc)


class AutocastRecipe(Precision):
    autocasts = True

    def forward_context(self, device_type: str) -> contextlib.AbstractContextManager[None]:
        autocast = torch.autocast(device_type=device_type, dtype=self.compute_dtype)
        if device_type != "cuda":
            return autocast
        return _Both(tf32_scope(False), autocast)  # (ops autocast leaves in fp32 run as true fp32 on CUDA, not TF32)

    def kernel_fallbacks(self, models: Sequence[nn.Module], device: torch.device) -> list[str]:
        if device.type != "cpu":
            return []

        return cpu_autocast_fallbacks(list(models), self.compute_dtype) + super().kernel_fallbacks(models, device)


@register
class AmpFP16(AutocastRecipe):
    name = "amp-fp16"
    summary = "autocast fp16, fp32 weights, dynamic loss scaling"
    compute_dtype = torch.float16
    default_loss_scale = "dynamic"


@register
class AmpBF16(AutocastRecipe):
    name = "amp-bf16"
    summary = "autocast bf16, fp32 weights, no loss scaling (bf16 has fp32's exponent range)"
    compute_dtype = torch.bfloat16
