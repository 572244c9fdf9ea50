"""What a CUDA GPU runs, while a step is traced on meta tensors (no CUDA needed): autocast's casts, cuDNN's layouts
and the fused kernels, at every call depth.

Why our own: ``torch.autocast`` applies the op lists of the device the tensors are on, and a prediction must apply
CUDA's while tracing elsewhere (the CPU's differ: ``cross_entropy_loss`` is fp32 on the CPU and decomposes on CUDA;
``exp``, ``sum`` and ``softmax`` are fp32 on CUDA only), and meta tensors have no autocast at all. torch cannot run its
CUDA kernels without CUDA, so the rules are emulated -- where autocast itself sits: Python kernels registered (for the
trace only) at the ``AutocastCPU`` dispatch key, which is above autograd, and that key included for the meta tensors.
So, like autocast, the emulation sees every aten op wherever it is called from (inside ``F.multi_head_attention_forward``,
``nn.TransformerEncoderLayer``, a loss, a C++ composite such as ``einsum``), its casts are recorded by autograd (the
backward runs at the dtypes CUDA's would) and the weight casts are cached per forward as autocast caches them. (A
``TorchFunctionMode`` cannot do this: its handler runs with the mode popped, so everything inside a function that
dispatches through ``__torch_function__`` escapes it.)

The same kernels substitute what CUDA runs as one kernel and the meta device decomposes or lays out differently:

- ``scaled_dot_product_attention``: one fused op (flash or memory-efficient attention: Q, K, V, the mask and the output
  read and written once, the scores never stored);
- ``dropout`` in training: ``native_dropout`` (the output and a bool mask in one pass);
- ``lstm``/``gru``/``rnn_tanh``/``rnn_relu``: cuDNN's fused layers (one op per layer, its directions inside, forward
  and backward), in half under autocast as cuDNN's RNN cast runs them;
- convolutions: cuDNN's output layout (channels-last when the input or the weight is; the meta kernel always returns
  NCHW).

The op lists are ATen's (``aten/src/ATen/autocast_mode.cpp``, torch 2.13): :data:`CUDA_RULES` and, for the oracle
test that checks this emulation against the real ``torch.autocast("cpu")``, :data:`CPU_RULES`. The dispatcher says
which ops each device's autocast has a kernel for; ``tests/predict/test_cuda_dispatch.py`` checks that the lists hold
exactly those.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import warnings
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._meta_registrations import meta_conv
from torch.utils._pytree import tree_map

KEY = torch._C.DispatchKey.AutocastCPU


@dataclass(frozen=True)
class AutocastRules:
    """One device's autocast lists (aten overload names: ``softmax.int``; no overload: ``.default``)."""

    device: str
    lower: frozenset[str]
    """Run in the autocast dtype (``lower_precision_fp``)."""
    fp32: frozenset[str]
    """Run in fp32 (floating inputs cast up)."""
    fp32_set_opt_dtype: frozenset[str] = frozenset()
    """Run with ``dtype=float32`` when the first input is floating and no dtype was given (the kernel reads the half
    input and writes fp32: no separate cast)."""
    fp32_append_dtype: dict[str, str] = field(default_factory=dict)
    """op -> the overload it runs as, with ``dtype=float32`` appended."""
    promote: frozenset[str] = frozenset()
    """Run in the widest floating dtype of the inputs."""
    banned: frozenset[str] = frozenset()
    """Refused under autocast (unsafe in half)."""

    def policy(self, op: str) -> str | None:
        for name in ("lower", "fp32", "fp32_set_opt_dtype", "promote", "banned"):
            if op in getattr(self, name):
                return name
        return "fp32_append_dtype" if op in self.fp32_append_dtype else None

    @property
    def ops(self) -> frozenset[str]:
        return (self.lower | self.fp32 | self.fp32_set_opt_dtype | self.promote | self.banned
                | frozenset(self.fp32_append_dtype))


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


