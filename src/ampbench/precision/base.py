"""The small base every precision recipe builds on (cf. Lightning's fabric/plugins/precision).

A recipe says *what* a precision mode is: the dtype model parameters are stored in, the dtype the
heavy math runs in, whether TF32 is allowed, whether autocast is used, whether the optimizer keeps
fp32 master weights and which loss scaling it uses by default. The engine
(:class:`ampbench.precision.engine.MixedPrecision`) owns the *how* shared by all recipes: loss
scaling, master weights, the call-order state machine and checkpoints. Each recipe overrides only
the hooks it changes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import ClassVar

import torch
from torch import nn

from ampbench.precision.strided_conv import cpu_strided_conv_fallback
from ampbench.precision.tf32_flags import tf32_scope

_NOTHING = contextlib.nullcontext()


class Precision:
    """One precision mode = one recipe. Subclasses set the class attributes below."""

    name: ClassVar[str]
    """Canonical name (``amp-fp16``): its row in :mod:`ampbench.modes`' table holds its aliases and how the advisor
    ranks it."""
    summary: ClassVar[str]
    """One line for ``ampbench list``."""
    param_dtype: ClassVar[torch.dtype] = torch.float32
    """dtype the model's parameters are stored in after ``convert_module``."""
    compute_dtype: ClassVar[torch.dtype] = torch.float32
    """dtype of the heavy math (matmul/conv)."""
    tf32: ClassVar[bool] = False
    """Whether fp32 matmul/conv may use TF32 Tensor Core math inside the scope."""
    master_weights: ClassVar[bool] = False
    """Whether the optimizer holds fp32 master copies of half parameters."""
    keeps_norm_fp32: ClassVar[bool] = False
    """Whether normalisation layers stay fp32 when the model is cast to half."""
    casts_model: ClassVar[bool] = False
    """Whether ``convert_module`` casts the model to half (then ``keep_fp32`` applies)."""
    default_loss_scale: ClassVar[str] = "none"
    """Loss scaling used when the caller does not choose one: ``none``, ``dynamic`` ..."""
    math_mode: ClassVar[str | None] = None
    """The math the heavy ops run in, when not ``compute_dtype``'s (fp8 modes: "fp8", for the peak table)."""
    in_cpu_defaults: ClassVar[bool] = True
    """Whether ``ampbench run`` on CPU includes this mode when no --precisions are given (fp8: emulated there)."""
    autocasts: ClassVar[bool] = False
    """Whether the half math comes from autocast (``forward_context``): a forward outside ``mp.autocast()`` then
    runs in fp32 (the engine warns)."""

    # -- hooks -------------------------------------------------------------------------------
    def convert_module(self, module: nn.Module, keep_fp32: Sequence[str | type[nn.Module]]) -> nn.Module:
        """Cast the model for this mode (in place; parameter objects keep their identity)."""
        return module

    def forward_context(self, device_type: str) -> contextlib.AbstractContextManager[None]:
        """Context for the forward pass: math-mode flags (and autocast, for AMP recipes). The TF32 flags are CUDA's
        (cuBLAS, cuDNN): elsewhere there is nothing to set."""
        return tf32_scope(self.tf32) if device_type == "cuda" else _NOTHING

    def backward_context(self, device_type: str = "cuda") -> contextlib.AbstractContextManager[None]:
        """Context for the backward pass: the same math-mode flags as the forward pass."""
        return tf32_scope(self.tf32) if device_type == "cuda" else _NOTHING

    def kernel_fallbacks(self, models: Sequence[nn.Module], device: torch.device) -> list[str]:
        """Install fallbacks for ops ``device`` has no kernel for in this mode (see
        :mod:`ampbench.precision.fallbacks`), or whose kernel computes wrong here (a half mode on a CPU:
        :mod:`ampbench.precision.strided_conv`); returns what was changed, for the record."""
        if device.type != "cpu" or not self.is_half:
            return []
        return cpu_strided_conv_fallback(list(models), self.compute_dtype)

    @property
    def is_fp8(self) -> bool:
        """Whether the heavy math runs in fp8 (these modes take :class:`~ampbench.precision.fp8.Fp8Options`)."""
        return self.math_mode == "fp8"

    @property
    def is_half(self) -> bool:
        return self.compute_dtype in (torch.float16, torch.bfloat16)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
