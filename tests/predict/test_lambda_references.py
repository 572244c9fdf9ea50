"""One model on twelve GPUs (Lambda's published ResNet-50 training throughput, FP32 and AMP; held out, nothing fitted
on it): the speed of each GPU over the V100's within 20% in each precision, and the AMP speedup on each GPU within 15%.
Misses are strict xfails that say by how much, so a fix shows (and docs/predict.md's table gets updated).

Device: none; predictions beside published measurements, the same on every machine."""

from __future__ import annotations

import pytest
from predict_checks import lambda_references as lam

from ampbench.measure.gpus import lookup

OTHERS = [r.gpu for r in lam.ROWS if r.gpu != lam.BASELINE]

_GEFORCE = ("the GeForce cards' AMP predicted too slow while the workstation cards of their chips are within 8% "
            "(A6000 -8%, 6000 Ada -1%): the RTX 3090 and the A6000, one GA102, ran within 1% of each other (905 and 916 "
            "images/s), where the model, pricing the GeForce's fp16 Tensor Cores at their fp32-accumulate rate -- half "
            "the workstation card's (GA102/AD102 whitepapers) --, has the 3090 13% slower")
_A100 = ("the A100's NCHW AMP step predicted too fast while its FP32 one is within 3%: its Tensor Core convolutions "
         "are priced from the H200's measured ones x its MAMF ratio (DeepLearningExamples' channels-last A100 AMP is "
         "+20% too); no A100 convolution or NCHW conversion was measured")
RATIO_MISSES: dict[tuple[str, str], str] = {
    ("quadro-rtx-8000", "fp32"): "+27%: its FP32 step predicted 32% too fast, its AMP one 13% -- not explained (a "
                                 "Turing card at its datasheet boost clock: its sustained clock under a 260-295 W cap "
                                 "is the first suspect; only <= 75 W cards' clocks are modelled)",
    ("rtx-3090", "amp-fp16"): f"-24%: {_GEFORCE}",
    ("rtx-4090", "amp-fp16"): f"-25%: {_GEFORCE}",
    ("a100-80gb-pcie", "amp-fp16"): f"+24%: {_A100}",
    ("a100-80gb", "amp-fp16"): f"+27%: {_A100}",
    # (h100-sxm amp-fp16 was +24% -- predicted 3,524 AMP images/s against 2,616 -- until its NCHW batch norms were
    # priced at the H200's measured NCHW kernels, 1.9-2.5x its channels-last ones in half precision, not at a mean of
    # both layouts: met, +7%, 2,968 images/s; Lambda's own H100 SXM row is 6% below three other vendors' runs of the
    # same benchmark, 2,776-2,791 AMP images/s)
}
SPEEDUP_MISSES: dict[str, str] = {
    "quadro-rtx-8000": "-15.5% (2.01x against 2.38x): its FP32 step predicted 32% too fast (its FP32 miss below), which "
                       "understates the AMP speedup; -14.6% before a Tensor Core stem was priced at 8 padded channels "
                       "(the lent H200's 3-channel stem ran 2.7x its unpadded price), which slowed its AMP step 1%",
    "a100-40gb-pcie": f"+25% (1.99x against 1.58x): {_A100}",
    "a100-80gb-pcie": f"+35% (2.03x against 1.51x): {_A100}",
    "a100-80gb": f"+37% (2.03x against 1.48x): {_A100}",
    "rtx-4090": f"-18% (1.48x against 1.80x): {_GEFORCE}",
}


def test_the_table_is_the_published_one() -> None:
    """An oracle on the transcription: the ratios the predict issue quoted from this table (RTX 3090 1.09x, RTX 4090
    1.56x, H100 SXM 3.14x the V100's AMP images/s), every GPU in our catalogue, each batch its memory size's config."""
    base = lam.row(lam.BASELINE).amp
    assert [round(lam.row(g).amp / base, 2) for g in ("rtx-3090", "rtx-4090", "h100-sxm")] == [1.09, 1.56, 3.14]
    for r in lam.ROWS:
        card = lookup(r.gpu)
        assert card is not None and card.memory_gib is not None, r.gpu
        assert abs(card.memory_gib - r.memory_gb) <= 0.1 * r.memory_gb, (r.gpu, card.memory_gib)
        assert r.batch("amp-fp16") >= r.batch("fp32") and r.amp > r.fp32


@pytest.mark.parametrize("precision", lam.PRECISIONS)
@pytest.mark.parametrize("gpu", [pytest.param(g, id=g) for g in OTHERS])
def test_a_gpu_over_the_v100_within_20_percent(gpu: str, precision: str, request: pytest.FixtureRequest) -> None:
    if (gpu, precision) in RATIO_MISSES:
        request.applymarker(pytest.mark.xfail(strict=True, reason=RATIO_MISSES[gpu, precision]))
    assert abs(lam.ratio_error(gpu, precision)) <= 0.20, lam.ratio_error(gpu, precision)


@pytest.mark.parametrize("gpu", [pytest.param(r.gpu, id=r.gpu) for r in lam.ROWS])
def test_the_amp_speedup_on_each_gpu_within_15_percent(gpu: str, request: pytest.FixtureRequest) -> None:
    if gpu in SPEEDUP_MISSES:
        request.applymarker(pytest.mark.xfail(strict=True, reason=SPEEDUP_MISSES[gpu]))
    assert abs(lam.speedup_error(gpu)) <= 0.15, lam.speedup_error(gpu)



MISORDERED = {"fp32": [("rtx-4090", "rtx-6000-ada")],
              "amp-fp16": [("a100-80gb-pcie", "h100-pcie"), ("a100-80gb", "h100-pcie"), ("rtx-4090", "rtx-6000-ada")]}
"""Pairs published >= 10% apart that the predictions order the other way: the 4090 ran 11% (FP32) and 14% (AMP)
faster than the 6000 Ada, predicted 4% and 8% slower -- priced at its GeForce Tensor Core rates (TF32 and fp16 with
fp32 accumulation: half the 6000 Ada's); the 6000 Ada's 300 W against the 4090's 450 W at the same boost clock is the
likely reason it runs slower than its rates. In AMP the RTX 3090 (published 905 images/s, 39% above the Quadro RTX
8000's 651) is predicted 0.1% above it (730 against 729; it was 0.3% below until the Tensor Core convolutions' share
was fitted on the H200's fourth sweep): ordered by a hair, the GeForce AMP miss above and the Quadro's own +12%
between them. The H100 PCIe (published
1,866 AMP images/s, 18-22% above the two A100 80GB's 1,527 and 1,582) is predicted 8-13% below them (1,855 against
2,013 and 2,130) since its NCHW batch norms are priced at the H200's measured NCHW kernels (it was 2,171, +16%; now
-1%): the A100s' own NCHW AMP miss (+24-26%, above; no Ampere kernel table prices their NCHW batch norms) is what
orders them wrong. Exact: a fix or a new miss fails here (and the docs' table says so)."""


@pytest.mark.parametrize("precision", lam.PRECISIONS)
def test_which_gpu_is_faster_is_answered_as_published(precision: str) -> None:
    """Every pair of the twelve GPUs published at least 10% apart, ordered by the predictions as published, but the
    known misses; checked by hand on the published figures: the pair count, and that each pair is that far apart."""
    wrong, pairs = lam.ordering(precision)
    assert wrong == MISORDERED[precision]
    by_hand = sum(1 for i, a in enumerate(lam.ROWS) for b in lam.ROWS[i + 1:]
                  if max(a.published(precision), b.published(precision))
                  >= 1.10 * min(a.published(precision), b.published(precision)))
    assert pairs == by_hand and pairs >= 55
