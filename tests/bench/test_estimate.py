"""The run's length, said before it starts: the plan's arithmetic against a hand count, and a real estimate of a
tiny run (its convergence work following the preset)."""

from __future__ import annotations

import math

import pytest

from ampbench.bench import RunConfig
from ampbench.bench.estimate import cell_seconds, estimate, run_estimate
from ampbench.cells import CONVERGE_BY_PRESET, NOT_CONVERGING, CellSpec, MeasureOptions, converge_work
from ampbench.workloads.data_options import DataOptions
from ampbench.workloads.factory import build_target


def test_the_plan_arithmetic_matches_a_hand_count() -> None:
    config = RunConfig.of(device="cpu", workloads=("tabular-mlp",), presets=("tiny",), precisions=("fp32", "amp-bf16"),
                          measures=("throughput", "converge", "inference"), steps=10, warmup=3, seeds=2,
                          converge_steps=50)
    cells = config.cells()
    assert [c.precision for c in cells] == ["fp32", "amp-bf16", "fp32"]  # (the closing baseline: throughput only)
    target = {"steps": {"fp32": 0.01, "amp-bf16": 0.04}, "build_s": 0.5, "length": 7}
    measured = {"targets": {"tabular-mlp|tiny|None": target}}
    # by hand: (first + memory steps: an eager cell counts its FLOPs and reads its state's sizes in its memory step)
    # + (warmup - 1) + timed; 2 seeds x 50; inference 2 x (10 + 3) / 3
    per_cell = {"fp32": 0.01 * (2 + 2 + 10 + 100 + 2 * 13 / 3) + 0.5 * 3,
                "amp-bf16": 0.04 * (2 + 2 + 10 + 100 + 2 * 13 / 3) + 0.5 * 3}
    closing = 0.01 * (2 + 2 + 10) + 0.5
    assert cell_seconds(cells[0], target, 2.0) == pytest.approx(2.0 + per_cell["fp32"])
    assert cell_seconds(cells[1], target, 2.0) == pytest.approx(2.0 + per_cell["amp-bf16"])
    assert cell_seconds(cells[2], target, 2.0) == pytest.approx(2.0 + closing)
    e = estimate(cells, measured, 2.0)
    assert e is not None and e.seconds == pytest.approx(6.0 + per_cell["fp32"] + per_cell["amp-bf16"] + closing)
    assert estimate(cells, {"targets": {}}, 2.0) is None  # nothing measured: nothing said
    assert e.not_counted == ()
    # each convergence seed evaluates the test split after it: 12 forward passes at a third of a step each
    evaluated = {**target, "eval_batches": 12}
    assert cell_seconds(cells[0], evaluated, 2.0) == pytest.approx(2.0 + per_cell["fp32"] + 0.01 * 2 * 12 / 3)
    assert cell_seconds(cells[2], evaluated, 2.0) == pytest.approx(2.0 + closing)  # (no convergence: no evaluation)
    # a compiled cell counts its FLOPs in a step of its own (its memory step runs compiled code): one step more
    compiled = cells[2].with_flat(compile="on")
    assert cell_seconds(compiled, target, 2.0) == pytest.approx(2.0 + closing + 0.01)


def test_optimizer_state_cells_say_the_compile_is_not_counted() -> None:
    """torchao compiles a state precision's update on its first steps (10-20 s a cell on a CPU): a bert tiny run of 5
    cells estimated at ~6 s took 77 s, and said nothing about it."""
    config = RunConfig.of(device="cpu", workloads=("tabular-mlp",), presets=("tiny",), precisions=("amp-bf16",),
                          optimizer_states=("8bit",), steps=3, warmup=1)
    cells = config.cells()
    assert [c.optimizer_state for c in cells] == [None, "8bit"]
    target = {"steps": {"amp-bf16": 0.01}, "build_s": 0.5, "length": 7}
    e = estimate(cells, {"targets": {"tabular-mlp|tiny|None": target}}, 2.0)
    assert e is not None and e.not_counted == ("torchao compiling its optimizer states' update",)
    assert e.text().endswith("not counted: torchao compiling its optimizer states' update)")


