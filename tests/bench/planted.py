"""User models with planted failures, loaded by the harness tests as --model tests/bench/planted.py:NAME."""

from __future__ import annotations

import os
import signal
from pathlib import Path

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


def bf16() -> nn.Module:  # built in half: its forward failed on the fp32 batch, said as "check --input-shape"
    return _Base().to(torch.bfloat16)


def frozen() -> nn.Module:  # nothing to train: every step failed at autograd, after the run had started
    return _Base().requires_grad_(False)


class _SparseBag(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(100, 8, sparse=True)
        self.head = nn.Linear(8, 2)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.bag(ids))


def sparse_bag() -> nn.Module:  # sparse gradients, which the default optimizer (Adam) cannot step
    return _SparseBag()


def nan() -> nn.Module:
    return _NaN()


def oom() -> nn.Module:
    return _OOM()


def gpu_hog() -> nn.Module:
    return _Hog()


def crash() -> nn.Module:
    return _Crash()


_TAG = {"calls": "0"}


class _Recompiling(_Base):
    """Reads a string that changes at every call: dynamo guards on its value (strings never become
    dynamic) and recompiles at each step, until its recompile limit."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = super().forward(x)
        return h * 2.0 if _TAG["calls"] == "never" else h


def _count_call(module: nn.Module, args: object) -> None:  # outside the traced forward
    _TAG["calls"] = str(int(_TAG["calls"]) + 1)


class _Breaking(_Base):
    """A data-dependent Python branch (.item()): a graph break at every call."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = super().forward(x)
        if h.sum().item() > 1e30:
            h = h * 0.5
        return h


def recompiling() -> nn.Module:
    m = _Recompiling()
    m.fc.register_forward_pre_hook(_count_call)
    return m


def breaking() -> nn.Module:
    return _Breaking()


BUILT_IN = "AMPBENCH_TEST_BUILT_IN"


def recorded() -> nn.Module:
    """:func:`ok`, with the process that built it appended to the file ``$AMPBENCH_TEST_BUILT_IN`` names: its pid, its
    parent's and its command line (a fresh interpreter's ``ampbench.launch.child``, or a fork server's)."""
    cmdline = Path("/proc/self/cmdline").read_text().replace("\0", " ").strip()
    with open(os.environ[BUILT_IN], "a") as f:
        f.write(f"{os.getpid()} {os.getppid()} {cmdline}\n")
    return _Base()
