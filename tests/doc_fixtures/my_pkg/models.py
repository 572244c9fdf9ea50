"""docs/your-model.md's my_pkg.models:build: an importable module whose factory returns a ready ampbench.Workload
(model, data, loss and metric of its own: no data options needed)."""

import torch
from torch import nn

from ampbench import Workload
from ampbench.data import TensorData


def build(preset: str = "small") -> Workload:
    g = torch.Generator().manual_seed(0)
    n = {"tiny": 64, "small": 512, "paper": 4096}[preset]
    x = torch.randn(n, 12, generator=g)
    y = (x[:, 0] > 0).long()
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 2))
    return Workload("my-pkg-mlp", model, TensorData((x[: n * 4 // 5],), y[: n * 4 // 5]),
                    TensorData((x[n * 4 // 5 :],), y[n * 4 // 5 :]), batch_size=16, preset=preset)
