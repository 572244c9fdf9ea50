"""Compiled predictions against published torch.compile gains (Hugging Face Transformers' inference guide: ViT, BEiT,
ConvNeXt-large and ResNet-50 with and without ``torch.compile`` on an A100, a V100 and a T4; nothing fitted on them,
:mod:`ampbench.predict.compile_references`). Checked where the GPU sets the published latency (its eager figure at
least twice the model's at batch 1): the predicted gain (eager over compiled) within 5% of the published one. The
misses are strict xfails, so a fix shows."""

from __future__ import annotations

import pytest

from ampbench.predict.compile_references import GAIN_GOAL, PUBLISHED, checked, rows

ROWS = {(r.gpu, r.model, r.batch): r for r in rows()}
CHECKED = sorted(ROWS)
MISSED = {("A100", "convnext", 16), ("V100", "convnext", 4), ("V100", "convnext", 16), ("T4", "convnext", 4),
          ("T4", "convnext", 16)}
"""ConvNeXt-large: published 6-13% faster compiled, predicted 1-2% (its elementwise work is 7% of the predicted GPU
time: what the rest of the gain is -- a faster depthwise convolution in the compiled graph's layout? -- is not known)."""


def test_the_checked_rows_are_chosen_by_the_published_figures_alone() -> None:
    assert sum(len(m) for m in PUBLISHED.values()) == 36
    assert len(CHECKED) == 17 and all(r.checked for r in ROWS.values())
    assert sum(checked(g, m, b) for (g, b), models in PUBLISHED.items() for m in models) == 17
    assert all(batch > 1 for _, _, batch in CHECKED)
    assert ("A100", "resnet", 16) not in CHECKED  # (7.0 ms at 16 against 6.5 at 1: its host's time, not the GPU's)


@pytest.mark.parametrize("key", [pytest.param(k, marks=pytest.mark.xfail(strict=True, reason="ConvNeXt's gain"))
                                 if k in MISSED else k for k in CHECKED], ids=lambda k: f"{k[0]}-{k[1]}-b{k[2]}")
def test_the_predicted_compile_gain_is_within_5_percent_of_the_published(key: tuple[str, str, int]) -> None:
    r = ROWS[key]
    assert abs(r.gain_error) <= GAIN_GOAL, (r.predicted_gain, r.gain)


def test_compiling_never_predicts_a_slower_forward() -> None:
    for r in ROWS.values():
        assert r.predicted_compiled_ms <= r.predicted_eager_ms
