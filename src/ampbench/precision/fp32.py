"""fp32 and tf32: fp32 storage and math; they differ only in whether TF32 Tensor Core math is allowed."""

from __future__ import annotations

import torch

from ampbench.precision.base import Precision
from ampbench.precision.registry import register


@register
class FP32(Precision):
    name = "fp32"
    summary = "true IEEE fp32: TF32 disabled for matmul and cuDNN conv (the honest baseline)"
    param_dtype = compute_dtype = torch.float32
    tf32 = False


@register
class TF32(Precision):
    name = "tf32"
    summary = "fp32 storage, TF32 Tensor Core math for matmul/conv (NVIDIA GPUs with CC >= 8.0)"
    param_dtype = compute_dtype = torch.float32
    tf32 = True
