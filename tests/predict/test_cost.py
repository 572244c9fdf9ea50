"""The cost model priced by hand: a roofline per op, the GEMM shape rule, launch and host costs, the memory model and
its max batch; refusals per GPU; a --gpu-spec file."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ampbench.errors import AmpbenchError
from ampbench.measure.peaks import GPU_PEAKS, GPU_SPECS, gpu_spec
from ampbench.predict import cost
from ampbench.predict.run import find_gpu, refusal
from ampbench.predict.trace import Op, Trace

A100 = gpu_spec("a100-80gb")


def _trace(ops: list[Op], **kw) -> Trace:
    base = dict(batch_size=8, weights_bytes=0, grads_bytes=0, optimizer_bytes=0, master_bytes=0, activation_bytes=0,
                largest_temporary_bytes=0, optimizer="SGD", fusable=False)
    return Trace(ops, **{**base, **kw})


def test_gemm_efficiency_counts_tiles_and_waves() -> None:
    # 4096^3 on 108 SMs: 32 x 32 = 1024 full tiles in ceil(1024 / 108) = 10 waves
    assert cost.gemm_efficiency((4096, 4096, 4096), 108) == pytest.approx(0.80 * 1024 / 1080)
    # one 64 x 64 tile (a quarter filled), K too short to split: one SM of 108 busy
    assert cost.gemm_efficiency((64, 64, 256), 108) == pytest.approx(0.80 * 0.25 / 108)
    # one tile with K = 8192: split in 16 chunks of 512
    assert cost.gemm_efficiency((128, 128, 8192), 108) == pytest.approx(0.80 * 16 / 108)


def test_a_large_half_gemm_is_compute_bound_at_the_tensor_core_peak() -> None:
    m = n = k = 8192
    op = Op("aten.mm", "forward", 2 * m * n * k, 2 * (m * k + k * n) * 2, m * n * 2, "fp16", gemm=(m, n, k))
    c = cost.price(_trace([op]), A100, tf32=False)
    compute = 2 * m * n * k / (312e12 * cost.gemm_efficiency((m, n, k), 108))
    assert c.gpu_s == pytest.approx(compute + cost.LAUNCH_US * 1e-6)
    assert c.step_s == c.gpu_s and c.bound == "compute" and c.math_mode == "fp16"
    tf32 = cost.price(_trace([Op("aten.mm", "forward", op.flops, op.bytes_read * 2, op.bytes_written * 2, "fp32",
                                 gemm=(m, n, k))]), A100, tf32=True)
    assert tf32.math_mode == "tf32" and tf32.gpu_s - cost.LAUNCH_US * 1e-6 == pytest.approx(2 * compute)  # 156 vs 312


def test_an_elementwise_op_is_priced_by_its_bytes() -> None:
    op = Op("aten.add", "forward", 0, 2 * 2**28, 2**28, "fp32")
    c = cost.price(_trace([op]), A100, tf32=False)
    assert c.gpu_s == pytest.approx(3 * 2**28 / (2039e9 * cost.MEMORY_EFFICIENCY) + cost.LAUNCH_US * 1e-6)
    assert c.bound == "memory" and c.op_split["elementwise"] == pytest.approx(1.0)


def test_many_tiny_ops_are_launch_bound_by_the_host() -> None:
    ops = [Op("aten.add", "forward", 0, 64, 32, "fp32") for _ in range(100)]
    c = cost.price(_trace(ops), A100, tf32=False)
    assert c.host_s == pytest.approx(100 * cost.HOST_US["forward"] * 1e-6) and c.step_s == c.host_s
    assert c.bound == "launch" and c.time_split["launch"] > 0.9 and c.notes[0].startswith("launch-bound")


def test_a_fusable_optimizer_is_priced_as_torch_s_fused_kernel() -> None:
    traced_loop = [Op("aten.mul_", "optimizer", 0, 10**9, 10**9, "fp32") for _ in range(10)]
    t = _trace(traced_loop, weights_bytes=4 * 10**6, optimizer_bytes=8 * 10**6, fusable=True, stepped_params=72)
    c = cost.price(t, A100, tf32=False)
    moved = (2 * 4 * 10**6 + 8 * 10**6) + (4 * 10**6 + 8 * 10**6)  # read p, g, state; write p, state
    launches = math.ceil(72 / 36)
    assert c.gpu_s == pytest.approx(moved / (2039e9 * cost.MEMORY_EFFICIENCY) + launches * cost.LAUNCH_US * 1e-6)


def test_half_convolutions_on_nchw_pay_the_layout_conversion() -> None:
    op = dict(name="aten.convolution", phase="forward", flops=10**6, bytes_read=10**8, bytes_written=10**8, dtype="fp16")
    nchw = cost.price(_trace([Op(**op, nchw=True)]), A100, tf32=False)
    nhwc = cost.price(_trace([Op(**op, nchw=False)]), A100, tf32=False)
    fp32 = cost.price(_trace([Op(**{**op, "dtype": "fp32"}, nchw=True)]), A100, tf32=False)  # (no Tensor Cores)
    per_byte = 1 / (2039e9 * cost.MEMORY_EFFICIENCY)
    assert nchw.gpu_s - nhwc.gpu_s == pytest.approx(2 * 2 * 10**8 * per_byte)
    assert fp32.gpu_s == pytest.approx(nhwc.gpu_s)


def test_memory_and_max_batch() -> None:
    t = _trace([], batch_size=8, weights_bytes=10 * 2**20, grads_bytes=10 * 2**20, optimizer_bytes=20 * 2**20,
               activation_bytes=8 * 2**20, largest_temporary_bytes=0)
    m = cost.memory(t, A100)
    fixed = 40 * 2**20 + cost.WORKSPACE_BYTES
    assert m.peak == fixed + 8 * 2**20
    usable = (80 * 2**30 - cost.CONTEXT_BYTES) * cost.ALLOCATOR_MARGIN
    assert m.max_batch == int((usable - fixed) // 2**20)  # 1 MiB per sample
    assert fixed + m.max_batch * 2**20 <= usable < fixed + (m.max_batch + 1) * 2**20


def test_every_gpu_has_its_peaks_memory_and_sources() -> None:
    names = {p.name for p in GPU_PEAKS}
    assert [g.key for g in GPU_SPECS] == ["v100-16gb", "v100-32gb", "t4", "a10", "a100-40gb", "a100-80gb", "l4", "l40s",
                                          "h100-sxm", "h100-pcie", "h200", "b200", "rtx-4090"]
    for g in GPU_SPECS:
        assert g.peak in names and g.tflops["fp32"] > 0 and g.memory_gib > 0 and g.bandwidth_gbs > 0 and g.source
        assert ("fp8" in g.tflops) == (g.capability >= (8, 9))
        assert ("bf16" in g.tflops) == (g.capability >= (8, 0))
    assert gpu_spec("H100-SXM") is gpu_spec("h100-sxm")  # case-insensitive


@pytest.mark.parametrize("gpu, precision, refused", [
    ("v100-16gb", "amp-bf16", "bf16 needs compute capability >= 8.0"), ("t4", "tf32", "TF32 needs compute capability"),
    ("a100-80gb", "fp8-tensorwise", "fp8 Tensor Cores need compute capability >= 8.9"),
    ("h100-sxm", "fp8-tensorwise", "fp8 is not predicted yet"), ("t4", "amp-fp16", None), ("a10", "master-bf16", None)])
def test_refusals_per_gpu(gpu: str, precision: str, refused: str | None) -> None:
    why = refusal(gpu_spec(gpu), precision)
    assert (why is None) if refused is None else (why is not None and refused in why)


def test_gpu_names_and_spec_files(tmp_path: Path) -> None:
    with pytest.raises(AmpbenchError, match="--gpu 'a200' is not known; use one of: v100-16gb"):
        find_gpu("a200", None)
    with pytest.raises(AmpbenchError, match="give --gpu NAME or --gpu-spec"):
        find_gpu(None, None)
    f = tmp_path / "g.json"
    f.write_text(json.dumps({"name": "My-GPU", "tflops": {"fp32": 20, "fp16": 100, "bf16": 100}, "memory_gib": 24,
                             "bandwidth_gbs": 900, "sms": 60, "capability": "8.6"}))
    g = find_gpu(None, f)
    assert (g.key, g.tflops["fp16"], g.capability, g.memory_gib) == ("my-gpu", 100.0, (8, 6), 24.0)
    assert refusal(g, "tf32") == "my-gpu's spec has no tf32 peak (add tflops.tf32 to --gpu-spec)"
    for bad, said in [({"name": "x"}, "missing tflops"), ({**json.loads(f.read_text()), "tflops": {"fp16": 1}},
                                                          "tflops must map fp32"),
                      ({**json.loads(f.read_text()), "capability": "eight"}, "capability is MAJOR.MINOR")]:
        f.write_text(json.dumps(bad))
        with pytest.raises(AmpbenchError, match=said):
            find_gpu(None, f)
    f.write_text("{not json")
    with pytest.raises(AmpbenchError, match="cannot read it as JSON"):
        find_gpu(None, f)


@pytest.mark.parametrize("name, memory, key", [
    ("NVIDIA A100-SXM4-80GB", 79.2, "a100-80gb"), ("NVIDIA A100-SXM4-40GB", 39.4, "a100-40gb"),
    ("NVIDIA H100 80GB HBM3", 79.1, "h100-sxm"), ("NVIDIA H100 PCIe", 79.6, "h100-pcie"), ("NVIDIA H200", 139.8, "h200"),
    ("Tesla V100-SXM2-16GB", 15.8, "v100-16gb"), ("Tesla T4", 14.6, "t4"), ("NVIDIA L4", 22.0, "l4"),
    ("NVIDIA GeForce RTX 4090", 23.6, "rtx-4090"), ("NVIDIA RTX A6000", 47.5, None)])
def test_a_device_name_finds_its_gpu_spec(name: str, memory: float, key: str | None) -> None:
    """What gpu_session.sh's predict stage predicts for the GPU it runs on: the driver's name, the memory size."""
    from ampbench.measure.peaks import spec_for_device

    spec = spec_for_device(name, memory)
    assert (spec.key if spec is not None else None) == key


def test_torchao_s_update_is_priced_as_a_kernel_per_parameter_issued_from_python() -> None:
    """On CUDA torchao compiles its update (fullgraph) per parameter: one kernel reading the parameter, its gradient
    and its quantized states, writing the parameter and the states; the host calls it once per parameter."""
    traced_loop = [Op("aten.lerp", "optimizer", 0, 10**9, 10**9, "fp32") for _ in range(40)]
    t = _trace(traced_loop, weights_bytes=4 * 10**6, optimizer_bytes=2 * 10**6, torchao=True, stepped_params=10)
    c = cost.price(t, A100, tf32=False)
    moved = (2 * 4 * 10**6 + 2 * 10**6) + (4 * 10**6 + 2 * 10**6)
    assert c.gpu_s == pytest.approx(moved / (2039e9 * cost.MEMORY_EFFICIENCY) + 10 * cost.LAUNCH_US * 1e-6)
    assert c.host_s == pytest.approx(10 * cost.TORCHAO_STEP_US * 1e-6) and c.launches == 10
