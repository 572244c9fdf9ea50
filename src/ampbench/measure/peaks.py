"""Dense (no sparsity) peak TFLOP/s per GPU and math mode, with where each number comes from.

MFU = achieved FLOP/s / the peak for the math the GEMMs actually ran in (cf. nanoGPT's
``estimate_mfu``, which divides by A100's 312 bf16 TFLOP/s). Vendors print sparse figures ("with
sparsity"): the numbers below are the dense halves. GeForce cards run fp16/bf16 Tensor Core math
with fp32 accumulation (what PyTorch uses) at half the fp16-accumulate rate: those are the numbers
here. Boost clocks; a power- or clock-capped card reaches less (``ampbench hw`` measures it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuPeak:
    name: str
    match: tuple[str, ...]
    """Lower-case words of torch.cuda.get_device_name() that identify the card (each must occur as whole words:
    "l4" is not in "NVIDIA L40", nor "t4" in "NVIDIA T400")."""
    tflops: dict[str, float]
    """math mode (fp32, tf32, fp16, bf16, fp8) -> dense peak TFLOP/s"""
    source: str


# Order matters: more specific names first ("a100" before "a10", "h100 pcie" before "h100").
GPU_PEAKS: tuple[GpuPeak, ...] = (
    GpuPeak("H200", ("h200",), {"fp32": 67.0, "tf32": 494.5, "fp16": 989.5, "bf16": 989.5, "fp8": 1979.0},
            "NVIDIA H200 datasheet (SXM; sparse figures halved)"),
    GpuPeak("B200", ("b200",), {"fp32": 80.0, "tf32": 1100.0, "fp16": 2250.0, "bf16": 2250.0, "fp8": 4500.0},
            "NVIDIA HGX B200 datasheet, per GPU at 1000 W (sparse figures halved)"),
    GpuPeak("H100 NVL", ("h100", "nvl"), {"fp32": 60.0, "tf32": 417.5, "fp16": 835.5, "bf16": 835.5, "fp8": 1670.5},
            "NVIDIA H100 datasheet, H100 NVL column (sparse figures halved)"),
    GpuPeak("H100 PCIe", ("h100", "pcie"), {"fp32": 51.0, "tf32": 378.0, "fp16": 756.0, "bf16": 756.0, "fp8": 1513.0},
            "NVIDIA H100 datasheet, H100 PCIe column (sparse figures halved)"),
    GpuPeak("H100 SXM", ("h100",), {"fp32": 67.0, "tf32": 494.5, "fp16": 989.5, "bf16": 989.5, "fp8": 1979.0},
            "NVIDIA H100 datasheet, H100 SXM column (sparse figures halved)"),
    GpuPeak("A100", ("a100",), {"fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0},
            "NVIDIA A100 datasheet (same for 40/80 GB, SXM/PCIe)"),
    GpuPeak("A10G", ("a10g",), {"fp32": 31.2, "tf32": 62.5, "fp16": 125.0, "bf16": 125.0},
            "NVIDIA A10 datasheet (AWS A10G is an A10 variant; its clocks are lower, ampbench hw measures it)"),
    GpuPeak("A10", ("a10",), {"fp32": 31.2, "tf32": 62.5, "fp16": 125.0, "bf16": 125.0},
            "NVIDIA A10 datasheet (sparse figures halved)"),
    GpuPeak("L40S", ("l40s",), {"fp32": 91.6, "tf32": 183.0, "fp16": 362.05, "bf16": 362.05, "fp8": 733.0},
            "NVIDIA L40S datasheet (sparse figures halved)"),
    GpuPeak("L4", ("l4",), {"fp32": 30.3, "tf32": 60.0, "fp16": 121.0, "bf16": 121.0, "fp8": 242.5},
            "NVIDIA L4 datasheet (sparse figures halved)"),
    GpuPeak("V100 PCIe", ("v100", "pcie"), {"fp32": 14.0, "fp16": 112.0},
            "NVIDIA V100 datasheet, PCIe column"),
    GpuPeak("V100 SXM2", ("v100",), {"fp32": 15.7, "fp16": 125.0},
            "NVIDIA V100 datasheet, SXM2 column"),
    GpuPeak("T4", ("t4",), {"fp32": 8.1, "fp16": 65.0},
            "NVIDIA T4 datasheet"),
    GpuPeak("P100 PCIe", ("p100",), {"fp32": 9.3, "fp16": 18.7},
            "NVIDIA Tesla P100 datasheet, PCIe column (fp16 at twice fp32, no Tensor Cores)"),
    GpuPeak("P4", ("p4",), {"fp32": 5.5},
            "NVIDIA Tesla P4 datasheet (no fast fp16: GP104 runs it at 1/64 of fp32)"),
    GpuPeak("RTX 4090", ("rtx 4090",), {"fp32": 82.6, "tf32": 82.6, "fp16": 165.2, "bf16": 165.2, "fp8": 330.3},
            "NVIDIA Ada GPU architecture whitepaper, Table 2 (fp32 accumulate)"),
    GpuPeak("RTX 4080", ("rtx 4080",), {"fp32": 48.7, "tf32": 48.7, "fp16": 97.5, "bf16": 97.5, "fp8": 194.9},
            "NVIDIA Ada GPU architecture whitepaper (fp32 accumulate)"),
    GpuPeak("RTX 3090", ("rtx 3090",), {"fp32": 35.6, "tf32": 35.6, "fp16": 71.0, "bf16": 71.0},
            "NVIDIA Ampere GA102 whitepaper, Table 9 (fp32 accumulate)"),
    GpuPeak("RTX 3080", ("rtx 3080",), {"fp32": 29.8, "tf32": 29.8, "fp16": 59.5, "bf16": 59.5},
            "NVIDIA Ampere GA102 whitepaper, Table 9 (fp32 accumulate)"),
)



@dataclass(frozen=True)
class GpuSpec:
    """What ``ampbench predict`` needs of a GPU it does not have: its peaks (the :data:`GPU_PEAKS` entry ``peak``),
    memory, bandwidth, SM count and compute capability, with where the numbers come from."""

    key: str
    """The name ``--gpu`` takes (lower case)."""
    peak: str
    """The :data:`GPU_PEAKS` entry that holds its dense peaks."""
    memory_gib: float
    bandwidth_gbs: float
    """DRAM bandwidth, GB/s (10^9 bytes)."""
    sms: int
    capability: tuple[int, int]
    source: str
    tdp_w: float | None = None
    """Board power (the datasheet's max TDP)."""
    base_mhz: float | None = None
    boost_mhz: float | None = None
    """Base and boost clocks: a card whose board power caps its clocks (<= 75 W) sustains less than boost under load."""
    memory: str | None = None
    """DRAM kind (HBM2, HBM2e, HBM3, HBM3e, GDDR5, GDDR6, GDDR6X): how much of the bandwidth a kernel can stream."""

    @property
    def tflops(self) -> dict[str, float]:
        return next(p for p in GPU_PEAKS if p.name == self.peak).tflops

    @property
    def peak_source(self) -> str:
        return next(p for p in GPU_PEAKS if p.name == self.peak).source


GPU_SPECS: tuple[GpuSpec, ...] = (
    GpuSpec("p4", "P4", 8, 192, 20, (6, 1), "NVIDIA Tesla P4 datasheet; clocks: TechPowerUp GPU database", 75, 886, 1114,
            "GDDR5"),
    GpuSpec("p100-16gb", "P100 PCIe", 16, 732, 56, (6, 0), "NVIDIA Tesla P100 datasheet (PCIe 16 GB)", 250, 1126, 1303, "HBM2"),
    GpuSpec("v100-16gb", "V100 SXM2", 16, 900, 80, (7, 0), "NVIDIA V100 datasheet (SXM2 16 GB)", 300, 1290, 1530, "HBM2"),
    GpuSpec("v100-32gb", "V100 SXM2", 32, 900, 80, (7, 0), "NVIDIA V100 datasheet (SXM2 32 GB)", 300, 1290, 1530, "HBM2"),
    GpuSpec("v100-32gb-pcie", "V100 PCIe", 32, 900, 80, (7, 0), "NVIDIA V100 datasheet (PCIe 32 GB)", 250, 1230, 1380, "HBM2"),
    GpuSpec("t4", "T4", 16, 320, 40, (7, 5), "NVIDIA T4 datasheet", 70, 585, 1590, "GDDR6"),
    GpuSpec("a10", "A10", 24, 600, 72, (8, 6), "NVIDIA A10 datasheet", 150, 885, 1695, "GDDR6"),
    GpuSpec("a100-40gb", "A100", 40, 1555, 108, (8, 0), "NVIDIA A100 datasheet (SXM4 40 GB)", 400, 1095, 1410, "HBM2"),
    GpuSpec("a100-80gb", "A100", 80, 2039, 108, (8, 0), "NVIDIA A100 datasheet (SXM4 80 GB)", 400, 1275, 1410, "HBM2e"),
    GpuSpec("a100-40gb-pcie", "A100", 40, 1555, 108, (8, 0), "NVIDIA A100 datasheet (PCIe 40 GB)", 250, 765, 1410, "HBM2"),
    GpuSpec("a100-80gb-pcie", "A100", 80, 1935, 108, (8, 0), "NVIDIA A100 datasheet (PCIe 80 GB)", 300, 1065, 1410, "HBM2e"),
    GpuSpec("l4", "L4", 24, 300, 58, (8, 9), "NVIDIA L4 datasheet", 72, 795, 2040, "GDDR6"),
    GpuSpec("l40s", "L40S", 48, 864, 142, (8, 9), "NVIDIA L40S datasheet", 350, 1110, 2520, "GDDR6"),
    GpuSpec("h100-sxm", "H100 SXM", 80, 3350, 132, (9, 0), "NVIDIA H100 datasheet, SXM column", 700, 1590, 1980, "HBM3"),
    GpuSpec("h100-pcie", "H100 PCIe", 80, 2000, 114, (9, 0), "NVIDIA H100 datasheet, PCIe column", 350, 1125, 1755, "HBM2e"),
    GpuSpec("h200", "H200", 141, 4800, 132, (9, 0), "NVIDIA H200 datasheet (SXM)", 700, 1590, 1980, "HBM3e"),
    GpuSpec("b200", "B200", 180, 8000, 148, (10, 0), "NVIDIA HGX B200 datasheet (per GPU)", 1000, None, None, "HBM3e"),
    GpuSpec("rtx-4090", "RTX 4090", 24, 1008, 128, (8, 9), "NVIDIA Ada GPU architecture whitepaper, Table 2", 450, 2235,
            2520, "GDDR6X"),
)
"""The GPUs ``ampbench predict --gpu`` knows (``--gpu-spec FILE.json`` describes any other)."""


def gpu_spec(key: str) -> GpuSpec | None:
    return next((g for g in GPU_SPECS if g.key == key.lower()), None)


def spec_for_device(device_name: str | None, memory_gib: float | None = None) -> GpuSpec | None:
    """The :data:`GPU_SPECS` entry of a device as the driver names it ("NVIDIA A100-SXM4-80GB"), the memory size
    telling apart the specs of one card (a100-40gb / a100-80gb); None for a card with no spec."""
    peak = find_peak(device_name)
    specs = [g for g in GPU_SPECS if peak is not None and g.peak == peak.name]
    if not specs:
        return None
    return min(specs, key=lambda g: abs(g.memory_gib - memory_gib) if memory_gib is not None else 0.0)


def find_peak(device_name: str | None) -> GpuPeak | None:
    """The table entry for a device name as the driver reports it ("NVIDIA H100 80GB HBM3"), or None."""
    if not device_name:
        return None
    words = re.findall(r"[a-z0-9]+", device_name.lower())
    for entry in GPU_PEAKS:
        if all(_has_words(words, m.split()) for m in entry.match):
            return entry
    return None


def _has_words(words: list[str], wanted: list[str]) -> bool:
    """Whether ``wanted`` occurs in ``words`` as consecutive whole words."""
    n = len(wanted)
    return any(words[i:i + n] == wanted for i in range(len(words) - n + 1))


def peak_tflops(device_name: str | None, math_mode: str | None, device_type: str = "cuda") -> float | None:
    """Dense peak TFLOP/s for ``math_mode``: this table for a GPU; for the CPU this process runs on, its
    theoretical peak (:func:`ampbench.measure.cpu.cpu_peak`)."""
    if math_mode is None:
        return None
    if device_type == "cpu":
        from ampbench.measure.cpu import cpu_peak  # lazy: torch

        peak = cpu_peak()
        return None if peak is None else peak.tflops.get(math_mode)
    entry = find_peak(device_name)
    return None if entry is None else entry.tflops.get(math_mode)


def math_mode_of(compute_dtype_name: str, tf32_matmul: bool) -> str:
    """Math of the GEMMs: a half compute dtype names itself; fp32 GEMMs are tf32 when TF32 is in force."""
    if compute_dtype_name in ("fp16", "bf16", "fp8"):
        return compute_dtype_name
    return "tf32" if tf32_matmul else "fp32"


# Tensor Core generation by compute capability major.minor (NVIDIA architecture whitepapers).
TENSOR_CORE_GENERATION: dict[tuple[int, int], str] = {
    (7, 0): "1st gen (Volta): fp16",
    (7, 2): "1st gen (Volta/Xavier): fp16",
    (7, 5): "2nd gen (Turing): fp16, int8",
    (8, 0): "3rd gen (Ampere): fp16, bf16, tf32",
    (8, 6): "3rd gen (Ampere): fp16, bf16, tf32",
    (8, 7): "3rd gen (Ampere/Orin): fp16, bf16, tf32",
    (8, 9): "4th gen (Ada): fp16, bf16, tf32, fp8",
    (9, 0): "4th gen (Hopper): fp16, bf16, tf32, fp8",
    (10, 0): "5th gen (Blackwell): fp16, bf16, tf32, fp8, fp4",
    (12, 0): "5th gen (Blackwell): fp16, bf16, tf32, fp8, fp4",
}


def tensor_core_generation(capability: tuple[int, int]) -> str:
    if capability in TENSOR_CORE_GENERATION:
        return TENSOR_CORE_GENERATION[capability]
    if capability[0] < 7:
        return "none (compute capability < 7.0)"
    return f"unknown (compute capability {capability[0]}.{capability[1]})"
