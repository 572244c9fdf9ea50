"""``predict --strategy fsdp`` over several machines against published FSDP2 throughput (torchtitan's Llama 3 8B on 64
A100s, :mod:`predict_checks.fsdp_references`; nothing fitted on it): within 15%. Misses are strict xfails."""

from __future__ import annotations

import functools

import pytest
from predict_checks import fsdp_references as ref

pytest.importorskip("transformers")


@functools.cache
def _rows() -> dict[str, ref.FsdpRow]:
    """The rows, traced once a process when a test asks (not while collecting)."""
    return {r.checkpointing: r for r in ref.rows()}


def test_each_decoder_layer_is_a_unit_and_the_bytes_are_runs_count() -> None:
    """Recomputed from the model's sizes: the root (embedding 128,256 x 4,096, output head the same, final norm)
    all-gathered once in bf16, each of the 32 layers twice (resharded after forward), every gradient reduce-scattered
    in fp32; a rank sends 63/64 of each."""
    c = ref.cost(32)
    assert c.units == 33
    root = 2 * 128256 * 4096 + 4096
    layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096  # (q, o; k, v; the MLP; 2 norms)
    numel = root + 32 * layer
    assert ref._trace(32).fsdp.numel == numel
    assert c.comm_bytes == int(63 / 64 * (root * 2 + 2 * 32 * layer * 2 + numel * 4))


def test_the_network_costs_what_one_machine_does_not_pay() -> None:
    one, eight = ref.cost(32, nodes=1), ref.cost(32)
    assert one.exposed_s < 0.1 * one.step_s  # (NVLink: the blocks' collectives hide behind their neighbours)
    assert eight.exposed_s > one.exposed_s and eight.step_s > one.step_s
    for r in _rows().values():
        assert r.predicted_tokens_s == pytest.approx(ref.SEQ / eight.step_s)
        assert r.one_node_tokens_s == pytest.approx(ref.SEQ / one.step_s)


@pytest.mark.parametrize("checkpointing", [pytest.param(k, marks=pytest.mark.xfail(strict=True, reason=(
    "predicted 2,443 tokens/s against 2,973 and 2,904 (-18%, -16%): on the assumed network (one HDR 200 Gb/s NIC a "
    "GPU at 80% bus efficiency: 20 GB/s) a layer's collectives take 86 ms against its 68 ms of compute, and the root's "
    "all-gather and reduce-scatter (1.05 billion parameters) 0.3 s more; the published notes do not name their "
    "network"))) for k in ref.PUBLISHED])
def test_fsdp_over_eight_machines_within_15_percent_of_the_published(checkpointing: str) -> None:
    r = _rows()[checkpointing]
    assert abs(r.error) <= ref.GOAL, (r.predicted_tokens_s, r.tokens_s)
