"""Pure half: everything in half precision, no fp32 master copy (apex O3, Lightning "16-true").

May not converge — that is the point of measuring it. Outputs are still cast to fp32 for the loss
(as Lightning's HalfPrecision does). Loss scaling is off by default, as in apex O3; with a scaler
the fp16 gradients are unscaled in place.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ampbench.precision.base import Precision
from ampbench.precision.convert import cast_model
from ampbench.precision.registry import register


class _Pure(Precision):
    casts_model = True

    def convert_module(self, module: nn.Module, keep_fp32: Sequence[str | type[nn.Module]]) -> nn.Module:
        cast_model(module, self.param_dtype, keep_fp32, keep_norm=False)
        return module


@register
class PureFP16(_Pure):
    name = "pure-fp16"
    summary = "everything fp16, no master copy, no loss scaling by default (may not converge)"
    param_dtype = compute_dtype = torch.float16


@register
class PureBF16(_Pure):
    name = "pure-bf16"
    summary = "everything bf16, no master copy (updates below bf16's resolution are lost)"
    param_dtype = compute_dtype = torch.bfloat16