CUDA_RULES = AutocastRules(
    "cuda",
    lower=_names("""
        _convolution _convolution.deprecated conv1d conv2d conv3d conv_tbc conv_transpose1d conv_transpose2d.input
        conv_transpose3d.input convolution cudnn_convolution cudnn_convolution_transpose prelu addmm addmv addr matmul
        einsum mm mv linalg_vecdot linear addbmm baddbmm bmm chain_matmul linalg_multi_dot _thnn_fused_lstm_cell
        _thnn_fused_gru_cell lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell _scaled_dot_product_flash_attention
        scaled_dot_product_attention"""),
    fp32=_names("""
        acos asin cosh erfinv exp expm1 log log10 log2 log1p reciprocal rsqrt sinh tan pow.Tensor_Scalar
        pow.Tensor_Tensor pow.Scalar softplus layer_norm native_layer_norm group_norm frobenius_norm.dim nuclear_norm
        nuclear_norm.dim cosine_similarity poisson_nll_loss cosine_embedding_loss nll_loss nll_loss2d
        hinge_embedding_loss kl_div l1_loss smooth_l1_loss huber_loss mse_loss margin_ranking_loss
        multilabel_margin_loss soft_margin_loss triplet_margin_loss multi_margin_loss binary_cross_entropy_with_logits
        dist pdist cdist renorm logsumexp rms_norm upsample_nearest1d _upsample_nearest_exact1d upsample_nearest2d
        _upsample_nearest_exact2d upsample_nearest3d _upsample_nearest_exact3d upsample_linear1d upsample_bilinear2d
        _upsample_bilinear2d_aa upsample_trilinear3d upsample_bicubic2d _upsample_bicubic2d_aa"""),
    fp32_set_opt_dtype=_names("""
        prod prod.dim_int softmax.int log_softmax.int cumprod cumsum linalg_vector_norm linalg_matrix_norm
        linalg_matrix_norm.str_ord sum sum.dim_IntList"""),
    fp32_append_dtype={"norm.Scalar": "norm.ScalarOpt_dtype", "norm.ScalarOpt_dim": "norm.ScalarOpt_dim_dtype"},
    promote=_names("addcdiv addcmul atan2 bilinear cross dot vdot grid_sampler index_put tensordot scatter_add"),
    banned=_names("binary_cross_entropy"),
)
"""CUDA's autocast (``TORCH_LIBRARY_IMPL(aten, Autocast, m)``)."""

CPU_RULES = AutocastRules(
    "cpu",
    lower=_names("""
        conv1d conv1d.padding conv2d conv2d.padding conv3d conv3d.padding bmm mm linalg_vecdot baddbmm addmm addbmm
        linear _convolution.deprecated matmul conv_tbc mkldnn_rnn_layer conv_transpose1d conv_transpose2d.input
        conv_transpose3d.input prelu scaled_dot_product_attention _native_multi_head_attention _addmm_activation"""),
    fp32=_names("""
        avg_pool3d binary_cross_entropy grid_sampler polar prod prod.dim_int quantile quantile.scalar nanquantile
        nanquantile.scalar stft stft.center cdist grid_sampler_2d _grid_sampler_2d_cpu_fallback grid_sampler_3d trace
        view_as_complex cholesky cholesky_inverse cholesky_solve inverse lu_solve orgqr ormqr pinverse max_pool3d
        max_unpool2d max_unpool3d adaptive_avg_pool3d reflection_pad1d reflection_pad2d replication_pad1d
        replication_pad2d replication_pad3d mse_loss cosine_embedding_loss nll_loss nll_loss2d hinge_embedding_loss
        poisson_nll_loss smooth_l1_loss cross_entropy_loss l1_loss huber_loss margin_ranking_loss soft_margin_loss
        triplet_margin_loss multi_margin_loss ctc_loss.IntList ctc_loss.Tensor kl_div multilabel_margin_loss
        binary_cross_entropy_with_logits fft_fft fft_ifft fft_fft2 fft_ifft2 fft_fftn fft_ifftn fft_rfft fft_irfft
        fft_rfft2 fft_irfft2 fft_rfftn fft_irfftn fft_hfft fft_ihfft linalg_cond linalg_cond.p_str linalg_matrix_rank
        linalg_matrix_rank.tol_tensor linalg_matrix_rank.atol_rtol_tensor linalg_matrix_rank.atol_rtol_float
        linalg_solve linalg_cholesky linalg_svdvals linalg_eigvals linalg_eigvalsh linalg_inv
        linalg_householder_product linalg_tensorinv linalg_tensorsolve fake_quantize_per_tensor_affine geqrf
        _lu_with_info qr svd triangular_solve fractional_max_pool2d fractional_max_pool3d adaptive_max_pool3d
        multilabel_margin_loss_forward linalg_qr linalg_cholesky_ex linalg_svd linalg_eig linalg_eigh linalg_lstsq
        linalg_inv_ex"""),
    promote=_names("stack cat index_copy"),
)
"""The CPU's autocast (``TORCH_LIBRARY_IMPL(aten, AutocastCPU, m)``): the oracle this emulation is checked against."""

