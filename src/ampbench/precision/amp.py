"""AMP: fp32 weights, autocast runs matmul/conv in half precision and keeps precision-sensitive ops fp32."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch
from torch import nn

from ampbench.precision.base import Precision
from ampbench.precision.fallbacks import cpu_autocast_fallbacks
from ampbench.precision.registry import register
from ampbench.precision.state import tf32_scope


class _Autocast(Precision):
    autocasts = True

    @contextlib.contextmanager
    def forward_context(self, device_type: str) -> Iterator[None]:
        # Ops autocast leaves in fp32 (reductions, losses, norms) run as true fp32, not TF32.
        with tf32_scope(False), torch.autocast(device_type=device_type, dtype=self.compute_dtype):
            yield

    def kernel_fallbacks(self, models: Sequence[nn.Module], device: torch.device) -> list[str]:
        if device.type != "cpu":
            return []

        return cpu_autocast_fallbacks(list(models), self.compute_dtype)


@register
class AmpFP16(_Autocast):
    name = "amp-fp16"
    preference = 1
    aliases = ("O1", "16-mixed", "16", "amp", "mixed_float16")
    summary = "autocast fp16, fp32 weights, dynamic loss scaling"
    compute_dtype = torch.float16
    default_loss_scale = "dynamic"


@register
class AmpBF16(_Autocast):
    name = "amp-bf16"
    preference = 0
    aliases = ("bf16-mixed", "bf16", "mixed_bfloat16")
    summary = "autocast bf16, fp32 weights, no loss scaling (bf16 has fp32's exponent range)"
    compute_dtype = torch.bfloat16
