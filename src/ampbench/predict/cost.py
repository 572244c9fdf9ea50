"""The cost model: a traced step's ops priced on a GPU's datasheet (roofline per op, plus launch costs).

Per op: ``time = max(FLOPs / (peak x efficiency), bytes / (bandwidth x MEMORY_EFFICIENCY)) + LAUNCH_US``, the peak
being the math the op runs in on that GPU (a half op: the fp16/bf16 Tensor Core peak; an fp32 matmul: TF32 in the
tf32 mode, fp32 otherwise). The host issues the ops too: an eager step takes at least ``HOST_US`` per op (Python
module calls and the dispatcher in the forward, the autograd engine after), so a step is
``max(sum of GPU times, sum of host times)``. Every constant below holds for every model and GPU; none was fitted to
the references the tests check against (docs/predict.md gives each one's error).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from ampbench.measure.peaks import GpuSpec
from ampbench.predict.trace import Op, Trace

GEMM_EFFICIENCY = 0.80
"""Share of the dense peak a large GEMM or convolution reaches (cuBLAS/cuDNN on big square-ish problems)."""
ATTENTION_EFFICIENCY = 0.50
"""Share of the peak fused attention reaches (flash/memory-efficient kernels: softmax and rescaling between GEMMs)."""
MEMORY_EFFICIENCY = 0.75
"""Share of the datasheet DRAM bandwidth an elementwise, normalisation or optimizer kernel reaches."""
TILE = 128
"""Output tile of a Tensor Core GEMM kernel (M and N): partial tiles and partial waves over the SMs are idle."""
SPLIT_K_MIN = 512
"""A GEMM with fewer tiles than SMs is split along K (cuBLAS's split-K) in chunks of at least this many."""
LAUNCH_US = 2.0
"""A kernel's fixed cost on the GPU (launch, ramp-up, tail), microseconds."""
HOST_US = {"forward": 10.0, "backward": 4.0, "step": 4.0, "optimizer": 4.0}
"""Host time per op, microseconds: Python and the dispatcher in the forward, the C++ autograd engine and optimizer
loops after it. A step whose ops take less GPU time than this is launch-bound."""
TORCHAO_STEP_US = 20.0
"""Host time per parameter of torchao's low-precision Adam, microseconds: a Python loop calling a torch.compile'd
update per parameter (dynamo's guard checks and the call: tens of microseconds each; not measured here)."""
FOREACH_TENSORS = 48
"""Tensors one multi-tensor-apply launch covers (torch's ``_foreach_*`` kernels; fused Adam takes 36 of 4 lists)."""

MATMUL_OPS = {"aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten.convolution", "aten.convolution_backward",
              "aten._cudnn_rnn", "aten._cudnn_rnn_backward", "aten.mkldnn_rnn_layer", "aten.mkldnn_rnn_layer_backward"}
ATTENTION_OPS = {"ampbench_predict.fused_attention", "ampbench_predict.fused_attention_backward"}
NORM_OPS = {"aten.native_layer_norm", "aten.native_layer_norm_backward", "aten.native_batch_norm",
            "aten.native_batch_norm_backward", "aten._native_batch_norm_legit", "aten._native_batch_norm_legit_functional",
            "aten._native_batch_norm_legit_no_training", "aten.native_group_norm", "aten.native_group_norm_backward",
            "aten._fused_rms_norm", "aten._fused_rms_norm_backward", "aten.cudnn_batch_norm",
            "aten.cudnn_batch_norm_backward"}
OP_CLASSES = ("matmul/conv", "attention", "normalisation", "elementwise", "optimizer")


def op_class(op: Op) -> str:
    if op.phase == "optimizer":
        return "optimizer"
    if op.name in MATMUL_OPS:
        return "matmul/conv"
    if op.name in ATTENTION_OPS:
        return "attention"
    if op.name in NORM_OPS:
        return "normalisation"
    return "elementwise"


def gemm_efficiency(gemm: tuple[int, int, int] | None, sms: int) -> float:
    """:data:`GEMM_EFFICIENCY` times the share of the GPU a GEMM of (M, N, K) keeps busy: its output in 128x128 tiles
    (a partial tile computes its whole), the tiles in waves over the SMs (a partial wave leaves SMs idle), split
    along K when there are fewer tiles than SMs."""
    if gemm is None:
        return GEMM_EFFICIENCY
    m, n, k = gemm
    tm, tn = math.ceil(m / TILE), math.ceil(n / TILE)
    fill = (m / (tm * TILE)) * (n / (tn * TILE))
    tiles = tm * tn
    if tiles < sms:
        tiles *= max(1, min(math.ceil(sms / tiles), k // SPLIT_K_MIN))
    waves = math.ceil(tiles / sms)
    return GEMM_EFFICIENCY * fill * tiles / (waves * sms)


@dataclass
class OpCost:
    op: Op
    cls: str
    compute_s: float
    memory_s: float
    launches: int

    @property
    def gpu_s(self) -> float:
        return max(self.compute_s, self.memory_s) + self.launches * LAUNCH_US * 1e-6

    @property
    def bound(self) -> str:
        busy = max(self.compute_s, self.memory_s)
        if self.launches * LAUNCH_US * 1e-6 > busy:
            return "launch"
        return "compute" if self.compute_s >= self.memory_s else "memory"


@dataclass
class StepCost:
    step_s: float
    gpu_s: float
    host_s: float
    flops: int
    math_mode: str
    """The math of the step's GEMMs (fp32, tf32, fp16, bf16)."""
    time_split: dict[str, float]
    """Share of the step: compute-bound, memory-bound and launch (GPU fixed costs, and the host when it is slower)."""
    op_split: dict[str, float]
    """Share of the GPU time per op class."""
    ops: int
    launches: int
    notes: list[str] = field(default_factory=list)

    @property
    def bound(self) -> str:
        return max(self.time_split, key=lambda k: self.time_split[k])


def _math(op: Op, precision_tf32: bool) -> str:
    if op.dtype in ("fp16", "bf16"):
        return op.dtype
    return "tf32" if precision_tf32 else "fp32"


def _fused_optimizer(trace: Trace) -> Op:
    """The optimizer's update as the engine runs it on CUDA (torch's fused kernel): each parameter, its gradient and
    its state read once, the parameter and the state written once."""
    return Op("aten._fused_optimizer", "optimizer", 0, 2 * trace.stepped_bytes + trace.state_bytes,
              trace.stepped_bytes + trace.state_bytes, "fp32", max(1, trace.stepped_params))


def _torchao_optimizer(trace: Trace) -> Op:
    """torchao's update as it runs on CUDA: compiled (fullgraph) into one kernel per parameter, which reads the
    parameter, its gradient and its (quantized) states once and writes the parameter and the states."""
    return Op("torchao.single_param_adam", "optimizer", 0, 2 * trace.stepped_bytes + trace.state_bytes,
              trace.stepped_bytes + trace.state_bytes, "fp32", max(1, trace.stepped_params))


def price(trace: Trace, gpu: GpuSpec, tf32: bool) -> StepCost:
    """The step's time on ``gpu`` (``tf32``: fp32 matmuls and convolutions run as TF32)."""
    peaks = gpu.tflops
    ops = list(trace.ops)
    notes: list[str] = []
    if trace.fusable:  # the engine runs torch's fused optimizer on CUDA: one multi-tensor kernel, not the traced loop
        ops = [o for o in ops if o.phase != "optimizer"] + [_fused_optimizer(trace)]
    elif trace.torchao:  # traced op by op (compile off); on CUDA torchao compiles it: a kernel per parameter
        ops = [o for o in ops if o.phase != "optimizer"] + [_torchao_optimizer(trace)]
    costs: list[OpCost] = []
    for op in ops:
        cls = op_class(op)
        compute = 0.0
        extra_bytes = 0
        if cls in ("matmul/conv", "attention") and op.flops:
            math_mode = _math(op, tf32)
            peak = peaks.get(math_mode) or peaks["fp32"]
            eff = ATTENTION_EFFICIENCY if cls == "attention" else gemm_efficiency(op.gemm, gpu.sms)
            compute = op.flops / (peak * 1e12 * max(eff, 1e-3))
            if op.nchw and math_mode != "fp32":  # cuDNN's Tensor Core kernels are NHWC: NCHW tensors transposed in and out
                extra_bytes = 2 * (op.bytes_read + op.bytes_written)
        if "batch_norm" in op.name:  # two passes over the batch: the statistics, then normalising (or dx's sums, then dx)
            extra_bytes += op.bytes_read
        memory = (op.bytes_read + op.bytes_written + extra_bytes) / (gpu.bandwidth_gbs * 1e9 * MEMORY_EFFICIENCY)
        tensors_per_launch = {"aten._fused_optimizer": 36, "torchao.single_param_adam": 1}.get(op.name, FOREACH_TENSORS)
        launches = math.ceil(op.tensors / tensors_per_launch) if op.tensors > 1 else 1
        costs.append(OpCost(op, cls, compute, memory, launches))
    gpu_s = sum(c.gpu_s for c in costs)
    host_s = sum((TORCHAO_STEP_US * c.op.tensors if c.op.name == "torchao.single_param_adam"
                  else HOST_US.get(c.op.phase, 4.0)) * 1e-6 for c in costs)
    step_s = max(gpu_s, host_s)
    by_bound: dict[str, float] = defaultdict(float)
    by_class: dict[str, float] = dict.fromkeys(OP_CLASSES, 0.0)
    for c in costs:
        busy = max(c.compute_s, c.memory_s)
        by_bound["compute" if c.compute_s >= c.memory_s and c.compute_s > 0 else "memory"] += busy
        by_bound["launch"] += c.gpu_s - busy
        by_class[c.cls] += c.gpu_s
    if host_s > gpu_s:  # the GPU waits on the host: that wait is launch overhead too
        by_bound["launch"] += host_s - gpu_s
        notes.append(f"launch-bound: the host issues {len(costs)} ops in ~{host_s * 1e3:.2f} ms, the GPU runs them in "
                     f"~{gpu_s * 1e3:.2f} ms (CUDA graphs or torch.compile remove most of it)")
    time_split = {k: by_bound.get(k, 0.0) / step_s for k in ("compute", "memory", "launch")}
    op_split = {k: v / gpu_s for k, v in by_class.items()} if gpu_s else by_class
    half = {o.dtype for o in ops if o.name in MATMUL_OPS and o.dtype in ("fp16", "bf16")}
    math_mode = next(iter(half)) if half else ("tf32" if tf32 else "fp32")
    return StepCost(step_s, gpu_s, host_s, sum(o.flops for o in ops), math_mode, time_split, op_split, len(costs),
                    sum(c.launches for c in costs), notes)
