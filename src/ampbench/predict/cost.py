"""A traced step's time on a GPU: each op priced by the kernel model of its class (:mod:`ampbench.predict.kernels`,
its constants fitted on measured kernels), and the host that issues them.

Per op class: matmuls as cuBLAS GEMMs (tiles, waves, split-K; Tensor Cores for half and TF32 math, which is never
slower than fp32's kernels: cuBLAS and cuDNN may keep an fp32 kernel); 2-D convolutions as cuDNN's fastest of
implicit GEMM and Winograd, their backward as one such product per gradient asked for (a Tensor Core convolution on
NCHW tensors pays the conversion to the NHWC layout its kernels use); fused attention at
``attention_efficiency`` of the GEMM peak (half the scores' work when causal); a fused RNN layer as its input GEMM and
one recurrent GEMM per step; normalisations and softmax by their passes over the data; everything else by its bytes.
Multi-tensor ops (``_foreach_*``, fused optimizers) launch a kernel per :data:`FOREACH_TENSORS` tensors.

The host issues every op (:class:`Host`, measured on a GPU machine's host: Python module calls and the dispatcher in the
forward, the autograd engine after) into the GPU's stream, which runs each once it is issued and the previous one is
done: the step ends when the last op does. A forward whose ops the GPU runs faster than Python issues them waits on
the host even where the backward does not; a step whose every op is shorter than its issue is launch-bound.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field, replace

from ampbench.errors import AmpbenchError
from ampbench.execution.axes import Execution
from ampbench.measure.gpus import Gpu
from ampbench.precision.fused_step import DIRECT
from ampbench.predict import fusion, kernels, measured_kernels
from ampbench.predict.accumulation import LINEAR_FROM, step_ops
from ampbench.predict.kernels import Calibration, calibration
from ampbench.predict.measured_kernels import KernelTable
from ampbench.predict.trace import Op, Trace, fused_update

H200_FUSED_OPTIMIZER_US = 11.6
"""The lent H200 host's fused AdamW ``optimizer.step()``, microseconds per parameter (:data:`MEASURED_HOST`)."""
DIRECT_STEP_RATIO = 0.575
"""The engine's direct fused AdamW step's host time per parameter over ``optimizer.step()``'s, as a GPU host measured
the two side by side (:mod:`ampbench.measure.host_ops` in the third H200 lease's kernel sweep,
``benchmarks/results/h200/lease3/host_ops.json``: 6.33 us per parameter directly -- its two ops priced apart, at the
backward's per-op figure -- against 11.01 through ``optimizer.step()``, 48 parameters). That lease's host was another
VM than the first's (21.8 / 22.9 us per op against 24.1 / 27.9): the share is applied to :data:`MEASURED_HOST`'s
figure. It replaces 0.34, which a CPU host measured with the kernels' own time taken out (a CPU computes them on the
host): a GPU host's direct step also packs the kernel's tensor lists and launches it, which the CPU's ratio left out."""
H200_LAUNCH_US = (13.2, 16.2)
"""The lent H200 host's time to launch a kernel, forward and backward, microseconds: the same loop's per-op figure on
CUDA tensors less on CPU tensors, on that host in one run (24.1 - 10.9 and 27.9 - 11.7 us,
``benchmarks/results/h200/host_overhead.json``): the CUDA launch path (the launch, the caching allocator) the per-op
figure holds once, where the CPU's computes a few-microsecond kernel instead. An op launching more kernels pays it for
each beyond its first."""


FORWARD_PHASES = ("forward", "loss", "step")
"""The phases Python issues op by op (the engine's step too); the backward's and the optimizer's are the autograd
engine's and torch's loops."""


CPU_OP_SHARE = round(10.88 / 24.13, 3)
"""The lent H200 machine's host time of a CPU-tensor op over a CUDA op's, in the same stack of tiny layers
(``benchmarks/results/h200/host_overhead.json``: 10.88 and 24.13 us per forward op): Python's own work around the
ops (activation checkpointing's) scales as the first."""


@dataclass(frozen=True)
class CheckpointHost:
    """The host time activation checkpointing adds in eager mode beyond its ops (each priced at the host's time per
    op, the recompute's included): per call of a checkpointed block and per forward op inside one, each in plain
    CPU-tensor ops' time (:attr:`Host.python_us`)."""

    per_block: float
    per_op: float


CHECKPOINT_HOST = {"blocks": CheckpointHost(per_block=13.27, per_op=2.501),
                   "selective": CheckpointHost(per_block=19.06, per_op=7.917)}
