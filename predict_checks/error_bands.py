"""The error bands ``ampbench predict`` states (``src/ampbench/predict/error_bands.json``), computed from the
references' errors: kernels per GPU generation and op class, whole steps, the published AMP/TF32 results, our launch-bound
steps on lent GPUs (the host's band), the published compile gains. Written by ``benchmarks/predict_references.py
--write-bands``; read by :func:`ampbench.predict.bands.band`."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ampbench.measure.gpus import Gpu
from ampbench.predict import bands
from ampbench.predict.bands import BANDS_FILE, generation, math_group
from predict_checks import lambda_references


def compute(kernel_errors: list[Any], step_errors: list[Any], amp_errors: list[float],
            specs: dict[str, Gpu], fit_gpus: tuple[str, ...], measured: Sequence[Any] = (),
            compiled: Sequence[Any] = (), published: Sequence[tuple[str, str, float]] = (),
            grouped: Sequence[tuple[str, str, float]] = ()) -> dict[str, Any]:
    """The table from the references' errors (``fit.Errors`` per GPU and class, ``neusight.StepError``s, the
    published AMP/TF32 samples/s errors, our workloads' steps measured on lent GPUs -- ``measured.MeasuredStep``s, of
    which the launch-bound ones give the host's band -- and the published compile gains,
    ``compile_references.CompileRow``s, of which the checked ones count -- and ``published``, every whole step measured
    outside the fit as ``(gpu, precision, samples/s error)`` (:func:`published_steps`), grouped per generation into
    FP32/TF32 and half precision): the checked GPUs' errors where a generation has any, the fitting GPUs' (in-sample:
    optimistic) where it has no other. ``grouped``: the published steps of networks with grouped or depthwise
    convolutions (DeepLearningExamples' ResNeXts and EfficientNets), the same triples, kept apart per generation and
    kind of math (and pooled over the generations, ``all``): a row of such a network states them, every other row does
    not (their 18-77 % misses said nothing of a transformer's prediction)."""
    by_gen: dict[str, dict[str, list[Any]]] = {}
    for e in kernel_errors:
        by_gen.setdefault(generation(specs[e.gpu].capability), {}).setdefault(e.op_class, []).append(e)
    kernels, gpus_of, fitted_gens = {}, {}, []
    for gen, classes in by_gen.items():
        checked = {c: [e for e in es if e.gpu not in fit_gpus] for c, es in classes.items()}
        use_fitted = not any(checked.values())
        chosen = classes if use_fitted else {c: es for c, es in checked.items() if es}
        kernels[gen] = {c: {"median": round(_weighted(es, "median"), 4), "p90": round(_weighted(es, "p90"), 4),
                            "n": sum(e.n for e in es)} for c, es in chosen.items()}
        gpus_of[gen] = sorted({e.gpu for es in chosen.values() for e in es})
        if use_fitted:
            fitted_gens.append(gen)
    steps: dict[str, Any] = {}
    for e in step_errors:
        steps.setdefault(generation(specs[e.step.gpu].capability), []).append(abs(e.error))
    step_table = {gen: {"median": round(statistics.median(v), 4), "worst": round(max(v), 4), "n": len(v)}
                  for gen, v in steps.items()}
    amp = {"median": round(statistics.median(amp_errors), 4), "worst": round(max(amp_errors), 4),
           "n": len(amp_errors)} if amp_errors else {}
    host = sorted(abs(m.error) for m in measured if m.bound == "launch")
    launch = {"median": round(statistics.median(host), 4), "worst": round(host[-1], 4), "n": len(host),
              "gpus": ", ".join(sorted({m.gpu for m in measured if m.bound == "launch"}))} if host else {}
    gains = sorted(abs(r.gain_error) for r in compiled if r.checked)
    compiled_table = {"median": round(statistics.median(gains), 4), "worst": round(gains[-1], 4), "n": len(gains),
                      "source": "Hugging Face's torch.compile inference guide"} if gains else {}
    by_group: dict[str, dict[str, list[float]]] = {}
    for gpu, precision, error in published:
        by_group.setdefault(generation(specs[gpu].capability), {}).setdefault(math_group(precision), []).append(abs(error))
    published_table = {gen: {group: {"median": round(statistics.median(v), 4), "worst": round(max(v), 4), "n": len(v)}
                             for group, v in groups.items()} for gen, groups in by_group.items()}
    grouped_by: dict[str, dict[str, list[float]]] = {}
    for gpu, precision, error in grouped:
        for gen in (generation(specs[gpu].capability), "all"):
            grouped_by.setdefault(gen, {}).setdefault(math_group(precision), []).append(abs(error))
    grouped_table = {gen: {group: {"median": round(statistics.median(v), 4), "worst": round(max(v), 4), "n": len(v)}
                           for group, v in groups.items()} for gen, groups in grouped_by.items()}
    return {"kernels": kernels, "kernels_gpus": gpus_of, "fitted_gens": fitted_gens, "steps": step_table, "amp": amp,
            "launch": launch, "compiled": compiled_table, "published_steps": published_table,
            "published_steps_source": STEPS_SOURCE if published else "", "grouped_steps": grouped_table,
            "grouped_steps_source": GROUPED_SOURCE if grouped else "",
            "written_by": "benchmarks/predict_references.py --write-bands"}


STEPS_SOURCE = "Lambda's ResNet-50 on 12 GPUs, DeepLearningExamples, our lent H200's GPU-set steps"
"""What the published-steps floor of the bands rests on, as a row's basis names it."""
GROUPED_SOURCE = "DeepLearningExamples' ResNeXt101-32x4d, SE-ResNeXt101-32x4d, EfficientNet-B0 and -B4"
"""What the grouped networks' floor rests on, as the basis of a row of such a network names it."""


def published_steps(dle: Sequence[tuple[str, str, float]], lent: Sequence[Any]) -> list[tuple[str, str, float]]:
    """Every whole step of a known GPU and precision measured outside our fitting, as ``(gpu, precision, samples/s
    error)``: Lambda's ResNet-50 on twelve GPUs, DeepLearningExamples' published results (``dle``, the same triples),
    and our workloads' steps on a lent GPU where the GPU sets the step (``measured.MeasuredStep``s; a launch-bound one
    tells the host's error, which has its own band)."""
    own = [(m.gpu, m.precision, m.measured_ms / m.predicted_ms - 1) for m in lent if m.bound != "launch"]
    return [*lambda_references.errors(), *dle, *own]


def _weighted(errors: list[Any], key: str) -> float:
    total = sum(e.n for e in errors)
    return sum(getattr(e, key) * e.n for e in errors) / total


def save(table: dict[str, Any], path: Path = BANDS_FILE) -> None:
    path.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    bands.reload()
