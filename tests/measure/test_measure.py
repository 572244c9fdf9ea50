from __future__ import annotations

import pytest
import torch
from torch import nn

from ampbench.measure import memory as mem
from ampbench.measure.flops import count_flops, mfu
from ampbench.measure.gpus import for_device
from ampbench.measure.maxbatch import Trial, search_max_batch
from ampbench.measure.peaks import math_mode_of, peak_tflops, tensor_core_generation
from ampbench.measure.timing import Timing, percentile, time_steps
from ampbench.precision import MixedPrecision


@pytest.mark.parametrize("true_max, start", [(590, 32), (1000, 32), (1, 1), (64, 64), (7, 16)])
def test_max_batch_search_finds_the_limit(true_max: int, start: int) -> None:
    tried = []

    def trial(b: int) -> Trial:
        tried.append(b)
        return Trial(b, b <= true_max, peak_bytes=b * 10)

    r = search_max_batch(trial, start=start, limit=65536, resolution=0)
    assert r.max_batch == true_max and not r.limit_hit
    assert len(tried) == len(set(tried))  # no batch tried twice
    assert len(tried) <= 2 * (true_max.bit_length() + 1) + 2


def test_max_batch_search_limit_and_nothing_fits_and_failures() -> None:
    r = search_max_batch(lambda b: Trial(b, True), start=8, limit=100)
    assert (r.max_batch, r.limit_hit) == (100, True)
    r = search_max_batch(lambda b: Trial(b, False), start=8, limit=100)
    assert r.max_batch is None
    r = search_max_batch(lambda b: Trial(b, False, failed=True, reason="boom"), start=8)
    assert r.max_batch is None and r.error == "boom"


def test_max_batch_resolution_stops_early() -> None:
    n = []
    r = search_max_batch(lambda b: (n.append(b), Trial(b, b <= 5000))[1], start=1024, resolution=1 / 16)
    assert 5000 - 5000 / 16 <= r.max_batch <= 5000
    assert len(n) < 12


def test_a_max_batch_the_timed_run_does_not_fit_is_not_the_max_batch() -> None:
    """The trials fit 960 (their few steps); the timed run at 960 went over the budget: the max batch is the largest
    batch the trials fit below it that a timed run confirms (it was "960" with a note, and the ratios built on it)."""
    from ampbench.measure.maxbatch import measure_max_batch

    timed: list[int] = []

    def at(limit: int):  # the timed run's own limit: lower than the trials'
        def throughput_at(b: int) -> dict:
            timed.append(b)
            return ({"status": "ok", "samples_per_s": 10.0 * b} if b <= limit else
                    {"status": "oom", "reason": "memory peak 257 MiB > --memory-budget 256 MiB"})
        return throughput_at

    def trial(b: int) -> Trial:
        return Trial(b, b <= 960, peak_bytes=b)

    keys, error = measure_max_batch(trial, 64, 65536, at(10_000))  # (fits: as before)
    assert keys["max_batch"] == 960 and keys["max_batch_samples_per_s"] == 9600.0 and "warnings" not in keys
    timed.clear()
    keys, error = measure_max_batch(trial, 64, 65536, at(950))
    fitted = max(t[0] for t in keys["max_batch_trials"] if t[1] and t[0] < 960)  # (oracle: the trials themselves)
    assert not error and timed == [960, fitted] and keys["max_batch"] == fitted
    assert keys["max_batch_samples_per_s"] == 10.0 * fitted
    assert keys["warnings"] == [f"max batch {fitted:,}, the largest the trials fit that a timed run confirmed: the "
                                "timed run at the batch the trials fit, 960, went over (memory peak 257 MiB > "
                                "--memory-budget 256 MiB)"]
    keys, _ = measure_max_batch(trial, 64, 65536, at(10))  # (not below either: no number, and why)
    assert keys["max_batch"] is None and keys["warnings"][0].startswith("no max batch: the timed run at the batch the "
                                                                       "trials fit, 960, went over")
    keys, _ = measure_max_batch(lambda b: Trial(b, b <= 64), 64, 65536, at(10))  # (no smaller batch was tried)
    assert keys["max_batch"] is None and "no smaller batch was tried" in keys["warnings"][0]