"""Measured, not fitted to any step: ``benchmarks/checkpoint_overhead.py`` on this project's CPU machine (AMD EPYC
Zen 5, torch 2.13; ``benchmarks/results/cpu/checkpoint_overhead.json``) -- stacks of tiny blocks trained with and
without checkpointing, the extra fitted as ``blocks x per_block + block ops x per_op`` on blocks of 2 and 4 layers,
within 2-4% on those of 3 and 6 (held out). ``blocks``: the checkpoint's own Python around each block (the RNG and
autocast state saved, its saved-tensor hooks, the recompute's frame); ``selective``: that and torch's selective
checkpoint dispatch modes, which see each op of the block's forward and again in the recompute. A compiled block
pays none of it (the graph holds the recompute)."""


@dataclass(frozen=True)
class Host:
    """The host that issues a step's ops: microseconds per op in the forward (Python's: the loss and the engine's step
    too) and after it (the autograd engine's; an optimizer run op by op), per parameter of torch's fused optimizer
    step (``optimizer.step()``: its Python gathers every parameter's gradient and state before its one kernel), and
    per parameter of the engine's direct fused step (:mod:`ampbench.precision.fused_step`: the same kernel from lists
    made once). ``ampbench hw --device cuda`` measures yours (:mod:`ampbench.measure.host_ops`); ``predict --host-us
    F,B,P,D`` takes it."""

    forward_us: float = 24.1
    backward_us: float = 27.9
    fused_optimizer_us: float = H200_FUSED_OPTIMIZER_US
    direct_step_us: float = round(H200_FUSED_OPTIMIZER_US * DIRECT_STEP_RATIO, 1)
    source: str = ("the lent H200 machine's host (a VM, 16 vCPUs; benchmarks/results/h200/host_overhead.json; the "
                   "direct step's figure its optimizer.step() figure times the share another lent H200 host measured, "
                   "see DIRECT_STEP_RATIO)")
    steps_directly: bool = True
    """The engine steps torch's fused Adam/AdamW/SGD directly (False: through ``optimizer.step()``, as it did before
    2026-11-26 -- the runs measured on the lent H200 were)."""
    launch_forward_us: float = H200_LAUNCH_US[0]
    launch_backward_us: float = H200_LAUNCH_US[1]
    """The host's time to launch one more kernel of an op that launches several (a convolution's backward: both
    gradients; a multi-tensor op's chunks), in the forward and after it (:data:`H200_LAUNCH_US`)."""
    dispatch_share: float = CPU_OP_SHARE
    """A CPU-tensor op's host time over ``forward_us`` (a CUDA op's) on this host: what Python's work around the ops
    -- activation checkpointing's (:data:`CHECKPOINT_HOST`) -- costs in ``forward_us``'s units."""

    @property
    def python_us(self) -> float:
        """The host time of a plain CPU-tensor op, the unit :data:`CHECKPOINT_HOST` is measured in."""
        return self.forward_us * self.dispatch_share

    def op_us(self, phase: str) -> float:
        return self.forward_us if phase in FORWARD_PHASES else self.backward_us

    def launch_us(self, phase: str) -> float:
        return self.launch_forward_us if phase in FORWARD_PHASES else self.launch_backward_us

    @property
    def label(self) -> str:
        """What a predicted row says of it (``predicted_host``)."""
        optimizer = (f"{self.direct_step_us:g} us per parameter of the engine's direct fused step" if self.steps_directly
                     else f"{self.fused_optimizer_us:g} us per fused optimizer parameter (optimizer.step())")
        return f"{self.forward_us:g}/{self.backward_us:g} us per op, {optimizer}: {self.source}"

    @classmethod
    def parse(cls, text: str) -> Host:
        """``F,B[,P[,D]]`` microseconds (``--host-us``): forward and backward per op, per parameter of a fused
        optimizer's ``optimizer.step()`` and of the engine's direct fused step (P defaults to the measured host's,
        scaled as B is; D to P times :data:`DIRECT_STEP_RATIO`)."""
        try:
            values = [float(v) for v in text.split(",")]
        except ValueError:
            values = []
        if len(values) not in (2, 3, 4) or not all(0 < v < 1e5 for v in values):
            raise AmpbenchError(f"--host-us {text!r}: expected F,B[,P[,D]] microseconds > 0 (forward and backward per "
                                "op, per parameter of a fused optimizer.step() and of the engine's direct fused step), "
                                "e.g. 12,14,6,0.8; ampbench hw --device cuda measures them on a GPU machine")
        per_param = values[2] if len(values) >= 3 else round(MEASURED_HOST.fused_optimizer_us * values[1] /
                                                               MEASURED_HOST.backward_us, 1)
        direct = values[3] if len(values) == 4 else round(per_param * DIRECT_STEP_RATIO, 2)
        launches = (round(MEASURED_HOST.launch_forward_us * values[0] / MEASURED_HOST.forward_us, 1),
                    round(MEASURED_HOST.launch_backward_us * values[1] / MEASURED_HOST.backward_us, 1))
        return cls(values[0], values[1], per_param, direct, source=f"--host-us {','.join(f'{v:g}' for v in values)}",
                   launch_forward_us=launches[0], launch_backward_us=launches[1])

    def optimizer_s(self, params: int, direct: bool) -> float:
        """The host's time for a fused optimizer kernel of ``params`` parameters: through ``optimizer.step()``
        (its ops included), or stepped directly by the engine (its dispatch and the lists it gathers)."""
        if direct:
            return (self.op_us("optimizer") + self.direct_step_us * params) * 1e-6
        return self.fused_optimizer_us * params * 1e-6


