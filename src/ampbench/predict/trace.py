"""One training step traced on the meta device: every op with its shapes, dtypes, FLOPs and bytes; no memory used,
nothing computed.

The step is the engine's own (:class:`~ampbench.precision.MixedPrecision` set up on ``meta``: its casts, master
copies, scaling and optimizer), with CUDA's autocast rules (:mod:`ampbench.predict.cuda_autocast`) instead of the
device's, and attention through one fused op, as CUDA runs ``scaled_dot_product_attention`` (flash or memory-
efficient kernels: Q, K, V and the output read and written once, the scores never stored). Two steps run; the second
is recorded (the first creates the optimizer's state). The memory split is read from the traced tensors: weights,
gradients, optimizer state and master copies by their storage, activations as the storages autograd saves.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import FlopCounterMode

from ampbench.measure.flop_formulas import custom_mapping, sdpa_backward_flops, sdpa_forward_flops
from ampbench.measure.memory import storage_tensors
from ampbench.precision import MixedPrecision
from ampbench.precision.optimizer_state import compile_as_no_op, is_torchao
from ampbench.precision.optimizer_state import describe as describe_states
from ampbench.precision.optimizers import FUSABLE
from ampbench.predict.cuda_autocast import CudaAutocast
from ampbench.workloads.base import Workload

META = torch.device("meta")

# ---- attention as one fused op (what CUDA's SDPA kernels are) ----------------------------------------------------
_LIB = torch.library.Library("ampbench_predict", "DEF")
_LIB.define("fused_attention(Tensor q, Tensor k, Tensor v) -> Tensor")
_LIB.define("fused_attention_backward(Tensor grad, Tensor q, Tensor k, Tensor v, Tensor out) -> (Tensor, Tensor, Tensor)")


def _fwd_meta(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return q.new_empty((*q.shape[:-1], v.shape[-1]))


def _bwd_meta(grad: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


_LIB.define("fused_dropout(Tensor x, float p) -> (Tensor, Tensor)")
_LIB.define("fused_dropout_backward(Tensor grad, Tensor mask, float scale) -> Tensor")


def _dropout_meta(x: torch.Tensor, p: float) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(x), torch.empty_like(x, dtype=torch.bool)


def _dropout_bwd_meta(grad: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.empty_like(grad)


_LIB.impl("fused_dropout", _dropout_meta, "Meta")
_LIB.impl("fused_dropout_backward", _dropout_bwd_meta, "Meta")
_LIB.impl("fused_attention", _fwd_meta, "Meta")
_LIB.impl("fused_attention_backward", _bwd_meta, "Meta")
FUSED_ATTENTION = torch.ops.ampbench_predict.fused_attention.default
FUSED_ATTENTION_BACKWARD = torch.ops.ampbench_predict.fused_attention_backward.default


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        out = FUSED_ATTENTION(q, k, v)
        ctx.save_for_backward(q, k, v, out)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # type: ignore[override]
        q, k, v, out = ctx.saved_tensors
        return FUSED_ATTENTION_BACKWARD(grad, q, k, v, out)


class _Dropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, p: float) -> torch.Tensor:  # type: ignore[override]
        out, mask = torch.ops.ampbench_predict.fused_dropout.default(x, p)
        ctx.save_for_backward(mask)
        ctx.scale = 1.0 / (1.0 - p)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        (mask,) = ctx.saved_tensors
        return torch.ops.ampbench_predict.fused_dropout_backward.default(grad, mask, ctx.scale), None


class _CudaKernels(TorchFunctionMode):
    """What CUDA runs as one kernel and the meta device decomposes: ``F.scaled_dot_product_attention`` (flash or
    memory-efficient attention) and dropout in training (``native_dropout``: the output and a bool mask in one pass;
    the meta device draws a mask, scales and multiplies in three)."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = getattr(func, "__name__", "")
        kwargs = kwargs or {}
        if name == "dropout":
            p = kwargs.get("p", args[1] if len(args) > 1 else 0.5)
            training = kwargs.get("training", args[2] if len(args) > 2 else True)
            if training and 0 < p < 1 and not kwargs.get("inplace", False):
                return _Dropout.apply(args[0], float(p))
        if name == "scaled_dot_product_attention":
            q, k, v = args[:3]
            k = k.expand(*q.shape[:-2], *k.shape[-2:]) if k.dim() == q.dim() and k.shape[:-2] != q.shape[:-2] else k
            v = v.expand(*q.shape[:-2], *v.shape[-2:]) if v.dim() == q.dim() and v.shape[:-2] != q.shape[:-2] else v
            return _Attention.apply(q, k, v)
        return func(*args, **kwargs)