RNN_OPS = {"lstm.input": 4, "gru.input": 3, "rnn_tanh.input": 1, "rnn_relu.input": 1}
"""The recurrent layers cuDNN runs fused, and their gates per step."""
FUSED_OPS = frozenset({"scaled_dot_product_attention", "dropout", *RNN_OPS})


_HALF_TO_FLOAT = {"softmax.int": torch.ops.aten._softmax.default, "log_softmax.int": torch.ops.aten._log_softmax.default}
"""CUDA's softmax of an fp16 input asked for fp32: ``_softmax(x, dim, half_to_float=True)``, no separate cast."""


def _op(name: str) -> Any:
    packet, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, packet), overload or "default")


@functools.cache
def autocast_kernel_ops(device: str) -> frozenset[str]:
    """The aten ops the dispatcher holds an autocast kernel for on ``device`` ("cpu" or "cuda"; the CPU build of torch
    registers CUDA's too): what :class:`AutocastRules` must list. Torch's own, so read once a process (every trace
    asked again: ~20 ms over the dispatcher's ~3,000 op names, 4 % of a traced step)."""
    key = "AutocastCPU" if device == "cpu" else "AutocastCUDA"
    return frozenset(n.removeprefix("aten::") for n in torch._C._dispatch_get_all_op_names()
                     if n.startswith("aten::") and torch._C._dispatch_has_kernel_for_dispatch_key(n, key))


# ---- CUDA's fused kernels as ops of ours ---------------------------------------------------------------------------
_LIB = torch.library.Library("ampbench_predict", "DEF")
_LIB.define("fused_attention(Tensor q, Tensor k, Tensor v, Tensor? mask, bool causal) -> Tensor")
_LIB.define("fused_attention_backward(Tensor grad, Tensor q, Tensor k, Tensor v, Tensor out, Tensor? mask, bool causal)"
            " -> (Tensor, Tensor, Tensor)")
_LIB.define("rnn_layer(Tensor x, Tensor h0, Tensor c0, Tensor[] weights, int gates, int directions) "
            "-> (Tensor, Tensor, Tensor, Tensor)")
_LIB.define("rnn_layer_backward(Tensor grad_out, Tensor x, Tensor h0, Tensor c0, Tensor[] weights, Tensor out, "
            "Tensor reserve, int gates, int directions, bool input_grad) -> (Tensor, Tensor, Tensor, Tensor[])")


def _attention_meta(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                    causal: bool) -> torch.Tensor:
    return q.new_empty((*q.shape[:-1], v.shape[-1]))