@dataclass(frozen=True)
class Compiled:
    """How ``ampbench run``'s compiled cells run the model's forward and backward (:mod:`ampbench.execution.axes`):
    Inductor's kernels (``fuse``: compile on or max-autotune; :mod:`ampbench.predict.fusion`) and/or CUDA graphs
    (``graphs``). The loss, the engine's step and the optimizer stay eager, as ``run`` keeps them.

    The host's time in a compiled graph is its own, not eager's per-op dispatch: each call of a graph runs dynamo's
    guards and AOTAutograd's wrapper (``graph_us``), then Inductor's wrapper launches each kernel (``kernel_us``: a
    Triton kernel through its launcher, a library call through ATen); under CUDA graphs the kernels are replayed
    together (``replay_us`` a graph, none per kernel). Priors, not measured here: the per-kernel and per-graph costs
    are tritonbench's profile of Inductor's launch path (pytorch tritonbench PR 1017, 2026: 9.1 us a kernel of 19
    arguments through ``CachingAutotuner.run``, 42.4 us a one-kernel graph end to end, guards included, on a GB200's
    host); the replay a CUDA graph launch and cudagraph trees' checks (not measured anywhere we could find)."""

    fuse: bool
    graphs: bool
    kernel_us: float = 9.1
    graph_us: float = 33.3
    replay_us: float = 30.0

    @classmethod
    def of(cls, execution: Execution) -> Compiled | None:
        """The compiled execution a cell runs (None: eager)."""
        if not execution.compiled:
            return None
        return cls(fuse=execution.compile != "off", graphs=execution.cuda_graphs == "on")

    def op_us(self, op: Op) -> float | None:
        """The host's time to issue ``op`` in a compiled graph (None: not the model's, issued as eager does): a
        launch per kernel (a fused group's ``tensors`` of them)."""
        if not op.in_model:
            return None
        return 0.0 if self.graphs else self.kernel_us * (op.tensors if op.name == fusion.FUSED else 1)

    def graph_call_us(self) -> float:
        return self.graph_us + (self.replay_us if self.graphs else 0.0)


MEASURED_HOST = Host()
"""Measured, not fitted: ``benchmarks/host_overhead.py`` on the H200 machine lent on 2026-11-26 (a Firecracker VM with
16 vCPUs, torch 2.11; ``benchmarks/results/h200/host_overhead.json``) -- a stack of tiny Linear + ReLU layers whose
kernels take a few microseconds each, every phase timed on the host and its ops counted as the trace counts them
(views and the zero-cost ops left out: their time is inside these figures): 24.1 us per forward op, 27.9 per backward
op, 558 us for a fused AdamW step of 48 parameters. A step whose ops take the GPU less time than this is launch-bound:
its time is its host's, and a faster host (bare metal, a newer CPU) shortens it -- the figures are that machine's.
Checked against the steps measured there (``tests/predict/test_measured_gpu.py``); they replace a guess of 10 and 4
that made every launch-bound step ~80% too fast."""
TORCHAO_STEP_US = 20.0
"""Host time per parameter of torchao's low-precision Adam, microseconds: a Python loop calling a torch.compile'd
update per parameter (dynamo's guard checks and the call: tens of microseconds each; not measured here)."""
FOREACH_TENSORS = 48
"""Tensors one multi-tensor-apply launch covers (torch's ``_foreach_*`` kernels; fused Adam takes 36 of 4 lists)."""
ELEMENT = kernels.ELEMENT

