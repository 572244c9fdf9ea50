"""``ampbench hw --calibrate``: this device's own kernel table -- the kernels ``predict``'s cost model prices, timed
at the shapes models run them, in every dtype the device computes in.

Each kernel class the cost model has (:mod:`ampbench.predict.kernels`) gets cases at the shapes of the models people
train (ResNet-50's convolutions, BERT's and GPT-2's GEMMs and attention, the bigLSTM's layers, a wide MLP's GEMMs):

- ``gemm`` (``torch.mm``) and ``bmm``: fp32, tf32, fp16, bf16 and fp8 (``torch._scaled_mm``, where it runs);
- ``conv``: forward, data gradient and weight gradient (``aten.convolution_backward``), NCHW and channels-last,
  1x1/3x3/7x7, strided, grouped and depthwise, per dtype (cuDNN's bf16 kernels are where bf16 runs slower than fp16);
- ``norm`` (LayerNorm, BatchNorm, GroupNorm), ``elementwise`` (add, GELU, a cast), ``softmax``, forward and backward;
- ``attention``: ``scaled_dot_product_attention`` (flash / memory-efficient on a GPU), forward and forward+backward;
- ``rnn``: a fused LSTM layer (cuDNN), forward and forward+backward;
- ``optimizer``: torch's fused AdamW and SGD over a parameter set;
- ``launch``: the device time of a near-empty kernel, and the host's time to issue one (:mod:`host_ops` per op).

On a GPU every case also records the host's time to issue one call (:func:`issue_us`): the library's own host path
(cuDNN's plan lookup, cuBLAS's heuristics, an LSTM's descriptors) differs by kind, and a launch-bound step is its
host's time -- ``predict`` adds each kind's issue beyond the per-op figure's mix
(:meth:`~ampbench.predict.measured_kernels.KernelTable.host_extra_us`).

On a GPU each case is captured in a CUDA graph of several calls and replayed between CUDA events (a small kernel's
launch is not its time), falling back to calls between events where capture refuses; on a CPU, ``perf_counter``
around calls. The board's power per kernel class and dtype is read apart from the timing (:func:`power_pass`): the
case that represents each (its highest-rate case: :func:`power_case`) replayed back to back for 2 s (NVML's counter
advances in steps), the energy counter around the replays alone -- no gaps between cases, no host work --, and the
board idle for as long. The table goes to the store (``calibrations``) and to CSV with the environment (driver, CUDA,
cuDNN, torch, clocks); ``ampbench predict`` prices a GPU from its own table where one exists. The sweep runs on a CPU
too (small shapes, the same code), so its interpolation and storage have oracles without a GPU.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from ampbench import progress
from ampbench.measure import host_ops
from ampbench.measure.energy import MIN_WINDOW_S, Energy, EnergyMeter
from ampbench.measure.env import environment
from ampbench.measure.hw import DTYPES, event_seconds, fp8_gemm_runs, matmul, time_calls
from ampbench.measure.kernel_power import IDLE, REPLAY, power_key
from ampbench.measure.timing import captured, on_device
from ampbench.precision.tf32_flags import tf32_scope

CLASSES = ("gemm", "bmm", "conv", "norm", "elementwise", "softmax", "attention", "rnn", "optimizer", "launch")


@dataclass(frozen=True)
class Case:
    """One kernel at one shape and dtype."""

    kind: str
    """The cost model's kernel class (:data:`CLASSES`)."""
    op: str
    """What runs: ``mm``, ``conv_fwd``, ``conv_dgrad``, ``conv_wgrad``, ``layer_norm_fwd``, ..."""
    dtype: str
    """fp32, tf32 (fp32 storage, TF32 math), fp16, bf16, fp8."""
    shape: dict[str, Any]
    flops: float
    bytes: float
    """Bytes the kernel must move at least (its inputs read and outputs written once)."""
    layout: str = ""
    """nchw or nhwc for convolutions and BatchNorm."""
    make: Callable[[torch.device], Callable[[], object]] = field(default=lambda d: (lambda: None), repr=False,
                                                                 compare=False)