def _attention_bwd_meta(grad: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                        mask: torch.Tensor | None, causal: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _layer_dims(x: torch.Tensor, weights: list[torch.Tensor], gates: int, directions: int) -> tuple[int, int, int]:
    """(hidden size, output size per direction, weights per direction) of one layer."""
    per = len(weights) // directions
    hidden = weights[1].shape[1] if per in (3, 5) else weights[1].shape[0] // gates  # (w_hr: w_hh is (4H, P))
    out = weights[per - 1].shape[0] if per in (3, 5) else hidden  # LSTM's projection: w_hr (P, H) last
    return hidden, out, per


def _rnn_meta(x: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, weights: list[torch.Tensor], gates: int,
              directions: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    steps, batch = x.shape[0], x.shape[1]
    hidden, out, _ = _layer_dims(x, weights, gates, directions)
    # cuDNN's reserve space: every step's gate activations (and the cell state), kept for the backward
    reserve = x.new_empty((steps, batch, directions * (gates + (1 if gates == 4 else 0)) * hidden))
    return (x.new_empty((steps, batch, directions * out)), h0.new_empty(h0.shape), c0.new_empty(c0.shape), reserve)


def _rnn_bwd_meta(grad_out: torch.Tensor, x: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor,
                  weights: list[torch.Tensor], out: torch.Tensor, reserve: torch.Tensor, gates: int, directions: int,
                  input_grad: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    return torch.empty_like(x), torch.empty_like(h0), torch.empty_like(c0), [torch.empty_like(w) for w in weights]


_LIB.impl("fused_attention", _attention_meta, "Meta")
_LIB.impl("fused_attention_backward", _attention_bwd_meta, "Meta")
_LIB.impl("rnn_layer", _rnn_meta, "Meta")
_LIB.impl("rnn_layer_backward", _rnn_bwd_meta, "Meta")
FUSED_ATTENTION = torch.ops.ampbench_predict.fused_attention.default
FUSED_ATTENTION_BACKWARD = torch.ops.ampbench_predict.fused_attention_backward.default
RNN_LAYER = torch.ops.ampbench_predict.rnn_layer.default
RNN_LAYER_BACKWARD = torch.ops.ampbench_predict.rnn_layer_backward.default


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,  # type: ignore[override]
                causal: bool) -> torch.Tensor:
        out = FUSED_ATTENTION(q, k, v, mask, causal)
        ctx.save_for_backward(q, k, v, out, mask)
        ctx.causal = causal
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        q, k, v, out, mask = ctx.saved_tensors
        return (*FUSED_ATTENTION_BACKWARD(grad, q, k, v, out, mask, ctx.causal), None, None)


class _RnnLayer(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, gates: int,  # type: ignore[override]
                directions: int, weight_buf: torch.Tensor, *weights: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out, hn, cn, reserve = RNN_LAYER(x, h0, c0, list(weights), gates, directions)
        ctx.save_for_backward(x, h0, c0, out, reserve, weight_buf, *weights)
        ctx.gates, ctx.directions, ctx.input_grad = gates, directions, x.requires_grad
        return out, hn, cn

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor, grad_hn: Any, grad_cn: Any) -> tuple[Any, ...]:  # type: ignore[override]
        x, h0, c0, out, reserve, _, *weights = ctx.saved_tensors
        dx, dh0, dc0, dw = RNN_LAYER_BACKWARD(grad_out, x, h0, c0, weights, out, reserve, ctx.gates, ctx.directions,
                                              ctx.input_grad)
        return (dx, dh0, dc0, None, None, None, *dw)


def one_chunk(params: list[torch.Tensor]) -> bool:
    """The RNN's weights are views of one buffer, in order, each right after the one before (what
    ``nn.LSTM.flatten_parameters()`` makes on CUDA, and ``_cudnn_rnn`` then uses as its weight buffer)."""
    if not params:
        return True
    try:
        storage = params[0].untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):
        return False
    offset = params[0].storage_offset()
    for p in params:
        if p.untyped_storage()._cdata != storage or p.storage_offset() != offset or not p.is_contiguous():
            return False
        offset += p.numel()
    return True


def _fused_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor | None = None,
                     dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                     enable_gqa: bool = False) -> torch.Tensor:
    """CUDA's SDPA: flash or memory-efficient attention, one kernel. Grouped-query K and V (``enable_gqa``: fewer
    heads than Q's, Llama 3, Mistral, Qwen) are read as they are -- the kernel maps each query head to its group's
    K/V head; the FLOPs count every query head (:func:`~ampbench.measure.flop_formulas.sdpa_forward_flops`) --, and
    K/V broadcast over a dimension of size one are expanded as views (nothing copied)."""
    if enable_gqa and k.dim() == q.dim() >= 3 and k.shape[-3] != q.shape[-3]:
        return _Attention.apply(q, k, v, attn_mask, bool(is_causal))
    k = k.expand(*q.shape[:-2], *k.shape[-2:]) if k.dim() == q.dim() and k.shape[:-2] != q.shape[:-2] else k
    v = v.expand(*q.shape[:-2], *v.shape[-2:]) if v.dim() == q.dim() and v.shape[:-2] != q.shape[:-2] else v
    return _Attention.apply(q, k, v, attn_mask, bool(is_causal))


