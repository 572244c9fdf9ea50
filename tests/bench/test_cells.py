"""Each cell becomes a row with a status; a failing cell never stops the others."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ampbench.bench import CellSpec, RunConfig, run
from ampbench.bench.jobs import run_cell
from ampbench.store import DERIVED_KEYS, ROW_KEYS, Store

PLANTED = str(Path(__file__).with_name("planted.py"))


def _spec(precision: str = "fp32", **kw: object) -> CellSpec:
    base = dict(workload=None, model=f"{PLANTED}:ok", preset="tiny", precision=precision, batch_size=4, device="cpu",
                measures=("throughput", "memory"), steps=3, warmup=1, input_shape="3,4,4", num_classes=5)
    base.update(kw)
    return CellSpec.of(**base)  # type: ignore[arg-type]


def test_ok_cell_has_every_stored_key() -> None:
    row = run_cell(_spec())
    assert row["status"] == "ok", row["reason"]
    assert set(row) == set(ROW_KEYS) - set(DERIVED_KEYS)
    for key in ("samples_per_s", "step_ms_p50", "step_ms_p90", "first_step_ms", "data_ms_per_batch",
                "peak_allocated_bytes", "flops_per_step",
                "weights_bytes", "activation_bytes", "model_bytes_fp32", "final_loss"):
        assert isinstance(row[key], (int, float)) and row[key] > 0, key
    assert row["model_bytes_half"] * 2 == row["model_bytes_fp32"]
    assert row["env"]["tf32_matmul"] is False and row["env"]["device"] == "cpu" and row["math_mode"] == "fp32"
    assert row["timer"] == "perf_counter" and row["skipped_steps"] == 0


@pytest.mark.parametrize("factory, precision, status, reason", [
    ("nan", "fp32", "diverged", "training loss is nan"),
    ("nan", "amp-fp16", "diverged", "loss scale fell below"),
    ("oom", "amp-bf16", "oom", "OutOfMemoryError: CUDA out of memory"),
    ("ok", "tf32", "unsupported", "TF32 is an NVIDIA Tensor Core math mode"),
])
def test_planted_failures_are_statuses(factory: str, precision: str, status: str, reason: str) -> None:
    row = run_cell(_spec(precision, model=f"{PLANTED}:{factory}", steps=20))
    assert row["status"] == status
    assert reason in row["reason"] and "\n" not in row["reason"]


def test_memory_budget_makes_an_oom_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """A peak over --memory-budget ends the cell oom. On a CPU the peak is the process's RSS growth, which is 0 where
    the heap hands this tiny model memory an earlier test freed (it failed so once in CI, by test order): the peak is
    held at the model's real one or 1 KiB, whichever is more, so the contract is what is tested."""
    from ampbench.measure import memory

    real = memory.PeakMemory.peak

    def at_least_a_kib(self: memory.PeakMemory) -> dict[str, int | None]:
        return {k: max(v or 0, 1024) for k, v in real(self).items()}

    monkeypatch.setattr(memory.PeakMemory, "peak", at_least_a_kib)
    row = run_cell(_spec(memory_budget=1))
    assert row["status"] == "oom" and "--memory-budget" in row["reason"]


def test_bad_user_model_is_an_error_row() -> None:
    row = run_cell(_spec(model=f"{PLANTED}:missing"))
    assert row["status"] == "error" and "missing" in row["reason"]


def test_a_run_with_planted_failures_keeps_every_other_cell(tmp_path: Path) -> None:
    """isolated: a segfaulting model is one error row; a NaN model is diverged; tf32 on CPU unsupported."""
    store = Store(tmp_path / "r.db")
    rows = []
    for model, precisions in (("ok", ("fp32", "tf32", "amp-bf16")), ("crash", ("fp32",)), ("nan", ("fp32",))):
        cfg = RunConfig.of(device="cpu", presets=("tiny",), precisions=precisions, batch_sizes=(4,), steps=3, warmup=1,
                        model=f"{PLANTED}:{model}", input_shape="3,4,4", num_classes=5, extra={"isolate": True})
        rows += run(cfg, store)[1]
    got = {(r["workload"].rsplit(":", 1)[-1], r["precision"]): (r["status"], r["reason"]) for r in rows}
    assert got[("ok", "fp32")][0] == "ok" and got[("ok", "amp-bf16")][0] == "ok"
    assert got[("ok", "tf32")][0] == "unsupported"
    assert got[("crash", "fp32")] == ("error", "child process killed by SIGSEGV")
    assert got[("nan", "fp32")][0] == "diverged"
    assert len(store.rows()) == 6  # and the closing fp32 of the "ok" model


