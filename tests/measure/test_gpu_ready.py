"""What a first GPU run would hit, checked on a CPU (issue: GPU-ready without a GPU): the timing's device, the GEMM
benchmark's replays, fp8 GEMM sizes, out-of-memory kinds, the peak table's names, the TF32 flags' API."""

from __future__ import annotations

import contextlib

import pytest
import torch

from ampbench.measure import hw
from ampbench.measure.timing import on_device


def test_timing_runs_on_the_cells_device() -> None:
    """Event.record() records on the current device's stream: cuda:1 must be made current, CPU needs nothing."""
    assert isinstance(on_device(torch.device("cpu")), contextlib.nullcontext)
    ctx = on_device(torch.device("cuda:1"))
    assert isinstance(ctx, torch.cuda.device) and ctx.idx == 1


def test_a_cell_measures_inside_its_device(monkeypatch: pytest.MonkeyPatch) -> None:
    from ampbench.bench import CellSpec
    from ampbench.bench.jobs import run_cell
    from ampbench.frameworks.torch import cell as cell_mod

    seen: list[str] = []

    def recording(device: torch.device) -> contextlib.AbstractContextManager[None]:
        seen.append(str(device))
        return contextlib.nullcontext()

    monkeypatch.setattr(cell_mod, "on_device", recording)
    spec = CellSpec.of(device="cpu", workload="tabular-mlp", preset="tiny", precision="fp32", batch_size=None, steps=2,
                       warmup=1)
    assert run_cell(spec)["status"] == "ok" and seen == ["cpu"]


def test_gpu_gemms_are_timed_in_graph_replays_of_enough_work() -> None:
    """A 1024^3 GEMM (~3 us on an H100) is shorter than a launch: 32 of them per replay; from 4096 one is enough."""
    assert [hw.gemms_per_replay(n) for n in (256, 1024, 2048, 4096, 8192)] == [64, 32, 4, 1, 1]
    assert all(2.0 * n**3 * hw.gemms_per_replay(n) >= hw.REPLAY_FLOPS for n in (1024, 2048, 4096))


def test_gemm_tflops_counts_every_gemm_a_call_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """TFLOP/s = 2 n^3 x GEMMs per call x calls / seconds (a replay of K GEMMs is K GEMMs, not one)."""
    monkeypatch.setattr(hw, "_replayed", lambda mm, n, device: (mm, 8))
    monkeypatch.setattr(hw, "time_calls", lambda fn, device, min_seconds: (10, 0.5))
    assert hw.gemm_tflops(64, "fp32", torch.device("cpu")) == pytest.approx(2.0 * 64**3 * 8 * 10 / 0.5 / 1e12)


def test_a_cpu_gemm_is_its_own_call() -> None:
    def mm() -> None:
        return None

    assert hw._replayed(mm, 1024, torch.device("cpu")) == (mm, 1)


@pytest.mark.skipif(not hw.fp8_gemm_runs(torch.device("cpu")), reason="this torch build has no CPU fp8 GEMM")
def test_fp8_gemm_sizes_that_are_not_multiples_of_16_are_skipped_with_a_note() -> None:
    p = hw.probe(torch.device("cpu"), (24, 32))
    fp8 = [g["size"] for g in p["gemm"] if g["math_mode"] == "fp8"]
    assert fp8 == [32] and p["notes"] == ["fp8 GEMM not run at n=24: fp8 GEMMs need sizes that are multiples of 16"]


@pytest.mark.parametrize("message, oom", [
    ("CUDA out of memory. Tried to allocate 2.00 GiB", True),
    ("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", True),
    ("cuDNN error: CUDNN_STATUS_ALLOC_FAILED", True),
    ("CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx`", False),
    ("mat1 and mat2 shapes cannot be multiplied (4x3 and 4x4)", False),
])
def test_library_allocation_failures_are_out_of_memory(message: str, oom: bool) -> None:
    """A max-batch trial where cuBLAS or cuDNN cannot get its workspace did not fit (was: it stopped the search)."""
    from ampbench.measure.memory import is_oom

    assert is_oom(RuntimeError(message)) is oom


