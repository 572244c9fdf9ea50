"""Predictions against published GPU measurements, with the predict issue's goals; where a goal is not met yet, a strict
xfail says by how much (it fails the suite the day the model meets it, so docs/predict.md's tables get updated).

1. Kernels: the constants are fitted on every measured kernel (NeuSight's fp32 kernels on 8 GPUs, OpenXLA's bf16 GEMMs
   on an H100 SXM, the lent H200's cuBLAS GEMMs): the committed ones are the fit's fixed point. Kernels check nothing.
2. Training steps (NeuSight's fp32 forward + backward of Hugging Face models on V100, A100, H100, L4): median |error|
   <= 10%, worst <= 25%, per GPU.
3. NVIDIA DeepLearningExamples' published AMP results at the batch and layout each used: the speedup within 15%,
   samples/s within 25%.

Device: none; the figures are predictions beside published measurements, the same on every machine."""

from __future__ import annotations

import functools
import statistics

import pytest
from predict_checks import (
    compile_references,
    error_bands,
    fit,
    kernel_tables,
    measured,
    neusight,
    xla,
)
from predict_checks.references import REFERENCES, predicted, resnet50_amp_a100_over_v100

from ampbench.predict.kernels import calibration
from ampbench.predict.trace import trace_step
from ampbench.workloads.factory import build_meta

pytestmark = pytest.mark.skipif(not neusight.ROOT.is_dir(), reason="references/neusight is not beside this checkout")


@functools.cache
def _kernel_cases() -> list[neusight.Case]:
    return neusight.kernel_cases() + xla.kernel_cases() + kernel_tables.gemm_cases()


def _kernel_errors() -> dict[tuple[str, str], fit.Errors]:
    return {(e.gpu, e.op_class): e for e in fit.errors(_kernel_cases(), calibration())}


def test_the_constants_are_where_the_fit_on_every_measured_kernel_settles() -> None:
    """The committed constants are where the fit settles: one more round of it from them, on the kernels it fits
    (every GPU's), moves none (the full fit, ``benchmarks/kernel_references.py --fit``, takes several)."""
    assert fit.fit_all(_kernel_cases(), calibration(), rounds=1, refine=True) == calibration()


@functools.cache
def _step_errors() -> dict[str, list[neusight.StepError]]:
    pytest.importorskip("transformers")
    out: dict[str, list[neusight.StepError]] = {}
    for e in neusight.step_errors():
        out.setdefault(e.step.gpu, []).append(e)
    return out


STEP_GPUS = ("v100-32gb-pcie", "a100-80gb-pcie", "h100-sxm", "l4")
"""The GPUs NeuSight measured whole steps on."""
STEP_MISSES = {
    # (a100-80gb-pcie was median 13%, worst 26%, too fast: met -- 8%, 22% -- since the constants are fitted on every
    # GPU's kernels; h100-sxm was median 24%, worst 34%, too fast: met -- 6%, 15% -- since Hopper is priced from the
    # lent H200's measured kernels, predict/calibration/h200.csv: kernels of another card of its architecture)
    "l4": "median 16%, worst 20%: predicted too slow, from the L4's own kernels as NeuSight published them "
          "(predict/calibration/l4.csv.gz: fp32 forwards, each timed alone); 28%, 53% from the fitted model",
}


@pytest.mark.parametrize("gpu", [pytest.param(g, marks=pytest.mark.xfail(strict=True, reason=STEP_MISSES[g]))
                                 if g in STEP_MISSES else g for g in STEP_GPUS])
