"""A kernel that computes wrong, routed around: a strided convolution over a 1x1 input, as its kernel's center tap.

On an AMX Xeon (torch 2.13's oneDNN), the bf16 weight gradient of a 3x3 stride-2 convolution over a 1x1 input --
ResNeXt tiny's last block -- came from ``brgconv_bwd_w:avx10_1_512_amx`` wrong: 100 % of calls with one group, 43 %
with four (inf in 1 % of them; ``benchmarks/results/cpu/repro_bf16_grouped_conv_nan_amx.json``), where the same call
with AMX disabled (``ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16``), on an AVX512-BF16 EPYC or in fp32 was right. The engine
skipped the steps whose gradient was inf and trained on the wrong ones.

Over a 1x1 input a convolution with one output position (``(1 + 2p - k) // s + 1 == 1``, zero padding, no dilation)
multiplies the input by its kernel's center tap ``W[:, :, p, p]`` alone: every other tap sees padding. So that call is
a 1x1 convolution with that slice -- the same math and the same precision, the gradient reaching only the center tap,
as it does in fp32 -- which oneDNN computes right. Whether it is needed is decided by what the machine does (as
:mod:`ampbench.precision.fallbacks` decides for the LSTM): the first time a half mode is set up on a CPU for a model
with a strided convolution, such a convolution's weight gradient is computed in the half dtype and in fp32
(:func:`strided_weight_grad_works`); only where they disagree is the rewrite installed, on the strided convolutions,
for the calls whose input is 1x1.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

_INSTALLED_ATTR = "_ampbench_strided_conv_center_tap"
TOLERANCE = 0.05
"""A half gradient further than this share of fp32's largest |g| from fp32's is wrong, not rounded (rounding to bf16
moves a value by 0.4 %; a reduction accumulated in fp32 stays near that). Also ``diagnose``'s rule
(:mod:`ampbench.diagnose.kernel_check`)."""


def off_from(got: torch.Tensor, reference: torch.Tensor) -> bool:
    """Whether a finite half gradient ``got`` is further from fp32's ``reference`` than :data:`TOLERANCE` allows."""
    return float((got.float() - reference).abs().max()) > TOLERANCE * float(reference.abs().max()) + 1e-6


def strided(m: nn.Module) -> bool:
    """A convolution this fallback applies to: an nn.Conv2d with a stride and a window wider than 1."""
    return type(m) is nn.Conv2d and m.stride != (1, 1) and m.kernel_size != (1, 1)


@functools.cache
def strided_weight_grad_works(dtype: torch.dtype) -> bool:
    """Whether this CPU computes the ``dtype`` weight gradient of a 3x3 stride-2 convolution over a 1x1 input right
    (against fp32's, a few calls with one group and with four; tried once per process: the answer depends on the CPU
    and ONEDNN_MAX_CPU_ISA)."""
    g = torch.Generator().manual_seed(0)
    for groups in (1, 4):
        conv = nn.Conv2d(32, 32, 3, stride=2, padding=1, groups=groups, bias=False)
        x = torch.randn(8, 32, 1, 1, generator=g)
        gy = torch.randn(8, 32, 1, 1, generator=g)
        (ref,) = torch.autograd.grad(conv(x), conv.weight, gy)
        half = conv.to(dtype)
        for _ in range(4):
            (got,) = torch.autograd.grad(half(x.to(dtype)), half.weight, gy.to(dtype))
            if not bool(torch.isfinite(got).all()) or off_from(got, ref):
                return False
    return True


def center_tap_applies(module: nn.Conv2d, x: torch.Tensor) -> bool:
    """Whether ``module`` over ``x`` has one output position fed by its center tap alone (a 1x1 input, zero padding
    inside the kernel, no dilation, a stride of more than 1)."""
    if x.dim() not in (3, 4) or tuple(x.shape[-2:]) != (1, 1) or module.padding_mode != "zeros":
        return False
    if isinstance(module.padding, str) or module.dilation != (1, 1) or module.stride == (1, 1):
        return False
    for k, p, s in zip(module.kernel_size, module.padding, module.stride):
        if not 0 <= p < k or (1 + 2 * p - k) // s + 1 != 1:
            return False
    return True


def _forward(module: nn.Conv2d, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def forward(x: torch.Tensor) -> Any:
        if x.device.type != "cpu" or not center_tap_applies(module, x):
            return original(x)
        ph, pw = module.padding  # type: ignore[misc]
        tap = module.weight[:, :, ph:ph + 1, pw:pw + 1]
        return F.conv2d(x, tap, module.bias, 1, 0, 1, module.groups)

    return forward


def install(models: list[nn.Module]) -> list[str]:
    """Give every strided nn.Conv2d with a kernel wider than 1 in ``models`` the center-tap call (in place); the
    names changed. It applies to CPU calls whose input is 1x1 only: any other call is the module's own."""
    changed = []
    for i, model in enumerate(models):
        for name, m in model.named_modules():
            if strided(m) and not getattr(m, _INSTALLED_ATTR, False):
                m.forward = _forward(m, m.forward)  # type: ignore[method-assign]
                setattr(m, _INSTALLED_ATTR, True)
                changed.append((f"model{i}." if len(models) > 1 else "") + (name or "(root)"))
    return changed


def cpu_strided_conv_fallback(models: list[nn.Module], dtype: torch.dtype) -> list[str]:
    """The center-tap rewrite where this CPU's ``dtype`` kernel needs it, installed; one note (empty where not)."""
    if not any(strided(m) for model in models for m in model.modules()) or strided_weight_grad_works(dtype):
        return []
    names = install(models)
    if not names:
        return []
    half = str(dtype).removeprefix("torch.")
    shown = ", ".join(names[:4]) + (f" +{len(names) - 4} more" if len(names) > 4 else "")
    return [f"{shown}: where its input is 1x1, a strided convolution runs as its kernel's center tap (a 1x1 "
            f"convolution, the same {half} math): this CPU's {half} weight gradient for it came out wrong against "
            "fp32's in a check at setup"]
