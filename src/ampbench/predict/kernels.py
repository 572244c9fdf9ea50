"""The time of one GPU kernel, from the GPU's datasheet and a handful of constants fitted on measured kernels.

Each op class has its own model, written from how the kernels work; the constants (:class:`Calibration`) are fitted
on measured kernels -- NeuSight's fp32 kernels on 8 GPUs, OpenXLA's H100 bf16 GEMMs, the lent H200's cuBLAS GEMMs and
convolutions (``benchmarks/kernel_references.py --fit``, which writes ``calibration.json`` with what was fitted on
what) -- and checked on whole training steps only (docs/predict.md). A GPU's Tensor Core share of its peak is the
H100's scaled by its measured matmul ceiling (:func:`ceiling_ratio`, the MAMF table).

- **GEMM** (matmuls, linear layers, the GEMMs of a convolution, of attention and of an RNN): cuBLAS tiles the output
  and runs the tiles in waves over the SMs; a partial tile computes its whole, a partial wave leaves SMs idle, a GEMM
  with fewer tiles than SMs is split along K. The time is the best tile shape's (what cuBLAS's heuristics pick):
  ``waves x tile work / (per-SM peak x tile efficiency x K/(K + k_half))``, or the bytes at the memory bandwidth when
  that is longer, plus a fixed cost per kernel. The per-SM peak is the math's: Tensor Cores for tf32/fp16/bf16, the
  fp32 lanes for fp32 -- on compute capability 8.6/8.9 half of those lanes are shared with integer math, which a
  SIMT GEMM needs (GA102/AD102 whitepapers), so fp32 GEMMs get the other half.
- **Convolution**: the best of implicit GEMM and, for 3x3 stride-1 dense fp32 layers, Winograd F(4x4, 3x3) (36
  batched GEMMs of a quarter of the work plus its input/output transforms), as cuDNN's benchmark mode picks.
- **Memory-bound ops** (elementwise, casts, reductions, optimizers): the bytes at the bandwidth times an efficiency.
- **Normalisation and softmax**: memory-bound over more than one pass: the statistics (the maximum and the sum) are
  read before the output is written.
- **Clocks**: a card whose board power is at most 75 W (P4, T4, L4) cannot hold its boost clock under a dense kernel;
  it sustains ``base + clock_share x (boost - base)``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import asdict, dataclass, fields
from functools import cache
from pathlib import Path
from typing import Any

from ampbench.measure.gpus import Gpu

CALIBRATION_FILE = Path(__file__).with_name("calibration.json")
CEILINGS_FILE = Path(__file__).with_name("matmul_ceilings.json")


@dataclass(frozen=True)
class Calibration:
    """The constants of the kernel models. Defaults are priors; ``calibration.json`` holds the fitted values and says
    which were fitted on what (the rest keep their prior, with the reason)."""

    gemm_efficiency: float = 0.85
    """Share of the per-SM fp32 peak a 128x128-tile SIMT GEMM reaches."""
    tensor_gemm_efficiency: float = 0.80
    """The same for fp16/bf16 (and fp8) Tensor Core GEMMs on the H100 SXM (fitted on XLA's measured H100 GEMMs); another
    GPU's is this times its measured matmul ceiling over the H100's (:func:`ceiling_ratio`, the MAMF table)."""
    tf32_gemm_efficiency: float = 0.80
    """The same for TF32 Tensor Core GEMMs (fitted on XLA's measured H100 TF32 GEMMs: they reach less of their peak at
    the shapes models use than bf16's do of theirs)."""
    tensor_k_half: float = 32.0
    """``k_half`` of 2-byte Tensor Core GEMMs (a deeper pipeline to fill: fitted on XLA's measured H100 GEMMs); TF32's
    is twice it (its K-steps move twice the bytes)."""
    tile_128x64: float = 0.9
    tile_64x64: float = 0.7
    tile_32x32: float = 0.4
    """Efficiency of the smaller tiles relative to 128x128 (more loads per multiply-add)."""
    k_half: float = 32.0
    """The K at which a tile reaches half its efficiency (prologue and epilogue over a short K loop)."""
    kernel_us: float = 5.0
    """Fixed cost of a cuBLAS/cuDNN kernel (launch, ramp-up, tail), microseconds. Not fitted: every measured kernel
    of the references takes 35 us or more, which says nothing about a few microseconds."""
    light_kernel_us: float = 3.0
    """The same for PyTorch's own elementwise and reduction kernels. Not fitted (as ``kernel_us``)."""
    capped_streaming_efficiency: float = 0.75
    """Share of the datasheet DRAM bandwidth a streaming kernel reaches on a card whose board power is at most 75 W
    (P4, T4, L4: fitted on their elementwise kernels) and on Pascal and earlier (P100's HBM2: NVIDIA's Volta whitepaper
    gives Pascal 76% DRAM utilisation)."""
    streaming_efficiency: float = 0.9
    """The same from Volta on, on every other card, HBM and GDDR alike (fitted on the V100's, A100s' and H100's
    elementwise kernels; the Volta whitepaper: over 95% DRAM utilisation). Full-power GDDR6 boards stream as HBM ones
    do: te42kyfo/gpu-benches' STREAM "scale" reaches 0.94 of the A40's and 0.94 of the L40's datasheet bandwidth, 0.89
    of the V100's and the A100's (``tests/predict/test_streaming.py`` holds them)."""
    norm_passes: float = 2.0
    """Times a normalisation moves each element (its bytes over read-once-write-once's): a second read of the input
    for the statistics, where the row is not kept on chip."""
    softmax_passes: float = 2.0
    winograd_efficiency: float = 0.6
    """Share of the GEMM efficiency Winograd's batched GEMMs reach (fp32 3x3 stride-1 convolutions)."""
    conv_efficiency: float = 0.7
    """Share of the GEMM efficiency an implicit-GEMM convolution over a window (3x3, 7x7) reaches in fp32 (its gathers).
    Not fitted: every measured convolution is 3x3 stride 1, where cuDNN mostly picks Winograd, and the fit, free to,
    drove this to zero (it cannot tell it from there)."""
    tensor_conv_efficiency: float = 1.0
    """The same for fp16/bf16 Tensor Core convolutions over a window, channels-last (fitted on the lent H200's measured
    convolutions, ``calibration/h200.csv``: their time over the GEMM model's at their implicit GEMM)."""
    clock_share: float = 0.2
    """Power-capped cards (<= 75 W): the sustained clock's place between base (0) and boost (1)."""
    attention_efficiency: float = 0.5
    """Fused attention's share of the GEMM peak (softmax and rescaling between its GEMMs; flash/memory-efficient
    kernels). Not fitted (no attention kernel is among the measured references)."""
    rnn_step_us: float = 2.0
    """A fused RNN layer's time per step at least (one recurrent GEMM after another). Not fitted."""

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


@cache
def calibration() -> Calibration:
    """The fitted constants (``calibration.json``), the priors where it has none."""
    if not CALIBRATION_FILE.is_file():
        return Calibration()
    data = json.loads(CALIBRATION_FILE.read_text())
    return Calibration(**{k: float(v) for k, v in data["constants"].items() if k in Calibration.names()})


def save_calibration(cal: Calibration, provenance: dict[str, Any], path: Path = CALIBRATION_FILE) -> None:
    path.write_text(json.dumps({"constants": asdict(cal), **provenance}, indent=1) + "\n")
    calibration.cache_clear()


ELEMENT = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp64": 8, "fp8": 1}
"""Bytes of an element of each dtype (tf32: fp32 storage)."""


# ---- the GPU -----------------------------------------------------------------------------------------------------
def clock_factor(gpu: Gpu, cal: Calibration) -> float:
    """Sustained clock over boost under a dense kernel: 1, but for cards whose board power caps it (<= 75 W)."""
    if not power_capped(gpu) or not gpu.base_mhz or not gpu.boost_mhz:
        return 1.0
    return (gpu.base_mhz + cal.clock_share * (gpu.boost_mhz - gpu.base_mhz)) / gpu.boost_mhz


def simt_share(gpu: Gpu) -> float:
    """Share of the datasheet fp32 rate a SIMT GEMM can use: half on GA10x/AD10x (compute capability 8.6, 8.7, 8.9),
    whose SMs have 64 fp32 lanes and 64 lanes shared between fp32 and int32 (GA102 and Ada whitepapers); all
    elsewhere."""
    return 0.5 if gpu.capability in ((8, 6), (8, 7), (8, 9)) else 1.0


def peak_flops(gpu: Gpu, math_mode: str, cal: Calibration) -> float:
    """FLOP/s a GEMM in ``math_mode`` can reach at most on ``gpu`` (its clocks as sustained)."""
    tflops = gpu.tflops
    if math_mode == "fp32" or math_mode not in tflops:
        return tflops["fp32"] * 1e12 * simt_share(gpu) * clock_factor(gpu, cal)
    return tflops[math_mode] * 1e12 * clock_factor(gpu, cal)


def clock_hz(gpu: Gpu, cal: Calibration) -> float:
    boost = gpu.boost_mhz or 1500.0
    return boost * 1e6 * clock_factor(gpu, cal)


# ---- models ------------------------------------------------------------------------------------------------------
TILES: tuple[tuple[int, int, str], ...] = ((128, 128, ""), (128, 64, "tile_128x64"), (64, 128, "tile_128x64"),
                                           (64, 64, "tile_64x64"), (32, 32, "tile_32x32"))
SPLIT_K_MIN = 256
"""A GEMM with fewer tiles than SMs is split along K in chunks of at least this many."""


@cache
def ceilings() -> dict[str, Any]:
    """The GPUs' measured matmul ceilings relative to the H100 SXM's (``matmul_ceilings.json``, derived from the MAMF
    table by ``predict_checks/mamf.py``); empty where the file is absent."""
    return json.loads(CEILINGS_FILE.read_text()) if CEILINGS_FILE.is_file() else {}


def ceiling_ratio(gpu: Gpu, math_mode: str) -> float:
    """A Tensor Core GEMM's best measured share of ``gpu``'s peak over the H100 SXM's bf16 one (the GPU the Tensor
    Core constants were fitted on): the GPU's own MAMF row, fp8 from its bf16 row where it has no fp8 one; 1 (the
    H100's) for a GPU the table does not list."""
    table = ceilings()
    own = table.get("ratios", {}).get(gpu.key, {})
    if math_mode == "fp8":
        return float(own["fp8"]) if "fp8" in own else float(own.get("bf16", 1.0)) * float(table.get("fp8_over_bf16", 1.0))
    return float(own.get("bf16", 1.0))


def gemm_base(gpu: Gpu, cal: Calibration, math_mode: str) -> tuple[float, float]:
    """(share of the math's peak a 128x128-tile GEMM reaches at long K, its ``k_half``)."""
    if math_mode == "fp32":
        return cal.gemm_efficiency, cal.k_half
    if math_mode == "tf32":  # (the pipeline's depth is bytes: a TF32 K-step moves twice a bf16 one's; the GPU's
        # Tensor Cores reach its share of their peak as its bf16 GEMMs do of theirs: the MAMF table has no TF32 rows)
        return cal.tf32_gemm_efficiency * ceiling_ratio(gpu, "bf16"), 2 * cal.tensor_k_half
    return cal.tensor_gemm_efficiency * ceiling_ratio(gpu, math_mode), cal.tensor_k_half


def gemm_compute_s(gpu: Gpu, cal: Calibration, batch: int, m: int, n: int, k: int, math_mode: str,
                   efficiency: float = 1.0) -> float:
    """The compute time of ``batch`` GEMMs of (m x k) @ (k x n): the best tile shape's waves."""
    base, k_half = gemm_base(gpu, cal, math_mode)
    per_sm = peak_flops(gpu, math_mode, cal) * base * efficiency / gpu.sms
    best = math.inf
    for tm, tn, name in TILES:
        tile_eff = getattr(cal, name) if name else 1.0
        tiles = batch * math.ceil(m / tm) * math.ceil(n / tn)
        split = 1
        if tiles < gpu.sms:
            split = max(1, min(gpu.sms // tiles, k // SPLIT_K_MIN))
        chunk = k / split
        waves = math.ceil(tiles * split / gpu.sms)
        tile_s = 2.0 * tm * tn * chunk / (per_sm * tile_eff * chunk / (chunk + k_half))
        best = min(best, waves * tile_s)
    return best


def power_capped(gpu: Gpu) -> bool:
    """A card whose board power is at most 75 W (P4, T4, L4, A2): its clocks and its memory's stay below a full
    board's."""
    return gpu.tdp_w is not None and gpu.tdp_w <= 75


def streaming_share(gpu: Gpu, cal: Calibration) -> float:
    """Share of ``gpu``'s datasheet DRAM bandwidth a streaming kernel reaches: ``streaming_efficiency`` from Volta on,
    ``capped_streaming_efficiency`` on a power-capped card or before Volta. (It used to follow the DRAM's kind -- HBM
    from Volta on or not --, which priced every full-power GDDR6/6X card, RTX 3090 to RTX 6000 Ada, at the low-power
    cards' 75%: their ResNet-50 AMP steps came out 11-30% too slow against Lambda's published ones.)"""
    if gpu.capability < (7, 0) or power_capped(gpu):
        return cal.capped_streaming_efficiency
    return cal.streaming_efficiency


def memory_s(gpu: Gpu, cal: Calibration, nbytes: float) -> float:
    return nbytes / (gpu.bandwidth_gbs * 1e9 * streaming_share(gpu, cal))


def gemm_s(gpu: Gpu, cal: Calibration, batch: int, m: int, n: int, k: int, math_mode: str, element: int,
           efficiency: float = 1.0) -> float:
    """A GEMM kernel: compute or its operands' bytes (each read once, the output written once), plus its fixed
    cost."""
    nbytes = element * batch * (m * k + k * n + m * n)
    compute = gemm_compute_s(gpu, cal, batch, m, n, k, math_mode, efficiency)
    return max(compute, memory_s(gpu, cal, nbytes)) + cal.kernel_us * 1e-6


@dataclass(frozen=True)
class Conv:
    """A 2-D convolution: batch, input channels, input height and width, output channels, kernel, stride, groups,
    output height and width."""

    n: int
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    stride: int
    groups: int
    p: int
    q: int

    def gemm(self) -> tuple[int, int, int, int]:
        """(batch = groups, M, N, K) of its implicit GEMM."""
        return self.groups, self.n * self.p * self.q, self.k // self.groups, self.c // self.groups * self.r * self.s


def implicit_efficiency(conv: Conv, math_mode: str, cal: Calibration) -> float:
    """An implicit-GEMM convolution's share of the GEMM efficiency, for filters with a spatial extent (gathering the
    windows): ``conv_efficiency`` in fp32 (cuDNN's SIMT kernels), ``tensor_conv_efficiency`` in fp16/bf16/fp8 (its
    Tensor Core kernels, measured on the lent H200); TF32's measured ones ran at the GEMM's. A 1x1 convolution is a
    GEMM."""
    if conv.r * conv.s == 1 or math_mode == "tf32":
        return 1.0
    return cal.conv_efficiency if math_mode == "fp32" else cal.tensor_conv_efficiency


TENSOR_CHANNELS = 8
"""A Tensor Core convolution's input channels (a group's) are padded to a multiple of this: the 3-channel stem of an
ImageNet convnet does 8/3 of its nominal work (the lent H200's 7x7 stem, fp16 channels-last forward: 154 us measured,
56 priced unpadded, 102 padded -- its deeper K also runs nearer the tile's efficiency)."""


def tensor_padded(conv: Conv, math_mode: str) -> Conv:
    """``conv`` as a Tensor Core kernel computes it: a dense layer's input channels padded to
    :data:`TENSOR_CHANNELS` (fp32's SIMT kernels take any)."""
    if math_mode == "fp32" or conv.groups != 1 or conv.c % TENSOR_CHANNELS == 0:
        return conv
    return dataclasses.replace(conv, c=-(-conv.c // TENSOR_CHANNELS) * TENSOR_CHANNELS)


def conv_s(gpu: Gpu, cal: Calibration, conv: Conv, math_mode: str, element: int, nchw: bool = False) -> float:
    """The forward (or one backward product: the same work) of a convolution: the fastest of cuDNN's algorithm
    families this model knows -- implicit GEMM (a Tensor Core one over :func:`tensor_padded` channels), and Winograd
    for dense 3x3 stride-1 layers in fp32 (for tf32 too: cuDNN may keep an fp32 algorithm when it is faster).
    ``nchw``: the tensors are NCHW, which Tensor Core kernels convert to NHWC and back."""
    g, m, n, k = tensor_padded(conv, math_mode).gemm()
    io = element * (conv.n * conv.c * conv.h * conv.w + conv.n * conv.k * conv.p * conv.q) + element * conv.k * k
    efficiency = implicit_efficiency(conv, math_mode, cal)
    implicit = max(gemm_compute_s(gpu, cal, g, m, n, k, math_mode, efficiency), memory_s(gpu, cal, io)) \
        + cal.kernel_us * 1e-6
    if nchw and math_mode != "fp32":  # cuDNN's Tensor Core kernels are NHWC: NCHW tensors converted in and out
        implicit += streaming_s(gpu, cal, 2 * io)
    best = implicit
    if math_mode == "tf32":  # (cuDNN keeps an fp32 algorithm where it is faster: TF32 is never slower than fp32)
        best = min(best, conv_s(gpu, cal, conv, "fp32", element))
    if math_mode == "fp32" and conv.groups == 1 and conv.r == conv.s == 3 and conv.stride == 1:
        tiles = conv.n * math.ceil(conv.p / 4) * math.ceil(conv.q / 4)
        batched = gemm_compute_s(gpu, cal, 36, tiles, conv.k, conv.c, "fp32", cal.winograd_efficiency)
        transforms = 4 * (conv.n * conv.c * conv.h * conv.w + 36 * tiles * (conv.c + conv.k) + conv.n * conv.k * conv.p
                          * conv.q)
        winograd = max(batched, memory_s(gpu, cal, transforms)) + 3 * cal.kernel_us * 1e-6  # (transforms: 3 kernels)
        best = min(best, winograd)
    if conv.groups > 1:
        best = min(best, direct_conv_s(gpu, cal, conv, io))
    return best


def direct_conv_s(gpu: Gpu, cal: Calibration, conv: Conv, io: float) -> float:
    """A grouped convolution as a direct kernel on the fp32 lanes, whatever the math mode: a depthwise layer (one
    channel a group: PyTorch's ``conv_depthwise2d``, cuDNN's depthwise kernels) has a GEMM of one column per group,
    which a Tensor Core or GEMM tile would compute 32 to 128 times over; a direct kernel does each output's window
    once, and with 7x7 windows and a few FLOPs a byte is often bound by its bytes. Its share of the fp32 peak is a
    windowed SIMT convolution's (``gemm_efficiency`` x ``conv_efficiency``); no depthwise or grouped kernel is among
    the measured references (none is fitted here). Dense layers keep the GEMM families (what the constants were
    fitted on)."""
    flops = 2 * conv.n * conv.k * conv.p * conv.q * (conv.c // conv.groups) * conv.r * conv.s
    compute = flops / (peak_flops(gpu, "fp32", cal) * cal.gemm_efficiency * cal.conv_efficiency)
    return max(compute, memory_s(gpu, cal, io)) + cal.kernel_us * 1e-6


def streaming_s(gpu: Gpu, cal: Calibration, nbytes: float) -> float:
    """An elementwise or other memory-bound kernel."""
    return memory_s(gpu, cal, nbytes) + cal.light_kernel_us * 1e-6


def reduction_s(gpu: Gpu, cal: Calibration, nbytes: float, kind: str) -> float:
    """A normalisation (``kind`` "norm") or softmax: its bytes (read and written once: ``nbytes``) times its passes
    over the data (the statistics or the maximum and sum read the input before the output is written)."""
    passes = cal.norm_passes if kind == "norm" else cal.softmax_passes
    return memory_s(gpu, cal, nbytes * passes / 2) + cal.light_kernel_us * 1e-6


def attention_compute_s(gpu: Gpu, cal: Calibration, work: float, mode: str) -> float:
    """Fused attention's arithmetic (``work``: its FLOPs, the causal half already left out): flash or
    memory-efficient kernels at ``attention_efficiency`` of the GEMM rate (softmax and rescaling between their GEMMs)."""
    return work / (peak_flops(gpu, mode, cal) * cal.tensor_gemm_efficiency * cal.attention_efficiency)


def rnn_compute_s(gpu: Gpu, cal: Calibration, rnn: tuple[int, int, int, int, int], mode: str, backward: bool,
                  directions: int = 1) -> float:
    """A fused RNN layer's arithmetic: the input GEMM over every step at once, then one recurrent GEMM per step, each
    after the previous and taking at least ``rnn_step_us``. The backward: the input GEMM's two gradients over every
    step, the recurrent gradient step by step, the recurrent weights' gradient at once."""
    steps, batch, inputs, gates, recurrent = rnn
    whole = gemm_compute_s(gpu, cal, directions, steps * batch, gates, inputs, mode)
    one_step = max(gemm_compute_s(gpu, cal, directions, batch, gates, recurrent, mode), cal.rnn_step_us * 1e-6)
    if backward:
        return 2 * whole + steps * one_step + gemm_compute_s(gpu, cal, directions, gates, recurrent, steps * batch, mode)
    return whole + steps * one_step