MATMUL_OPS = {"aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten.convolution", "aten.convolution_backward",
              "ampbench_predict.rnn_layer", "ampbench_predict.rnn_layer_backward"}
ATTENTION_OPS = {"ampbench_predict.fused_attention", "ampbench_predict.fused_attention_backward"}
NORM_OPS = {"aten.native_layer_norm", "aten.native_layer_norm_backward", "aten.native_batch_norm",
            "aten.native_batch_norm_backward", "aten._native_batch_norm_legit", "aten._native_batch_norm_legit_functional",
            "aten._native_batch_norm_legit_no_training", "aten.native_group_norm", "aten.native_group_norm_backward",
            "aten._fused_rms_norm", "aten._fused_rms_norm_backward", "aten.cudnn_batch_norm",
            "aten.cudnn_batch_norm_backward"}
SOFTMAX_OPS = {"aten._softmax", "aten._log_softmax", "aten._softmax_backward_data", "aten._log_softmax_backward_data"}
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


def math_of(op: Op, tf32: bool) -> str:
    """The math an op's GEMMs run in: its dtype's, fp32 ones as TF32 where the mode allows it -- but fused attention,
    whose fp32 kernel (PyTorch's memory-efficient attention: flash has none) computes its own way whatever the TF32
    flags say (the lent H200: 29 TFLOP/s forward in fp32, with and without them; cuBLAS's TF32 GEMMs 330-410)."""
    if op.dtype in ("fp16", "bf16", "fp8"):  # (fp8: torchao's scaled matmuls, at the fp8 Tensor Core rate)
        return op.dtype
    return "tf32" if tf32 and op.name not in ATTENTION_OPS else "fp32"


@dataclass
class OpCost:
    op: Op
    cls: str
    gpu_s: float
    compute_s: float
    """Of ``gpu_s``: the time bound by arithmetic (0 for a memory-bound op)."""
    fixed_s: float
    """Of ``gpu_s``: the kernels' fixed costs."""
    launches: int

    def __post_init__(self) -> None:  # (the compute part of a faster algorithm than the one it was counted for)
        self.fixed_s = min(self.fixed_s, self.gpu_s)
        self.compute_s = max(0.0, min(self.compute_s, self.gpu_s - self.fixed_s))

    @property
    def memory_s(self) -> float:
        return max(0.0, self.gpu_s - self.compute_s - self.fixed_s)


def _gemm(gpu: Gpu, cal: Calibration, shape: tuple[int, int, int, int], math_mode: str, element: int,
          efficiency: float = 1.0) -> tuple[float, float]:
    """(time, compute part) of a GEMM; TF32 never slower than fp32's kernels."""
    b, m, n, k = shape
    total = kernels.gemm_s(gpu, cal, b, m, n, k, math_mode, element, efficiency)
    compute = kernels.gemm_compute_s(gpu, cal, b, m, n, k, math_mode, efficiency)
    if math_mode == "tf32":
        fp32 = kernels.gemm_s(gpu, cal, b, m, n, k, "fp32", element, efficiency)
        if fp32 < total:
            return fp32, kernels.gemm_compute_s(gpu, cal, b, m, n, k, "fp32", efficiency)
    return total, min(compute, total)


