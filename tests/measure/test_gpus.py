"""The GPU catalogue (measure/gpus.csv), checked against an independent computation of every peak: the SM count
times the architecture's per-SM rate (from NVIDIA's architecture whitepapers, written here, not read from the table)
times the clock. A datasheet's peak lies between that at the base clock and at the boost clock; a figure "with
sparsity" (twice the dense one) does not."""

from __future__ import annotations

import pytest

from ampbench.measure.gpus import MATH_MODES, catalogue, for_device, lookup, predictable

# FLOP per clock per SM, dense (an FMA is 2): fp32 lanes, Tensor Core rates with fp32 accumulate, and the vector
# half rate ("fp16_native"). Volta/Turing: 8 Tensor Cores x 64 FMA; GA100: 4 x 256; GA10x/AD10x: 4 x 128 (GeForce
# and L40: half of it with fp32 accumulate); Hopper: 4 x 512. Pascal GP10x: 2 half results per clock per SM.
RATES: dict[str, dict[str, float]] = {
    "maxwell": {"fp32": 256},
    "pascal": {"fp32": 256, "fp16_native": 4},
    "pascal_gp100": {"fp32": 128, "fp16_native": 256},
    "volta": {"fp32": 128, "fp16": 1024, "fp16_native": 256},
    "turing": {"fp32": 128, "fp16": 1024, "fp16_native": 256},
    "turing_geforce": {"fp32": 128, "fp16": 512, "fp16_native": 256},
    "ampere_ga100": {"fp32": 128, "tf32": 1024, "fp16": 2048, "bf16": 2048, "fp16_native": 512},
    "ampere_ga10x": {"fp32": 256, "tf32": 512, "fp16": 1024, "bf16": 1024, "fp16_native": 256},
    "ampere_geforce": {"fp32": 256, "tf32": 256, "fp16": 512, "bf16": 512, "fp16_native": 256},
    "ada": {"fp32": 256, "tf32": 512, "fp16": 1024, "bf16": 1024, "fp8": 2048, "fp16_native": 256},
    "ada_half_accumulate": {"fp32": 256, "tf32": 256, "fp16": 512, "bf16": 512, "fp8": 1024, "fp16_native": 256},
    "ada_geforce": {"fp32": 256, "tf32": 256, "fp16": 512, "bf16": 512, "fp8": 1024, "fp16_native": 256},
    "hopper": {"fp32": 256, "tf32": 2048, "fp16": 4096, "bf16": 4096, "fp8": 8192, "fp16_native": 512},
}


@pytest.mark.parametrize("gpu", [g for g in catalogue() if g.sms and g.boost_mhz and g.base_mhz], ids=lambda g: g.key)
def test_every_peak_is_its_sms_times_its_rate_times_a_clock_between_base_and_boost(gpu) -> None:  # type: ignore[no-untyped-def]
    rates = RATES[gpu.architecture]
    peaks = {**gpu.tflops, **({"fp16_native": gpu.fp16_native} if gpu.fp16_native else {})}
    assert set(peaks) <= set(rates), (gpu.key, sorted(set(peaks) - set(rates)))
    for mode, tflops in peaks.items():
        low = gpu.sms * rates[mode] * gpu.base_mhz * 1e6 / 1e12
        high = gpu.sms * rates[mode] * gpu.boost_mhz * 1e6 / 1e12
        assert low * 0.98 <= tflops <= high * 1.02, (gpu.key, mode, tflops, round(low, 2), round(high, 2))
    assert gpu.tflops["fp32"] >= 0.9 * gpu.sms * rates["fp32"] * gpu.boost_mhz * 1e6 / 1e12  # (fp32 at about boost)