def test_percentile_interpolates() -> None:
    xs = [float(i) for i in range(1, 101)]
    assert percentile(xs, 50) == pytest.approx(50.5)
    assert percentile(xs, 90) == pytest.approx(90.1)
    assert percentile([3.0], 99) == 3.0


def test_time_steps_counts_calls() -> None:
    calls = []
    t = time_steps(lambda: calls.append(1), 5, torch.device("cpu"))
    assert len(calls) == 5 and len(t.step_ms) == 5 and t.timer == "perf_counter"
    assert t.total_s >= 0 and set(t.summary()) == {"step_ms_p10", "step_ms_p50", "step_ms_p90", "step_ms_mean"}


def test_throughput_noise_is_the_spread_of_block_throughputs() -> None:
    assert Timing([2.0] * 20, 0.04, "perf_counter").throughput_noise() == 0.0
    # 5 blocks of 2 steps: block throughputs 1/2, 1/2, 1/2, 1/2, 1/4 per ms
    t = Timing([1.0] * 8 + [2.0, 2.0], 0.012, "perf_counter")
    rates = [0.5, 0.5, 0.5, 0.5, 0.25]
    mean = sum(rates) / 5
    std = (sum((r - mean) ** 2 for r in rates) / 4) ** 0.5
    assert t.throughput_noise() == pytest.approx(std / mean)
    assert Timing([1.0] * 3, 0.003, "perf_counter").throughput_noise() is None  # fewer than 2 blocks of 2


def test_no_noise_from_two_blocks() -> None:
    """4-5 timed steps make two blocks, and the spread of two numbers is no estimate (the advisor's gain must clear
    2 x the noise; a two-block spread lands below a third of the true one about a quarter of the time): no noise,
    whatever the steps say. Six steps make three blocks, the same formula (oracle: the sample standard deviation)."""
    for n in (4, 5):
        assert Timing([1.0, 3.0] * 2 + [1.0] * (n - 4), float(n), "perf_counter").throughput_noise() is None
    t = Timing([1.0, 1.0, 1.0, 3.0, 2.0, 2.0], 0.010, "perf_counter")
    rates = [2 / 2.0, 2 / 4.0, 2 / 4.0]
    mean = sum(rates) / 3
    std = (sum((r - mean) ** 2 for r in rates) / 2) ** 0.5
    assert t.throughput_noise() == pytest.approx(std / mean)


@pytest.mark.parametrize("name, key", [("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA H100 PCIe", "h100-pcie"),
                                       ("NVIDIA A100-SXM4-80GB", "a100-80gb"), ("NVIDIA A10", "a10"),
                                       ("Tesla V100-SXM2-16GB", "v100-16gb"), ("Tesla T4", "t4"),
                                       ("NVIDIA H200", "h200"), ("NVIDIA L40S", "l40s"), ("NVIDIA L4", "l4"),
                                       ("NVIDIA GeForce RTX 4090", "rtx-4090")])
def test_peak_table_matches_driver_names(name: str, key: str) -> None:
    entry = for_device(name)
    assert entry is not None and entry.key == key and entry.source


def test_peak_values_and_math_modes() -> None:
    assert peak_tflops("NVIDIA A100-PCIE-40GB", "bf16") == 312.0
    assert peak_tflops("NVIDIA A100-PCIE-40GB", "tf32") == 156.0
    assert peak_tflops("Tesla V100-SXM2-16GB", "bf16") is None  # no bf16 Tensor Cores on Volta
    assert peak_tflops("NVIDIA GeForce GTX 1080 Ti", "fp16") == peak_tflops("NVIDIA GeForce GTX 1080 Ti", "fp32")  # fp32 math
    assert peak_tflops("Intel Xeon", "fp32") is None
    assert math_mode_of("fp32", tf32_matmul=True) == "tf32"
    assert math_mode_of("fp32", tf32_matmul=False) == "fp32"
    assert math_mode_of("bf16", tf32_matmul=True) == "bf16"
    assert tensor_core_generation((9, 0)).startswith("4th gen (Hopper)")
    assert tensor_core_generation((6, 1)).startswith("none")


