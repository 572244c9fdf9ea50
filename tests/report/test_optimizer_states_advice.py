"""The advisor and optimizer-state precision: the mode is chosen among the optimizers as built (a state row is not
its mode), and a state is advised for memory only -- "fits batch N instead of M" -- and only with its own parity
verdict against fp32 with the optimizer as built."""

from __future__ import annotations

import pytest

from ampbench.report.advisor import advise
from ampbench.report.optimizer_states import state_advice
from ampbench.store import derive

from .test_advisor import _row

FP32_LOSSES = [1.00, 1.02, 0.98]


def test_a_state_row_never_stands_for_its_mode() -> None:
    """amp-bf16 with 8bit states ran fastest (a noise-free 3x); the mode advised is picked among the optimizers as
    built, and its evidence is its own row's."""
    rows = derive([_row("fp32", 100.0, 1000), _row("amp-bf16", 120.0, 900, speedup_vs_fp32_noise=0.01),
                   _row("amp-bf16", 300.0, 600, optimizer_state="8bit", speedup_vs_fp32_noise=0.01)])
    a = advise(rows)
    assert a.recommended == "amp-bf16" and a.evidence.startswith("amp-bf16: 1.20x faster than fp32")
    assert "3.00x" not in a.evidence


def test_a_state_is_advised_for_memory_only_with_its_parity_verdict() -> None:
    base = [_row("fp32", 100.0, 1000, verdict_losses=FP32_LOSSES, max_batch=500),
            _row("amp-bf16", 150.0, 800, verdict_losses=[1.01, 1.0, 1.02], max_batch=640)]
    parity = _row("amp-bf16", 140.0, 600, optimizer_state="8bit", verdict_losses=[1.0, 1.01, 1.0], max_batch=900,
                  optimizer_states="8bit x24, fp32 x38")
    a = advise(derive([*base, parity]))
    assert a.recommended == "amp-bf16"
    assert a.optimizer_states == ("optimizer states: amp-bf16 with 8bit states fits batch 900 instead of 640, final "
                                  "loss within fp32's seed spread (8bit x24, fp32 x38)")
    below = {**parity, "converge": {"final_losses": [0.5, 0.5, 0.5], "diverged": [False] * 3}}
    assert advise(derive([*base, below])).optimizer_states == (
        "optimizer states: amp-bf16 with 8bit states fits batch 900 instead of 640, final loss 0.5, below fp32's 1 by "
        "more than its seed spread: it did not train as fp32 does (8bit x24, fp32 x38)")
    worse = {**parity, "converge": {"final_losses": [2.0, 2.1, 2.2], "diverged": [False] * 3}}
    assert "not advised: its convergence was worse" in advise(derive([*base, worse])).optimizer_states
    no_fp32 = derive([base[1], parity])  # (the README's example ran amp-bf16 and pure-bf16: "was no-baseline")
    assert advise(no_fp32).optimizer_states.endswith(
        "not advised: its convergence has no fp32 baseline to be judged by (add fp32 to --precisions)")
    unchecked = {k: v for k, v in parity.items() if k != "converge"}
    assert "not advised: run --measure converge" in advise(derive([*base, unchecked])).optimizer_states


def test_without_a_max_batch_the_saving_is_the_compared_memory_and_a_small_one_is_not_advised() -> None:
    rows = derive([_row("fp32", 100.0, 1000), _row("fp32", 95.0, 700, optimizer_state="4bit"),
                   _row("fp32", 98.0, 980, optimizer_state="8bit")])
    line = state_advice(rows, "fp32")
    assert line.startswith("optimizer states: fp32 with 4bit states takes 30% less memory than fp32 with its optimizer")
    assert "not advised: run --measure converge" in line
    tiny = derive([_row("fp32", 100.0, 1000), _row("fp32", 98.0, 980, optimizer_state="8bit")])
    assert state_advice(tiny, "fp32") == ("optimizer states: none saves memory here (fp32 8bit: takes 2% less memory "
                                          "than fp32 with its optimizer as built)")
    assert state_advice(derive([_row("fp32", 100.0, 1000)]), "fp32") is None


def test_a_max_batch_search_stopped_at_its_limit_is_no_batch_to_compare() -> None:
    """Both searches stopped at --maxbatch-limit: "fits batch 65,536 instead of 65,536" compared two lower bounds and
    said the state saved nothing; the compared memory says what it saves."""
    at_limit = dict(max_batch=65536, max_batch_limit_hit=True)
    rows = derive([_row("fp32", 100.0, 1000, **at_limit), _row("fp32", 95.0, 700, optimizer_state="4bit", **at_limit)])
    line = state_advice(rows, "fp32")
    assert line.startswith("optimizer states: fp32 with 4bit states takes 30% less memory than fp32 with its optimizer")
    assert "65,536" not in line


def test_fp32_with_a_state_is_judged_against_fp32_as_built_not_called_the_baseline() -> None:
    rows = derive([_row("fp32", 100.0, 1000, verdict_losses=FP32_LOSSES),
                   _row("fp32", 90.0, 800, optimizer_state="8bit", verdict_losses=[1.6, 1.7, 1.65])])
    verdicts = {r.get("optimizer_state"): r["converge_verdict"] for r in rows}
    assert verdicts == {None: "baseline", "8bit": "worse"}
    assert rows[1]["memory_saving_vs_fp32"] == pytest.approx(0.2) and rows[1]["speedup_vs_fp32"] == pytest.approx(0.9)