# ---- the recorded ops --------------------------------------------------------------------------------------------
@dataclass
class Op:
    name: str
    """aten op (``aten.mm``) or ``ampbench_predict.fused_attention``."""
    phase: str
    """forward, backward, optimizer or step (the engine's scaling and casts around the optimizer)."""
    flops: int
    bytes_read: int
    bytes_written: int
    dtype: str
    """The dtype the op computes in (its first floating input's; fp32 when none)."""
    tensors: int = 1
    """Tensors a multi-tensor (``_foreach_*``, fused optimizer) op covers: launches are counted from it."""
    gemm: tuple[int, int, int] | None = None
    """(M, N, K) of a matmul or a convolution's implicit GEMM."""
    nchw: bool = False
    """A 2-D convolution on NCHW tensors (cuDNN's Tensor Core kernels are NHWC: it converts them)."""


ZERO_COST = {"detach", "alias", "_local_scalar_dense", "empty", "empty_like", "new_empty", "new_empty_strided",
             "empty_strided", "lift_fresh", "_record_function_enter_new", "_record_function_exit", "set_",
             "resize_", "_unsafe_view", "view", "_to_copy_noop"}
WRITE_ONLY = {"copy_", "fill_", "zero_", "_foreach_copy_", "_foreach_zero_", "normal_", "uniform_", "bernoulli_",
              "zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "scalar_tensor", "arange"}
_DTYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64"}


def effective_bytes(t: torch.Tensor) -> int:
    """Bytes an op reads or writes for ``t``: broadcast (stride-0) dimensions read once."""
    n = 1
    for size, stride in zip(t.shape, t.stride()):
        if stride != 0:
            n *= size
    return n * t.element_size()


def _is_view(func: Any) -> bool:
    schema = func._schema
    return bool(schema.returns) and all(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)


def _gemm_shape(name: str, args: tuple[Any, ...], out: Any) -> tuple[int, int, int] | None:
    if name in ("mm", "addmm", "bmm", "baddbmm"):
        a, b = (args[0], args[1]) if name in ("mm", "bmm") else (args[1], args[2])
        batch = a.shape[0] if a.dim() == 3 else 1
        return batch * a.shape[-2], b.shape[-1], a.shape[-1]
    if name == "convolution" and isinstance(out, torch.Tensor):  # implicit GEMM: (N*P*Q) x C_out x (C_in/g*R*S)
        w = args[1]
        return out.shape[0] * math.prod(out.shape[2:]), w.shape[0], w.shape[1] * math.prod(w.shape[2:])
    if name == "convolution_backward":
        grad, w = args[0], args[2]
        return grad.shape[0] * math.prod(grad.shape[2:]), w.shape[0], w.shape[1] * math.prod(w.shape[2:])
    return None


class _Recorder(TorchDispatchMode):
    def __init__(self, flop_registry: dict[Any, Any]) -> None:
        super().__init__()
        self.ops: list[Op] = []
        self.phase = "step"
        self._flops = flop_registry

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func._overloadpacket.__name__ if hasattr(func, "_overloadpacket") else str(func)
        if name in ZERO_COST or _is_view(func):
            return out
        ins = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        if name in WRITE_ONLY:  # a fill or copy reads only its sources (an in-place one: the arguments after the first)
            read_from = [t for t in tree_flatten(args[1:])[0] if isinstance(t, torch.Tensor)] if name.endswith("_") else []
        else:
            read_from = ins
        read = sum(effective_bytes(t) for t in read_from)
        if not outs and func._schema.arguments and func._schema.arguments[0].alias_info is not None:
            outs = [t for t in tree_flatten(args[0])[0] if isinstance(t, torch.Tensor)]  # (in-place list ops return None)
        written = sum(effective_bytes(t) for t in outs)
        floats = [t.dtype for t in ins if t.is_floating_point()]
        dtype = _DTYPES.get(floats[0], "fp32") if floats else "fp32"
        if func is FUSED_ATTENTION:
            flops = sdpa_forward_flops(args[0].shape, args[1].shape, args[2].shape)
        elif func is FUSED_ATTENTION_BACKWARD:
            flops = sdpa_backward_flops(None, args[1].shape, args[2].shape, args[3].shape)
        else:
            fn = self._flops.get(func._overloadpacket)
            flops = int(fn(*args, **kwargs, out_val=out)) if fn is not None else 0
        multi = name.startswith(("_foreach", "_fused", "_amp_foreach")) and isinstance(args[0], (list, tuple))
        nchw = (name in ("convolution", "convolution_backward") and args[0].dim() == 4
                and not args[0].is_contiguous(memory_format=torch.channels_last))
        self.ops.append(Op(func._overloadpacket._qualified_op_name.replace("::", "."), self.phase, flops, read, written,
                           dtype, len(args[0]) if multi else 1, _gemm_shape(name, args, out), nchw))
        return out


# ---- the step ------------------------------------------------------------------------------------------------------
@dataclass
class Trace:
    ops: list[Op]
    batch_size: int
    weights_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    master_bytes: int
    activation_bytes: int
    largest_temporary_bytes: int
    optimizer: str
    """The optimizer's class name."""
    fusable: bool
    """Whether the engine runs this optimizer fused on CUDA (torch's fused Adam/AdamW/SGD/Adagrad)."""
    state_tensors: int = 0
    stepped_params: int = 0
    """Tensors the optimizer steps (the fp32 masters in master-* modes)."""
    torchao: bool = False
    """torchao's low-precision optimizer (an --optimizer-state): its update compiled into a kernel per parameter."""
    optimizer_states: str | None = None
    """What its moment tensors are stored as (:func:`ampbench.precision.optimizer_state.describe`)."""
    notes: list[str] = field(default_factory=list)


def _storage_key(t: torch.Tensor) -> int:
    return int(t.untyped_storage()._cdata)


def _storages_bytes(tensors: Any) -> tuple[int, set[int]]:
    """Bytes of the storages behind ``tensors``, each once (a wrapper subclass -- torchao's quantized optimizer
    states -- by its inner tensors: codes, scales, lookup tables)."""
    seen: dict[int, int] = {}
    for outer in tensors:
        if isinstance(outer, torch.Tensor):
            for t in storage_tensors(outer):
                seen.setdefault(_storage_key(t), t.untyped_storage().nbytes())
    return sum(seen.values()), set(seen)


def trace_step(wl: Workload, precision: str, batch_size: int, loss_scale: Any = None,
               mp_options: dict[str, Any] | None = None, channels_last: bool = False) -> Trace:
    """Trace one steady-state training step of ``wl`` (built on meta: :func:`build_meta`) in ``precision``."""
    model = wl.model.to(META)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    optimizer = wl.make_optimizer(model.parameters())
    mp = MixedPrecision(precision, loss_scale=loss_scale, device=META, **(mp_options or {}))
    model, optimizer = mp.setup(model, optimizer)  # (an optimizer_state: torchao's optimizer in its place)
    fusable = type(optimizer) in FUSABLE and not optimizer.defaults.get("differentiable")
    model.train()
    n = len(wl.train_data)
    batch = wl.train_data.select(torch.arange(batch_size) % n)
    inputs = tuple(t.to(META) for t in batch.inputs)
    if channels_last:
        inputs = tuple(t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 and t.is_floating_point() else t
                       for t in inputs)
    targets = batch.targets.to(META)
    counter = FlopCounterMode(display=False, custom_mapping=custom_mapping())
    rec = _Recorder(counter.flop_registry)
    autocast_dtype = mp.recipe.compute_dtype if mp.recipe.autocasts else None
    saved: dict[int, int] = {}
    state_keys: set[int] = set()

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = _storage_key(t)
        if key not in state_keys:
            saved.setdefault(key, t.untyped_storage().nbytes())
        return t

    grads_at_peak: list[int] = []

    def step(record: bool) -> None:
        optimizer.zero_grad(set_to_none=True)
        rec.phase = "forward"
        with _CudaKernels(), (CudaAutocast(autocast_dtype) if autocast_dtype is not None else _nothing()), \
                torch.autograd.graph.saved_tensors_hooks(pack if record else (lambda t: t), lambda t: t):
            loss = wl.loss_fn(wl.call_model(model, inputs), targets)
        rec.phase = "backward"
        mp.backward(loss)
        if record:
            grads_at_peak.append(_storages_bytes(p.grad for p in model.parameters() if p.grad is not None)[0])
        rec.phase = "step"
        mp.step(optimizer)

    pre = optimizer.register_step_pre_hook(lambda *_: setattr(rec, "phase", "optimizer"))
    post = optimizer.register_step_post_hook(lambda *_: setattr(rec, "phase", "step"))
    with compile_as_no_op(), _closing(pre, post):  # (torchao compiles its update; traced op by op instead)
        step(False)  # the optimizer's state is created here
        weights, weight_keys = _storages_bytes(model.parameters())
        masters = mp.master_params()
        master_bytes, master_keys = _storages_bytes(masters) if masters else (0, set())
        state = [t for s in optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
        opt_bytes, opt_keys = _storages_bytes(state)  # (step counters too, as a measured row counts them)
        buffers, buffer_keys = _storages_bytes(model.buffers())
        state_keys |= weight_keys | master_keys | opt_keys | buffer_keys
        with rec:
            step(True)
    temporary = max((o.bytes_written for o in rec.ops if o.phase in ("forward", "backward")), default=0)
    return Trace(rec.ops, batch_size, weights + buffers, grads_at_peak[0], opt_bytes, master_bytes, sum(saved.values()),
                 temporary, type(optimizer).__name__, fusable, len(state),
                 sum(len(g["params"]) for g in optimizer.param_groups), torchao=is_torchao(optimizer),
                 optimizer_states=describe_states(optimizer))


@contextlib.contextmanager
def _closing(*hooks: Any) -> Iterator[None]:
    try:
        yield
    finally:
        for h in hooks:
            h.remove()


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
