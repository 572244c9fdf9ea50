"""One train summary line for every framework: accuracy-like metrics as percentages (accuracy, exact match, pixel
accuracy), the rest to 4 significant digits; the ``*_accuracy`` keys only for accuracy."""

from __future__ import annotations

from ampbench.train_line import accuracy_keys, metric_text, train_line


def test_accuracy_like_metrics_are_percentages_and_the_rest_four_digits() -> None:
    assert [metric_text(m, 0.9712) for m in ("accuracy", "exact_match", "pixel_accuracy")] == ["97.12%"] * 3
    assert metric_text("perplexity", 12.3456) == "12.35" and metric_text("rmse", 0.001234567) == "0.001235"


def test_the_line_says_metrics_loss_speed_and_steps() -> None:
    line = train_line("amp-bf16 on cpu", "accuracy", 0.971, None, 0.10214, 12345.6, 1200, 3,
                      speed_note="first step 2.0 s left out", tail=", loss scale 65536")
    assert line == ("amp-bf16 on cpu: train accuracy 97.10%  final loss 0.1021  12,346 samples/s (first step 2.0 s left "
                    "out)  1,200 steps trained, skipped steps 3, loss scale 65536")
    assert train_line("fp32 on cpu", None, None, None, 1.0, 1.0, 1, 0).startswith("fp32 on cpu: final loss 1.0000")
    assert "1 step trained" in train_line("fp32 on cpu", "rmse", 0.5, 0.25, 1.0, 1.0, 1, 0)


def test_only_accuracy_gets_the_accuracy_keys() -> None:
    assert accuracy_keys("accuracy", 0.9, 0.8) == {"train_accuracy": 0.9, "test_accuracy": 0.8}
    assert accuracy_keys("perplexity", 10.0, 12.0) == {}