def price_op(op: Op, gpu: Gpu, tf32: bool, cal: Calibration) -> OpCost:
    """One op's GPU time on ``gpu``."""
    cls = op_class(op)
    fixed = cal.kernel_us * 1e-6
    light = cal.light_kernel_us * 1e-6
    moved = op.bytes_read + op.bytes_written
    mode = math_of(op, tf32)
    element = ELEMENT.get(op.dtype, 4)
    if op.conv is not None and op.products:
        t = op.products * kernels.conv_s(gpu, cal, op.conv, mode, element, op.nchw)
        g, m, n, k = op.conv.gemm()
        compute = op.products * kernels.gemm_compute_s(gpu, cal, g, m, n, k, mode,
                                                       kernels.implicit_efficiency(op.conv, mode, cal))
        return OpCost(op, cls, t, min(compute, t), op.products * fixed, op.products)
    if op.name in ("ampbench_predict.rnn_layer", "ampbench_predict.rnn_layer_backward"):
        return _rnn(op, gpu, cal, mode, element)
    if op.gemm is not None and op.flops:
        t, compute = _gemm(gpu, cal, op.gemm, mode, element)
        products = 2 if op.name == "aten.convolution_backward" else 1
        return OpCost(op, cls, products * t, products * compute, products * fixed, products)
    if cls == "attention" and op.flops:
        compute = kernels.attention_compute_s(gpu, cal, op.flops / (2 if op.causal else 1), mode)
        t = max(compute, kernels.memory_s(gpu, cal, moved)) + fixed
        return OpCost(op, cls, t, min(compute, t), fixed, 1)
    if op.name == fusion.FUSED:  # Inductor's kernels of a fused group (``tensors`` of them): its bytes once
        return OpCost(op, cls, kernels.streaming_s(gpu, cal, moved) + (op.tensors - 1) * light, 0.0,
                      op.tensors * light, op.tensors)
    launches = math.ceil(op.tensors / _per_launch(op)) if op.tensors > 1 else 1
    if op.name in NORM_OPS:
        t = kernels.reduction_s(gpu, cal, moved, "norm")
    elif op.name in SOFTMAX_OPS:
        t = kernels.reduction_s(gpu, cal, moved, "softmax")
    else:
        t = kernels.streaming_s(gpu, cal, moved)
    return OpCost(op, cls, t + (launches - 1) * light, 0.0, launches * light, launches)


def _host_s(op: Op, host: Host) -> float:
    if op.name == "torchao.single_param_adam":
        return TORCHAO_STEP_US * op.tensors * 1e-6
    if op.name in (FUSED_OPTIMIZER, DIRECT_FUSED_STEP):
        return host.optimizer_s(op.tensors, direct=op.name == DIRECT_FUSED_STEP)
    return host.op_us(op.phase) * 1e-6


def _per_launch(op: Op) -> int:
    return {FUSED_OPTIMIZER: 36, DIRECT_FUSED_STEP: 36, "torchao.single_param_adam": 1}.get(op.name, FOREACH_TENSORS)


def _rnn(op: Op, gpu: Gpu, cal: Calibration, mode: str, element: int) -> OpCost:
    """A fused RNN layer (its directions as ``op.tensors``): :func:`ampbench.predict.kernels.rnn_compute_s`, or its
    bytes where they take longer."""
    assert op.rnn is not None
    directions = max(1, op.tensors)
    compute = kernels.rnn_compute_s(gpu, cal, op.rnn, mode, op.name.endswith("backward"), directions)
    fixed = cal.kernel_us * 1e-6
    t = max(compute, kernels.memory_s(gpu, cal, op.bytes_read + op.bytes_written)) + fixed
    return OpCost(op, "matmul/conv", t, min(compute, t), fixed, directions)


@dataclass
class StepCost:
    step_s: float
    gpu_s: float
    host_s: float
    flops: int
    math_mode: str
    """The math of the step's GEMMs (fp32, tf32, fp16, bf16; fp8 where torchao's scaled matmuls run)."""
    time_split: dict[str, float]
    """Share of the step: compute-bound, memory-bound and launch (GPU fixed costs, and the host when it is slower)."""
    op_split: dict[str, float]
    """Share of the GPU time per op class."""
    ops: int
    launches: int
    notes: list[str] = field(default_factory=list)
    kernels: str = ""
    """What the kernels were priced from: a measured kernel table's source, or "" (the model alone)."""
    measured_share: float = 0.0
    """Of the GPU time: the share of ops a measured kernel of their kind priced."""
    energy_j: float | None = None
    """The board's energy over the step at the kernel table's measured power (each op at its kind's reading, the GPU's
    idle time at the idle reading); None without a table that read power (then TDP prices it: :attr:`power_w`)."""
    powered_share: float = 0.0
    """Of the GPU time: the share of ops whose own kind's power was read (the rest at the highest reading)."""
    idle_w: float | None = None
    """The board's power between kernels, where a table read it (a collective waited on is priced at it)."""

    @property
    def power_w(self) -> float | None:
        """The board's mean power over the step, as priced (None: not priced from measured power)."""
        return self.energy_j / self.step_s if self.energy_j is not None and self.step_s > 0 else None

    @property
    def bound(self) -> str:
        """The largest share of :attr:`time_split` (a step whose host issues the ops a little slower than its GPU runs
        them is still bound by what its GPU spends most of it on; the launch-bound note says the host's part)."""
        return bound_of(self.time_split)


def bound_of(split: dict[str, float]) -> str:
    """What a step is bound by: the largest share of its time split (compute, memory, launch, communication)."""
    return max(split, key=lambda k: split[k]) if split else "compute"