def test_training_steps_median_within_10_and_worst_within_25_percent(gpu: str) -> None:
    errors = sorted(abs(e.error) for e in _step_errors()[gpu])
    median = errors[len(errors) // 2] if len(errors) % 2 else sum(errors[len(errors) // 2 - 1:len(errors) // 2 + 1]) / 2
    assert median <= 0.10 and errors[-1] <= 0.25, (gpu, errors)


_cache: dict[str, dict[str, float]] = {}


def _id(ref) -> str:
    return f"{ref.name.split(',')[0].split()[0]}-{ref.gpu}"


def _predicted(ref) -> dict[str, float]:
    if _id(ref) not in _cache:
        _cache[_id(ref)] = predicted(ref)
    return _cache[_id(ref)]


SAMPLES_MISSES: dict[str, str] = {  # (ResNet-50 on the A100 80GB, amp-fp16: +25.5% at the Tensor Core prior; +20%
    # since the Tensor Core constants are fitted on measured GEMMs and convolutions)
    # (held out since 2026-12-08, DLE's grouped-convolution networks: every cell predicted too fast -- no grouped
    # convolution is among the kernels fitted on, and the A100s and the V100 have no measured table of their own)
    "ResNeXt101-32x4d-v100-16gb": "FP32 +30% (190 img/s predicted, 147 published): the 32-group 3x3 convolutions' "
                                  "fp32 kernels priced too fast; AMP +5%",
    "SE-ResNeXt101-32x4d-a100-80gb": "AMP +25.3% (1,071 against 855), TF32 +15%",
    "SE-ResNeXt101-32x4d-v100-16gb": "FP32 +29% (170 against 132), AMP +15%",
    # (and DLE's EfficientNets: depthwise convolutions -- the farthest misses of all, every cell too fast)
    "EfficientNet-B0-a100-80gb": "TF32 +75% (1,887 img/s predicted, 1,078 published), AMP +30%",
    "EfficientNet-B0-v100-16gb": "FP32 +32% (867 against 655), AMP +24%",
    "EfficientNet-B4-a100-80gb": "TF32 +55% (244 against 157), AMP +76% (584 against 331)",
    "EfficientNet-B4-v100-16gb": "FP32 +27% (105 against 83); AMP +1%",
}
SPEEDUP_MISSES: dict[str, str] = {
    "ResNeXt101-32x4d-v100-16gb": "AMP over FP32 3.23x predicted, 3.99x published (-19%): FP32 predicted 30% too fast",
    "EfficientNet-B0-a100-80gb": "AMP over TF32 1.71x predicted, 2.31x published (-26%): TF32 predicted 75% too fast",
    "EfficientNet-B4-v100-16gb": "AMP over FP32 1.95x predicted, 2.46x published (-21%): FP32 predicted 27% too fast",
}


@pytest.mark.parametrize("ref", [pytest.param(r, id=_id(r), marks=pytest.mark.xfail(strict=True, reason=SAMPLES_MISSES[
    _id(r)])) if _id(r) in SAMPLES_MISSES else pytest.param(r, id=_id(r)) for r in REFERENCES])
def test_samples_per_second_within_25_percent_of_the_published(ref) -> None:
    for precision, published in ref.samples_per_s.items():
        p = _predicted(ref)[precision]
        assert abs(p / published - 1) <= 0.25, (ref.name, precision, p, published)


@pytest.mark.parametrize("ref", [pytest.param(r, id=_id(r), marks=pytest.mark.xfail(strict=True, reason=SPEEDUP_MISSES[
    _id(r)])) if _id(r) in SPEEDUP_MISSES else pytest.param(r, id=_id(r)) for r in REFERENCES])
def test_amp_speedup_within_15_percent_of_the_published(ref) -> None:
    p = _predicted(ref)
    speedup = p["amp-fp16"] / p[ref.baseline]
    assert abs(speedup / ref.speedup("amp-fp16") - 1) <= 0.15, (ref.name, speedup, ref.speedup("amp-fp16"))


# ---- across GPUs: one model in one setup on several GPUs, as ratios (what `predict --gpu a,b,c` compares) -----------
def _ratio_errors(x: str, y: str) -> list[float]:
    return neusight.pair_errors([e for es in _step_errors().values() for e in es], x, y)


PAIRS = list(neusight.STEP_PAIRS)
PAIR_MISSES = {  # (measured here; the per-GPU misses above, compounded)
    # (v100-32gb-pcie vs a100-80gb-pcie was median 15.6%, vs l4 29%, vs h100-sxm 15.6%: met -- 12.5%, 13.3%, 8.3% --
    # since the V100 PCIe's, the A100 PCIe's and the L4's own kernels as NeuSight published them price them, and the
    # V100 PCIe is taken for itself, not for the SXM2 card of other clocks; a100-80gb-pcie vs h100-sxm was median 16%,
    # the A100 too fast: met since the constants are fitted on every GPU)
    ("a100-80gb-pcie", "l4"): "median 26% (was 55%): the L4 too slow, the A100 too fast",
    ("h100-sxm", "l4"): "median 17% (was 31%): the L4 too slow",
}


@pytest.mark.parametrize("pair", [pytest.param(p, id="-vs-".join(p), marks=pytest.mark.xfail(strict=True, reason=PAIR_MISSES[p]))
                                  if p in PAIR_MISSES else pytest.param(p, id="-vs-".join(p)) for p in PAIRS])
def test_the_ratio_between_two_gpus_median_within_15_percent(pair: tuple[str, str]) -> None:
    errors = sorted(abs(r) for r in _ratio_errors(*pair))
    assert len(errors) >= 3
    assert statistics.median(errors) <= 0.15, (pair, [f"{r:.0%}" for r in errors])


def test_resnet50_amp_a100_over_v100_within_15_percent_of_the_published_ratio() -> None:
    """DeepLearningExamples' ResNet-50 v1.5 tables, one setup on two GPUs (AMP, batch 256, channels-last): A100 80GB
    2470 img/s over V100 16GB 1200 img/s. Met by a hair since the Tensor Core convolutions' share is fitted on the
    H200's fourth sweep (+14.6%, 2.36x against 2.06x; it was +15.1%): the A100's AMP step still 19% too fast."""
    predicted_ratio, published = resnet50_amp_a100_over_v100(_predicted)
    assert abs(predicted_ratio / published - 1) <= 0.15, (predicted_ratio, published)


def test_the_reference_models_are_the_published_sizes() -> None:
    """ResNet-50: 25.6 M parameters, 4.1 G multiply-adds a 224x224 image forward; BERT-large: 335 M + the heads."""
    import torch
    from predict_checks.references import BertPretraining, ResNet50, resnet50_workload

    with torch.device("meta"):
        rn, bert = ResNet50(), BertPretraining()
    assert sum(p.numel() for p in rn.parameters()) == 25_557_032
    assert 334e6 < sum(p.numel() for p in bert.parameters()) < 338e6
    trace = trace_step(build_meta(resnet50_workload), "fp32", 256)
    forward = sum(o.flops for o in trace.ops if o.phase == "forward") / 256
    assert forward == pytest.approx(2 * 4.1e9, rel=0.02)


def test_the_resnexts_are_dles() -> None:
    """ResNeXt101-32x4d: 44,177,704 parameters (timm's and pretrainedmodels' resnext101_32x4d), 8.0 G multiply-adds a
    224x224 image forward (published: 8.0 G); DLE's SE adds 1x1 convolutions C -> 16 -> C with biases to each of the 33
    blocks, 33 C + 16 parameters a block of C output channels (3 blocks of 256, 4 of 512, 23 of 1,024, 3 of 2,048)."""
    import torch
    from predict_checks.references import DLEResNeXt101, resnext_workload

    with torch.device("meta"):
        plain, se = DLEResNeXt101(), DLEResNeXt101(se=True)
    n = sum(p.numel() for p in plain.parameters())
    assert n == 44_177_704
    blocks = [256] * 3 + [512] * 4 + [1024] * 23 + [2048] * 3
    assert sum(p.numel() for p in se.parameters()) == n + sum(33 * c + 16 for c in blocks)
    assert sum(isinstance(m, torch.nn.Conv2d) and m.groups == 32 for m in plain.modules()) == 33
    trace = trace_step(build_meta(resnext_workload), "fp32", 128)
    forward = sum(o.flops for o in trace.ops if o.phase == "forward") / 128
    assert forward == pytest.approx(2 * 8.0e9, rel=0.03)


def test_the_efficientnets_are_dles() -> None:
    """EfficientNet-B0: 5,288,548 parameters and B4 19,341,616 (torchvision's efficientnet_b0 / _b4, the same blocks:
    SE to a quarter of each block's input channels); 16 and 32 depthwise convolutions; B0's forward 0.39 G
    multiply-adds at 224 pixels (published: 0.39 G)."""
    import torch
    from predict_checks.references import DLEEfficientNet, efficientnet_b0_workload

    with torch.device("meta"):
        b0, b4 = DLEEfficientNet(), DLEEfficientNet(1.4, 1.8, 0.4)
    assert sum(p.numel() for p in b0.parameters()) == 5_288_548
    assert sum(p.numel() for p in b4.parameters()) == 19_341_616
    for model, n in ((b0, 16), (b4, 32)):
        assert sum(isinstance(m, torch.nn.Conv2d) and m.groups == m.in_channels > 1 for m in model.modules()) == n
    trace = trace_step(build_meta(efficientnet_b0_workload), "fp32", 256)
    forward = sum(o.flops for o in trace.ops if o.phase == "forward" and (o.conv is not None or o.gemm)) / 256
    assert forward == pytest.approx(2 * 0.39e9, rel=0.05)


def test_the_step_references_rebuild_the_measured_models() -> None:
    """The Hugging Face models rebuilt from the source's configs have their published sizes: BERT-large 335 M
    (+ the pretraining heads), GPT-2 large 774 M, OPT-1.3B 1.3 B, GPT-3 2.7B (GPT-2 blocks); the source's "gpt3_xl"
    config is 24 layers of width 3072 (2.9 B), not GPT-3 XL's 1.3 B: it is rebuilt as the source ran it."""
    pytest.importorskip("transformers")
    import torch

    sizes = {"bert_large": (335e6, 340e6), "gpt2_large": (773e6, 776e6), "opt_13": (1.31e9, 1.32e9),
             "gpt3_xl": (2.87e9, 2.89e9), "gpt3_27": (2.65e9, 2.66e9)}
    for model, (lo, hi) in sizes.items():
        step = next(s for s in neusight.steps() if s.model == model)
        with torch.device("meta"):
            wl = neusight.step_workload(step)()
        n = sum(p.numel() for p in {id(p): p for p in wl.model.parameters()}.values())
        assert lo <= n <= hi, (model, n)


def test_the_committed_error_bands_are_the_references_errors_now() -> None:
    """predict/error_bands.json is what benchmarks/predict_references.py --write-bands writes from the errors above."""
    import json

    from ampbench.measure.gpus import predictable
    from ampbench.predict import bands

    dle = [(r.gpu, p, _predicted(r)[p] / published - 1, r.grouped) for r in REFERENCES
           for p, published in r.samples_per_s.items()]
    dense, grouped = ([(g, p, e) for g, p, e, k in dle if k == want] for want in (False, True))
    amp = [abs(e) for *_, e in dense]
    now = error_bands.compute(list(_kernel_errors().values()), [e for es in _step_errors().values() for e in es], amp,
                        {g.key: g for g in predictable()}, (*neusight.FIT_GPUS, *kernel_tables.GPUS),
                              list(measured.lent()),
                        compile_references.rows(), error_bands.published_steps(dense, list(measured.lent())), grouped)
    assert json.loads(json.dumps(now, sort_keys=True)) == json.loads(bands.BANDS_FILE.read_text())


def test_docs_predict_md_shows_these_tables() -> None:
    """docs/predict.md's error tables are what benchmarks/predict_references.py prints now (``--docs`` writes them)."""
    import importlib
    import sys
    from pathlib import Path

    benchmarks = Path(__file__).resolve().parents[2] / "benchmarks"
    sys.path.insert(0, str(benchmarks))
    try:
        script = importlib.import_module("predict_references")
    finally:
        sys.path.remove(str(benchmarks))
    lines, _, _ = script.amp_table(_predicted)
    tables = script.all_tables(list(_kernel_errors().values()), [e for es in _step_errors().values() for e in es], lines,
                               measured.lent(), predict=_predicted)
    text = script.DOCS.read_text()
    assert script.with_tables(text, tables) == text


# -- the real-scale GPU suite on the third H200 lease (benchmarks/results/h200/lease3): held out, nothing fitted on it
def _suite() -> tuple[measured.MeasuredStep, ...]:
    return measured.steps("h200/lease3")  # (cached: the bands' and the docs' tests above trace it in this process)


def test_the_real_scale_suites_steps_median_within_10_and_worst_within_25_percent() -> None:
    errors = [abs(s.error) for s in _suite()]
    assert len(errors) == 49
    assert statistics.median(errors) <= 0.10 and max(errors) <= 0.25, (statistics.median(errors), max(errors))


def test_the_real_scale_suites_amp_speedups_median_within_10_percent() -> None:
    """AMP over fp32 and over TF32, every pair of ok cells (ResNet-50's amp-fp16 diverged on that lease: 26 pairs);
    oracle: a pair by hand. Met since the H200's fourth sweep is its table: median 6.5% (was 10.2%; mean 8.1%, worst
    19%) -- its TF32 GEMMs with a transposed first operand (a Linear's weight gradient) run 1.5-1.9x the plain ones'
    time, which the third sweep had not measured: the transformers' TF32 steps were 6-19% too fast."""
    errors = measured.speedup_errors(_suite())
    assert len(errors) == 26
    cells = {(s.workload, s.precision): s for s in _suite()}
    amp, fp32 = cells[("vit", "amp-bf16")], cells[("vit", "fp32")]
    assert errors["vit amp-bf16/fp32"] == pytest.approx(
        (fp32.predicted_ms / amp.predicted_ms) / (fp32.measured_ms / amp.measured_ms) - 1)
    assert statistics.median(abs(e) for e in errors.values()) <= 0.10


def test_the_real_scale_suites_peak_memory_median_within_10_percent() -> None:
    assert statistics.median(abs(s.memory_error) for s in _suite()) <= 0.10


@pytest.mark.xfail(strict=True, reason="UNet fp32 -39 %: its fp32 step held 11,610 MiB more than its TF32 one, far "
                                       "beyond the workspaces the table's convolutions measured -- UNet's own first "
                                       "3x3 at its batch among them since the fourth sweep (-42 % before)")
def test_the_real_scale_suites_peak_memory_worst_within_15_percent() -> None:
    worst = max(_suite(), key=lambda s: abs(s.memory_error))
    assert abs(worst.memory_error) <= 0.15, f"{worst.name} {worst.memory_error:+.0%}"


def test_bf16_against_fp16_on_a_convnet_within_10_percent_of_the_measured() -> None:
    """The H200 ran UNet's amp-bf16 steps 0.86x as fast as amp-fp16 (cuDNN's bf16 convolutions); predicted from the
    measured kernel table, not at 1.00x. (ResNet-50's amp-fp16 diverged on that lease -- torch's fused SGD, fixed
    since -- so it has no pair there; the fourth lease's is checked below.)"""
    cells = {(s.workload, s.precision): s for s in _suite()}
    bf16, fp16 = cells[("unet", "amp-bf16")], cells[("unet", "amp-fp16")]
    measured_ratio = fp16.measured_ms / bf16.measured_ms
    predicted_ratio = fp16.predicted_ms / bf16.predicted_ms
    assert measured_ratio < 0.9 and abs(predicted_ratio / measured_ratio - 1) <= 0.10


# -- the fourth H200 lease's cells (benchmarks/results/h200/rest): held out, nothing fitted on them
def _fourth() -> tuple[measured.MeasuredStep, ...]:
    return measured.steps("h200/rest")  # (cached: the docs' and the bands' tests trace it in this process)


def test_the_fourth_leases_peak_memory_within_15_percent_checkpointed_and_accumulated_included() -> None:
    """18 cells: ResNet-50's fp16 modes, GPT-2 at 1,024 tokens, ResNet-50 NCHW at Lambda's batches, BERT-base
    checkpointed (blocks 2.5 GiB, selective 5.1) and accumulated (4 x 32): worst 6 %."""
    cells = _fourth()
    assert len(cells) == 18 and {s.checkpointing for s in cells} == {"off", "blocks", "selective"}
    assert {s.grad_accum for s in cells} == {1, 4}
    worst = max(cells, key=lambda s: abs(s.memory_error))
    assert abs(worst.memory_error) <= 0.15, f"{worst.name} {worst.memory_error:+.0%}"


def test_the_fourth_leases_steps_the_gpu_sets_median_within_10_and_worst_within_25_percent() -> None:
    """The 12 cells the prediction says the GPU sets (the launch-bound ones are the host's band's): median 6.4 %,
    worst 24 % (ResNet-50 NCHW amp-fp16 at batch 1,280, too fast)."""
    errors = [abs(s.error) for s in _fourth() if s.bound != "launch"]
    assert len(errors) == 12
    assert statistics.median(errors) <= 0.10 and max(errors) <= 0.25, (statistics.median(errors), max(errors))


def test_resnet50_bf16_against_fp16_within_10_percent_of_the_measured() -> None:
    """The fourth lease measured ResNet-50's fp16 pair (channels-last, batch 256): amp-bf16 0.78x amp-fp16's speed
    (cuDNN's bf16 convolutions), predicted from the table 0.81x -- not the 1.00x of datasheet rates."""
    cells = {(s.workload, s.precision, s.batch_size): s for s in _fourth()}
    bf16, fp16 = cells[("resnet50", "amp-bf16", 256)], cells[("resnet50", "amp-fp16", 256)]
    measured_ratio = fp16.measured_ms / bf16.measured_ms
    predicted_ratio = fp16.predicted_ms / bf16.predicted_ms
    assert measured_ratio < 0.85 and abs(predicted_ratio / measured_ratio - 1) <= 0.10


@pytest.mark.xfail(strict=True, reason="+32 %: 67 ms measured, 89 predicted -- 16.8 ms a micro-batch against the plain "
                                       "step's 24.6-30.0 ms on that host (two runs); +39 % while autograd's adds into "
                                       "held gradients were priced as ops")
def test_an_accumulated_step_within_25_percent() -> None:
    cells = {(s.precision, s.grad_accum): s for s in _fourth()}
    s = cells[("amp-bf16", 4)]
    assert abs(s.error) <= 0.25, f"{s.error:+.0%}"


def test_a_reference_is_grouped_where_its_model_has_grouped_convolutions() -> None:
    """The grouped networks' errors make their own band (error_bands.json ``grouped_steps``): a reference says it is
    one exactly where its model has a convolution of several groups."""
    import torch

    for ref in REFERENCES:
        with torch.device("meta"):
            model = ref.build().model
        has = any(isinstance(m, torch.nn.Conv2d) and m.groups > 1 for m in model.modules())
        assert has == ref.grouped, ref.name
