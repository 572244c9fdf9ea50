"""Kernel fallbacks: where a device has no kernel for an op in the mode's precision, run the same math
in that precision another way -- never silently in another precision.

Whether a kernel exists is decided by what the machine does, not by a dtype rule: the first time a mode
is set up on a CPU, a tiny module of each kind below runs forward and backward under that mode's autocast
(:func:`autocast_kernel_works`, remembered for the process). Only where that fails is the fallback
installed. Known case: ``nn.LSTM`` under ``torch.autocast("cpu", dtype)`` goes to oneDNN, which has no
fp16 LSTM anywhere and no bf16 LSTM on CPUs without AVX-512 (AVX2-only AMD EPYC, or any CPU with
``ONEDNN_MAX_CPU_ISA=AVX2``), failing with "could not create a primitive descriptor for the LSTM forward
propagation primitive"; an LSTM whose weights and inputs are already in that dtype runs on torch's
native CPU kernel. So the fallback runs the module with autocast off on half casts of its inputs and
weights -- what autocast itself would have done, on the kernel that exists. The casts are
differentiable, so gradients reach the fp32 weights as under autocast. The recipe's math is unchanged:
half-precision matmuls. GRU and RNN run under CPU autocast (checked: AVX2 and AVX-512 CPUs, torch 2.13).

nn.LSTM reads its weights from the private ``_flat_weights`` list (torch's own functional_call support
goes through the same list); the fallback swaps that list for the duration of one call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ampbench.precision.convert import cast_floating

_INSTALLED_ATTR = "_ampbench_cpu_lstm_fallback"
DTYPE_NAMES = {torch.float16: "fp16", torch.bfloat16: "bf16"}


@functools.cache
def autocast_kernel_works(kind: type[nn.Module], dtype: torch.dtype) -> bool:
    """Whether a tiny ``kind`` runs forward and backward under CPU autocast in ``dtype`` on this machine
    (tried once per process; the answer depends on the CPU and on ONEDNN_MAX_CPU_ISA, nothing else)."""
    module = kind(4, 8, batch_first=True)
    try:
        with torch.autocast("cpu", dtype=dtype):
            out, _ = module(torch.randn(2, 3, 4))
        out.float().sum().backward()
    except RuntimeError:
        return False
    return True


def _half_autocast_on_cpu(dtype: torch.dtype) -> bool:
    return torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == dtype


def _on_cpu(x: Any) -> bool:
    if isinstance(x, torch.Tensor):
        return x.device.type == "cpu"
    data = getattr(x, "data", None)  # PackedSequence
    return isinstance(data, torch.Tensor) and data.device.type == "cpu"


def _lstm_forward(module: nn.LSTM, original: Callable[..., Any], dtype: torch.dtype) -> Callable[..., Any]:
    @functools.wraps(original)
    def forward(input: Any, hx: Any = None) -> Any:
        if not (_half_autocast_on_cpu(dtype) and _on_cpu(input)):
            return original(input, hx)
        saved = module._flat_weights
        module._flat_weights = [w.to(dtype) if w is not None and w.is_floating_point() else w for w in saved]
        try:
            with torch.autocast("cpu", enabled=False):
                if isinstance(input, nn.utils.rnn.PackedSequence):
                    input = input._replace(data=input.data.to(dtype))
                else:
                    input = cast_floating(input, dtype)
                return original(input, cast_floating(hx, dtype))
        finally:
            module._flat_weights = saved

    return forward


def install_cpu_lstm(models: list[nn.Module], dtype: torch.dtype) -> list[str]:
    """Give every nn.LSTM in ``models`` the half-on-CPU fallback for ``dtype`` (in place); the names changed.

    The wrapper is a no-op outside ``dtype`` autocast on CPU, so a model moved to a GPU later is unaffected.
    """
    changed = []
    for i, model in enumerate(models):
        for name, m in model.named_modules():
            if isinstance(m, nn.LSTM) and not getattr(m, _INSTALLED_ATTR, False):
                m.forward = _lstm_forward(m, m.forward, dtype)  # type: ignore[method-assign]
                setattr(m, _INSTALLED_ATTR, True)
                changed.append((f"model{i}." if len(models) > 1 else "") + (name or "(root)"))
    return changed


def cpu_autocast_fallbacks(models: list[nn.Module], dtype: torch.dtype) -> list[str]:
    """The fallbacks CPU autocast in ``dtype`` needs on this machine, installed; one note per module changed."""
    if not any(isinstance(m, nn.LSTM) for model in models for m in model.modules()):
        return []  # (no probe for models without an LSTM)
    if autocast_kernel_works(nn.LSTM, dtype):
        return []
    half = DTYPE_NAMES.get(dtype, str(dtype))
    return [f"{name}: nn.LSTM runs torch's native {half} kernel (oneDNN has no {half} LSTM under CPU autocast on "
            "this CPU)" for name in install_cpu_lstm(models, dtype)]
