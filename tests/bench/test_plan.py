"""How a run's options expand to cells: order, keys (resume identity) and repeats."""

from __future__ import annotations

from ampbench.bench import RunConfig


def _config(**kw: object) -> RunConfig:
    base = dict(device="cpu", workloads=("mnist-cnn", "bert"), presets=("tiny", "tiny"), precisions=("fp32", "amp-bf16"))
    base.update(kw)
    return RunConfig.of(**base)  # type: ignore[arg-type]


def test_repeats_interleave_precisions_and_time_throughput_only() -> None:
    cells = _config(repeats=3, measures=("throughput", "memory", "converge")).cells()
    order = [(c.workload, c.repeat, c.precision) for c in cells]
    assert order[:6] == [("mnist-cnn", r, p) for r in range(3) for p in ("fp32", "amp-bf16")]
    assert len(cells) == 12
    firsts = {(c.workload, c.precision): c for c in cells if c.repeat == 0}
    for c in cells:
        if c.repeat == 0:
            assert c.measures == ("throughput", "memory", "converge") and c.repeat_of() is None
        else:
            assert c.measures == ("throughput", "memory")
            assert c.repeat_of() == firsts[(c.workload, c.precision)].key()
    assert len({c.key() for c in cells}) == len(cells)


def test_repeats_leave_first_cells_and_old_identities_unchanged() -> None:
    one, three = _config(), _config(repeats=3)
    assert [c.key() for c in one.cells() if not c.closing] == [c.key() for c in three.cells() if c.repeat == 0]
    assert "repeats" not in one.identity() and three.identity()["repeats"] == 3
    assert "repeat" not in one.cells()[0].to_dict()  # keys of runs stored before --repeats existed still match


def test_no_repeats_without_throughput() -> None:
    assert len(_config(repeats=3, measures=("converge",)).cells()) == 4
    assert len(_config(repeats=3, measures=("memory",)).cells()) == 4


def test_one_measurement_per_cell_closes_each_workload_with_fp32_again() -> None:
    cells = _config(precisions=("fp32", "amp-bf16", "pure-bf16"), measures=("throughput", "converge")).cells()
    order = [(c.workload, c.precision, c.closing) for c in cells]
    assert order[:4] == [("mnist-cnn", "fp32", False), ("mnist-cnn", "amp-bf16", False),
                         ("mnist-cnn", "pure-bf16", False), ("mnist-cnn", "fp32", True)]
    closing = cells[3]
    assert closing.measures == ("throughput",) and closing.repeat_of() == cells[0].key()
    assert len({c.key() for c in cells}) == len(cells) == 8
    # no closing cell: with repeats (they pair up), without fp32, with fp32 alone, without throughput
    assert not any(c.closing for c in _config(repeats=2).cells())
    assert not any(c.closing for c in _config(precisions=("amp-bf16", "pure-bf16")).cells())
    assert not any(c.closing for c in _config(precisions=("fp32",)).cells())
    assert not any(c.closing for c in _config(measures=("converge",)).cells())


def test_each_distribution_closes_with_its_own_fp32_again() -> None:
    """A DDP mode's speedup divides by fp32 under DDP: that cell is timed again after the others, as the one-process
    fp32 is (a disturbed fp32 DDP cell made every DDP mode look faster, with no drift to say so); its closing
    measurement folds into that cell's row (repeat_of), never into another distribution's."""
    cells = _config(workloads=("mnist-cnn",), presets=("tiny",), strategies=(None, "ddp"), nproc=2).cells()
    firsts = {c.strategy: c for c in cells if c.precision == "fp32" and not c.closing}
    closing = [c for c in cells if c.closing]
    assert [c.strategy for c in closing] == [None, "ddp"] and cells[-2:] == closing
    assert [c.repeat_of() for c in closing] == [firsts[None].key(), firsts["ddp"].key()]
    assert closing[1].distribution == firsts["ddp"].distribution and closing[1].measures == closing[0].measures
    assert len({c.key() for c in cells}) == len(cells) == 6
    # fp32 alone under a strategy: its one-process cell (the scaling baseline) closes, no mode divides by the other
    alone = _config(workloads=("mnist-cnn",), presets=("tiny",), precisions=("fp32",), strategies=(None, "ddp"),
                    nproc=2).cells()
    assert [c.strategy for c in alone if c.closing] == [None]


def test_a_repeat_crosses_into_a_child_and_back() -> None:
    from ampbench.cells import CellSpec

    c = _config(repeats=2).cells()[3]
    assert c.repeat == 1
    assert CellSpec.from_dict(c.to_dict()) == c