FUSED_OPTIMIZER = "aten._fused_optimizer"
DIRECT_FUSED_STEP = "ampbench.direct_fused_step"
"""The same kernel when the engine steps the optimizer directly (Adam, AdamW, SGD): the host's time is its own."""
PRICED_PER_PARAMETER = {FUSED_OPTIMIZER, DIRECT_FUSED_STEP, "torchao.single_param_adam"}
"""Optimizer ops whose host time is priced per parameter (their launches inside it)."""

DIRECT_OPTIMIZERS = tuple(c.__name__ for c in DIRECT)
"""torch's optimizers the engine steps directly when fused (:data:`ampbench.precision.fused_step.DIRECT`)."""


def _fused_optimizer(trace: Trace, host: Host) -> list[Op]:
    """The optimizer's update as the engine runs it on CUDA (torch's fused kernel): each parameter, its gradient and
    its state read once, the parameter and the state written once. Stepped directly (Adam, AdamW, SGD): the kernel as
    its own op, and Adam's step counts counted up (and, with the inf/NaN flag the engine gives it, back down) by a
    multi-tensor op each -- what :mod:`ampbench.precision.fused_step` issues; through ``optimizer.step()``: one op
    whose host time is torch's per parameter, those ops in it."""
    n = max(1, trace.stepped_params)
    direct = trace.optimizer in DIRECT_OPTIMIZERS and host.steps_directly
    kernel = fused_update(DIRECT_FUSED_STEP if direct else FUSED_OPTIMIZER, trace.stepped_bytes, trace.state_bytes, n)
    if not direct or trace.optimizer == "SGD":
        return [kernel]
    counts = [Op(f"aten._foreach_{how}_", "optimizer", 0, 4 * n, 4 * n, "fp32", n) for how in ("add", "sub")]
    return [counts[0], kernel, counts[1]]


def _torchao_optimizer(trace: Trace) -> Op:
    """torchao's update as it runs on CUDA: compiled (fullgraph) into one kernel per parameter, which reads the
    parameter, its gradient and its (quantized) states once and writes the parameter and the states."""
    return fused_update("torchao.single_param_adam", trace.stepped_bytes, trace.state_bytes, trace.stepped_params)


PHASES = ("forward", "loss", "backward", "step", "optimizer")
AUTO = "auto"
"""``price(kernels=AUTO)``: the measured kernel table of the GPU's architecture where one exists
(:func:`ampbench.predict.measured_kernels.table_for`), else the model alone."""


def price(trace: Trace, gpu: Gpu, tf32: bool, phases: Collection[str] = PHASES,
          cal: Calibration | None = None, host: Host = MEASURED_HOST, compiled: Compiled | None = None,
          conv_tf32: bool = False, kernels: KernelTable | str | None = AUTO) -> StepCost:
    """The step's time on ``gpu`` (:func:`_price`); a step accumulating more than
    :data:`~ampbench.predict.accumulation.LINEAR_FROM` micro-batches from its steps of that many and one fewer,
    extended linearly (every micro-batch from the third runs the same ops: the same time each, once the host and the
    GPU are in step)."""
    n, linear = trace.accumulate, LINEAR_FROM
    if n <= linear:
        return _price(trace, gpu, tf32, phases, cal, host, compiled, conv_tf32, kernels)
    a, b = (_price(replace(trace, accumulate=k), gpu, tf32, phases, cal, host, compiled, conv_tf32, kernels)
            for k in (linear - 1, linear))
    return _extended(a, b, n - linear)


def _extended(a: StepCost, b: StepCost, more: int) -> StepCost:
    """``b`` and ``more`` times what ``b`` adds to ``a`` (one micro-batch): the sums extended, the shares of them
    taken again over the extended totals."""
    def ext(x: float, y: float) -> float:
        return y + more * (y - x)

    step_s, gpu_s = ext(a.step_s, b.step_s), ext(a.gpu_s, b.gpu_s)
    time_split = {k: ext(a.time_split.get(k, 0.0) * a.step_s, v * b.step_s) / step_s for k, v in b.time_split.items()}
    op_split = {k: ext(a.op_split.get(k, 0.0) * a.gpu_s, v * b.gpu_s) / gpu_s for k, v in b.op_split.items()}
    energy = None if a.energy_j is None or b.energy_j is None else ext(a.energy_j, b.energy_j)
    return replace(b, step_s=step_s, gpu_s=gpu_s, host_s=ext(a.host_s, b.host_s), flops=round(ext(a.flops, b.flops)),
                   time_split=time_split, op_split=op_split, ops=round(ext(a.ops, b.ops)),
                   launches=round(ext(a.launches, b.launches)),
                   measured_share=ext(a.measured_share * a.gpu_s, b.measured_share * b.gpu_s) / gpu_s,
                   energy_j=energy, powered_share=ext(a.powered_share * a.gpu_s, b.powered_share * b.gpu_s) / gpu_s)


