"""The cost model priced by hand: a roofline per op, the GEMM shape rule, launch and host costs, the memory model and
its max batch; refusals per GPU; a --gpu-spec file."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ampbench.errors import AmpbenchError
from ampbench.measure.gpus import lookup
from ampbench.precision.fp8 import torchao_problem
from ampbench.predict import cost, kernels
from ampbench.predict.kernels import Calibration, Conv
from ampbench.predict.rows import find_gpu, refusal
from ampbench.predict.trace import Op, Trace

A100 = lookup("a100-80gb")
V100 = lookup("v100-16gb")


def _trace(ops: list[Op], **kw) -> Trace:
    base = dict(batch_size=8, weights_bytes=0, grads_bytes=0, optimizer_bytes=0, master_bytes=0, activation_bytes=0,
                largest_temporary_bytes=0, optimizer="SGD", fusable=False)
    return Trace(ops, **{**base, **kw})


CAL = Calibration()  # (the priors: every test prices by hand with the same constants)
BW = 2039e9 * CAL.streaming_efficiency  # A100 80GB (HBM2e, Ampere): the streaming bandwidth
FIXED, LIGHT = CAL.kernel_us * 1e-6, CAL.light_kernel_us * 1e-6


def _price(ops: list[Op], tf32: bool = False, gpu=A100, **kw) -> cost.StepCost:
    """The model alone (no kernel table: the A100's, the L4's, NeuSight's, would correct these formulas)."""
    return cost.price(_trace(ops, **kw), gpu, tf32=tf32, cal=CAL, kernels=None)


def test_a_gemm_runs_its_tiles_in_waves_over_the_sms() -> None:
    """4096^3 in fp16 on 108 SMs: 128x128 tiles (the best shape), 32 x 32 = 1024 of them in ceil(1024 / 108) = 10
    waves, each tile 2 x 128 x 128 x 4096 FLOPs at the per-SM Tensor Core rate times K / (K + k_half)."""
    m = n = k = 4096
    ceiling = (271.2 / 312) / (794.5 / 989)  # (the MAMF table: the A100 SXM's best bf16 GEMM share over the H100's)
    per_sm = 312e12 * CAL.tensor_gemm_efficiency * ceiling / 108 * k / (k + CAL.tensor_k_half)
    expected = 10 * 2 * 128 * 128 * k / per_sm
    assert kernels.gemm_compute_s(A100, CAL, 1, m, n, k, "fp16") == pytest.approx(expected, rel=1e-3)
    expected = kernels.gemm_compute_s(A100, CAL, 1, m, n, k, "fp16")  # (the table's ratio: 4 significant digits)
    op = Op("aten.mm", "forward", 2 * m * n * k, 2 * 2 * m * k, 2 * m * n, "fp16", gemm=(1, m, n, k))
    c = _price([op])
    assert c.gpu_s == pytest.approx(expected + FIXED) and c.bound == "compute" and c.math_mode == "fp16"


def test_a_small_gemm_is_split_along_k_and_tf32_is_never_slower_than_fp32() -> None:
    # 128 x 128 x 8192: with 128x128 tiles one tile, split into min(108 // 1, 8192 // 256) = 32 chunks of 256 (one
    # wave); with 64x64 tiles 4, split into min(27, 32) = 27 chunks; ...: the best of the shapes
    per_sm = 19.5e12 * CAL.gemm_efficiency / 108
    candidates = []
    for tm, tn, eff in [(128, 128, 1.0), (128, 64, CAL.tile_128x64), (64, 128, CAL.tile_128x64),
                        (64, 64, CAL.tile_64x64), (32, 32, CAL.tile_32x32)]:
        tiles = (128 // tm) * (128 // tn)
        split = min(108 // tiles, 8192 // 256)
        chunk = 8192 / split
        waves = math.ceil(tiles * split / 108)
        candidates.append(waves * 2 * tm * tn * chunk / (per_sm * eff * chunk / (chunk + CAL.k_half)))
    assert kernels.gemm_compute_s(A100, CAL, 1, 128, 128, 8192, "fp32") == pytest.approx(min(candidates))
    for shape in [(1, 4096, 4096, 4096), (1, 8, 8, 8), (64, 96, 196, 196)]:
        op = Op("aten.bmm", "forward", 2 * math.prod(shape), 10**6, 10**6, "fp32", gemm=shape)
        assert _price([op], tf32=True).gpu_s <= _price([op], tf32=False).gpu_s


def test_an_elementwise_op_is_priced_by_its_bytes() -> None:
    op = Op("aten.add", "forward", 0, 2 * 2**28, 2**28, "fp32")
    c = _price([op])
    assert c.gpu_s == pytest.approx(3 * 2**28 / BW + LIGHT)
    assert c.bound == "memory" and c.op_split["elementwise"] == pytest.approx(1.0)
    capped = _price([op], gpu=lookup("l4"))  # (a 72 W card: the other efficiency)
    assert capped.gpu_s == pytest.approx(3 * 2**28 / (300e9 * CAL.capped_streaming_efficiency) + LIGHT)
    pascal = _price([op], gpu=lookup("p100-16gb"))  # (HBM2 before Volta: the same)
    assert pascal.gpu_s == pytest.approx(3 * 2**28 / (732e9 * CAL.capped_streaming_efficiency) + LIGHT)
    gddr6x = _price([op], gpu=lookup("rtx-3090"))  # (a full-power GDDR6X card from Volta on streams as HBM ones do)
    assert gddr6x.gpu_s == pytest.approx(3 * 2**28 / (936e9 * CAL.streaming_efficiency) + LIGHT)


def test_normalisation_and_softmax_pass_over_their_data_more_than_once() -> None:
    """cuDNN-style batch norm (statistics, then normalising) and layer norm: norm_passes over read-once-write-once's
    bytes; softmax (maximum, sum, output): softmax_passes."""
    moved = 3 * 2**26
    for name, passes in [("aten.native_batch_norm", CAL.norm_passes), ("aten.native_layer_norm", CAL.norm_passes),
                         ("aten._softmax", CAL.softmax_passes), ("aten.native_batch_norm_backward", CAL.norm_passes)]:
        c = _price([Op(name, "forward", 0, 2**27, 2**26, "fp32")])
        assert c.gpu_s == pytest.approx(moved * passes / 2 / BW + LIGHT), name


def test_many_tiny_ops_are_launch_bound_by_the_host() -> None:
    """The GPU runs each op once the host has issued it: 100 ops shorter than their issue end one op after the last
    issue."""
    ops = [Op("aten.add", "forward", 0, 64, 32, "fp32") for _ in range(100)]
    c = _price(ops)
    one = 96 / BW + LIGHT
    assert c.host_s == pytest.approx(100 * cost.MEASURED_HOST.op_us("forward") * 1e-6) and c.step_s == pytest.approx(
        c.host_s + one)
    assert c.bound == "launch" and c.time_split["launch"] > 0.9 and c.notes[0].startswith("launch-bound")
    assert c.notes[0].endswith("(CUDA graphs or torch.compile remove most of it)")
    # (a compiled step is told of CUDA graphs alone, one replayed as CUDA graphs of a larger batch: not what it runs)
    for compiled, cure in ((cost.Compiled(fuse=True, graphs=False), "(CUDA graphs remove most of it)"),
                           (cost.Compiled(fuse=True, graphs=True), "(a larger batch)")):
        c = cost.price(_trace(ops), A100, tf32=False, cal=CAL, compiled=compiled, kernels=None)
        assert c.bound == "launch" and c.notes[0].endswith(cure), c.notes


def test_a_host_bound_forward_does_not_hide_a_gpu_bound_backward() -> None:
    """The stream, not the sums: a forward of 100 short ops (the GPU waits on Python) then a backward of one long
    kernel take the forward's issue plus the long kernel, not max(host total, GPU total)."""
    forward = [Op("aten.add", "forward", 0, 64, 32, "fp32") for _ in range(100)]
    long = Op("aten.add", "backward", 0, 2**30, 2**30, "fp32")
    c = _price([*forward, long])
    kernel = 2**31 / BW + LIGHT
    host = cost.MEASURED_HOST
    assert c.step_s == pytest.approx(100 * host.op_us("forward") * 1e-6 + host.op_us("backward") * 1e-6 + kernel)
    assert c.step_s > max(c.host_s, c.gpu_s)


def test_a_fusable_optimizer_is_priced_as_torch_s_fused_kernel() -> None:
    traced_loop = [Op("aten.mul_", "optimizer", 0, 10**9, 10**9, "fp32") for _ in range(10)]
    t = dict(stepped_bytes=4 * 10**6, state_bytes=8 * 10**6, fusable=True, stepped_params=72)
    c = _price(traced_loop, **t)
    moved = (2 * 4 * 10**6 + 8 * 10**6) + (4 * 10**6 + 8 * 10**6)  # read p, g, state; write p, state
    launches = math.ceil(72 / 36)
    assert c.gpu_s == pytest.approx(moved / BW + launches * LIGHT) and c.launches == launches


def test_a_3x3_fp32_convolution_is_the_faster_of_implicit_gemm_and_winograd() -> None:
    conv = Conv(32, 64, 28, 28, 64, 3, 3, 1, 1, 28, 28)
    g, m, n, k = conv.gemm()
    assert (g, m, n, k) == (1, 32 * 28 * 28, 64, 64 * 9)
    io = 4 * (32 * 64 * 28 * 28 * 2) + 4 * 64 * k
    implicit = max(kernels.gemm_compute_s(A100, CAL, 1, m, n, k, "fp32", CAL.conv_efficiency), io / BW) + FIXED
    tiles = 32 * 7 * 7
    transforms = 4 * (32 * 64 * 28 * 28 + 36 * tiles * 128 + 32 * 64 * 28 * 28)
    winograd = max(kernels.gemm_compute_s(A100, CAL, 36, tiles, 64, 64, "fp32", CAL.winograd_efficiency),
                   transforms / BW) + 3 * FIXED
    assert kernels.conv_s(A100, CAL, conv, "fp32", 4) == pytest.approx(min(implicit, winograd))
    # a 1x1 convolution is a GEMM (conv_efficiency was fitted on 3x3 windows); strided ones have no Winograd
    pointwise = Conv(32, 64, 28, 28, 256, 1, 1, 1, 1, 28, 28)
    assert kernels.implicit_efficiency(pointwise, "fp32", CAL) == 1.0
    strided = Conv(32, 64, 28, 28, 64, 3, 3, 2, 1, 14, 14)
    assert kernels.conv_s(A100, CAL, strided, "fp32", 4) == pytest.approx(
        max(kernels.gemm_compute_s(A100, CAL, *strided.gemm(), "fp32", CAL.conv_efficiency),
            (4 * (32 * 64 * 28 * 28 + 32 * 64 * 14 * 14) + 4 * 64 * 576) / BW) + FIXED)


def test_a_depthwise_convolution_is_a_direct_kernel_not_a_gemm_of_one_column_per_group() -> None:
    # ConvNeXt-large's stage-3 block at batch 16: 768 channels, 7x7 depthwise, 14x14
    dw = Conv(16, 768, 14, 14, 768, 7, 7, 1, 768, 14, 14)
    assert dw.gemm() == (768, 16 * 196, 1, 49)
    io = 4 * (2 * 16 * 768 * 196) + 4 * 768 * 49
    flops = 2 * 16 * 768 * 196 * 49
    fp32_peak = 15.7e12 * kernels.clock_factor(V100, CAL)  # V100 SXM2: its datasheet fp32 rate
    direct = max(flops / (fp32_peak * CAL.gemm_efficiency * CAL.conv_efficiency), io / (900e9 * CAL.streaming_efficiency))
    for mode in ("fp32", "fp16"):
        assert kernels.conv_s(V100, CAL, dw, mode, 4) == pytest.approx(direct + FIXED)
    assert direct < 40e-6  # (a 19 MB, 0.24 GFLOP layer: tens of microseconds, where its GEMM tiles took 1.7 ms)
    implicit = max(kernels.gemm_compute_s(V100, CAL, *dw.gemm(), "fp32", CAL.conv_efficiency), io / BW) + FIXED
    assert implicit > 20 * (direct + FIXED)
    # a dense layer keeps its GEMM families (what the constants were fitted on), whatever a direct kernel would take
    dense = Conv(16, 768, 14, 14, 768, 7, 7, 1, 1, 14, 14)
    g, m, n, k = dense.gemm()
    assert kernels.conv_s(V100, CAL, dense, "fp32", 4) == pytest.approx(
        max(kernels.gemm_compute_s(V100, CAL, g, m, n, k, "fp32", CAL.conv_efficiency),
            (4 * (2 * 16 * 768 * 196) + 4 * 768 * k) / (900e9 * CAL.streaming_efficiency)) + FIXED)


def test_tensor_core_convolutions_on_nchw_pay_the_layout_conversion_and_tf32_never_loses_to_fp32() -> None:
    conv = Conv(64, 256, 14, 14, 256, 3, 3, 1, 1, 14, 14)
    io = 2 * (64 * 256 * 14 * 14 * 2) + 2 * 256 * 256 * 9
    nchw, nhwc = kernels.conv_s(A100, CAL, conv, "fp16", 2, nchw=True), kernels.conv_s(A100, CAL, conv, "fp16", 2)
    assert nchw - nhwc == pytest.approx(2 * io / BW + LIGHT)
    rtx = lookup("rtx-4090")  # (its TF32 peak equals fp32's: the NCHW conversion would make TF32 slower)
    for gpu in (A100, rtx):
        for c in (conv, Conv(8, 3, 224, 224, 64, 7, 7, 2, 1, 112, 112), Conv(8, 64, 56, 56, 64, 1, 1, 1, 1, 56, 56)):
            assert kernels.conv_s(gpu, CAL, c, "tf32", 4, nchw=True) <= kernels.conv_s(gpu, CAL, c, "fp32", 4, nchw=True)
    op = Op("aten.convolution_backward", "backward", 1, 10**6, 10**6, "fp16", conv=conv, products=2, nchw=False)
    assert _price([op]).gpu_s == pytest.approx(2 * nhwc)  # (input and weight gradients: a forward's work each)


def test_a_tensor_core_convolution_pads_its_input_channels_to_8() -> None:
    """An ImageNet stem (3 channels, 7x7) in fp16 is the GEMM of 8 channels' windows (392, not 147, deep: the lent
    H200's stem ran 2.7x its unpadded price); its bytes stay the 3 channels'; fp32's SIMT kernels take 3 as they are."""
    stem = Conv(64, 3, 224, 224, 64, 7, 7, 2, 1, 112, 112)
    io = 2 * (64 * 3 * 224 * 224 + 64 * 64 * 112 * 112) + 2 * 64 * 8 * 49
    gemm = kernels.gemm_compute_s(A100, CAL, 1, 64 * 112 * 112, 64, 8 * 49, "fp16", CAL.tensor_conv_efficiency)
    assert kernels.conv_s(A100, CAL, stem, "fp16", 2) == pytest.approx(max(gemm, io / BW) + FIXED)
    assert kernels.tensor_padded(stem, "fp32") == stem and kernels.tensor_padded(stem, "bf16").c == 8
    assert kernels.tensor_padded(Conv(64, 16, 56, 56, 64, 3, 3, 1, 1, 56, 56), "fp16").c == 16


def test_fused_attention_runs_at_its_share_of_the_peak_and_halves_causal_work() -> None:
    flops = 4 * 8 * 16 * 1024 * 1024 * 64
    op = Op("ampbench_predict.fused_attention", "forward", flops, 3 * 2 * 8 * 16 * 1024 * 64, 2 * 8 * 16 * 1024 * 64,
            "bf16")
    rate = 312e12 * CAL.tensor_gemm_efficiency * CAL.attention_efficiency
    assert _price([op]).gpu_s == pytest.approx(flops / rate + FIXED)
    causal = Op(**{**op.__dict__, "causal": True})
    assert _price([causal]).gpu_s == pytest.approx(flops / 2 / rate + FIXED)


def test_a_fused_rnn_layer_is_its_input_gemm_then_one_recurrent_gemm_per_step() -> None:
    """cuDNN's LSTM layer (4 gates, hidden 256, input 128, 2 directions, 50 steps of batch 32): one GEMM over every
    step at once, then 50 recurrent GEMMs one after another (each at least rnn_step_us); the backward twice the input
    GEMM, the step chain once more, and the recurrent weights' gradient at once."""
    rnn = (50, 32, 128, 1024, 256)
    whole = kernels.gemm_compute_s(A100, CAL, 2, 50 * 32, 1024, 128, "fp16")
    step = max(kernels.gemm_compute_s(A100, CAL, 2, 32, 1024, 256, "fp16"), CAL.rnn_step_us * 1e-6)
    forward = Op("ampbench_predict.rnn_layer", "forward", 1, 10**3, 10**3, "fp16", tensors=2, rnn=rnn)
    assert _price([forward]).gpu_s == pytest.approx(whole + 50 * step + FIXED)
    backward = Op("ampbench_predict.rnn_layer_backward", "backward", 1, 10**3, 10**3, "fp16", tensors=2, rnn=rnn)
    weights = kernels.gemm_compute_s(A100, CAL, 2, 1024, 256, 50 * 32, "fp16")
    assert _price([backward]).gpu_s == pytest.approx(2 * whole + 50 * step + weights + FIXED)


def test_power_capped_cards_sustain_less_than_boost_and_ga10x_ada_fp32_gemms_get_half_the_lanes() -> None:
    l4, a100 = lookup("l4"), A100
    assert kernels.clock_factor(a100, CAL) == 1.0
    assert kernels.clock_factor(l4, CAL) == pytest.approx((795 + CAL.clock_share * (2040 - 795)) / 2040)
    assert kernels.peak_flops(l4, "fp32", CAL) == pytest.approx(30.3e12 * 0.5 * kernels.clock_factor(l4, CAL))
    assert kernels.peak_flops(l4, "fp16", CAL) == pytest.approx(121e12 * kernels.clock_factor(l4, CAL))
    assert kernels.peak_flops(a100, "fp32", CAL) == 19.5e12


def test_the_committed_constants_say_what_was_fitted_on_what() -> None:
    data = json.loads(kernels.CALIBRATION_FILE.read_text())
    assert data["fitted_on"] == ["p4", "p100-16gb", "t4", "v100-32gb-pcie", "a100-40gb-pcie", "a100-80gb-pcie",
                                 "h100-sxm", "l4"]  # (NeuSight's kernels; XLA's H100 and the H200's tables besides)
    assert "xla_matmul" in data["data"] and "h200.csv" in data["data"] and "h200.csv" in data["tensor_conv_efficiency"]
    assert set(data["fitted"]) | set(data["not_fitted"]) == set(Calibration.names())
    assert kernels.calibration() == Calibration(**data["constants"])


@pytest.mark.parametrize("gpu, precision, refused", [
    ("v100-16gb", "amp-bf16", "bf16 needs compute capability >= 8.0"), ("t4", "tf32", "TF32 needs compute capability"),
    ("a100-80gb", "fp8-tensorwise", "fp8 Tensor Cores need compute capability >= 8.9"),
    ("h100-sxm", "fp8-tensorwise", None), ("l4", "fp8-rowwise", None), ("t4", "amp-fp16", None), ("a10", "master-bf16", None),
    ("gtx-1080-ti", "amp-fp16", None), ("m4000", "master-fp16", None), ("p100-16gb", "amp-bf16", "bf16 needs"),
    ("quadro-p6000", "tf32", "TF32 needs")])
def test_refusals_per_gpu(gpu: str, precision: str, refused: str | None) -> None:
    if precision.startswith("fp8") and refused is None and torchao_problem() is not None:
        pytest.skip(torchao_problem())
    why = refusal(lookup(gpu), precision)
    assert (why is None) if refused is None else (why is not None and refused in why)


def test_gpu_names_and_spec_files(tmp_path: Path) -> None:
    with pytest.raises(AmpbenchError, match="--gpu 'zz9000' is not known; use one of: m4000, p4, quadro-p4000"):
        find_gpu("zz9000", None)
    with pytest.raises(AmpbenchError, match=r"give --gpu NAME\[,NAME...\] \(or all\) or --gpu-spec"):
        find_gpu(None, None)
    f = tmp_path / "g.json"
    f.write_text(json.dumps({"name": "My-GPU", "tflops": {"fp32": 20, "fp16": 100, "bf16": 100}, "memory_gib": 24,
                             "bandwidth_gbs": 900, "sms": 60, "capability": "8.6"}))
    g = find_gpu(None, f)
    assert (g.key, g.tflops["fp16"], g.capability, g.memory_gib) == ("my-gpu", 100.0, (8, 6), 24.0)
    assert refusal(g, "tf32") == "my-gpu's spec has no tf32 peak (add tflops.tf32 to --gpu-spec)"
    for bad, said in [({"name": "x"}, "missing tflops"), ({**json.loads(f.read_text()), "tflops": {"fp16": 1}},
                                                          "tflops must map fp32"),
                      ({**json.loads(f.read_text()), "capability": "eight"}, "capability is MAJOR.MINOR"),
                      # (a misspelt key was ignored: "memory_gb" read as a missing memory_gib, "tdp" as no board power)
                      ({**json.loads(f.read_text()), "tdp": 300, "boost": 1800},
                       r"unknown keys 'tdp' \(did you mean 'tdp_w'\?\), 'boost' \(did you mean 'boost_mhz'\?\) "
                       r"\(keys: name, tflops, memory_gib, bandwidth_gbs, sms, capability; optional: tdp_w, base_mhz, "
                       r"boost_mhz, memory, source\)"),
                      ({"name": "x", "memory_gb": 24}, r"unknown key 'memory_gb' \(did you mean 'memory_gib'\?\)")]:
        f.write_text(json.dumps(bad))
        with pytest.raises(AmpbenchError, match=said):
            find_gpu(None, f)
    f.write_text("{not json")
    with pytest.raises(AmpbenchError, match="cannot read it as JSON"):
        find_gpu(None, f)


def test_torchao_s_update_is_priced_as_a_kernel_per_parameter_issued_from_python() -> None:
    """On CUDA torchao compiles its update (fullgraph) per parameter: one kernel reading the parameter, its gradient
    and its quantized states, writing the parameter and the states; the host calls it once per parameter."""
    traced_loop = [Op("aten.lerp", "optimizer", 0, 10**9, 10**9, "fp32") for _ in range(40)]
    c = _price(traced_loop, stepped_bytes=4 * 10**6, state_bytes=2 * 10**6, torchao=True, stepped_params=10)
    moved = (2 * 4 * 10**6 + 2 * 10**6) + (4 * 10**6 + 2 * 10**6)
    assert c.gpu_s == pytest.approx(moved / BW + 10 * LIGHT)
    assert c.host_s == pytest.approx(10 * cost.TORCHAO_STEP_US * 1e-6) and c.launches == 10


def test_the_bound_a_step_names_is_the_largest_share_of_its_split() -> None:
    """A step whose host issues its ops a little slower than the GPU runs them, which spends 70% of it moving bytes,
    is memory-bound (it said launch-bound with launch at 22%: the issue's a40 master-fp16)."""
    from ampbench.predict.cost import StepCost, bound_of
    from ampbench.report.predictions import why_no_speedup

    split = {"compute": 0.08, "memory": 0.70, "launch": 0.22}
    cost = StepCost(1.0, 0.95, 0.97, 0, "fp16", split, {}, 10, 10)
    assert cost.host_s > cost.gpu_s and cost.bound == "memory" == bound_of(split)
    assert bound_of({**split, "communication": 0.84}) == "communication"
    why = why_no_speedup({"predicted_bound": "communication", "predicted_time_split": {"communication": 0.84},
                          "precision": "amp-bf16"})
    assert why.startswith("communication-bound (84% of the predicted step waits on the gradients' collectives)")


def test_an_op_that_launches_several_kernels_costs_its_host_a_launch_for_each_beyond_the_first() -> None:
    """Oracle: 100 tiny multi-tensor ops over 150 tensors launch ceil(150 / 48) = 4 kernels each: the host issues
    each at its per-op figure plus 3 launches; the same ops over one tensor each, the per-op figure alone. The fused
    optimizer's host time stays its per-parameter figure (its launches inside it)."""
    host = cost.MEASURED_HOST
    many = [Op("aten._foreach_mul_", "step", 0, 64, 64, "fp32", tensors=150) for _ in range(100)]
    one = [Op("aten._foreach_mul_", "step", 0, 64, 64, "fp32", tensors=1) for _ in range(100)]
    assert _price(many).host_s - _price(one).host_s == pytest.approx(100 * 3 * host.launch_us("step") * 1e-6)
    assert host.launch_us("forward") == host.launch_us("step") and host.launch_us("backward") != host.launch_us("forward")
    fused = [Op(cost.DIRECT_FUSED_STEP, "optimizer", 0, 64, 64, "fp32", tensors=150)]
    assert _price(fused).host_s == pytest.approx(host.optimizer_s(150, direct=True))


def test_the_launch_figures_are_the_h200_hosts_cuda_per_op_less_its_cpu_per_op() -> None:
    """Measured, not fitted: the same micro-benchmark on CUDA tensors and on CPU tensors on the lent H200's host in
    one run (benchmarks/results/h200/host_overhead.json); --host-us scales them as it scales F and B."""
    data = json.loads((Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "h200" / "host_overhead.json")
                      .read_text())
    rows = {r["device"]: r for r in data["rows"]}
    expected = tuple(round(rows["cuda"][f"{p}_us_per_op"] - rows["cpu"][f"{p}_us_per_op"], 1)
                     for p in ("forward", "backward"))
    assert expected == cost.H200_LAUNCH_US
    assert (cost.MEASURED_HOST.launch_forward_us, cost.MEASURED_HOST.launch_backward_us) == expected
    half = cost.Host.parse("12.05,13.95")
    assert (half.launch_forward_us, half.launch_backward_us) == (round(expected[0] / 2, 1), round(expected[1] / 2, 1))