def test_the_default_cpu_suite_runs_its_gemm_bound_entry_in_native_modes_only(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """bert small shows what the CPU's half hardware can do; modes this CPU emulates are left out of it
    (with the reason printed), on every CPU: which ones depends on the CPU's flags."""
    from ampbench.bench.config import default_precisions
    from ampbench.bench.suites import native_only_entries, with_presets
    from ampbench.precision import support

    hw = {"avx512_bf16": True, "amx_bf16": False, "avx512_fp16": False, "amx_fp16": False}
    monkeypatch.setattr(support, "cpu_half_hardware", lambda: hw)
    names, presets = with_presets([], None, "cpu")
    assert ("bert", "small") in zip(names, presets) and ("bert", "tiny") in zip(names, presets)
    config = _config(workloads=names, presets=presets, precisions=default_precisions("cpu"),
                     native_only=native_only_entries([], None, None, "cpu"))
    small = [c.precision for c in config.cells() if (c.workload, c.preset) == ("bert", "small") and not c.closing]
    tiny = [c.precision for c in config.cells() if (c.workload, c.preset) == ("bert", "tiny") and not c.closing]
    assert small == ["fp32", "amp-bf16", "master-bf16", "pure-bf16"] and "amp-fp16" in tiny
    (note,) = config.left_out()
    assert note.startswith("bert (small): amp-fp16, master-fp16, pure-fp16 left out: CPU") and "AVX512-FP16" in note
    assert native_only_entries(["bert"], None, None, "cpu") == ()  # named workloads run every mode asked for
    assert native_only_entries([], None, "fp32,amp-fp16", "cpu") == ()
    assert "native_only" not in _config().identity()  # identities of earlier runs are unchanged


def test_fp8_on_cuda_compiles_by_default_beside_compiled_references() -> None:
    from ampbench.bench.config import fp8_compiles_by_default
    from ampbench.execution import Execution

    modes = ("fp32", "amp-fp16", "amp-bf16", "fp8-tensorwise", "fp8-rowwise")
    assert fp8_compiles_by_default(False, "cuda:0", modes)
    assert not fp8_compiles_by_default(True, "cuda:0", modes)  # --compile given: it says what runs
    assert not fp8_compiles_by_default(False, "cpu", modes)  # emulated fp8: compiling it says nothing about a GPU
    assert not fp8_compiles_by_default(False, "cuda:0", modes[:3])
    config = _config(device="cuda:0", workloads=("bert",), presets=("tiny",), precisions=modes, fp8_compile=True,
                     measures=("throughput", "converge"), executions=(Execution(), Execution(memory_format="channels_last")))
    cells = [c for c in config.cells() if not c.closing]
    order = [(c.precision, c.execution.compile, c.execution.memory_format, c.compiled_by_default) for c in cells]
    for fmt in ("contiguous", "channels_last"):
        eager = [p for p, comp, f, _ in order if f == fmt and comp == "off"]
        compiled = [(p, auto) for p, comp, f, auto in order if f == fmt and comp == "on"]
        assert eager == ["fp32", "amp-fp16", "amp-bf16"]  # fp8 never eager by default on CUDA
        assert compiled == [("fp32", True), ("amp-bf16", True), ("fp8-tensorwise", True), ("fp8-rowwise", True)]
    assert len({c.key() for c in cells}) == len(cells) == 14
    explicit = _config(device="cuda:0", workloads=("bert",), presets=("tiny",), precisions=("fp32",),
                       executions=(Execution(compile="on"),)).cells()[0]
    auto = next(c for c in cells if c.precision == "fp32" and c.compiled_by_default
                and c.execution.memory_format == "contiguous")
    assert auto.key() != explicit.key() and auto.to_dict()["compiled_by_default"] is True
    assert "compiled_by_default" not in explicit.to_dict()  # keys of earlier runs stay what they were
    assert config.identity()["fp8_compile"] is True and "fp8_compile" not in _config().identity()
    from ampbench.bench.cell_row import base_row
    from ampbench.report.console import compile_note
    from ampbench.store.row_keys import row_problem

    row, plain = base_row(auto), base_row(explicit)
    assert row["compiled_by_default"] is True and plain["compiled_by_default"] is None
    assert compile_note({**row, "compile_s": 12.5}) == "compile 12.5 s (fp8 on CUDA: compiled by default)"
    row.update(run_id="r", cell_key=auto.key(), status="error", reason="boom")  # (validation of the new key)
    assert row_problem(row) is None
    assert "compiled_by_default" in (row_problem({**row, "compiled_by_default": "yes"}) or "")


def test_a_run_expands_its_cells_once_and_asks_the_device_once_per_mode(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The plan, the progress bar, the runner and --resume read one expansion (each a copy of it); the device's
    support of each mode is asked once per run in this process (a cell's own process checks its device again)."""
    from ampbench.bench import config as config_module

    asked: list[str] = []
    real = config_module.supported
    monkeypatch.setattr(config_module, "supported", lambda p, d: asked.append(p) or real(p, d))
    config = _config(precisions=("fp32", "amp-bf16"), native_only=("bert:tiny",))
    expanded: list[int] = []
    real_expand = RunConfig._expand
    monkeypatch.setattr(RunConfig, "_expand", lambda self: expanded.append(1) or real_expand(self))
    first = config.cells()
    first.clear()  # (a caller's copy)
    assert config.cells() == config.cells() and len(config.cells()) > 0 and expanded == [1]
    config.left_out()
    assert sorted(asked) == ["amp-bf16"]  # (fp32 always runs: never asked)
    assert config.support("amp-bf16") is config.support("amp-bf16")


def test_a_plan_without_fp32_says_which_comparisons_it_cannot_make() -> None:
    """Speedups, memory savings and convergence verdicts are relative to fp32 in the same run: the README's
    optimizer-state example (amp-bf16 and pure-bf16 only) ended with "no mode converged like fp32" and said nothing
    before it ran."""
    config = _config(precisions=("amp-bf16", "pure-bf16"), measures=("memory", "converge"))
    assert config.left_out() == ["fp32 is not in --precisions: no memory savings or convergence verdicts (each is "
                                 "relative to fp32, measured in the same run); add fp32 for them"]
    every = _config(precisions=("amp-bf16",), measures=("throughput", "memory", "converge"))
    assert every.left_out()[0].startswith("fp32 is not in --precisions: no speedups, memory savings or convergence")
    assert _config(precisions=("amp-bf16",), measures=("maxbatch",), memory_budget=2**30).left_out() == []  # (none)
    assert _config(precisions=("fp32", "amp-bf16"), measures=("memory", "converge")).left_out() == []


def test_a_cpu_max_batch_search_leaves_the_room_its_rss_spread_needs() -> None:
    """A CPU's RSS peak varied 1.34x between runs of one cell: its search defaults to a 0.25 margin; a GPU's, and any
    run that searches no max batch (whose identity must not change: older runs resume), keep 0.05; a margin given is
    kept."""
    from ampbench.cells import default_memory_margin

    assert default_memory_margin("cpu", ("maxbatch",)) == 0.25 == 1 - 0.75
    assert default_memory_margin("cuda:0", ("maxbatch",)) == 0.05 == default_memory_margin("cpu", ("throughput",))
    assert _config(measures=("maxbatch",), memory_budget=2**30).measure.memory_margin == 0.25
    assert _config(measures=("throughput",)).measure.memory_margin == 0.05
    assert _config(measures=("maxbatch",), memory_budget=2**30, memory_margin=0.1).measure.memory_margin == 0.1


def test_a_workload_or_batch_size_named_twice_is_planned_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`--workloads mnist-cnn,mnist-cnn --batch-size 16,16` planned (and would have run) each cell twice over --
    predict priced it twice -- as a precision named twice never was."""
    import json

    from tests.conftest import cli

    code, out, err = cli("run", "--workloads", "mnist-cnn,mnist-cnn", "--preset", "tiny", "--batch-size", "16,8,16",
                         "--precisions", "fp32,amp-bf16", "--measure", "memory", "--dry-run", "--db",
                         str(tmp_path / "r.db"), "--json", str(tmp_path / "plan.json"))
    assert code == 0, err
    assert "ampbench run: 4 cells" in out
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert sorted((c["precision"], c["batch_size"]) for c in plan["cells"]) == [
        ("amp-bf16", 8), ("amp-bf16", 16), ("fp32", 8), ("fp32", 16)]
    assert len({c["key"] for c in plan["cells"]}) == 4
    code, out, err = cli("predict", "--workloads", "mnist-cnn,mnist-cnn", "--gpu", "h100-sxm", "--precisions", "fp32",
                         "--preset", "tiny", "--db", str(tmp_path / "p.db"))
    assert code == 0 and "stored 1 predicted row in" in out, (out, err)


def test_precisions_all_is_every_mode_the_device_runs_and_a_keras_target_s_own(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`--precisions all` was refused as an unknown precision (the help said "default: all the device runs"). Oracle:
    the modes `supported` says this CPU runs, the emulated fp8 ones too (the default leaves them out); for a Keras
    target, its own recipes as the default gives them; predict: every mode."""
    import json

    from ampbench.bench.config import default_precisions, given_precisions
    from ampbench.precision import list_precisions, supported
    from ampbench.predict.config import parse_predicted_precisions
    from tests.conftest import cli

    runs = [p for p in list_precisions() if supported(p, "cpu").ok]
    assert given_precisions("all", "cpu") == given_precisions("fp32,ALL", "cpu") == tuple(runs)
    assert set(default_precisions("cpu")) < set(runs) or not any(p.startswith("fp8") for p in runs)
    assert given_precisions("fp32,amp-bf16", "cpu") == ("fp32", "amp-bf16")
    assert parse_predicted_precisions("all") == tuple(list_precisions())
    code, out, err = cli("run", "--workloads", "mnist-cnn", "--preset", "tiny", "--precisions", "all", "--measure",
                         "memory", "--dry-run", "--db", str(tmp_path / "r.db"), "--json", str(tmp_path / "plan.json"))
    assert code == 0, err
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert [c["precision"] for c in plan["cells"] if not c.get("closing")][:len(runs)] == runs
