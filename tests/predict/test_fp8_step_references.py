"""The fp8 modes' whole training step against published float8 training gains (torchao's float8 README: torchtitan's
Llama3-8B on 8 H100s, :mod:`predict_checks.fp8_step_references`; nothing fitted on them): the predicted gain
(tokens/s over bf16's) within 15% of the published one. Misses are strict xfails, so a fix shows."""

from __future__ import annotations

import functools

import pytest
from predict_checks import fp8_step_references as ref

from ampbench.precision.fp8 import torchao_problem

PROBLEM = torchao_problem("fp8 step references")
pytestmark = pytest.mark.skipif(PROBLEM is not None, reason=str(PROBLEM))


@functools.cache
def _rows() -> dict[str, ref.Fp8StepRow]:
    """The rows, traced once a process when a test asks (not while collecting)."""
    return {r.precision: r for r in ref.rows()}


@pytest.mark.parametrize("precision", ["amp-bf16", "fp8-tensorwise"])
def test_a_step_is_its_first_layer_plus_what_each_further_layer_adds(precision: str) -> None:
    one, two, three = (ref.gpu_step_s(precision, n) for n in (1, 2, 3))
    assert three - two == pytest.approx(two - one, rel=1e-6)
    assert ref.step_s(precision) == pytest.approx(one + 31 * (two - one))


def test_every_linear_layer_but_the_output_head_runs_in_fp8_as_torchtitan_converts_them() -> None:
    gemms = [o for o in ref._trace("fp8-tensorwise", 1).ops if o.gemm is not None]
    assert sum(o.dtype == "fp8" for o in gemms) == 7 * 3  # (q, k, v, o, gate, up, down: forward, dgrad, wgrad)
    head = [o for o in gemms if o.dtype != "fp8"]
    assert len(head) == 3 and all(128256 in o.gemm for o in head)  # (the output head's three, in bf16)
    assert all(o.dtype == "bf16" for o in ref._trace("amp-bf16", 1).ops if o.gemm is not None)


def test_bf16_row_is_the_baseline_and_every_figure_is_the_published_one() -> None:
    assert _rows()["amp-bf16"].gain == _rows()["amp-bf16"].predicted_gain == 1.0
    assert {p: r.tokens_s for p, r in _rows().items()} == ref.PUBLISHED
    for r in _rows().values():  # (tokens per second per GPU from the step time: one GPU's 8,192 tokens)
        assert r.predicted_tokens_s == pytest.approx(ref.SEQ / ref.step_s(r.precision))


@pytest.mark.parametrize("precision", ["fp8-tensorwise", "fp8-rowwise"])  # (rowwise was 1.29x predicted against 1.10x
# priced from the model alone; 1.19x from the H200's measured kernels: its bf16 GEMMs and casts there set the level --
# its own rowwise GEMM is still priced as tensorwise's, pytorch#147971, not modelled)
def test_the_predicted_fp8_gain_is_within_15_percent_of_the_published(precision: str) -> None:
    r = _rows()[precision]
    assert abs(r.gain_error) <= ref.GAIN_GOAL, (r.predicted_gain, r.gain)