def _cpu_attention(plain: Callable[..., Any], q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                   attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0, is_causal: bool = False,
                   scale: float | None = None, enable_gqa: bool = False) -> torch.Tensor:
    """The CPU's SDPA (for the oracle tests): its flash kernel where ``sdp_utils_cpp``'s checks pass (no dropout, 4-D,
    equal batch, heads and head dims, unit last stride), the math decomposition (``plain``) otherwise."""
    flash = (dropout_p == 0 and not enable_gqa and q.dim() == k.dim() == v.dim() == 4
             and q.dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16)
             and q.shape[:2] == k.shape[:2] == v.shape[:2] and q.shape[-1] == k.shape[-1] == v.shape[-1]
             and all(t.stride(-1) == 1 for t in (q, k, v)) and min(q.shape[-2], k.shape[-2]) > 0)
    if not flash:
        return plain(q, k, v, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(
        q, k, v, 0.0, is_causal, attn_mask=attn_mask, scale=scale)[0]


def _dropout(plain: Callable[..., Any], x: torch.Tensor, p: float, train: bool) -> torch.Tensor:
    """CUDA's dropout in training: ``native_dropout`` (the output and a bool mask, one kernel)."""
    if train and 0 < p < 1:
        return torch.ops.aten.native_dropout.default(x, p, True)[0]
    return plain(x, p, train)


def _rnn(gates: int, cast: Callable[[Any], Any]) -> Callable[..., Any]:
    """``aten.lstm.input`` (and gru/rnn_tanh/rnn_relu) as cuDNN runs it: one fused op per layer (its directions
    inside), time-major, in half under autocast (``cast``: cuDNN's RNN cast); dropout between layers inside the kernel."""

    def rnn(x: torch.Tensor, hx: Any, params: list[torch.Tensor], has_biases: bool, num_layers: int, dropout: float,
            train: bool, bidirectional: bool, batch_first: bool) -> tuple[torch.Tensor, ...]:
        flat = one_chunk(list(params))
        x, hx, params = cast((x, hx, params))
        directions = 2 if bidirectional else 1
        h0, c0 = (hx[0], hx[1]) if gates == 4 else (hx, None)
        x = x.transpose(0, 1) if batch_first else x
        stride = len(params) // (num_layers * directions)
        # cuDNN's weight buffer: weights that are not one chunk (a module moved to the GPU without flatten_parameters()
        # -- PyTorch warns "not part of single contiguous chunk of memory" -- and every traced one: meta tensors are
        # never flattened) are copied into one, in the compute dtype, each forward; the backward keeps it. On the lent
        # H200 the LSTM-LM's saved tensors held 576 MiB more in fp32 and 288 more in AMP: its LSTM's weights, once.
        with torch.no_grad():
            buf = params[0].new_empty((0,)) if flat else torch.cat([p.reshape(-1) for p in params])
        hs, cs = [], []
        for layer in range(num_layers):
            rows = slice(layer * directions, (layer + 1) * directions)
            weights = params[layer * directions * stride:(layer + 1) * directions * stride]
            c = c0[rows] if c0 is not None else h0.new_empty((0,))
            x, hn, cn = _RnnLayer.apply(x, h0[rows], c, gates, directions, buf, *weights)
            hs.append(hn)
            cs.append(cn)
        out = x.transpose(0, 1) if batch_first else x
        h = torch.cat(hs) if len(hs) > 1 else hs[0]
        if gates == 4:
            return out, h, (torch.cat(cs) if len(cs) > 1 else cs[0])
        return out, h

    return rnn


def onednn_lstm(dtype: torch.dtype) -> bool:
    """Whether the CPU runs an LSTM computing in ``dtype`` (in training) with oneDNN (RNN.cpp's ``use_mkldnn``)."""
    return torch._C._get_mkldnn_enabled() and (
        dtype == torch.float32 or (dtype == torch.bfloat16 and torch.ops.mkldnn._is_mkldnn_bf16_supported()))


def _cpu_lstm(cast_dtype: Callable[[], torch.dtype | None], plain: Callable[..., Any], x: torch.Tensor, hx: Any,
              params: list[torch.Tensor], has_biases: bool, num_layers: int, dropout: float, train: bool,
              bidirectional: bool, batch_first: bool) -> tuple[torch.Tensor, ...]:
    """The CPU's LSTM (for the oracle tests): oneDNN's ``mkldnn_rnn_layer`` per layer and direction, as
    ``aten/src/ATen/native/mkldnn/RNN.cpp`` calls it (biased, unprojected LSTMs in a dtype oneDNN runs on this CPU --
    under autocast, the autocast dtype --; the decomposition otherwise)."""
    directions = 2 if bidirectional else 1
    h0, c0 = hx
    dtype = cast_dtype()
    if dtype is not None and not onednn_lstm(dtype):  # (the engine's CPU fallback, precision/fallbacks.py: torch's
        x, hx, params = tree_map(lambda t: t.to(dtype) if _eligible(t) else t, (x, hx, params))  # native half LSTM)
        return plain(x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
    onednn = x.numel() > 0 and onednn_lstm(dtype or x.dtype)
    if not onednn or not has_biases or len(params) != 4 * num_layers * directions or h0.shape[-1] != c0.shape[-1]:
        return plain(x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
    layer_in = (x.transpose(0, 1) if batch_first else x).contiguous()
    hs, cs = [], []
    for layer in range(num_layers):
        outs = []
        for d in range(directions):
            i = layer * directions + d
            w = params[4 * i:4 * i + 4]
            y, hy, cy, _ = torch.ops.aten.mkldnn_rnn_layer.default(
                layer_in, w[0], w[1], w[2], w[3], h0[i], c0[i], d > 0, [], 2, h0.shape[-1], num_layers, has_biases,
                bidirectional, batch_first, train)
            outs.append(y)
            hs.append(hy)
            cs.append(cy)
        layer_in = torch.cat(outs, -1) if directions > 1 else outs[0]
        if dropout and train and layer < num_layers - 1:
            layer_in = torch.dropout(layer_in, dropout, True)
    out = layer_in.transpose(0, 1) if batch_first else layer_in
    return out, torch.stack(hs), torch.stack(cs)


def _conv_meta(input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride: Any, padding: Any,
               dilation: Any, transposed: bool, output_padding: Any, groups: int) -> torch.Tensor:
    """The meta convolution with cuDNN's output layout: channels-last when the input or the weight is
    (``cudnn_conv_suggest_memory_format``), NCHW otherwise (the meta kernel alone always returns NCHW)."""
    out = meta_conv(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    for fmt, dims in ((torch.channels_last, 4), (torch.channels_last_3d, 5)):
        if input.dim() == dims and ((input.is_contiguous(memory_format=fmt) and not input.is_contiguous())
                                    or (weight.is_contiguous(memory_format=fmt) and not weight.is_contiguous())):
            return torch.empty(out.shape, dtype=out.dtype, device=out.device, memory_format=fmt)
    return out


# ---- the emulation -------------------------------------------------------------------------------------------------
def _eligible(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64


class CudaDispatch:
    """``with CudaDispatch(torch.float16) as cuda: ...; with cuda.autocast(): loss = model(x)`` -- the ops run at the
    dtypes CUDA's autocast gives inside ``autocast()`` (``dtype`` None: no autocast), with cuDNN's layouts and CUDA's
    fused kernels for the whole block (forward, backward, optimizer).

    ``rules``: whose autocast lists and kernel choices (:data:`CUDA_RULES`; :data:`CPU_RULES` for the oracle tests);
    ``kernels``: run that device's kernel choices where the meta device decomposes or lays out differently (CUDA: the
    fused kernels and cuDNN's layouts; the CPU: its flash attention and oneDNN's LSTM, so a meta step holds what a real
    CPU step holds); off where real tensors choose for themselves (the autocast oracle on CPU tensors)."""

    def __init__(self, dtype: torch.dtype | None, rules: AutocastRules = CUDA_RULES, kernels: bool = True) -> None:
        self.dtype = dtype
        self.rules = rules
        self.kernels = kernels
        self._cache: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self._recompute_cache: dict[int, tuple[torch.Tensor, weakref.ref[torch.Tensor]]] = {}
        self._in_region = False
        self._stack = contextlib.ExitStack()

    # -- casts: autocast_mode.h's cached_cast and policies --
    def _cast(self, t: Any, dtype: torch.dtype) -> Any:
        if not _eligible(t) or t.dtype == dtype:
            return t
        cache = (dtype == self.dtype and t.dtype == torch.float32 and t.requires_grad and t.is_leaf
                 and not t._is_view())
        if cache and not self._in_region:  # a checkpointed block recomputed in the backward: see below
            source, kept = self._recompute_cache.get(id(t), (None, None))
            out = kept() if source is t and kept is not None else None
            if out is None:
                out = t.to(dtype)
                self._recompute_cache[id(t)] = (t, weakref.ref(out))
            return out
        if cache and id(t) in self._cache:
            return self._cache[id(t)][1]
        out = t.to(dtype)
        if cache:
            self._cache[id(t)] = (t, out)  # (the source kept alive: its id is not reused while cached)
        return out

    def _cast_all(self, args: Any, kwargs: Any, dtype: torch.dtype) -> tuple[Any, Any]:
        return tree_map(lambda t: self._cast(t, dtype), (args, kwargs))

    def _apply(self, name: str, policy: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, Any]:
        """(op to call, args, kwargs) under ``policy``."""
        op = _op(name)
        assert self.dtype is not None
        if policy == "lower":
            return (op, *self._cast_all(args, kwargs, self.dtype))
        if policy == "fp32":
            return (op, *self._cast_all(args, kwargs, torch.float32))
        if policy == "promote":
            floats = [t.dtype for t in _leaves((args, kwargs)) if _eligible(t)]
            to = torch.float32 if torch.float32 in floats or not floats else self.dtype
            if any(d not in (torch.float32, self.dtype) for d in floats):
                raise RuntimeError(f"autocast: {name} got inputs of types {floats}, which autocast cannot promote")
            return (op, *self._cast_all(args, kwargs, to))
        if policy == "banned":
            raise RuntimeError(f"torch.nn.functional.{name} and torch.nn.BCELoss are unsafe to autocast (CUDA refuses "
                               "them): use binary_cross_entropy_with_logits / BCEWithLogitsLoss")
        if not (args and _eligible(args[0])):  # the dtype policies apply to a floating first input only
            return op, args, kwargs
        if policy == "fp32_set_opt_dtype":
            if (self.rules.device == "cuda" and name in _HALF_TO_FLOAT and args[0].dtype == torch.float16
                    and _with_arg(op, args, kwargs, "dtype", None)[0][2] is None):  # (SoftMax.cpp, on CUDA: one
                return _HALF_TO_FLOAT[name], (args[0], args[1], True), {}  # kernel reads fp16, writes fp32)
            return (op, *_with_arg(op, args, kwargs, "dtype", torch.float32))
        other = _op(self.rules.fp32_append_dtype[name])  # fp32_append_dtype: the overload taking a dtype
        return other, (*args, *_defaults(op, len(args))), {**kwargs, "dtype": torch.float32}

    def _substitutes(self) -> dict[str, Callable[..., Any]]:
        """What the device runs in place of an op the meta device decomposes (its inner ops dispatch through these
        kernels again: autocast's casts apply to them). CUDA: fused attention, dropout and RNN layers; the CPU (the
        oracle tests): its flash attention and oneDNN's LSTM."""
        plain = {name: self._plain(name) for name in FUSED_OPS}
        if self.rules.device == "cpu":
            return {"scaled_dot_product_attention": functools.partial(_cpu_attention, plain["scaled_dot_product_attention"]),
                    "lstm.input": functools.partial(_cpu_lstm, self._autocast_dtype, plain["lstm.input"])}
        return {"scaled_dot_product_attention": _fused_attention,
                "dropout": functools.partial(_dropout, plain["dropout"]),
                **{name: _rnn(g, self._rnn_cast) for name, g in RNN_OPS.items()}}

    def _autocast_dtype(self) -> torch.dtype | None:
        return self.dtype if self._casting else None

    def _rnn_cast(self, tree: Any) -> Any:
        """cuDNN's RNN under autocast: input, states and weights in the autocast dtype."""
        if not self._casting or self.dtype is None:
            return tree
        return tree_map(lambda t: self._cast(t, self.dtype), tree)  # type: ignore[arg-type]

    @staticmethod
    def _plain(name: str) -> Callable[..., Any]:
        op = _op(name)

        def plain(*args: Any, **kwargs: Any) -> Any:
            with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(KEY)):
                return op(*args, **kwargs)

        return plain

    def _kernel(self, name: str, substitutes: dict[str, Callable[..., Any]]) -> Callable[..., Any]:
        policy = self.rules.policy(name)
        plain = _op(name)
        substitute = substitutes.get(name)

        def kernel(*args: Any, **kwargs: Any) -> Any:
            op = plain
            if self._casting and policy is not None:
                with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(KEY)):
                    op, args, kwargs = self._apply(name, policy, args, kwargs)
            if substitute is not None:
                return substitute(*args, **kwargs)
            with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(KEY)):  # (as autocast's kernels: the op's
                return op(*args, **kwargs)  # inner ops are not cast again)

        return kernel

    @property
    def meta_regime(self) -> tuple[str, bool]:
        """What decides the meta kernels under this dispatch besides their arguments (its kernel choices override
        convolution's on CUDA: :meth:`__enter__`): the regime of a :class:`~ampbench.predict.meta_memo.MetaMemo`."""
        return self.rules.device, self.kernels

    @property
    def _casting(self) -> bool:
        """Inside :meth:`autocast`'s region. The flag is CPU autocast's thread-local dtype (this dtype inside, the other
        half dtype outside), not an attribute of ours: ``torch.utils.checkpoint`` saves the autocast state at the
        forward and restores it for the backward's recompute, so a checkpointed block is recomputed at the dtypes its
        forward ran (with a flag of ours the recompute ran in fp32 and checkpoint refused its tensors)."""
        return self.dtype is not None and torch.get_autocast_dtype("cpu") == self.dtype

    @contextlib.contextmanager
    def autocast(self) -> Iterator[None]:
        """The forward's autocast region (the weight-cast cache lives as long as it, as autocast's does).

        A checkpointed block's recompute in the backward casts inside ``torch.utils.checkpoint``'s own autocast
        region, whose end this emulation cannot see (real autocast clears its cache there): its casts are shared while
        something holds them and never outlive that -- kept in the cache, they were found by the next step's forward,
        whose weights' gradients then flowed through the last step's cast nodes, run last by the autograd engine
        (the bf16 weight gradients all held to the backward's end: 12 % over a real CPU step's peak)."""
        if self.dtype is None:
            yield
            return
        before, was_in = torch.get_autocast_dtype("cpu"), self._in_region
        torch.set_autocast_dtype("cpu", self.dtype)
        self._in_region = True
        try:
            yield
        finally:
            torch.set_autocast_dtype("cpu", before)
            self._in_region = was_in
            if before != self.dtype:
                self._cache.clear()

    def __enter__(self) -> CudaDispatch:
        # every op with a CPU autocast kernel gets one of ours (a fallthrough where the rules have none), so the CPU's
        # own kernels never run inside; then the rules' ops and the substitutions
        names = sorted(autocast_kernel_ops("cpu") | self.rules.ops | (FUSED_OPS if self.kernels else set()))
        substitutes = self._substitutes() if self.kernels else {}
        lib = torch.library.Library("aten", "IMPL")
        self._stack.callback(lib._destroy)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ("Overriding a previously registered kernel": ours, for this trace only)
            for name in names:
                if not _has_op(name):
                    continue
                if name in substitutes or (self.dtype is not None and self.rules.policy(name) is not None):
                    lib.impl(name, self._kernel(name, substitutes), "AutocastCPU", **_OVERRIDE)
                else:  # (as autocast passes an op it has no rule for: what the op decomposes into is seen)
                    lib.impl(name, torch.library.fallthrough_kernel, "AutocastCPU", **_OVERRIDE)
            if self.kernels and self.rules.device == "cuda":
                lib.impl("convolution", _conv_meta, "Meta", **_OVERRIDE)
        was, dtype = torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")
        torch.set_autocast_enabled("cpu", True)  # (the key out of the excluded set; our kernels decide what casts)
        self._stack.callback(torch.set_autocast_enabled, "cpu", was)
        torch.set_autocast_dtype("cpu", _OUTSIDE.get(self.dtype, dtype))  # (outside autocast(): see _casting)
        self._stack.callback(torch.set_autocast_dtype, "cpu", dtype)
        self._stack.enter_context(torch._C._IncludeDispatchKeyGuard(KEY))  # (meta tensors have no autocast key)
        return self

    def __exit__(self, *exc: object) -> None:
        self._cache.clear()
        self._recompute_cache.clear()
        self._stack.close()


_OUTSIDE = {torch.bfloat16: torch.float16, torch.float16: torch.bfloat16}
"""CPU autocast's dtype outside :meth:`CudaDispatch.autocast`: the half dtype that is not the emulated one."""

_OVERRIDE = {"allow_override": True} if "allow_override" in inspect.signature(torch.library.Library.impl).parameters else {}
"""Said, not left to the default: torch before 2.13 refuses to register over a kernel Python registered for the same
key (``allow_override=False`` by default there) -- ``aten::convolution``'s Meta kernel is one (torch._meta_registrations):
every prediction raised on torch 2.11 (seen on the H200 machine's image). Ours is removed when the trace ends
(``lib._destroy``), the one it covered back in force."""


def _has_op(name: str) -> bool:
    try:
        _op(name)
    except AttributeError:
        return False
    return True


def _leaves(tree: Any) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    tree_map(lambda t: out.append(t) if isinstance(t, torch.Tensor) else None, tree)
    return out


def _defaults(op: Any, given: int) -> list[Any]:
    """The schema's defaults of the positional arguments after the first ``given``."""
    return [a.default_value for a in op._schema.arguments[given:] if not a.kwarg_only]


def _with_arg(op: Any, args: tuple[Any, ...], kwargs: dict[str, Any], arg: str, value: Any) -> tuple[Any, Any]:
    """``args``/``kwargs`` with ``arg`` set to ``value`` where it was not given (None)."""
    schema = op._schema.arguments
    i = next(i for i, a in enumerate(schema) if a.name == arg)
    if schema[i].kwarg_only or arg in kwargs:
        return args, kwargs if kwargs.get(arg) is not None else {**kwargs, arg: value}
    full = [*args, *(a.default_value for a in schema[len(args):i + 1])]
    if full[i] is None:
        full[i] = value
    return tuple(full), kwargs
