"""One training step traced on the meta device: every op with its shapes, dtypes, FLOPs and bytes; no memory used,
nothing computed.

The step is the engine's own (:class:`~ampbench.precision.MixedPrecision` set up on ``meta``: its casts, master
copies, scaling and optimizer) as a CUDA GPU runs it (:mod:`ampbench.predict.cuda_dispatch`: CUDA autocast's rules at
every call depth, cuDNN's layouts, the fused kernels), on a batch of meta inputs. Two steps run; the second is recorded
(the first creates the optimizer's state); the meta kernels' outputs are remembered across both and every repeated
block (:mod:`ampbench.predict.meta_memo`). The memory split is read from the traced tensors as ``ampbench run`` reads a
real step's (:mod:`ampbench.measure.memory`).
"""

from __future__ import annotations

import contextlib
import math
import re
import time
import traceback
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn
from torch._prims_common import suggest_memory_format
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import FlopCounterMode

from ampbench.distributed.units import FsdpSplit, blocks, fsdp_split
from ampbench.errors import AmpbenchError
from ampbench.execution.checkpointing import checkpoint_policy
from ampbench.measure.flop_formulas import custom_mapping, rnn_layer_flops, sdpa_backward_flops, sdpa_forward_flops
from ampbench.measure.memory import saved_activations, state_bytes, tensor_bytes
from ampbench.measure.op_kinds import ZERO_COST, is_view
from ampbench.precision import MixedPrecision
from ampbench.precision.optimizer_state import compile_as_no_op, is_torchao
from ampbench.precision.optimizer_state import describe as describe_states
from ampbench.precision.optimizers import FUSABLE
from ampbench.predict.cuda_dispatch import (
    CUDA_RULES,
    FUSED_ATTENTION,
    FUSED_ATTENTION_BACKWARD,
    RNN_LAYER,
    RNN_LAYER_BACKWARD,
    AutocastRules,
    CudaDispatch,
)
from ampbench.predict.kernels import Conv
from ampbench.predict.meta_memo import MetaMemo
from ampbench.workloads.base import Workload
from ampbench.workloads.meta_check import meta_twins

META = torch.device("meta")

# ---- the recorded ops --------------------------------------------------------------------------------------------
@dataclass
class Op:
    name: str
    """aten op (``aten.mm``) or one of ours (``ampbench_predict.fused_attention``, ``ampbench_predict.rnn_layer``)."""
    phase: str
    """forward, loss, backward, optimizer or step (the engine's scaling and casts around the optimizer)."""
    flops: int
    bytes_read: int
    bytes_written: int
    dtype: str
    """The dtype the op computes in (its first floating input's; fp32 when none)."""
    tensors: int = 1
    """Tensors a multi-tensor (``_foreach_*``, fused optimizer) op covers, directions of a fused RNN layer: launches
    are counted from it."""
    gemm: tuple[int, int, int, int] | None = None
    """(batch, M, N, K) of a matmul, or of a 1-D/3-D convolution's implicit GEMM (batch = groups)."""
    nchw: bool = False
    """A 2-D convolution (cuDNN's Tensor Core kernels are NHWC: it converts them) or a batch norm on NCHW tensors."""
    conv: Conv | None = None
    """A 2-D convolution's shape (what picks cuDNN's algorithm)."""
    products: int = 1
    """Products a convolution op computes: 1 forward; backward, the input's and the weight's gradients asked for."""
    causal: bool = False
    """Fused attention with a causal mask (the kernels skip the masked half of the scores)."""
    rnn: tuple[int, int, int, int, int] | None = None
    """A fused RNN layer: (steps, batch, input size, gates x hidden, recurrent input size) -- its input GEMM over every
    step at once, then one recurrent GEMM per step, each after the previous; directions in ``tensors``."""
    reads: tuple[tuple[int, int], ...] = ()
    """(storage, bytes) of each tensor it reads. A storage is one buffer, its views included: which op made what
    another reads -- the data flow a compiler fuses along (:mod:`ampbench.predict.fusion`)."""
    writes: tuple[tuple[int, int], ...] = ()
    """(storage, bytes) of each tensor it writes (its outputs; an in-place op's argument)."""
    reduces: bool = False
    """A reduction: an output smaller than its largest input (a sum, a norm's statistics)."""
    in_model: bool = False
    """Part of the model's own forward or backward -- what ``torch.compile(model)`` compiles -- not the loss, the
    loss's backward, the engine's step or the optimizer."""
    in_block: bool = False
    """Part of the forward of one of the model's repeated blocks (:func:`ampbench.distributed.units.blocks`: FSDP2's
    units), found by the blocks' forward hooks."""
    allocates: bool = True
    """Its output is new memory: not an op writing in place (``add_``, ``_foreach_copy_`` into the master gradients'
    buffers) or into an ``out=`` tensor (:func:`_in_place`)."""
    micro: int = 0
    """Of a step traced with gradient accumulation (:func:`trace_step`'s ``micro_batches`` 3): the micro-batch whose
    forward, loss or backward it is (0, 1, 2: the first, the second -- its backward adds into the gradients the first
    left --, and a later one, as every micro-batch from the third runs: master-* modes add the previous micro-batch's
    half gradients into the fp32 masters there, where the second copies them), 3 for what runs once a step after them
    (the last half gradients moved to the masters, the step, the optimizer). A step without accumulation: 0."""
    live: int = 0
    """A training step's bytes alive right after this op made its outputs (its inputs still held): every storage the
    step holds then, once each -- weights, optimizer state, the batch, saved activations, gradients made so far, the
    outputs not yet freed. What the caching allocator holds at that moment, libraries' workspaces aside (0: not
    followed, an inference trace)."""
    block: int = 0
    """Which call of a repeated block's forward the op is in (counted from 1 in the trace; 0 outside one): where one
    block's ops end and the next one's begin (a checkpointed block's host time is priced per call:
    :data:`ampbench.predict.cost.CHECKPOINT_HOST`)."""
    gemm_layout: str = ""
    """A matmul's operands as ``torch.mm(a, b)`` reads them (:data:`ampbench.measure.hw.GEMM_LAYOUTS`): ``nn`` both
    row-major, ``nt``/``tn`` the second/first a transposed view, ``tt`` both; "" not a matmul. TF32 kernels (Hopper's
    take only K-major operands) and others cost by it; a GPU's sweep times the layouts a step runs."""
    weight_dtype: str = ""
    """A batch norm's weight's dtype ("" for any other op): PyTorch runs a half input on cuDNN's kernel only with fp32
    weights (amp-*, master-*), on its own with half ones (pure-*)."""
    accumulates_grad: bool = False
    """Autograd's AccumulateGrad adding a later micro-batch's gradient into the ``.grad`` a parameter holds from an
    earlier one (an ``add_`` into it in the backward): it takes the place of the ``detach`` that hands a fresh gradient
    over -- the same call, one kernel launched where that one launched none (counted on a CPU step of 200 Linear
    layers: 2,000 backward calls either way, 400 of them detaches or adds)."""


