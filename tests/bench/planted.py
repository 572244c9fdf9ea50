"""User models with planted failures, loaded by the harness tests as --model tests/bench/planted.py:NAME."""

from __future__ import annotations

import os
import signal

import torch
from torch import nn


class _Base(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3 * 4 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.flatten(1))  # (B, 5)


class _NaN(_Base):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) * float("nan")


class _OOM(_Base):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB (planted)")


class _Hog(_Base):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.is_cuda:  # a real CUDA out-of-memory: ask for twice the card
            torch.empty(2 * torch.cuda.get_device_properties(x.device).total_memory, dtype=torch.uint8, device=x.device)
        return super().forward(x)


class _Crash(_Base):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        os.kill(os.getpid(), signal.SIGSEGV)
        return super().forward(x)


def ok() -> nn.Module:
    return _Base()


def nan() -> nn.Module:
    return _NaN()


def oom() -> nn.Module:
    return _OOM()


def gpu_hog() -> nn.Module:
    return _Hog()


def crash() -> nn.Module:
    return _Crash()