def op_costs(trace: Trace, gpu: Gpu, tf32: bool, phases: Collection[str] = PHASES, cal: Calibration | None = None,
             host: Host = MEASURED_HOST, compiled: Compiled | None = None, conv_tf32: bool = False,
             kernels: KernelTable | str | None = AUTO) -> tuple[list[OpCost], list[bool], KernelTable | None, float]:
    """Each op of the step as the GPU runs it, priced (:func:`price_op`, corrected by the measured kernel table where
    one prices it): the costs in issue order, each one's TF32 flag, the table used (None: the model alone) and the GPU
    time the table priced. The arguments are :func:`_price`'s."""
    table = measured_kernels.table_for(gpu) if kernels == AUTO else kernels
    assert table is None or isinstance(table, KernelTable)
    cal = cal or calibration()
    traced = step_ops(trace)  # (an accumulated step's micro-batches spelt out)
    ops = fusion.compiled(traced, trace.outputs) if compiled is not None and compiled.fuse else list(traced)
    if trace.fusable:  # the engine runs torch's fused optimizer on CUDA: one multi-tensor kernel, not the traced loop
        ops = [o for o in ops if o.phase != "optimizer"] + _fused_optimizer(trace, host)
    elif trace.torchao:  # traced op by op (compile off); on CUDA torchao compiles it: a kernel per parameter
        ops = [o for o in ops if o.phase != "optimizer"] + [_torchao_optimizer(trace)]
    ops = [o for o in ops if o.phase in phases]
    modes = [tf32 or (conv_tf32 and o.name.startswith("aten.convolution")) for o in ops]
    costs = [price_op(o, gpu, t, cal) for o, t in zip(ops, modes)]
    measured_s = 0.0
    if table is not None:
        for c, t in zip(costs, modes):
            ratio = table.ratio_for(c.op, math_of(c.op, t))
            if ratio is not None:
                c.gpu_s, c.compute_s, c.fixed_s = c.gpu_s * ratio, c.compute_s * ratio, c.fixed_s * ratio
                measured_s += c.gpu_s
    return costs, modes, table, measured_s


def issue_times(trace: Trace, costs: list[OpCost], modes: list[bool], table: KernelTable | None, host: Host,
                compiled: Compiled | None = None) -> list[tuple[float, ...]]:
    """The host's time to issue each op of :func:`op_costs` (seconds, in the parts :func:`_price` adds them in): the
    host's time per op of its phase, its kind's issue beyond the per-op mix where the kernel table timed it, a launch
    for each kernel beyond its first, a checkpointed block's Python; in a compiled graph its launch, and the graph's
    call on its first op."""
    out: list[tuple[float, ...]] = []
    graph: str | None = None  # the compiled graph being issued (forward, backward)
    scale = host.forward_us / MEASURED_HOST.forward_us  # (a table's issue times are its host's: another host's pace)
    checkpointed, block = CHECKPOINT_HOST.get(trace.checkpointing), 0
    for c, t in zip(costs, modes):
        us = compiled.op_us(c.op) if compiled is not None else None
        if us is None:
            graph = None
            extra = table.host_extra_us(c.op, math_of(c.op, t)) * scale if table is not None else 0.0
            if c.op.name not in PRICED_PER_PARAMETER:  # (each kernel beyond an op's first: its launch)
                extra += (c.launches - 1) * host.launch_us(c.op.phase)
            if checkpointed is not None and c.op.block and c.op.phase == "forward":  # (a checkpointed block's Python)
                extra += (checkpointed.per_op + (checkpointed.per_block if c.op.block != block else 0.0)) \
                    * host.python_us
                block = c.op.block
            if c.op.accumulates_grad:  # (in place of a kernel-less detach: the launch it adds, not a whole op)
                out.append((host.launch_us("backward") * 1e-6,))
            else:
                out.append((max(0.0, _host_s(c.op, host) + extra * 1e-6),))
        else:
            call = ()
            if graph != c.op.phase:  # (a graph's call: guards, wrappers, a CUDA graph's replay)
                graph = c.op.phase
                call = (compiled.graph_call_us() * 1e-6,)  # type: ignore[union-attr]
            out.append((*call, us * 1e-6))
    return out


