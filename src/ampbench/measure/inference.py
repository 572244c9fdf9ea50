"""Inference latency of a model in one precision mode: p50/p90/p99 per batch size.

The modes are the training recipes' conversions: ``fp32``; ``pure-fp16`` / ``pure-bf16`` (the
whole model in 16 bits: ``model.half()``); ``master-fp16`` (16-bit model with normalisation layers
kept in fp32: the "BN kept fp32" inference mode); ``amp-*`` (fp32 weights under autocast).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ampbench.measure.stats import latencies
from ampbench.measure.step import TrainStep, device_batches
from ampbench.measure.timing import time_once, time_steps


@torch.inference_mode()
def inference_latency(step: TrainStep, batch_sizes: list[int], iters: int, warmup: int = 3) -> dict[str, dict[str, float]]:
    """{str(batch): {p50_ms, p90_ms, p99_ms, samples_per_s, first_ms}} for forward passes in eval mode."""
    wl, model, mp, device = step.workload, step.model, step.mp, step.device

    def forward_at(bs: int) -> Callable[[], object]:
        (inputs, _), = device_batches(wl.train_data, bs, 1, device)

        def forward() -> None:
            with mp.autocast():
                wl.call_model(model, inputs)
        return forward

    was_training = model.training
    model.eval()
    try:
        return latencies(forward_at, batch_sizes, iters, warmup, lambda f: time_once(f, device),
                         lambda f, n: time_steps(f, n, device))
    finally:
        model.train(was_training)