def test_flops_of_a_linear_training_step() -> None:
    model = nn.Linear(64, 32, bias=False)
    x = torch.randn(16, 64)

    def step() -> None:
        model(x).sum().backward()

    # forward 2*B*in*out; backward the same for the weight's grad (the input needs none)
    assert count_flops(step) == 2 * 2 * 16 * 64 * 32
    assert mfu(1_000_000, 10, 1.0, "NVIDIA A100-SXM4-80GB", "bf16")["mfu"] == pytest.approx(1e7 / 1e12 / 312)


def test_state_bytes_and_activations_split() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(100, 200), nn.ReLU(), nn.Linear(200, 10))
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.Adam(model.parameters())
    mp = MixedPrecision("master-bf16")
    model, opt = mp.setup(model, opt)
    x = torch.randn(32, 100)
    held = []
    for _ in range(2):
        opt.zero_grad(set_to_none=True)
        with mem.saved_activations() as act, mp.autocast():
            loss = model(x).float().sum()
        mp.backward(loss)
        mp.move_grads()  # (the half gradients into the fp32 masters, as the step would: the state it steps from)
        held.append(mem.state_bytes(model, opt, mp.master_params()))
        mp.step(opt)
    sb = held[-1]
    assert sb.weights == 2 * n_params  # bf16 model
    # Adam's two fp32 moments + fp32 master weights + fp32 master grads, and one fp32 step counter per tensor
    assert sb.optimizer == 4 * 4 * n_params + 4 * len(list(model.parameters()))
    assert act[0] > 0
    # what Linear/ReLU save: the bf16 input of each Linear and the ReLU output (32 x 200)
    assert act[0] >= 2 * 32 * 100


def test_wrapper_subclasses_count_the_storage_they_wrap() -> None:
    """A wrapper tensor subclass (torchao's fp8 weights under FSDP2, its casts) has no storage of its own:
    its bytes are its inner tensors', counted once however often they are wrapped or saved."""
    from torch.testing._internal.two_tensor import TwoTensor

    a, b = torch.randn(64, 32), torch.randn(64, 32)
    assert mem.tensor_bytes([TwoTensor(a, b), a]) == 2 * 64 * 32 * 4
    w = nn.Parameter(TwoTensor(torch.randn(8, 8), torch.randn(8, 8)))
    with mem.saved_activations() as act:
        (TwoTensor(a, a.clone()) * 2).sum()
        y = TwoTensor(torch.randn(4, 8), torch.randn(4, 8)).requires_grad_() @ w
    assert act[0] == 2 * 4 * 8 * 4 and y.shape == (4, 8)  # the input's two 4x8 fp32 inner tensors; w is a parameter


def test_model_sizes() -> None:
    model = nn.Sequential(nn.Linear(10, 10), nn.BatchNorm1d(10))
    sizes = mem.model_sizes(model)
    floats = 10 * 10 + 10 + 4 * 10  # weight, bias, bn weight/bias/mean/var
    assert sizes["model_bytes_fp32"] == floats * 4 + 8  # + num_batches_tracked (int64)
    assert sizes["model_bytes_half"] == floats * 2 + 8


