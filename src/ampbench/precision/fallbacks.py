"""Kernel fallbacks: where a device has no kernel for an op in the mode's precision, run the same math
in that precision another way -- never silently in another precision.

The one known case: ``nn.LSTM`` under ``torch.autocast("cpu", dtype=torch.float16)``. Autocast sends
it to oneDNN, which has no fp16 LSTM and fails with "could not create a primitive descriptor for the
LSTM forward propagation primitive"; an LSTM whose weights and inputs are already fp16 runs fine on
torch's native CPU kernel. So, inside fp16 autocast on CPU, the fallback runs the module with autocast
off on fp16 casts of its inputs and weights -- what autocast itself would have done, on the kernel that
exists. The casts are differentiable, so gradients reach the fp32 weights as under autocast. GRU and
RNN are not affected (checked on torch 2.13). The recipe's math is unchanged: fp16 matmuls.

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

_INSTALLED_ATTR = "_ampbench_fp16_cpu_lstm"


def _fp16_autocast_on_cpu() -> bool:
    return torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.float16


def _on_cpu(x: Any) -> bool:
    if isinstance(x, torch.Tensor):
        return x.device.type == "cpu"
    data = getattr(x, "data", None)  # PackedSequence
    return isinstance(data, torch.Tensor) and data.device.type == "cpu"


def _fp16_lstm_forward(module: nn.LSTM, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def forward(input: Any, hx: Any = None) -> Any:
        if not (_fp16_autocast_on_cpu() and _on_cpu(input)):
            return original(input, hx)
        saved = module._flat_weights
        module._flat_weights = [w.to(torch.float16) if w is not None and w.is_floating_point() else w for w in saved]
        try:
            with torch.autocast("cpu", enabled=False):
                if isinstance(input, nn.utils.rnn.PackedSequence):
                    input = input._replace(data=input.data.to(torch.float16))
                else:
                    input = cast_floating(input, torch.float16)
                return original(input, cast_floating(hx, torch.float16))
        finally:
            module._flat_weights = saved

    return forward


def install_cpu_fp16_lstm(models: list[nn.Module]) -> list[str]:
    """Give every nn.LSTM in ``models`` the fp16-on-CPU fallback (in place); the names of those changed.

    The wrapper is a no-op outside fp16 autocast on CPU, so a model moved to a GPU later is unaffected.
    """
    changed = []
    for i, model in enumerate(models):
        for name, m in model.named_modules():
            if isinstance(m, nn.LSTM) and not getattr(m, _INSTALLED_ATTR, False):
                m.forward = _fp16_lstm_forward(m, m.forward)  # type: ignore[method-assign]
                setattr(m, _INSTALLED_ATTR, True)
                changed.append((f"model{i}." if len(models) > 1 else "") + (name or "(root)"))
    return changed
