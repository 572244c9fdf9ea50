"""Model FLOPs of the ops ``torch.utils.flop_counter`` miscounts or misses, as a ``custom_mapping``.

Why our own formulas (checked against torch 2.13's ``torch/utils/flop_counter.py``):

- **Grouped convolutions' backward.** torch's ``conv_backward_flop`` counts the weight gradient as a
  convolution of the transposed input with the transposed output gradient and ignores ``groups``: a
  depthwise layer's weight gradient is counted ``groups`` times (a 3x3 depthwise layer with 32 channels:
  backward 32x its forward instead of 2x). Each backward product of a convolution has the forward's MACs.
- **Attention on CPU.** ``scaled_dot_product_attention`` runs ``_scaled_dot_product_flash_attention_for_cpu``
  there, which torch has no formula for: attention counted 0 FLOPs.
- **Attention's backward** is counted by torch with the flash kernels' recomputation of the scores (5
  matmuls). Model FLOPs (PaLM's MFU definition: no rematerialisation) are the 4 gradient matmuls; the CPU
  math path (bmm) is counted that way too, so every device reports the same figure.
- **LSTM/GRU/RNN kernels** (oneDNN's ``mkldnn_rnn_layer`` on CPU, cuDNN's ``_cudnn_rnn`` on CUDA) are not
  in torch's table: counted 0. The decomposed path (``_thnn_fused_*_cell``, plain mm) is counted already
  and agrees with the formulas here.

The convention everywhere: 2 x MACs of every matmul-like product (elementwise work is not counted, as in
MFU); backward = the weight gradient + the input gradient, the latter only where the input needs one.
Attention counts the full score matrix (causal masks not halved, as PaLM and nanoGPT count it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod
from typing import Any

import torch

aten = torch.ops.aten


def _raw(fn: Callable[..., int]) -> Callable[..., int]:
    fn._get_raw = True  # type: ignore[attr-defined]  # FlopCounterMode passes the tensors, not their shapes
    return fn


def conv_macs(x_shape: Sequence[int], w_shape: Sequence[int], out_shape: Sequence[int], transposed: bool) -> int:
    """Multiply-adds of one convolution: every output point of a dense conv (every input point of a
    transposed one) meets ``c_in / groups`` x kernel weights per output channel. The weight's shape holds
    the per-group factor already: (c_out, c_in/g, *k) for a conv, (c_in, c_out/g, *k) for a transposed conv."""
    batch = x_shape[0]
    a, b, *kernel = w_shape
    points = prod((x_shape if transposed else out_shape)[2:])
    return batch * points * a * b * prod(kernel)


def conv_backward_flops(grad_out_shape: Any, x_shape: Any, w_shape: Any, _bias: Any, _stride: Any, _padding: Any,
                        _dilation: Any, transposed: bool, _output_padding: Any, _groups: Any, output_mask: Any,
                        out_shape: Any = None, **kwargs: Any) -> int:
    """Input gradient and weight gradient each have the forward's MACs (groups counted once)."""
    fwd_out = grad_out_shape  # the forward's output has the output gradient's shape
    macs = conv_macs(x_shape, w_shape, fwd_out, transposed)
    return 2 * macs * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


def _sdpa_macs(q: Sequence[int], k: Sequence[int], v: Sequence[int]) -> tuple[int, int]:
    """(MACs of Q·Kᵀ, MACs of P·V) for (batch..., heads, seq, dim) tensors; grouped-query heads broadcast."""
    *lead, s_q, d_q = q
    s_k, d_v = k[-2], v[-1]
    rows = prod(lead)  # batch x query heads
    return rows * s_q * s_k * d_q, rows * s_q * s_k * d_v


