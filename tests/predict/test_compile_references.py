"""Compiled predictions against published torch.compile gains (Hugging Face Transformers' inference guide: ViT, BEiT,
ConvNeXt-large and ResNet-50 with and without ``torch.compile`` on an A100, a V100 and a T4; nothing fitted on them,
:mod:`predict_checks.compile_references`). Checked where the GPU sets the published latency (its eager figure at
least twice the model's at batch 1): the predicted gain (eager over compiled) within 5% of the published one. The
misses are strict xfails, so a fix shows."""

from __future__ import annotations

import functools

import pytest
import torch
from predict_checks.compile_references import GAIN_GOAL, PUBLISHED, CompileRow, Torch201Linear, checked, rows
from torch import nn

from ampbench.measure.syncs import HostSyncCounter

CHECKED = sorted((g, m, b) for (g, b), models in PUBLISHED.items() for m in models if checked(g, m, b))
"""The rows checked, from the published figures alone (the parametrization: nothing traced while collecting)."""


@functools.cache
def _rows() -> dict[tuple[str, str, int], CompileRow]:
    """The checked rows, traced once a process when a test asks (not while collecting)."""
    return {(r.gpu, r.model, r.batch): r for r in rows()}


MISSED = {
    ("T4", "convnext", 4): "ConvNeXt's gain",
    ("V100", "resnet", 16): "predicted 1.16x against 1.23x (-5.4%): the V100's fp32 convolutions priced 21% slower "
                            "eager than published (18.0 ms against 14.9), which dilutes the compiled gain; it was "
                            "within 5% before the constants were fitted on eight GPUs' kernels instead of four",
}
"""ConvNeXt-large on the T4 at batch 4: published 13% faster compiled, predicted 4.5% (its batch 16 is met, 9% vs
5.3%). Met since: its 72 eager bias passes under torch 2.0.1 (:class:`Torch201Linear`) and its depthwise convolutions
priced as direct kernels (they were priced as one-column GEMMs, 10-60x over)."""


def test_the_checked_rows_are_chosen_by_the_published_figures_alone() -> None:
    assert sum(len(m) for m in PUBLISHED.values()) == 36
    assert len(CHECKED) == 17 and sorted(_rows()) == CHECKED and all(r.checked for r in _rows().values())
    assert sum(checked(g, m, b) for (g, b), models in PUBLISHED.items() for m in models) == 17
    assert all(batch > 1 for _, _, batch in CHECKED)
    assert ("A100", "resnet", 16) not in CHECKED  # (7.0 ms at 16 against 6.5 at 1: its host's time, not the GPU's)


@pytest.mark.parametrize("key", [pytest.param(k, marks=pytest.mark.xfail(strict=True, reason=MISSED[k]))
                                 if k in MISSED else k for k in CHECKED], ids=lambda k: f"{k[0]}-{k[1]}-b{k[2]}")
def test_the_predicted_compile_gain_is_within_5_percent_of_the_published(key: tuple[str, str, int]) -> None:
    r = _rows()[key]
    assert abs(r.gain_error) <= GAIN_GOAL, (r.predicted_gain, r.gain)


def test_compiling_never_predicts_a_slower_forward() -> None:
    for r in _rows().values():
        assert r.predicted_compiled_ms <= r.predicted_eager_ms


def _ops(fn) -> dict[str, int]:  # type: ignore[no-untyped-def]
    with HostSyncCounter() as counter:
        fn()
    return {k.split(".")[1]: v for k, v in counter.ops.items()}


@pytest.mark.parametrize("shape, fused", [((5, 8), True), ((2, 5, 8), True), ((2, 3, 5, 8), False)])
def test_torch_2_0_linear_is_addmm_for_2d_and_contiguous_3d_inputs_else_matmul_then_a_bias_add(
        shape: tuple[int, ...], fused: bool) -> None:
    layer = nn.Linear(8, 6)
    x = torch.randn(*shape)
    with torch.no_grad(), Torch201Linear():
        ops = _ops(lambda: layer(x))
        out = layer(x)
    torch.testing.assert_close(out, nn.functional.linear(x, layer.weight, layer.bias))  # (the same values)
    assert ("addmm" in ops) is fused and ("add_" in ops) is not fused
    with torch.no_grad(), Torch201Linear():  # a non-contiguous 3-D input takes the unfused path too
        assert "add_" in _ops(lambda: layer(torch.randn(5, 2, 8).transpose(0, 1)))
    with torch.no_grad():  # (today's torch: addmm for any contiguous input)
        assert "addmm" in _ops(lambda: layer(x))
