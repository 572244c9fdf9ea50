"""The default GPU suite: models at the sizes people train, each entry's batch (sized to the device's memory), layout
and options reaching its cells, and what the user gives winning over the suite."""

from __future__ import annotations

import pytest

from ampbench.bench.config import Axes, RunConfig, Targets
from ampbench.bench.suites import (
    GPU_SUITE,
    REFERENCE_GIB,
    EntrySettings,
    SuiteEntry,
    entry_settings,
    sized_batch,
    suite_entries,
    suite_settings,
)
from ampbench.cells import DataOptions
from ampbench.workloads import create_model
from ampbench.workloads.registry import get_spec


def _suite_config(memory_gib: float | None, preset: str = "tiny") -> RunConfig:
    """The GPU suite's plan as a run on this CPU would make it (the entries' settings on a GPU of ``memory_gib``):
    ``tiny`` presets, so the cells are checked without building paper-size models."""
    settings = tuple(entry_settings(e, memory_gib) for e in GPU_SUITE)
    targets = Targets(tuple(e.workload for e in GPU_SUITE), tuple(preset for _ in GPU_SUITE), settings=settings)
    return RunConfig(device="cpu", targets=targets, axes=Axes(precisions=("fp32", "amp-bf16", "master-bf16")))


def test_the_gpu_suite_is_the_models_people_train_at_their_sizes() -> None:
    """An ImageNet convnet at batch >= 128 channels-last, a BERT-size and a GPT-2-size transformer, a ViT, a UNet at
    256x256, an LSTM LM and a GEMM-bound MLP; every workload registered, every option one it takes."""
    by_name = {e.workload: e for e in GPU_SUITE}
    assert set(by_name) == {"resnet50", "vit", "bert", "gpt2", "unet", "lstm-lm", "wide-mlp"}
    assert by_name["resnet50"].batch >= 128 and by_name["resnet50"].memory_format == "channels_last"
    assert by_name["unet"].memory_format == "channels_last"
    for e in GPU_SUITE:
        assert set(dict(e.options)) <= set(get_spec(e.workload).options())
    params = {e.workload: sum(p.numel() for p in _meta(e).parameters()) for e in GPU_SUITE}
    assert 25e6 < params["resnet50"] < 26e6 and 86e6 < params["vit"] < 87e6 and 124e6 < params["gpt2"] < 125e6
    assert 109e6 < params["bert"] < 111e6 and 31e6 < params["unet"] < 32e6 and params["wide-mlp"] > 200e6


def _meta(e: object):  # type: ignore[no-untyped-def]
    import torch

    with torch.device("meta"):
        return create_model(e.workload, e.preset, **dict(e.options))  # type: ignore[attr-defined]


def test_each_entrys_batch_layout_and_options_reach_its_cells_and_its_closing_baseline() -> None:
    config = _suite_config(80.0)
    cells = config.cells()
    for e in GPU_SUITE:
        mine = [c for c in cells if c.workload == e.workload]
        assert len(mine) == 4 and sum(c.closing for c in mine) == 1  # (3 modes + fp32 again)
        assert {c.batch_size for c in mine} == {e.batch}
        assert {c.execution.memory_format for c in mine} == {e.memory_format or "contiguous"}
        assert {c.data.options for c in mine} == {tuple(sorted(e.options))}
    assert config.identity()["settings"]  # (a run of the suite resumes only as the suite)


@pytest.mark.parametrize("gib", [16.0, 24.0, 40.0, 80.0, 141.0])
def test_a_gpu_with_less_memory_trains_each_entry_at_a_proportionally_smaller_batch(gib: float) -> None:
    for e in GPU_SUITE:
        b = sized_batch(e.batch, gib)
        if gib >= REFERENCE_GIB:
            assert b == e.batch
        else:
            assert 1 <= b <= e.batch * gib / REFERENCE_GIB and (b % 8 == 0 or b < 8)
            assert b >= min(e.batch * gib / REFERENCE_GIB - 8, 8)  # (the largest multiple of 8 under it)
    assert sized_batch(256, None) == 256  # (not a GPU: as given)


def test_what_the_user_gives_wins_over_the_suite() -> None:
    """--batch-size, --memory-format and -o keep their meaning: the suite sets only what the user left open."""
    entries = suite_entries([], None, "cuda")
    assert entries == GPU_SUITE
    cpu = suite_settings(entries, None, batch_given=True, format_given=True)
    assert all(s.batch is None and s.memory_format is None for s in cpu) and cpu[5].options == (("vocab", 100_000),)
    named = suite_entries(["bert"], "paper", "cuda")
    assert named[0].batch is None and entry_settings(named[0], 80.0) == EntrySettings()  # (a named target: nothing)
    lstm = next(e for e in GPU_SUITE if e.workload == "lstm-lm")
    config = RunConfig(device="cpu", targets=Targets(("lstm-lm",), ("tiny",), settings=(entry_settings(lstm, 80.0),)),
                       data=DataOptions(options=(("vocab", 300),)), axes=Axes(precisions=("fp32",)))
    assert {c.data.options for c in config.cells()} == {(("vocab", 300),)} and config.cells()[0].batch_size == 128