@dataclass
class Timed:
    """A case measured: microseconds a call, and what that makes of its FLOPs and bytes."""

    kind: str
    op: str
    dtype: str
    layout: str
    shape: dict[str, Any]
    flops: float
    bytes: float
    us: float | None
    calls: int
    timer: str
    """cuda_graph (replays of a captured graph), cuda_events (calls between events), perf_counter (a CPU)."""
    error: str = ""
    workspace_bytes: int | None = None
    """What one call allocated and freed before it returned (cuDNN's convolution and RNN workspaces, a backward's
    intermediates): its allocator peak over what it left allocated. CUDA only (None elsewhere)."""
    host_us: float | None = None
    """The host's time to issue one call, microseconds (:func:`issue_us`: its Python, the dispatcher and the library's
    own host path -- cuDNN's plan lookup, cuBLAS's heuristics -- with the GPU's queue never full). CUDA only: on a CPU
    the call computes on the host, and there is no issue apart from it."""

    @property
    def tflops(self) -> float | None:
        return self.flops / self.us / 1e6 if self.us and self.flops else None

    @property
    def gbps(self) -> float | None:
        return self.bytes / self.us / 1e3 if self.us and self.bytes else None

    def row(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(tflops=self.tflops, gbps=self.gbps)
        return d


# -- cases ---------------------------------------------------------------------------------------------------------
def _rand(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, grad: bool = False,
          channels_last: bool = False) -> torch.Tensor:
    t = torch.randn(shape, device=device, dtype=torch.float32).to(dtype)
    if channels_last:
        t = t.to(memory_format=torch.channels_last)
    return t.requires_grad_(grad)


def _size(dtype: str) -> int:
    return DTYPES[dtype].itemsize


def gemm_case(m: int, n: int, k: int, dtype: str, batch: int = 1, layout: str = "") -> Case:
    """``batch`` x (m x k) @ (k x n); fp8: ``torch._scaled_mm`` with unit scales and a bf16 output (as fp8 training
    runs its GEMMs); ``layout``: ``nt`` or ``tn`` where an operand is a transposed view (:data:`~ampbench.measure.hw.
    GEMM_LAYOUTS`; "" the plain ``nn`` case every table has)."""
    def make(device: torch.device) -> Callable[[], object]:
        return matmul(m, n, k, dtype, device, batch, layout or "nn")

    out_size = 2 if dtype == "fp8" else _size(dtype)
    return Case("bmm" if batch > 1 else "gemm", "bmm" if batch > 1 else "mm", dtype,
                {"batch": batch, "m": m, "n": n, "k": k}, 2.0 * batch * m * n * k,
                float(batch * ((m * k + k * n) * _size(dtype) + m * n * out_size)), layout, make=make)


@dataclass(frozen=True)
class ConvShape:
    batch: int
    cin: int
    cout: int
    size: int
    kernel: int
    stride: int = 1
    groups: int = 1

    @property
    def out(self) -> int:
        return (self.size + 2 * (self.kernel // 2) - self.kernel) // self.stride + 1

    @property
    def flops(self) -> float:
        return 2.0 * self.batch * self.cout * self.out**2 * (self.cin // self.groups) * self.kernel**2

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def conv_case(s: ConvShape, dtype: str, op: str, channels_last: bool) -> Case:
    """One convolution's forward, data gradient or weight gradient (``aten.convolution_backward`` with one output
    asked for: the kernels autograd runs)."""
    pad = s.kernel // 2

    def make(device: torch.device) -> Callable[[], object]:
        t = DTYPES[dtype]
        x = _rand((s.batch, s.cin, s.size, s.size), t, device, channels_last=channels_last)
        w = _rand((s.cout, s.cin // s.groups, s.kernel, s.kernel), t, device, channels_last=channels_last) * 0.1
        if op == "conv_fwd":
            return lambda: F.conv2d(x, w, None, s.stride, pad, 1, s.groups)
        gy = _rand((s.batch, s.cout, s.out, s.out), t, device, channels_last=channels_last)
        mask = [op == "conv_dgrad", op == "conv_wgrad", False]
        return lambda: torch.ops.aten.convolution_backward(gy, x, w, None, [s.stride] * 2, [pad] * 2, [1, 1], False,
                                                           [0, 0], s.groups, mask)

    size = _size(dtype)
    io_bytes = (s.batch * s.cin * s.size**2 + s.cout * (s.cin // s.groups) * s.kernel**2
                + s.batch * s.cout * s.out**2) * size
    return Case("conv", op, dtype, s.as_dict(), s.flops, float(io_bytes), "nhwc" if channels_last else "nchw",
                make=make)


def _fwd_bwd(build: Callable[[torch.device], tuple[Callable[[], torch.Tensor], list[torch.Tensor]]],
             backward: bool) -> Callable[[torch.device], Callable[[], object]]:
    """A case's call: the forward alone, or forward and backward (``torch.autograd.grad`` of the output against a
    fixed gradient: fresh gradients each call, nothing accumulated)."""
    def make(device: torch.device) -> Callable[[], object]:
        fwd, inputs = build(device)
        if not backward:
            def run() -> object:
                with torch.no_grad():
                    return fwd()
            return run
        out = fwd()
        gy = torch.ones_like(out)
        return lambda: torch.autograd.grad(fwd(), inputs, gy)

    return make


def memory_case(kind: str, op: str, dtype: str, shape: dict[str, Any], elements: int, passes: float,
                build: Callable[[torch.device], tuple[Callable[[], torch.Tensor], list[torch.Tensor]]],
                backward: bool = False, layout: str = "", flops: float = 0.0) -> Case:
    """A memory-bound kernel: ``elements`` read and written ``passes`` times (forward; x3 with its backward)."""
    size = _size(dtype)
    moved = elements * size * passes * (3.0 if backward else 1.0)
    return Case(kind, op + ("_fwd_bwd" if backward else "_fwd"), dtype, shape, flops, moved, layout,
                make=_fwd_bwd(build, backward))


def layer_norm_case(rows: int, width: int, dtype: str, backward: bool) -> Case:
    def build(device: torch.device) -> tuple[Callable[[], torch.Tensor], list[torch.Tensor]]:
        x = _rand((rows, width), DTYPES[dtype], device, grad=backward)
        w = torch.ones(width, device=device, dtype=DTYPES[dtype], requires_grad=backward)
        return (lambda: F.layer_norm(x, (width,), w, None)), [x, w]

    return memory_case("norm", "layer_norm", dtype, {"rows": rows, "width": width}, rows * width, 2.0, build, backward)


def batch_norm_case(b: int, c: int, size: int, dtype: str, backward: bool, channels_last: bool) -> Case:
    """Training BatchNorm of a half (or fp32) input with fp32 parameters: what amp-* and master-* run."""
    def build(device: torch.device) -> tuple[Callable[[], torch.Tensor], list[torch.Tensor]]:
        x = _rand((b, c, size, size), DTYPES[dtype], device, grad=backward, channels_last=channels_last)
        w = torch.ones(c, device=device, requires_grad=backward)
        bias = torch.zeros(c, device=device, requires_grad=backward)
        mean, var = torch.zeros(c, device=device), torch.ones(c, device=device)
        return (lambda: F.batch_norm(x, mean, var, w, bias, training=True)), [x, w, bias]

    return memory_case("norm", "batch_norm", dtype, {"batch": b, "channels": c, "size": size}, b * c * size * size,
                       2.0, build, backward, "nhwc" if channels_last else "nchw")


def group_norm_case(b: int, c: int, size: int, groups: int, dtype: str, backward: bool) -> Case:
    def build(device: torch.device) -> tuple[Callable[[], torch.Tensor], list[torch.Tensor]]:
        x = _rand((b, c, size, size), DTYPES[dtype], device, grad=backward)
        w = torch.ones(c, device=device, dtype=DTYPES[dtype], requires_grad=backward)
        return (lambda: F.group_norm(x, groups, w, None)), [x, w]

    return memory_case("norm", "group_norm", dtype, {"batch": b, "channels": c, "size": size, "groups": groups},
                       b * c * size * size, 2.0, build, backward)


def elementwise_case(op: str, elements: int, dtype: str) -> Case:
    """add (two inputs, one output), gelu (one in, one out), a cast of a ``dtype`` tensor to fp32 (``to_fp32``) and of
    an fp32 tensor to ``dtype`` (``to_half``): autocast's two directions."""
    def build(device: torch.device) -> tuple[Callable[[], torch.Tensor], list[torch.Tensor]]:
        x = _rand((elements,), torch.float32 if op == "to_half" else DTYPES[dtype], device)
        y = _rand((elements,), DTYPES[dtype], device)
        fn = {"add": lambda: x + y, "gelu": lambda: F.gelu(x), "to_fp32": lambda: x.float(),
              "to_half": lambda: x.to(DTYPES[dtype])}[op]
        return fn, []

    # (bytes over 2 x elements of ``dtype``: a cast moves a 4-byte value one way and a 2-byte one the other)
    passes = {"add": 1.5, "gelu": 1.0, "to_fp32": 1.5, "to_half": 1.5}[op]
    return memory_case("elementwise", op, dtype, {"elements": elements}, elements, 2.0 * passes, build)


def softmax_case(rows: int, width: int, dtype: str, backward: bool) -> Case:
    def build(device: torch.device) -> tuple[Callable[[], torch.Tensor], list[torch.Tensor]]:
        x = _rand((rows, width), DTYPES[dtype], device, grad=backward)
        return (lambda: torch.softmax(x, dim=-1)), [x]

    return memory_case("softmax", "softmax", dtype, {"rows": rows, "width": width}, rows * width, 2.0, build, backward)


def attention_case(b: int, heads: int, seq: int, dim: int, dtype: str, causal: bool, backward: bool) -> Case:
    """``scaled_dot_product_attention`` as a transformer calls it (the backend torch picks: flash or memory-efficient
    on a GPU for half inputs)."""
    def build(device: torch.device) -> tuple[Callable[[], torch.Tensor], list[torch.Tensor]]:
        q, k, v = (_rand((b, heads, seq, dim), DTYPES[dtype], device, grad=backward) for _ in range(3))
        return (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)), [q, k, v]

    flops = 4.0 * b * heads * seq * seq * dim * (0.5 if causal else 1.0) * (3.5 if backward else 1.0)
    case = memory_case("attention", "sdpa_causal" if causal else "sdpa", dtype,
                       {"batch": b, "heads": heads, "seq": seq, "dim": dim}, 4 * b * heads * seq * dim, 1.0, build,
                       backward, flops=flops)
    return case


def lstm_case(seq: int, b: int, inputs: int, hidden: int, dtype: str, backward: bool) -> Case:
    """One LSTM layer (cuDNN's fused kernel on a GPU): the input projection over every step, then a recurrent GEMM a
    step."""
    def build(device: torch.device) -> tuple[Callable[[], torch.Tensor], list[torch.Tensor]]:
        lstm = torch.nn.LSTM(inputs, hidden, batch_first=True).to(device=device, dtype=DTYPES[dtype])
        x = _rand((b, seq, inputs), DTYPES[dtype], device, grad=backward)
        return (lambda: lstm(x)[0]), [x, *lstm.parameters()]

    flops = 2.0 * seq * b * 4 * hidden * (inputs + hidden) * (3.0 if backward else 1.0)
    case = memory_case("rnn", "lstm", dtype, {"seq": seq, "batch": b, "inputs": inputs, "hidden": hidden},
                       seq * b * (inputs + 4 * hidden), 1.0, build, backward, flops=flops)
    return case


def optimizer_case(name: str, params: int, tensors: int, dtype: str = "fp32") -> Case:
    """torch's fused AdamW or SGD (momentum) stepping ``tensors`` parameters of ``params`` elements in all."""
    def make(device: torch.device) -> Callable[[], object]:
        per = max(1, params // tensors)
        ps = [torch.zeros(per, device=device, dtype=DTYPES[dtype], requires_grad=True) for _ in range(tensors)]
        for p in ps:
            p.grad = torch.randn_like(p) * 1e-3
        fused = device.type == "cuda" or name == "adamw"
        opt = (torch.optim.AdamW(ps, lr=1e-3, fused=fused, capturable=device.type == "cuda") if name == "adamw" else
               torch.optim.SGD(ps, lr=1e-3, momentum=0.9, fused=fused))
        opt.step()  # (its state made outside the timed calls)
        return opt.step

    # (AdamW reads param, grad, m, v and writes param, m, v: 7 passes; SGD with momentum 5)
    passes = 7.0 if name == "adamw" else 5.0
    return Case("optimizer", f"{name}_fused", dtype, {"params": params, "tensors": tensors}, 0.0,
                params * _size(dtype) * passes, make=make)


def launch_case() -> Case:
    """A kernel that does next to nothing (one element added): its device time is the launch floor."""
    def make(device: torch.device) -> Callable[[], object]:
        x = torch.zeros(1, device=device)
        return lambda: x.add_(1.0)

    return Case("launch", "tiny_kernel", "fp32", {"elements": 1}, 0.0, 8.0, make=make)


# -- the sweep's cases, per device -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sizes:
    """The shapes a sweep times each kernel class at."""

    gemms: tuple[tuple[int, int, int], ...]
    """(m, n, k)"""
    bmms: tuple[tuple[int, int, int, int], ...]
    """(batch, m, n, k)"""
    convs: tuple[ConvShape, ...]
    rows: tuple[int, int]
    """LayerNorm and softmax: (rows, width)."""
    bn: tuple[int, int, int]
    """BatchNorm: (batch, channels, side)."""
    gn: tuple[int, int, int, int]
    """GroupNorm: (batch, channels, side, groups)."""
    elements: int
    attention: tuple[tuple[int, int, int, int, bool], ...]
    """(batch, heads, seq, head dim, causal)"""
    lstm: tuple[int, int, int, int]
    """(seq, batch, inputs, hidden)"""
    optimizer: tuple[int, int]
    """(parameters, tensors)"""
    gemm_layouts: tuple[tuple[int, int, int], ...] = ()
    """GEMMs of :attr:`gemms` timed again with a transposed operand (``nt``, ``tn``): what a Linear's forward and weight
    gradient run; priced as the plain case's time times what transposing cost at the nearest of these."""


GPU_SIZES = Sizes(
    # square; then (m, n, k) of transformers at 16k tokens (BERT/GPT-2/ViT), a wide MLP, LM heads
    gemms=((1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
           (16384, 2304, 768), (16384, 768, 768), (16384, 3072, 768), (16384, 768, 3072), (768, 3072, 16384),
           (4096, 8192, 8192), (8192, 8192, 4096), (16384, 50304, 768), (2560, 100000, 1024), (4096, 1024, 4096)),
    bmms=((192, 128, 128, 64), (192, 128, 64, 128), (64, 1024, 1024, 64)),
    # ResNet-50 (v1.5) at batch 64: the stem, each stage's 1x1 and 3x3 (a strided one); grouped (ResNeXt 32x4d),
    # depthwise 3x3 (MobileNet/EfficientNet) and 7x7 (ConvNeXt), UNet's 3x3, and the GPU suite's UNet's first 3x3 at
    # its batch (32 x 64 channels x 256^2: its fp32 step held 11,610 MiB more than its TF32 one on the H200, which the
    # smaller cases' workspaces did not predict); then ResNet-50's other 1x1 layers -- 28 and 7 pixels, the strided
    # downsample --, where NCHW decides: on the third H200 lease cuDNN ran the 56-pixel 1x1 layers in NCHW as fast as
    # channels-last (no conversion) and the 14-pixel one 2.8-3.7x slower in fp16/bf16 (converted); which the 28-pixel
    # layers do sets an NCHW ResNet-50's AMP step (docs/predict.md, "NCHW on Tensor Cores": by size they convert, by
    # alignment -- 28 x 28 = 784 pixels, a multiple of 8; 14 x 14 = 196 not -- they do not); last the UNet's first 3x3
    # on its 3 input channels, which a Tensor Core kernel pads to 8 (the stem's 7x7 ran 2.7x its unpadded price)
    convs=(ConvShape(64, 3, 64, 224, 7, 2), ConvShape(64, 64, 64, 56, 3), ConvShape(64, 64, 256, 56, 1),
           ConvShape(64, 256, 64, 56, 1), ConvShape(64, 128, 128, 56, 3, 2), ConvShape(64, 256, 256, 14, 3),
           ConvShape(64, 1024, 256, 14, 1), ConvShape(64, 512, 512, 7, 3), ConvShape(64, 256, 256, 28, 3, 1, 32),
           ConvShape(64, 256, 256, 28, 3, 1, 256), ConvShape(64, 96, 96, 56, 7, 1, 96), ConvShape(16, 128, 128, 128, 3),
           ConvShape(32, 64, 64, 256, 3), ConvShape(64, 128, 512, 28, 1), ConvShape(64, 512, 128, 28, 1),
           ConvShape(64, 512, 2048, 7, 1), ConvShape(64, 256, 512, 56, 1, 2), ConvShape(32, 3, 64, 256, 3)),
    rows=(16384, 768), bn=(64, 256, 56), gn=(16, 256, 64, 32), elements=64 * 2**20,
    attention=((16, 12, 1024, 64, True), (128, 12, 128, 64, False)), lstm=(20, 128, 1024, 2048),
    optimizer=(100 * 2**20, 160),
    # a transformer's Linear at 16k tokens, its weight gradient, a wide MLP's: the H200 third lease's TF32 steps of
    # Linear-layer models ran 11-19 % slower than these plain (nn) GEMMs priced them, its bf16 ones as priced
    gemm_layouts=((16384, 2304, 768), (16384, 768, 3072), (768, 3072, 16384), (4096, 8192, 8192)))
CPU_SIZES = Sizes(
    gemms=((64, 64, 64), (256, 256, 256)), bmms=((8, 64, 64, 32),),
    convs=(ConvShape(2, 8, 16, 16, 3), ConvShape(2, 16, 16, 8, 1), ConvShape(2, 16, 16, 8, 3, 1, 16)),
    rows=(256, 64), bn=(4, 8, 8), gn=(2, 8, 8, 4), elements=2**16, attention=((2, 2, 32, 16, True),),
    lstm=(4, 2, 16, 16), optimizer=(2**16, 8), gemm_layouts=((64, 64, 64),))


def cases(sizes: Sizes, dtypes: list[str], fp8: bool = False, conv_dtypes: list[str] | None = None) -> list[Case]:
    """Every kernel class at ``sizes`` in ``dtypes`` (``fp8``: GEMMs in fp8 too; ``conv_dtypes``: the convolutions'
    dtypes where they differ): forward, and where training runs one, forward and backward."""
    half = [d for d in dtypes if d in ("fp16", "bf16")]
    out: list[Case] = [launch_case()]
    for m, n, k in sizes.gemms:
        out += [gemm_case(m, n, k, d) for d in dtypes]
        if fp8 and m % 16 == 0 and n % 16 == 0 and k % 16 == 0:
            out.append(gemm_case(m, n, k, "fp8"))
    out += [gemm_case(m, n, k, d, batch=b) for b, m, n, k in sizes.bmms for d in dtypes]
    for s in sizes.convs:
        for d in conv_dtypes if conv_dtypes is not None else dtypes:
            for op in ("conv_fwd", "conv_dgrad", "conv_wgrad"):
                out += [conv_case(s, d, op, cl) for cl in (False, True)]
    rows, width = sizes.rows
    for d in ["fp32", *half]:
        for bwd in (False, True):
            out += [layer_norm_case(rows, width, d, bwd), batch_norm_case(*sizes.bn, d, bwd, True),
                    batch_norm_case(*sizes.bn, d, bwd, False), group_norm_case(*sizes.gn, d, bwd),
                    softmax_case(rows, width, d, bwd)]
        out += [elementwise_case(op, sizes.elements, d) for op in ("add", "gelu", "to_fp32", "to_half")
                if not (op.startswith("to_") and d == "fp32")]  # (fp32 to fp32 launches no kernel)
    for d in ["fp32", *(["tf32"] if "tf32" in dtypes else []), *half]:  # (cuDNN's RNNs follow the TF32 flag)
        for bwd in (False, True):
            out += [attention_case(*a[:4], d, a[4], bwd) for a in sizes.attention]
            out.append(lstm_case(*sizes.lstm, d, bwd))
    out += [optimizer_case("adamw", *sizes.optimizer), optimizer_case("sgd", *sizes.optimizer)]
    # (last: a sweep out of time leaves them out before any kind the tables already price)
    out += [gemm_case(m, n, k, d, layout=layout) for m, n, k in sizes.gemm_layouts for d in dtypes
            for layout in ("nt", "tn")]
    return out


def device_cases(device: torch.device) -> list[Case]:
    """The sweep of ``device``: a GPU's every dtype it computes in (fp8 where torch._scaled_mm runs), at the shapes
    models use; a CPU's fp32 and bf16 at shapes a 2-core CPU times in seconds (convolutions in fp32: its half
    convolutions take seconds a call)."""
    if device.type != "cuda":
        return cases(CPU_SIZES, ["fp32", "bf16"], conv_dtypes=["fp32"])
    major = torch.cuda.get_device_capability(device)[0]
    return cases(GPU_SIZES, ["fp32", "tf32", "fp16", "bf16"] if major >= 8 else ["fp32", "fp16"],
                 fp8=fp8_gemm_runs(device))


# -- timing ----------------------------------------------------------------------------------------------------------
GRAPH_US = 2000.0
"""A captured graph holds calls enough for about this many microseconds of kernels (at most :data:`MAX_GRAPH_CALLS`)."""
MAX_GRAPH_CALLS = 64


def time_case(fn: Callable[[], object], device: torch.device, min_s: float) -> tuple[float, int, str]:
    """(microseconds a call, calls timed, timer) of ``fn`` after warm-up, over at least ``min_s``."""
    fn()
    if device.type != "cuda":
        n, elapsed = time_calls(fn, device, min_s, max_iters=10_000)
        return elapsed / n * 1e6, n, "perf_counter"
    torch.cuda.synchronize(device)
    one = event_seconds(fn, 3) / 3 * 1e6  # (a first guess: launches included)
    call, per_graph, timer = replayable(fn, one, device)
    call()
    torch.cuda.synchronize(device)
    reps = int(max(3, min(2000, math.ceil(min_s * 1e6 / max(one * per_graph, 1.0)))))
    seconds = event_seconds(call, reps)
    return seconds / (reps * per_graph) * 1e6, reps * per_graph, timer


ISSUES = 7
"""Calls :func:`issue_us` times, each on its own: few enough that the GPU's queue (1,024 launches) never fills."""


def issue_us(fn: Callable[[], object], device: torch.device, calls: int = ISSUES) -> float:
    """Median host microseconds to issue one call of ``fn`` (warmed up already), the GPU left to run them: after a
    synchronisation, ``calls`` calls timed one by one on the host with no synchronisation between them -- the queue
    takes each at once, so what is timed is the host's own path to the launch, not the kernel."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda _device: None)
    sync(device)
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    sync(device)
    return statistics.median(times) * 1e6


def replayable(fn: Callable[[], object], call_us: float, device: torch.device) -> tuple[Callable[[], object], int, str]:
    """(the call, ``fn`` calls in it, timer) a GPU replays ``fn`` by: a captured CUDA graph of about :data:`GRAPH_US`
    of its calls (``call_us`` each), else -- a kernel that cannot be captured -- ``fn`` itself, launches included."""
    per_graph = int(max(1, min(MAX_GRAPH_CALLS, GRAPH_US // max(call_us, 1.0))))
    try:
        return captured(fn, per_graph, device), per_graph, "cuda_graph"
    except Exception:
        torch.cuda.synchronize(device)
        return fn, 1, "cuda_events"


@contextlib.contextmanager
def _math(dtype: str) -> Iterator[None]:
    with tf32_scope(dtype == "tf32"):
        yield


def sweep(device: torch.device, cases: list[Case] | None = None, min_s: float = 0.02,
          budget_s: float = 300.0, classes: tuple[str, ...] = CLASSES,
          meter: Callable[[], EnergyMeter] | None = None, power_window_s: float = MIN_WINDOW_S) -> dict[str, Any]:
    """Time every case of ``classes`` (the device's sweep by default) within ``budget_s`` (cases past it are left out,
    said in ``skipped``); the table, the board's power per kernel class and dtype where NVML reads it (``meter``: a
    fresh energy meter of the device; each reading over ``power_window_s``), the host's time per op, the environment."""
    todo = [c for c in (device_cases(device) if cases is None else cases) if c.kind in classes]
    t_start = time.perf_counter()
    timed: list[Timed] = []
    power: dict[str, dict[str, Any]] = {}
    skipped = 0
    meter = meter or (lambda: EnergyMeter(device))
    probe = meter()
    metered = probe.available
    probe.close()
    with on_device(device):
        env = environment(device)
        for kind in classes:
            mine = [c for c in todo if c.kind == kind]
            if not mine:
                continue
            done: list[tuple[Case, Timed]] = []
            for i, case in enumerate(mine):
                if time.perf_counter() - t_start > budget_s:
                    skipped += 1
                    continue
                progress.report("calibrating", i, len(mine), detail=kind)
                timed.append(_run(case, device, min_s))
                done.append((case, timed[-1]))
            if metered and time.perf_counter() - t_start <= budget_s:
                progress.report("calibrating", len(mine), len(mine), detail=f"{kind}: power")
                power.update(power_pass(done, device, meter, power_window_s))
            if device.type == "cuda":
                torch.cuda.empty_cache()
        if power:
            power.update(idle_power(device, meter, power_window_s))
        host = host_ops.measure(device, steps=50, warmup=10).as_dict()
    return {"device": str(device), "device_name": env["device_name"], "env": env, "kernels": [t.row() for t in timed],
            "power": power, "power_basis": REPLAY if power else "", "host_ops": host, "skipped": skipped,
            "min_s": min_s,
            "seconds": time.perf_counter() - t_start,
            "created_at": env.get("time") or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _run(case: Case, device: torch.device, min_s: float) -> Timed:
    base = dict(kind=case.kind, op=case.op, dtype=case.dtype, layout=case.layout, shape=case.shape, flops=case.flops,
                bytes=case.bytes)
    try:
        with _math(case.dtype):
            fn = case.make(device)
            us, calls, timer = time_case(fn, device, min_s)
            workspace = transient_bytes(fn, CudaMemory(device)) if device.type == "cuda" else None
            host = issue_us(fn, device) if device.type == "cuda" else None
        return Timed(**base, us=us, calls=calls, timer=timer, workspace_bytes=workspace,  # type: ignore[arg-type]
                     host_us=host)
    except Exception as e:  # (a kernel this device or build lacks: the row says why, the sweep goes on)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return Timed(**base, us=None, calls=0, timer="", error=f"{type(e).__name__}: {str(e).splitlines()[0][:160]}")  # type: ignore[arg-type]


# -- what a call holds besides its result ------------------------------------------------------------------------------
@dataclass(frozen=True)
class CudaMemory:
    """The caching allocator's counters of one device (what :func:`transient_bytes` reads)."""

    device: torch.device

    def settle(self) -> None:
        torch.cuda.synchronize(self.device)

    def reset_peak(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.device)

    def allocated(self) -> int:
        return int(torch.cuda.memory_allocated(self.device))

    def peak(self) -> int:
        return int(torch.cuda.max_memory_allocated(self.device))


def transient_bytes(fn: Callable[[], object], memory: Any) -> int:
    """Bytes one eager call of ``fn`` allocated and freed before it returned: the allocator's peak during it over what
    it left allocated (its result, held here until the reading). cuDNN's workspaces are allocated this way -- an fp32
    convolution's algorithm can ask for gigabytes (the lent H200: a UNet's fp32 peak 11 GiB over its TF32 one) -- and
    so are a backward's intermediates. ``memory``: :class:`CudaMemory` (a test passes a fake)."""
    memory.settle()
    memory.reset_peak()
    result = fn()
    memory.settle()
    transient = max(0, memory.peak() - memory.allocated())
    del result
    return transient


# -- power -----------------------------------------------------------------------------------------------------------


MATH_KINDS = ("gemm", "bmm", "conv", "attention", "rnn")
"""Kinds whose kernels are priced by their FLOPs (the rest by their bytes)."""
POWER_MIN_US = 20.0
"""The shortest case a power reading replays (shorter ones: the graph's launches between them, not the kernel)."""


def power_case(timed: list[tuple[Case, Timed]]) -> tuple[Case, Timed]:
    """The case of one kind and dtype whose replay reads the kind's power: the one at the highest rate -- FLOP/s for
    :data:`MATH_KINDS`, bytes/s for the rest -- of those of at least :data:`POWER_MIN_US` a call (the longest where
    none is). Why not the longest: the kernels that fill a model's step at training sizes are the kind's efficient
    ones, and the longest case is often its least efficient -- the lent H200's longest convolution was ConvNeXt's
    depthwise 7x7 weight gradient (1.3 ms in fp16), whose replay drew 563 W where ResNet-50's and UNet's whole steps,
    dense convolutions, drew 650-700 (2026-11-27; that check is why the rule changed, so the next sweep's conv readings
    are checked on new runs, not on those)."""
    def rate(item: tuple[Case, Timed]) -> float:
        case, t = item
        return (t.tflops if case.kind in MATH_KINDS else t.gbps) or 0.0

    long_enough = [item for item in timed if item[1].us is not None and item[1].us >= POWER_MIN_US and rate(item) > 0]
    if long_enough:
        return max(long_enough, key=rate)
    return max(timed, key=lambda item: item[1].us or 0.0)


def power_pass(done: list[tuple[Case, Timed]], device: torch.device,
               meter: Callable[[], EnergyMeter], window_s: float = MIN_WINDOW_S) -> dict[str, dict[str, Any]]:
    """The board's mean power for each (kind, dtype) of ``done`` (cases and how they timed): the case of each that
    represents it (:func:`power_case`) replayed back to back for ``window_s``, NVML around the replays."""
    by_key: dict[str, list[tuple[Case, Timed]]] = {}
    for case, t in done:
        if t.us is not None:
            by_key.setdefault(power_key(case.kind, case.dtype), []).append((case, t))
    out: dict[str, dict[str, Any]] = {}
    for key, (case, t) in ((k, power_case(v)) for k, v in by_key.items()):
        try:
            with _math(case.dtype):
                energy = replayed_energy(case.make(device), t.us * 1e-6, device, meter(), window_s)  # type: ignore[operator]
        except Exception:  # (timed once, refused now: no reading, the sweep goes on)
            energy = None
        if energy is not None and energy.seconds > 0:
            out[key] = {"mean_power_w": energy.mean_power_w, "seconds": energy.seconds, "op": case.op,
                        "shape": case.shape, "source": energy.source}
    return out


def replayed_energy(fn: Callable[[], object], call_s: float, device: torch.device, meter: EnergyMeter,
                    window_s: float = MIN_WINDOW_S) -> Energy | None:
    """What the board drew over calls of ``fn`` (``call_s`` a call, as timed) issued back to back for at least
    ``window_s``: on a GPU a captured graph of calls, replayed; the meter reads from the synchronisation before the
    first to the one after the last."""
    call, per_call = fn, max(call_s, 1e-7)
    if device.type == "cuda":
        call, calls, _ = replayable(fn, call_s * 1e6, device)
        per_call *= calls
        call()
        torch.cuda.synchronize(device)
    reps = max(1, math.ceil(window_s / per_call))
    meter.start()
    t0 = time.perf_counter()
    while True:
        for _ in range(reps):
            call()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        elapsed = time.perf_counter() - t0
        if elapsed >= window_s:  # (slower than timed -- clocks down, another process: more of the same)
            break
        reps = max(1, math.ceil((window_s - elapsed) / per_call))
    return meter.stop()


def idle_power(device: torch.device, meter: Callable[[], EnergyMeter],
               window_s: float = MIN_WINDOW_S) -> dict[str, dict[str, Any]]:
    """The board's power with nothing running, right after the sweep (clocks as a step's gaps leave them)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    m = meter()
    m.start()
    time.sleep(window_s)
    energy = m.stop()
    if energy is None or energy.seconds <= 0:
        return {}
    return {IDLE: {"mean_power_w": energy.mean_power_w, "seconds": energy.seconds, "source": energy.source}}


# -- the table as CSV ------------------------------------------------------------------------------------------------
CSV_COLUMNS = ("kind", "op", "dtype", "layout", "shape", "flops", "bytes", "us", "tflops", "gbps", "calls", "timer",
               "power_w", "error", "workspace_bytes", "host_us")
ENV_KEYS = ("device_name", "capability", "driver", "cuda", "cudnn", "torch", "sm_clock_mhz", "sm_clock_max_mhz",
            "mem_clock_mhz", "power_limit_w", "multiprocessors", "memory_total_bytes", "cpu", "hostname", "source",
            "scope")
"""The environment a table's CSV heads with (``source`` and ``scope``: a table of published kernels, shipped with
ampbench: whose they are, and :data:`ampbench.predict.measured_kernels.CARD_ONLY` where it prices its card alone)."""


def to_csv(table: dict[str, Any]) -> str:
    """The table as CSV: the environment first (``# key: value`` lines), then one row per kernel (shape as JSON),
    each with its class's mean power."""
    env = table.get("env") or {}
    out = io.StringIO()
    out.write(f"# ampbench kernel calibration, {table.get('created_at')}, {table.get('seconds', 0):.0f} s\n")
    for k in ENV_KEYS:
        if env.get(k) is not None:
            out.write(f"# {k}: {env[k]}\n")
    power = table.get("power") or {}
    if table.get("power_basis") == REPLAY:
        out.write(f"# power_basis: {REPLAY}\n")
        if IDLE in power:
            out.write(f"# idle_power_w: {power[IDLE]['mean_power_w']:.1f}\n")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in table["kernels"]:
        watts = power.get(power_key(r["kind"], r["dtype"]), {}).get("mean_power_w")
        writer.writerow([r["kind"], r["op"], r["dtype"], r["layout"], json.dumps(r["shape"], sort_keys=True),
                         f"{r['flops']:.6g}", f"{r['bytes']:.6g}", "" if r["us"] is None else f"{r['us']:.4g}",
                         "" if r["tflops"] is None else f"{r['tflops']:.4g}",
                         "" if r["gbps"] is None else f"{r['gbps']:.4g}", r["calls"], r["timer"],
                         "" if watts is None else f"{watts:.1f}", r["error"],
                         "" if r.get("workspace_bytes") is None else int(r["workspace_bytes"]),
                         "" if r.get("host_us") is None else f"{r['host_us']:.4g}"])
    return out.getvalue()


def from_csv(text: str) -> dict[str, Any]:
    """A table written by :func:`to_csv` (its environment from the ``#`` lines)."""
    env: dict[str, Any] = {}
    lines = text.splitlines()
    body = []
    created = ""
    basis, idle = "", None
    for line in lines:
        if line.startswith("# ampbench kernel calibration, "):
            created = line.split(", ")[1]
        elif line.startswith("# power_basis: "):
            basis = line.partition(": ")[2]
        elif line.startswith("# idle_power_w: "):
            idle = float(line.partition(": ")[2])
        elif line.startswith("# ") and ": " in line:
            k, _, v = line[2:].partition(": ")
            env[k] = v
        elif not line.startswith("#"):
            body.append(line)
    kernels = []
    for r in csv.DictReader(body):
        us = float(r["us"]) if r["us"] else None
        kernels.append({"kind": r["kind"], "op": r["op"], "dtype": r["dtype"], "layout": r["layout"],
                        "shape": json.loads(r["shape"]), "flops": float(r["flops"]), "bytes": float(r["bytes"]),
                        "us": us, "calls": int(r["calls"] or 0), "timer": r["timer"], "error": r["error"],
                        "power_w": float(r["power_w"]) if r["power_w"] else None,
                        "workspace_bytes": int(r["workspace_bytes"]) if r.get("workspace_bytes") else None,
                        "host_us": float(r["host_us"]) if r.get("host_us") else None})
    power: dict[str, dict[str, Any]] = {}
    if basis == REPLAY:  # (an older table's power_w is its class's window, gaps and all: not read back as power)
        for r in kernels:
            if r["power_w"] is not None:
                power[power_key(r["kind"], r["dtype"])] = {"mean_power_w": r["power_w"]}
        if idle is not None:
            power[IDLE] = {"mean_power_w": idle}
    return {"env": env, "device_name": env.get("device_name"), "kernels": kernels, "created_at": created,
            "power": power, "power_basis": basis}