WRITE_ONLY = {"copy_", "fill_", "zero_", "_foreach_copy_", "_foreach_zero_", "normal_", "uniform_", "bernoulli_",
              "zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "scalar_tensor", "arange"}
_DTYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64"}
FP8_DTYPES = {torch.float8_e4m3fn, torch.float8_e5m2}
FP8_GEMMS = {"mm", "addmm"}
CONTIGUOUS_FIRST = {"native_layer_norm": (0,), "native_layer_norm_backward": (0, 1), "_softmax": (0,),
                    "_log_softmax": (0,), "native_group_norm": (0,)}
"""Ops whose CUDA kernel copies these arguments to contiguous memory first, when they are not (``expect_contiguous``
inside the kernel: no aten op the trace sees): the copy's bytes are the op's too. A layer norm over a permuted
tensor (ConvNeXt's channels-last blocks) pays it in eager; a compiled graph reads the permuted tensor in place."""


def fp8_data(t: torch.Tensor) -> torch.Tensor | None:
    """The fp8 payload of a torchao float8 training tensor (its ``_data``; the tensor itself reports the dtype it stands
    for, bf16), else None. A matmul of two of them is what torchao's ``Float8Linear`` runs as ``torch._scaled_mm`` on a
    GPU (traced on meta, the wrapper's ``mm`` is what the trace sees: its own dispatch runs beneath it, unseen)."""
    data = getattr(t, "_data", None)
    return data if isinstance(data, torch.Tensor) and data.dtype in FP8_DTYPES else None


def effective_bytes(t: torch.Tensor) -> int:
    """Bytes an op reads or writes for ``t``: broadcast (stride-0) dimensions read once."""
    n = 1
    for size, stride in zip(t.shape, t.stride()):
        if stride != 0:
            n *= size
    return n * t.element_size()


MATMULS = ("mm", "addmm", "bmm", "baddbmm")


def _operands(name: str, args: tuple[Any, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """A matmul's two factors (an ``addmm``'s and a ``baddbmm``'s after the added input)."""
    return (args[0], args[1]) if name in ("mm", "bmm") else (args[1], args[2])


def _gemm_shape(name: str, args: tuple[Any, ...], out: Any) -> tuple[int, int, int, int] | None:
    if name in MATMULS:
        a, b = _operands(name, args)
        return (a.shape[0] if a.dim() == 3 else 1), a.shape[-2], b.shape[-1], a.shape[-1]
    if name in ("convolution", "convolution_backward"):  # implicit GEMM: groups x (N*P*Q) x C_out/g x (C_in/g*R*S)
        out_like, w, groups = (out, args[1], args[8]) if name == "convolution" else (args[0], args[2], args[9])
        if isinstance(out_like, torch.Tensor):
            return (groups, out_like.shape[0] * math.prod(out_like.shape[2:]), w.shape[0] // groups,
                    w.shape[1] * math.prod(w.shape[2:]))
    return None


def _transposed(t: torch.Tensor) -> bool:
    """A matrix (the last two dims) that is a transposed view: its rows' elements apart, its columns' adjacent."""
    rows, cols = t.shape[-2], t.shape[-1]
    if cols == 1 or (t.stride(-1) == 1 and (rows == 1 or t.stride(-2) >= cols)):
        return False  # (row-major, or one column: either way)
    return t.stride(-2) == 1


def _gemm_layout(name: str, args: tuple[Any, ...]) -> str:
    """``nn``, ``nt``, ``tn`` or ``tt`` of a matmul's two operands (:attr:`Op.gemm_layout`); "" for any other op."""
    if name not in MATMULS:
        return ""
    return "".join("t" if _transposed(t) else "n" for t in _operands(name, args))


def _conv_shape(name: str, args: tuple[Any, ...], out: Any) -> tuple[Conv | None, int]:
    """A 2-D convolution's shape and its products (forward: 1; backward: the gradients asked for of input and
    weight)."""
    if name not in ("convolution", "convolution_backward"):
        return None, 1
    if name == "convolution":
        x, w, y, stride, transposed, groups, products = args[0], args[1], out, args[3], args[6], args[8], 1
    else:
        y, x, w, stride, transposed, groups = args[0], args[1], args[2], args[4], args[7], args[9]
        products = int(bool(args[10][0])) + int(bool(args[10][1]))
    if w.dim() != 4 or transposed or not isinstance(y, torch.Tensor):
        return None, products
    return Conv(x.shape[0], x.shape[1], x.shape[2], x.shape[3], w.shape[0], w.shape[2], w.shape[3], stride[0], groups,
                y.shape[2], y.shape[3]), products


def _rnn_flops(args: tuple[Any, ...], backward: bool) -> int:
    """A fused RNN layer (all its directions): the input, recurrent and projection matmuls per step; backward their
    weight gradients, the input's gradient where the layer's input needs one, the recurrent gradient of every step
    (the initial state is traced as a leaf that needs none)."""
    x, weights, directions = (args[0], args[3], args[5]) if not backward else (args[1], args[4], args[8])
    per = len(weights) // directions
    tokens, batch = x.shape[0] * x.shape[1], x.shape[1]
    total = 0
    for d in range(directions):
        w = weights[d * per:(d + 1) * per]
        mats = [t for t in w if t.dim() == 2]
        proj = mats[2] if len(mats) > 2 else None
        total += rnn_layer_flops(mats[0], mats[1], proj, tokens, batch, backward, bool(args[9]) if backward else False,
                                  False)
    return total


def _in_place(func: Any) -> bool:
    """The op writes into a tensor it was given (in place, or ``out=``): its schema's first argument is written."""
    return bool(func._schema.arguments) and func._schema.arguments[0].alias_info is not None


class _Recorder(TorchDispatchMode):
    def __init__(self, flop_registry: dict[Any, Any], track_live: bool = False, follow_storages: bool = False) -> None:
        super().__init__()
        self.ops: list[Op] = []
        self.phase = "step"
        self._flops = flop_registry
        self.track_live = track_live
        """Follow the bytes of the tensors the ops make while they live (an inference forward: no tensor is saved for
        a backward, each is freed when the last reference to it goes): :attr:`peak_live`."""
        self.live = self.peak_live = 0
        self.follow_storages = follow_storages
        """Follow every storage the step holds, from when it is first seen (made by an op, or :meth:`hold`) to when it
        is freed (a training step: autograd keeps saved tensors in copies of their own that share the storage, so the
        storage, not the tensor, is what lives): :attr:`held` after each op is its :attr:`Op.live`."""
        self.held = 0
        self.in_model = False
        """Whether the ops now issued are the model's own (:attr:`Op.in_model`)."""
        self.in_block = False
        """Whether they are inside a repeated block's forward (:attr:`Op.in_block`)."""
        self.micro = 0
        """The micro-batch the ops now issued belong to (:attr:`Op.micro`)."""
        self.grads: set[int] = set()
        """The storages of the gradients the model's parameters hold as a backward starts (:attr:`Op.accumulates_grad`:
        an ``add_`` into one of them in the backward)."""
        self.block_calls = 0
        """Block forwards entered so far, the one the ops now issued are in while :attr:`in_block` (:attr:`Op.block`)."""
        self._count = 0
        self._kept: dict[int, torch.Tensor] = {}
        self._ids: dict[int, int] = {}
        """Each live storage's address -> its number: a freed buffer's address taken by another is another number.
        (This holds no storage: a step's tensors are freed as a real step frees them.)"""

    def _key(self, t: torch.Tensor) -> int:
        """The buffer ``t`` is (or views): its storage's number (its identity while it lives); a wrapper subclass
        without one (torchao's float8 tensors): its payload's, else the tensor's own."""
        data = fp8_data(t)
        if data is not None:
            t = data
        try:
            storage: Any = t.untyped_storage()
            address = int(storage._cdata)
        except (RuntimeError, NotImplementedError, AttributeError):
            self._kept.setdefault(id(t), t)  # (held while recorded: its id is never taken by another tensor)
            return id(t)
        number = self._ids.get(address)
        if number is None:
            self._count += 1
            number = self._ids[address] = self._count
            size = storage.nbytes() if self.follow_storages else 0
            self.held += size
            weakref.finalize(storage, self._storage_freed, address, number, size)
        return number

    def _storage_freed(self, address: int, number: int, size: int) -> None:
        if self._ids.get(address) == number:
            del self._ids[address]
        self.held -= size

    def hold(self, tensors: Any) -> None:
        """Storages the step holds from its start (weights, optimizer state, the batch): followed from now."""
        for t in tree_flatten(tensors)[0]:
            if isinstance(t, torch.Tensor):
                self._key(t)

    def _made(self, func: Any, out: Any) -> None:
        """An op's new tensors (not views, not written in place) count while they live."""
        if _in_place(func):
            return
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and not t._is_view():
                size = t.untyped_storage().nbytes()
                self.live += size
                self.peak_live = max(self.peak_live, self.live)
                weakref.finalize(t, self._freed, size)

    def _freed(self, size: int) -> None:
        self.live -= size

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func._overloadpacket.__name__ if hasattr(func, "_overloadpacket") else str(func)
        if self.track_live and not is_view(func) and hasattr(func, "_schema"):
            self._made(func, out)
        if self.follow_storages:
            self.hold(out)
        if name in ZERO_COST or is_view(func):
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
        for i in CONTIGUOUS_FIRST.get(name, ()):
            if isinstance(args[i], torch.Tensor) and not args[i].is_contiguous():  # (the kernel's own copy)
                read, written = read + effective_bytes(args[i]), written + effective_bytes(args[i])
        floats = [t.dtype for t in ins if t.is_floating_point()]
        dtype = _DTYPES.get(floats[0], "fp32") if floats else "fp32"
        if name in FP8_GEMMS:
            operands = args[:2] if name == "mm" else args[1:3]
            data = [fp8_data(t) for t in operands]
            if all(d is not None for d in data):  # torch._scaled_mm on a GPU: fp8 operands (1 byte), the fp8 math
                dtype = "fp8"
                read = sum(effective_bytes(d) for d in data) + sum(  # (+ the bias of an addmm, and the scales)
                    effective_bytes(t) for t in ins if fp8_data(t) is None) + sum(
                    effective_bytes(t._scale) for t in operands if isinstance(getattr(t, "_scale", None), torch.Tensor))
        causal, rnn, tensors = False, None, 1
        if func is FUSED_ATTENTION:
            flops, causal = sdpa_forward_flops(args[0].shape, args[1].shape, args[2].shape), bool(args[4])
        elif func is FUSED_ATTENTION_BACKWARD:
            flops, causal = sdpa_backward_flops(None, args[1].shape, args[2].shape, args[3].shape), bool(args[6])
        elif func in (RNN_LAYER, RNN_LAYER_BACKWARD):
            flops = _rnn_flops(args, func is RNN_LAYER_BACKWARD)
            x, weights = (args[0], args[3]) if func is RNN_LAYER else (args[1], args[4])
            tensors = args[5 if func is RNN_LAYER else 8]
            rnn = (x.shape[0], x.shape[1], x.shape[2], weights[1].shape[0], weights[1].shape[1])
        else:
            fn = self._flops.get(func._overloadpacket)
            flops = int(fn(*args, **kwargs, out_val=out)) if fn is not None else 0
        if name.startswith(("_foreach", "_fused", "_amp_foreach")) and isinstance(args[0], (list, tuple)):
            tensors = len(args[0])
        nchw = _nchw(name, args)
        conv, products = _conv_shape(name, args, out)
        reads = tuple((self._key(t), effective_bytes(t)) for t in read_from)
        writes = tuple((self._key(t), effective_bytes(t)) for t in outs)
        reduces = bool(ins and outs) and max(t.numel() for t in outs) < max(t.numel() for t in ins)
        accumulates = (name == "add_" and self.phase == "backward" and bool(self.grads)
                       and isinstance(args[0], torch.Tensor) and self._key(args[0]) in self.grads)
        self.ops.append(Op(func._overloadpacket._qualified_op_name.replace("::", "."), self.phase, flops, read, written,
                           dtype, tensors, _gemm_shape(name, args, out), nchw, conv, products, causal, rnn, reads,
                           writes, reduces, self.in_model, self.in_block, not _in_place(func), self.micro,
                           self.held, self.block_calls if self.in_block else 0, _gemm_layout(name, args),
                           _norm_weight_dtype(name, args), accumulates))
        return out


# ---- the step ------------------------------------------------------------------------------------------------------
@dataclass
class Trace:
    ops: list[Op]
    batch_size: int
    weights_bytes: int
    """Parameters and buffers, each storage once (tied weights are one)."""
    grads_bytes: int
    """The gradients on the model where the optimizer steps from (master-* modes: moved to the fp32 masters)."""
    optimizer_bytes: int
    """The optimizer's state; master-* modes: plus the fp32 master weights and their gradients (as ``run`` counts)."""
    master_bytes: int
    """Of ``optimizer_bytes``: the fp32 master weights and their gradients."""
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
    backward_grads_bytes: int = 0
    """The gradients the backward leaves on the model (master-* modes: the half ones, beside the masters' buffers)."""
    stepped_bytes: int = 0
    """The tensors the optimizer steps (the model's parameters; master-* modes: the fp32 masters)."""
    state_bytes: int = 0
    """The optimizer's own state (moments, step counters), without master copies."""
    fp8_layers: str | None = None
    """fp8 modes: which Linear layers became Float8Linear and why others did not (``run``'s ``fp8_layers``)."""
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    """How long the trace took here."""
    inference: bool = False
    """A forward alone, in eval mode without autograd (:func:`trace_inference`): ``activation_bytes`` is the peak of
    the tensors the forward holds at once, the input batch included; no gradients, no optimizer."""
    outputs: tuple[int, ...] = ()
    """The storages of the model's outputs (:attr:`Op.writes` keys): what its forward returns is written, read or
    not (an inference forward's output is read by no traced op)."""
    checkpointing: str = "off"
    """How the model's repeated blocks were checkpointed when traced (``--checkpointing``: off, blocks, selective)."""
    micro_batches: int = 1
    """Micro-batches of ``batch_size`` traced before the optimizer's step (:attr:`Op.micro`): 3 for a step with
    gradient accumulation (:func:`trace_step`), else 1."""
    accumulate: int = 1
    """The micro-batches of the step this trace prices (:func:`ampbench.predict.accumulation.accumulated`: the traced
    ones spelt out to that many by :func:`~ampbench.predict.accumulation.step_ops`); 1 without accumulation."""
    fsdp: FsdpSplit | None = None
    """The model's trainable parameters' elements (each shared one once: what a data-parallel strategy moves) by the
    FSDP2 unit that would all-gather them, as ``run`` wraps the model (:mod:`ampbench.distributed.units`)."""

    @property
    def live_peak_bytes(self) -> int:
        """A training step's peak: the most bytes alive at once after any op (:attr:`Op.live`; :func:`peak_ops`), the
        tensors held from the step's start included -- what the caching allocator's peak is, libraries' workspaces
        aside (0: an inference trace, whose peak is :attr:`activation_bytes`)."""
        return max((o.live for o in peak_ops(self.ops, self.fusable)), default=0)

    @property
    def held_bytes(self) -> int:
        """What the step holds whatever the batch: weights, gradients as the backward leaves them, optimizer state and
        master copies."""
        return self.weights_bytes + max(self.grads_bytes, self.backward_grads_bytes) + self.optimizer_bytes


class UntraceableModel(AmpbenchError):
    """The model reads a tensor's value while it runs (``.item()``, numpy, a data-dependent shape): a step on meta
    tensors, which hold no values, cannot follow it."""


def to_meta(model: nn.Module) -> nn.Module:
    """``model`` with its parameters and buffers on the meta device, in place, each shared tensor still shared
    (:func:`~ampbench.workloads.meta_check.meta_twins`)."""
    twins = meta_twins(model)
    for module in model.modules():
        for table in (module._parameters, module._buffers):
            for key, t in table.items():
                if t is not None and id(t) in twins:
                    table[key] = twins[id(t)]
    return model


def meta_batch(wl: Workload, batch_size: int) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
    """A batch of ``batch_size`` samples on meta, shaped and typed as the workload's data: nothing that grows with the
    batch is made on the host."""
    one = wl.train_data.subset(0, 1)
    inputs = tuple(torch.empty((batch_size, *t.shape[1:]), dtype=t.dtype, device=META) for t in one.inputs)
    t = one.targets
    return inputs, torch.empty((batch_size, *t.shape[1:]), dtype=t.dtype, device=META)


_LAID_OUT_BY = {"convolution": slice(0, 2), "convolution_backward": slice(1, 3), "native_batch_norm_backward": slice(1, 2)}
"""The arguments whose layout picks a kernel's: a convolution's input and weight (its backward's, after the output's
gradient), a batch norm's input (ATen's backward's second argument; every other batch norm op's first)."""


def _norm_weight_dtype(name: str, args: tuple[Any, ...]) -> str:
    """A batch norm op's weight's dtype (:attr:`Op.weight_dtype`; its backward's third argument, the forward's second);
    "" for any other op or a norm without weights."""
    if "batch_norm" not in name:
        return ""
    w = args[2] if name.endswith("backward") and len(args) > 2 else args[1] if len(args) > 1 else None
    return _DTYPES.get(w.dtype, "") if isinstance(w, torch.Tensor) else ""


def _nchw(name: str, args: tuple[Any, ...]) -> bool:
    """Whether a 2-D convolution or a batch norm runs NCHW kernels on CUDA: none of the tensors that pick its layout
    suggests channels-last (PyTorch's rule, ``cudnn_conv_suggest_memory_format``: a convolution goes channels-last
    where its input *or* its weight does -- and the gradient arrives in whatever layout; ``suggest_memory_format``
    tells a 1x1 NCHW weight, contiguous in both senses, from a channels-last one). Until 2026-11-29 the first argument
    decided: a backward's output gradient, which in a channels-last model often arrives NCHW (from a mean over the
    image, a loss), priced its convolution as NCHW -- a Tensor Core one with the conversion both ways."""
    if name not in _LAID_OUT_BY and "batch_norm" not in name:
        return False
    laid = [t for t in args[_LAID_OUT_BY.get(name, slice(0, 1))] if isinstance(t, torch.Tensor) and t.dim() == 4]
    return bool(laid) and all(suggest_memory_format(t) != torch.channels_last for t in laid)


def _meta_model(wl: Workload, channels_last: bool) -> nn.Module:
    model = to_meta(wl.model)
    return model.to(memory_format=torch.channels_last) if channels_last else model


def _meta_inputs(wl: Workload, batch_size: int, channels_last: bool) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
    """The meta batch; with ``channels_last``, its 4-D float inputs in that layout (as ``--memory-format`` runs)."""
    inputs, targets = meta_batch(wl, batch_size)
    if channels_last:
        inputs = tuple(t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 and t.is_floating_point() else t
                       for t in inputs)
    return inputs, targets


def trace_step(wl: Workload, precision: str, batch_size: int, loss_scale: Any = None,
               mp_options: dict[str, Any] | None = None, channels_last: bool = False,
               rules: AutocastRules = CUDA_RULES, kernels: bool = True, micro_batches: int = 1) -> Trace:
    """Trace one steady-state training step of ``wl`` (built on meta: :func:`build_meta`) in ``precision``, as CUDA
    runs it (``rules``, ``kernels``: :class:`~ampbench.predict.cuda_dispatch.CudaDispatch`; the CPU's rules and no
    kernel choices for the oracle tests, which compare with a real CPU step). ``micro_batches`` 3: the step as
    ``ampbench train --grad-accum`` runs it, micro-batches of ``batch_size`` before the optimizer's step, each op
    marked with its micro-batch (:attr:`Op.micro`): the first, the second and a third -- what every later micro-batch
    of a longer accumulation runs (:func:`ampbench.predict.accumulation.accumulated` prices any number from them) --,
    the peak the step's, the gradients of the micro-batches before held."""
    if micro_batches not in (1, 3):
        raise ValueError(f"micro_batches is 1 or 3 (a longer accumulation repeats the third), got {micro_batches}")
    return _timed(wl, lambda: _trace(wl, precision, batch_size, loss_scale, mp_options, channels_last, rules, kernels,
                                     micro_batches))


def trace_inference(wl: Workload, precision: str, batch_size: int, channels_last: bool = False,
                    rules: AutocastRules = CUDA_RULES, kernels: bool = True) -> Trace:
    """Trace one inference forward of ``wl`` (built on meta) in ``precision``, as CUDA runs it: the model set up by
    the precision's recipe (pure-* and master-* models cast to half, as inference runs them; amp-* under autocast),
    in eval mode (dropout off, batch norm on its running statistics), under ``torch.no_grad()``: no activation is
    saved, each intermediate freed when its last reference goes. The loss is not computed."""
    return _timed(wl, lambda: _trace_inference(wl, precision, batch_size, channels_last, rules, kernels))


def _timed(wl: Workload, trace: Callable[[], Trace]) -> Trace:
    """``trace()`` timed; a model that reads a tensor's value while it runs: one line (:class:`UntraceableModel`)."""
    t0 = time.perf_counter()
    try:
        out = trace()
        out.seconds = time.perf_counter() - t0
        return out
    except (RuntimeError, NotImplementedError, TypeError) as e:
        why = _value_read(e)
        if why is None:
            raise
        raise UntraceableModel(f"{wl.name} cannot be predicted: {why} at {_where(e)} (predict runs the model on meta "
                               "tensors, which hold no values; measure it with ampbench run)") from None


def _trace_inference(wl: Workload, precision: str, batch_size: int, channels_last: bool, rules: AutocastRules,
                     kernels: bool) -> Trace:
    model = _meta_model(wl, channels_last)
    mp = MixedPrecision(precision, device=META, check_finite=False)
    model, _ = mp.setup(model, torch.optim.SGD(model.parameters(), lr=0.0))  # (the recipe's casts; no step is taken)
    model.eval()
    inputs, _ = _meta_inputs(wl, batch_size, channels_last)
    counter = FlopCounterMode(display=False, custom_mapping=custom_mapping())
    rec = _Recorder(counter.flop_registry, track_live=True)
    autocast_dtype = mp.recipe.compute_dtype if mp.recipe.autocasts else None
    with compile_as_no_op(), torch.no_grad(), CudaDispatch(autocast_dtype, rules, kernels) as cuda, \
            MetaMemo(cuda.meta_regime):
        with cuda.autocast():
            wl.call_model(model, inputs)  # (a warm-up: lazy modules and caches made once, as in a steady state)
        with rec, cuda.autocast():
            rec.phase, rec.in_model = "forward", True
            out = wl.call_model(model, inputs)
            outputs = tuple(rec._key(t) for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor))
            del out
    weights = tensor_bytes([*model.parameters(), *model.buffers()])
    batch_bytes = tensor_bytes(inputs)
    temporary = max((o.bytes_written for o in rec.ops if o.allocates), default=0)
    return Trace(rec.ops, batch_size, weights, 0, 0, 0, rec.peak_live + batch_bytes, temporary, "none", False,
                 inference=True, outputs=outputs)


def _value_read(e: BaseException) -> str | None:
    text = str(e)
    # (the shapes that follow values: a boolean mask's indexing, torch.where(mask) and nonzero -- a mixture of
    # experts' routing --, unique, masked_select, bincount, repeat_interleave by a tensor: meta holds no values, and
    # torch's meta kernels for them raise; each was a traceback)
    no_meta = re.search(r"(aten::\w+): attempted to run this operator with Meta tensors", text)
    if no_meta:
        return (f"it runs {no_meta.group(1)}, which has no meta kernel (an output shaped by tensor values, as "
                "unique, masked_select or bincount)")
    marks = {"item()": "it reads a tensor's value (.item())", "numpy": "it converts a tensor to numpy",
             "data-dependent": "its shapes depend on tensor values",
             "torch.nonzero()": "its shapes depend on tensor values (torch.nonzero: a boolean mask's indexing, "
                                "torch.where(mask), argwhere -- a mixture of experts' routing)",
             "without output_size": "its shapes depend on tensor values (repeat_interleave by a tensor, without "
                                    "output_size)",
             "meta tensors": "it reads a tensor's value",
             "Cannot copy out of meta": "it copies a tensor to the host", "can't convert meta": "it converts a tensor to "
             "a Python value", "Boolean value of Tensor": "it branches on a tensor's value"}
    return next((why for mark, why in marks.items() if mark in text), None)


def _where(e: BaseException) -> str:
    """The innermost frame of the model's own code (not torch's, not ampbench's) where ``e`` was raised."""
    frames = traceback.extract_tb(e.__traceback__)
    own = [f for f in frames if "/torch/" not in f.filename and "/ampbench/" not in f.filename]
    f = (own or frames)[-1]
    return f"{f.filename}:{f.lineno} ({f.line or f.name})"


def _trace(wl: Workload, precision: str, batch_size: int, loss_scale: Any, mp_options: dict[str, Any] | None,
           channels_last: bool, rules: AutocastRules, kernels: bool, micro_batches: int = 1) -> Trace:
    model = _meta_model(wl, channels_last)
    optimizer = wl.make_optimizer(model.parameters())
    mp = MixedPrecision(precision, loss_scale=loss_scale, device=META, **(mp_options or {}))
    model, optimizer = mp.setup(model, optimizer)  # (an optimizer_state: torchao's optimizer in its place)
    fusable = type(optimizer) in FUSABLE and not optimizer.defaults.get("differentiable")
    model.train()
    inputs, targets = _meta_inputs(wl, batch_size, channels_last)
    counter = FlopCounterMode(display=False, custom_mapping=custom_mapping())
    rec = _Recorder(counter.flop_registry, follow_storages=True)
    autocast_dtype = mp.recipe.compute_dtype if mp.recipe.autocasts else None
    held: list[Any] = []
    backward_grads: list[int] = []

    def step(cuda: CudaDispatch, record: bool) -> list[int]:
        optimizer.zero_grad(set_to_none=True)
        act: list[int] = [0]
        for micro in range(micro_batches):
            rec.micro = micro
            # (the saved activations of a micro-batch's forward and backward, as `ampbench run` counts them over its
            # step: the loss scaling saves its scale; with accumulation, the last micro-batch's -- each saves as much)
            with saved_activations(model) if record else contextlib.nullcontext([0]) as counted:
                rec.phase, rec.in_model = "forward", True
                with cuda.autocast():
                    out = wl.call_model(model, inputs)
                    rec.phase, rec.in_model = "loss", False
                    _on_model_backward(out, rec)
                    loss = wl.loss_fn(out, targets)
                    if micro_batches > 1:  # (ampbench train's weighting: each micro-batch's share of the samples)
                        loss = loss * (1 / micro_batches)
                    del out  # (run's step holds no reference to the model's output past the loss: nor does this one)
                rec.phase = "backward"
                rec.grads = {rec._key(p.grad) for p in model.parameters() if p.grad is not None}
                mp.backward(loss)  # (master-* modes: an earlier micro-batch's half gradients moved to the masters first)
                rec.in_model = False
            act = counted
        rec.micro = micro_batches if micro_batches > 1 else 0  # (what runs once a step, after the micro-batches)
        if record:  # the split as `ampbench run` reads it: between backward and step, master gradients moved
            backward_grads.append(_grads(model))
            mp.move_grads(optimizer)
            held.append(state_bytes(model, optimizer, mp.master_params()))
        rec.phase = "step"
        mp.step(optimizer)
        return act

    pre = optimizer.register_step_pre_hook(lambda *_: setattr(rec, "phase", "optimizer"))
    post = optimizer.register_step_post_hook(lambda *_: setattr(rec, "phase", "step"))
    def entered(*_: Any) -> None:
        rec.in_block, rec.block_calls = True, rec.block_calls + 1

    block_hooks = [h for b in blocks(model) for h in (
        b.register_forward_pre_hook(entered),
        b.register_forward_hook(lambda *_: setattr(rec, "in_block", False)))]
    with compile_as_no_op(), _closing(pre, post, *block_hooks), CudaDispatch(autocast_dtype, rules, kernels) as cuda, \
            MetaMemo(cuda.meta_regime):
        step(cuda, False)  # (torchao compiles its update: traced op by op; the optimizer's state is created here)
        rec.hold(held_from_start(model, optimizer, mp, (inputs, targets)))
        rec.block_calls = 0  # (the recorded step's block calls counted from 1)
        with rec, _fused_update(optimizer, rec) if fusable else contextlib.nullcontext():
            act = step(cuda, True)
    backward = [o for o in rec.ops if o.phase == "backward"]
    if backward and not any(o.in_model for o in backward):  # (no output of the model reached the backward by a hook:
        for o in backward:  # its backward is the model's, the loss's few ops with it)
            o.in_model = True
    model_ids = {id(p) for p in model.parameters()}
    masters = [m for m in mp.master_params() if id(m) not in model_ids]
    stepped, state = _stepped_and_state(optimizer)
    temporary = max((o.bytes_written for o in rec.ops if o.phase in ("forward", "loss", "backward") and o.allocates),
                    default=0)
    split = held[0]
    return Trace(rec.ops, batch_size, split.weights, split.grads, split.optimizer,
                 tensor_bytes([*masters, *(m.grad for m in masters)]), act[0], temporary, type(optimizer).__name__,
                 fusable, len(state), len(stepped), torchao=is_torchao(optimizer),
                 optimizer_states=describe_states(optimizer), backward_grads_bytes=backward_grads[0],
                 stepped_bytes=tensor_bytes(stepped), state_bytes=tensor_bytes(state),
                 fsdp=fsdp_split(model, mp),  # (as run counts its FSDP bytes)
                 fp8_layers=mp.fp8_layers.summary() if mp.fp8_layers is not None else None,
                 checkpointing=checkpoint_policy(model), micro_batches=micro_batches)


def held_from_start(model: nn.Module, optimizer: torch.optim.Optimizer, mp: MixedPrecision, batch: Any) -> list[Any]:
    """What a training step holds from its start, as the allocator holds it when a measured step starts: weights, the
    gradients the step before left, optimizer state, master copies and their gradients' buffers (kept across steps),
    the batch."""
    masters = mp.master_params()
    return [*model.parameters(), *model.buffers(), *(p.grad for p in model.parameters()),
            *(t for st in optimizer.state.values() for t in st.values()), *masters, *(m.grad for m in masters),
            *mp.master_grad_buffers(), batch]


def _stepped_and_state(optimizer: torch.optim.Optimizer) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The tensors ``optimizer`` steps and its state's tensors."""
    stepped = [p for g in optimizer.param_groups for p in g["params"]]
    return stepped, [t for s in optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor)]


def fused_update(name: str, stepped_bytes: int, state_bytes: int, tensors: int) -> Op:
    """An optimizer's update as one kernel: each stepped tensor and its gradient read once, its state read and written
    once, the tensor written once (torch's fused kernels, the engine's direct step, torchao's compiled update)."""
    return Op(name, "optimizer", 0, 2 * stepped_bytes + state_bytes, stepped_bytes + state_bytes, "fp32",
              max(1, tensors))


@contextlib.contextmanager
def _fused_update(optimizer: torch.optim.Optimizer, rec: _Recorder) -> Iterator[None]:
    """The recorded step's update of a fusable optimizer, as the one kernel CUDA runs it (``aten._fused_adamw_``...:
    :func:`fused_update`). On meta torch steps it tensor by tensor (no fused kernel there) -- a quarter of a trace's
    time, ops that the cost model replaces with the fused kernel (``cost._fused_optimizer``) and that the peak leaves
    out (:func:`peak_ops`) -- so the recorded step does not run it: the first step made the state, and on meta an
    update changes no value."""
    stepped, state = _stepped_and_state(optimizer)
    name = f"aten._fused_{type(optimizer).__name__.lower()}_"  # (torch's: _fused_adam_, _fused_adamw_, _fused_sgd_...)

    def step(*_: Any, **__: Any) -> None:
        rec.ops.append(replace(fused_update(name, tensor_bytes(stepped), tensor_bytes(state), len(stepped)),
                               allocates=False, micro=rec.micro, live=rec.held))

    optimizer.step = step  # type: ignore[method-assign,assignment]  # (the instance's: the class's is left as it is)
    try:
        yield
    finally:
        del optimizer.step


def peak_ops(ops: list[Op], fusable: bool) -> list[Op]:
    """The ops whose :attr:`Op.live` a step's peak is taken over: all of them, but a fusable optimizer's (CUDA runs
    it as one fused kernel that makes no tensor; the meta trace steps it tensor by tensor, each update's temporaries
    made and freed)."""
    return [o for o in ops if not (fusable and o.phase == "optimizer")]


def _on_model_backward(out: Any, rec: _Recorder) -> None:
    """The backward reaches the model's own ops once the gradient of its output is made (the loss's backward before
    it is not the model's: ``torch.compile(model)`` leaves the loss eager): ``rec.in_model`` is set then."""
    def entered(grad: torch.Tensor) -> None:
        rec.in_model = True

    for t in tree_flatten(out)[0]:
        if isinstance(t, torch.Tensor) and t.requires_grad:
            t.register_hook(entered)


def _grads(model: nn.Module) -> int:
    return tensor_bytes(p.grad for p in model.parameters())


@contextlib.contextmanager
def _closing(*hooks: Any) -> Iterator[None]:
    try:
        yield
    finally:
        for h in hooks:
            h.remove()