def test_converge_and_inference_in_one_cell() -> None:
    row = run_cell(_spec("amp-bf16", measures=("throughput", "converge", "inference"), seeds=2, converge_steps=12,
                         inference_batch=8))
    assert row["status"] == "ok", row["reason"]
    conv = row["converge"]
    assert conv["seeds"] == [0, 1] and len(conv["losses"]) == 2 and len(conv["losses"][0]) == 12
    assert conv["diverged"] == [False, False] and len(conv["loss_scales"][0]) == 12
    assert row["final_loss"] == pytest.approx(sum(conv["final_losses"]) / 2)
    assert 0.0 <= row["metric"] <= 1.0 and row["metric_name"] == "accuracy"
    assert set(row["inference"]) == {"1", "8"}
    assert {"p50_ms", "p90_ms", "p99_ms"} <= set(row["inference"]["8"])


def test_same_seed_same_converge_curve_across_runs() -> None:
    a = run_cell(_spec(measures=("converge",), seeds=1, converge_steps=8))
    b = run_cell(_spec(measures=("converge",), seeds=1, converge_steps=8))
    assert a["converge"]["losses"] == b["converge"]["losses"]


def test_maxbatch_on_cpu_with_a_budget() -> None:
    from ampbench.bench.runner import inprocess_trial

    spec = _spec(measures=("maxbatch",), memory_budget=4 * 2**30, maxbatch_limit=256)
    row = run_cell(spec, maxbatch_trial=inprocess_trial, throughput_at=lambda s, b: {"status": "ok", "samples_per_s": 1.0})
    assert row["status"] == "ok", row["reason"]
    assert row["max_batch"] == 256 and row["max_batch_limit_hit"] is True
    assert [t[0] for t in row["max_batch_trials"]] == [4, 8, 16, 32, 64, 128, 256]
    assert row["max_batch_samples_per_s"] == 1.0 and not row.get("warnings")


def test_a_throughput_at_the_max_batch_that_failed_says_why_in_the_rows_warnings() -> None:
    """It was left out without a word: on this CPU mnist-cnn amp-bf16's trials fit 6,144 under --memory-budget 256MiB,
    and the timed run there went over it (oom); the row's max_batch_samples_per_s was null with no reason."""
    from ampbench.bench.runner import inprocess_trial

    spec = _spec(measures=("maxbatch",), memory_budget=4 * 2**30, maxbatch_limit=8)
    over = {"status": "oom", "reason": "memory peak 275 MiB > --memory-budget 256 MiB", "samples_per_s": None}
    row = run_cell(spec, maxbatch_trial=inprocess_trial, throughput_at=lambda s, b: over)
    # (a batch whose timed run went over does not train: no max batch where no smaller one does, and why)
    assert row["status"] == "ok" and row["max_batch"] is None and row.get("max_batch_samples_per_s") is None
    (said,) = row["warnings"]
    assert said.startswith("no max batch: the timed run at the batch the trials fit, 8, went over (memory peak 275 MiB "
                           "> --memory-budget 256 MiB)"), said
    ok = {"status": "ok", "samples_per_s": 123.0}
    row = run_cell(spec, maxbatch_trial=inprocess_trial, throughput_at=lambda s, b: over if b == 8 else ok)
    below = max(t[0] for t in row["max_batch_trials"] if t[1] and t[0] < 8)  # (the trials' own record)
    assert row["max_batch"] == below and row["max_batch_samples_per_s"] == 123.0
    assert row["warnings"][0].startswith(f"max batch {below}, the largest the trials fit that a timed run confirmed")
    row = run_cell(spec, maxbatch_trial=inprocess_trial, throughput_at=lambda s, b: {})  # (a child that died)
    assert row["warnings"] == ["throughput at the max batch 8 not measured: failed (no row came back)"]


def test_a_max_batch_trial_stages_the_batches_the_timed_cell_stages(monkeypatch: pytest.MonkeyPatch) -> None:
    """A trial staged 1 batch where the timed cell stages 4: at mnist-cnn's max batch on a CPU the trial's peak was
    24 MiB under the timed run's, which then went over the budget the trial said it fits."""
    import ampbench.frameworks.torch.cell as torch_cell
    from ampbench.bench.runner import inprocess_trial

    staged: list[int] = []
    real = torch_cell.build_step

    def build_step(*args: object, **kw: object) -> object:
        step = real(*args, **kw)  # type: ignore[arg-type]
        staged.append(len(step.batches))
        return step

    monkeypatch.setattr(torch_cell, "build_step", build_step)
    spec = _spec(measures=("maxbatch", "throughput"), memory_budget=4 * 2**30, maxbatch_limit=4)
    row = run_cell(spec, maxbatch_trial=inprocess_trial,
                   throughput_at=lambda s, b: run_cell(s.measuring(("throughput",), b)))
    assert row["status"] == "ok", row["reason"]
    trial, timed = staged[0], staged[-1]
    assert trial == timed > 1 and len(staged) >= 3  # (a trial, the throughput at the max batch, the cell's own)