def test_a_tiny_run_is_estimated_from_real_steps(with_estimate: None) -> None:
    config = RunConfig.of(device="cpu", workloads=("tabular-mlp",), presets=("tiny",), precisions=("fp32",),
                          measures=("throughput", "maxbatch"), steps=3, warmup=1, memory_budget=2**30)
    e = run_estimate(config, isolate=False)
    assert e is not None and 0 < e.seconds < 60
    assert e.not_counted == () and e.trials_to is not None and e.trials_to >= 16  # (its search: priced on trials)
    assert f"max-batch trials up to batch {e.trials_to:,})" in e.text()
    isolated = run_estimate(config, isolate=True)  # (measured in a child, whose start-up each cell pays too: the
    # arithmetic of that start is the hand count's above; two measured estimates are not compared here)
    assert isolated is not None and isolated.seconds > 0


def test_the_estimate_job_measures_through_the_frameworks_verbs() -> None:
    """measure_steps, one job for every framework: per target its build, length and a step per precision; past the
    budget a target measured once is measured no more (its other precisions take its slowest time); a cell that
    cannot run (a mode this CPU refuses) is left out, not an error."""
    from ampbench.bench.estimate import measure_steps

    config = RunConfig.of(device="cpu", workloads=("tabular-mlp",), presets=("tiny",), precisions=("fp32", "amp-bf16"),
                          steps=3, warmup=1)
    pairs = [["t", c.to_dict()] for c in config.cells() if not c.closing]
    out = measure_steps({"cells": pairs, "budget_s": 60.0})
    t = out["targets"]["t"]
    assert set(t["steps"]) == {"fp32", "amp-bf16"} and all(v > 0 for v in t["steps"].values())
    assert t["build_s"] > 0 and t["length"] > 0 and "first" not in t
    wl = build_target("tabular-mlp", None, "tiny", DataOptions(), 0)  # oracle: the test split over the training batch
    assert t["eval_batches"] == math.ceil(len(wl.test_data) / wl.batch_size) > 0
    assert out["import_s"] > 0  # (every cell's process pays the runtime's warm-up before its first step: counted)
    assert set(measure_steps({"cells": pairs, "budget_s": 0.0})["targets"]["t"]["steps"]) == {"fp32"}
    refused = [["u", {**pairs[0][1], "precision": "tf32"}]]  # (no TF32 on a CPU: the cell says so when it runs)
    assert measure_steps({"cells": refused, "budget_s": 60.0})["targets"]["u"] == {"steps": {}}