def sdpa_forward_flops(query: Any, key: Any, value: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    qk, pv = _sdpa_macs(query, key, value)
    return 2 * (qk + pv)


def sdpa_backward_flops(grad_out: Any, query: Any, key: Any, value: Any, *args: Any, out_shape: Any = None,
                        **kwargs: Any) -> int:
    """dP = dO·Vᵀ and dV = Pᵀ·dO (P·V's MACs each), dQ = dS·K and dK = dSᵀ·Q (Q·Kᵀ's MACs each); the
    flash kernels' recomputation of the scores is hardware work, not model FLOPs."""
    qk, pv = _sdpa_macs(query, key, value)
    return 2 * 2 * (qk + pv)


def rnn_layer_flops(w_ih: torch.Tensor, w_hh: torch.Tensor, w_hr: torch.Tensor | None, tokens: int, batch: int,
                     backward: bool, input_grad: bool, hx_grad: bool) -> int:
    """One layer and direction over ``tokens`` = steps x batch: the input matmul (gates x input), the
    recurrent matmul (gates x hidden) and LSTM's projection. Backward: the weight gradients (the forward's
    MACs), the input gradient if the layer's input needs one, the recurrent gradient for every step but
    the first unless the initial state needs one."""
    gates_in = w_ih.shape[0] * w_ih.shape[1]
    gates_h = w_hh.shape[0] * w_hh.shape[1]
    proj = 0 if w_hr is None else w_hr.shape[0] * w_hr.shape[1]
    fwd = tokens * (gates_in + gates_h + proj)
    if not backward:
        return 2 * fwd
    grad_in = tokens * gates_in if input_grad else 0
    grad_h = (tokens if hx_grad else tokens - batch) * gates_h
    return 2 * (fwd + grad_in + grad_h + tokens * proj)


def _tokens(x: torch.Tensor) -> int:
    return x.numel() // x.shape[-1]


@_raw
def mkldnn_rnn_layer_flops(input: torch.Tensor, weight0: torch.Tensor, weight1: torch.Tensor, *args: Any,
                           out_val: Any = None, **kwargs: Any) -> int:
    """oneDNN's LSTM/GRU/RNN, one layer and direction per call; input (steps, batch, features)."""
    return rnn_layer_flops(weight0, weight1, None, _tokens(input), input.shape[1], False, False, False)


@_raw
def mkldnn_rnn_layer_backward_flops(input: torch.Tensor, weight1: torch.Tensor, weight2: torch.Tensor,
                                    weight3: torch.Tensor, weight4: torch.Tensor, hx_: torch.Tensor, *args: Any,
                                    out_val: Any = None, **kwargs: Any) -> int:
    # The kernel computes every gradient; the model needs the input's and the initial state's only where they
    # require one (visible here: dispatch sees the tensors autograd saved, their requires_grad intact).
    return rnn_layer_flops(weight1, weight2, None, _tokens(input), input.shape[1], True, input.requires_grad,
                            hx_.requires_grad)


def _cudnn_layers(weight: Sequence[torch.Tensor], stride: int) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]]:
    """(w_ih, w_hh, w_hr or None) per layer and direction from cuDNN's flat weight list."""
    out = []
    for i in range(0, len(weight), stride):
        mats = [w for w in weight[i:i + stride] if w.dim() == 2]
        out.append((mats[0], mats[1], mats[2] if len(mats) > 2 else None))
    return out


def _cudnn_batch(input: torch.Tensor, batch_first: bool, batch_sizes: Sequence[int]) -> int:
    if batch_sizes:
        return int(batch_sizes[0])
    return input.shape[0] if batch_first else input.shape[1]


@_raw
def cudnn_rnn_flops(input: torch.Tensor, weight: Sequence[torch.Tensor], weight_stride0: int, weight_buf: Any,
                    hx: torch.Tensor, cx: Any, mode: int, hidden_size: int, proj_size: int, num_layers: int,
                    batch_first: bool, dropout: float, train: bool, bidirectional: bool, batch_sizes: Sequence[int],
                    *args: Any, out_val: Any = None, **kwargs: Any) -> int:
    tokens, batch = _tokens(input), _cudnn_batch(input, batch_first, batch_sizes)
    return sum(rnn_layer_flops(ih, hh, hr, tokens, batch, False, False, False)
               for ih, hh, hr in _cudnn_layers(weight, weight_stride0))


@_raw
def cudnn_rnn_backward_flops(input: torch.Tensor, weight: Sequence[torch.Tensor], weight_stride0: int, weight_buf: Any,
                             hx: torch.Tensor, cx: Any, output: Any, grad_output: Any, grad_hy: Any, grad_cy: Any,
                             mode: int, hidden_size: int, proj_size: int, num_layers: int, batch_first: bool,
                             dropout: float, train: bool, bidirectional: bool, batch_sizes: Sequence[int],
                             dropout_state: Any, reserve: Any, output_mask: Sequence[bool], *args: Any,
                             out_val: Any = None, **kwargs: Any) -> int:
    """output_mask = (input, hx, cx, weights) gradients wanted; layers above the first always need their input's."""
    tokens, batch = _tokens(input), _cudnn_batch(input, batch_first, batch_sizes)
    directions = 2 if bidirectional else 1
    total = 0
    for i, (ih, hh, hr) in enumerate(_cudnn_layers(weight, weight_stride0)):
        first = i < directions
        total += rnn_layer_flops(ih, hh, hr, tokens, batch, True, bool(output_mask[0]) or not first,
                                  bool(output_mask[1]))
    return total


def custom_mapping() -> dict[Any, Callable[..., int]]:
    """Our formulas by op: overrides of torch's and additions to it (FlopCounterMode's ``custom_mapping``)."""
    table: dict[Any, Callable[..., int]] = {
        aten.convolution_backward: conv_backward_flops,
        aten._scaled_dot_product_flash_attention_for_cpu: sdpa_forward_flops,
        aten._scaled_dot_product_flash_attention_for_cpu_backward: sdpa_backward_flops,
        aten._scaled_dot_product_efficient_attention_backward: sdpa_backward_flops,
        aten._scaled_dot_product_flash_attention_backward: sdpa_backward_flops,
        aten._scaled_dot_product_cudnn_attention_backward: sdpa_backward_flops,
        aten.mkldnn_rnn_layer: mkldnn_rnn_layer_flops,
        aten.mkldnn_rnn_layer_backward: mkldnn_rnn_layer_backward_flops,
        aten._cudnn_rnn: cudnn_rnn_flops,
        aten._cudnn_rnn_backward: cudnn_rnn_backward_flops,
    }
    return table
