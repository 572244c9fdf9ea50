"""Convergence: its length, its seeds, and the evaluation after each."""

from __future__ import annotations

import pytest


def test_the_workload_s_own_length_and_a_tiny_run_in_seconds() -> None:
    """converge_steps None trains the workload's epochs over its split (hand count); a tiny run's convergence
    (the preset's 30 steps x 2 seeds) takes seconds and the row says what ran."""
    import math
    import time

    from ampbench.bench import RunConfig, run
    from ampbench.measure.converge import workload_length
    from ampbench.store import Store
    from ampbench.workloads import create_workload

    wl = create_workload("tabular-mlp", "tiny", seed=0)
    n = len(wl.train_data)
    full = n // 5 if n > 5 else 1
    assert workload_length(wl, 5) == wl.epochs * full
    assert workload_length(wl, n + 1) == wl.epochs * 1
    assert workload_length(wl, 16) == wl.epochs * (n // 16 if n > 16 else math.ceil(n / 16))

    config = RunConfig.from_strings(device="cpu", workloads="tabular-mlp", preset="tiny", precisions="fp32",
                                    measure="converge", isolate=False)
    t0 = time.perf_counter()
    _, rows = run(config, Store(":memory:"))
    assert time.perf_counter() - t0 < 60
    conv = rows[0]["converge"]
    assert conv["steps"] == 30 and conv["seeds"] == [0, 1] and len(conv["losses"]) == 2
    assert all(len(c) == 30 for c in conv["losses"])


def test_the_test_split_is_evaluated_at_the_training_batch() -> None:
    """Not at 256: a language model's logits at 256 sequences (hf:gpt2, vocabulary 50,257, 1,024 tokens: 53 GB in
    fp32) where its training at batch 8 fitted. The model records the largest batch its eval-mode forward saw; the
    test loss is the whole split's, by an independent forward of it."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    from ampbench.data.tensors import TensorData
    from ampbench.measure.converge import train_seed
    from ampbench.workloads.base import Workload, sgd

    class Seen(nn.Linear):
        largest = 0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if not self.training:
                Seen.largest = max(Seen.largest, x.shape[0])
            return super().forward(x)

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(300, 6, generator=g), torch.randint(0, 3, (300,), generator=g)
    torch.manual_seed(0)
    wl = Workload("seen", Seen(6, 3), TensorData((x[:200],), y[:200]), TensorData((x[200:],), y[200:]),
                  loss_fn=F.cross_entropy, make_optimizer=sgd(0.1, momentum=0.0), batch_size=8)
    out = train_seed(wl, "fp32", torch.device("cpu"), 5, 8, seed=0)
    assert Seen.largest == 8
    with torch.no_grad():
        whole = F.cross_entropy(wl.model.eval()(x[200:]), y[200:])
        # (the mean of 13 batch means: 12 of 8 and one of 4 -- the split's mean up to the last batch's weight)
        means = [F.cross_entropy(wl.model(x[200 + i:208 + i]), y[200 + i:208 + i]) for i in range(0, 100, 8)]
    assert out["test_loss"] == pytest.approx(float(torch.stack(means).mean()), rel=1e-5)
    assert abs(out["test_loss"] - float(whole)) < 0.05
