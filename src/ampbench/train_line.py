"""The line ``ampbench train`` ends with, whatever the framework trained: one way to say the metrics (accuracy-like
ones as percentages), the loss, the speed and the steps, and the ``*_accuracy`` keys a result carries. Torch-free: a
Keras process says it too."""

from __future__ import annotations

from typing import Any

FRACTIONS = ("accuracy", "exact_match", "pixel_accuracy")
"""Metrics that are a share of samples (or pixels) right: said as percentages."""


def metric_text(name: str, value: float) -> str:
    return f"{value:.2%}" if name in FRACTIONS else f"{value:.4g}"


def accuracy_keys(metric_name: str | None, train_metric: float | None, test_metric: float | None) -> dict[str, Any]:
    """``train_accuracy`` / ``test_accuracy`` where the metric is accuracy (what scripts read), else nothing."""
    return {"train_accuracy": train_metric, "test_accuracy": test_metric} if metric_name == "accuracy" else {}


def train_line(head: str, metric_name: str | None, train_metric: float | None, test_metric: float | None,
               final_loss: float, samples_per_s: float, steps: int, skipped_steps: int, speed_note: str = "",
               tail: str = "") -> str:
    """``<head>: train accuracy 97.10%  test accuracy 96.80%  final loss 0.1021  12,345 samples/s  600 steps trained,
    skipped steps 0<tail>``."""
    m = metric_name or "metric"
    parts = [f"{split} {m} {metric_text(m, v)}" for split, v in (("train", train_metric), ("test", test_metric))
             if v is not None]
    speed = f"{samples_per_s:,.0f} samples/s" + (f" ({speed_note})" if speed_note else "")
    trained = f"{steps:,} step" + ("" if steps == 1 else "s")
    return f"{head}: " + "  ".join([*parts, f"final loss {final_loss:.4f}", speed,
                                    f"{trained} trained, skipped steps {skipped_steps}{tail}"])