def test_an_emulated_mode_too_slow_to_time_is_guessed_not_timed(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """BERT-large's amp-fp16 took 64 s a step on this CPU (fp32: 1.4-1.7 s): the estimate timed it for minutes, then
    printed nothing. An emulated mode is timed only where its two steps fit the budget, guessed as fp32's step x its
    GEMM slowdown (planted here: 1e6x), and the header says so. Oracle: the guess is fp32's measured step x 1e6."""
    from ampbench.bench import estimate as est

    monkeypatch.setattr(est, "_emulated", lambda spec: spec.precision == "amp-fp16")  # (whatever this CPU has)
    monkeypatch.setattr(est, "gemm_slowdown", lambda spec: 1e6)  # (a tiny step x 1e6: past any budget)
    config = RunConfig.of(device="cpu", workloads=("tabular-mlp",), presets=("tiny",),
                          precisions=("fp32", "amp-fp16", "amp-bf16"), steps=3, warmup=1)
    pairs = [["tabular-mlp|tiny|None", c.to_dict()] for c in config.cells() if not c.closing]
    out = est.measure_steps({"cells": pairs, "budget_s": 15.0})
    t = out["targets"]["tabular-mlp|tiny|None"]
    assert set(t["steps"]) == {"fp32", "amp-bf16"} and set(t["guessed"]) == {"amp-fp16"}
    assert t["guessed"]["amp-fp16"] == t["steps"]["fp32"] * 1e6
    e = est.estimate(config.cells(), out, 0.0)
    assert e is not None and "a timed step of amp-fp16 (emulated here: guessed as fp32's x their GEMM slowdown)" in \
        e.not_counted
    fp16 = next(c for c in config.cells() if c.precision == "amp-fp16")
    assert est.cell_seconds(fp16, t, 0.0) > est.cell_seconds(next(c for c in config.cells() if c.precision == "fp32"),
                                                             t, 0.0) * 100
    monkeypatch.setattr(est, "gemm_slowdown", lambda spec: 1.0)  # (a guess that fits the budget: timed as before)
    assert "amp-fp16" in est.measure_steps({"cells": pairs, "budget_s": 15.0})["targets"]["tabular-mlp|tiny|None"]["steps"]


def test_the_gemm_slowdown_is_at_least_one_and_cached() -> None:
    from ampbench.bench.estimate import _SLOWDOWN, gemm_slowdown

    spec = next(c for c in RunConfig.of(device="cpu", workloads=("tabular-mlp",), presets=("tiny",),
                                        precisions=("fp32", "amp-bf16")).cells() if c.precision == "amp-bf16")
    assert gemm_slowdown(spec) >= 1.0 and any(k[1] == "cpu" for k in _SLOWDOWN)


def test_a_crashing_model_does_not_take_an_isolated_run_s_estimate_down(with_estimate: None, tmp_path) -> None:
    (tmp_path / "crash.py").write_text("import os, torch\nclass M(torch.nn.Linear):\n    def forward(self, x):\n"
                                       "        if self.training: os.kill(os.getpid(), 11)\n        return super().forward(x)\n"
                                       "def build():\n    return M(4, 2)\n")
    config = RunConfig.of(device="cpu", model=f"{tmp_path / 'crash.py'}:build", input_shape="4", num_classes=2,
                          presets=("tiny",), precisions=("fp32",), steps=2, warmup=1)
    assert run_estimate(config, isolate=True) is None  # (the child died: no estimate, and this process lives)


def test_a_measurement_that_does_not_finish_says_so_in_the_header_and_names_no_expectation(
        with_estimate: None, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bert small in fp8-tensorwise with --fp8-filter dims on an AMX Xeon: its per-tensor fp8 matmul is a reference
    kernel (0.1 GFLOP/s), one step took minutes, the measurement's process was killed at its time limit and the run
    started without a word of how long. Planted: a model whose training step sleeps 30 s, the limit made 6 s."""
    from ampbench.bench import estimate as est

    (tmp_path / "slow.py").write_text("import time, torch\nclass M(torch.nn.Linear):\n    def forward(self, x):\n"
                                      "        if self.training: time.sleep(30)\n        return super().forward(x)\n"
                                      "def build():\n    return M(4, 2)\n")
    config = RunConfig.of(device="cpu", model=f"{tmp_path / 'slow.py'}:build", input_shape="4", num_classes=2,
                          presets=("tiny",), precisions=("fp32",), steps=2, warmup=1)
    monkeypatch.setattr(est, "TIMEOUT_S", 6.0)
    e = run_estimate(config, isolate=True)
    assert e is not None and e.unmeasured and e.against() == ""
    assert e.text().startswith("not estimated: its measurement did not finish in 6 s (it was timing ")
    assert "fp32" in e.text() and "expected" not in e.text()


def test_convergence_work_follows_the_preset_unless_given() -> None:
    open_ = MeasureOptions(measures=("converge",), seeds=None, converge_steps=None)
    for preset, (steps, seeds) in CONVERGE_BY_PRESET.items():
        m = converge_work(open_, preset)
        assert (m.converge_steps, m.seeds) == (steps, seeds)
    given = converge_work(MeasureOptions(measures=("converge",), seeds=5, converge_steps=None), "tiny")
    assert (given.converge_steps, given.seeds) == (30, 5)
    idle = converge_work(MeasureOptions(measures=("throughput",), seeds=None, converge_steps=None), "tiny")
    assert (idle.converge_steps, idle.seeds) == NOT_CONVERGING  # (keys of cells that do not converge: unchanged)


def test_cells_and_identity_carry_the_preset_s_convergence_work() -> None:
    tiny = RunConfig.from_strings(device="cpu", workloads="tabular-mlp", preset="tiny", precisions="fp32,amp-bf16",
                                  measure="throughput,converge", repeats=2)
    assert {(c.measure.converge_steps, c.measure.seeds) for c in tiny.cells()} == {(30, 2)}
    first = {c.key() for c in tiny.cells() if not c.repeat}
    assert {c.repeat_of() for c in tiny.cells() if c.repeat} <= first  # a repeat still names its cell
    assert (tiny.identity()["converge_steps"], tiny.identity()["seeds"]) == (30, 2)
    small = RunConfig.from_strings(device="cpu", workloads="tabular-mlp", preset="small", precisions="fp32",
                                   measure="converge")
    assert (small.identity()["converge_steps"], small.identity()["seeds"]) == (200, 3)  # as runs stored it before
    paper = RunConfig.from_strings(device="cpu", workloads="tabular-mlp", preset="paper", precisions="fp32",
                                   measure="converge")
    assert [(c.measure.converge_steps, c.measure.seeds) for c in paper.cells()] == [(None, 3)]


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_cell_s_process_cost_leaves_out_the_fork_server_s_start_and_times_it_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """The estimate's measurement runs as a cell runs (a fork server's child, or a fresh process); what that process
    cost besides its work is what each cell pays -- the server's start, paid once by the run, is not. On a fake clock:
    a server starting in 100 s, a child living 3 s of which 2 s of work -> 1 s; a fresh process of 5 s -> 3 s."""
    from ampbench.bench import estimate as est
    from ampbench.launch import ChildProcess, Forked, Job

    clock = _Clock()
    monkeypatch.setattr(est.time, "perf_counter", clock)

    class Child:
        def wait(self) -> tuple[dict[str, float], None]:
            clock.now += 3.0
            return {"work_s": 2.0}, None

    class Served(Forked):
        def start(self, job: Job, held: bool = False) -> Child:  # type: ignore[override]
            clock.now += 100.0  # (the server's start: its imports)
            return Child()

    class Fresh(ChildProcess):
        def run(self, job: Job) -> dict[str, float]:  # type: ignore[override]
            clock.now += 5.0
            return {"work_s": 2.0}

    job = Job("x:y", {})
    assert est._apart(Served(("m",)), job) == ({"work_s": 2.0}, 1.0)  # (the server's start: not the cell's)
    assert est._apart(Fresh(), job) == ({"work_s": 2.0}, 3.0)


def _ddp_config(nnodes: int = 1) -> RunConfig:
    return RunConfig.of(device="cpu", workloads=("tabular-mlp",), presets=("tiny",), precisions=("fp32", "amp-bf16"),
                        strategies=(None, "ddp"), nproc=2, nnodes=nnodes, steps=10, warmup=3,
                        extra={"endpoint": "10.0.0.1:29500"} if nnodes > 1 else None)


def test_distributed_cells_are_priced_from_a_probe_of_their_distribution() -> None:
    """A run of mnist-cnn tiny in 2 ranks on a 2-core Xeon said "~1 s without starting ranks" and took 11 s: each DDP
    cell took 3.4 s against 0.14 s in one process. Hand count: the probe (fp32) cost 3.0 s besides its steps and
    stepped 3x its one-process step; a DDP cell = (3.0 - the probe target's build) + its own build + its steps x 3."""
    cells = _ddp_config().cells()
    target = {"steps": {"fp32": 0.01, "amp-bf16": 0.02}, "build_s": 0.5, "length": 7}
    measured = {"targets": {"tabular-mlp|tiny|None": target}}
    probe = {"fixed_s": 3.0, "step_s": 0.03, "target": "tabular-mlp|tiny|None", "precision": "fp32"}
    e = estimate(cells, measured, 1.0, ranks={("ddp", 2): probe})
    n = 2 + 2 + 10  # (first + memory steps, warmup - 1, timed)
    one = {p: 1.0 + 0.5 + n * s for p, s in target["steps"].items()}
    ddp = {p: (3.0 - 0.5) + 0.5 + n * s * 3 for p, s in target["steps"].items()}
    kinds = [(c.strategy, c.precision, c.closing) for c in cells]
    hand = sum((ddp if strategy else one)[p] if not closing else
               (2.5 + 0.5 + n * 0.03 if strategy else 1.5 + n * 0.01) for strategy, p, closing in kinds)
    assert e is not None and e.seconds == pytest.approx(hand)
    assert "starting ranks" not in e.not_counted and e.probed == ("ddp x2",)
    assert e.text().startswith("expected to take ~") and "precision, and a short ddp x2 cell)" in e.text()
    unprobed = estimate(cells, measured, 1.0)  # (no probe: the one-process pricing, and the start not counted)
    assert unprobed is not None and unprobed.not_counted == ("starting ranks",) and unprobed.probed == ()
    assert unprobed.seconds == pytest.approx(sum(1.5 + n * target["steps"][p] for _, p, _ in kinds))


def test_ranks_on_several_machines_are_not_probed_and_say_so() -> None:
    from ampbench.bench.estimate import distribution_of

    cells = _ddp_config(nnodes=2).cells()
    assert {distribution_of(c) for c in cells} == {None}  # (their ranks start on the other machines too)
    e = estimate(cells, {"targets": {"tabular-mlp|tiny|None": {"steps": {"fp32": 0.01, "amp-bf16": 0.01}}}}, 0.0,
                 ranks={("ddp", 2): {"fixed_s": 3.0, "step_s": 0.03, "target": "tabular-mlp|tiny|None",
                                     "precision": "fp32"}})
    assert e is not None and "starting ranks" in e.not_counted and e.probed == ()


def test_a_probe_s_fixed_cost_is_its_wall_time_less_its_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a fake clock: a probe cell living 5 s whose slowest rank stepped 250 ms -> 5 - 4 x 0.25 = 4 s besides its
    steps (first and memory steps, then 2 timed after the one warm-up, which is the first); a failed probe: None."""
    from ampbench.bench import estimate as est

    clock = _Clock()
    monkeypatch.setattr(est.time, "perf_counter", clock)
    seen: list[CellSpec] = []

    def ranks_ran(spec: CellSpec, timeout: float | None = None) -> dict[str, object]:
        seen.append(spec)
        clock.now += 5.0
        return {"status": "ok", "step_ms_p50": 250.0}

    monkeypatch.setattr(est, "run_distributed", ranks_ran)
    spec = next(c for c in _ddp_config().cells() if c.strategy)
    assert est.probe_ranks(spec) == {"fixed_s": pytest.approx(4.0), "step_s": 0.25}
    assert (seen[0].measure.steps, seen[0].measure.warmup, seen[0].measures) == (2, 1, ("throughput",))
    assert seen[0].strategy == "ddp" and seen[0].distribution.nproc == 2
    monkeypatch.setattr(est, "run_distributed", lambda spec, timeout=None: {"status": "error", "step_ms_p50": None})
    assert est.probe_ranks(spec) is None


def test_a_ddp_run_is_estimated_with_its_ranks_started(with_estimate: None) -> None:
    """The real thing, in 2 ranks of gloo: the probe ran, so the start is counted; a DDP cell costs more than its
    one-process twin (its ranks' start and imports)."""
    e = run_estimate(_ddp_config(), isolate=False)
    assert e is not None and e.probed == ("ddp x2",) and "starting ranks" not in e.not_counted
    one_process = run_estimate(RunConfig.of(device="cpu", workloads=("tabular-mlp",), presets=("tiny",),
                                            precisions=("fp32", "amp-bf16"), steps=10, warmup=3), isolate=False)
    assert one_process is not None and e.seconds > 2 * one_process.seconds


def _search_cell(limit: int = 65536, **kw: object) -> CellSpec:
    config = RunConfig.of(device="cpu", workloads=("tabular-mlp",), presets=("tiny",), precisions=("fp32",),
                          measures=("throughput", "maxbatch"), steps=10, warmup=3, memory_budget=2**30,
                          maxbatch_limit=limit, **kw)
    return config.cells()[0]


def test_the_max_batch_search_is_priced_on_the_trials_it_would_run() -> None:
    """mnist-cnn tiny's search on this Xeon took 3 minutes of a run estimated at "~0 s, not counted". Planted trials:
    peaks 100 B at batch 16 and 1,100 B at 1,024 (a line: fits up to 9,995 under 10,000 B allowed), 0.1 s and 0.5 s.
    Oracle, by hand: doubling 16..8,192 fits (10 trials), 16,384 does not; bisecting, 12,288 and 10,240 do not, 9,216,
    9,728 and 9,984 do, 10,112 does not: within 1/64 of 9,984 -- 17 trials, each on the time line and a process
    start of 1 s; then the throughput cell at 9,984 (a start, the build, 2 + 2 + 10 steps of the step grown by the
    trials' seconds per sample)."""
    from ampbench.bench.estimate import search_seconds

    spec = _search_cell()
    target = {"steps": {"fp32": 0.01}, "build_s": 0.5,
              "search": {"fp32": {"points": [[16, 100, True, 0.1], [1024, 1100, True, 0.5]], "allowed": 10_000.0}}}
    batches = [16 * 2**i for i in range(10)] + [16384, 12288, 10240, 9216, 9728, 9984, 10112]
    trial = [0.1 + 0.4 / 1008 * (b - 16) for b in batches]
    step = 0.01 + 0.4 / 1008 / 3 * (9984 - 16)
    hand = sum(trial) + 1.0 * len(batches) + 1.0 + 0.5 + (2 + 2 + 10) * step
    assert search_seconds(spec, target, 1.0) == pytest.approx(hand)
    # (each trial a process of its own: its workload built cold, 0.5 s, less the warm build the measured trial held --
    # 0.1 s less its 3 steps of 0.01 s: 0.07 s -- on every one of the 17)
    assert search_seconds(spec, target, 1.0, apart=True) == pytest.approx(hand + 17 * (0.5 - 0.07))


def test_a_trial_out_of_memory_without_a_peak_ends_the_fit_halfway_and_a_flat_peak_prices_nothing() -> None:
    """Hand count: a miss at 64 after a fit at 16 -> fits up to 40: 16, 32, 64, then 48, 40, 44, 42, 41 (8 trials,
    40 found). A peak that did not grow says nothing of where the search ends (a CPU's resident high-water mark, or a
    GPU cache, hides the growth): not priced, as a search without trials is not."""
    from ampbench.bench.estimate import search_seconds

    spec = _search_cell()
    oom = {"steps": {"fp32": 0.01}, "build_s": 0.0,
           "search": {"fp32": {"points": [[16, 100, True, 0.1], [64, None, False, 0.1]], "allowed": 10_000.0}}}
    n = 2 + 2 + 10
    assert search_seconds(spec, oom, 0.0) == pytest.approx(8 * 0.1 + n * 0.01)  # (time flat: step as measured)
    flat = {"steps": {"fp32": 0.01}, "build_s": 0.0,
            "search": {"fp32": {"points": [[16, 100, True, 0.1], [64, 100, True, 0.1]], "allowed": 10_000.0}}}
    assert search_seconds(_search_cell(limit=256), flat, 0.0) is None
    assert search_seconds(spec, {"steps": {"fp32": 0.01}}, 0.0) is None  # (no trials measured: not counted)
    ddp = RunConfig.of(device="cpu", workloads=("tabular-mlp",), presets=("tiny",), precisions=("fp32",),
                       measures=("throughput", "maxbatch"), memory_budget=2**30, strategies=("ddp",), nproc=2).cells()
    e = estimate(ddp, {"targets": {"tabular-mlp|tiny|None": flat}}, 0.0)
    assert e is not None and "the max-batch search" in e.not_counted  # (a distributed cell's search: not priced)


def test_the_measurement_tries_the_search_s_own_trial_at_batches_4x_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """Real trials of tabular-mlp tiny: from the cell's batch, 4x apart, each fitting, to the search's limit (the
    trials' time limit lifted: on a loaded machine a trial of 1,024 can take 0.25 s, and when they stop is the time
    limit's own test below); ``allowed`` is the search's own: (1 - margin) x --memory-budget; then with the limit on,
    every trial but the last took under it."""
    from ampbench.bench import estimate as est
    from ampbench.bench.jobs import verbs

    spec = _search_cell(limit=4096)
    monkeypatch.setattr(est, "SEARCH_TRIAL_S", 1e9)
    got = est.search_points(spec, verbs(spec), 64)
    assert got is not None and got["allowed"] == pytest.approx((1 - spec.measure.margin_on("cpu")) * 2**30)
    points = got["points"]
    assert [p[0] for p in points] == [64, 256, 1024, 4096] and all(p[2] and p[1] is not None for p in points)
    monkeypatch.setattr(est, "SEARCH_TRIAL_S", 0.25)
    timed = est.search_points(spec, verbs(spec), 64)
    assert timed is not None
    longest = max(0.25, 2 * timed["points"][0][3])  # (or twice the first trial, where that took longer)
    assert all(p[3] < longest for p in timed["points"][:-1])
    assert timed["points"][-1][3] >= longest or timed["points"][-1][0] == 4096


def test_the_measurement_s_trials_step_2x_where_4x_would_pass_the_limit_and_stop_where_2x_would() -> None:
    """Planted peaks of 1,000 B a sample under 1,000,000 B allowed: 64 (4x: 256,000 fits), 256 (4x would hold
    1,024,000: 2x), 512 (2x would too: stop) -- no trial of the estimate holds more than the search may; a trial that
    ran out of memory ends them; one that broke otherwise gives no points (the cell says why when it runs)."""
    from ampbench.bench.estimate import search_points

    spec = _search_cell().with_flat(memory_budget=1_000_000, memory_margin=0.0)

    class Verbs:
        def trial_peak(self, spec: CellSpec, batch: int) -> tuple[int, None]:
            if batch > self.oom_above:
                raise MemoryError("out of memory")
            return 1000 * batch, None

        def is_oom(self, e: BaseException) -> bool:
            return isinstance(e, MemoryError)

        oom_above = 10**9

    got = search_points(spec, Verbs(), 64)
    assert got is not None and got["allowed"] == 1_000_000.0
    assert got["points"][:3] == [[64, 64_000, True, pytest.approx(0, abs=0.1)], [256, 256_000, True, pytest.approx(0, abs=0.1)],
                                 [512, 512_000, True, pytest.approx(0, abs=0.1)]] and len(got["points"]) == 3
    oom = Verbs()
    oom.oom_above = 100
    assert [p[:3] for p in search_points(spec, oom, 64)["points"]] == [[64, 64_000, True], [256, None, False]]
    broken = Verbs()
    broken.is_oom = lambda e: False  # type: ignore[method-assign]
    broken.oom_above = 100
    assert search_points(spec, broken, 64) is None