def test_the_memory_peak_is_the_steady_state_step_s_not_the_first_step_s() -> None:
    """A model whose first forward allocates a 256 MiB temporary (as a compile's tracing or a CUDA graph's capture
    does once): the cell's peak is restarted before the warm-up, so the row's peak is the training steps', not it."""
    import torch
    from torch import nn

    from ampbench.data.tensors import TensorData
    from ampbench.frameworks.torch.cell import throughput_memory
    from ampbench.workloads.base import Workload

    class FirstCallHog(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(16, 4)
            self.calls = 0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.calls += 1
            if self.calls == 1:
                hog = torch.ones(64 * 2**20)  # 256 MiB, touched, then freed
                x = x + hog[:1].sum() * 0
                del hog
            return self.fc(x)

    g = torch.Generator().manual_seed(0)
    data = TensorData((torch.randn(64, 16, generator=g),), torch.randint(0, 4, (64,), generator=g))
    wl = Workload("hog", FirstCallHog(), data, data, batch_size=8)
    spec = CellSpec.of(device="cpu", workload="hog", preset="tiny", precision="fp32", batch_size=8, steps=3, warmup=2)
    _, row = throughput_memory(wl, spec, 8, torch.device("cpu"), None)
    assert row["first_step_ms"] > 0 and wl.model.calls > 3
    assert row["cpu_rss_peak_bytes"] < 128 * 2**20, row["cpu_rss_peak_bytes"]  # (the 256 MiB are not in it)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_an_isolated_cell_s_max_batch_trials_are_forked_not_fresh_interpreters(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Each trial of an isolated cell ran in a fresh interpreter that imported torch again: 16 trials of a small MLP's
    CPU search took 64 s, ~4 s each, nearly all imports. Each is a process of its own still (an OOM is the trial's
    alone), forked from a fork server as the cell itself is -- the run's own: a server the cell's process started for
    its trials cost ~2 s of imports a cell. The search is the row's ``maxbatch`` phase, and the phases still add up to
    the cell's wall time. The rows are those of in-process trials (the oracle)."""
    from ampbench.bench.runner import execute, inprocess_trial
    from ampbench.launch import process
    from tests.bench.planted import BUILT_IN

    log = tmp_path / "built.txt"
    monkeypatch.setenv(BUILT_IN, str(log))
    spec = _spec(model=f"{PLANTED}:recorded", measures=("maxbatch",), memory_budget=4 * 2**30, maxbatch_limit=16)
    row = execute(spec, isolate=True, timeout=300)
    assert row["status"] == "ok", row["reason"]
    assert [t[0] for t in row["max_batch_trials"]] == [4, 8, 16] and row["max_batch"] == 16
    assert row["max_batch_samples_per_s"] > 0
    built = [line.split(" ", 2) for line in log.read_text().splitlines()]
    cell, *others = built  # (the cell's own build first, then each trial's and the throughput's at the max batch)
    assert len(others) == 4
    for pid, parent, cmdline in others:
        assert "ampbench.launch.zygote" in cmdline and "ampbench.launch.child" not in cmdline, cmdline
        assert pid != cell[0] and parent != cell[0]  # (a process of its own, forked by a server, not by the cell)
    assert len({pid for pid, _, _ in others}) == 4
    servers = {str(z.proc.pid) for z in process._ZYGOTES.values()}  # (this process's fork servers: the run's)
    assert {parent for _, parent, _ in built} <= servers, (built, servers)
    assert row["phases_s"]["maxbatch"] > 0 and row["wall_s"] == pytest.approx(sum(row["phases_s"].values()))
    plain = run_cell(spec, maxbatch_trial=inprocess_trial,
                     throughput_at=lambda s, b: run_cell(s.measuring(("throughput",), b)))
    assert plain["max_batch_trials"] and [t[:2] for t in plain["max_batch_trials"]] == [t[:2] for t in row["max_batch_trials"]]


@pytest.mark.parametrize("precision", ["fp32", "amp-fp16", "master-bf16", "pure-bf16"])
def test_the_state_bytes_are_read_in_the_memory_step_with_the_figures_of_a_step_of_their_own(
        precision: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Weights, gradients and optimizer state were read in one more step after the timed ones (GPT-2 small on the
    CPU: 0.9 s of a 7.7 s cell); they are read in the memory step where the first step updated the weights. Oracle:
    the row of a cell that reads them in that step of their own (the first step reported as skipped)."""
    from ampbench.measure.step import TrainStep

    calls: list[int] = []
    real_call = TrainStep.__call__

    def counted(self: TrainStep, *args: object, **kw: object) -> None:
        calls.append(1)
        real_call(self, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(TrainStep, "__call__", counted)
    spec = _spec(precision, steps=2)
    row = run_cell(spec)
    now = len(calls)
    calls.clear()
    monkeypatch.setattr(TrainStep, "updated", lambda self: False if len(calls) < 3 else
                        self.mp.totals["steps"] > self.mp.totals["skipped_steps"])
    old = run_cell(spec)
    assert row["status"] == old["status"] == "ok", (row["reason"], old["reason"])
    for key in ("weights_bytes", "grads_bytes", "optimizer_bytes"):  # (master-*: the gradients counted on the fp32
        assert row[key] == old[key] and (row[key] > 0 or (key == "grads_bytes" and precision.startswith("master"))), key
        # masters, with the optimizer's state)
    assert now == len(calls) - 1  # (one step fewer)


@pytest.mark.parametrize("workload, precision, checkpointing", [
    ("mnist-cnn", "fp32", "off"), ("mnist-cnn", "amp-bf16", "off"), ("gpt2", "amp-bf16", "blocks")])
def test_an_eager_cell_counts_its_flops_in_its_memory_step_with_the_figures_of_a_step_of_their_own(
        workload: str, precision: str, checkpointing: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An eager cell's FLOP count ran in a step of its own after the memory step (GPT-2 small on the CPU: 1.0 s of
    a 7.0 s cell); one step counts both now. Oracle: the cell with the count in its own step."""
    import ampbench.frameworks.torch.cell as torch_cell

    spec = CellSpec.of(workload=workload, model=None, preset="tiny", precision=precision, batch_size=4, device="cpu",
                       measures=("throughput", "memory"), steps=2, warmup=1, checkpointing=checkpointing)
    assert torch_cell.counted_in_the_memory_step(spec)
    row = run_cell(spec)
    monkeypatch.setattr(torch_cell, "counted_in_the_memory_step", lambda spec: False)
    apart = run_cell(spec)
    assert row["status"] == apart["status"] == "ok", (row["reason"], apart["reason"])
    assert "flop_count" not in row["phases_s"] and apart["phases_s"]["flop_count"] > 0
    for key in ("activation_bytes", "flops_per_step", "conv_flops_share", "recomputed_flops_per_step"):
        assert row.get(key) == apart.get(key), key
    assert row["flops_per_step"] > 0 and row["checkpointing"] == checkpointing
    assert (row["recomputed_flops_per_step"] or 0) > 0 or checkpointing == "off"
    assert not torch_cell.counted_in_the_memory_step(spec.with_flat(grad_accum=2))
    assert not torch_cell.counted_in_the_memory_step(spec.with_flat(compile="on"))


def test_a_kernel_fallback_the_engine_installed_is_in_the_row_s_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """What was timed is the fallback (the same math another way): the row says so. Planted: this CPU's bf16 weight
    gradient of a strided convolution over a 1x1 input checked wrong (as an AMX Xeon's oneDNN computes it) -- ResNeXt
    tiny's strided convolutions run as their center tap where their input is 1x1; the same cell with the check
    passing has no such warning."""
    from ampbench.precision import strided_conv

    spec = CellSpec.of(workload="resnext", preset="tiny", precision="amp-bf16", batch_size=8, device="cpu",
                       measures=("throughput",), steps=2, warmup=1)
    monkeypatch.setattr(strided_conv, "strided_weight_grad_works", lambda dtype: False)
    row = run_cell(spec)
    assert row["status"] == "ok", row["reason"]
    said = [w for w in row["warnings"] or [] if w.startswith("kernel fallback: ")]
    assert len(said) == 1 and "blocks.3.conv2" in said[0] and "runs as its kernel's center tap" in said[0], said
    monkeypatch.setattr(strided_conv, "strided_weight_grad_works", lambda dtype: True)
    assert not [w for w in run_cell(spec)["warnings"] or [] if w.startswith("kernel fallback")]
