"""Inference latency of a model in one precision mode: p50/p90/p99 per batch size.

The modes are the training recipes' conversions: ``fp32``; ``pure-fp16`` / ``pure-bf16`` (the
whole model in 16 bits: ``model.half()``); ``master-fp16`` (16-bit model with normalisation layers
kept in fp32: the "BN kept fp32" inference mode); ``amp-*`` (fp32 weights under autocast).
"""

from __future__ import annotations

import torch

from ampbench import progress
from ampbench.measure.stats import latency_summary
from ampbench.measure.step import TrainStep, device_batches
from ampbench.measure.timing import time_once, time_steps


@torch.inference_mode()
def inference_latency(step: TrainStep, batch_sizes: list[int], iters: int, warmup: int = 3) -> dict[str, dict[str, float]]:
    """{str(batch): {p50_ms, p90_ms, p99_ms, samples_per_s, first_ms}} for forward passes in eval mode."""
    wl, model, mp, device = step.workload, step.model, step.mp, step.device
    was_training = model.training
    model.eval()
    out: dict[str, dict[str, float]] = {}
    try:
        for bs in batch_sizes:
            (inputs, _), = device_batches(wl.train_data, bs, 1, device)

            def forward(inputs: tuple[torch.Tensor, ...] = inputs) -> None:
                with mp.autocast():
                    wl.call_model(model, inputs)

            progress.report("inference", detail=f"batch {bs}")
            first = time_once(forward, device)
            for _ in range(max(0, warmup - 1)):
                forward()
            t = time_steps(forward, iters, device)
            out[str(bs)] = latency_summary(t, bs, first)
    finally:
        model.train(was_training)
    return out
