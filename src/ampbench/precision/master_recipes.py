"""Half model with fp32 master weights (apex O2): the native equivalent PyTorch does not ship.

The model is cast to half except normalisation layers (and any ``keep_fp32`` modules); inputs are
cast at the model's entry and outputs to fp32 for the loss. The optimizer holds fp32 master copies
(see :mod:`ampbench.precision.master_weights`), so updates smaller than half's resolution are kept.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ampbench.precision.base import Precision
from ampbench.precision.convert import cast_model
from ampbench.precision.registry import register


class _Master(Precision):
    master_weights = True
    keeps_norm_fp32 = True

    casts_model = True

    def convert_module(self, module: nn.Module, keep_fp32: Sequence[str | type[nn.Module]]) -> nn.Module:
        cast_model(module, self.param_dtype, keep_fp32, keep_norm=self.keeps_norm_fp32)
        return module


@register
class MasterFP16(_Master):
    name = "master-fp16"
    summary = "fp16 model (norm layers fp32), fp32 master weights in the optimizer, dynamic loss scaling"
    param_dtype = compute_dtype = torch.float16
    default_loss_scale = "dynamic"


@register
class MasterBF16(_Master):
    name = "master-bf16"
    summary = "bf16 model (norm layers fp32), fp32 master weights in the optimizer, no loss scaling"
    param_dtype = compute_dtype = torch.bfloat16
