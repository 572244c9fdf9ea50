"""A --model whose weights torchao quantizes (4096 elements each: a multiple of every block size) and nothing else:
two shapes at most, so a compiled torchao update compiles once per state (tests/bench/test_optimizer_state_run.py).
--input-shape 64 --num-classes 64."""

from torch import nn


def build() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 64, bias=False), nn.ReLU(), nn.Linear(64, 64, bias=False))
