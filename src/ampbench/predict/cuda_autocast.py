"""CUDA autocast's casting rules, applied to a step traced on the meta device (no CUDA needed).

Why our own: ``torch.autocast`` applies the op lists of the device the tensors are on, and a prediction must apply
CUDA's while tracing elsewhere; the CPU's lists differ (e.g. ``bmm`` and ``baddbmm`` run in fp32 under CPU autocast
with fp16, in half under CUDA's), and meta tensors have no autocast at all. Like autocast (a dispatch key above
autograd), this is a ``TorchFunctionMode``: the casts it inserts are recorded by autograd, so the backward runs at the
dtypes CUDA's would (half gradients for half matmuls, the cast's backward back to fp32 for the weights).

The lists are CUDA's (``aten/src/ATen/autocast_mode.cpp``, the "CUDA Ops that can autocast" tables of the AMP docs):
ops that run in the half dtype, ops that run in fp32, and ops that run in the widest of their inputs' dtypes.
Everything else runs in its inputs' dtype. Casts of leaf tensors that require a gradient (the weights) are cached for
the forward, as autocast caches them: a weight used twice is cast once.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_map

HALF = frozenset({
    "__matmul__", "__rmatmul__", "addbmm", "addmm", "addmv", "addr", "baddbmm", "bmm", "chain_matmul", "multi_dot",
    "linalg_multi_dot", "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "convolution", "_convolution", "linear", "matmul", "mm", "mv", "einsum", "prelu",
    "linalg_vecdot", "scaled_dot_product_attention", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
    # cuDNN's RNNs run in the half dtype under autocast (listed as ``_cudnn_rnn`` for the fused layers)
    "lstm", "gru", "rnn_tanh", "rnn_relu",
})
FP32 = frozenset({
    "__pow__", "__rdiv__", "__rpow__", "__rtruediv__", "acos", "asin", "binary_cross_entropy_with_logits", "cosh",
    "cosine_embedding_loss", "cdist", "cosine_similarity", "cross_entropy", "cumprod", "cumsum", "dist", "erfinv",
    "exp", "expm1", "group_norm", "hinge_embedding_loss", "kl_div", "l1_loss", "layer_norm", "log", "log_softmax",
    "log10", "log1p", "log2", "margin_ranking_loss", "mse_loss", "multilabel_margin_loss", "multi_margin_loss",
    "nll_loss", "norm", "normalize", "pdist", "poisson_nll_loss", "pow", "prod", "reciprocal", "rsqrt", "sinh",
    "smooth_l1_loss", "soft_margin_loss", "softmax", "softmin", "softplus", "sum", "renorm", "tan",
    "triplet_margin_loss", "rms_norm",
})
PROMOTE = frozenset({"addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sample", "index_put",
                     "scatter_add", "tensordot", "cat", "stack"})


def _name(func: Any) -> str:
    return getattr(func, "__name__", "") or ""


class CudaAutocast(TorchFunctionMode):
    """``with CudaAutocast(torch.float16): loss = model(x)`` -- the forward runs at the dtypes CUDA autocast gives."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype = dtype
        self._cache: dict[int, torch.Tensor] = {}

    def _cast(self, t: Any, dtype: torch.dtype) -> Any:
        if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.dtype == dtype or t.dtype == torch.float64:
            return t
        cacheable = t.is_leaf and t.requires_grad
        if cacheable and id(t) in self._cache:
            return self._cache[id(t)]
        out = t.to(dtype)
        if cacheable:
            self._cache[id(t)] = out
        return out

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = _name(func)
        if name in HALF:
            target: torch.dtype | None = self.dtype
        elif name in FP32:
            target = torch.float32
        elif name in PROMOTE:
            floats = [t.dtype for t in _tensors((args, kwargs)) if t.is_floating_point()]
            target = torch.float32 if torch.float32 in floats else (floats[0] if floats else None)
        else:
            target = None
        if target is not None:
            args, kwargs = tree_map(lambda t: self._cast(t, target), (args, kwargs))
        return func(*args, **kwargs)


def _tensors(tree: Any) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    tree_map(lambda t: out.append(t) if isinstance(t, torch.Tensor) else None, tree)
    return out