def test_cpu_peak_memory_sees_a_big_allocation() -> None:
    """In a fresh process: a long-lived one (a test worker) may hold freed memory the allocator reuses, so a new
    64 MiB tensor need not grow its RSS at all (seen: 0 bytes after other tests ran in the same worker)."""
    import subprocess
    import sys

    code = ("import torch; from ampbench.measure import memory as mem\n"
            "peaks = mem.PeakMemory(torch.device('cpu')); peaks.start()\n"
            "x = torch.ones(64 * 2**20 // 4); x += 1; del x  # 64 MiB, touched\n"
            "print(peaks.peak()['cpu_rss_peak'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True).stdout
    assert int(out.strip().splitlines()[-1]) >= 60 * 2**20


def test_hw_probe_on_cpu() -> None:
    from ampbench.measure.hw import fp8_gemm_runs, probe

    p = probe(torch.device("cpu"), sizes=(64,))
    assert p["precisions"]["tf32"]["ok"] is False
    fp8 = {"fp8"} if fp8_gemm_runs(torch.device("cpu")) else set()  # torch._scaled_mm on this CPU build
    assert {g["math_mode"] for g in p["gemm"]} == {"fp32", "bf16", "fp16"} | fp8
    assert all(g["peak_tflops"] is None for g in p["gemm"] if g["math_mode"] == "fp8")  # no CPU fp8 peak claimed
    assert all(g["tflops"] > 0 for g in p["gemm"])
    assert "verdict" in p and "Measured GEMM vs fp32" in p["verdict"]
    # each ratio as measured, never rounded to zero (an emulated fp16 GEMM at 1/200 of fp32's rate read "0.00x")
    for mode, ratio in p["gemm_vs_fp32"].items():
        if mode != "fp32":
            shown = p["verdict"].split("Measured GEMM vs fp32")[1].split(f" {mode} ", 1)[1].split("x", 1)[0]
            assert float(shown) == pytest.approx(ratio, rel=0.06, abs=0.006), (mode, shown, ratio)


def test_a_gemm_faster_than_its_peak_shows_no_fraction_of_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """This CPU's bf16 GEMM ran 1.50x the peak computed at the nominal clock a VM's /proc/cpuinfo gives ("150% of
    peak"): that proves the peak low, every fraction of it overstated -- none is shown, the rates stand, a note says
    why. Simulated rates: fp32 at 0.8 and bf16 at 1.5 of their peaks."""
    from ampbench.measure import hw

    peaks: dict[str, float] = {}
    share = {"fp32": 0.8, "bf16": 1.5}

    def rate(n: int, mode: str, device: torch.device, min_seconds: float = 0.2) -> float:
        return share.get(mode, 0.5) * (peaks.get(mode) or 1.0)

    p0 = hw.probe(torch.device("cpu"), sizes=(64,), run_gemm=False)
    peaks.update(p0["peaks"] or {})
    monkeypatch.setattr(hw, "gemm_tflops", rate)
    p = hw.probe(torch.device("cpu"), sizes=(64,))
    assert all(g["fraction_of_peak"] is None for g in p["gemm"]) and all(g["tflops"] > 0 for g in p["gemm"])
    assert any("bf16 GEMM at n=64 ran 1.50x its peak above" in n for n in p.get("notes") or []), p.get("notes")
    share["bf16"] = 0.75  # bf16 within its peak: the fractions are shown
    p = hw.probe(torch.device("cpu"), sizes=(64,))
    shown = {g["math_mode"]: g["fraction_of_peak"] for g in p["gemm"]}
    assert shown["fp32"] == pytest.approx(0.8) and shown["bf16"] == pytest.approx(0.75)
    assert not any("its peak above" in n for n in p.get("notes") or [])
    rates = {"fp32": 0.221, "bf16": 0.976, "fp16": 0.001}  # (this EPYC's n=1,024 rates: fp16 emulated)
    monkeypatch.setattr(hw, "gemm_tflops", lambda n, mode, device, min_seconds=0.2: rates.get(mode, 0.1))
    verdict = hw.probe(torch.device("cpu"), sizes=(64,))["verdict"]
    assert "bf16 4.42x, fp16 0.0045x" in verdict, verdict  # (fp16 read "0.00x")


def test_gpu_gemm_timing_queues_calls_between_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CUDA branch of the GEMM timer, on a simulated clock: calls are counted between two events
    (no sync per call) and the count grows until the span reaches the minimum time."""
    from ampbench.measure import hw

    clock = {"t": 0.0, "syncs": 0}

    class Event:
        def __init__(self, enable_timing: bool = False) -> None:
            self.at = 0.0

        def record(self) -> None:
            self.at = clock["t"]

        def synchronize(self) -> None:
            clock["syncs"] += 1

        def elapsed_time(self, other: Event) -> float:
            return (other.at - self.at) * 1e3

    def gemm() -> None:
        clock["t"] += 3e-6  # a 3 us kernel

    monkeypatch.setattr(torch.cuda, "Event", Event)
    iters, seconds = hw.time_calls(gemm, torch.device("cuda"), min_seconds=0.01)
    assert seconds >= 0.01 and seconds == pytest.approx(iters * 3e-6)
    assert clock["syncs"] <= 3  # one per round, not one per call

    # the harness's step timer: one event per step, a single sync at the end, per-step times exact
    clock.update(t=0.0, syncs=0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    durations = iter([0.010, 0.012, 0.011, 0.030])

    def step() -> None:
        clock["t"] += next(durations)

    t = time_steps(step, 4, torch.device("cuda"))
    assert t.timer == "cuda_events" and clock["syncs"] == 1
    assert t.step_ms == pytest.approx([10.0, 12.0, 11.0, 30.0]) and t.total_s == pytest.approx(0.063)


def _skipping_step(precision: str, overflow_steps: int):  # type: ignore[no-untyped-def]
    """A TrainStep whose first ``overflow_steps`` steps overflow (loss x inf): skipped, as fp16's first steps at 2^16."""
    from ampbench.measure.step import build_step
    from ampbench.workloads import create_workload

    wl = create_workload("tabular-mlp", "tiny", seed=0)
    loss_fn, calls = wl.loss_fn, [0]

    def overflowing(out, y):  # type: ignore[no-untyped-def]
        calls[0] += 1
        loss = loss_fn(out, y)
        return loss * float("inf") if calls[0] <= overflow_steps else loss

    wl.loss_fn = overflowing
    return build_step(wl, precision, 16, torch.device("cpu"))


@pytest.mark.parametrize("precision", ["amp-fp16", "amp-bf16", "master-fp16"])
def test_memory_split_counts_the_optimizer_state_after_skipped_first_steps(precision: str) -> None:
    """Adam creates its moments at its first real step: the split is read after one, whatever was skipped."""
    clean, skipping = _skipping_step(precision, 0), _skipping_step(precision, 3)
    for s in (clean, skipping):
        for _ in range(5):
            s()
    assert skipping.mp.totals["skipped_steps"] == 3
    a, b = clean.state_bytes(), skipping.state_bytes()
    assert a is not None and b is not None
    n = sum(p.numel() for p in clean.model.parameters())
    assert a.optimizer == b.optimizer >= 2 * 4 * n  # Adam's two fp32 moments (plus masters in master-*)
    assert (a.weights, a.grads) == (b.weights, b.grads)


def test_memory_split_is_unknown_before_any_real_step() -> None:
    s = _skipping_step("amp-fp16", 10)
    for _ in range(3):
        s()
    assert s.mp.totals["skipped_steps"] == 3 and s.state_bytes() is None  # no number rather than "0 bytes"


def test_cpu_theoretical_peak_is_cores_x_clock_x_flops_per_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    from ampbench import cpuinfo
    from ampbench.measure import cpu

    def fake(flags: str, vendor: str = "GenuineIntel", family: str = "6") -> None:
        info = {"flags": flags, "vendor_id": vendor, "cpu family": family, "cpu MHz": "2000.000", "model name": "X"}
        monkeypatch.setattr(cpuinfo, "cpuinfo_fields", lambda: info)
        monkeypatch.setattr(cpu, "cpuinfo_fields", lambda: info)
        monkeypatch.setattr(cpu, "clock_ghz", lambda: (2.0, "test clock"))
        monkeypatch.setattr(cpu, "cores_used", lambda: 4)
        cpu._cpu_peak.cache_clear()

    fake("avx2 fma avx512f avx512_bf16 amx_bf16 amx_tile avx512_fp16")  # Sapphire Rapids
    p = cpu.cpu_peak()
    assert p is not None and p.flops_per_cycle == {"fp32": 64.0, "bf16": 1024.0, "fp16": 128.0}
    assert p.tflops["fp32"] == pytest.approx(4 * 2.0 * 64 / 1e3) and p.tflops["bf16"] == pytest.approx(4 * 2.0 * 1024 / 1e3)
    assert "4 core(s) x 2.00 GHz (test clock)" in p.source and "AMX-BF16" in p.source
    assert cpuinfo.half_math_claim(cpuinfo.cpu_half_hardware(), p.flops_per_cycle).startswith(
        "bf16 matmuls run on AMX-BF16 (peak 16x fp32's); fp16 matmuls run on AVX512-FP16 (peak 2x fp32's)")
    fake("avx2 fma avx512f avx512_bf16", vendor="AuthenticAMD", family="25")  # Zen 4
    p = cpu.cpu_peak()
    assert p is not None and p.flops_per_cycle == {"fp32": 32.0, "bf16": 64.0, "fp16": 32.0} and "Zen 4" in p.source
    fake("avx2 fma")
    p = cpu.cpu_peak()
    assert p is not None and p.flops_per_cycle == {"fp32": 32.0, "bf16": 32.0, "fp16": 32.0}
    assert cpuinfo.half_math_claim(cpuinfo.cpu_half_hardware()).startswith("bf16 math is emulated")
    fake("sse2")
    assert cpu.cpu_peak() is None
    cpu._cpu_peak.cache_clear()


def test_mfu_on_cpu_divides_by_the_cpu_peak() -> None:
    from ampbench.measure.cpu import cpu_peak

    peak = cpu_peak()
    if peak is None:
        pytest.skip("this CPU has no AVX2/AVX-512 FMA: no peak to divide by")
    out = mfu(10**9, 10, 1.0, "any CPU", "fp32", "cpu")
    assert out["peak_tflops"] == peak.tflops["fp32"] and out["mfu"] == pytest.approx(0.01 / peak.tflops["fp32"])


def test_a_reference_fp8_kernel_is_timed_at_the_first_size_only_and_compared_there(monkeypatch: pytest.MonkeyPatch
                                                                                  ) -> None:
    """An AMX Xeon's per-tensor fp8 matmul ran at 0.12 GFLOP/s: 17 s a call at n=1,024, most of `ampbench hw`'s 43 s.
    Where the probe found it that slow, it is timed at the first size only, a note says why, and its ratio to fp32 is
    taken at that size (oracle: the simulated rates, 0.0001 / 0.2)."""
    from ampbench.measure import hw

    asked: list[tuple[int, str]] = []
    rates = {"fp32": 0.2, "bf16": 0.8, "fp16": 0.2, "fp8": 0.0001}

    def rate(n: int, mode: str, device: torch.device, min_seconds: float = 0.2) -> float:
        asked.append((n, mode))
        return rates[mode] * (2.0 if n == 128 else 1.0)  # (fp32 and the others faster at the larger size)

    monkeypatch.setattr(hw, "gemm_tflops", rate)
    monkeypatch.setattr(hw, "gemm_modes", lambda device: ["fp32", "bf16", "fp16", "fp8"])
    monkeypatch.setattr(hw, "cpu_fp8_slowness", lambda scales: "a reference kernel here")
    p = hw.probe(torch.device("cpu"), sizes=(64, 128))
    assert [n for n, mode in asked if mode == "fp8"] == [64]
    assert {g["math_mode"] for g in p["gemm"] if g["size"] == 128} == {"fp32", "bf16", "fp16"}
    assert "fp8 GEMM not run at n=128: a reference kernel here" in p["notes"]
    assert p["gemm_vs_fp32"]["fp8"] == pytest.approx(0.0001 / 0.2)  # (at n=64, fp32's there)
    assert p["gemm_vs_fp32"]["bf16"] == pytest.approx(4.0)  # (at n=128)
    assert "Measured GEMM vs fp32 at n=128: bf16 4.00x, fp16 1.00x, fp8 0.0005x (at n=64):" in p["verdict"], p["verdict"]
    monkeypatch.setattr(hw, "cpu_fp8_slowness", lambda scales: "")
    asked.clear()
    hw.probe(torch.device("cpu"), sizes=(64, 128))
    assert [n for n, mode in asked if mode == "fp8"] == [64, 128]