def test_every_entry_is_predicted_gpu_bound_in_amp_on_an_h100() -> None:
    """The suite answers "how much faster" only where the GPU, not the launch queue, sets the step: each entry at its
    batch and layout, amp-bf16 on an H100 SXM (ampbench predict's trace and cost, as `ampbench predict --gpu
    h100-sxm` prices the suite), bound by compute or memory, not launch."""
    from ampbench.cells import DataOptions
    from ampbench.measure.gpus import lookup
    from ampbench.predict.cost import price
    from ampbench.predict.trace import trace_step
    from ampbench.workloads import build_target
    from ampbench.workloads.factory import build_meta

    gpu = lookup("h100-sxm")
    for e in GPU_SUITE:
        data = DataOptions(options=tuple(sorted(e.options)))
        wl = build_meta(lambda e=e, data=data: build_target(e.workload, None, e.preset, data, 0, preset_given=False))
        cost = price(trace_step(wl, "amp-bf16", e.batch, channels_last=e.memory_format == "channels_last"), gpu,
                     tf32=False)  # (what predict_target prices a row from)
        assert cost.bound in ("compute", "memory"), (e.workload, cost.time_split)
        assert cost.host_s < cost.gpu_s, e.workload  # (the host issues its ops faster than the GPU runs them)


def test_a_workload_named_on_a_gpu_runs_at_the_size_people_train_it() -> None:
    """`--workloads resnet50` on a GPU timed a 64-px ResNet of 2.3M parameters (launch-bound: "no mode helps"); a
    named workload without --preset is its GPU suite entry there (batch, layout, options), its paper preset outside
    the suite, small on a CPU; with --preset, that preset and nothing else."""
    resnet = next(e for e in GPU_SUITE if e.workload == "resnet50")
    lstm = next(e for e in GPU_SUITE if e.workload == "lstm-lm")
    on_gpu = suite_entries(["resnet50", "mnist-cnn", "lstm-lm", "hf:bert"], None, "cuda:0")
    assert on_gpu == (resnet, SuiteEntry("mnist-cnn", "paper"), lstm, SuiteEntry("hf:bert", "paper"))
    assert suite_entries(["resnet50", "hf:bert"], None, "cpu") == (SuiteEntry("resnet50", "small"),
                                                                   SuiteEntry("hf:bert", "small"))
    assert suite_entries(["resnet50"], "small", "cuda") == (SuiteEntry("resnet50", "small"),)
    settings = suite_settings(on_gpu, 40.0)
    assert settings[0] == EntrySettings(sized_batch(256, 40.0), "channels_last") and settings[1] == EntrySettings()
    assert settings[2].options == (("vocab", 100_000),)
    assert suite_settings(suite_entries(["resnet50"], None, "cpu"), None) == ()  # (a CPU run's identity as it was)


def test_predict_prices_a_named_workload_at_the_size_run_measures_on_a_gpu() -> None:
    from ampbench.predict.config import PredictConfig

    config = PredictConfig.from_strings(gpu="h100-sxm", workloads="resnet50", precisions="amp-bf16")
    assert [t.preset for t in config.targets] == ["paper"]
    assert config.settings == (EntrySettings(256, "channels_last"),)
    assert config.notes[0].startswith("no --preset: resnet50 at paper, batch 256, channels_last -- the size people "
                                      "train it at")  # (the console says what was taken for the user)
    small = PredictConfig.from_strings(gpu="h100-sxm", workloads="resnet50", preset="small", precisions="amp-bf16")
    assert [t.preset for t in small.targets] == ["small"] and small.settings == () and small.notes == ()


def test_the_run_says_what_a_gpu_took_for_workloads_named_without_a_preset() -> None:
    """The run's header line and predict's note are one text; nothing on a CPU, with --preset, or without names."""
    from ampbench.bench.suites import named_note

    assert named_note(["resnet50", "mnist-cnn"], None, "cuda:0") == (
        "no --preset: resnet50 at paper, batch 256, channels_last; mnist-cnn at paper -- the size people train them at, "
        "as ampbench run on a GPU measures them (--preset small: the size a CPU runs in seconds)")
    assert named_note(["resnet50"], None, "cuda", batch_given=True).startswith(
        "no --preset: resnet50 at paper, channels_last -- the size people train it at")
    assert named_note(["resnet50", "mnist-cnn"], None, "cuda", batches=[sized_batch(256, 40.0), None]) == (
        "no --preset: resnet50 at paper, batch 136, channels_last; mnist-cnn at paper -- the size people train them at, "
        "as ampbench run on a GPU measures them (--preset small: the size a CPU runs in seconds)")  # (a 40 GiB GPU's)
    assert named_note(["resnet50"], None, "cpu") is None and named_note(["resnet50"], "paper", "cuda") is None
    assert named_note([], None, "cuda") is None