def _price(trace: Trace, gpu: Gpu, tf32: bool, phases: Collection[str] = PHASES,
           cal: Calibration | None = None, host: Host = MEASURED_HOST, compiled: Compiled | None = None,
           conv_tf32: bool = False, kernels: KernelTable | str | None = AUTO) -> StepCost:
    """The step's time on ``gpu`` (``tf32``: fp32 matmuls and convolutions may run as TF32; ``conv_tf32``: the
    convolutions alone, as cuDNN's default is) issued by ``host``; ``phases``: the parts of the step priced (a
    forward-and-backward reference leaves the loss and the optimizer out); ``compiled``: the model's forward and
    backward as torch.compile runs them (None: eager); ``kernels``: a measured kernel table correcting each op's
    modelled time (:mod:`ampbench.predict.measured_kernels`; AUTO: the GPU architecture's where one exists, None: the
    model alone)."""
    costs, modes, table, measured_s = op_costs(trace, gpu, tf32, phases, cal, host, compiled, conv_tf32, kernels)
    ops = [c.op for c in costs]
    gpu_s = sum(c.gpu_s for c in costs)
    issued, done = 0.0, 0.0  # the host issues each op in turn; the GPU runs it once issued and the previous one done
    for c, issue in zip(costs, issue_times(trace, costs, modes, table, host, compiled)):
        for part in issue:
            issued += part
        done = max(done, issued) + c.gpu_s
    host_s = issued
    step_s = done
    by_bound: dict[str, float] = defaultdict(float)
    by_class: dict[str, float] = dict.fromkeys(OP_CLASSES, 0.0)
    for c in costs:
        by_bound["compute"] += c.compute_s
        by_bound["memory"] += c.memory_s
        by_bound["launch"] += c.fixed_s
        by_class[c.cls] += c.gpu_s
    notes: list[str] = []
    waited = step_s - gpu_s  # the GPU idle, waiting for the host to issue its next op: launch overhead too
    by_bound["launch"] += waited
    if host_s > gpu_s:
        cure = ("a larger batch" if compiled is not None and compiled.graphs else  # (what the step does not run yet)
                "CUDA graphs remove most of it" if compiled is not None and compiled.fuse else
                "CUDA graphs or torch.compile remove most of it")
        notes.append(f"launch-bound: the host issues {len(costs)} ops in ~{host_s * 1e3:.2f} ms, the GPU runs them in "
                     f"~{gpu_s * 1e3:.2f} ms ({cure})")
    time_split = {k: by_bound.get(k, 0.0) / step_s for k in ("compute", "memory", "launch")} if step_s else {}
    op_split = {k: v / gpu_s for k, v in by_class.items()} if gpu_s else by_class
    half = {o.dtype for o in ops if o.name in MATMUL_OPS and o.dtype in ("fp16", "bf16", "fp8")}
    math_mode = "fp8" if "fp8" in half else next(iter(half)) if half else ("tf32" if tf32 else "fp32")
    energy = _energy(costs, modes, step_s, gpu, table) if table is not None else None
    idle_w = table.idle_w(gpu) if energy is not None and table is not None else None
    return StepCost(step_s, gpu_s, host_s, sum(o.flops for o in ops), math_mode, time_split, op_split, len(costs),
                    sum(c.launches for c in costs), notes, table.source if table is not None else "",
                    measured_s / gpu_s if gpu_s else 0.0, *(energy or (None, 0.0)), idle_w)


def _energy(costs: list[OpCost], modes: list[bool], step_s: float, gpu: Gpu,
            table: KernelTable) -> tuple[float, float] | None:
    """(joules, share of the GPU time priced at its own kind's power) of a priced step at the table's measured power:
    each op's time at its kind's reading (a kind the sweep did not read: the highest reading, an upper bound), the
    step's GPU-idle time at the idle reading. None where the table read no power."""
    idle, highest = table.idle_w(gpu), table.highest_w(gpu)
    if idle is None or highest is None:
        return None
    joules, own, gpu_s = 0.0, 0.0, 0.0
    for c, t in zip(costs, modes):
        watts = table.power_for(c.op, math_of(c.op, t), gpu)
        own += c.gpu_s if watts is not None else 0.0
        joules += c.gpu_s * (watts if watts is not None else highest)
        gpu_s += c.gpu_s
    return joules + max(0.0, step_s - gpu_s) * idle, own / gpu_s if gpu_s else 0.0
