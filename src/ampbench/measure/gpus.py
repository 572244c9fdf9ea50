"""The GPU catalogue: every GPU ampbench knows, one row each in ``gpus.csv`` with its datasheet source.

One table serves ``ampbench predict`` (a GPU you do not have: its peaks, memory, bandwidth, SMs, clocks), ``ampbench
hw`` and MFU (the dense peak of the GPU a row ran on, found by the driver's name). Peaks are **dense**: vendors print
"with sparsity" figures, halved here. A half-precision peak is the Tensor Core rate with fp32 accumulation -- what
PyTorch's GEMMs and convolutions ask cuBLAS and cuDNN for -- which GeForce cards run at half their fp16-accumulate
rate (and the L40 too; its datasheet says so). Boost clocks; a card capped by its board power sustains less.

GPUs without Tensor Cores (compute capability < 7.0) have no ``fp16`` peak: there PyTorch's fp16 GEMMs and
convolutions run in fp32 math on fp16 storage (cuBLAS ``cublasGemmEx`` with ``CUBLAS_COMPUTE_32F``; cuDNN's
"pseudo-half" configuration, the math type PyTorch sets for half convolutions), so they take the fp32 rate and only
the bytes they move halve. ``fp16_native`` is the vector half rate a hand-written fp16 kernel gets (twice fp32 on
P100; 1/64 of fp32 on compute capability 6.1, CUDA C Programming Guide, "Arithmetic Instructions"; none on 5.2): shown,
never what a PyTorch model's math runs at. ``tests/measure/test_gpus.py`` checks every row against its own SM count
and clocks (fp32 = SMs x the architecture's lanes x boost; a Tensor Core peak at most SMs x its rate x boost, at
least at base: a sparse figure is twice that and fails).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

TABLE = Path(__file__).with_name("gpus.csv")
MATH_MODES = ("fp32", "tf32", "fp16", "bf16", "fp8")


@dataclass(frozen=True)
class Gpu:
    """One GPU's datasheet: what ``predict`` needs of a GPU it does not have, and its peaks for MFU."""

    key: str
    """The name ``--gpu`` takes (lower case)."""
    name: str
    match: tuple[str, ...]
    """Phrases of the driver's name (torch.cuda.get_device_name(), lower case) that must all occur as whole words:
    "l4" is not in "NVIDIA L40", nor "t4" in "NVIDIA T400"."""
    architecture: str
    capability: tuple[int, int]
    sms: int | None
    base_mhz: float | None
    boost_mhz: float | None
    memory_gib: float | None
    memory: str | None
    """DRAM kind (HBM2, HBM2e, HBM3, HBM3e, GDDR5, GDDR5X, GDDR6, GDDR6X): how much of the bandwidth a kernel
    streams."""
    bandwidth_gbs: float | None
    """DRAM bandwidth, GB/s (10^9 bytes)."""
    tdp_w: float | None
    """Board power (the datasheet's maximum)."""
    pcie_gen: int | None
    nvlink_gbs: float | None
    """NVLink bandwidth per GPU, both directions together, as datasheets state it (None: no NVLink)."""
    tflops: dict[str, float] = field(hash=False)
    """Dense peak TFLOP/s by math mode (fp32, tf32, fp16, bf16, fp8): the modes the GPU has."""
    fp16_native: float | None
    """The vector (non-Tensor Core) half rate, TFLOP/s."""
    source: str

    @property
    def predictable(self) -> bool:
        """Whether ``predict`` has what it needs of it (memory, bandwidth, SMs)."""
        return bool(self.memory_gib and self.bandwidth_gbs and self.sms)

    @property
    def tensor_cores(self) -> bool:
        return self.capability >= (7, 0)

    @property
    def pcie_gbs(self) -> float | None:
        """PCIe x16 bandwidth per direction, GB/s (gen 3: 15.75, gen 4: 31.5, gen 5: 63)."""
        return None if self.pcie_gen is None else 15.75 * 2 ** (self.pcie_gen - 3)

    def same_card(self, other: Gpu) -> bool:
        """Two rows of one card (its memory sizes, SXM and PCIe of the same peaks): a measurement on one is one of
        the other."""
        return self.match[0] == other.match[0] and self.tflops == other.tflops

    def math_tflops(self, math_mode: str) -> float | None:
        """The peak PyTorch's GEMMs reach in ``math_mode``: its Tensor Core peak; without Tensor Cores fp16 runs in
        fp32 math (fp16 storage): the fp32 peak."""
        if math_mode in self.tflops:
            return self.tflops[math_mode]
        if math_mode == "fp16" and not self.tensor_cores:
            return self.tflops["fp32"]
        return None


def _number(text: str) -> float | None:
    return float(text) if text.strip() else None


def _row(r: dict[str, str]) -> Gpu:
    major, minor = (int(x) for x in r["capability"].split("."))
    sms = _number(r["sms"])
    return Gpu(key=r["key"], name=r["name"], match=tuple(m.strip() for m in r["match"].split(";")),
               architecture=r["architecture"], capability=(major, minor), sms=int(sms) if sms else None,
               base_mhz=_number(r["base_mhz"]), boost_mhz=_number(r["boost_mhz"]), memory_gib=_number(r["memory_gib"]),
               memory=r["memory"] or None, bandwidth_gbs=_number(r["bandwidth_gbs"]), tdp_w=_number(r["tdp_w"]),
               pcie_gen=int(r["pcie_gen"]) if r["pcie_gen"] else None, nvlink_gbs=_number(r["nvlink_gbs"]),
               tflops={m: float(r[m]) for m in MATH_MODES if r[m].strip()}, fp16_native=_number(r["fp16_native"]),
               source=r["source"])


@cache
def catalogue() -> tuple[Gpu, ...]:
    """Every GPU of ``gpus.csv``, in its order (by architecture, then size)."""
    with TABLE.open(newline="", encoding="utf-8") as f:
        return tuple(_row(r) for r in csv.DictReader(f))


def predictable() -> tuple[Gpu, ...]:
    """The GPUs ``ampbench predict --gpu`` takes."""
    return tuple(g for g in catalogue() if g.predictable)


def lookup(key: str) -> Gpu | None:
    """The GPU ``--gpu key`` names (case-insensitive), or None."""
    return _by_key().get(key.lower())


@cache
def _by_key() -> dict[str, Gpu]:
    """The catalogue by key (the first row of a key, as a scan of it finds: pricing looks a GPU up per kernel)."""
    out: dict[str, Gpu] = {}
    for g in catalogue():
        out.setdefault(g.key, g)
    return out


def for_device(device_name: str | None, memory_gib: float | None = None) -> Gpu | None:
    """The row of a device as the driver names it ("NVIDIA A100-SXM4-80GB"): of the rows whose phrases all occur,
    the one naming it most closely (most words matched: "rtx 2080 ti" over "rtx 2080"), then the nearest memory size;
    None for a card not in the catalogue."""
    if not device_name:
        return None
    words = re.findall(r"[a-z0-9]+", device_name.lower())
    found = [g for g in catalogue() if all(_has_words(words, m.split()) for m in g.match)]
    if not found:
        return None
    return max(found, key=lambda g: (sum(len(m.split()) for m in g.match),
                                     -abs((g.memory_gib or 0.0) - memory_gib) if memory_gib is not None else 0.0))


def _has_words(words: list[str], wanted: list[str]) -> bool:
    """Whether ``wanted`` occurs in ``words`` as consecutive whole words."""
    n = len(wanted)
    return any(words[i:i + n] == wanted for i in range(len(words) - n + 1))