def test_a_max_batch_trial_hitting_cublas_alloc_failure_is_a_miss(monkeypatch: pytest.MonkeyPatch) -> None:
    from ampbench.bench import CellSpec
    from ampbench.bench.scenario import run_trial
    from ampbench.frameworks.torch import cell as cell_mod

    def failing(*args: object, **kwargs: object) -> None:
        raise RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`")

    monkeypatch.setattr(cell_mod, "build_step", failing)
    spec = CellSpec.of(device="cpu", workload="tabular-mlp", preset="tiny", precision="fp32", batch_size=None,
                       memory_budget=2**30)
    r = run_trial(spec, 64, cell_mod.verbs(spec))
    assert r["fits"] is False and not r.get("failed") and "CUBLAS_STATUS_ALLOC_FAILED" in r["reason"]


@pytest.mark.parametrize("driver_name, key", [
    ("NVIDIA L4", "l4"), ("NVIDIA L40S", "l40s"), ("NVIDIA L40", "l40"), ("Tesla T4", "t4"), ("NVIDIA T400 4GB", None),
    ("NVIDIA A100-SXM4-80GB", "a100-80gb"), ("NVIDIA A10", "a10"), ("NVIDIA A10G", "a10g"), ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA H100 NVL", "h100-nvl"), ("NVIDIA GeForce RTX 4090", "rtx-4090"),
    ("Tesla V100-SXM2-16GB", "v100-16gb"), ("NVIDIA H200", "h200"),
])
def test_peak_table_names_match_whole_words(driver_name: str, key: str | None) -> None:
    """"l4" inside "L40" and "t4" inside "T400" took those cards' peaks from another card."""
    from ampbench.measure.gpus import for_device

    entry = for_device(driver_name)
    assert (entry.key if entry else None) == key


def test_a_cuda_graph_cell_that_ran_without_graphs_is_refused() -> None:
    """Inductor skips CUDA graphs silently (a counter): such a cell must not be stored as cuda_graphs=on."""
    from ampbench.execution import CompileCounts, Execution, cuda_graphs_problem

    graphs = Execution(compile="on", cuda_graphs="on")
    assert cuda_graphs_problem(graphs, CompileCounts(graphs=2)) is None
    said = cuda_graphs_problem(graphs, CompileCounts(graphs=2, cudagraph_skips=1))
    assert said is not None and said.startswith("CUDA graphs were skipped: Inductor ran 1 compiled graph(s)")
    assert cuda_graphs_problem(Execution(compile="on"), CompileCounts(cudagraph_skips=3)) is None  # (not asked for)
    assert (CompileCounts(cudagraph_skips=3) - CompileCounts(cudagraph_skips=1)).cudagraph_skips == 2


def test_the_counter_it_reads_is_inductors() -> None:
    """The key Inductor bumps (torch/_inductor/cudagraph_utils.py) is the one compile_counts reads."""
    from torch._dynamo.utils import counters

    from ampbench.execution import compile_counts

    before = compile_counts().cudagraph_skips
    counters["inductor"]["cudagraph_skips"] += 2
    try:
        assert compile_counts().cudagraph_skips == before + 2
    finally:
        counters["inductor"]["cudagraph_skips"] -= 2


def test_the_plain_torch_loop_of_harness_overhead_runs_the_modes_math(monkeypatch: pytest.MonkeyPatch) -> None:
    """benchmarks/harness_overhead.py's "vs plain torch" loop: with cuDNN's default TF32 on it timed TF32 against
    ampbench's true fp32. Its forward now sees the mode's flags: TF32 off for fp32 (on only for tf32)."""
    import importlib.util
    from pathlib import Path

    from ampbench.precision.tf32_flags import read_tf32, tf32_scope

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "harness_overhead.py"
    spec = importlib.util.spec_from_file_location("harness_overhead", path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    seen: list[tuple[bool, bool]] = []
    real = torch.nn.Module.__call__

    def call(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self.__class__.__name__ != "Linear":
            flags = read_tf32()
            seen.append((flags.matmul, flags.cudnn))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(torch.nn.Module, "__call__", call)
    with tf32_scope(True):  # (a process whose defaults say TF32, as cuDNN's does)
        mod.hand_loop("tabular-mlp", "tiny", "fp32", steps=2, warmup=1, device=torch.device("cpu"), plain_torch=True)
    assert seen and set(seen) == {(False, False)}