def test_the_catalogue_has_every_gpu_the_guides_name_and_each_row_what_predict_needs() -> None:
    keys = [g.key for g in catalogue()]
    assert len(keys) == len(set(keys))
    wanted = {"gtx-1080-ti", "p100-16gb", "quadro-p4000", "quadro-p5000", "quadro-p6000", "m4000", "rtx-2070", "rtx-2080",
              "rtx-2080-ti", "quadro-rtx-4000", "quadro-rtx-5000", "quadro-rtx-6000", "quadro-rtx-8000", "rtx-3090",
              "rtx-a4000", "rtx-a5000", "rtx-a6000", "a30", "a40", "a100-80gb-pcie", "rtx-6000-ada", "l40",
              # the GPUs predict knew before the catalogue
              "p4", "v100-16gb", "v100-32gb", "v100-32gb-pcie", "t4", "a10", "a100-40gb", "a100-80gb", "a100-40gb-pcie",
              "l4", "l40s", "h100-sxm", "h100-pcie", "h200", "b200", "rtx-4090"}
    assert wanted <= {g.key for g in predictable()}
    for g in catalogue():
        assert g.source and g.tflops["fp32"] > 0 and set(g.tflops) <= set(MATH_MODES)
        assert ("fp16" in g.tflops) == (g.capability >= (7, 0)), g.key  # Tensor Cores from Volta on
        assert ("bf16" in g.tflops) == ("tf32" in g.tflops) == (g.capability >= (8, 0)), g.key
        assert ("fp8" in g.tflops) == (g.capability >= (8, 9)), g.key
        assert g.tensor_cores == (g.capability >= (7, 0))
        if g.predictable:
            assert g.memory_gib > 0 and g.bandwidth_gbs > 0 and g.tdp_w and g.memory and g.pcie_gen in (3, 4, 5)
    assert lookup("H100-SXM") is lookup("h100-sxm")  # case-insensitive
    assert not lookup("a10g").predictable  # (its SM count and clocks are not published: MFU only)


def test_without_tensor_cores_fp16_math_is_fp32_s() -> None:
    """PyTorch's fp16 GEMMs ask cuBLAS for fp32 compute; without Tensor Cores that is the fp32 rate."""
    for key in ("gtx-1080-ti", "p100-16gb", "quadro-p6000", "m4000", "p4"):
        g = lookup(key)
        assert g.math_tflops("fp16") == g.tflops["fp32"] and g.math_tflops("bf16") is None
    assert lookup("p100-16gb").fp16_native == pytest.approx(2 * lookup("p100-16gb").tflops["fp32"], rel=0.01)
    assert lookup("gtx-1080-ti").fp16_native == pytest.approx(lookup("gtx-1080-ti").tflops["fp32"] / 64, rel=0.02)
    assert lookup("v100-16gb").math_tflops("fp16") == 125.0


@pytest.mark.parametrize("name, memory, key", [
    ("NVIDIA A100-SXM4-80GB", 79.2, "a100-80gb"), ("NVIDIA A100-SXM4-40GB", 39.4, "a100-40gb"),
    ("NVIDIA A100 80GB PCIe", 79.1, "a100-80gb-pcie"), ("NVIDIA A100-PCIE-40GB", 39.4, "a100-40gb-pcie"),
    ("NVIDIA H100 80GB HBM3", 79.1, "h100-sxm"), ("NVIDIA H100 PCIe", 79.6, "h100-pcie"), ("NVIDIA H100 NVL", 93.6, "h100-nvl"),
    ("NVIDIA H200", 139.8, "h200"), ("Tesla V100-SXM2-16GB", 15.8, "v100-16gb"), ("Tesla V100-SXM2-32GB", 31.7, "v100-32gb"),
    ("Tesla V100-PCIE-32GB", 31.7, "v100-32gb-pcie"), ("Tesla V100-PCIE-16GB", 15.8, "v100-16gb-pcie"),
    ("Tesla T4", 14.6, "t4"), ("NVIDIA L4", 22.0, "l4"), ("NVIDIA L40", 44.4, "l40"), ("NVIDIA L40S", 44.4, "l40s"),
    ("NVIDIA GeForce RTX 4090", 23.6, "rtx-4090"), ("NVIDIA RTX A6000", 47.5, "rtx-a6000"),
    ("NVIDIA GeForce RTX 2080 Ti", 10.7, "rtx-2080-ti"), ("NVIDIA GeForce RTX 2080", 7.8, "rtx-2080"),
    ("Quadro RTX 6000", 23.6, "quadro-rtx-6000"), ("NVIDIA RTX 6000 Ada Generation", 47.5, "rtx-6000-ada"),
    ("Quadro P4000", 7.9, "quadro-p4000"), ("NVIDIA GeForce GTX 1080 Ti", 10.9, "gtx-1080-ti"),
    ("Tesla P100-PCIE-16GB", 15.9, "p100-16gb"), ("Tesla P4", 7.4, "p4"), ("NVIDIA A10G", 22.0, "a10g"),
    ("NVIDIA A10", 22.0, "a10"), ("NVIDIA T400", 3.9, None), ("Tesla P40", 22.4, None), ("Intel Xeon", None, None)])
def test_a_driver_name_finds_its_row(name: str, memory: float | None, key: str | None) -> None:
    """Whole words, the most specific row, then the nearest memory size ("l4" is not in "L40", "t4" not in "T400")."""
    gpu = for_device(name, memory)
    assert (gpu.key if gpu is not None else None) == key
    if key is not None:
        assert for_device(name).same_card(gpu)  # (without the memory size: the same card's peaks)
