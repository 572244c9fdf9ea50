"""Predictions against published single-GPU results (NVIDIA DeepLearningExamples: ResNet-50 on an A100 80GB and a
V100 16GB, BERT-large on an A100): the goal is the AMP speedup within 20% of the published one and samples/s within
35%, with constants no reference was fitted to.

ResNet-50's speedup on the A100 misses the 20% goal (predicted 1.98x, published 2.63x: -25%); the test says so with a
strict xfail (it fails the suite the day the model meets the goal, so the docs' error table gets updated). The same
model on the V100 (fp32 without Tensor Cores, batch 112, against AMP at 256) is within 2%."""

from __future__ import annotations

import pytest

from ampbench.predict.references import REFERENCES, predicted
from ampbench.predict.trace import trace_step
from ampbench.workloads.factory import build_meta

_cache: dict[str, dict[str, float]] = {}


def _id(ref) -> str:
    return f"{ref.name.split(',')[0].split()[0]}-{ref.gpu}"


def _predicted(ref) -> dict[str, float]:
    if _id(ref) not in _cache:
        _cache[_id(ref)] = predicted(ref)
    return _cache[_id(ref)]


@pytest.mark.parametrize("ref", REFERENCES, ids=_id)
def test_samples_per_second_within_35_percent_of_the_published(ref) -> None:
    for precision, published in ref.samples_per_s.items():
        predicted = _predicted(ref)[precision]
        assert abs(predicted / published - 1) <= 0.35, (ref.name, precision, predicted, published)


@pytest.mark.parametrize("ref", [
    pytest.param(REFERENCES[0], id=_id(REFERENCES[0]), marks=pytest.mark.xfail(
        strict=True, reason="predicted 1.98x vs 2.63x published (-25%): the A100's TF32 step predicted too fast, its "
        "AMP step too slow (docs/predict.md)")),
    *(pytest.param(r, id=_id(r)) for r in REFERENCES[1:])])
def test_amp_speedup_within_20_percent_of_the_published(ref) -> None:
    p = _predicted(ref)
    predicted = p["amp-fp16"] / p[ref.baseline]
    assert abs(predicted / ref.speedup("amp-fp16") - 1) <= 0.20, (ref.name, predicted, ref.speedup("amp-fp16"))


def test_the_reference_models_are_the_published_sizes() -> None:
    """ResNet-50: 25.6 M parameters, 4.1 G multiply-adds a 224x224 image forward; BERT-large: 335 M + the heads."""
    import torch

    from ampbench.predict.references import BertPretraining, ResNet50, resnet50_workload

    with torch.device("meta"):
        rn, bert = ResNet50(), BertPretraining()
    assert sum(p.numel() for p in rn.parameters()) == 25_557_032
    assert 334e6 < sum(p.numel() for p in bert.parameters()) < 338e6
    trace = trace_step(build_meta(resnet50_workload), "fp32", 256)
    forward = sum(o.flops for o in trace.ops if o.phase == "forward") / 256
    assert forward == pytest.approx(2 * 4.1e9, rel=0.02)
