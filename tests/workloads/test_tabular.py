"""tabular-mlp on a CSV whose target is in its own units (a shop's sales: thousands)."""

from __future__ import annotations

import csv
import math
import random
import statistics
from pathlib import Path

import torch
from torch import nn

from ampbench.measure.converge import evaluate, train_seed
from ampbench.precision import MixedPrecision
from ampbench.workloads import create_workload


def _sales_csv(path: Path, n: int = 1200) -> list[float]:
    """A Rossmann-like table (a store, a promotion, customers) whose target, Sales, is in the thousands."""
    rng = random.Random(0)
    sales = []
    with open(path / "sales.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["store", "promo", "customers", "Sales"])
        for _ in range(n):
            store, promo, customers = rng.choice("abcd"), rng.randint(0, 1), rng.randint(100, 900)
            y = 3000 + 1000 * promo + 3 * customers + 500 * "abcd".index(store) + rng.gauss(0, 100)
            sales.append(round(y, 2))
            w.writerow([store, promo, customers, sales[-1]])
    return sales


class _Constant(nn.Module):
    def forward(self, cats: torch.Tensor, cont: torch.Tensor) -> torch.Tensor:
        return torch.zeros(len(cats), 1)


def test_a_csv_target_trains_standardised_and_its_rmse_reads_in_its_own_units(tmp_path: Path) -> None:
    """Trained raw, Sales in the thousands left the MLP at an RMSE near the target's mean in every mode after 30 steps
    (2,871 on a target of std ~1,000), and amp-fp16 skipped 13 of 30 steps for gradients past fp16's range."""
    sales = _sales_csv(tmp_path)
    wl = create_workload("tabular-mlp", "tiny", data_dir=tmp_path, target="Sales")
    n_test = len(wl.test_data)
    fit, held = sales[:-n_test], sales[-n_test:]
    y = wl.train_data.targets.squeeze(1)
    assert abs(float(y.mean())) < 1e-4 and abs(float(y.std()) - 1) < 1e-4  # (the training rows: standardised)
    # oracle: a model that says the training mean (0 standardised) misses the test rows by their RMSE around that mean,
    # computed here from the CSV's own numbers
    mean = statistics.fmean(fit)
    expected = math.sqrt(statistics.fmean((v - mean) ** 2 for v in held))
    wl.model = _Constant()
    _, rmse = evaluate(wl, wl.test_data, MixedPrecision("fp32", device=torch.device("cpu")), 64)
    assert rmse is not None and math.isclose(rmse, expected, rel_tol=1e-4), (rmse, expected)
    # and it learns: below the mean predictor after 60 steps, amp-fp16 skipping no more than its scale's first search
    # (2-3 steps; 13 of 30 raw)
    for precision in ("fp32", "amp-fp16"):
        wl = create_workload("tabular-mlp", "tiny", data_dir=tmp_path, target="Sales")
        r = train_seed(wl, precision, torch.device("cpu"), 60, 64, seed=0)
        assert not r["diverged"] and r["skipped_steps"] <= 3 and r["metric"] < 0.7 * expected, (precision, r["metric"])
