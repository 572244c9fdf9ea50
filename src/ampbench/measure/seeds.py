"""What a convergence measurement stores, from each seed's run (no PyTorch: every framework's cells share it).

Per seed: the loss curve, the loss-scale trajectory, skipped steps, the final loss (mean of the last 10% of steps,
less noisy than the last one), the test loss and metric, whether it diverged and why. Curves are averaged down to
at most :data:`MAX_CURVE_POINTS` points. The verdict against fp32 is derived when rows are read
(``ampbench.store.derive``).
"""

from __future__ import annotations

import math
from typing import Any

MAX_CURVE_POINTS = 200


def eval_batch(batch_size: int) -> int:
    """The batch a no-grad evaluation of a test (or train) split runs at: the training batch, every framework's. A
    forward without autograd at the batch a training step fitted holds less than that step. It was max(batch, 256):
    a language model's logits at 256 sequences -- hf:gpt2 at 64 tokens, vocabulary 50,257: 3.3 GB a batch in fp32,
    at 1,024 tokens 53 GB -- where training at batch 8 held a fraction of that (a CPU cell's evaluation paged for
    seconds; a GPU's would run out of memory after its training had fitted)."""
    return batch_size


def eval_batches(samples: int | None, batch_size: int) -> int:
    """The batches one evaluation of a split of ``samples`` takes at :func:`eval_batch` (0 without a split)."""
    return -(-samples // eval_batch(batch_size)) if samples else 0


def _downsample(values: list[float], points: int = MAX_CURVE_POINTS) -> tuple[list[int], list[float]]:
    """(steps, values): windows averaged so a curve keeps at most ``points`` points (1-based step = window end)."""
    if len(values) <= points:
        return list(range(1, len(values) + 1)), values
    w = math.ceil(len(values) / points)
    steps, out = [], []
    for i in range(0, len(values), w):
        chunk = values[i:i + w]
        steps.append(i + len(chunk))
        out.append(sum(chunk) / len(chunk))
    return steps, out


def final_loss(curve: list[float]) -> float:
    """The mean loss of the last 10% of steps (nan for no steps)."""
    tail = curve[-max(1, len(curve) // 10):]
    return sum(tail) / len(tail) if tail else float("nan")


def first_nonfinite(curve: list[float]) -> str:
    """'loss became non-finite at step N' for the first non-finite loss of ``curve``."""
    return f"loss became non-finite at step {next(i for i, v in enumerate(curve) if not math.isfinite(v)) + 1}"


def summarize(runs: list[dict[str, Any]], steps_ran: int | None, base_seed: int, seeds: int) -> dict[str, Any]:
    """The row's ``converge`` value from each seed's run (``curve``, ``scales``, ``final_loss``, ``test_loss``,
    ``metric``, ``skipped_steps``, ``diverged``, ``reason``, ``fp8_layers``)."""
    curve_steps, _ = _downsample(runs[0]["curve"]) if runs else ([], [])
    return {
        "steps": steps_ran,
        "seeds": list(range(base_seed, base_seed + seeds)),
        "curve_steps": curve_steps,
        "losses": [_downsample(r["curve"])[1] for r in runs],
        "loss_scales": [_downsample(r["scales"])[1] for r in runs],
        "final_losses": [r["final_loss"] for r in runs],
        "test_losses": [r["test_loss"] for r in runs],
        "metrics": [r["metric"] for r in runs],
        "skipped_steps": [r["skipped_steps"] for r in runs],
        "diverged": [r["diverged"] for r in runs],
        "reasons": [r["reason"] for r in runs],
        "fp8_layers": runs[0].get("fp8_layers") if runs else None,  # (the same model each seed: the same layers)
    }
